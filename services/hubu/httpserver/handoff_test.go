package httpserver_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"hubu.dev/hubu/proto/hubuapi"
)

// failUpdates makes every update of an operation that matches when fail inside Postgres, as a
// lost connection or a full disk would fail it, until the returned func is called.
func failUpdates(t *testing.T, pool *pgxpool.Pool, name, when string) (restore func()) {
	t.Helper()
	ctx := context.Background()
	ddl := fmt.Sprintf(`
		CREATE FUNCTION fail_%[1]s() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN RAISE EXCEPTION 'injected fault: %[1]s'; END $$;
		CREATE TRIGGER fail_%[1]s BEFORE UPDATE ON operations FOR EACH ROW WHEN (%[2]s) EXECUTE FUNCTION fail_%[1]s();`, name, when)
	if _, err := pool.Exec(ctx, ddl); err != nil {
		t.Fatal(err)
	}
	return func() {
		if _, err := pool.Exec(ctx, fmt.Sprintf(`DROP TRIGGER fail_%[1]s ON operations; DROP FUNCTION fail_%[1]s();`, name)); err != nil {
			t.Fatal(err)
		}
	}
}

// A hand-off that fails at any of its three steps (counting the try, the executor, recording
// its acceptance) leaves the operation dispatching, says so in the log, and is re-sent by the
// next recovery pass; the executor sees the same decision every time, and the spend ends up
// executing once the fault is gone. A new decision's first try is counted in the transaction
// that issues it, so counting can fail only for a re-send: here, the redelivery's after a
// first hand-off that the executor failed.
func TestHandOffFailuresAreResent(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name        string
		fault       func(t *testing.T, b *bundle) (restore func())
		redelivered bool // the call is redelivered once, under the fault
		logged      string
		delivered   int // decisions the executor accepted during the failed hand-off
	}{
		{"counting the try fails", func(t *testing.T, b *bundle) func() {
			b.Executor.FailNext(1)
			return failUpdates(t, b.Pool, "count", "NEW.dispatch_attempts <> OLD.dispatch_attempts")
		}, true, "could not count the hand-off; it will be re-sent", 0},
		{"the executor fails", func(t *testing.T, b *bundle) func() {
			b.Executor.FailNext(1)
			return func() {}
		}, false, "hand-off to the executor failed; it will be re-sent", 0},
		{"recording the acceptance fails", func(t *testing.T, b *bundle) func() {
			return failUpdates(t, b.Pool, "accept", "NEW.state = 'executing'")
		}, false, "could not record the hand-off; it will be re-sent", 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			b := setup(t)
			a := b.NewAgent(t, "agent", nil)
			restore := c.fault(t, b)
			call := newCall("flux-dev")
			op := spend(t, a, call, hubuapi.OperationStateDispatching)
			if c.redelivered {
				spend(t, a, call, hubuapi.OperationStateDispatching)
			}
			if !strings.Contains(b.Logs.String(), c.logged) {
				t.Fatalf("the log does not say %q:\n%s", c.logged, b.Logs.String())
			}
			if n := len(b.Executor.Decisions()); n != c.delivered {
				t.Fatalf("the executor accepted %d decisions, want %d", n, c.delivered)
			}
			restore()

			// Not before RetryAfter: a hand-off still in progress elsewhere is not raced.
			if n, err := b.Lifecycle.Recover(ctx); err != nil || n != 0 {
				t.Fatalf("recover before RetryAfter: %d, %v", n, err)
			}
			b.Clock.Advance(11 * time.Second)
			if n, err := b.Lifecycle.Recover(ctx); err != nil || n != 1 {
				t.Fatalf("recover: %d sent, %v; want 1", n, err)
			}
			got, _ := a.Client.GetOperationWithResponse(ctx, op.PublicHandle)
			if got.JSON200 == nil || got.JSON200.State != hubuapi.OperationStateExecuting {
				t.Fatalf("after the re-send: %s", got.Body)
			}
			ds := b.Executor.Decisions()
			if len(ds) != c.delivered+1 {
				t.Fatalf("the executor accepted %d decisions, want %d", len(ds), c.delivered+1)
			}
			for _, d := range ds {
				if d.DecisionID != ds[0].DecisionID {
					t.Fatalf("a re-send carried another decision: %s and %s", d.DecisionID, ds[0].DecisionID)
				}
			}
		})
	}
}

