package httpserver_test

import (
	"context"
	"fmt"
	"testing"

	"hubu.dev/hubu/proto/hubuapi"
	"hubu.dev/hubu/services/hubu"
	"hubu.dev/hubu/services/hubu/hubutest"
	"hubu.dev/hubu/sql/sqltest"
)

// The round trips to Postgres, and the statements, that each request on the hot path costs,
// pinned: a change that adds one fails here, and must say why it is worth it. Each request runs
// once to warm pgx's statement cache, then once counted, on a pool of one connection.
//
// A new authorization: the state the decision needs (with whether the key is recorded), read
// without a lock, then BEGIN + the agent's policy lock + the record with its hold and budget
// use, guarded by that state + COMMIT, so the lock is held inside Postgres only; its
// hand-off counts the try and records the acceptance, one guarded statement each; the count in a
// transaction of its own sent in one round trip (BEGIN + SET LOCAL synchronous_commit = off +
// the statement + COMMIT) that commits without waiting for the disk: it, and only it, is
// unflushed (postgres.Store.writeUnflushed says why). A replay: the same first read, then the
// record, no transaction and no lock. A
// transition of an existing operation: BEGIN + its lock + the row with its ledger totals, then
// the change + COMMIT. The credential and the catalog come from the cache; without it each is
// one more read (uncached), the catalog's for a new operation only.
func TestRoundTrips(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, cached := range []bool{true, false} {
		t.Run(fmt.Sprintf("cached=%v", cached), func(t *testing.T) {
			t.Parallel()
			trips := &sqltest.RoundTrips{}
			e := hubutest.New(t, &hubutest.Options{RoundTrips: trips, NoCache: !cached})
			b := &bundle{Env: e, service: e.Client(t, e.ServiceToken)}
			a := b.NewAgent(t, "agent", nil)
			operator := b.Operator

			// decided is a new operation of model, approved and handed off, or held.
			decided := func(model string, state hubuapi.OperationState) hubuapi.Operation {
				return spend(t, a, newCall(model), state)
			}
			// dispatching is a new operation left dispatching: authorized by the store alone.
			dispatching := func() hubu.Operation {
				op, _, err := e.Store.Authorize(ctx, a.ID, newCall("flux-dev").AuthorizeRequest(), e.Clock.Now(), false)
				if err != nil || op.State != hubu.StateDispatching {
					t.Fatalf("authorize: %+v %v", op, err)
				}
				return op
			}
			ok := func(what string, r reply) {
				t.Helper()
				if r.status != 200 && r.status != 201 {
					t.Fatalf("%s: %d %s", what, r.status, r.body)
				}
			}
			replayed := newCall("flux-dev")
			spend(t, a, replayed, hubuapi.OperationStateExecuting)

			for _, c := range []struct {
				name              string
				trips, statements int
				unflushed         int // commits that do not wait for the disk
				uncached          int // round trips (and statements) more without the cache
				prepare           func() (request func())
			}{
				{"new authorization, approved and handed off", 3, 6, 0, 2, func() func() {
					return func() { decided("flux-dev", hubuapi.OperationStateExecuting) }
				}},
				{"new authorization, held for approval", 2, 5, 0, 2, func() func() {
					return func() { decided("flux-pro-1.1-ultra", hubuapi.OperationStatePendingApproval) }
				}},
				{"replay", 2, 2, 0, 1, func() func() {
					return func() { spend(t, a, replayed, hubuapi.OperationStateExecuting) }
				}},
				{"hand-off: count the try", 1, 4, 1, 0, func() func() {
					op := dispatching()
					return func() {
						if _, counted, err := e.Store.CountDispatchAttempt(ctx, op, e.Clock.Now()); err != nil || !counted {
							t.Fatalf("count: %v %v", counted, err)
						}
					}
				}},
				{"hand-off: record the acceptance", 1, 1, 0, 0, func() func() {
					op := dispatching()
					return func() {
						if op, err := e.Store.MarkExecuting(ctx, op, e.Clock.Now()); err != nil || op.State != hubu.StateExecuting {
							t.Fatalf("accept: %+v %v", op, err)
						}
					}
				}},
				{"the executor reads a decision", 1, 1, 0, 1, func() func() {
					d := *decided("flux-dev", hubuapi.OperationStateExecuting).DecisionId
					return func() { ok("get decision", replyOf(b.service.GetDecisionWithResponse(ctx, d))) }
				}},
				{"settle (capture part, release the rest)", 2, 5, 0, 1, func() func() {
					d := *decided("flux-dev", hubuapi.OperationStateExecuting).DecisionId
					return func() { ok("settle", b.settle(d, hubuapi.SettleRequest{AmountMicros: 20_000})) }
				}},
				{"release", 2, 5, 0, 1, func() func() {
					d := *decided("flux-dev", hubuapi.OperationStateExecuting).DecisionId
					return func() { ok("release", b.release(d)) }
				}},
				{"approve", 2, 5, 0, 1, func() func() {
					h := decided("flux-pro-1.1-ultra", hubuapi.OperationStatePendingApproval).PublicHandle
					return func() { ok("approve", replyOf(operator.ApproveOperationWithResponse(ctx, h))) }
				}},
				{"resume, with its hand-off", 4, 10, 1, 1, func() func() {
					h := decided("flux-pro-1.1-ultra", hubuapi.OperationStatePendingApproval).PublicHandle
					if r, err := operator.ApproveOperationWithResponse(ctx, h); err != nil || r.JSON200 == nil {
						t.Fatalf("approve: %v", err)
					}
					return func() { ok("resume", replyOf(a.Client.ResumeOperationWithResponse(ctx, h))) }
				}},
			} {
				wantTrips, wantStatements := c.trips, c.statements
				if !cached {
					wantTrips, wantStatements = wantTrips+c.uncached, wantStatements+c.uncached
				}
				for run := range 2 {
					request := c.prepare()
					if e.Cache != nil {
						e.Cache.Sync(t) // no notification of the set-up empties the cache mid-count
					}
					trips.Reset()
					request()
					if got, statements := trips.Counts(); run == 1 && (got != wantTrips || statements != wantStatements) {
						t.Errorf("%s: %d round trips and %d statements, want %d and %d", c.name, got, statements, wantTrips, wantStatements)
					}
					if got := trips.Unflushed(); run == 1 && got != c.unflushed {
						t.Errorf("%s: %d commits that do not wait for the disk, want %d", c.name, got, c.unflushed)
					}
				}
			}
		})
	}
}
