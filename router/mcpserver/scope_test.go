package mcpserver_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"hubu.dev/hubu/kit/waitfor"
	"time"
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
	first := toolResult(t, e.call(t, "generate_image", fox, codexIn(id, "thread-one-5f2c8a")))
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

	again := toolResult(t, e.call(t, "generate_image", fox, codexIn(id, "thread-one-5f2c8a")))
	if !again.Replayed || again.PublicHandle != first.PublicHandle {
		t.Fatalf("the redelivery in the call's own conversation: %+v", again)
	}
}

// Concurrent deliveries of one call id from two conversations never share an answer: while
// the first delivery is at Hubu, deliveries from both conversations wait for it; those from its
// own conversation share its answer, the others are refused.
func TestConcurrentDeliveriesFromTwoConversations(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	const id = "call_scope_concurrent_0123456"
	threads := []string{"thread-a-1111", "thread-b-2222", "thread-a-1111", "thread-b-2222"}
	e.mu.Lock()
	e.secrets = append(e.secrets, threads...)
	e.mu.Unlock()
	release := e.backend.Block()
	defer release()
	results := make([]*mcp.CallToolResult, len(threads))
	errs := make([]error, len(threads))
	var wg sync.WaitGroup
	deliver := func(i int) {
		wg.Add(1)
		go func() { // no t.Fatal off the test's goroutine: results are checked below
			defer wg.Done()
			results[i], errs[i] = e.session.CallTool(context.Background(), &mcp.CallToolParams{
				Name: "generate_image", Arguments: json.RawMessage(fox), Meta: codexIn(id, threads[i])})
		}()
	}
	deliver(0) // thread a reaches Hubu and is held there
	waitfor.True(t, 10*time.Second, "the first delivery at Hubu", func() bool { return e.backend.Calls("authorize") == 1 })
	for i := 1; i < len(threads); i++ {
		deliver(i)
	}
	waitfor.True(t, 10*time.Second, "three deliveries waiting on the first", func() bool { return e.router.Waiters("codex", id) == 3 })
	release()
	wg.Wait()
	for i, th := range threads {
		if errs[i] != nil {
			t.Fatalf("delivery %d: protocol error: %v", i, errs[i])
		}
		o := toolResult(t, results[i])
		code := ""
		if o.Error != nil {
			code = o.Error.Code
		}
		switch {
		case th == threads[0] && (code != "" || o.Status != "succeeded"):
			t.Fatalf("delivery %d, from the first conversation: %+v", i, o)
		case th != threads[0] && (code != "identity_conflict" || o.PublicHandle != ""):
			t.Fatalf("delivery %d, from another conversation, shared or got an answer: %+v", i, o)
		}
	}
	if n := e.backend.Calls("authorize"); n != 1 {
		t.Fatalf("%d authorizations for one call, want 1", n)
	}
}
