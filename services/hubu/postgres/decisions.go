package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"hubu.dev/hubu/services/hubu"
	"hubu.dev/hubu/sql/hubu/hubudb"
)

// GetDecision returns the operation a decision belongs to.
func (s *Store) GetDecision(ctx context.Context, decisionID uuid.UUID) (hubu.Operation, error) {
	return s.byDecision(decisionID).read(ctx, s.db)
}

// Settle captures what an execution cost and releases the rest of the hold
// (hubu.Operation.Settle).
func (s *Store) Settle(ctx context.Context, decisionID uuid.UUID, amount int64, failed bool, reason string, providerCost *int64, now time.Time) (hubu.Operation, error) {
	return s.transition(ctx, s.byDecision(decisionID), func(op hubu.Operation) (hubu.Change, error) {
		return op.Settle(amount, failed, reason, providerCost, now)
	})
}

// Release releases the whole hold of an execution that charged nothing; the operation fails
// (hubu.Operation.Release).
func (s *Store) Release(ctx context.Context, decisionID uuid.UUID, reason string, now time.Time) (hubu.Operation, error) {
	return s.transition(ctx, s.byDecision(decisionID), func(op hubu.Operation) (hubu.Change, error) {
		return op.Release(reason, now)
	})
}

// DecisionSummary is one issued decision with its ledger totals.
type DecisionSummary struct {
	DecisionID     uuid.UUID
	PublicHandle   string
	State          hubu.State
	AmountMicros   int64
	Currency       string
	HeldMicros     int64
	CapturedMicros int64
	ReleasedMicros int64
	// ProviderCostMicros is what the provider stated the work cost, where the executor said.
	ProviderCostMicros *int64
	CreatedAt          time.Time
}

// ListDecisions returns every decision Hubu issued, oldest first, for reconciliation.
func (s *Store) ListDecisions(ctx context.Context) ([]DecisionSummary, error) {
	rows, err := s.q.ListDecisions(ctx, s.db)
	if err != nil {
		return nil, fmt.Errorf("list decisions: %w", err)
	}
	return each(rows, func(r hubudb.ListDecisionsRow) DecisionSummary {
		return DecisionSummary{
			DecisionID: r.DecisionID, PublicHandle: r.PublicHandle, State: hubu.State(r.State), AmountMicros: r.AmountMicros,
			Currency: r.Currency, HeldMicros: r.Held - r.Captured - r.Released, CapturedMicros: r.Captured, ReleasedMicros: r.Released,
			ProviderCostMicros: r.ProviderCostMicros, CreatedAt: r.CreatedAt,
		}
	}), nil
}
