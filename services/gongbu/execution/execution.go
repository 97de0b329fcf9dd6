// Package execution runs decisions: at most one provider call per decision, recorded as
// "submitting" before the call so that a crash is never silent; then polling with a
// deadline; then reporting the outcome to Hubu, which settles or releases the hold.
//
// Every open execution carries a lease. The worker that holds it is the only one acting on
// it; when a worker dies its lease runs out and Tick, in this or another process, takes it
// over: a submission is re-sent under the same idempotency key only when the provider
// honours keys, and otherwise becomes indeterminate, never a blind second charge.
package execution

import (
	"context"
	"log/slog"
	"time"

	"github.com/google/uuid"

	"hubu.dev/hubu/services/gongbu"
	"hubu.dev/hubu/services/gongbu/postgres"
	"hubu.dev/hubu/services/gongbu/vendorkey"
)

// Service executes decisions.
type Service struct {
	Store     *postgres.Store
	Providers map[string]gongbu.Provider
	Authority gongbu.Authority
	Logger    *slog.Logger
	Now       func() time.Time
	// Lease is how long a worker owns an open execution before another may take it over.
	Lease time.Duration
	// PollInterval is the wait between two polls of one job.
	PollInterval time.Duration
	// PollDeadline is how long a job may stay pending before it becomes indeterminate.
	PollDeadline time.Duration
}

// executableStates are the Hubu operation states in which a decision may run: handed off,
// or already accepted or even settled (a re-sent decision then finds the provider's first job
// under the same key, where the provider honours keys).
var executableStates = map[string]bool{"dispatching": true, "executing": true, "succeeded": true}

// Execute runs a decision once. A decision seen before returns its execution as it stands
// (created false) and never reaches the provider again. A request that differs from what
// Hubu issued is refused before anything is written.
func (s *Service) Execute(ctx context.Context, req gongbu.Decision) (gongbu.Execution, bool, error) {
	provider, ok := s.Providers[req.Scope.Provider]
	if !ok {
		return gongbu.Execution{}, false, gongbu.Errorf(gongbu.CodeInvalidArguments, "no adapter for provider %q", req.Scope.Provider)
	}
	if existing, err := s.Store.Get(ctx, req.DecisionID); err == nil {
		if !existing.Decision.SameWork(req) {
			return gongbu.Execution{}, false, gongbu.Errorf(gongbu.CodeDecisionMismatch, "the request differs from the decision being executed")
		}
		return existing, false, nil
	} else if gongbu.ErrorCode(err) != gongbu.CodeNotFound {
		return gongbu.Execution{}, false, err
	}

	issued, state, err := s.Authority.Decision(ctx, req.DecisionID)
	switch {
	case gongbu.ErrorCode(err) == gongbu.CodeNotFound:
		return gongbu.Execution{}, false, gongbu.Errorf(gongbu.CodeForbidden, "Hubu did not issue this decision")
	case err != nil:
		s.logger().WarnContext(ctx, "cannot check a decision with Hubu", "decision_id", req.DecisionID, "err", err)
		return gongbu.Execution{}, false, gongbu.Errorf(gongbu.CodeUnavailable, "Hubu cannot be reached to check the decision")
	case !issued.SameWork(req):
		return gongbu.Execution{}, false, gongbu.Errorf(gongbu.CodeDecisionMismatch,
			"the request's scope, arguments or amount differ from the decision Hubu issued")
	case !executableStates[state]:
		return gongbu.Execution{}, false, gongbu.Errorf(gongbu.CodeForbidden, "the decision's operation is %s, not executable", state)
	}

	now := s.Now()
	exec, created, err := s.Store.Insert(ctx, issued, vendorkey.For(provider.Name(), issued.DecisionID), now.Add(s.Lease), now)
	if err != nil || !created {
		return exec, false, err
	}
	if state != "dispatching" && !provider.HonoursIdempotencyKeys() {
		// Hubu moves an operation past dispatching only once Gongbu has accepted its decision,
		// so this Gongbu held it before and has lost its record. The provider may have the
		// job already, and without an honoured key a second submit could be a second charge.
		msg := "Hubu says this decision was handed to Gongbu before (operation " + state +
			") but Gongbu has no record of it, and the provider does not honour idempotency keys, so it may have charged; not resubmitted"
		return s.finish(context.WithoutCancel(ctx), exec, gongbu.StateIndeterminate, nil, &msg, nil), true, nil
	}
	return s.submit(ctx, provider, exec), true, nil
}

