package e2e_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	harness "hubu.dev/hubu/e2e/stack"
)

// The identity rules that protect against a harness's ids that cannot tell calls apart hold
// through the real router over stdio and over streamable HTTP, and nothing is charged for a
// call they refuse: a call id shorter than 16 characters is identity_invalid; the same call id
// from another conversation (Codex's threadId) is identity_conflict, never a replay of the
// first; in its own conversation it replays as always.
func TestSuiteWeakAndCollidingCallIDs(t *testing.T) {
	t.Parallel()
	su := newSuite(t)
	stdio, web := su.router(), su.httpRouter()
	in := func(callID, thread string) map[string]any {
		return map[string]any{"callId": callID, "threadId": thread, "openai/session": "sess-e2e"}
	}
	for name, cs := range map[string]*mcp.ClientSession{"stdio": stdio, "http": web} {
		r := su.mustCall(cs, "generate_image", foxArgs, codexMeta("call_short_1"))
		msg, _ := r["error"].(map[string]any)["message"].(string)
		if r.code() != "identity_invalid" || !strings.Contains(msg, "shorter than 16 characters") {
			t.Fatalf("%s: a 12-character call id: %v", name, r)
		}
	}

	const id = "call_e2e_conversation_0123456"
	first := su.mustSucceed(stdio, foxArgs, in(id, "thread-e2e-first-3c7a"), "first")
	charges := su.charges().Count
	authorizations := su.authorizations()
	for name, cs := range map[string]*mcp.ClientSession{"stdio": stdio, "http": web} {
		if r := su.mustCall(cs, "generate_image", foxArgs, in(id, "thread-e2e-other-9b21")); r.code() != "identity_conflict" || r.handle() != "" {
			t.Fatalf("%s: the same call id from another conversation: %v", name, r)
		}
		if r := su.mustCall(cs, "generate_image", foxArgs, in(id, "thread-e2e-first-3c7a")); r["replayed"] != true || r.handle() != first.handle() {
			t.Fatalf("%s: the redelivery in its own conversation: %v", name, r)
		}
	}
	if n := su.charges().Count; n != charges {
		t.Fatalf("%d charges after refused calls, was %d", n, charges)
	}
	if n := su.authorizations(); n != authorizations {
		t.Fatalf("Hubu was asked %d times, was %d: a refused call reached it", n, authorizations)
	}
	// A new call in the other conversation is charged on its own.
	su.mustSucceed(web, foxArgs, in("call_e2e_conversation_7654321", "thread-e2e-other-9b21"), "a new call in the other conversation")
	su.settleAndReconcile(2)
}

// httpRouter connects to the stack's router over streamable HTTP with its bearer token.
func (su *suite) httpRouter() *mcp.ClientSession {
	su.t.Helper()
	hc := &http.Client{Transport: harness.Bearer(su.s.Credentials.RouterMCPToken)}
	cs := must(mcp.NewClient(&mcp.Implementation{Name: "e2e-http"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: su.s.Router.URL() + "/mcp", HTTPClient: hc, DisableStandaloneSSE: true}, nil))(su.t)
	su.t.Cleanup(func() { cs.Close() })
	return cs
}
