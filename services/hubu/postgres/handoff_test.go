package postgres_test

import (
	"context"
	"testing"

	"hubu.dev/hubu/services/hubu"
	"hubu.dev/hubu/services/hubu/hubutest"
	"hubu.dev/hubu/sql/sqltest"
)

// The hand-off steps write the change computed from the operation the caller read, in one
// guarded statement without a lock. When the row has moved on since that read (another
// replica's hand-off, the executor's settle), the guard fails, nothing is written from the
// stale read, and the step runs again under the lock on the row as it is.
func TestHandOffStepsFromAStaleRead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	trips := &sqltest.RoundTrips{}
	e := hubutest.New(t, &hubutest.Options{RoundTrips: trips})
	a := e.NewAgent(t, "agent", nil)
	now := e.Clock.Now()
	authorize := func() hubu.Operation {
		t.Helper()
		op, _, err := e.Store.Authorize(ctx, a.ID, hubutest.NewCall("flux-dev").AuthorizeRequest(), now, false)
		if err != nil || op.State != hubu.StateDispatching || op.DispatchAttempts != 0 {
			t.Fatalf("authorize: %+v %v", op, err)
		}
		return op
	}
	// Warm pgx's statement cache: a statement's first run on a connection prepares it.
	warm := authorize()
	for range 2 { // the second from a stale read: the path under the lock
		if _, _, err := e.Store.CountDispatchAttempt(ctx, warm, now); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.Store.Settle(ctx, *warm.DecisionID, 0, false, "", nil, now); err != nil {
		t.Fatal(err)
	}

	read := authorize()
	count := func(what string, op hubu.Operation, wantAttempts int, wantTrips int) hubu.Operation {
		t.Helper()
		trips.Reset()
		counted, ok, err := e.Store.CountDispatchAttempt(ctx, op, now)
		if n, _ := trips.Counts(); err != nil || !ok || counted.DispatchAttempts != wantAttempts || n != wantTrips {
			t.Fatalf("%s: %d attempts (ok %v, %v) in %d round trips, want %d in %d", what, counted.DispatchAttempts, ok, err, n, wantAttempts, wantTrips)
		}
		return counted
	}
	count("the first hand-off", read, 1, 1)
	// Another hand-off counted from the same, now stale, read: the guard sees the first one, and
	// the lock counts this one on top of it (1 failed guard + BEGIN/lock/read + write/COMMIT).
	counted := count("a hand-off from a stale read", read, 2, 3)

	// Settled before its acceptance is recorded (the executor may be that fast): recording it
	// from the read taken before changes nothing.
	if _, err := e.Store.Settle(ctx, *read.DecisionID, 25_000, false, "", nil, now); err != nil {
		t.Fatal(err)
	}
	op, err := e.Store.MarkExecuting(ctx, counted, now)
	if err != nil || op.State != hubu.StateSucceeded || op.CapturedMicros != 25_000 {
		t.Fatalf("accepted after the settle: %+v %v", op, err)
	}
	op, ok, err := e.Store.CountDispatchAttempt(ctx, counted, now)
	if err != nil || ok || op.State != hubu.StateSucceeded || op.DispatchAttempts != 2 {
		t.Fatalf("a hand-off after the settle: %+v ok %v %v", op, ok, err)
	}
}

// A caller that hands a new decision on at once has its first try counted in the
// transaction that issues it; a held operation issues no decision and counts nothing, and a
// caller without an executor counts nothing either.
func TestAuthorizeCountsTheFirstHandOff(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := hubutest.New(t, nil)
	a := e.NewAgent(t, "agent", nil)
	for _, c := range []struct {
		model   string
		handOff bool
		state   hubu.State
		want    int
	}{
		{"flux-dev", true, hubu.StateDispatching, 1},
		{"flux-dev", false, hubu.StateDispatching, 0},
		{"flux-pro-1.1-ultra", true, hubu.StatePendingApproval, 0},
	} {
		op, _, err := e.Store.Authorize(ctx, a.ID, hubutest.NewCall(c.model).AuthorizeRequest(), e.Clock.Now(), c.handOff)
		if err != nil || op.State != c.state || op.DispatchAttempts != c.want {
			t.Fatalf("%s, hand-off %v: %s with %d attempts (%v), want %s with %d", c.model, c.handOff, op.State, op.DispatchAttempts, err, c.state, c.want)
		}
		stored, err := e.Store.GetOperation(ctx, hubu.Principal{Role: hubu.RoleAgent, AgentID: a.ID}, op.PublicHandle, e.Clock.Now())
		if err != nil || stored.DispatchAttempts != c.want {
			t.Fatalf("%s, hand-off %v: stored %d attempts (%v), want %d", c.model, c.handOff, stored.DispatchAttempts, err, c.want)
		}
	}
}