// submit calls the provider for an execution this worker holds in submitting.
//
// The call and the record of its outcome do not end with the caller's context: Hubu's HTTP
// client may give up (its timeout is shorter than the provider's) or the process may begin
// shutting down while the provider is answering. Abandoning the call then would lose a job
// the provider already charged for, and with a provider that does not honour keys turn a
// good execution into an indeterminate one. The adapter's own timeout bounds the call.
func (s *Service) submit(ctx context.Context, provider gongbu.Provider, exec gongbu.Execution) gongbu.Execution {
	ctx = context.WithoutCancel(ctx)
	job, err := provider.Submit(ctx, exec.VendorKey, exec.Decision)
	now := s.Now()
	switch {
	case err == nil:
		next, err := s.Store.MarkSubmitted(ctx, exec.DecisionID, job, now.Add(s.PollDeadline), now, now)
		if err != nil {
			// The job exists but is not recorded: the lease runs out and Tick resubmits
			// under the same key (or marks it indeterminate).
			s.logger().ErrorContext(ctx, "could not record a submitted job", "decision_id", exec.DecisionID, "err", err)
			return exec
		}
		return next
	case gongbu.IsRejected(err):
		msg := err.Error()
		zero := int64(0)
		return s.finish(ctx, exec, gongbu.StateFailed, nil, &msg, &zero)
	case provider.HonoursIdempotencyKeys():
		s.logger().WarnContext(ctx, "provider call failed; it will be re-sent under the same key",
			"decision_id", exec.DecisionID, "err", err)
		return exec // the lease runs out and Tick resubmits
	default:
		msg := "the provider call failed and the provider does not honour idempotency keys, so Gongbu cannot tell whether it charged: " + err.Error()
		return s.finish(ctx, exec, gongbu.StateIndeterminate, nil, &msg, nil)
	}
}

func (s *Service) finish(ctx context.Context, exec gongbu.Execution, state gongbu.State, url, msg *string, charged *int64) gongbu.Execution {
	next, err := s.Store.Finish(ctx, exec.DecisionID, state, url, msg, charged, s.Now())
	if err != nil {
		s.logger().ErrorContext(ctx, "could not record an execution's outcome", "decision_id", exec.DecisionID, "err", err)
		return exec
	}
	if state == gongbu.StateIndeterminate {
		s.logger().ErrorContext(ctx, "execution is indeterminate; an operator must reconcile it",
			"decision_id", exec.DecisionID, "public_handle", exec.PublicHandle)
	}
	return s.report(ctx, next)
}

// Tick does one pass of background work: it takes over submissions whose worker died,
// polls submitted jobs that are due, and reports final outcomes Hubu has not been told.
func (s *Service) Tick(ctx context.Context) error {
	now := s.Now()
	open, err := s.Store.ListClaimable(ctx, now, 100)
	if err != nil {
		return err
	}
	for _, o := range open {
		exec, ok, err := s.Store.Claim(ctx, o.DecisionID, o.State, now.Add(s.Lease), now)
		if err != nil {
			return err
		}
		if !ok {
			continue // another worker took it
		}
		provider, found := s.Providers[exec.Scope.Provider]
		if !found {
			msg := "no adapter for provider " + exec.Scope.Provider
			s.finish(ctx, exec, gongbu.StateIndeterminate, nil, &msg, nil)
			continue
		}
		switch exec.State {
		case gongbu.StateSubmitting:
			s.recoverSubmission(ctx, provider, exec)
		case gongbu.StateSubmitted:
			s.poll(ctx, provider, exec)
		}
	}
	unreported, err := s.Store.ListUnreported(ctx, 100)
	if err != nil {
		return err
	}
	for _, exec := range unreported {
		s.report(ctx, exec)
	}
	return nil
}