// A recovery pass whose expiry half fails still re-sends what is dispatching, and reports the
// failure; the held spend expires on a later pass.
func TestRecoverHalvesAreIndependent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupWithTTL(t, time.Minute)
	a := b.NewAgent(t, "agent", nil)
	held := spend(t, a, newCall("flux-pro-1.1-ultra"), hubuapi.OperationStatePendingApproval) // above the auto-approve limit
	b.Executor.FailNext(1)
	spend(t, a, newCall("flux-dev"), hubuapi.OperationStateDispatching)

	restore := failUpdates(t, b.Pool, "expire", "NEW.state = 'expired'")
	b.Clock.Advance(2 * time.Minute)
	n, err := b.Lifecycle.Recover(ctx)
	if err == nil || !strings.Contains(err.Error(), "injected fault: expire") {
		t.Fatalf("recover hid the expiry's failure: %v", err)
	}
	if n != 1 {
		t.Fatalf("recover re-sent %d decisions while expiry failed, want 1", n)
	}
	restore()
	if _, err := b.Lifecycle.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	got, _ := a.Client.GetOperationWithResponse(ctx, held.PublicHandle)
	if got.JSON200 == nil || got.JSON200.State != hubuapi.OperationStateExpired || got.JSON200.HeldMicros != 0 {
		t.Fatalf("the held spend after a later pass: %s", got.Body)
	}
}

// A crash between the decision and the hand-off leaves the operation dispatching; recovery
// re-sends the same decision, and a re-delivered call continues it rather than starting anew.
func TestHandoffRecovery(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	a := b.NewAgent(t, "agent", nil)
	b.Executor.FailNext(2)
	c := newCall("flux-dev")
	op := mustOperation(t, authorize(t, a, c))
	if op.State != hubuapi.OperationStateDispatching || op.DecisionId == nil {
		t.Fatalf("with the executor down: %+v", op)
	}
	// The re-delivered call re-sends the same decision (and the executor is still down).
	if r := authorize(t, a, c); r.JSON200 == nil || r.JSON200.State != hubuapi.OperationStateDispatching {
		t.Fatalf("replay while dispatching: %s", r.Body)
	}
	// Recovery waits RetryAfter before re-sending, so it does not race a hand-off in flight.
	if n, err := b.Lifecycle.Recover(ctx); err != nil || n != 0 {
		t.Fatalf("recover too early: %d %v", n, err)
	}
	b.Clock.Advance(11 * time.Second)
	if n, err := b.Lifecycle.Recover(ctx); err != nil || n != 1 {
		t.Fatalf("recover: %d %v", n, err)
	}
	got, _ := a.Client.GetOperationWithResponse(ctx, op.PublicHandle)
	if got.JSON200.State != hubuapi.OperationStateExecuting {
		t.Fatalf("after recovery: %s", got.Body)
	}
	ds := b.Executor.Decisions()
	if len(ds) != 1 || ds[0].DecisionID != *op.DecisionId {
		t.Fatalf("executor decisions: %+v", ds)
	}
	if !strings.Contains(b.Logs.String(), "hand-off to the executor failed") {
		t.Fatalf("the failed hand-off was not logged: %s", b.Logs.String())
	}
	b.Clock.Advance(time.Minute)
	if n, _ := b.Lifecycle.Recover(ctx); n != 0 {
		t.Fatalf("recovery re-sent an acknowledged decision")
	}
}
