package httpserver_test

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"net/http"
	"sync"
	"testing"
	"time"

	"hubu.dev/hubu/proto/decisionsig"
	"hubu.dev/hubu/services/hubu/postgres"
)

// Hubu signs decisions with one key, made by the first replica to ask and shared by all; the
// executor, and only the executor, reads its public half.
func TestDecisionKeysAreForTheExecutor(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)

	keys := make([]ed25519.PrivateKey, 4)
	var wg sync.WaitGroup
	for i := range keys {
		wg.Go(func() {
			k, err := b.Store.DecisionKey(ctx, b.Clock.Now())
			if err != nil {
				t.Error(err)
			}
			keys[i] = k
		})
	}
	wg.Wait()
	for _, k := range keys[1:] {
		if !k.Equal(keys[0]) {
			t.Fatal("replicas starting together got different decision keys")
		}
	}

	resp, err := b.service.ListDecisionKeysWithResponse(ctx)
	if err != nil || resp.JSON200 == nil || len(resp.JSON200.Keys) != 1 {
		t.Fatalf("list decision keys: %v %s", err, resp.Body)
	}
	pub := keys[0].Public().(ed25519.PublicKey)
	got := resp.JSON200.Keys[0]
	if got.Kid != decisionsig.KeyID(pub) || got.PublicKey != base64.RawURLEncoding.EncodeToString(pub) || got.Alg != "Ed25519" {
		t.Fatalf("listed %+v, want the key Hubu signs with", got)
	}

	// A retired key stays listed while what it signed may still be shown, then drops out; the
	// next signer makes a new key.
	if _, err := b.Pool.Exec(ctx, "UPDATE decision_keys SET retired_at = $1", b.Clock.Now()); err != nil {
		t.Fatal(err)
	}
	next, err := b.Store.DecisionKey(ctx, b.Clock.Now())
	if err != nil || next.Equal(keys[0]) {
		t.Fatalf("after the retirement: %v, the same key %v", err, next.Equal(keys[0]))
	}
	listed := func() int {
		t.Helper()
		r, err := b.service.ListDecisionKeysWithResponse(ctx)
		if err != nil || r.JSON200 == nil {
			t.Fatalf("list decision keys: %v", err)
		}
		return len(r.JSON200.Keys)
	}
	if n := listed(); n != 2 {
		t.Fatalf("%d keys listed right after a retirement, want 2", n)
	}
	b.Clock.Advance(postgres.RetiredKeyListed + time.Second)
	if n := listed(); n != 1 {
		t.Fatalf("%d keys listed once the retired key's signatures are all expired, want 1", n)
	}

	agent := b.NewAgent(t, "agent", nil)
	for name, c := range map[string]struct {
		status int
		get    func() (int, error)
	}{
		"no credential": {http.StatusUnauthorized, func() (int, error) {
			r, err := b.anonymous.ListDecisionKeysWithResponse(ctx)
			return r.StatusCode(), err
		}},
		"an agent": {http.StatusForbidden, func() (int, error) {
			r, err := agent.Client.ListDecisionKeysWithResponse(ctx)
			return r.StatusCode(), err
		}},
		"an operator": {http.StatusForbidden, func() (int, error) {
			r, err := b.Operator.ListDecisionKeysWithResponse(ctx)
			return r.StatusCode(), err
		}},
	} {
		if status, err := c.get(); err != nil || status != c.status {
			t.Errorf("%s: %d %v, want %d", name, status, err, c.status)
		}
	}
}
