// Package execution runs decisions: at most one provider call per decision, recorded as
// "submitting" before the call so that a crash is never silent; then polling with a
// deadline; then reporting the outcome to Hubu, which settles or releases the hold.
//
// Every open execution carries a lease. The worker that holds it is the only one acting on
// it; when a worker dies its lease runs out and Tick, in this or another process, takes it
// over: a submission is re-sent under the same idempotency key only when the provider
// honours keys, and otherwise becomes indeterminate, never a blind second charge.
//
// A provider's refusal proves that nothing was charged only when it answers a decision's
// first submission: any later one (a takeover, or a re-run after a record was lost) may follow
// a submission the provider charged for and answered with an error or not at all, and the
// refusal then says nothing of that charge. Such a refusal makes the execution indeterminate.
package execution

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/attribute"

	"hubu.dev/hubu/kit/failpoint"
	"hubu.dev/hubu/services/gongbu"
	"hubu.dev/hubu/services/gongbu/postgres"
	"hubu.dev/hubu/services/gongbu/vendorkey"
)

// Defaults of the Service's optional settings.
const (
	DefaultMaxTakeovers   = 10
	DefaultSubmitDeadline = 30 * time.Minute
	DefaultCallTimeout    = 60 * time.Second
	DefaultFirstPoll      = 10 * time.Millisecond
)

// recordTimeout bounds each step around a provider call: recording the submission before it,
// and recording (and reporting) its answer after it, which gets time of its own so that a
// call that used up its bound is still recorded.
const recordTimeout = 30 * time.Second

// Service executes decisions.
type Service struct {
	Store     *postgres.Store
	Providers map[string]gongbu.Provider
	Authority gongbu.Authority
	Logger    *slog.Logger
	Now       func() time.Time
	// Lease is how long a worker owns an open execution before another may take it over.
	// It must be longer than SubmissionBound, or a submission in flight could be taken over.
	Lease time.Duration
	// PollInterval is how often the background pass (Tick) polls a job, and how long a worker
	// that watches a job it submitted holds it between two looks.
	PollInterval time.Duration
	// FirstPoll is the wait before the second look at a job its worker submitted (the first
	// is at once); each look that finds it pending doubles the wait, until the wait reaches
	// PollInterval and the background pass takes over. 0 means DefaultFirstPoll; negative
	// leaves every poll to the background pass (tests that drive Tick with a controllable
	// clock).
	FirstPoll time.Duration
	// PollDeadline is how long a job may stay pending before it becomes indeterminate.
	PollDeadline time.Duration
	// MaxTakeovers bounds how often a submission whose outcome stays unknown is re-sent under
	// its key (where the provider honours keys); once taken over more often it becomes
	// indeterminate. 0 means DefaultMaxTakeovers.
	MaxTakeovers int
	// SubmitDeadline is how long after it was recorded a submission may stay unknown before
	// it becomes indeterminate instead of being re-sent. 0 means DefaultSubmitDeadline.
	SubmitDeadline time.Duration
	// CallTimeout bounds one provider call of a submission (the adapter's own HTTP timeout
	// bounds it too; set this at least as long). 0 means DefaultCallTimeout.
	CallTimeout time.Duration
	// RecordPatience is how long a worker retries the record of a job the provider accepted
	// (see recordJob). 0 means DefaultRecordPatience.
	RecordPatience time.Duration
	// Metrics, when set, counts polls.
	Metrics *Metrics

	mu       sync.Mutex
	inflight int           // Execute calls from their insert on
	draining bool          // Drain was called: no new execution starts
	idle     chan struct{} // closed when inflight drops to 0 while draining
	stop     chan struct{} // closed by Drain: watchers stop waiting for their next look
	traces   origins       // where each execution began, so that its later steps join its trace (tracing.go)
	// unrecorded are jobs the provider accepted whose record failed (jobrecord.go).
	unrecorded unrecordedJobs
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

	issued, err := s.Authority.Decision(ctx, req.DecisionID)
	switch {
	case gongbu.ErrorCode(err) == gongbu.CodeNotFound:
		return gongbu.Execution{}, false, gongbu.Errorf(gongbu.CodeForbidden, "Hubu did not issue this decision")
	case err != nil:
		s.logger().WarnContext(ctx, "cannot check a decision with Hubu", "decision_id", req.DecisionID, "err", err)
		return gongbu.Execution{}, false, gongbu.Errorf(gongbu.CodeUnavailable, "Hubu cannot be reached to check the decision")
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

// SubmissionBound is the longest one submission can take, from recording it to recording
// its answer: a worker's Lease must be longer, and a shutdown waits this long for one.
func (s *Service) SubmissionBound() time.Duration {
	return recordTimeout + orDefault(s.CallTimeout, DefaultCallTimeout) + max(recordTimeout, orDefault(s.RecordPatience, DefaultRecordPatience))
}

// Drain stops new executions from starting (they are refused as unavailable) and waits until
// those in flight have recorded their outcome, or ctx ends. A server calls it after its HTTP
// server stopped and before it closes the database.
func (s *Service) Drain(ctx context.Context) error {
	s.mu.Lock()
	if !s.draining {
		s.draining = true
		close(s.stopping())
	}
	if s.inflight == 0 {
		s.mu.Unlock()
		return nil
	}
	if s.idle == nil {
		s.idle = make(chan struct{})
	}
	idle := s.idle
	s.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("executions still in flight: %w", ctx.Err())
	}
}

// stopping is closed once Drain is called. The caller holds s.mu.
func (s *Service) stopping() chan struct{} {
	if s.stop == nil {
		s.stop = make(chan struct{})
	}
	return s.stop
}

func (s *Service) begin() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.draining {
		return false
	}
	s.inflight++
	return true
}

