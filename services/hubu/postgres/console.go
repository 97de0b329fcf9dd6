package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"hubu.dev/hubu/services/hubu"
	"hubu.dev/hubu/services/hubu/policy"
	"hubu.dev/hubu/sql/hubu/hubudb"
)

// RecentOperation is one operation with its ledger entries, for the approval console.
type RecentOperation struct {
	hubu.Operation
	Ledger []hubu.LedgerEntry
}

// ListRecentOperations returns the newest operations first, at most limit, each with its
// ledger, after closing expired holds.
func (s *Store) ListRecentOperations(ctx context.Context, now time.Time, limit int32) ([]RecentOperation, error) {
	if _, err := s.ExpireApprovals(ctx, now, 1000); err != nil {
		return nil, err
	}
	rows, err := s.q.ListRecentOperations(ctx, s.db, limit)
	if err != nil {
		return nil, fmt.Errorf("list recent operations: %w", err)
	}
	ids := each(rows, func(r hubudb.ListRecentOperationsRow) uuid.UUID { return r.Operation.ID })
	entries, err := s.q.ListLedgerEntriesOf(ctx, s.db, ids)
	if err != nil {
		return nil, fmt.Errorf("list ledger entries: %w", err)
	}
	byOp := make(map[uuid.UUID][]hubu.LedgerEntry, len(rows))
	for _, e := range entries {
		byOp[e.OperationID] = append(byOp[e.OperationID], ledgerEntryOf(e))
	}
	return each(rows, func(r hubudb.ListRecentOperationsRow) RecentOperation {
		return RecentOperation{Operation: operationOf(r.Operation, r.Held, r.Captured, r.Released), Ledger: byOp[r.Operation.ID]}
	}), nil
}

// AgentBudget is an agent with its use of the current budget period.
type AgentBudget struct {
	Agent  hubu.Agent
	Budget hubu.Budget
}

// ListBudgets returns every agent, by name, with its budget used and left in the current
// period, after closing expired holds.
func (s *Store) ListBudgets(ctx context.Context, now time.Time) ([]AgentBudget, error) {
	if _, err := s.ExpireApprovals(ctx, now, 1000); err != nil {
		return nil, err
	}
	agents, err := s.ListAgents(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]AgentBudget, 0, len(agents))
	for _, a := range agents {
		b, err := s.budget(ctx, a, now)
		if err != nil {
			return nil, err
		}
		out = append(out, AgentBudget{Agent: a, Budget: b})
	}
	return out, nil
}

// budget is an agent's use of its current period: outstanding holds plus captures.
func (s *Store) budget(ctx context.Context, a hubu.Agent, now time.Time) (hubu.Budget, error) {
	start, err := policy.PeriodStart(a.Policy.BudgetPeriod, now)
	if err != nil {
		return hubu.Budget{}, err
	}
	used, err := s.q.SumBudgetUsage(ctx, s.db, hubudb.SumBudgetUsageParams{AgentID: a.ID, Since: start, Until: policy.PeriodEnd(a.Policy.BudgetPeriod, start)})
	if err != nil {
		return hubu.Budget{}, fmt.Errorf("budget usage: %w", err)
	}
	return hubu.Budget{
		Period: a.Policy.BudgetPeriod, PeriodStart: start, LimitMicros: a.Policy.BudgetMicros,
		UsedMicros: used, RemainingMicros: max(a.Policy.BudgetMicros-used, 0), Currency: a.Policy.Currency,
	}, nil
}
