package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"hubu.dev/hubu/services/hubu"
	"hubu.dev/hubu/sql/hubu/hubudb"
)

// MarkExecuting records that the executor accepted the decision of op, the operation as the
// caller last read it. It is a no-op when the operation moved on already (the executor may
// settle before this is recorded).
func (s *Store) MarkExecuting(ctx context.Context, op hubu.Operation, now time.Time) (hubu.Operation, error) {
	return s.move(ctx, op, func(op hubu.Operation) (hubu.Change, error) {
		return op.Accept(now), nil
	})
}

// CountDispatchAttempt records one more try to hand the decision of op, the operation as the
// caller last read it, to the executor (for operators: it is no evidence that the executor got
// it). ok is false, and nothing changes, when the operation is no longer dispatching: it needs
// no hand-off.
func (s *Store) CountDispatchAttempt(ctx context.Context, op hubu.Operation, now time.Time) (counted hubu.Operation, ok bool, err error) {
	counted, err = s.move(ctx, op, func(op hubu.Operation) (hubu.Change, error) {
		return op.HandOff(now), nil
	})
	// A hand-off leaves a dispatching operation dispatching, and changes no other.
	return counted, err == nil && counted.State == hubu.StateDispatching, err
}

// ClaimDispatchAttempt is CountDispatchAttempt for a re-send found by ListDispatching: it
// counts the try only if the operation is still op, dispatching at op's hand-off count, and
// otherwise changes nothing (ok is false). Replicas that run their recovery passes at the same
// moment list the same due decisions; each try is one guarded UPDATE (safe without the row
// lock, as Store.move explains), so exactly one of them claims each decision, and the others
// leave it alone instead of handing it off again. The claim also moves updated_at, which keeps
// the decision out of ListDispatching for the retry interval: a lease on the re-send. Should the
// replica that claimed it die before the executor accepts, another re-sends the decision once
// the interval has passed.
func (s *Store) ClaimDispatchAttempt(ctx context.Context, op hubu.Operation, now time.Time) (claimed hubu.Operation, ok bool, err error) {
	ch := op.HandOff(now)
	if ch.Event == "" {
		return op, false, nil
	}
	claimed, err = s.write(ctx, s.db, op, ch)
	switch {
	case errors.Is(err, errMovedOn):
		return op, false, nil
	case err != nil:
		return op, false, err
	}
	return claimed, true, nil
}

// ListDispatching returns operations whose decision was issued at or before olderThan but
// that the executor has not acknowledged: their hand-off must be re-sent.
func (s *Store) ListDispatching(ctx context.Context, olderThan time.Time, limit int32) ([]hubu.Operation, error) {
	rows, err := s.q.ListDispatching(ctx, s.db, hubudb.ListDispatchingParams{UpdatedAt: olderThan, Limit: limit})
	if err != nil {
		return nil, fmt.Errorf("list dispatching: %w", err)
	}
	return each(rows, func(r hubudb.ListDispatchingRow) hubu.Operation {
		return operationOf(r.Operation, r.Held, r.Captured, r.Released)
	}), nil
}

// move runs ev on op as the caller read it, without the operation's lock, when the change is a
// step of a hand-off (counting a try, the executor's acceptance): one guarded statement. It is
// safe because a dispatching operation changes in no other way than by hand-offs, each of which
// raises its dispatch_attempts, and never becomes dispatching again once it moved on; so a row
// still dispatching with the count op has is op, column for column and ledger entry for ledger
// entry, and the change computed from op is the one the lock would have computed. When the row
// moved on (the guard fails), or the change is anything else, ev runs under the lock.
//
// Counting a try commits without waiting for the disk (see writeUnflushed).
func (s *Store) move(ctx context.Context, op hubu.Operation, ev event) (hubu.Operation, error) {
	if ch, err := ev(op); err == nil && ch.Event != "" && ch.From == hubu.StateDispatching && len(ch.Ledger) == 0 {
		next, err := s.writeUnflushed(ctx, op, ch)
		if !errors.Is(err, errMovedOn) {
			return next, err
		}
	}
	return s.transition(ctx, s.byID(op.ID), ev)
}

// writeUnflushed is write in a transaction of its own that commits without waiting for the WAL
// to reach the disk (synchronous_commit off, for this transaction only), in one round trip. It
// is for counting a try to hand a decision over alone: a count for operators, which moves no
// money and no budget and is no evidence of anything (gongbu.Issued.PossiblySubmitted does not
// read it). Should a crash of Postgres lose one, the operation is found one try short, still
// dispatching, and is handed over again. A later commit that waits for the disk flushes the log
// up to itself, so a count is never lost while what came after it is kept. Every other change
// waits for the disk: the executor's acceptance (executing) among them, because it is the
// evidence that a decision may have been submitted should Gongbu lose its row.
func (s *Store) writeUnflushed(ctx context.Context, from hubu.Operation, ch hubu.Change) (hubu.Operation, error) {
	if ch.Event != hubu.EventHandOff || len(ch.Ledger) != 0 {
		return s.write(ctx, s.db, from, ch)
	}
	return withPipeTx(ctx, s.pool, func(p *pipe) (hubu.Operation, error) {
		_, _ = p.Exec(ctx, "SET LOCAL synchronous_commit = off")
		p.thenCommit()
		return s.write(ctx, p, from, ch)
	})
}
