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

func TestSettleAndRelease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	a := b.newAgent(t, "agent", nil)

	op := mustOperation(t, authorize(t, a, newCall("flux-dev")))
	d := *op.DecisionId
	if r, _ := b.service.SettleDecisionWithResponse(ctx, d, hubuapi.SettleRequest{AmountMicros: 25_001}); r.StatusCode() != http.StatusBadRequest {
		t.Fatalf("capture above the authorized amount: %d %s", r.StatusCode(), r.Body)
	}
	dec, _ := b.service.GetDecisionWithResponse(ctx, d)
	if dec.JSON200 == nil || dec.JSON200.Scope.Model != "flux-dev" || dec.JSON200.AmountMicros != 25_000 || dec.JSON200.Arguments.Prompt != "an origami fox" {
		t.Fatalf("decision: %s", dec.Body)
	}
	settled, _ := b.service.SettleDecisionWithResponse(ctx, d, hubuapi.SettleRequest{AmountMicros: 25_000})
	if settled.JSON200 == nil || settled.JSON200.State != hubuapi.OperationStateSucceeded || settled.JSON200.CapturedMicros != 25_000 || settled.JSON200.ReleasedMicros != 0 {
		t.Fatalf("settle: %s", settled.Body)
	}
	if again, _ := b.service.SettleDecisionWithResponse(ctx, d, hubuapi.SettleRequest{AmountMicros: 25_000}); again.JSON200 == nil {
		t.Fatalf("settle again with the same amount: %d %s", again.StatusCode(), again.Body)
	}
	if other, _ := b.service.SettleDecisionWithResponse(ctx, d, hubuapi.SettleRequest{AmountMicros: 1}); other.StatusCode() != http.StatusConflict {
		t.Fatalf("settle again with another amount: %d", other.StatusCode())
	}
	if rel, _ := b.service.ReleaseDecisionWithResponse(ctx, d, hubuapi.ReleaseRequest{}); rel.StatusCode() != http.StatusConflict {
		t.Fatalf("release after settle: %d", rel.StatusCode())
	}
	if n := count(t, b.pool, "SELECT count(*) FROM ledger_entries WHERE kind = 'capture'"); n != 1 {
		t.Fatalf("%d captures, want 1", n)
	}

	failed := mustOperation(t, authorize(t, a, newCall("flux-dev")))
	reason := "provider refused the prompt"
	rel, _ := b.service.ReleaseDecisionWithResponse(ctx, *failed.DecisionId, hubuapi.ReleaseRequest{Reason: &reason})
	if rel.JSON200 == nil || rel.JSON200.State != hubuapi.OperationStateFailed || rel.JSON200.ReleasedMicros != 25_000 || rel.JSON200.HeldMicros != 0 {
		t.Fatalf("release: %s", rel.Body)
	}
	if again, _ := b.service.ReleaseDecisionWithResponse(ctx, *failed.DecisionId, hubuapi.ReleaseRequest{}); again.JSON200 == nil {
		t.Fatalf("release again: %d", again.StatusCode())
	}
	if s, _ := b.service.SettleDecisionWithResponse(ctx, *failed.DecisionId, hubuapi.SettleRequest{AmountMicros: 0}); s.StatusCode() != http.StatusConflict {
		t.Fatalf("settle after release: %d", s.StatusCode())
	}
	if r, _ := b.service.SettleDecisionWithResponse(ctx, uuid.New(), hubuapi.SettleRequest{}); r.StatusCode() != http.StatusNotFound {
		t.Fatalf("unknown decision: %d", r.StatusCode())
	}
	caps, _ := a.client.GetCapabilitiesWithResponse(ctx)
	if caps.JSON200.Budget.UsedMicros != 25_000 {
		t.Fatalf("budget used %d, want only the capture", caps.JSON200.Budget.UsedMicros)
	}
	// The ledger refuses to be rewritten.
	if _, err := b.pool.Exec(ctx, "UPDATE ledger_entries SET amount_micros = 1"); err == nil {
		t.Fatal("ledger entries could be updated")
	}
	if _, err := b.pool.Exec(ctx, "DELETE FROM ledger_entries"); err == nil {
		t.Fatal("ledger entries could be deleted")
	}
}

