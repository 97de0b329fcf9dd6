// Package lifecycle moves decisions from Hubu to the executor. Hubu owns an operation's
// lifecycle: a decision is recorded as "dispatching" in the same transaction that issues it,
// then handed to the executor; only when the executor has accepted it does the operation
// become "executing". A crash anywhere in between leaves it "dispatching", and Recover sends
// the same decision again. Executors are idempotent per decision id, so re-sending is safe.
package lifecycle

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/google/uuid"

	"hubu.dev/hubu/kit/failpoint"
	"hubu.dev/hubu/proto/contract"
	"hubu.dev/hubu/services/hubu"
	"hubu.dev/hubu/services/hubu/postgres"
)

// Service wraps the store's authorize and resume with the hand-off to the executor.
type Service struct {
	Store *postgres.Store
	// Executor runs decisions. When nil, decisions wait in "dispatching" until one is configured.
	Executor hubu.Executor
	Logger   *slog.Logger
	Now      func() time.Time
	// RetryAfter is how long a decision stays unacknowledged before Recover re-sends it.
	RetryAfter time.Duration
	// HandOffs counts the tries to hand a decision on; nil counts nothing.
	HandOffs *HandOffCounter
	// Images reads the sides of the images an edit names, from the executor that keeps them;
	// without it, a new edit is refused as unavailable.
	Images hubu.Images
}

// Authorize records or replays an authorization, then hands an approved decision on.
// A replay of an operation still dispatching re-sends its decision: execution continues
// under the same decision, never a new one. A new decision's first try is counted in the
// transaction that issues it (hubu.Change.WithFirstHandOff): the hand-off that follows
// writes nothing before it reaches the executor.
func (s *Service) Authorize(ctx context.Context, agentID uuid.UUID, req hubu.AuthorizeRequest) (hubu.Operation, bool, error) {
	op, replayed, err := s.Store.Authorize(ctx, agentID, req, s.Now(), s.Executor != nil)
	if errors.Is(err, hubu.ErrInputsNeeded) {
		// A new edit: its price and default size are made from its inputs' sides.
		if req.Inputs, err = s.inputSizes(ctx, agentID, req.Arguments.InputImages); err != nil {
			return hubu.Operation{}, false, err
		}
		op, replayed, err = s.Store.Authorize(ctx, agentID, req, s.Now(), s.Executor != nil)
	}
	if err != nil {
		return op, replayed, err
	}
	failpoint.Inject(failpoint.HubuAfterAuthorizeCommit)
	if replayed {
		return s.dispatch(ctx, op), true, nil
	}
	return s.handOff(ctx, op, countedWithDecision), false, nil
}

// inputSizes checks that each input of an edit is an earlier result of the same agent, a
// succeeded operation whose image the executor keeps, and returns the images' sides, in order.
func (s *Service) inputSizes(ctx context.Context, agentID uuid.UUID, handles []string) ([]contract.Dimensions, error) {
	if s.Images == nil {
		return nil, hubu.Errorf(hubu.CodeUnavailable, "this Hubu has no executor to read the input images' sizes from")
	}
	who := hubu.Principal{Role: hubu.RoleAgent, AgentID: agentID}
	sizes := make([]contract.Dimensions, 0, len(handles))
	for _, h := range handles {
		op, err := s.Store.GetOperation(ctx, who, h, s.Now())
		switch {
		case hubu.ErrorCode(err) == hubu.CodeNotFound:
			return nil, hubu.Errorf(hubu.CodeInvalidArguments, "input_images: %s is no operation of yours", h)
		case err != nil:
			return nil, err
		case op.State != hubu.StateSucceeded || op.DecisionID == nil:
			return nil, hubu.Errorf(hubu.CodeInvalidArguments, "input_images: %s has not succeeded (it is %s): only a finished result can be edited", h, op.State)
		}
		size, err := s.Images.ImageSize(ctx, *op.DecisionID)
		if hubu.ErrorCode(err) == hubu.CodeNotFound {
			return nil, hubu.Errorf(hubu.CodeInvalidArguments, "input_images: the image of %s is not kept (or its size is not known), so it cannot be edited", h)
		}
		if err != nil {
			return nil, err
		}
		sizes = append(sizes, size)
	}
	return sizes, nil
}

// countedWithDecision is the count of a first hand-off that the decision's own transaction
// made: there is nothing left to write.
func countedWithDecision(_ context.Context, op hubu.Operation, _ time.Time) (hubu.Operation, bool, error) {
	return op, true, nil
}

