package hubu

import (
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
)

// Event is something that happens to an operation.
type Event string

const (
	EventAutoApprove  Event = "auto_approve" // a new operation that policy approves
	EventHold         Event = "hold"         // a new operation above the auto-approve limit
	EventRefuse       Event = "refuse"       // a new operation that policy refuses
	EventApprove      Event = "approve"
	EventDeny         Event = "deny"
	EventExpire       Event = "expire"
	EventResume       Event = "resume"
	EventHandOff      Event = "hand_off" // one more try to hand the decision to the executor
	EventAccept       Event = "accept"   // the executor accepted the decision
	EventSettle       Event = "settle"
	EventSettleFailed Event = "settle_failed"
	EventRelease      Event = "release"
)

// Transition is one legal move of an operation: Event in state From leads to state To. From
// is "" for a new operation.
type Transition struct {
	From  State
	Event Event
	To    State
	Label string // what triggers it and what it does to the money
}

// transitions is the operation state machine. The methods below build every Change through
// move, which looks the move up here, so no other combination can be written. The state
// diagram in docs/spend-lifecycle.md is generated from it (TestStateDiagramInDocs).
var transitions = []Transition{
	{"", EventAutoApprove, StateDispatching, "agent call, policy auto-approves (decision issued, budget held)"},
	{"", EventHold, StatePendingApproval, "agent call, amount above auto-approve limit (budget held)"},
	{"", EventRefuse, StateDenied, "agent call, policy refuses (nothing held)"},
	{StatePendingApproval, EventApprove, StateApproved, "operator approve (decision issued)"},
	{StatePendingApproval, EventDeny, StateDenied, "operator deny (hold released)"},
	{StatePendingApproval, EventExpire, StateExpired, "deadline passed (sweeper or any read; hold released)"},
	{StateApproved, EventResume, StateDispatching, "agent resume_operation"},
	{StateApproved, EventDeny, StateDenied, "operator deny (hold released)"},
	{StateApproved, EventExpire, StateExpired, "agent did not resume in time (sweeper or any read; hold released)"},
	{StateDispatching, EventHandOff, StateDispatching, "hand-off counted and sent; re-sent while unacknowledged (redelivery, resume, or every --retry-after)"},
	{StateDispatching, EventAccept, StateExecuting, "Gongbu accepted the decision"},
	{StateDispatching, EventSettle, StateSucceeded, "Gongbu settle arrives before executing is recorded"},
	{StateDispatching, EventSettleFailed, StateFailed, "Gongbu settle with failed=true arrives before executing is recorded"},
	{StateDispatching, EventRelease, StateFailed, "Gongbu release arrives before executing is recorded"},
	{StateExecuting, EventSettle, StateSucceeded, "Gongbu settle (capture charged, release rest)"},
	{StateExecuting, EventSettleFailed, StateFailed, "Gongbu settle with failed=true (capture charged, release rest)"},
	{StateExecuting, EventRelease, StateFailed, "Gongbu release (release all)"},
}

// Transitions returns the operation state machine, in the order of its diagram.
func Transitions() []Transition { return slices.Clone(transitions) }

// Change is what an event does to an operation: the operation as it becomes and the ledger
// entries to append. A Change without an Event changes nothing (a repeated request, or one
// that came after the operation moved on): the operation is answered as it stands.
type Change struct {
	Event     Event
	From      State
	Operation Operation
	Ledger    []LedgerEntry
}

// move starts the Change of event e on op, to the state the table names. When the table has
// no such move, ok is false and the Change leaves op as it is.
func (op Operation) move(e Event, now time.Time) (ch Change, ok bool) {
	for _, t := range transitions {
		if t.From == op.State && t.Event == e {
			next := op
			next.State, next.UpdatedAt = t.To, now
			return Change{Event: e, From: op.State, Operation: next}, true
		}
	}
	return Change{Operation: op}, false
}

// entry appends a ledger entry (none for a zero amount) and keeps the totals in step.
func (ch *Change) entry(kind string, amount int64) {
	if amount == 0 {
		return
	}
	op := &ch.Operation
	ch.Ledger = append(ch.Ledger, LedgerEntry{Kind: kind, AmountMicros: amount, Currency: op.Currency, CreatedAt: op.UpdatedAt})
	switch kind {
	case LedgerHold:
		op.HeldMicros += amount
	case LedgerCapture:
		op.HeldMicros -= amount
		op.CapturedMicros += amount
	case LedgerRelease:
		op.HeldMicros -= amount
		op.ReleasedMicros += amount
	}
}

