package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"hubu.dev/hubu/services/hubu"
	"hubu.dev/hubu/sql/hubu/hubudb"
)

// event is one of the operation's transitions (hubu.Operation's methods) with its arguments.
type event func(hubu.Operation) (hubu.Change, error)

// expire closes an operation that waited for people past its deadline: any read or decision
// of one that waits for people runs it first.
func expire(now time.Time) event {
	return func(op hubu.Operation) (hubu.Change, error) { return op.Expire(now) }
}

// locator finds one operation: lock takes its row lock, read reads it with its ledger totals.
// Both refuse what the caller may not see as not_found.
type locator struct {
	lock func(context.Context, hubudb.DBTX) error
	read func(context.Context, hubudb.DBTX) (hubu.Operation, error)
}

func (s *Store) byID(id uuid.UUID) locator {
	return locator{
		lock: func(ctx context.Context, db hubudb.DBTX) error { return s.q.LockOperationByID(ctx, db, id) },
		read: func(ctx context.Context, db hubudb.DBTX) (hubu.Operation, error) {
			r, err := s.q.GetOperationByID(ctx, db, id)
			if err != nil {
				return hubu.Operation{}, queryError(err, "get operation", hubu.Errorf(hubu.CodeNotFound, "no operation %s", id))
			}
			return operationOf(r.Operation, r.Held, r.Captured, r.Released), nil
		},
	}
}

// byHandle finds an operation by public handle for who. An agent sees only its own: any
// other is not_found, so handles of other agents cannot be probed.
func (s *Store) byHandle(who hubu.Principal, handle string) locator {
	return locator{
		lock: func(ctx context.Context, db hubudb.DBTX) error { return s.q.LockOperationByHandle(ctx, db, handle) },
		read: func(ctx context.Context, db hubudb.DBTX) (hubu.Operation, error) {
			r, err := s.q.GetOperationByHandle(ctx, db, handle)
			if isNoRows(err) || (err == nil && who.Role == hubu.RoleAgent && r.Operation.AgentID != who.AgentID) {
				return hubu.Operation{}, hubu.Errorf(hubu.CodeNotFound, "no operation with that public handle")
			}
			if err != nil {
				return hubu.Operation{}, fmt.Errorf("get operation: %w", err)
			}
			return operationOf(r.Operation, r.Held, r.Captured, r.Released), nil
		},
	}
}

func (s *Store) byDecision(id uuid.UUID) locator {
	return locator{
		lock: func(ctx context.Context, db hubudb.DBTX) error { return s.q.LockOperationByDecision(ctx, db, &id) },
		read: func(ctx context.Context, db hubudb.DBTX) (hubu.Operation, error) {
			r, err := s.q.GetOperationByDecision(ctx, db, &id)
			if err != nil {
				return hubu.Operation{}, queryError(err, "get decision", hubu.Errorf(hubu.CodeNotFound, "no decision %s", id))
			}
			return operationOf(r.Operation, r.Held, r.Captured, r.Released), nil
		},
	}
}

// byKey reads the record under an agent's operation key on db; pgx.ErrNoRows when there is none.
func (s *Store) byKey(ctx context.Context, db hubudb.DBTX, key hubudb.GetOperationByKeyParams) (hubu.Operation, error) {
	r, err := s.q.GetOperationByKey(ctx, db, key)
	if isNoRows(err) {
		return hubu.Operation{}, err
	}
	if err != nil {
		return hubu.Operation{}, fmt.Errorf("get operation: %w", err)
	}
	return operationOf(r.Operation, r.Held, r.Captured, r.Released), nil
}

