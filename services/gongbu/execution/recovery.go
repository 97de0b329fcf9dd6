package execution

import (
	"context"
	"fmt"
	"time"

	"hubu.dev/hubu/services/gongbu"
)

// Tick does one pass of background work: it takes over submissions whose worker died,
// polls submitted jobs that are due, and reports final outcomes Hubu has not been told.
func (s *Service) Tick(ctx context.Context) error {
	open, err := s.Store.ListClaimable(ctx, s.Now(), 100)
	if err != nil {
		return err
	}
	for _, o := range open {
		// Each claim takes its own now: the work on the claims before it may have taken
		// longer than a lease, and a lease must be counted from when it is taken.
		now := s.Now()
		exec, ok, err := s.Store.Claim(ctx, o.DecisionID, o.State, now.Add(s.Lease), now)
		if err != nil {
			return err
		}
		if !ok {
			continue // another worker took it
		}
		provider, found := s.Providers[exec.Scope.Provider]
		if !found {
			s.finish(ctx, exec, gongbu.Indeterminate("no adapter for provider "+exec.Scope.Provider))
			continue
		}
		switch exec.State {
		case gongbu.StateSubmitting:
			s.recoverSubmission(ctx, provider, exec)
		case gongbu.StateSubmitted:
			s.poll(ctx, provider, exec, TriggerPass)
		}
	}
	unreported, err := s.Store.ListUnreported(ctx, 100)
	if err != nil {
		return err
	}
	for _, exec := range unreported {
		s.report(ctx, exec)
	}
	return s.fetchMissingImages(ctx)
}

// recoverSubmission handles an execution found in submitting after its worker's lease ran
// out: the provider may or may not have the job. It is re-sent under the same key where the
// provider honours keys, a bounded number of times and for a bounded time; it is never a
// first submission.
func (s *Service) recoverSubmission(ctx context.Context, provider gongbu.Provider, exec gongbu.Execution) {
	if job, ok := s.unrecorded.find(exec.DecisionID); ok {
		// The provider accepted the job; only its record failed, in this process.
		s.logger().InfoContext(ctx, "recording a submitted job whose record failed before", "decision_id", exec.DecisionID, "job_id", job.ID)
		if next, err := s.recordJob(ctx, exec, job); err == nil {
			s.watch(provider, next)
		}
		return
	}
	if !provider.HonoursIdempotencyKeys() {
		s.finish(ctx, exec, gongbu.Indeterminate(
			"Gongbu stopped while submitting and the provider does not honour idempotency keys, so it may have charged; not resubmitted"))
		return
	}
	switch age := s.Now().Sub(exec.CreatedAt); {
	case exec.Attempts > orDefault(s.MaxTakeovers, DefaultMaxTakeovers):
		s.finish(ctx, exec, gongbu.Indeterminate(fmt.Sprintf(
			"the submission's outcome stayed unknown through %d resubmissions under its idempotency key; not resubmitted again", exec.Attempts-1)))
	case age > orDefault(s.SubmitDeadline, DefaultSubmitDeadline):
		s.finish(ctx, exec, gongbu.Indeterminate(fmt.Sprintf(
			"the submission's outcome is still unknown %s after it was recorded; not resubmitted again", age.Round(time.Second))))
	default:
		s.logger().InfoContext(ctx, "resubmitting under the same idempotency key", "decision_id", exec.DecisionID, "attempt", exec.Attempts)
		s.submit(ctx, provider, exec, false)
	}
}

// Run calls Tick every interval until ctx ends.
func (s *Service) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if err := s.Tick(ctx); err != nil && ctx.Err() == nil {
			s.logger().ErrorContext(ctx, "background pass failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