// settle captures captured of what the operation still holds and releases the rest.
func (ch *Change) settle(captured int64) error {
	held := ch.Operation.HeldMicros
	if captured > held {
		return fmt.Errorf("capture %d exceeds the %d held", captured, held)
	}
	ch.entry(LedgerCapture, captured)
	ch.entry(LedgerRelease, held-captured)
	return nil
}

// close ends an operation that waits for people (denied or expired) and releases its hold.
// by is the operator who decided, or nil to keep who decided before.
func (ch *Change) close(message string, by *string) error {
	op := &ch.Operation
	now := op.UpdatedAt
	op.Denial, op.DecidedAt = &Denial{Code: DenialDenied, Message: message}, &now
	if by != nil {
		op.DecidedBy = by
	}
	return ch.settle(0)
}

// Authorize is the first move of a new operation op (no state yet; CreatedAt is now) as
// policy decided it: e is EventAutoApprove, EventHold or EventRefuse (with its denial). An
// auto-approval issues the decision, a hold waits ttl for a human, and both hold the amount.
func (op Operation) Authorize(e Event, denial *Denial, ttl time.Duration) (Change, error) {
	ch, ok := op.move(e, op.CreatedAt)
	if !ok || op.State != "" {
		return Change{}, fmt.Errorf("no authorization %s of an operation in state %q", e, op.State)
	}
	next := &ch.Operation
	switch e {
	case EventRefuse:
		next.Denial = denial
		return ch, nil
	case EventAutoApprove:
		id := uuid.New()
		next.DecisionID = &id
	case EventHold:
		deadline := op.CreatedAt.Add(ttl)
		next.ApprovalExpiresAt = &deadline
	}
	ch.entry(LedgerHold, op.AmountMicros)
	return ch, nil
}

// Approve is an operator's approval of a held operation: it issues the decision, which the
// agent must resume within ttl. Approving it again answers the same; an operation that was
// denied, expired or never held cannot be approved.
func (op Operation) Approve(operator string, now time.Time, ttl time.Duration) (Change, error) {
	ch, ok := op.move(EventApprove, now)
	switch {
	case ok:
		id, deadline := uuid.New(), now.Add(ttl)
		next := &ch.Operation
		next.DecisionID, next.DecidedBy, next.DecidedAt, next.ApprovalExpiresAt = &id, &operator, &now, &deadline
		return ch, nil
	case op.State == StateExpired:
		return Change{}, Errorf(CodeConflict, "the approval expired; the agent must make a new call")
	case op.State == StateDenied:
		return Change{}, Errorf(CodeConflict, "the operation was denied")
	case op.DecidedBy != nil && op.DecisionID != nil:
		return ch, nil // approved before, and still standing
	}
	return Change{}, Errorf(CodeConflict, "the operation is not waiting for approval (state %s)", op.State)
}

// Deny is an operator's refusal of a held operation, or of an approved one the agent has not
// resumed; it releases the hold. Denying it again answers the same.
func (op Operation) Deny(operator, reason string, now time.Time) (Change, error) {
	if reason == "" {
		reason = "denied by an operator"
	}
	ch, ok := op.move(EventDeny, now)
	switch {
	case ok:
		err := ch.close(reason, &operator)
		return ch, err
	case op.State == StateDenied && op.DecidedBy != nil:
		return ch, nil
	case op.State == StateExpired:
		return Change{}, Errorf(CodeConflict, "the approval expired already")
	}
	return Change{}, Errorf(CodeConflict, "the operation is not waiting for approval (state %s)", op.State)
}

// Expire closes an operation that waited for people past its deadline (held without a
// human decision, or approved without the agent's resume) and releases its hold. Before the
// deadline, and in any other state, it changes nothing.
func (op Operation) Expire(now time.Time) (Change, error) {
	ch, ok := op.move(EventExpire, now)
	if !ok || op.ApprovalExpiresAt == nil || now.Before(*op.ApprovalExpiresAt) {
		return Change{Operation: op}, nil
	}
	msg := "no one approved the operation in time"
	if op.State == StateApproved {
		msg = "the agent did not resume the approved operation in time"
	}
	err := ch.close(msg, nil)
	return ch, err
}