// recoverSubmission handles an execution found in submitting after its worker's lease ran
// out: the provider may or may not have the job.
func (s *Service) recoverSubmission(ctx context.Context, provider gongbu.Provider, exec gongbu.Execution) {
	if provider.HonoursIdempotencyKeys() {
		s.logger().InfoContext(ctx, "resubmitting under the same idempotency key", "decision_id", exec.DecisionID, "attempt", exec.Attempts)
		s.submit(ctx, provider, exec)
		return
	}
	msg := "Gongbu stopped while submitting and the provider does not honour idempotency keys, so it may have charged; not resubmitted"
	s.finish(ctx, exec, gongbu.StateIndeterminate, nil, &msg, nil)
}

func (s *Service) poll(ctx context.Context, provider gongbu.Provider, exec gongbu.Execution) {
	job := gongbu.Job{ID: deref(exec.ProviderJobID), PollingURL: deref(exec.PollingURL)}
	res, err := provider.Poll(ctx, job)
	now := s.Now()
	pastDeadline := exec.PollDeadline != nil && !now.Before(*exec.PollDeadline)
	amount := exec.AmountMicros
	switch {
	case err == nil && res.Status == gongbu.JobReady:
		s.finish(ctx, exec, gongbu.StateSucceeded, &res.ImageURL, nil, &amount)
	case err == nil && res.Status == gongbu.JobFailed:
		// The provider took the job, so it was charged: capture it, and say it failed.
		msg := "the provider failed the job: " + res.Detail
		s.finish(ctx, exec, gongbu.StateFailed, nil, &msg, &amount)
	case err == nil && res.Status == gongbu.JobLost:
		msg := "the provider no longer knows the job"
		s.finish(ctx, exec, gongbu.StateIndeterminate, nil, &msg, nil)
	case pastDeadline:
		msg := "no result before the polling deadline"
		s.finish(ctx, exec, gongbu.StateIndeterminate, nil, &msg, nil)
	default: // pending, or the poll itself failed: try again later
		if err != nil {
			s.logger().WarnContext(ctx, "poll failed; will retry", "decision_id", exec.DecisionID, "err", err)
		}
		if err := s.Store.ExtendLease(ctx, exec.DecisionID, now.Add(s.PollInterval), now); err != nil {
			s.logger().ErrorContext(ctx, "could not schedule the next poll", "decision_id", exec.DecisionID, "err", err)
		}
	}
}

// report tells Hubu a final outcome: what was charged is captured, the rest released. An
// indeterminate execution is not reported; its hold stays until an operator reconciles it.
// It returns the execution as it now stands.
func (s *Service) report(ctx context.Context, exec gongbu.Execution) gongbu.Execution {
	if exec.Reported || (exec.State != gongbu.StateSucceeded && exec.State != gongbu.StateFailed) {
		return exec
	}
	var err error
	if exec.ChargedMicros != nil && *exec.ChargedMicros > 0 {
		err = s.Authority.Settle(ctx, exec.DecisionID, *exec.ChargedMicros)
	} else {
		err = s.Authority.Release(ctx, exec.DecisionID, deref(exec.Error))
	}
	if err != nil {
		s.logger().WarnContext(ctx, "could not report the outcome to Hubu; will retry", "decision_id", exec.DecisionID, "err", err)
		return exec
	}
	// Should this fail, a later pass reports again; Hubu answers a repeated settle or
	// release with the same outcome.
	if err := s.Store.MarkReported(ctx, exec.DecisionID, s.Now()); err != nil {
		s.logger().ErrorContext(ctx, "could not record the report", "decision_id", exec.DecisionID, "err", err)
		return exec
	}
	exec.Reported = true
	return exec
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

// Get returns the execution of a decision.
func (s *Service) Get(ctx context.Context, id uuid.UUID) (gongbu.Execution, error) {
	return s.Store.Get(ctx, id)
}

func (s *Service) logger() *slog.Logger {
	if s.Logger == nil {
		return slog.Default()
	}
	return s.Logger
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
