package e2e_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"hubu.dev/hubu/proto/bflapi"
	"hubu.dev/hubu/proto/gongbuapi"
	"hubu.dev/hubu/proto/hubuapi"
	"hubu.dev/hubu/services/gongbu/vendorkey"
)

// The first submission is charged and answered with a 500; Gongbu's takeover resubmits under
// the same key and the provider refuses that second request (401, 402, 403, 422, 429). The
// refusal says nothing of the first charge: Hubu keeps the hold, the reconciliation names the
// execution, and an operator's `gongbu resolve` settles it.
func TestRefusedResubmissionKeepsTheHold(t *testing.T) {
	t.Parallel()
	for _, status := range []int{http.StatusUnauthorized, http.StatusPaymentRequired, http.StatusForbidden,
		http.StatusUnprocessableEntity, http.StatusTooManyRequests} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			t.Parallel()
			s := newInProcess(t, inProcessOptions{fluxIdempotent: true, gate: true})
			s.arm(bflapi.FaultKindChargeThen500, 1)
			op := s.spend("flux-dev")
			s.requireCharges(1, "after the first submission")
			if x := s.execution(op); x.State != gongbuapi.Submitting {
				t.Fatalf("after the 500: %s", x.State)
			}
			// The first takeover meets a 503 (unknown: the lease runs out again), the second
			// the refusal.
			s.gate.refuseNext(http.StatusServiceUnavailable)
			s.gate.refuseNext(status)
			s.later(3, lease+pollInterval)
			x := s.execution(op)
			if x.State != gongbuapi.Indeterminate || x.Reported == nil || *x.Reported || x.ChargedMicros != nil {
				t.Fatalf("after the refused resubmission: %+v", x)
			}
			if o := s.operation(op.PublicHandle); o.State != hubuapi.OperationStateExecuting || o.HeldMicros != 25_000 || o.CapturedMicros != 0 {
				t.Fatalf("Hubu released a hold the provider charged for: %+v", o)
			}
			r := s.reconcile()
			if len(r.Mismatches) != 1 || !strings.Contains(r.Mismatches[0], "indeterminate") || !strings.Contains(r.Mismatches[0], "charged 25000") {
				t.Fatalf("reconciliation:\n%s", r)
			}

			out := gongbuResolve(t, s.gongbuDB, op.DecisionId.String(), "--charged-micros", "25000")
			if !strings.Contains(out, "resolved: succeeded") {
				t.Fatalf("resolve: %s", out)
			}
			s.tick()
			if o := s.operation(op.PublicHandle); o.State != hubuapi.OperationStateSucceeded || o.CapturedMicros != 25_000 || o.HeldMicros != 0 {
				t.Fatalf("after the resolution: %+v", o)
			}
			s.requireCharges(1, "after the resolution")
			s.mustAgree()
		})
	}
}

// mockflux answers 422 when the key was used before with another body: the key was charged,
// so this is no refusal, even on a decision's first submission. Gongbu keeps the hold and
// re-sends a bounded number of times; then the execution is indeterminate.
func TestKeyReusedIsNoRefusal(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newInProcess(t, inProcessOptions{fluxIdempotent: true})
	s.handoff.paused.Store(true)
	op := s.spend("flux-dev")
	key := vendorkey.For("bfl", *op.DecisionId)
	s.submitAtProvider("flux-dev", "something else", 512, &key) // an earlier request under the key
	// Hubu's first hand-off of the decision (the paused one never left Hubu's test executor,
	// but Hubu counted it: this is hand-off 1 as Gongbu sees it).
	resp, err := s.asHubu.ExecuteWithResponse(ctx, nil, s.decision(op))
	if err != nil || resp.JSON202 == nil {
		t.Fatalf("execute: %v %s", err, resp.Body)
	}
	if resp.JSON202.State != gongbuapi.Submitting {
		t.Fatalf("after the 422: %s; a key used before is no refusal", resp.JSON202.State)
	}
	if o := s.operation(op.PublicHandle); o.HeldMicros != 25_000 || o.State == hubuapi.OperationStateFailed {
		t.Fatalf("Hubu after the 422: %+v", o)
	}
	s.later(12, lease+pollInterval)
	x := s.execution(op)
	if x.State != gongbuapi.Indeterminate || x.Error == nil || !strings.Contains(*x.Error, "resubmissions") {
		t.Fatalf("after the takeovers: %+v", x)
	}
	if o := s.operation(op.PublicHandle); o.HeldMicros != 25_000 {
		t.Fatalf("Hubu's hold: %+v", o)
	}
	s.requireCharges(1, "(the earlier request's)")
}