// Resume is the agent's resume of an approved operation, whose decision then goes to the
// executor. In any other state it changes nothing: re-sending can never skip an approval.
func (op Operation) Resume(now time.Time) Change {
	ch, _ := op.move(EventResume, now)
	return ch
}

// HandOff counts one more try to hand a dispatching decision to the executor (for operators:
// it is no evidence that the executor got it). UpdatedAt moves too, so a re-send waits from
// the last try. In any other state it changes nothing: the decision needs no hand-off.
func (op Operation) HandOff(now time.Time) Change {
	ch, ok := op.move(EventHandOff, now)
	if ok {
		ch.Operation.DispatchAttempts++
	}
	return ch
}

// WithFirstHandOff counts, in ch itself, the first try to hand the decision that ch issues
// to the executor: for a caller that makes that try as soon as ch is committed, so the count
// is written with the decision instead of in a write of its own on the way to the executor.
// It is the count HandOff would make, and no more evidence than that. A change that does not
// issue a decision (its operation does not become dispatching) is returned as it is.
func (ch Change) WithFirstHandOff() Change {
	if ch.Event != "" && ch.From != StateDispatching && ch.Operation.State == StateDispatching {
		ch.Operation.DispatchAttempts++
	}
	return ch
}

// Accept records that the executor accepted the decision. It changes nothing once the
// operation has moved on: the executor may settle before its acceptance is recorded.
func (op Operation) Accept(now time.Time) Change {
	ch, _ := op.move(EventAccept, now)
	return ch
}

// Settle is the executor's report of what an execution cost: it captures amount and releases
// the rest of the hold. The operation succeeds; or, when failed is set (the provider charged,
// then failed the work), it fails with reason. providerCost, when the executor has it, is what
// the provider stated it charged, recorded beside the capture (it may be above the hold, which
// bounds the capture). Settling again with the same amount and outcome answers the same.
func (op Operation) Settle(amount int64, failed bool, reason string, providerCost *int64, now time.Time) (Change, error) {
	e, to := EventSettle, StateSucceeded
	if failed {
		e, to = EventSettleFailed, StateFailed
		if reason == "" {
			reason = "the execution failed after the provider charged"
		}
	}
	if err := op.executed(); err != nil {
		return Change{}, err
	}
	ch, ok := op.move(e, now)
	switch {
	case ok:
		if amount < 0 || amount > op.AmountMicros {
			return Change{}, Errorf(CodeInvalidArguments, "the captured amount must be between 0 and the authorized %d micros", op.AmountMicros)
		}
		if failed {
			ch.Operation.FailureReason = &reason
		}
		if providerCost != nil && *providerCost < 0 {
			return Change{}, Errorf(CodeInvalidArguments, "the provider's cost must not be negative")
		}
		ch.Operation.ProviderCostMicros = providerCost
		err := ch.settle(amount)
		return ch, err
	case op.State == to && op.CapturedMicros == amount:
		return ch, nil
	case op.State == StateFailed && op.CapturedMicros == 0:
		return Change{}, Errorf(CodeConflict, "the decision was released already")
	}
	return Change{}, Errorf(CodeConflict, "the decision was settled already with another amount or outcome")
}

// Release is the executor's report that an execution charged nothing: the whole hold is
// released and the operation fails with reason. Releasing again answers the same.
func (op Operation) Release(reason string, now time.Time) (Change, error) {
	if reason == "" {
		reason = "released by the executor"
	}
	if err := op.executed(); err != nil {
		return Change{}, err
	}
	ch, ok := op.move(EventRelease, now)
	switch {
	case ok:
		ch.Operation.FailureReason = &reason
		err := ch.settle(0)
		return ch, err
	case op.State == StateFailed && op.CapturedMicros == 0:
		return ch, nil
	}
	return Change{}, Errorf(CodeConflict, "the decision was settled already")
}

// executed refuses the executor's report on an operation that was never handed to it.
func (op Operation) executed() error {
	switch op.State {
	case StatePendingApproval: // it has no decision the executor could name
		return Errorf(CodeConflict, "the operation has not been approved; there is nothing to settle")
	case StateApproved:
		return Errorf(CodeConflict, "the operation has not been resumed; there is nothing to settle")
	case StateDenied, StateExpired:
		// An approval that was denied or expired before the agent resumed it keeps its
		// decision id, but it was never handed to an executor: nothing may be reported.
		return Errorf(CodeConflict, "the operation was %s before it was executed; there is nothing to settle", op.State)
	}
	return nil
}