func (s *Service) end() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inflight--
	if s.inflight == 0 && s.idle != nil {
		close(s.idle)
		s.idle = nil
	}
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
		next, err := s.recordJob(ctx, exec, job)
		if err != nil {
			// The job exists but is not recorded here. Either another worker took the
			// execution over, or the lease runs out and recovery (Tick) records the job
			// this process kept.
			return s.current(ctx, exec)
		}
		s.watch(provider, next)
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

// finish records an open execution's outcome under exec's lease, then reports it to Hubu. A
// worker that lost its lease writes and reports nothing: the one that took over decides.
func (s *Service) finish(ctx context.Context, exec gongbu.Execution, o gongbu.Outcome) gongbu.Execution {
	next, err := s.Store.Finish(ctx, exec, o, s.Now())
	if err != nil && !errors.Is(err, gongbu.ErrLeaseLost) && o.Image != nil {
		// The success must be recorded and reported whatever becomes of its image: without it,
		// the background pass downloads the image again.
		s.logger().WarnContext(ctx, "could not record the success with its image; recording it without", "decision_id", exec.DecisionID, "err", err)
		o.Image = nil
		next, err = s.Store.Finish(ctx, exec, o, s.Now())
	}
	if errors.Is(err, gongbu.ErrLeaseLost) {
		s.logger().WarnContext(ctx, "outcome not recorded: another worker took the execution over or finished it",
			"decision_id", exec.DecisionID, "outcome", o.State)
		return s.current(ctx, exec)
	}
	if err != nil {
		s.logger().ErrorContext(ctx, "could not record an execution's outcome", "decision_id", exec.DecisionID, "err", err)
		return exec
	}
	if o.State == gongbu.StateIndeterminate {
		s.logger().ErrorContext(ctx, "execution is indeterminate; an operator must reconcile it and resolve it with `gongbu resolve`",
			"decision_id", exec.DecisionID, "public_handle", exec.PublicHandle, "reason", deref(o.Error))
	}
	return s.report(ctx, next)
}

// current reads an execution again after this worker's write was refused; exec when even that fails.
func (s *Service) current(ctx context.Context, exec gongbu.Execution) gongbu.Execution {
	cur, err := s.Store.Get(ctx, exec.DecisionID)
	if err != nil {
		return exec
	}
	return cur
}

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

