package e2e_test

import (
	"bytes"
	"context"
	"image/jpeg"
	"io"
	"net/http"
	"sync"
	"testing"

	"hubu.dev/hubu/proto/bflapi"
	"hubu.dev/hubu/proto/gongbuapi"
	"hubu.dev/hubu/proto/hubuapi"
	"hubu.dev/hubu/services/gongbu/vendorkey"
)

// A spend goes Hubu → Gongbu → mockflux and back: charged once, captured once, and the
// agent reads the image through Gongbu.
func TestSpendEndToEnd(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newInProcess(t, inProcessOptions{fluxIdempotent: true})
	op := s.spend("flux-dev")
	if op.State != hubuapi.OperationStateExecuting {
		t.Fatalf("after authorize: %s", op.State)
	}
	final := s.settle(op.PublicHandle)
	if final.State != hubuapi.OperationStateSucceeded || final.CapturedMicros != 25_000 || final.HeldMicros != 0 {
		t.Fatalf("final: %+v", final)
	}
	if c := s.charges(); c.Count != 1 || c.TotalMicros != 25_000 || *c.Charges[0].IdempotencyKey != vendorkey.For("bfl", *op.DecisionId) {
		t.Fatalf("charges: %+v", c)
	}
	exec, err := s.agentGongbu.GetOperationExecutionWithResponse(ctx, op.PublicHandle, nil)
	if err != nil || exec.JSON200 == nil || exec.JSON200.State != gongbuapi.Succeeded || exec.JSON200.Result == nil {
		t.Fatalf("execution: %v %s", err, exec.Body)
	}
	resp := must(http.Get(exec.JSON200.Result.ImageUrl))(t)
	img, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if _, err := jpeg.Decode(bytes.NewReader(img)); err != nil { // BFL's default output_format
		t.Fatalf("the result is not a JPEG: %v", err)
	}
	if r, _ := s.otherGongbu.GetOperationExecutionWithResponse(ctx, op.PublicHandle, nil); r.StatusCode() != http.StatusNotFound {
		t.Fatalf("another agent reading the execution: %d", r.StatusCode())
	}
	s.mustAgree()
}

// Twenty deliveries of one decision reach the provider once, even with the provider's own
// idempotency off: Gongbu's record per decision is a layer of its own.
func TestConcurrentDeliveriesOfOneDecision(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newInProcess(t, inProcessOptions{fluxIdempotent: true})
	s.handoff.paused.Store(true)
	op := s.spend("flux-dev")
	if op.State != hubuapi.OperationStateDispatching {
		t.Fatalf("with the hand-off cut: %s", op.State)
	}
	s.arm(bflapi.FaultKindIdempotencyOff, 0)
	req := s.decision(op)
	statuses := make([]int, 20)
	var wg sync.WaitGroup
	for i := range statuses {
		wg.Go(func() {
			r, err := s.asHubu.ExecuteWithResponse(ctx, nil, req)
			if err != nil {
				t.Error(err)
				return
			}
			statuses[i] = r.StatusCode()
		})
	}
	wg.Wait()
	accepted := 0
	for _, st := range statuses {
		switch st {
		case http.StatusAccepted:
			accepted++
		case http.StatusOK:
		default:
			t.Fatalf("statuses %v", statuses)
		}
	}
	if accepted != 1 {
		t.Fatalf("%d deliveries started an execution, want 1 (%v)", accepted, statuses)
	}
	s.requireCharges(1, "after the deliveries")
	s.handoff.paused.Store(false)
	if n := s.resendDecisions(); n != 1 {
		t.Fatalf("Hubu re-sent %d decisions, want 1", n)
	}
	s.requireSettledOnce(op.PublicHandle)
}

// With Gongbu's row gone, the re-sent decision derives the same vendor key, and the
// provider answers with the first job: no new charge.
func TestWipedExecutionFindsTheFirstJob(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newInProcess(t, inProcessOptions{fluxIdempotent: true})
	op := s.spend("flux-pro-1.1")
	s.settle(op.PublicHandle)
	first, _ := s.asHubu.GetExecutionWithResponse(ctx, *op.DecisionId)
	if first.JSON200 == nil || first.JSON200.ProviderJobId == nil {
		t.Fatalf("first execution: %s", first.Body)
	}

	s.wipeGongbu(t)
	again, err := s.asHubu.ExecuteWithResponse(ctx, nil, s.decision(op))
	if err != nil || again.JSON202 == nil {
		t.Fatalf("re-sent decision: %v %s", err, again.Body)
	}
	if *again.JSON202.ProviderJobId != *first.JSON200.ProviderJobId {
		t.Fatalf("the provider started job %s, want the first job %s", *again.JSON202.ProviderJobId, *first.JSON200.ProviderJobId)
	}
	if c := s.charges(); c.Count != 1 || c.TotalMicros != 40_000 {
		t.Fatalf("charges after the re-send: %+v", c)
	}
	for range 5 { // Gongbu polls and reports again; Hubu answers the same settlement
		s.tick()
		s.clock.Advance(pollInterval)
	}
	if e, _ := s.asHubu.GetExecutionWithResponse(ctx, *op.DecisionId); e.JSON200.State != gongbuapi.Succeeded || !*e.JSON200.Reported {
		t.Fatalf("re-run execution: %s", e.Body)
	}
	if final := s.operation(op.PublicHandle); final.CapturedMicros != 40_000 {
		t.Fatalf("Hubu captured %d", final.CapturedMicros)
	}
	s.mustAgree()
}

