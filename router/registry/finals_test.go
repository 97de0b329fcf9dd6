package registry

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// A call whose final result this registry recorded is resolved from memory, with the same
// outcomes as from its row: the result replayed for the same request, Conflict for another
// request or tool, ScopeConflict for another conversation. The database is closed before the
// redeliveries, so none of them can have read it.
func TestFinalResultsResolveFromMemory(t *testing.T) {
	t.Parallel()
	onBothBackends(t, testFinalResultsResolveFromMemory)
}

func testFinalResultsResolveFromMemory(t *testing.T, newState func() string) {
	ctx := context.Background()
	r := open(t, newState(), nil)
	c := Call{Platform: "codex", CallID: "call_finalsInMemory0000001", Scope: "scope-a", Tool: "generate_image", RequestHash: "h1"}
	first, out, err := r.Resolve(ctx, c)
	if err != nil || out != New {
		t.Fatalf("first: %v %v", out, err)
	}
	recorded, err := r.Finish(ctx, c, []byte(`{"final":1}`))
	if err != nil || string(recorded.Result) != `{"final":1}` || recorded.OperationKey != first.OperationKey {
		t.Fatalf("finish: %s %v", recorded.Result, err)
	}
	unfinished := Call{Platform: "codex", CallID: "call_finalsNotFinished00001", Tool: "generate_image", RequestHash: "h1"}
	if _, _, err := r.Resolve(ctx, unfinished); err != nil {
		t.Fatal(err)
	}
	closeDatabase(t, r)

	replay, out, err := r.Resolve(ctx, c)
	if err != nil || out != Replay || string(replay.Result) != `{"final":1}` || replay.PublicHandle != first.PublicHandle {
		t.Fatalf("redelivery: %v %s %v", out, replay.Result, err)
	}
	for _, other := range []struct {
		c    Call
		want Resolution
	}{
		{Call{Platform: "codex", CallID: c.CallID, Scope: "scope-a", Tool: "generate_image", RequestHash: "h2"}, Conflict},
		{Call{Platform: "codex", CallID: c.CallID, Scope: "scope-a", Tool: "other_tool", RequestHash: "h1"}, Conflict},
		{Call{Platform: "codex", CallID: c.CallID, Scope: "scope-b", Tool: "generate_image", RequestHash: "h1"}, ScopeConflict},
		{Call{Platform: "codex", CallID: c.CallID, Scope: "", Tool: "generate_image", RequestHash: "h1"}, ScopeConflict},
	} {
		e, out, err := r.Resolve(ctx, other.c)
		if err != nil || out != other.want || e.OperationKey != "" || e.Result != nil {
			t.Errorf("%+v: %v %v, key given %v", other.c, out, err, e.OperationKey != "")
		}
	}
	// A call without a final result is not in memory: it needs the database.
	if _, _, err := r.Resolve(ctx, unfinished); err == nil {
		t.Fatal("an unfinished call was resolved without the database")
	}
}

// A router sharing the registry sees a result another one recorded (it reads the row, then keeps
// it), and Finish keeps and returns the result recorded first.
func TestFinalResultsOfAnotherRouter(t *testing.T) {
	t.Parallel()
	onBothBackends(t, testFinalResultsOfAnotherRouter)
}

func testFinalResultsOfAnotherRouter(t *testing.T, newState func() string) {
	ctx := context.Background()
	state := newState()
	a, b := open(t, state, nil), open(t, state, nil)
	c := Call{Platform: "claude-code", CallID: "toolu_finalsSharedFile00001", Tool: "generate_image", RequestHash: "h"}
	if _, out, err := a.Resolve(ctx, c); err != nil || out != New {
		t.Fatalf("a: %v %v", out, err)
	}
	if _, out, err := b.Resolve(ctx, c); err != nil || out != Continue {
		t.Fatalf("b before the result: %v %v", out, err)
	}
	if _, err := a.Finish(ctx, c, []byte(`{"by":"a"}`)); err != nil {
		t.Fatal(err)
	}
	if e, out, err := b.Resolve(ctx, c); err != nil || out != Replay || string(e.Result) != `{"by":"a"}` {
		t.Fatalf("b after a recorded: %v %s %v", out, e.Result, err)
	}
	recorded, err := b.Finish(ctx, c, []byte(`{"by":"b"}`))
	if err != nil || string(recorded.Result) != `{"by":"a"}` {
		t.Fatalf("b's late finish: %s %v, want a's result kept", recorded.Result, err)
	}
	closeDatabase(t, b)
	if e, out, err := b.Resolve(ctx, c); err != nil || out != Replay || string(e.Result) != `{"by":"a"}` {
		t.Fatalf("b from memory: %v %s %v", out, e.Result, err)
	}
}

// The results kept are bounded by bytes: the least recently used go first, a result larger
// than a quarter of the budget is never kept, and a negative budget keeps none.
func TestFinalResultsBudget(t *testing.T) {
	t.Parallel()
	onBothBackends(t, testFinalResultsBudget)
}

