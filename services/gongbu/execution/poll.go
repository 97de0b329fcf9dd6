package execution

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"hubu.dev/hubu/services/gongbu"
)

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
// replica, takes the job over. A provider's notice about the job wakes the watcher (Watching);
// one that reaches another replica claims the job there (Nudge): the watcher then loses its
// lease, writes nothing, and stops.
func (s *Service) watch(provider gongbu.Provider, exec gongbu.Execution) {
	s.watchAs(provider, exec, s.watching.of(exec))
}

// watchAs is watch, for a watcher registered already (reg): a submitter registers before it
// records the job, since the provider's notice may come first. The watcher removes reg when
// it stops, or at once when it does not start.
func (s *Service) watchAs(provider gongbu.Provider, exec gongbu.Execution, reg watchReg) {
	if s.FirstPoll < 0 || !s.begin() {
		reg.remove()
		return
	}
	s.mu.Lock()
	stop := s.stopping()
	s.mu.Unlock()
	wake := reg.wakeups()
	go func() {
		defer s.end()
		defer reg.remove()
		// The first look is at once (a quick provider may be done already), the next after
		// FirstPoll, then after twice as long each time, or at once when the provider says the
		// job is done (Watching).
		for wait := time.Duration(0); wait < s.PollInterval; wait = max(2*wait, orDefault(s.FirstPoll, DefaultFirstPoll)) {
			trigger := TriggerWatch
			if wait > 0 {
				t := time.NewTimer(wait)
				select {
				case <-stop:
					t.Stop()
					return // shutting down: the lease runs out and another worker takes over
				case <-wake:
					t.Stop()
					trigger = TriggerWebhook // counted as the notice's look, as a claim's would be
				case <-t.C:
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), orDefault(s.CallTimeout, DefaultCallTimeout)+recordTimeout)
			pending := s.poll(ctx, provider, exec, trigger)
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
