package httpserver_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"hubu.dev/hubu/proto/hubuapi"
)

// A period's budget counts only what was spent in that period: usage recorded while Hubu's
// clock was a day ahead belongs to the next day, and does not use up today once the clock is
// back (the fault explorer found this with a clock jump, seed 6075).
func TestBudgetCountsOnlyItsOwnPeriod(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	a := b.NewAgent(t, "agent", policy(50_000, 1_000_000, 100_000))
	spend(t, a, newCall("flux-dev"), hubuapi.OperationStateExecuting)
	b.Clock.Advance(25 * time.Hour) // the clock jumps a day ahead
	for range 4 {
		spend(t, a, newCall("flux-dev"), hubuapi.OperationStateExecuting)
	}
	b.Clock.Advance(-25 * time.Hour) // and is put right
	caps, _ := a.Client.GetCapabilitiesWithResponse(ctx)
	if caps.JSON200 == nil || caps.JSON200.Budget.UsedMicros != 25_000 {
		t.Fatalf("today's budget counts another day's spend: %s", caps.Body)
	}
	spend(t, a, newCall("flux-dev"), hubuapi.OperationStateExecuting)
}

// Changing an agent's budget period never forgets what it spent.
func TestBudgetPeriodChangeKeepsSpend(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	a := b.NewAgent(t, "agent", policy(50_000, 1_000_000, 100_000))
	for range 4 {
		spend(t, a, newCall("flux-dev"), hubuapi.OperationStateExecuting)
	}
	monthly := policy(50_000, 1_000_000, 100_000)
	monthly.BudgetPeriod = hubuapi.PolicyBudgetPeriodMonth
	if r, _ := b.Operator.SetAgentPolicyWithResponse(ctx, a.ID, *monthly); r.JSON200 == nil {
		t.Fatalf("set policy: %s", r.Body)
	}
	op := mustOperation(t, authorize(t, a, newCall("flux-dev")))
	if op.State != hubuapi.OperationStateDenied || op.Denial.Code != hubuapi.DenialCodeBudgetExceeded {
		t.Fatalf("the month's budget forgot today's spend: %+v", op)
	}
	caps, _ := a.Client.GetCapabilitiesWithResponse(ctx)
	if caps.JSON200.Budget.UsedMicros != 100_000 || caps.JSON200.Budget.Period != hubuapi.BudgetPeriodMonth {
		t.Fatalf("capabilities: %+v", caps.JSON200.Budget)
	}
	b.Clock.Advance(24 * time.Hour) // 1 December: a new month
	spend(t, a, newCall("flux-dev"), hubuapi.OperationStateExecuting)
	// The currency of an agent that has spent cannot change.
	eur := policy(50_000, 1_000_000, 100_000)
	eur.Currency = "EUR"
	if r, _ := b.Operator.SetAgentPolicyWithResponse(ctx, a.ID, *eur); r.StatusCode() != http.StatusConflict {
		t.Fatalf("currency change after spending: %d %s", r.StatusCode(), r.Body)
	}
}
