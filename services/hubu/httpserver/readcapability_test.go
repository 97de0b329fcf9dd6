package httpserver_test

import (
	"context"
	"crypto/ed25519"
	"testing"
	"time"

	"hubu.dev/hubu/proto/decisionsig"
	"hubu.dev/hubu/services/hubu/httpserver"
	"hubu.dev/hubu/services/hubu/hubutest"
)

// An agent's authorization, its replay and its resume come with a read capability for that
// operation, bound to the agent's own token, for two minutes; nothing else does.
func TestAuthorizationsCarryAReadCapability(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := hubutest.New(t, &hubutest.Options{SignReads: true})
	key, err := e.Store.DecisionKey(ctx, e.Clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	pub := key.Public().(ed25519.PublicKey)
	keys := func(id string) (ed25519.PublicKey, bool) { return pub, id == decisionsig.KeyID(pub) }
	agent := e.NewAgent(t, "agent", nil)
	call := hubutest.NewCall("flux-dev")

	check := func(what, header, handle string) {
		t.Helper()
		c, err := decisionsig.VerifyRead(header, keys, e.Clock.Now())
		if err != nil {
			t.Fatalf("%s: the read capability: %v", what, err)
		}
		want := decisionsig.ReadClaims{PublicHandle: handle, Credential: decisionsig.CredentialHash(agent.Token),
			Audience: "gongbu", ExpiresAt: e.Clock.Now().Add(httpserver.ReadCapabilityTTL)}
		if !c.ExpiresAt.Equal(want.ExpiresAt) || c.PublicHandle != want.PublicHandle || c.Credential != want.Credential || c.Grant != "" || c.Audience != want.Audience {
			t.Fatalf("%s: capability %+v, want %+v", what, c, want)
		}
	}
	first, err := agent.Client.AuthorizeWithResponse(ctx, call.Request())
	if err != nil || first.JSON201 == nil {
		t.Fatalf("authorize: %v %s", err, first.Body)
	}
	check("a new authorization", first.HTTPResponse.Header.Get(decisionsig.ReadHeader), first.JSON201.PublicHandle)
	e.Clock.Advance(time.Second)
	again, err := agent.Client.AuthorizeWithResponse(ctx, call.Request())
	if err != nil || again.JSON200 == nil {
		t.Fatalf("replay: %v %s", err, again.Body)
	}
	check("a replay", again.HTTPResponse.Header.Get(decisionsig.ReadHeader), first.JSON201.PublicHandle)

	// An operator reading the operation gets none; neither does a refused request.
	read, err := e.Operator.GetOperationWithResponse(ctx, first.JSON201.PublicHandle)
	if err != nil || read.JSON200 == nil || read.HTTPResponse.Header.Get(decisionsig.ReadHeader) != "" {
		t.Fatalf("an operator's read: %v, capability %q", err, read.HTTPResponse.Header.Get(decisionsig.ReadHeader))
	}
	other := call.Request()
	other.Arguments.Prompt = "a paper crane"
	refused, err := agent.Client.AuthorizeWithResponse(ctx, other)
	if err != nil || refused.StatusCode() != 409 || refused.HTTPResponse.Header.Get(decisionsig.ReadHeader) != "" {
		t.Fatalf("a refused authorization: %v %d, capability %q", err, refused.StatusCode(), refused.HTTPResponse.Header.Get(decisionsig.ReadHeader))
	}

	// An operation that waited for a person: its resume comes with one too.
	held := e.NewAgent(t, "held", policy(0, 1_000_000, 10_000_000))
	pending, err := held.Client.AuthorizeWithResponse(ctx, hubutest.NewCall("flux-dev").Request())
	if err != nil || pending.JSON201 == nil || pending.JSON201.State != "pending_approval" {
		t.Fatalf("a spend held for approval: %v %s", err, pending.Body)
	}
	if r, err := e.Operator.ApproveOperationWithResponse(ctx, pending.JSON201.PublicHandle); err != nil || r.StatusCode() != 200 {
		t.Fatalf("approve: %v %v", err, r.StatusCode())
	}
	resumed, err := held.Client.ResumeOperationWithResponse(ctx, pending.JSON201.PublicHandle)
	if err != nil || resumed.JSON200 == nil {
		t.Fatalf("resume: %v %s", err, resumed.Body)
	}
	agent = held
	check("a resume", resumed.HTTPResponse.Header.Get(decisionsig.ReadHeader), pending.JSON201.PublicHandle)

	// A Hubu without the key (no executor) sends none.
	plain := hubutest.New(t, nil)
	a := plain.NewAgent(t, "agent", nil)
	resp, err := a.Client.AuthorizeWithResponse(ctx, hubutest.NewCall("flux-dev").Request())
	if err != nil || resp.JSON201 == nil || resp.HTTPResponse.Header.Get(decisionsig.ReadHeader) != "" {
		t.Fatalf("without a key: %v, capability %q", err, resp.HTTPResponse.Header.Get(decisionsig.ReadHeader))
	}
}
