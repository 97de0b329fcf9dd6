package gongbuexec_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"hubu.dev/hubu/proto/decisionsig"
	"hubu.dev/hubu/services/hubu"
	"hubu.dev/hubu/services/hubu/gongbuexec"
)

func decision() hubu.Decision {
	return hubu.Decision{
		DecisionID: uuid.New(), PublicHandle: "hubu:public-operation:v1:" + uuid.NewString(), AgentID: uuid.New(),
		Tool: "generate_image", Scope: hubu.Scope{Provider: "bfl", Model: "flux-dev", Size: "1024x1024"},
		Arguments:    json.RawMessage(`{"prompt":"a fox","model":"flux-dev","width":1024,"height":1024}`),
		AmountMicros: 25_000, Currency: "USD",
	}
}

// A hand-off succeeds only when Gongbu answers that it holds the decision; anything else,
// including a failure that may or may not have reached Gongbu, is an error (Hubu re-sends).
func TestHandOffOutcomes(t *testing.T) {
	t.Parallel()
	// A port nothing listens on.
	gone := httptest.NewServer(nil)
	closed := gone.URL
	gone.Close()

	answer := func(h http.HandlerFunc) string {
		ts := httptest.NewServer(h)
		t.Cleanup(ts.Close)
		return ts.URL
	}
	cases := []struct {
		name string
		url  string
		ok   bool
	}{
		{"connection refused", closed, false},
		{"a 502 from a proxy", answer(func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusBadGateway)
		}), false},
		{"accepted", answer(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusAccepted)
			_, _ = w.Write([]byte(`{}`))
		}), true},
		{"a 500", answer(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = w.Write([]byte(`{"code":"internal"}`))
		}), false},
		{"the connection dropped after the request", answer(func(w http.ResponseWriter, _ *http.Request) {
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				conn.Close()
			}
		}), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			x, err := gongbuexec.New(c.url, "token", &http.Client{Timeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			err = x.Execute(context.Background(), decision())
			if (err == nil) != c.ok {
				t.Fatalf("err = %v", err)
			}
		})
	}
}

// With a signer, each hand-off carries Hubu's signature of the decision: it verifies under
// Hubu's key, states the decision as issued, in dispatching, for Gongbu, for a minute.
// A decision too large to sign in a header goes unsigned (Gongbu asks Hubu about it).
func TestHandOffsAreSigned(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var got []string
	header := func(i int) string {
		mu.Lock()
		defer mu.Unlock()
		return got[i]
	}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Get(decisionsig.Header))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		_, _ = w.Write([]byte(`{}`))
	}))
	t.Cleanup(ts.Close)
	pub, key, _ := ed25519.GenerateKey(nil)
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	x, err := gongbuexec.New(ts.URL, "token", &http.Client{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}

	d := decision()
	d.IssuedAt, d.State = now.Add(-time.Second), hubu.StateDispatching
	if err := x.Execute(context.Background(), d); err != nil || header(0) != "" {
		t.Fatalf("without a signer: %v, header %q", err, got)
	}
	x.Signer = &gongbuexec.Signer{Key: key, Now: func() time.Time { return now }}
	if err := x.Execute(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	keys := func(id string) (ed25519.PublicKey, bool) { return pub, id == decisionsig.KeyID(pub) }
	c, err := decisionsig.Verify(header(1), keys, now)
	if err != nil {
		t.Fatalf("the hand-off's signature: %v", err)
	}
	want := decisionsig.Claims{
		DecisionID: d.DecisionID, PublicHandle: d.PublicHandle, AgentID: d.AgentID, Tool: d.Tool,
		Scope:     decisionsig.Scope{Provider: "bfl", Model: "flux-dev", Size: "1024x1024"},
		Arguments: d.Arguments, AmountMicros: d.AmountMicros, Currency: "USD", State: "dispatching",
		IssuedAt: d.IssuedAt, Audience: "gongbu", ExpiresAt: now.Add(gongbuexec.SignatureTTL),
	}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("signed claims\n%+v\nwant\n%+v", c, want)
	}
	if _, err := decisionsig.Verify(header(1), keys, now.Add(gongbuexec.SignatureTTL)); err != decisionsig.ErrExpired {
		t.Fatalf("a minute later: %v, want expired", err)
	}

	huge := decision()
	huge.Arguments = json.RawMessage(`{"prompt":"` + strings.Repeat("a fox ", decisionsig.MaxHeader/6) + `"}`)
	if err := x.Execute(context.Background(), huge); err != nil || header(2) != "" {
		t.Fatalf("a decision too large to sign: %v, header of %d bytes", err, len(header(2)))
	}
}
