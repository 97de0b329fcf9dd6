package execution

import (
	"context"

	"go.opentelemetry.io/otel/attribute"

	"hubu.dev/hubu/kit/failpoint"
	"hubu.dev/hubu/services/gongbu"
	"hubu.dev/hubu/services/gongbu/vendorkey"
)

// executableStates are the Hubu operation states in which a decision may run: handed off,
// or already accepted or even settled (a re-sent decision then finds the provider's first job
// under the same key, where the provider honours keys).
var executableStates = map[string]bool{"dispatching": true, "executing": true, "succeeded": true}

// Execute runs a decision once, asking Hubu whether it issued it (see ExecuteSigned).
func (s *Service) Execute(ctx context.Context, req gongbu.Decision) (gongbu.Execution, bool, error) {
	return s.ExecuteSigned(ctx, req, "")
}

// ExecuteSigned runs a decision once. A decision seen before returns its execution as it
// stands (created false) and never reaches the provider again. A new one is checked against
// what Hubu issued: Hubu's signature of it (decisionsig) when the hand-off carries a valid
// one, Hubu's answer otherwise. A request that differs from what Hubu issued is refused
// before anything is written.
func (s *Service) ExecuteSigned(ctx context.Context, req gongbu.Decision, signature string) (gongbu.Execution, bool, error) {
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

	issued, err := s.issued(ctx, req.DecisionID, signature)
	switch {
	case err != nil:
		return gongbu.Execution{}, false, err
	case !issued.SameWork(req):
		return gongbu.Execution{}, false, gongbu.Errorf(gongbu.CodeDecisionMismatch,
			"the request's scope, arguments or amount differ from the decision Hubu issued")
	case !executableStates[issued.State]:
		return gongbu.Execution{}, false, gongbu.Errorf(gongbu.CodeForbidden, "the decision's operation is %s, not executable", issued.State)
	}

	if !s.begin() {
		return gongbu.Execution{}, false, gongbu.Errorf(gongbu.CodeUnavailable, "Gongbu is shutting down")
	}
	defer s.end()
	// From the insert on, the work does not end with the caller's context: Hubu's HTTP client
	// may give up (its timeout is shorter than the provider's) or the process may begin
	// shutting down while the provider is answering. A row committed without the call that
	// follows it, or a call whose answer is not recorded, would turn a good execution into an
	// indeterminate one (or lose a charged job). Each step has a bound of its own instead
	// (SubmissionBound in all).
	work := context.WithoutCancel(ctx)
	insertCtx, cancel := context.WithTimeout(work, recordTimeout)
	defer cancel()
	// The insert reads the database's epoch with it: whether "no row until now" is evidence
	// that no executor ever submitted this decision.
	now := s.Now()
	exec, epoch, created, err := s.Store.Insert(insertCtx, issued.Decision, vendorkey.For(provider.Name(), issued.DecisionID), now.Add(s.Lease), now)
	if err != nil || !created {
		return exec, false, err
	}
	s.traces.remember(ctx, exec.DecisionID)
	failpoint.Inject(failpoint.GongbuAfterSubmitting)
	doubt, why := issued.PossiblySubmitted(epoch)
	if !doubt {
		return s.submit(work, provider, exec, true), true, nil
	}
	// The provider may have the job already: resubmit under the same key where that finds it,
	// and otherwise never submit blindly.
	if !provider.HonoursIdempotencyKeys() {
		return s.finish(insertCtx, exec, gongbu.Indeterminate(why+
			", and the provider does not honour idempotency keys, so an earlier submission may have charged; not submitted")), true, nil
	}
	return s.submit(work, provider, exec, false), true, nil
}

// submit calls the provider for an execution this worker holds in submitting. first says
// that no executor can have submitted the decision before (see gongbu.Issued.PossiblySubmitted):
// only then does a refusal prove that nothing was charged.
//
// The call and the record of its outcome do not end with the caller's context (see
// Execute): CallTimeout bounds the call, and recording its answer has time of its own.
func (s *Service) submit(ctx context.Context, provider gongbu.Provider, exec gongbu.Execution, first bool) gongbu.Execution {
	ctx = context.WithoutCancel(ctx)
	ctx, span := s.startSpan(ctx, "gongbu.submit", exec, attribute.Bool("gongbu.first_submission", first))
	defer span.End()
	d, err := s.withInputs(ctx, exec.Decision)
	if err != nil {
		if first {
			// Nothing was sent, now or before: the edit fails without a charge.
			return s.finish(ctx, exec, gongbu.Failed("the edit's input images could not be read: "+err.Error(), 0))
		}
		s.logger().WarnContext(ctx, "could not read the edit's input images; the submission will be tried again",
			"decision_id", exec.DecisionID, "err", err)
		return exec // the lease runs out and Tick tries again (a provider that honours keys)
	}
	callCtx, cancelCall := context.WithTimeout(ctx, orDefault(s.CallTimeout, DefaultCallTimeout))
	job, err := provider.Submit(callCtx, exec.VendorKey, d)
	cancelCall()
	failpoint.Inject(failpoint.GongbuAfterProviderAnswer)
	ctx, cancel := context.WithTimeout(ctx, recordTimeout)
	defer cancel()
	switch {
	case err == nil:
		// The provider may say the job is done before its record commits: the watcher to be
		// takes such a notice from now on.
		var reg watchReg
		if s.FirstPoll >= 0 {
			reg = s.watching.add(exec.Scope.Provider, job.ID, exec.DecisionID)
		}
		next, err := s.recordJob(ctx, exec, job)
		if err != nil {
			reg.remove()
			// The job exists but is not recorded here. Either another worker took the
			// execution over, or the lease runs out and recovery (Tick) records the job
			// this process kept.
			return s.current(ctx, exec)
		}
		s.watchAs(provider, next, reg)
		return next
	case gongbu.IsRejected(err) && first:
		return s.finish(ctx, exec, gongbu.Failed(err.Error(), 0))
	case gongbu.IsRejected(err):
		return s.finish(ctx, exec, gongbu.Indeterminate("the provider refused a resubmission ("+err.Error()+
			"), which says nothing of an earlier submission of this decision: it may have been charged, so the hold is kept"))
	case provider.HonoursIdempotencyKeys():
		s.logger().WarnContext(ctx, "provider call failed; it will be re-sent under the same key",
			"decision_id", exec.DecisionID, "err", err)
		return exec // the lease runs out and Tick resubmits
	default:
		return s.finish(ctx, exec, gongbu.Indeterminate(
			"the provider call failed and the provider does not honour idempotency keys, so Gongbu cannot tell whether it charged: "+err.Error()))
	}
}

// withInputs is d with its input images read, for an edit: each an earlier result of the same
// agent that Gongbu keeps (Hubu checked as much when it priced the edit; Gongbu checks again,
// as it sends the bytes).
func (s *Service) withInputs(ctx context.Context, d gongbu.Decision) (gongbu.Decision, error) {
	if len(d.Arguments.InputImages) == 0 {
		return d, nil
	}
	d.Inputs = make([]gongbu.Image, 0, len(d.Arguments.InputImages))
	for _, h := range d.Arguments.InputImages {
		img, err := s.Store.InputImage(ctx, h, d.AgentID)
		if err != nil {
			return d, err
		}
		d.Inputs = append(d.Inputs, img)
	}
	return d, nil
}
