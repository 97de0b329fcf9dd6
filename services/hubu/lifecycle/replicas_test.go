package lifecycle_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"hubu.dev/hubu/kit/waitfor"
	"hubu.dev/hubu/proto/hubuapi"
	"hubu.dev/hubu/services/hubu"
	"hubu.dev/hubu/services/hubu/hubutest"
	"hubu.dev/hubu/services/hubu/lifecycle"
)

// Two replicas run their recovery passes at the same moment over the same due work: holds
// past their approval deadline and decisions the executor never acknowledged. Each hold is
// expired and released once, and each decision is handed off once per pass, not once per
// replica. Row locks taken by the test hold both replicas at the first item until both are
// waiting for it, so the two passes really do meet on the same rows.
func TestRecoveryPassesOfTwoReplicas(t *testing.T) {
	t.Parallel()
	const holds, dispatching = 6, 6
	b := hubutest.New(t, &hubutest.Options{ApprovalTTL: time.Hour})
	second := b.NewReplica(t)
	agent := b.NewAgent(t, "painter", nil)
	for range holds {
		authorize(t, agent, "flux-pro-1.1-ultra", hubuapi.OperationStatePendingApproval) // above the auto-approve limit
	}
	b.Executor.FailNext(dispatching) // Gongbu is down: the decisions stay dispatching
	for range dispatching {
		authorize(t, agent, "flux-dev", hubuapi.OperationStateDispatching)
	}
	handoffs := &handoffCounter{}
	b.Executor.OnExecute(handoffs.count)
	b.Clock.Advance(time.Hour + time.Minute) // the holds expire; the hand-offs are due again

	// First pass: Gongbu is still down. Both replicas expire the holds and re-send the decisions.
	handoffs.fail(true)
	sent := race(t, b, []*lifecycle.Service{b.Lifecycle, second.Lifecycle},
		barrier{"pending_approval", "LockOperationByID"}, barrier{"dispatching", "WriteChange"})
	if sent != 0 {
		t.Fatalf("the executor accepted %d decisions while failing every one", sent)
	}
	if n := b.Count(t, `SELECT count(*) FROM operations o WHERE o.state = 'expired'
		AND (SELECT count(*) FROM ledger_entries l WHERE l.operation_id = o.id AND l.kind = 'release') = 1`); n != holds {
		t.Fatalf("%d of %d holds expired with exactly one release", n, holds)
	}
	if n := b.Count(t, "SELECT count(*) FROM ledger_entries WHERE kind = 'release'"); n != holds {
		t.Fatalf("%d releases in the ledger, want %d", n, holds)
	}
	handoffs.mustBeOnce(t, "the first pass", dispatching)
	// One try when the decision was issued, one in this pass.
	if n := b.Count(t, "SELECT count(*) FROM operations WHERE state = 'dispatching' AND dispatch_attempts = 2"); n != dispatching {
		t.Fatalf("%d of %d decisions counted two hand-offs", n, dispatching)
	}

	// Second pass: Gongbu is back. Each decision is handed off once more, and accepted.
	handoffs.fail(false)
	b.Clock.Advance(time.Minute)
	sent = race(t, b, []*lifecycle.Service{b.Lifecycle, second.Lifecycle}, barrier{"dispatching", "WriteChange"})
	if sent != dispatching {
		t.Fatalf("the replicas' passes had %d decisions accepted, want %d", sent, dispatching)
	}
	handoffs.mustBeOnce(t, "the second pass", dispatching)
	if n := b.Count(t, "SELECT count(*) FROM operations WHERE state = 'executing' AND dispatch_attempts = 3"); n != dispatching {
		t.Fatalf("%d of %d decisions executing after three hand-offs", n, dispatching)
	}
	if got := len(b.Executor.Decisions()); got != dispatching {
		t.Fatalf("the executor accepted %d hand-offs, want %d", got, dispatching)
	}
}

func authorize(t *testing.T, a hubutest.Agent, model string, want hubuapi.OperationState) {
	t.Helper()
	resp, err := a.Client.AuthorizeWithResponse(t.Context(), hubutest.NewCall(model).Request())
	if err != nil {
		t.Fatal(err)
	}
	if resp.JSON201 == nil || resp.JSON201.State != want {
		t.Fatalf("authorize %s: %d %s, want %s", model, resp.StatusCode(), resp.Body, want)
	}
}

// handoffCounter counts the executor's hand-offs per decision, and fails them while told to.
type handoffCounter struct {
	mu      sync.Mutex
	failing bool
	seen    map[uuid.UUID]int
}

func (h *handoffCounter) count(d hubu.Decision) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seen[d.DecisionID]++
	if h.failing {
		return errors.New("gongbu is down")
	}
	return nil
}

// fail starts a pass: it forgets the hand-offs counted so far, and makes the next ones fail
// or succeed.
func (h *handoffCounter) fail(failing bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.failing, h.seen = failing, map[uuid.UUID]int{}
}

func (h *handoffCounter) mustBeOnce(t *testing.T, pass string, decisions int) {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.seen) != decisions {
		t.Fatalf("%s handed off %d decisions, want %d: %v", pass, len(h.seen), decisions, h.seen)
	}
	for id, n := range h.seen {
		if n != 1 {
			t.Fatalf("%s handed decision %s off %d times", pass, id, n)
		}
	}
}

// barrier holds the operations in state locked until both replicas' passes wait for one of
// them in the statement named query (an sqlc query's name).
type barrier struct{ state, query string }

// race runs each service's recovery pass at once and returns how many decisions they had
// accepted in all. Each barrier, in order, is released once every pass waits at it.
func race(t *testing.T, b *hubutest.Env, services []*lifecycle.Service, barriers ...barrier) int {
	t.Helper()
	// The barriers' locks are held on connections of their own: the replicas' pools are busy.
	pool, err := pgxpool.New(t.Context(), b.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	held := make([]pgx.Tx, len(barriers))
	for i, br := range barriers {
		tx, err := pool.Begin(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback(context.Background()) }() // frees a pass that waits still
		if _, err := tx.Exec(t.Context(), "SELECT 1 FROM operations WHERE state = $1 FOR UPDATE", br.state); err != nil {
			t.Fatal(err)
		}
		held[i] = tx
	}

	var wg sync.WaitGroup
	defer wg.Wait() // after the deferred rollbacks, should the test fail at a barrier
	sent := make([]int, len(services))
	errs := make([]error, len(services))
	for i, s := range services {
		wg.Go(func() { sent[i], errs[i] = s.Recover(context.Background()) })
	}
	for i, br := range barriers {
		waitfor.True(t, 10*time.Second, "both passes to wait in "+br.query, func() bool {
			var n int
			err := pool.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity
				WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '-- name: ' || $1 || ' %'`, br.query).Scan(&n)
			return err == nil && n == len(services)
		})
		if err := held[i].Rollback(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	total := 0
	for i := range services {
		if errs[i] != nil {
			t.Fatalf("replica %d's pass: %v", i, errs[i])
		}
		total += sent[i]
	}
	return total
}
