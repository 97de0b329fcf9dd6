package identity

import (
	"strings"
	"testing"
)

// Codex's threadId becomes the call's scope, as a digest that never contains the id; other
// sources, and Codex calls without a thread, have none. The scope is never identity: it
// refuses nothing here.
func TestScope(t *testing.T) {
	t.Parallel()
	const callID = "call_0123456789abcdefghij"
	scope := func(meta map[string]any) string {
		t.Helper()
		id, err := Normalize(meta, nil)
		if err != nil {
			t.Fatalf("%v: %v", meta, err)
		}
		return id.Scope
	}
	a := scope(map[string]any{"callId": callID, "threadId": "019a7c3e-thread-a"})
	b := scope(map[string]any{"callId": callID, "threadId": "019a7c3e-thread-b"})
	if len(a) != 64 || a == b || strings.Contains(a, "thread") {
		t.Fatalf("scopes of two threads: %q and %q", a, b)
	}
	if again := scope(map[string]any{"callId": callID, "threadId": "019a7c3e-thread-a", "progressToken": 2.0}); again != a {
		t.Fatal("the same thread gave another scope")
	}
	for _, meta := range []map[string]any{
		{"callId": callID},
		{"callId": callID, "threadId": ""},
		{"callId": callID, "threadId": 7.0},
		{"claudecode/toolUseId": "toolu_0123456789abcdefghij", "threadId": "019a7c3e-thread-a"},
	} {
		if s := scope(meta); s != "" {
			t.Errorf("%v: scope %q, want none", meta, s)
		}
	}
}