// Gongbu died after recording "submitting" and after the provider charged, before it
// recorded the job. The Gongbu that takes over resubmits under the same key only when the
// provider honours keys; otherwise the execution is indeterminate and nothing is resubmitted.
func TestCrashWhileSubmitting(t *testing.T) {
	t.Parallel()
	for _, honoured := range []bool{true, false} {
		name := map[bool]string{true: "provider honours keys", false: "provider ignores keys"}[honoured]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := newInProcess(t, inProcessOptions{fluxIdempotent: honoured})
			s.handoff.paused.Store(true)
			op := s.spend("flux-dev")

			// What the dead Gongbu left: its submitting row (lease run out) and the charge.
			d := s.issued(op)
			key := vendorkey.For("bfl", d.DecisionID)
			if _, _, created, err := s.gongbuStore.Insert(context.Background(), d.Decision, key, s.clock.Now(), s.clock.Now()); err != nil || !created {
				t.Fatalf("insert: %v %v", created, err)
			}
			sub := s.submitAtProvider("flux-dev", d.Arguments.Prompt, d.Arguments.Width, &key)

			s.handoff.paused.Store(false)
			s.resendDecisions() // Hubu re-sends; Gongbu has it already
			s.tick()            // the new Gongbu takes the row over
			x := s.execution(op)
			if !honoured {
				if x.State != gongbuapi.Indeterminate {
					t.Fatalf("after takeover without idempotency: %+v", x)
				}
				s.later(3, lease)
				// The dead Gongbu's one charge, and no resubmission.
				s.requireIndeterminateHeld(op)
				return
			}
			if x.State != gongbuapi.Submitted || *x.ProviderJobId != sub.Id {
				t.Fatalf("after takeover: %+v", x)
			}
			s.requireSettledOnce(op.PublicHandle)
		})
	}
}

// The provider charges and then fails to answer (a 500, or a dropped connection). Where it
// honours keys, Gongbu's resubmission finds the same job; where it does not, the execution
// is indeterminate. Either way there is exactly one charge.
func TestChargeThenNoAnswer(t *testing.T) {
	t.Parallel()
	for _, fault := range []bflapi.FaultKind{bflapi.FaultKindChargeThen500, bflapi.FaultKindChargeThenDrop} {
		for _, honoured := range []bool{true, false} {
			t.Run(string(fault)+map[bool]string{true: "/honoured", false: "/ignored"}[honoured], func(t *testing.T) {
				t.Parallel()
				s := newInProcess(t, inProcessOptions{fluxIdempotent: honoured})
				s.arm(fault, 1)
				op := s.spend("flux-dev")
				s.requireCharges(1, "after the fault")
				if !honoured {
					if x := s.execution(op); x.State != gongbuapi.Indeterminate {
						t.Fatalf("without idempotency: %+v", x)
					}
					s.later(1, lease)
					s.requireIndeterminateHeld(op)
					return
				}
				s.clock.Advance(lease) // the failed submission's lease runs out
				s.requireSettledOnce(op.PublicHandle)
			})
		}
	}
}

// Gongbu executes only what Hubu decided: another scope under a real decision id, or a
// decision id Hubu never issued, is refused before the provider is called.
func TestOnlyHubusDecisionsRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newInProcess(t, inProcessOptions{fluxIdempotent: true})
	s.handoff.paused.Store(true)
	op := s.spend("flux-dev")
	req := s.decision(op)

	bigger := req
	bigger.Scope.Model, bigger.Arguments.Model = "flux-pro-1.1-ultra", "flux-pro-1.1-ultra"
	if r, _ := s.asHubu.ExecuteWithResponse(ctx, nil, bigger); r.StatusCode() != http.StatusConflict {
		t.Fatalf("another model: %d %s", r.StatusCode(), r.Body)
	}
	larger := req
	larger.Scope.Size, larger.Arguments.Width, larger.Arguments.Height = "1440x1440", 1440, 1440
	if r, _ := s.asHubu.ExecuteWithResponse(ctx, nil, larger); r.StatusCode() != http.StatusConflict {
		t.Fatalf("another size: %d %s", r.StatusCode(), r.Body)
	}
	forged := req
	forged.DecisionId = [16]byte{1}
	if r, _ := s.asHubu.ExecuteWithResponse(ctx, nil, forged); r.StatusCode() != http.StatusForbidden {
		t.Fatalf("a decision Hubu never issued: %d %s", r.StatusCode(), r.Body)
	}
	asAgent := mustGongbuClient(t, s.gongbuURL, "hubu_agent_not-a-service", http.DefaultClient)
	if r, _ := asAgent.ExecuteWithResponse(ctx, nil, req); r.StatusCode() != http.StatusForbidden {
		t.Fatalf("without Hubu's credential: %d", r.StatusCode())
	}
	s.requireCharges(0, "for refused decisions")
	if list, _ := s.asHubu.ListExecutionsWithResponse(ctx); len(list.JSON200.Executions) != 0 {
		t.Fatalf("refused decisions were recorded: %s", list.Body)
	}
	// The decision as issued still runs.
	s.handoff.paused.Store(false)
	s.resendDecisions()
	s.requireSettledOnce(op.PublicHandle)
}
