package e2e_test

import (
	"context"
	"sync"
	"testing"

	"hubu.dev/hubu/proto/hubuapi"
	"hubu.dev/hubu/services/hubu/hubutest"
)

// Hand-offs that never reached Gongbu (a proxy's 502, Gongbu refusing while it starts, Hubu
// killed between counting a hand-off and making it) are no evidence of a provider call: with
// a provider that ignores idempotency keys the decision is still submitted, once, and charged
// once, instead of waiting as indeterminate for an operator.
func TestFailedHandOffsAreNoEvidence(t *testing.T) {
	t.Parallel()
	s := newInProcess(t, inProcessOptions{fluxIdempotent: false})
	s.handoff.paused.Store(true)
	op := s.spend("flux-dev") // the first hand-off fails on the way
	for range 3 {
		s.resendDecisions()
	}
	if o := s.operation(op.PublicHandle); o.State != hubuapi.OperationStateDispatching || s.charges().Count != 0 {
		t.Fatalf("after the failed hand-offs: %s, %d charges", o.State, s.charges().Count)
	}
	s.handoff.paused.Store(false)
	if n := s.resendDecisions(); n != 1 {
		t.Fatalf("the hand-off that arrives: %d decisions re-sent, want 1", n)
	}
	s.requireSettledOnce(op.PublicHandle)
}

// Redeliveries of a call race its first hand-off: each replay re-sends the decision while it
// is still dispatching. Gongbu runs it once, and with a provider that ignores idempotency keys
// the only submission is not mistaken for a repeated one.
func TestRedeliveriesRacingTheFirstHandOff(t *testing.T) {
	t.Parallel()
	s := newInProcess(t, inProcessOptions{fluxIdempotent: false})
	req := hubutest.NewCall("flux-dev").Request()
	var wg sync.WaitGroup
	handles := make([]string, 8)
	codes := make([]int, 8)
	for i := range handles {
		wg.Go(func() {
			resp, err := s.agent.AuthorizeWithResponse(context.Background(), req)
			if err != nil {
				return
			}
			codes[i] = resp.StatusCode()
			switch {
			case resp.JSON201 != nil:
				handles[i] = resp.JSON201.PublicHandle
			case resp.JSON200 != nil:
				handles[i] = resp.JSON200.PublicHandle
			}
		})
	}
	wg.Wait()
	for i, h := range handles {
		if h != req.PublicHandle {
			t.Fatalf("delivery %d: status %d, handle %q", i, codes[i], h)
		}
	}
	s.requireSettledOnce(req.PublicHandle)
}