// Gongbu ran the decision (and the provider charged), but its answer never reached Hubu, which
// stays dispatching; then Gongbu lost its row. Hubu re-sends the decision as its second
// hand-off: Gongbu, which cannot tell this from a new decision by its own records, must not
// submit it again where the provider does not honour keys; where it does, the same key finds
// the first job.
func TestLostHandOffAnswerAndLostRow(t *testing.T) {
	t.Parallel()
	for _, honoured := range []bool{false, true} {
		t.Run(map[bool]string{false: "provider ignores keys", true: "provider honours keys"}[honoured], func(t *testing.T) {
			t.Parallel()
			s := newInProcess(t, inProcessOptions{fluxIdempotent: honoured})
			s.handoff.loseReply.Store(true)
			op := s.spend("flux-dev")
			if op.State != hubuapi.OperationStateDispatching {
				t.Fatalf("with the answer lost: %s", op.State)
			}
			s.requireCharges(1, "after the first hand-off")
			s.wipeGongbu(t)
			s.handoff.loseReply.Store(false)
			if n := s.resendDecisions(); n != 1 {
				t.Fatalf("Hubu re-sent %d decisions, want 1", n)
			}
			s.requireCharges(1, "after the re-sent decision")
			if !honoured {
				s.requireIndeterminateHeld(op)
				return
			}
			s.requireSettledOnce(op.PublicHandle)
		})
	}
}

// An indeterminate execution is resolved by an operator with `gongbu resolve`, and the
// running Gongbu reports the verdict to Hubu: what was charged is captured, or the hold is
// released. The three records then agree.
func TestResolveAnIndeterminateExecution(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		fault   bflapi.FaultKind
		verdict []string
		state   hubuapi.OperationState
		capture int64
	}{
		{bflapi.FaultKindChargeThen500, []string{"--charged-micros", "25000"}, hubuapi.OperationStateSucceeded, 25_000},
		{bflapi.FaultKindFailBeforeCharge, []string{"--not-charged"}, hubuapi.OperationStateFailed, 0},
	} {
		t.Run(string(c.fault), func(t *testing.T) {
			t.Parallel()
			s := newInProcess(t, inProcessOptions{fluxIdempotent: false})
			s.arm(c.fault, 1)
			op := s.spend("flux-dev")
			if x := s.execution(op); x.State != gongbuapi.Indeterminate {
				t.Fatalf("%s", x.State)
			}
			if r := s.reconcile(); len(r.Mismatches) != 1 || !strings.Contains(r.Mismatches[0], "gongbu resolve") {
				t.Fatalf("reconciliation before:\n%s", r)
			}
			gongbuResolve(t, s.gongbuDB, op.DecisionId.String(), c.verdict...)
			s.tick()
			o := s.operation(op.PublicHandle)
			if o.State != c.state || o.CapturedMicros != c.capture || o.HeldMicros != 0 {
				t.Fatalf("after the resolution: %+v", o)
			}
			if x := s.execution(op); x.Reported == nil || !*x.Reported || x.ResolvedAt == nil {
				t.Fatalf("not reported, or not marked resolved: %+v", x)
			}
			s.mustAgree()
		})
	}
}

// The provider takes a job and ends it without a result, which it does not charge for (BFL:
// moderated, or an error): Hubu releases the whole hold and records the operation as failed
// with the provider's reason, not as a success without an image; the provider's ledger, where
// the charge was refunded, agrees.
func TestUnchargedFailureIsReleased(t *testing.T) {
	t.Parallel()
	for _, kind := range []bflapi.FaultKind{bflapi.FaultKindRequestModerated, bflapi.FaultKindContentModerated, bflapi.FaultKindTaskError} {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			s := newInProcess(t, inProcessOptions{})
			s.arm(kind, 1)
			op := s.spend("flux-dev")
			final := s.settle(op.PublicHandle)
			if final.State != hubuapi.OperationStateFailed || final.CapturedMicros != 0 || final.ReleasedMicros != 25_000 || final.HeldMicros != 0 ||
				final.FailureReason == nil || !strings.Contains(*final.FailureReason, "charges nothing") {
				t.Fatalf("final: %+v", final)
			}
			if x := s.execution(op); x.State != gongbuapi.Failed || x.Result != nil || x.ChargedMicros == nil || *x.ChargedMicros != 0 {
				t.Fatalf("execution: %+v", x)
			}
			// The agent reads its failed execution, and so does an operator (Hubu lets both read it).
			for _, c := range []*gongbuapi.ClientWithResponses{s.agentGongbu, mustGongbuClient(t, s.gongbuURL, s.hubu.OperatorToken, http.DefaultClient)} {
				r, err := c.GetOperationExecutionWithResponse(context.Background(), op.PublicHandle, nil)
				if err != nil || r.JSON200 == nil || r.JSON200.State != gongbuapi.Failed {
					t.Fatalf("read the execution: %v %s", err, r.Body)
				}
			}
			s.mustAgree()
		})
	}
}

// A live system reconciles: an operation under way is listed as in flight, and the command
// exits 0.
func TestReconcileWhileInFlight(t *testing.T) {
	t.Parallel()
	s := newInProcess(t, inProcessOptions{fluxIdempotent: true})
	op := s.spend("flux-dev") // submitted and charged; not yet polled
	r := s.reconcile()
	if len(r.Mismatches) != 0 || len(r.InFlight) != 1 || !strings.Contains(r.InFlight[0], "Hubu executing, Gongbu submitted") {
		t.Fatalf("reconciliation while in flight:\n%s", r)
	}
	if out, err := s.reconcileCommand("test-key"); err != nil || !strings.Contains(out, "in agreement (1 still in flight)") {
		t.Fatalf("gongbu reconcile: %v\n%s", err, out)
	}
	s.settle(op.PublicHandle)
	s.mustAgree()
}