// poll looks at a submitted job once, under exec's lease, and records what it finds: an
// outcome, or (still pending) the lease extended to the next poll interval. pending is true
// only in that last case, when the worker still holds the job.
func (s *Service) poll(ctx context.Context, provider gongbu.Provider, exec gongbu.Execution, trigger string) (pending bool) {
	ctx, span := s.startSpan(ctx, "gongbu.poll", exec, attribute.String("gongbu.trigger", trigger))
	defer span.End()
	job := gongbu.Job{ID: deref(exec.ProviderJobID), PollingURL: deref(exec.PollingURL)}
	res, err := provider.Poll(ctx, job)
	recordPoll(span, res, err)
	now := s.Now()
	pastDeadline := exec.PollDeadline != nil && !now.Before(*exec.PollDeadline)
	s.countPoll(trigger, res, err)
	switch {
	case err == nil && res.Status == gongbu.JobReady:
		o := s.succeeded(ctx, provider, exec, res.ImageURL)
		// The download may have used up ctx: recording the success gets time of its own.
		recordCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
		defer cancel()
		s.finish(recordCtx, exec, o)
	case err == nil && res.Status == gongbu.JobFailed && res.Uncharged:
		// The provider charges nothing for such an end (BFL: moderated, or an error).
		s.finish(ctx, exec, gongbu.Failed("the provider ended the job without a result, and charges nothing for it: "+res.Detail, 0))
	case err == nil && res.Status == gongbu.JobFailed:
		// The provider took the job, so it was charged: capture it, and say it failed.
		s.finish(ctx, exec, gongbu.Failed("the provider failed the job: "+res.Detail, s.charge(ctx, exec)))
	case err == nil && res.Status == gongbu.JobLost:
		s.finish(ctx, exec, gongbu.Indeterminate("the provider no longer knows the job"))
	case pastDeadline:
		s.finish(ctx, exec, gongbu.Indeterminate("no result before the polling deadline"))
	default: // pending, or the poll itself failed: try again later
		if err != nil {
			s.logger().WarnContext(ctx, "poll failed; will retry", "decision_id", exec.DecisionID, "err", err)
		}
		if err := s.Store.ExtendLease(ctx, exec, now.Add(s.PollInterval), now); err != nil {
			if !errors.Is(err, gongbu.ErrLeaseLost) {
				s.logger().WarnContext(ctx, "could not schedule the next poll", "decision_id", exec.DecisionID, "err", err)
			}
			return false
		}
		return true
	}
	return false
}

// watch looks at a job this worker has just submitted (or was told is done), soon and then
// less and less often, so that a quick provider's result is recorded within milliseconds
// rather than on the next background pass. It holds the execution's lease throughout (each
// pending look extends it by PollInterval), so no other worker polls the job meanwhile; when
// the wait between looks reaches PollInterval it leaves the job to the background pass, and
// should this process die, the lease runs out and the background pass, here or in another
// replica, takes the job over. A provider's webhook (Nudge) may claim the job first: the
// watcher then loses its lease, writes nothing, and stops.
func (s *Service) watch(provider gongbu.Provider, exec gongbu.Execution) {
	if s.FirstPoll < 0 || !s.begin() {
		return
	}
	s.mu.Lock()
	stop := s.stopping()
	s.mu.Unlock()
	go func() {
		defer s.end()
		// The first look is at once (a quick provider may be done already), the next after
		// FirstPoll, then after twice as long each time.
		for wait := time.Duration(0); wait < s.PollInterval; wait = max(2*wait, orDefault(s.FirstPoll, DefaultFirstPoll)) {
			if wait > 0 {
				t := time.NewTimer(wait)
				select {
				case <-stop:
					t.Stop()
					return // shutting down: the lease runs out and another worker takes over
				case <-t.C:
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), orDefault(s.CallTimeout, DefaultCallTimeout)+recordTimeout)
			pending := s.poll(ctx, provider, exec, TriggerWatch)
			cancel()
			if !pending {
				return
			}
		}
	}()
}

