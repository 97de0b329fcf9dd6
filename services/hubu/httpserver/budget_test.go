package httpserver_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"hubu.dev/hubu/proto/hubuapi"
	"hubu.dev/hubu/services/hubu"
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

// New authorizations of one agent racing the releases of its earlier ones never overspend: a
// release frees budget for the decisions that lock the policy after it, and the budget use of
// the day (written by the release and by each new hold, on the same row) stays the ledger's.
func TestBudgetRaceWithReleases(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// flux-dev costs 25 000 micros: the budget fits 10, and all 10 are spent first.
	a := b.NewAgent(t, "agent", policy(50_000, 1_000_000, 250_000))
	var spent []hubuapi.Operation
	for range 10 {
		spent = append(spent, spend(t, a, newCall("flux-dev"), hubuapi.OperationStateExecuting))
	}
	const released, racing = 5, 40
	answers := make([]*hubuapi.AuthorizeResponse, racing)
	errs := make([]error, racing+released)
	var wg sync.WaitGroup
	for i := range racing {
		wg.Go(func() {
			answers[i], errs[i] = a.Client.AuthorizeWithResponse(context.Background(), newCall("flux-dev").Request())
		})
	}
	for i, op := range spent[:released] {
		wg.Go(func() {
			r := b.release(*op.DecisionId)
			if r.status != http.StatusOK {
				errs[racing+i] = fmt.Errorf("release: %d %s", r.status, r.body)
			}
		})
	}
	wg.Wait()
	approved := 0
	for i, err := range errs {
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if i >= racing {
			continue
		}
		switch op := mustOperation(t, answers[i]); {
		case op.State == hubuapi.OperationStateExecuting:
			approved++
		case op.State == hubuapi.OperationStateDenied && op.Denial != nil && string(op.Denial.Code) == hubu.DenialBudgetExceeded:
		default:
			t.Fatalf("operation %d: state %s denial %+v", i, op.State, op.Denial)
		}
	}
	if approved > released {
		t.Fatalf("%d approved while %d were released: overspent", approved, released)
	}
	caps, err := a.Client.GetCapabilitiesWithResponse(context.Background())
	if err != nil || caps.JSON200 == nil {
		t.Fatalf("capabilities: %v", err)
	}
	if used := caps.JSON200.Budget.UsedMicros; used != int64(10-released+approved)*25_000 {
		t.Fatalf("budget used %d after %d releases and %d approvals", used, released, approved)
	}
}