func testFinalResultsBudget(t *testing.T, newState func() string) {
	ctx := context.Background()
	finish := func(r *Registry, id string, size int) Call {
		t.Helper()
		c := Call{Platform: "codex", CallID: id, Tool: "t", RequestHash: "h"}
		if _, _, err := r.Resolve(ctx, c); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Finish(ctx, c, []byte(`"`+strings.Repeat("x", size-2)+`"`)); err != nil {
			t.Fatal(err)
		}
		return c
	}
	inMemory := func(r *Registry, c Call) bool {
		_, out, err := r.Resolve(ctx, c)
		return err == nil && out == Replay
	}

	// Each result counts twice (its bytes and their decoding): 4 results of 100 bytes fill 800.
	r := open(t, newState(), &Options{FinalsBytes: 800})
	calls := make([]Call, 5)
	for i := range 4 {
		calls[i] = finish(r, fmt.Sprintf("call_finalsBudget%010d", i), 100)
	}
	big := finish(r, "call_finalsBudgetTooBig000", 101)    // 202 > 800/4
	if _, _, err := r.Resolve(ctx, calls[0]); err != nil { // calls[0] is now the most recently used
		t.Fatal(err)
	}
	calls[4] = finish(r, "call_finalsBudget0000000004", 100) // evicts calls[1], the least recently used
	closeDatabase(t, r)
	for i, want := range []bool{true, false, true, true, true} {
		if got := inMemory(r, calls[i]); got != want {
			t.Errorf("call %d in memory: %v, want %v", i, got, want)
		}
	}
	if inMemory(r, big) {
		t.Error("a result larger than a quarter of the budget was kept")
	}

	none := open(t, newState(), &Options{FinalsBytes: -1})
	c := finish(none, "call_finalsBudgetNone00000", 10)
	closeDatabase(t, none)
	if inMemory(none, c) {
		t.Error("a negative budget kept a result")
	}
}

// Decoded decodes a result kept in memory once for all its deliveries (Warm does it ahead of
// them), and any other result every time.
func TestDecodedOnce(t *testing.T) {
	t.Parallel()
	onBothBackends(t, testDecodedOnce)
}

func testDecodedOnce(t *testing.T, newState func() string) {
	ctx := context.Background()
	var decodes atomic.Int32
	decode := func(b []byte) (any, error) {
		decodes.Add(1)
		return string(b), nil
	}
	r := open(t, newState(), nil)
	c := Call{Platform: "codex", CallID: "call_finalsDecodedOnce0001", Tool: "t", RequestHash: "h"}
	if _, _, err := r.Resolve(ctx, c); err != nil {
		t.Fatal(err)
	}
	recorded, err := r.Finish(ctx, c, []byte(`{"final":1}`))
	if err != nil {
		t.Fatal(err)
	}
	recorded.Warm(decode)
	if n := decodes.Load(); n != 1 {
		t.Fatalf("%d decodes after Warm, want 1", n)
	}
	for range 3 {
		e, _, err := r.Resolve(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		if v, err := e.Decoded(decode); err != nil || v != `{"final":1}` {
			t.Fatalf("decoded %v %v", v, err)
		}
	}
	if n := decodes.Load(); n != 1 {
		t.Fatalf("%d decodes of a result kept in memory, want 1", n)
	}
	uncached := Entry{Result: []byte(`{}`)}
	uncached.Warm(decode)
	uncached.Decoded(decode)
	uncached.Decoded(decode)
	if n := decodes.Load(); n != 3 {
		t.Fatalf("%d decodes, want 3: an entry the registry does not keep is not warmed, and decoded every time", n)
	}
}

// A row stays in memory for finalsMaxAge at most, far less than the day after which pruning
// may delete it: a call id that comes back once its row is gone must reach the database (and
// be a new call there), not an answer this router happened to keep.
func TestFinalsForgetOldRows(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	f := newFinals(DefaultFinalsBytes)
	f.now = func() time.Time { return now }
	k := callKey{platform: "codex", callID: "call_finalsOld000000000001"}
	f.put(k, seenRow{entry: Entry{Result: []byte(`{"final":1}`)}})
	now = now.Add(finalsMaxAge - time.Second)
	if _, ok := f.get(k); !ok {
		t.Fatal("a row cached just under finalsMaxAge ago was forgotten")
	}
	now = now.Add(time.Second)
	if _, ok := f.get(k); ok {
		t.Fatal("a row cached finalsMaxAge ago was still answered from memory")
	}
	if f.size != 0 || f.lru.Len() != 0 || len(f.byKey) != 0 {
		t.Fatalf("a forgotten row still counts: size %d, %d in the list, %d in the map", f.size, f.lru.Len(), len(f.byKey))
	}
	if finalsMaxAge >= 24*time.Hour {
		t.Fatalf("finalsMaxAge %v is not below the day after which a row may be pruned", finalsMaxAge)
	}
}