// Nudge polls the job of a submitted execution at once, because its provider said the job is
// done (a signed webhook), and goes on watching it should it still be pending. It takes the
// lease from whichever worker holds it (see postgres.Store.ClaimSubmitted). An execution no
// longer submitted needs nothing: ok is then false.
func (s *Service) Nudge(ctx context.Context, exec gongbu.Execution) (ok bool, err error) {
	provider, found := s.Providers[exec.Scope.Provider]
	if !found {
		return false, gongbu.Errorf(gongbu.CodeInvalidArguments, "no adapter for provider %q", exec.Scope.Provider)
	}
	// Like a submission, the poll and the record of its outcome do not end with the webhook's
	// request: the provider may hang up once it has delivered.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), orDefault(s.CallTimeout, DefaultCallTimeout)+recordTimeout)
	defer cancel()
	now := s.Now()
	claimed, ok, err := s.Store.ClaimSubmitted(ctx, exec.DecisionID, now.Add(s.PollInterval), now)
	if err != nil || !ok {
		return false, err
	}
	if s.poll(ctx, provider, claimed, TriggerWebhook) {
		s.watch(provider, claimed)
	}
	return true, nil
}

// report tells Hubu a final outcome: what was charged is captured, the rest released; a
// failure the provider charged for is captured and the operation fails. An indeterminate
// execution is not reported; its hold stays until an operator resolves it. A report Hubu
// does not take is deferred behind the others and retried by Tick. It returns the execution
// as it now stands.
func (s *Service) report(ctx context.Context, exec gongbu.Execution) gongbu.Execution {
	if exec.Reported || gongbu.CheckMove(exec.State, gongbu.EventReport, "") != nil {
		return exec
	}
	ctx, span := s.startSpan(ctx, "gongbu.report", exec, attribute.String("gongbu.state", string(exec.State)))
	defer span.End()
	var charged int64
	if exec.ChargedMicros != nil {
		charged = *exec.ChargedMicros
	}
	var err error
	switch {
	case exec.State == gongbu.StateSucceeded:
		err = s.Authority.Settle(ctx, exec.DecisionID, charged, false, "", exec.ProviderCostMicros)
	case charged > 0:
		err = s.Authority.Settle(ctx, exec.DecisionID, charged, true, deref(exec.Error), exec.ProviderCostMicros)
	default:
		err = s.Authority.Release(ctx, exec.DecisionID, deref(exec.Error))
	}
	if err != nil {
		s.logger().WarnContext(ctx, "could not report the outcome to Hubu; will retry", "decision_id", exec.DecisionID, "err", err)
		if err := s.Store.DeferReport(ctx, exec.DecisionID, s.Now()); err != nil {
			s.logger().ErrorContext(ctx, "could not defer the report", "decision_id", exec.DecisionID, "err", err)
		}
		return exec
	}
	// Should this fail, a later pass reports again; Hubu answers a repeated settle or
	// release with the same outcome.
	if err := s.Store.MarkReported(ctx, exec.DecisionID, s.Now()); err != nil {
		s.logger().ErrorContext(ctx, "could not record the report", "decision_id", exec.DecisionID, "err", err)
		return exec
	}
	exec.Reported = true
	s.traces.forget(exec.DecisionID) // the execution's last step
	return exec
}

// charge is what to capture for an execution whose job the provider took (gongbu.Execution.Charge):
// a stated cost above the hold is logged for the operator, and counted.
func (s *Service) charge(ctx context.Context, exec gongbu.Execution) int64 {
	charged, above := exec.Charge()
	if above {
		s.logger().ErrorContext(ctx, "the provider states a cost above the decision's amount; the amount is captured, and the difference is to be raised with the provider",
			"decision_id", exec.DecisionID, "public_handle", exec.PublicHandle, "provider_cost_micros", *exec.ProviderCostMicros,
			"amount_micros", exec.AmountMicros, "currency", exec.Currency)
		if s.Metrics != nil {
			s.Metrics.costAboveHold.Inc()
		}
	}
	return charged
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

// orDefault is a setting's value, or def where it is not set (0 or less).
func orDefault[T int | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
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