// A crash between the decision and the hand-off leaves the operation dispatching; recovery
// re-sends the same decision, and a re-delivered call continues it rather than starting anew.
func TestHandoffRecovery(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	a := b.newAgent(t, "agent", nil)
	b.exec.FailNext(2)
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
	if n, err := b.life.Recover(ctx); err != nil || n != 0 {
		t.Fatalf("recover too early: %d %v", n, err)
	}
	b.clock.Advance(11 * time.Second)
	if n, err := b.life.Recover(ctx); err != nil || n != 1 {
		t.Fatalf("recover: %d %v", n, err)
	}
	got, _ := a.client.GetOperationWithResponse(ctx, op.PublicHandle)
	if got.JSON200.State != hubuapi.OperationStateExecuting {
		t.Fatalf("after recovery: %s", got.Body)
	}
	ds := b.exec.Decisions()
	if len(ds) != 1 || ds[0].DecisionID != *op.DecisionId {
		t.Fatalf("executor decisions: %+v", ds)
	}
	if !strings.Contains(b.logs.String(), "hand-off to the executor failed") {
		t.Fatalf("the failed hand-off was not logged: %s", b.logs.String())
	}
	b.clock.Advance(time.Minute)
	if n, _ := b.life.Recover(ctx); n != 0 {
		t.Fatalf("recovery re-sent an acknowledged decision")
	}
}

