package httpserver_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"hubu.dev/hubu/proto/hubuapi"
)

// An approved operation the agent never resumes does not hold budget forever: it expires
// at its resume deadline, and an operator may deny it before.
func TestApprovedButNotResumed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	a := b.newAgent(t, "agent", nil)

	_, held := heldCall(t, b, a)
	b.clock.Advance(23 * time.Hour) // approved late in its window
	approved, _ := b.operator.ApproveOperationWithResponse(ctx, held.PublicHandle)
	if approved.JSON200 == nil || !approved.JSON200.ApprovalExpiresAt.Equal(b.clock.Now().Add(24*time.Hour)) {
		t.Fatalf("approve: %s", approved.Body)
	}
	b.clock.Advance(24 * time.Hour)
	if _, err := b.life.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	got, _ := a.client.GetOperationWithResponse(ctx, held.PublicHandle)
	if got.JSON200.State != hubuapi.OperationStateExpired || got.JSON200.HeldMicros != 0 {
		t.Fatalf("after the resume deadline: %s", got.Body)
	}
	if r, _ := a.client.ResumeOperationWithResponse(ctx, held.PublicHandle); r.JSON200.State != hubuapi.OperationStateExpired {
		t.Fatalf("resume after the deadline: %s", r.Body)
	}

	_, held2 := heldCall(t, b, a)
	b.operator.ApproveOperationWithResponse(ctx, held2.PublicHandle)
	denied, _ := b.operator.DenyOperationWithResponse(ctx, held2.PublicHandle, hubuapi.DenyRequest{})
	if denied.JSON200 == nil || denied.JSON200.State != hubuapi.OperationStateDenied || denied.JSON200.HeldMicros != 0 {
		t.Fatalf("deny an approved operation before its resume: %d %s", denied.StatusCode(), denied.Body)
	}
	if r, _ := a.client.ResumeOperationWithResponse(ctx, held2.PublicHandle); r.JSON200.State != hubuapi.OperationStateDenied {
		t.Fatalf("resume after deny: %s", r.Body)
	}
	if len(b.exec.Decisions()) != 0 {
		t.Fatal("an expired or denied approval reached the executor")
	}
}

// A period's budget counts only what was spent in that period: usage recorded while Hubu's
// clock was a day ahead belongs to the next day, and does not use up today once the clock is
// back (the fault explorer found this with a clock jump, seed 6075).
func TestBudgetCountsOnlyItsOwnPeriod(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	a := b.newAgent(t, "agent", policy(50_000, 1_000_000, 100_000))
	if op := mustOperation(t, authorize(t, a, newCall("flux-dev"))); op.State != hubuapi.OperationStateExecuting {
		t.Fatalf("today's first spend: %+v", op)
	}
	b.clock.Advance(25 * time.Hour) // the clock jumps a day ahead
	for range 4 {
		if op := mustOperation(t, authorize(t, a, newCall("flux-dev"))); op.State != hubuapi.OperationStateExecuting {
			t.Fatalf("within the next day's budget: %+v", op)
		}
	}
	b.clock.Advance(-25 * time.Hour) // and is put right
	caps, _ := a.client.GetCapabilitiesWithResponse(ctx)
	if caps.JSON200 == nil || caps.JSON200.Budget.UsedMicros != 25_000 {
		t.Fatalf("today's budget counts another day's spend: %s", caps.Body)
	}
	if op := mustOperation(t, authorize(t, a, newCall("flux-dev"))); op.State != hubuapi.OperationStateExecuting {
		t.Fatalf("today's second spend, well within today's budget: %+v", op)
	}
}

// Changing an agent's budget period never forgets what it spent.
func TestBudgetPeriodChangeKeepsSpend(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	a := b.newAgent(t, "agent", policy(50_000, 1_000_000, 100_000))
	for range 4 {
		if op := mustOperation(t, authorize(t, a, newCall("flux-dev"))); op.State != hubuapi.OperationStateExecuting {
			t.Fatalf("within the daily budget: %+v", op)
		}
	}
	monthly := policy(50_000, 1_000_000, 100_000)
	monthly.BudgetPeriod = hubuapi.PolicyBudgetPeriodMonth
	if r, _ := b.operator.SetAgentPolicyWithResponse(ctx, a.id, *monthly); r.JSON200 == nil {
		t.Fatalf("set policy: %s", r.Body)
	}
	op := mustOperation(t, authorize(t, a, newCall("flux-dev")))
	if op.State != hubuapi.OperationStateDenied || op.Denial.Code != hubuapi.DenialCodeBudgetExceeded {
		t.Fatalf("the month's budget forgot today's spend: %+v", op)
	}
	caps, _ := a.client.GetCapabilitiesWithResponse(ctx)
	if caps.JSON200.Budget.UsedMicros != 100_000 || caps.JSON200.Budget.Period != hubuapi.BudgetPeriodMonth {
		t.Fatalf("capabilities: %+v", caps.JSON200.Budget)
	}
	b.clock.Advance(24 * time.Hour) // 1 December: a new month
	if op := mustOperation(t, authorize(t, a, newCall("flux-dev"))); op.State != hubuapi.OperationStateExecuting {
		t.Fatalf("the first day of a new month: %+v", op)
	}
	// The currency of an agent that has spent cannot change.
	eur := policy(50_000, 1_000_000, 100_000)
	eur.Currency = "EUR"
	if r, _ := b.operator.SetAgentPolicyWithResponse(ctx, a.id, *eur); r.StatusCode() != http.StatusConflict {
		t.Fatalf("currency change after spending: %d %s", r.StatusCode(), r.Body)
	}
}

