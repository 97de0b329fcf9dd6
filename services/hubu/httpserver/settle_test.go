package httpserver_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"hubu.dev/hubu/proto/hubuapi"
	"hubu.dev/hubu/services/hubu"
)

// settle and release report on decision d as the executor does.
func (b *bundle) settle(d uuid.UUID, req hubuapi.SettleRequest) reply {
	return replyOf(b.service.SettleDecisionWithResponse(context.Background(), d, req))
}

func (b *bundle) release(d uuid.UUID) reply {
	return replyOf(b.service.ReleaseDecisionWithResponse(context.Background(), d, hubuapi.ReleaseRequest{}))
}

// wantStatus fails t unless r answered status.
func wantStatus(t testing.TB, what string, r reply, status int) {
	t.Helper()
	if r.status != status {
		t.Fatalf("%s: %d %s, want %d", what, r.status, r.body, status)
	}
}

func TestSettleAndRelease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	a := b.NewAgent(t, "agent", nil)

	op := mustOperation(t, authorize(t, a, newCall("flux-dev")))
	d := *op.DecisionId
	wantStatus(t, "capture above the authorized amount", b.settle(d, hubuapi.SettleRequest{AmountMicros: 25_001}), http.StatusBadRequest)
	dec, _ := b.service.GetDecisionWithResponse(ctx, d)
	if dec.JSON200 == nil || dec.JSON200.Scope.Model != "flux-dev" || dec.JSON200.AmountMicros != 25_000 || dec.JSON200.Arguments.Prompt != "an origami fox" {
		t.Fatalf("decision: %s", dec.Body)
	}
	settled, _ := b.service.SettleDecisionWithResponse(ctx, d, hubuapi.SettleRequest{AmountMicros: 25_000})
	if settled.JSON200 == nil || settled.JSON200.State != hubuapi.OperationStateSucceeded || settled.JSON200.CapturedMicros != 25_000 || settled.JSON200.ReleasedMicros != 0 {
		t.Fatalf("settle: %s", settled.Body)
	}
	wantStatus(t, "settle again with the same amount", b.settle(d, hubuapi.SettleRequest{AmountMicros: 25_000}), http.StatusOK)
	wantStatus(t, "settle again with another amount", b.settle(d, hubuapi.SettleRequest{AmountMicros: 1}), http.StatusConflict)
	wantStatus(t, "release after settle", b.release(d), http.StatusConflict)
	if n := b.Count(t, "SELECT count(*) FROM ledger_entries WHERE kind = 'capture'"); n != 1 {
		t.Fatalf("%d captures, want 1", n)
	}

	failed := mustOperation(t, authorize(t, a, newCall("flux-dev")))
	reason := "provider refused the prompt"
	rel, _ := b.service.ReleaseDecisionWithResponse(ctx, *failed.DecisionId, hubuapi.ReleaseRequest{Reason: &reason})
	if rel.JSON200 == nil || rel.JSON200.State != hubuapi.OperationStateFailed || rel.JSON200.ReleasedMicros != 25_000 || rel.JSON200.HeldMicros != 0 {
		t.Fatalf("release: %s", rel.Body)
	}
	wantStatus(t, "release again", b.release(*failed.DecisionId), http.StatusOK)
	wantStatus(t, "settle after release", b.settle(*failed.DecisionId, hubuapi.SettleRequest{AmountMicros: 0}), http.StatusConflict)
	wantStatus(t, "unknown decision", b.settle(uuid.New(), hubuapi.SettleRequest{}), http.StatusNotFound)
	caps, _ := a.Client.GetCapabilitiesWithResponse(ctx)
	if caps.JSON200.Budget.UsedMicros != 25_000 {
		t.Fatalf("budget used %d, want only the capture", caps.JSON200.Budget.UsedMicros)
	}
	// The ledger refuses to be rewritten.
	if _, err := b.Pool.Exec(ctx, "UPDATE ledger_entries SET amount_micros = 1"); err == nil {
		t.Fatal("ledger entries could be updated")
	}
	if _, err := b.Pool.Exec(ctx, "DELETE FROM ledger_entries"); err == nil {
		t.Fatal("ledger entries could be deleted")
	}
}