// Every hand-off is counted, and the count committed, before the executor is called: the
// executor reads it back (GET /v1/decisions/{id}) to tell a decision's first hand-off from a
// re-sent one. A hand-off that never reached the executor gives its count back.
func TestDispatchAttemptsAreCountedBeforeEachHandOff(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	a := b.newAgent(t, "agent", nil)
	var mu sync.Mutex
	var seen []int
	fail := []error{
		errors.New("the answer was lost"),                          // may have reached the executor: counted
		fmt.Errorf("dial: %w", hubu.ErrNotDelivered),               // never reached it: given back
		fmt.Errorf("connection refused: %w", hubu.ErrNotDelivered), // given back
		nil, // accepted
	}
	b.exec.OnExecute(func(d hubu.Decision) error {
		// What the executor sees when it asks Hubu during the hand-off.
		dec, err := b.service.GetDecisionWithResponse(ctx, d.DecisionID)
		if err != nil || dec.JSON200 == nil {
			return fmt.Errorf("get decision: %v", err)
		}
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, dec.JSON200.DispatchAttempts)
		next := fail[0]
		fail = fail[1:]
		return next
	})
	c := newCall("flux-dev")
	op := mustOperation(t, authorize(t, a, c))
	if op.State != hubuapi.OperationStateDispatching {
		t.Fatalf("after the first hand-off: %s", op.State)
	}
	decision := func() hubuapi.Decision {
		t.Helper()
		dec, _ := b.service.GetDecisionWithResponse(ctx, *op.DecisionId)
		if dec.JSON200 == nil {
			t.Fatalf("decision: %s", dec.Body)
		}
		return *dec.JSON200
	}
	if d := decision(); d.DispatchAttempts != 1 || d.State != hubuapi.OperationStateDispatching {
		t.Fatalf("after a hand-off whose answer was lost: %+v", d)
	}
	authorize(t, a, c) // the re-delivered call re-sends the decision; it never arrives
	if d := decision(); d.DispatchAttempts != 1 {
		t.Fatalf("after a hand-off that never arrived: %d, want it given back", d.DispatchAttempts)
	}
	for range 2 { // Recover re-sends, once undelivered, then accepted
		b.clock.Advance(11 * time.Second)
		if _, err := b.life.Recover(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if d := decision(); d.DispatchAttempts != 2 || d.State != hubuapi.OperationStateExecuting {
		t.Fatalf("after the accepted hand-off: %+v", d)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []int{1, 2, 2, 2}; fmt.Sprint(seen) != fmt.Sprint(want) {
		t.Fatalf("the executor saw counts %v, want %v: each hand-off counted before it is made", seen, want)
	}
	// An executing operation is not handed off again, and its count stays.
	b.clock.Advance(time.Minute)
	if _, err := b.life.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	if d := decision(); d.DispatchAttempts != 2 {
		t.Fatalf("after recovery of an executing operation: %d", d.DispatchAttempts)
	}
}

// A provider that charged for work it then failed: the executor settles what was charged and
// says it failed. The operation is failed, with the reason, and the charge is captured.
func TestSettleAFailedExecution(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	a := b.newAgent(t, "agent", nil)
	op := mustOperation(t, authorize(t, a, newCall("flux-dev")))
	d := *op.DecisionId
	yes, no := true, false
	reason := "the provider failed the job: Content Moderated"
	if r, _ := b.service.SettleDecisionWithResponse(ctx, d, hubuapi.SettleRequest{AmountMicros: 25_000, Failed: &no, Reason: &reason}); r.StatusCode() != http.StatusBadRequest {
		t.Fatalf("a reason without failed: %d %s", r.StatusCode(), r.Body)
	}
	long := strings.Repeat("x", 501)
	if r, _ := b.service.SettleDecisionWithResponse(ctx, d, hubuapi.SettleRequest{AmountMicros: 25_000, Failed: &yes, Reason: &long}); r.StatusCode() != http.StatusBadRequest {
		t.Fatalf("a reason too long: %d %s", r.StatusCode(), r.Body)
	}
	settled, _ := b.service.SettleDecisionWithResponse(ctx, d, hubuapi.SettleRequest{AmountMicros: 20_000, Failed: &yes, Reason: &reason})
	o := settled.JSON200
	if o == nil || o.State != hubuapi.OperationStateFailed || o.CapturedMicros != 20_000 || o.ReleasedMicros != 5_000 || o.HeldMicros != 0 ||
		o.FailureReason == nil || *o.FailureReason != reason {
		t.Fatalf("failed settle: %d %s", settled.StatusCode(), settled.Body)
	}
	if again, _ := b.service.SettleDecisionWithResponse(ctx, d, hubuapi.SettleRequest{AmountMicros: 20_000, Failed: &yes, Reason: &reason}); again.JSON200 == nil {
		t.Fatalf("the same failed settle again: %d %s", again.StatusCode(), again.Body)
	}
	for name, req := range map[string]hubuapi.SettleRequest{
		"as a success":       {AmountMicros: 20_000},
		"another amount":     {AmountMicros: 25_000, Failed: &yes},
		"nothing charged":    {AmountMicros: 0, Failed: &yes},
		"a plain false flag": {AmountMicros: 20_000, Failed: &no},
	} {
		if r, _ := b.service.SettleDecisionWithResponse(ctx, d, req); r.StatusCode() != http.StatusConflict {
			t.Fatalf("settle again %s: %d %s", name, r.StatusCode(), r.Body)
		}
	}
	// A release says nothing was charged: it contradicts the capture.
	if r, _ := b.service.ReleaseDecisionWithResponse(ctx, d, hubuapi.ReleaseRequest{}); r.StatusCode() != http.StatusConflict {
		t.Fatalf("release after a failed settle: %d %s", r.StatusCode(), r.Body)
	}
	// Without a reason Hubu says what happened.
	other := mustOperation(t, authorize(t, a, newCall("flux-dev")))
	r, _ := b.service.SettleDecisionWithResponse(ctx, *other.DecisionId, hubuapi.SettleRequest{AmountMicros: 25_000, Failed: &yes})
	if r.JSON200 == nil || r.JSON200.State != hubuapi.OperationStateFailed || r.JSON200.FailureReason == nil || r.JSON200.CapturedMicros != 25_000 {
		t.Fatalf("failed settle without a reason: %s", r.Body)
	}
	caps, _ := a.client.GetCapabilitiesWithResponse(ctx)
	if caps.JSON200.Budget.UsedMicros != 45_000 {
		t.Fatalf("budget used %d, want the two captures", caps.JSON200.Budget.UsedMicros)
	}
}