func TestReplayMustMatch(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a := b.newAgent(t, "agent", nil)
	c := newCall("flux-dev")
	mustOperation(t, authorize(t, a, c))

	otherHandle := c
	otherHandle.handle = newCall("flux-dev").handle
	if r := authorize(t, a, otherHandle); r.StatusCode() != http.StatusConflict || problemCode(t, r.Body) != "conflict" {
		t.Fatalf("same key, another public handle: %d %s", r.StatusCode(), r.Body)
	}
	// Same key and hash, other arguments: the hash is not trusted alone.
	req := c.request()
	req.Arguments.Prompt = "a paper crane"
	resp, err := a.client.AuthorizeWithResponse(context.Background(), req)
	if err != nil || resp.StatusCode() != http.StatusConflict || problemCode(t, resp.Body) != "create_new_operation" {
		t.Fatalf("same key and hash, other arguments: %v %d %s", err, resp.StatusCode(), resp.Body)
	}
}

func TestMoreBadInput(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	a := b.newAgent(t, "agent", nil)
	c := newCall("flux-dev").request()
	body := `{"operation_key":"` + c.OperationKey + `","public_handle":"` + c.PublicHandle + `","tool":"generate_image","request_hash":"` + c.RequestHash + `","arguments":`
	for name, raw := range map[string]string{
		"duplicate argument":              body + `{"prompt":"a","prompt":"b","model":"flux-dev","width":1024,"height":1024}}`,
		"argument in another letter case": body + `{"prompt":"a","Prompt":"b","model":"flux-dev","width":1024,"height":1024}}`,
		"NUL in the prompt":               body + `{"prompt":"a\u0000b","model":"flux-dev","width":1024,"height":1024}}`,
	} {
		r, _ := a.client.AuthorizeWithBodyWithResponse(ctx, "application/json", strings.NewReader(raw))
		if r.StatusCode() != http.StatusBadRequest || problemCode(t, r.Body) != "invalid_arguments" {
			t.Errorf("%s: %d %s", name, r.StatusCode(), r.Body)
		}
	}
	_, held := heldCall(t, b, a)
	nul := "no\x00way"
	if r, _ := b.operator.DenyOperationWithResponse(ctx, held.PublicHandle, hubuapi.DenyRequest{Reason: &nul}); r.StatusCode() != http.StatusBadRequest {
		t.Errorf("NUL in a deny reason: %d %s", r.StatusCode(), r.Body)
	}
	if n := count(t, b.pool, "SELECT count(*) FROM operations"); n != 1 {
		t.Fatalf("%d operations, want only the held one", n)
	}
	resp, err := http.Get(b.url + "/v1/nowhere")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound || resp.Header.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("unknown route: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
}

func TestCapabilitiesLeaveOutWhatTheCeilingForbids(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a := b.newAgent(t, "agent", policy(10_000, 40_000, 5_000_000))
	caps, _ := a.client.GetCapabilitiesWithResponse(context.Background())
	var models []string
	for _, p := range caps.JSON200.Prices {
		models = append(models, p.Model)
	}
	if got := strings.Join(models, ","); got != "flux-dev,flux-pro-1.1,flux-schnell" {
		t.Fatalf("models %s, want those at or under the 0.04 ceiling", got)
	}
}

// A decision whose approval was denied or expired before the agent resumed it was never
// executed: the executor cannot settle or release it into another state.
func TestNoReportForADecisionNeverRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	a := b.newAgent(t, "agent", nil)
	_, held := heldCall(t, b, a)
	approved, _ := b.operator.ApproveOperationWithResponse(ctx, held.PublicHandle)
	decision := *approved.JSON200.DecisionId
	if r, _ := b.operator.DenyOperationWithResponse(ctx, held.PublicHandle, hubuapi.DenyRequest{}); r.JSON200 == nil {
		t.Fatalf("deny: %s", r.Body)
	}
	if r, _ := b.operator.ApproveOperationWithResponse(ctx, held.PublicHandle); r.StatusCode() != http.StatusConflict {
		t.Fatalf("approving again after the deny: %d %s", r.StatusCode(), r.Body)
	}
	if r, _ := b.service.ReleaseDecisionWithResponse(ctx, decision, hubuapi.ReleaseRequest{}); r.StatusCode() != http.StatusConflict {
		t.Fatalf("release of a denied decision: %d %s", r.StatusCode(), r.Body)
	}
	if r, _ := b.service.SettleDecisionWithResponse(ctx, decision, hubuapi.SettleRequest{AmountMicros: 60_000}); r.StatusCode() != http.StatusConflict {
		t.Fatalf("settle of a denied decision: %d %s", r.StatusCode(), r.Body)
	}
	if op, _ := a.client.GetOperationWithResponse(ctx, held.PublicHandle); op.JSON200.State != hubuapi.OperationStateDenied {
		t.Fatalf("the denied operation moved: %s", op.Body)
	}
}