// What the executor reads back when it checks a decision (GET /v1/decisions/{id}): the
// operation stays dispatching through failed hand-offs, however they failed, and says when the
// decision was issued; every try is counted for operators.
func TestDecisionAsTheExecutorSeesIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	a := b.NewAgent(t, "agent", nil)
	var mu sync.Mutex
	var seen []string
	fail := []error{
		errors.New("the answer was lost"),
		errors.New("502 from a proxy"),
		errors.New("connection refused"),
		nil, // accepted
	}
	b.Executor.OnExecute(func(d hubu.Decision) error {
		dec, err := b.service.GetDecisionWithResponse(ctx, d.DecisionID)
		if err != nil || dec.JSON200 == nil {
			return fmt.Errorf("get decision: %v", err)
		}
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, fmt.Sprintf("%s/%d", dec.JSON200.State, dec.JSON200.DispatchAttempts))
		next := fail[0]
		fail = fail[1:]
		return next
	})
	issued := b.Clock.Now()
	c := newCall("flux-dev")
	op := spend(t, a, c, hubuapi.OperationStateDispatching)
	decision := func() hubuapi.Decision {
		t.Helper()
		dec, _ := b.service.GetDecisionWithResponse(ctx, *op.DecisionId)
		if dec.JSON200 == nil {
			t.Fatalf("decision: %s", dec.Body)
		}
		return *dec.JSON200
	}
	if d := decision(); !d.IssuedAt.Equal(issued) {
		t.Fatalf("issued_at = %s, want the authorization's time %s", d.IssuedAt, issued)
	}
	authorize(t, a, c) // the re-delivered call re-sends the decision
	for range 2 {      // Recover re-sends twice, the second is accepted
		b.Clock.Advance(11 * time.Second)
		if _, err := b.Lifecycle.Recover(ctx); err != nil {
			t.Fatal(err)
		}
	}
	d := decision()
	if d.DispatchAttempts != 4 || d.State != hubuapi.OperationStateExecuting || !d.IssuedAt.Equal(issued) {
		t.Fatalf("after the accepted hand-off: %+v", d)
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{"dispatching/1", "dispatching/2", "dispatching/3", "dispatching/4"}
	if fmt.Sprint(seen) != fmt.Sprint(want) {
		t.Fatalf("the executor saw %v, want %v", seen, want)
	}
}

// A provider that charged for work it then failed: the executor settles what was charged and
// says it failed. The operation is failed, with the reason, and the charge is captured.
func TestSettleAFailedExecution(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	a := b.NewAgent(t, "agent", nil)
	op := mustOperation(t, authorize(t, a, newCall("flux-dev")))
	d := *op.DecisionId
	yes, no := true, false
	reason := "the provider failed the job: Content Moderated"
	wantStatus(t, "a reason without failed", b.settle(d, hubuapi.SettleRequest{AmountMicros: 25_000, Failed: &no, Reason: &reason}), http.StatusBadRequest)
	long := strings.Repeat("x", 501)
	wantStatus(t, "a reason too long", b.settle(d, hubuapi.SettleRequest{AmountMicros: 25_000, Failed: &yes, Reason: &long}), http.StatusBadRequest)
	settled, _ := b.service.SettleDecisionWithResponse(ctx, d, hubuapi.SettleRequest{AmountMicros: 20_000, Failed: &yes, Reason: &reason})
	o := settled.JSON200
	if o == nil || o.State != hubuapi.OperationStateFailed || o.CapturedMicros != 20_000 || o.ReleasedMicros != 5_000 || o.HeldMicros != 0 ||
		o.FailureReason == nil || *o.FailureReason != reason {
		t.Fatalf("failed settle: %d %s", settled.StatusCode(), settled.Body)
	}
	wantStatus(t, "the same failed settle again", b.settle(d, hubuapi.SettleRequest{AmountMicros: 20_000, Failed: &yes, Reason: &reason}), http.StatusOK)
	for name, req := range map[string]hubuapi.SettleRequest{
		"as a success":       {AmountMicros: 20_000},
		"another amount":     {AmountMicros: 25_000, Failed: &yes},
		"nothing charged":    {AmountMicros: 0, Failed: &yes},
		"a plain false flag": {AmountMicros: 20_000, Failed: &no},
	} {
		wantStatus(t, "settle again "+name, b.settle(d, req), http.StatusConflict)
	}
	// A release says nothing was charged: it contradicts the capture.
	wantStatus(t, "release after a failed settle", b.release(d), http.StatusConflict)
	// Without a reason Hubu says what happened.
	other := mustOperation(t, authorize(t, a, newCall("flux-dev")))
	r, _ := b.service.SettleDecisionWithResponse(ctx, *other.DecisionId, hubuapi.SettleRequest{AmountMicros: 25_000, Failed: &yes})
	if r.JSON200 == nil || r.JSON200.State != hubuapi.OperationStateFailed || r.JSON200.FailureReason == nil || r.JSON200.CapturedMicros != 25_000 {
		t.Fatalf("failed settle without a reason: %s", r.Body)
	}
	caps, _ := a.Client.GetCapabilitiesWithResponse(ctx)
	if caps.JSON200.Budget.UsedMicros != 45_000 {
		t.Fatalf("budget used %d, want the two captures", caps.JSON200.Budget.UsedMicros)
	}
}