// Resume moves an approved operation on and hands its decision to the executor.
func (s *Service) Resume(ctx context.Context, who hubu.Principal, handle string) (hubu.Operation, error) {
	op, err := s.Store.Resume(ctx, who, handle, s.Now())
	if err != nil {
		return op, err
	}
	return s.dispatch(ctx, op), nil
}

// dispatch hands a dispatching operation's decision to the executor. A failure is not the
// caller's error: the operation stays dispatching and Recover re-sends it. Re-sending is
// safe however a hand-off failed: the executor runs a decision once, and it tells a decision
// it never submitted from one it may have by its own durable record, not by how often Hubu
// tried (see gongbu.Issued.PossiblySubmitted).
func (s *Service) dispatch(ctx context.Context, op hubu.Operation) hubu.Operation {
	return s.handOff(ctx, op, s.Store.CountDispatchAttempt)
}

// countAttempt records a try to hand op's decision on; ok is false when the try is not to be
// made.
type countAttempt func(ctx context.Context, op hubu.Operation, now time.Time) (counted hubu.Operation, ok bool, err error)

// handOff counts a try with count, then hands op's decision to the executor.
func (s *Service) handOff(ctx context.Context, op hubu.Operation, count countAttempt) hubu.Operation {
	if op.State != hubu.StateDispatching || s.Executor == nil {
		return op
	}
	d, _ := hubu.DecisionOf(op)
	counted, ok, err := count(ctx, op, s.Now())
	if err != nil {
		s.logger().WarnContext(ctx, "could not count the hand-off; it will be re-sent",
			"public_handle", op.PublicHandle, "decision_id", d.DecisionID, "err", err)
		return op
	}
	if !ok {
		return counted // moved on meanwhile, or another replica's pass claimed the try
	}
	failpoint.Inject(failpoint.HubuBeforeHandOff)
	err = s.Executor.Execute(ctx, d)
	s.HandOffs.count(err)
	if err != nil {
		s.logger().WarnContext(ctx, "hand-off to the executor failed; it will be re-sent",
			"public_handle", op.PublicHandle, "decision_id", d.DecisionID, "attempt", counted.DispatchAttempts, "err", err)
		return counted
	}
	failpoint.Inject(failpoint.HubuAfterGongbuAnswer)
	next, err := s.Store.MarkExecuting(ctx, counted, s.Now())
	if err != nil {
		s.logger().WarnContext(ctx, "could not record the hand-off; it will be re-sent",
			"public_handle", op.PublicHandle, "decision_id", d.DecisionID, "err", err)
		return counted
	}
	// With the context, so that the line names the trace of the request that decided it.
	s.logger().InfoContext(ctx, "decision handed off", "public_handle", op.PublicHandle, "decision_id", d.DecisionID,
		"attempt", counted.DispatchAttempts)
	return next
}

// Recover closes approvals that expired and re-sends every decision left dispatching for
// longer than RetryAfter. It returns how many decisions the executor accepted; the two
// halves run independently, so a failure of one does not stall the other.
//
// Every replica runs Recover, and two may run it at the same moment over the same due work;
// neither half does anything twice. An expiry is a transition under the operation's row lock
// that reads the row again once the lock is held: the second replica finds the operation
// expired already and writes nothing. A re-send is claimed first (Store.ClaimDispatchAttempt,
// a guarded UPDATE of the hand-off count): one replica wins each decision, the others skip it.
func (s *Service) Recover(ctx context.Context) (int, error) {
	now := s.Now()
	_, expireErr := s.Store.ExpireApprovals(ctx, now, 100)
	if s.Executor == nil {
		return 0, expireErr
	}
	ops, err := s.Store.ListDispatching(ctx, now.Add(-s.RetryAfter), 100)
	if err != nil {
		return 0, errors.Join(expireErr, err)
	}
	sent := 0
	for _, op := range ops {
		if s.handOff(ctx, op, s.Store.ClaimDispatchAttempt).State != hubu.StateDispatching {
			sent++
		}
	}
	return sent, expireErr
}

// Run calls Recover every interval until ctx ends.
func (s *Service) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if _, err := s.Recover(ctx); err != nil && ctx.Err() == nil {
			s.logger().ErrorContext(ctx, "recovery pass failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (s *Service) logger() *slog.Logger { return cmp.Or(s.Logger, slog.Default()) }
