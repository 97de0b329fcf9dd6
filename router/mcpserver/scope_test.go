package mcpserver_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// codexIn is Codex's _meta for a call in a conversation (thread).
func codexIn(callID, thread string) map[string]any {
	return map[string]any{"callId": callID, "threadId": thread, "openai/session": "sess-scope-test"}
}

// The same call id from another conversation is not a redelivery: a model or proxy repeated
// a tool-call id. It is refused with identity_conflict before any backend is reached, and the
// earlier call's answer is never replayed to it; within its own conversation the call
// redelivers as before.
func TestSameCallIDInAnotherConversation(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	const id = "call_scope_0123456789abcdef"
	first := outcome(t, e.call(t, "generate_image", fox, codexIn(id, "thread-one-5f2c8a")))
	if first.Status != "succeeded" {
		t.Fatalf("first: %+v", first)
	}
	before := e.backend.Calls("")

	other := mustError(t, e.call(t, "generate_image", fox, codexIn(id, "thread-two-9d41e7")), "identity_conflict")
	if other.PublicHandle != "" || other.Replayed {
		t.Fatalf("a refused call was given the earlier call's operation: %+v", other)
	}
	// Sent without any thread, it is not the same call either.
	mustError(t, e.call(t, "generate_image", fox, codex(id)), "identity_conflict")
	if n := e.backend.Calls(""); n != before {
		t.Fatalf("a call refused for its conversation reached the backend (%d calls, was %d)", n, before)
	}

	again := outcome(t, e.call(t, "generate_image", fox, codexIn(id, "thread-one-5f2c8a")))
	if !again.Replayed || again.PublicHandle != first.PublicHandle {
		t.Fatalf("the redelivery in the call's own conversation: %+v", again)
	}
}

// Concurrent deliveries of one call id from two conversations never share an answer: the one
// that is not first is refused.
func TestConcurrentDeliveriesFromTwoConversations(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	const id = "call_scope_concurrent_0123456"
	threads := []string{"thread-a-1111", "thread-b-2222", "thread-a-1111", "thread-b-2222"}
	e.mu.Lock()
	e.secrets = append(e.secrets, threads...)
	e.mu.Unlock()
	results := make([]*mcp.CallToolResult, len(threads))
	errs := make([]error, len(threads))
	var wg sync.WaitGroup
	for i, th := range threads {
		wg.Add(1)
		go func() { // no t.Fatal off the test's goroutine: results are checked below
			defer wg.Done()
			results[i], errs[i] = e.session.CallTool(context.Background(), &mcp.CallToolParams{
				Name: "generate_image", Arguments: json.RawMessage(fox), Meta: codexIn(id, th)})
		}()
	}
	wg.Wait()
	codes := make([]string, len(threads))
	handles := make([]string, len(threads))
	for i := range threads {
		if errs[i] != nil {
			t.Fatalf("delivery %d: protocol error: %v", i, errs[i])
		}
		o := outcome(t, results[i])
		if o.Error != nil {
			codes[i] = o.Error.Code
		}
		handles[i] = o.PublicHandle
	}
	winner := ""
	for i, th := range threads {
		if codes[i] == "" {
			if winner != "" && winner != th {
				t.Fatalf("both conversations were answered for one call id: %v %v", codes, handles)
			}
			winner = th
		} else if codes[i] != "identity_conflict" {
			t.Fatalf("delivery %d: %s", i, codes[i])
		}
	}
	for i, th := range threads {
		if th == winner && codes[i] != "" || th != winner && codes[i] != "identity_conflict" {
			t.Fatalf("deliveries from the first conversation must all be answered, the others refused: %v", codes)
		}
	}
	if n := e.backend.Calls("authorize"); n != 1 {
		t.Fatalf("%d authorizations for one call, want 1", n)
	}
}