// Gongbu ran a decision and settles it while Hubu still says dispatching (the hand-off's
// answer was lost): the settle is taken, the hold is captured, and the late hand-off answer
// or a re-send changes nothing.
func TestSettleWhileStillDispatching(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	a := b.NewAgent(t, "agent", nil)
	b.Executor.OnExecute(func(hubu.Decision) error { return errors.New("the executor's answer was lost") })
	op := spend(t, a, newCall("flux-dev"), hubuapi.OperationStateDispatching)
	settled, err := b.service.SettleDecisionWithResponse(ctx, *op.DecisionId, hubuapi.SettleRequest{AmountMicros: 25_000})
	if err != nil || settled.JSON200 == nil {
		t.Fatalf("settle: %v %s", err, settled.Body)
	}
	if s := settled.JSON200; s.State != hubuapi.OperationStateSucceeded || s.CapturedMicros != 25_000 || s.HeldMicros != 0 {
		t.Fatalf("settled: %+v", s)
	}
	b.Executor.OnExecute(func(hubu.Decision) error { return nil })
	b.Clock.Advance(time.Minute)
	if _, err := b.Lifecycle.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	again, err := b.service.SettleDecisionWithResponse(ctx, *op.DecisionId, hubuapi.SettleRequest{AmountMicros: 25_000})
	if err != nil || again.JSON200 == nil || again.JSON200.State != hubuapi.OperationStateSucceeded || again.JSON200.CapturedMicros != 25_000 {
		t.Fatalf("settle again: %v %s", err, again.Body)
	}
}

// A decision whose approval was denied or expired before the agent resumed it was never
// executed: the executor cannot settle or release it into another state.
func TestNoReportForADecisionNeverRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	a := b.NewAgent(t, "agent", nil)
	_, held := heldCall(t, b, a)
	approved, _ := b.Operator.ApproveOperationWithResponse(ctx, held.PublicHandle)
	decision := *approved.JSON200.DecisionId
	if r, _ := b.Operator.DenyOperationWithResponse(ctx, held.PublicHandle, hubuapi.DenyRequest{}); r.JSON200 == nil {
		t.Fatalf("deny: %s", r.Body)
	}
	wantStatus(t, "approving again after the deny", replyOf(b.Operator.ApproveOperationWithResponse(ctx, held.PublicHandle)), http.StatusConflict)
	wantStatus(t, "release of a denied decision", b.release(decision), http.StatusConflict)
	wantStatus(t, "settle of a denied decision", b.settle(decision, hubuapi.SettleRequest{AmountMicros: 60_000}), http.StatusConflict)
	if op, _ := a.Client.GetOperationWithResponse(ctx, held.PublicHandle); op.JSON200.State != hubuapi.OperationStateDenied {
		t.Fatalf("the denied operation moved: %s", op.Body)
	}
}

// The executor reports what the provider stated a job cost beside what it captures: the ledger
// shows the price held and the cost stated, also a cost above the hold, where the hold is what
// was captured.
func TestSettleRecordsTheProvidersCost(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	a := b.NewAgent(t, "agent", nil)
	for _, c := range []struct {
		cost, captured int64
	}{{20_000, 20_000}, {30_000, 25_000}} {
		op := mustOperation(t, authorize(t, a, newCall("flux-dev")))
		wantStatus(t, "a negative cost", b.settle(*op.DecisionId, hubuapi.SettleRequest{AmountMicros: c.captured, ProviderCostMicros: new(int64(-1))}), http.StatusBadRequest)
		settled := b.settle(*op.DecisionId, hubuapi.SettleRequest{AmountMicros: c.captured, ProviderCostMicros: &c.cost})
		wantStatus(t, "settle", settled, http.StatusOK)
		ledger, err := b.Operator.GetOperationLedgerWithResponse(ctx, op.PublicHandle)
		if err != nil || ledger.JSON200 == nil {
			t.Fatalf("ledger: %v", err)
		}
		l := ledger.JSON200
		if l.AmountMicros != 25_000 || l.Currency != "USD" || l.ProviderCostMicros == nil || *l.ProviderCostMicros != c.cost ||
			l.CapturedMicros != c.captured || l.ReleasedMicros != 25_000-c.captured || l.HeldMicros != 0 {
			t.Fatalf("ledger %+v, want the price 25000, the cost %d, %d captured", l, c.cost, c.captured)
		}
		got, _ := a.Client.GetOperationWithResponse(ctx, op.PublicHandle)
		if got.JSON200 == nil || got.JSON200.ProviderCostMicros == nil || *got.JSON200.ProviderCostMicros != c.cost {
			t.Fatalf("operation: %s", got.Body)
		}
	}
}
