package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"hubu.dev/hubu/services/hubu"
	"hubu.dev/hubu/sql/hubu/hubudb"
)

// GetOperation returns an operation by public handle. An agent sees only its own: any
// other is not_found, so handles of other agents cannot be probed.
func (s *Store) GetOperation(ctx context.Context, who hubu.Principal, handle string, now time.Time) (hubu.Operation, error) {
	op, err := s.byHandle(who, handle).read(ctx, s.db)
	if err != nil {
		return hubu.Operation{}, err
	}
	return s.current(ctx, op, now)
}

// current is op as a read at now finds it: one that waited for people past its deadline is
// expired by the read (under the operation's lock); any other is answered as read.
func (s *Store) current(ctx context.Context, op hubu.Operation, now time.Time) (hubu.Operation, error) {
	if ch, err := op.Expire(now); err == nil && ch.Event == "" {
		return op, nil
	}
	return s.expireIfDue(ctx, op.ID, now)
}

// Ledger returns an operation's ledger entries.
func (s *Store) Ledger(ctx context.Context, who hubu.Principal, handle string, now time.Time) (hubu.Operation, []hubu.LedgerEntry, error) {
	op, err := s.GetOperation(ctx, who, handle, now)
	if err != nil {
		return hubu.Operation{}, nil, err
	}
	rows, err := s.q.ListLedgerEntries(ctx, s.db, op.ID)
	if err != nil {
		return hubu.Operation{}, nil, fmt.Errorf("ledger: %w", err)
	}
	return op, each(rows, ledgerEntryOf), nil
}

// ListPendingApprovals returns the operations waiting for a human, oldest first.
func (s *Store) ListPendingApprovals(ctx context.Context, now time.Time) ([]hubu.Operation, error) {
	if _, err := s.ExpireApprovals(ctx, now, 1000); err != nil {
		return nil, err
	}
	rows, err := s.q.ListPendingApprovals(ctx, s.db)
	if err != nil {
		return nil, fmt.Errorf("list approvals: %w", err)
	}
	return each(rows, func(r hubudb.ListPendingApprovalsRow) hubu.Operation {
		return operationOf(r.Operation, r.Held, r.Captured, r.Released)
	}), nil
}

// Approve approves a held operation and issues its decision (hubu.Operation.Approve).
func (s *Store) Approve(ctx context.Context, operator, handle string, now time.Time) (hubu.Operation, error) {
	return s.decide(ctx, handle, now, func(op hubu.Operation) (hubu.Change, error) {
		return op.Approve(operator, now, s.ApprovalTTL)
	})
}

// Deny refuses a held operation, or an approved one the agent has not resumed, and releases
// its hold (hubu.Operation.Deny).
func (s *Store) Deny(ctx context.Context, operator, handle, reason string, now time.Time) (hubu.Operation, error) {
	return s.decide(ctx, handle, now, func(op hubu.Operation) (hubu.Change, error) {
		return op.Deny(operator, reason, now)
	})
}

// decide runs an operator's decision, expiring the operation first when its approval window
// has passed.
func (s *Store) decide(ctx context.Context, handle string, now time.Time, decision event) (hubu.Operation, error) {
	return s.transition(ctx, s.byHandle(hubu.Principal{Role: hubu.RoleOperator}, handle), expire(now), decision)
}

// Resume moves an approved operation to dispatching, once. In any other state it changes
// nothing and returns the operation as it is: re-sending can never skip an approval.
func (s *Store) Resume(ctx context.Context, who hubu.Principal, handle string, now time.Time) (hubu.Operation, error) {
	return s.transition(ctx, s.byHandle(who, handle), expire(now), func(op hubu.Operation) (hubu.Change, error) {
		return op.Resume(now), nil
	})
}

// ExpireApprovals closes operations that waited for people past their deadline and releases
// their holds. It returns how many it closed.
func (s *Store) ExpireApprovals(ctx context.Context, now time.Time, limit int32) (int, error) {
	ids, err := s.q.ListExpiredApprovals(ctx, s.db, hubudb.ListExpiredApprovalsParams{ApprovalExpiresAt: &now, Limit: limit})
	if err != nil {
		return 0, fmt.Errorf("list expired approvals: %w", err)
	}
	n := 0
	for _, id := range ids {
		op, err := s.expireIfDue(ctx, id, now)
		if err != nil {
			return n, err
		}
		if op.State == hubu.StateExpired {
			n++
		}
	}
	return n, nil
}

func (s *Store) expireIfDue(ctx context.Context, id uuid.UUID, now time.Time) (hubu.Operation, error) {
	return s.transition(ctx, s.byID(id), expire(now))
}

// operationOf converts a row with its ledger totals, as LedgerTotals sums them: held counts
// every hold, including what was captured or released since.
func operationOf(r hubudb.Operation, held, captured, released int64) hubu.Operation {
	op := hubu.Operation{
		ID: r.ID, AgentID: r.AgentID, PublicHandle: r.PublicHandle, Tool: r.Tool, Arguments: r.Arguments,
		RequestHash: r.RequestHash, Account: r.Account, Scope: hubu.Scope{Provider: r.Provider, Model: r.Model, Size: r.Size},
		AmountMicros: r.AmountMicros, Currency: r.Currency, State: hubu.State(r.State), DecisionID: r.DecisionID,
		ApprovalExpiresAt: r.ApprovalExpiresAt, DecidedBy: r.DecidedBy, DecidedAt: r.DecidedAt, FailureReason: r.FailureReason,
		ProviderCostMicros: r.ProviderCostMicros,
		HeldMicros:         held - captured - released, CapturedMicros: captured, ReleasedMicros: released,
		DispatchAttempts: int(r.DispatchAttempts), CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
	}
	if r.DecisionID != nil {
		op.DecisionIssuedAt = r.CreatedAt
		if r.DecidedBy != nil && r.DecidedAt != nil {
			op.DecisionIssuedAt = *r.DecidedAt // approved by a person
		}
	}
	if r.DenialCode != nil {
		op.Denial = &hubu.Denial{Code: *r.DenialCode, Message: deref(r.DenialMessage)}
	}
	return op
}

func denialColumns(d *hubu.Denial) (code, message *string) {
	if d == nil {
		return nil, nil
	}
	return &d.Code, &d.Message
}

func ledgerEntryOf(e hubudb.LedgerEntry) hubu.LedgerEntry {
	return hubu.LedgerEntry{ID: e.ID, Kind: e.Kind, AmountMicros: e.AmountMicros, Currency: e.Currency, CreatedAt: e.CreatedAt}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
