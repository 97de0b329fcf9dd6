package postgres_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"hubu.dev/hubu/proto/hubuapi"
	"hubu.dev/hubu/services/hubu"
	"hubu.dev/hubu/services/hubu/hubutest"
	"hubu.dev/hubu/services/hubu/postgres"
)

// Authorize's first try decides on the agent's state read without a lock, and writes the
// record, under the lock, only if that decision still stands. When the state moved in between
// (the budget used by another authorization, the policy changed, the key recorded), nothing is
// written from the stale decision: the locked path decides again on the state as it is. Each
// case moves the state between the first try's read and its write; without the guard, each
// would be approved.
func TestAuthorizeDecidesAgainWhenTheStateMoved(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := hubutest.New(t, nil)
	now := e.Clock.Now()
	// flux-dev costs 25,000 micros: the budget fits one.
	onlyOne := &hubuapi.Policy{Currency: "USD", AutoApproveLimitMicros: 50_000, PerOperationCeilingMicros: 1_000_000,
		BudgetMicros: 25_000, BudgetPeriod: hubuapi.PolicyBudgetPeriodDay, AllowedProviders: []string{"*"}, AllowedModels: []string{"*"}}
	setPolicy := func(a hubutest.Agent, change func(*hubu.Policy)) {
		t.Helper()
		p := hubu.Policy{Currency: "USD", AutoApproveLimitMicros: 50_000, PerOperationCeilingMicros: 1_000_000,
			BudgetMicros: 25_000, BudgetPeriod: "day", AllowedProviders: []string{"*"}, AllowedModels: []string{"*"}}
		change(&p)
		if _, err := e.Store.SetPolicy(ctx, a.ID, p, now); err != nil {
			t.Fatal(err)
		}
	}
	for i, c := range []struct {
		name       string
		move       func(a hubutest.Agent, call hubutest.Call)
		wantState  hubu.State
		wantDenial string
		replayed   bool
	}{
		{"another authorization used the budget", func(a hubutest.Agent, _ hubutest.Call) {
			if op, _, err := e.Store.Authorize(ctx, a.ID, hubutest.NewCall("flux-dev").AuthorizeRequest(), now, false); err != nil || op.State != hubu.StateDispatching {
				t.Fatalf("the other authorization: %+v %v", op, err)
			}
		}, hubu.StateDenied, hubu.DenialBudgetExceeded, false},
		{"the budget was lowered", func(a hubutest.Agent, _ hubutest.Call) {
			setPolicy(a, func(p *hubu.Policy) { p.BudgetMicros = 10_000 })
		}, hubu.StateDenied, hubu.DenialBudgetExceeded, false},
		{"the model is no longer allowed", func(a hubutest.Agent, _ hubutest.Call) {
			setPolicy(a, func(p *hubu.Policy) { p.AllowedModels = []string{"flux-schnell"} })
		}, hubu.StateDenied, hubu.DenialDenied, false},
		{"the key was recorded meanwhile", func(a hubutest.Agent, call hubutest.Call) {
			if op, _, err := e.Store.Authorize(ctx, a.ID, call.AuthorizeRequest(), now, false); err != nil || op.State != hubu.StateDispatching {
				t.Fatalf("the same key's authorization: %+v %v", op, err)
			}
		}, hubu.StateDispatching, "", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := e.NewAgent(t, fmt.Sprintf("agent-%d", i), onlyOne)
			call := hubutest.NewCall("flux-dev")
			var moved atomic.Bool // the move's own authorization runs the hook too
			// The store is shared by the cases: they run one after the other.
			postgres.SetTestHookDecided(e.Store, func() {
				if !moved.Swap(true) {
					c.move(a, call)
				}
			})
			defer postgres.SetTestHookDecided(e.Store, nil)
			op, replayed, err := e.Store.Authorize(ctx, a.ID, call.AuthorizeRequest(), now, false)
			if err != nil {
				t.Fatal(err)
			}
			denial := ""
			if op.Denial != nil {
				denial = op.Denial.Code
			}
			if op.State != c.wantState || denial != c.wantDenial || replayed != c.replayed {
				t.Fatalf("%s (denial %q), replayed %v: want %s (denial %q), replayed %v", op.State, denial, replayed, c.wantState, c.wantDenial, c.replayed)
			}
			caps, err := e.Store.Capabilities(ctx, a.ID, now)
			if err != nil {
				t.Fatal(err)
			}
			if caps.Budget.UsedMicros > onlyOne.BudgetMicros {
				t.Fatalf("budget overspent: %+v", caps.Budget)
			}
		})
	}
}
