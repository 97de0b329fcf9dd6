package registry

import (
	"context"
	"testing"
)

// A call's answer is recorded without waiting for the disk, and nothing else is: the
// connection that recorded it goes back to the pool waiting for the disk again, so the next
// call's row is flushed before any backend hears of the call.
func TestTheAnswerAloneIsUnflushed(t *testing.T) {
	t.Parallel()
	onBothBackends(t, func(t *testing.T, newState func() string) {
		ctx := context.Background()
		r := open(t, newState(), nil)
		first := Call{Platform: "codex", CallID: "call_first", Tool: "generate_image", RequestHash: "h1"}
		if _, out, err := r.Resolve(ctx, first); err != nil || out != New {
			t.Fatalf("resolve: %v %v", out, err)
		}
		if _, err := r.Finish(ctx, first, []byte(`{"final":1}`)); err != nil {
			t.Fatal(err)
		}
		requireFlushing(t, r)
		next := Call{Platform: "codex", CallID: "call_next", Tool: "generate_image", RequestHash: "h2"}
		if _, out, err := r.Resolve(ctx, next); err != nil || out != New {
			t.Fatalf("the next call: %v %v", out, err)
		}
		if e, out, err := r.Resolve(ctx, first); err != nil || out != Replay || string(e.Result) != `{"final":1}` {
			t.Fatalf("the answer: %v %s %v", out, e.Result, err)
		}
	})
}

// requireFlushing fails unless every connection the registry holds commits waiting for the
// disk: SQLite's synchronous=FULL (2), Postgres's synchronous_commit on.
func requireFlushing(t *testing.T, r *Registry) {
	t.Helper()
	ctx := context.Background()
	switch s := r.store.(type) {
	case *sqliteStore:
		// Hold as many connections as the pool opens: the one that recorded the answer is
		// among them.
		for range maxConns {
			c, err := s.db.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			var got int
			if err := c.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&got); err != nil || got != 2 {
				t.Fatalf("a registry file's connection is at synchronous=%d (%v) after recording an answer, want 2 (FULL)", got, err)
			}
		}
	case *postgresStore:
		conns := s.pool.AcquireAllIdle(ctx)
		defer func() {
			for _, c := range conns {
				c.Release()
			}
		}()
		for _, c := range conns {
			var setting string
			if err := c.QueryRow(ctx, "SHOW synchronous_commit").Scan(&setting); err != nil || setting != "on" {
				t.Fatalf("a registry connection's synchronous_commit is %q (%v) after recording an answer, want on", setting, err)
			}
		}
	}
}
