package execution

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"

	"hubu.dev/hubu/services/gongbu"
)

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
