package e2e_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"hubu.dev/hubu/proto/bflapi"
	"hubu.dev/hubu/proto/hubuapi"
)

// Hand-offs that never reached Gongbu (a proxy's 502, Gongbu refusing while it starts, Hubu
// killed between counting a hand-off and making it) are no evidence of a provider call: with
// a provider that ignores idempotency keys the decision is still submitted, once, and charged
// once, instead of waiting as indeterminate for an operator.
func TestFailedHandOffsAreNoEvidence(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newInProcess(t, inProcessOptions{fluxIdempotent: false})
	s.arm(bflapi.IdempotencyOff, 0)
	s.handoff.paused.Store(true)
	op := s.spend("flux-dev") // the first hand-off fails on the way
	for range 3 {
		s.clock.Advance(11 * time.Second)
		if _, err := s.hubu.Lifecycle.Recover(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if o := s.operation(op.PublicHandle); o.State != hubuapi.OperationStateDispatching || s.charges().Count != 0 {
		t.Fatalf("after the failed hand-offs: %s, %d charges", o.State, s.charges().Count)
	}
	s.handoff.paused.Store(false)
	s.clock.Advance(11 * time.Second)
	if n, err := s.hubu.Lifecycle.Recover(ctx); err != nil || n != 1 {
		t.Fatalf("the hand-off that arrives: %d %v", n, err)
	}
	if final := s.settle(op.PublicHandle); final.State != hubuapi.OperationStateSucceeded || final.CapturedMicros != 25_000 {
		t.Fatalf("final: %+v", final)
	}
	if c := s.charges(); c.Count != 1 {
		t.Fatalf("%d charges, want 1", c.Count)
	}
	s.mustAgree()
}

// Redeliveries of a call race its first hand-off: each replay re-sends the decision while it
// is still dispatching. Gongbu runs it once, and with a provider that ignores idempotency keys
// the only submission is not mistaken for a repeated one.
func TestRedeliveriesRacingTheFirstHandOff(t *testing.T) {
	t.Parallel()
	s := newInProcess(t, inProcessOptions{fluxIdempotent: false})
	s.arm(bflapi.IdempotencyOff, 0)
	req := newSpend("flux-dev")
	var wg sync.WaitGroup
	handles := make([]string, 8)
	codes := make([]int, 8)
	for i := range handles {
		wg.Add(1)
		go func() {
			defer wg.Done()
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
		}()
	}
	wg.Wait()
	for i, h := range handles {
		if h != req.PublicHandle {
			t.Fatalf("delivery %d: status %d, handle %q", i, codes[i], h)
		}
	}
	if final := s.settle(req.PublicHandle); final.State != hubuapi.OperationStateSucceeded || final.CapturedMicros != 25_000 {
		t.Fatalf("final: %+v", final)
	}
	if c := s.charges(); c.Count != 1 {
		t.Fatalf("%d charges, want 1", c.Count)
	}
	s.mustAgree()
}