// transition runs events one after the other on the operation at locates, which it holds
// locked, and writes what each changes. A refusal (a *hubu.Error) stops the run and is
// returned after what the events before it changed (an expiry) is committed.
//
// Two round trips: BEGIN, the lock and, once it is held, the row with its ledger totals; then
// the change (state, ledger entries, budget use) in one statement, with COMMIT.
func (s *Store) transition(ctx context.Context, at locator, events ...event) (hubu.Operation, error) {
	type out struct {
		op      hubu.Operation
		refusal error
	}
	res, err := withPipeTx(ctx, s.pool, func(p *pipe) (out, error) {
		if err := at.lock(ctx, p); err != nil {
			return out{}, fmt.Errorf("lock operation: %w", err)
		}
		// Read after the lock, in a statement of its own: every ledger entry of an operation is
		// written under it.
		op, err := at.read(ctx, p)
		if err != nil {
			return out{}, err
		}
		type change struct {
			from hubu.Operation
			ch   hubu.Change
		}
		var changes []change
		var refusal error
		for _, ev := range events {
			ch, err := ev(op)
			if err != nil && hubu.ErrorCode(err) != hubu.CodeInternal {
				refusal = err
				break
			}
			if err != nil {
				return out{}, err
			}
			if ch.Event != "" {
				changes = append(changes, change{op, ch})
			}
			op = ch.Operation
		}
		for i, c := range changes {
			if i == len(changes)-1 {
				p.thenCommit()
			}
			if op, err = s.write(ctx, p, c.from, c.ch); err != nil {
				return out{}, err
			}
		}
		return out{op: op, refusal: refusal}, nil
	})
	if err != nil {
		return hubu.Operation{}, err
	}
	return res.op, res.refusal
}

// errMovedOn is a change that was not written because the row is no longer in the state, or
// at the hand-off count, the change was computed from.
var errMovedOn = errors.New("the operation moved on")

// write stores ch, computed from the operation from: its new state, guarded by from's state and
// hand-off count, its ledger entries and the budget use they move, in one statement.
func (s *Store) write(ctx context.Context, db hubudb.DBTX, from hubu.Operation, ch hubu.Change) (hubu.Operation, error) {
	o := ch.Operation
	code, message := denialColumns(o.Denial)
	l := ledgerColumnsOf(ch.Ledger)
	row, err := s.q.WriteChange(ctx, db, hubudb.WriteChangeParams{
		ID: o.ID, FromState: string(from.State), FromDispatchAttempts: int32(from.DispatchAttempts),
		ToState: string(o.State), DecisionID: o.DecisionID, DecidedBy: o.DecidedBy, DecidedAt: o.DecidedAt,
		ApprovalExpiresAt: o.ApprovalExpiresAt, DenialCode: code, DenialMessage: message, FailureReason: o.FailureReason,
		ProviderCostMicros: o.ProviderCostMicros,
		DispatchAttempts:   int32(o.DispatchAttempts), Now: o.UpdatedAt,
		BudgetDelta: l.budgetDelta, LedgerKinds: l.kinds, LedgerAmounts: l.amounts, LedgerCurrencies: l.currencies,
		LedgerCreatedAt: l.createdAt,
	})
	if isNoRows(err) {
		err = errMovedOn
	}
	if err != nil {
		return hubu.Operation{}, fmt.Errorf("%s operation: %w", ch.Event, err)
	}
	return changed(hubudb.Operation(row), ch), nil
}

// ledgerColumns are a change's ledger entries as WriteChange and InsertAuthorization take
// them, with what they move the budget use by.
type ledgerColumns struct {
	kinds, currencies []string
	amounts           []int64
	createdAt         []time.Time
	budgetDelta       int64
}

func ledgerColumnsOf(entries []hubu.LedgerEntry) ledgerColumns {
	var l ledgerColumns
	for _, e := range entries {
		l.kinds, l.amounts = append(l.kinds, e.Kind), append(l.amounts, e.AmountMicros)
		l.currencies, l.createdAt = append(l.currencies, e.Currency), append(l.createdAt, e.CreatedAt)
		l.budgetDelta += e.BudgetDelta()
	}
	return l
}

// changed is a row as a change left it, with the ledger totals the change computed: no one
// else writes the ledger of an operation while its lock is held.
func changed(r hubudb.Operation, ch hubu.Change) hubu.Operation {
	o := ch.Operation
	return operationOf(r, o.HeldMicros+o.CapturedMicros+o.ReleasedMicros, o.CapturedMicros, o.ReleasedMicros)
}
