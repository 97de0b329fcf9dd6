package httpserver_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"hubu.dev/hubu/proto/hubuapi"
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
