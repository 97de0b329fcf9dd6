package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"hubu.dev/hubu/services/hubu"
	"hubu.dev/hubu/services/hubu/policy"
	"hubu.dev/hubu/sql/hubu/hubudb"
)

// Authorize creates the record for (agentID, req.OperationKey), or returns the existing one
// when the same key comes again with the same request: tool, arguments, request hash and the
// scope they name (replayed is then true). A request under the key that asks for different
// work is create_new_operation. The amount and the account are fixed when the record is
// first written: a replay never reads the catalog or the agent's account, so an operator's
// later change to either (even removing the model) cannot turn a redelivery into a refusal.
// The decision and the budget hold are written in one transaction, under a lock on the
// agent's policy, so concurrent authorizations of one agent can never overspend its budget.
func (s *Store) Authorize(ctx context.Context, agentID uuid.UUID, req hubu.AuthorizeRequest, now time.Time) (op hubu.Operation, replayed bool, err error) {
	scope := hubu.Scope{Provider: hubu.ProviderBFL, Model: req.Arguments.Model, Size: fmt.Sprintf("%dx%d", req.Arguments.Width, req.Arguments.Height)}
	args, err := marshalArguments(req.Arguments)
	if err != nil {
		return hubu.Operation{}, false, fmt.Errorf("encode arguments: %w", err)
	}
	want := hubudb.Operation{
		PublicHandle: req.PublicHandle, Arguments: args, Tool: req.Tool, RequestHash: req.RequestHash,
		Provider: scope.Provider, Model: scope.Model, Size: scope.Size,
	}

	// Fast path for replays, before any pricing: no lock needed to read a record that exists.
	if existing, err := s.q.GetOperationByKey(ctx, s.pool, hubudb.GetOperationByKeyParams{AgentID: agentID, OperationKey: req.OperationKey}); err == nil {
		op, err := s.replay(ctx, existing, want, now)
		return op, true, err
	} else if !isNoRows(err) {
		return hubu.Operation{}, false, fmt.Errorf("get operation: %w", err)
	}

	price, err := s.price(ctx, s.pool, scope)
	if err != nil {
		return hubu.Operation{}, false, err
	}
	agent, err := s.q.GetAgent(ctx, s.pool, agentID)
	if err != nil {
		return hubu.Operation{}, false, fmt.Errorf("get agent: %w", err)
	}

	type result struct {
		row      hubudb.Operation
		replayed bool
	}
	res, err := withTxV(ctx, s.pool, func(tx pgx.Tx) (result, error) {
		polRow, err := s.q.LockPolicy(ctx, tx, agentID)
		if err != nil {
			return result{}, fmt.Errorf("lock policy: %w", err)
		}
		// Another request under the same key may have committed while we waited for the lock.
		existing, err := s.q.GetOperationByKey(ctx, tx, hubudb.GetOperationByKeyParams{AgentID: agentID, OperationKey: req.OperationKey})
		if err == nil {
			return result{row: existing, replayed: true}, nil
		} else if !isNoRows(err) {
			return result{}, fmt.Errorf("get operation: %w", err)
		}
		pol := policyOfRow(polRow)
		periodStart, err := policy.PeriodStart(pol.BudgetPeriod, now)
		if err != nil {
			return result{}, err
		}
		day, _ := policy.PeriodStart("day", now)
		if err := s.q.EnsureBudgetUsage(ctx, tx, hubudb.EnsureBudgetUsageParams{AgentID: agentID, Day: day}); err != nil {
			return result{}, fmt.Errorf("budget usage: %w", err)
		}
		used, err := s.q.SumBudgetUsage(ctx, tx, hubudb.SumBudgetUsageParams{AgentID: agentID, Since: periodStart, Until: policy.PeriodEnd(pol.BudgetPeriod, periodStart)})
		if err != nil {
			return result{}, fmt.Errorf("budget usage: %w", err)
		}

		ins := hubudb.InsertOperationParams{
			ID: uuid.New(), AgentID: agentID, OperationKey: req.OperationKey, PublicHandle: req.PublicHandle,
			Tool: req.Tool, Arguments: args, RequestHash: req.RequestHash, Account: agent.Account,
			Provider: scope.Provider, Model: scope.Model, Size: scope.Size, AmountMicros: price.AmountMicros,
			Currency: price.Currency, BudgetDay: day, CreatedAt: now,
		}
		verdict := policy.Decide(pol, scope, price.AmountMicros, price.Currency, used)
		switch verdict.Outcome {
		case policy.Approve:
			id := uuid.New()
			ins.State, ins.DecisionID = string(hubu.StateDispatching), &id
		case policy.Hold:
			expires := now.Add(s.ApprovalTTL)
			ins.State, ins.ApprovalExpiresAt = string(hubu.StatePendingApproval), &expires
		case policy.Deny:
			ins.State, ins.DenialCode, ins.DenialMessage = string(hubu.StateDenied), &verdict.Denial.Code, &verdict.Denial.Message
		}
		row, err := s.q.InsertOperation(ctx, tx, ins)
		if uniqueViolation(err, "operations_public_handle_key") {
			return result{}, hubu.Errorf(hubu.CodeConflict, "the public handle belongs to another operation")
		}
		if err != nil {
			return result{}, fmt.Errorf("insert operation: %w", err)
		}
		if verdict.Outcome != policy.Deny && price.AmountMicros > 0 {
			if err := s.hold(ctx, tx, row, now); err != nil {
				return result{}, err
			}
		}
		return result{row: row}, nil
	})
	if err != nil {
		return hubu.Operation{}, false, err
	}
	if res.replayed {
		op, err := s.replay(ctx, res.row, want, now)
		return op, true, err
	}
	op, err = s.operation(ctx, s.pool, res.row)
	return op, false, err
}

// replay checks that a re-sent request asks for exactly the work the record holds. The
// arguments are compared as well as their hash, so a router bug cannot pass off other work
// under a matching hash. The amount, currency and account are not compared: the request
// carries none of them, and what the catalog or the agent's account says now has no bearing
// on an operation already decided.
func (s *Store) replay(ctx context.Context, existing, want hubudb.Operation, now time.Time) (hubu.Operation, error) {
	if existing.PublicHandle != want.PublicHandle {
		return hubu.Operation{}, hubu.Errorf(hubu.CodeConflict, "this operation key was authorized under another public handle")
	}
	var stored hubu.ImageRequest
	if err := json.Unmarshal(existing.Arguments, &stored); err != nil {
		return hubu.Operation{}, fmt.Errorf("decode stored arguments: %w", err)
	}
	storedArgs, err := marshalArguments(stored)
	if err != nil {
		return hubu.Operation{}, err
	}
	for _, d := range []struct{ field, got, want string }{
		{"arguments", string(storedArgs), string(want.Arguments)},
		{"tool", existing.Tool, want.Tool},
		{"request hash", existing.RequestHash, want.RequestHash},
		{"provider", existing.Provider, want.Provider},
		{"model", existing.Model, want.Model},
		{"size", existing.Size, want.Size},
	} {
		if d.got != d.want {
			return hubu.Operation{}, hubu.Errorf(hubu.CodeCreateNewOperation,
				"this operation key was authorized for a request with other %s; a changed request needs a new operation", d.field)
		}
	}
	if waitsForPeople(existing) {
		return s.expireIfDue(ctx, existing.ID, now)
	}
	return s.operation(ctx, s.pool, existing)
}

// hold places an operation's hold in the ledger and its budget period.
func (s *Store) hold(ctx context.Context, tx pgx.Tx, row hubudb.Operation, now time.Time) error {
	if _, err := s.q.InsertLedgerEntry(ctx, tx, hubudb.InsertLedgerEntryParams{
		OperationID: row.ID, Kind: "hold", AmountMicros: row.AmountMicros, Currency: row.Currency, CreatedAt: now,
	}); err != nil {
		return fmt.Errorf("ledger hold: %w", err)
	}
	if _, err := s.q.AddBudgetUsage(ctx, tx, hubudb.AddBudgetUsageParams{AgentID: row.AgentID, Day: row.BudgetDay, Delta: row.AmountMicros}); err != nil {
		return fmt.Errorf("budget hold: %w", err)
	}
	return nil
}

// settle captures captured of what is still held and releases the rest.
func (s *Store) settle(ctx context.Context, tx pgx.Tx, row hubudb.Operation, captured int64, now time.Time) error {
	t, err := s.q.LedgerTotals(ctx, tx, row.ID)
	if err != nil {
		return fmt.Errorf("ledger totals: %w", err)
	}
	outstanding := t.Held - t.Captured - t.Released
	if captured > outstanding {
		return fmt.Errorf("capture %d exceeds the %d held", captured, outstanding)
	}
	entries := []struct {
		kind   string
		amount int64
	}{{"capture", captured}, {"release", outstanding - captured}}
	for _, e := range entries {
		if e.amount == 0 {
			continue
		}
		if _, err := s.q.InsertLedgerEntry(ctx, tx, hubudb.InsertLedgerEntryParams{
			OperationID: row.ID, Kind: e.kind, AmountMicros: e.amount, Currency: row.Currency, CreatedAt: now,
		}); err != nil {
			return fmt.Errorf("ledger %s: %w", e.kind, err)
		}
	}
	if released := outstanding - captured; released > 0 {
		if _, err := s.q.AddBudgetUsage(ctx, tx, hubudb.AddBudgetUsageParams{AgentID: row.AgentID, Day: row.BudgetDay, Delta: -released}); err != nil {
			return fmt.Errorf("budget release: %w", err)
		}
	}
	return nil
}

// GetOperation returns an operation by public handle. An agent sees only its own: any
// other is not_found, so handles of other agents cannot be probed.
func (s *Store) GetOperation(ctx context.Context, who hubu.Principal, handle string, now time.Time) (hubu.Operation, error) {
	row, err := s.visible(ctx, who, handle)
	if err != nil {
		return hubu.Operation{}, err
	}
	if waitsForPeople(row) {
		return s.expireIfDue(ctx, row.ID, now)
	}
	return s.operation(ctx, s.pool, row)
}

func (s *Store) visible(ctx context.Context, who hubu.Principal, handle string) (hubudb.Operation, error) {
	row, err := s.q.GetOperationByHandle(ctx, s.pool, handle)
	if isNoRows(err) || (err == nil && who.Role == hubu.RoleAgent && row.AgentID != who.AgentID) {
		return hubudb.Operation{}, hubu.Errorf(hubu.CodeNotFound, "no operation with that public handle")
	}
	if err != nil {
		return hubudb.Operation{}, fmt.Errorf("get operation: %w", err)
	}
	return row, nil
}

// Ledger returns an operation's ledger entries.
func (s *Store) Ledger(ctx context.Context, who hubu.Principal, handle string, now time.Time) (hubu.Operation, []hubu.LedgerEntry, error) {
	op, err := s.GetOperation(ctx, who, handle, now)
	if err != nil {
		return hubu.Operation{}, nil, err
	}
	rows, err := s.q.ListLedgerEntries(ctx, s.pool, op.ID)
	if err != nil {
		return hubu.Operation{}, nil, fmt.Errorf("ledger: %w", err)
	}
	entries := make([]hubu.LedgerEntry, 0, len(rows))
	for _, r := range rows {
		entries = append(entries, hubu.LedgerEntry{ID: r.ID, Kind: r.Kind, AmountMicros: r.AmountMicros, Currency: r.Currency, CreatedAt: r.CreatedAt})
	}
	return op, entries, nil
}

// ListPendingApprovals returns the operations waiting for a human, oldest first.
func (s *Store) ListPendingApprovals(ctx context.Context, now time.Time) ([]hubu.Operation, error) {
	if _, err := s.ExpireApprovals(ctx, now, 1000); err != nil {
		return nil, err
	}
	rows, err := s.q.ListPendingApprovals(ctx, s.pool)
	if err != nil {
		return nil, fmt.Errorf("list approvals: %w", err)
	}
	out := make([]hubu.Operation, 0, len(rows))
	for _, r := range rows {
		op, err := s.operation(ctx, s.pool, r)
		if err != nil {
			return nil, err
		}
		out = append(out, op)
	}
	return out, nil
}

// Approve approves a held operation and issues its decision. Approving it again answers the
// same; an operation that was denied, expired or never held cannot be approved.
func (s *Store) Approve(ctx context.Context, operator, handle string, now time.Time) (hubu.Operation, error) {
	return s.decide(ctx, handle, now, func(tx pgx.Tx, row hubudb.Operation) (hubudb.Operation, error) {
		switch {
		case row.State == string(hubu.StatePendingApproval):
			id := uuid.New()
			resumeBy := now.Add(s.ApprovalTTL)
			return s.q.ApproveOperation(ctx, tx, hubudb.ApproveOperationParams{
				ID: row.ID, DecisionID: &id, DecidedBy: &operator, DecidedAt: &now, ApprovalExpiresAt: &resumeBy,
			})
		case row.State == string(hubu.StateExpired):
			return row, hubu.Errorf(hubu.CodeConflict, "the approval expired; the agent must make a new call")
		case row.State == string(hubu.StateDenied):
			return row, hubu.Errorf(hubu.CodeConflict, "the operation was denied")
		case row.DecidedBy != nil && row.DecisionID != nil:
			return row, nil // approved before, and still standing
		}
		return row, hubu.Errorf(hubu.CodeConflict, "the operation is not waiting for approval (state %s)", row.State)
	})
}

// Deny refuses a held operation, or an approved one the agent has not resumed, and releases
// its hold. Denying it again answers the same.
func (s *Store) Deny(ctx context.Context, operator, handle, reason string, now time.Time) (hubu.Operation, error) {
	if reason == "" {
		reason = "denied by an operator"
	}
	return s.decide(ctx, handle, now, func(tx pgx.Tx, row hubudb.Operation) (hubudb.Operation, error) {
		switch {
		case row.State == string(hubu.StatePendingApproval), row.State == string(hubu.StateApproved):
			return s.close(ctx, tx, row, hubu.StateDenied, hubu.DenialDenied, reason, &operator, now)
		case row.State == string(hubu.StateDenied) && row.DecidedBy != nil:
			return row, nil
		case row.State == string(hubu.StateExpired):
			return row, hubu.Errorf(hubu.CodeConflict, "the approval expired already")
		}
		return row, hubu.Errorf(hubu.CodeConflict, "the operation is not waiting for approval (state %s)", row.State)
	})
}

// decide runs an operator's decision on a locked operation, expiring it first when its
// approval window has passed.
func (s *Store) decide(ctx context.Context, handle string, now time.Time, fn func(pgx.Tx, hubudb.Operation) (hubudb.Operation, error)) (hubu.Operation, error) {
	row, err := s.q.GetOperationByHandle(ctx, s.pool, handle)
	if isNoRows(err) {
		return hubu.Operation{}, hubu.Errorf(hubu.CodeNotFound, "no operation with that public handle")
	}
	if err != nil {
		return hubu.Operation{}, fmt.Errorf("get operation: %w", err)
	}
	type out struct {
		row hubudb.Operation
		err error // a refusal, returned after the expiry (if any) is committed
	}
	res, err := withTxV(ctx, s.pool, func(tx pgx.Tx) (out, error) {
		row, err := s.lockAndExpire(ctx, tx, row.ID, now)
		if err != nil {
			return out{}, err
		}
		next, ferr := fn(tx, row)
		if ferr != nil && hubu.ErrorCode(ferr) == hubu.CodeInternal {
			return out{}, ferr
		}
		return out{row: next, err: ferr}, nil
	})
	if err != nil {
		return hubu.Operation{}, err
	}
	if res.err != nil {
		return hubu.Operation{}, res.err
	}
	return s.operation(ctx, s.pool, res.row)
}

// Resume moves an approved operation to dispatching, once. In any other state it changes
// nothing and returns the operation as it is: re-sending can never skip an approval.
func (s *Store) Resume(ctx context.Context, who hubu.Principal, handle string, now time.Time) (hubu.Operation, error) {
	row, err := s.visible(ctx, who, handle)
	if err != nil {
		return hubu.Operation{}, err
	}
	row, err = withTxV(ctx, s.pool, func(tx pgx.Tx) (hubudb.Operation, error) {
		row, err := s.lockAndExpire(ctx, tx, row.ID, now)
		if err != nil || row.State != string(hubu.StateApproved) {
			return row, err
		}
		return s.q.SetOperationState(ctx, tx, hubudb.SetOperationStateParams{
			ID: row.ID, FromState: string(hubu.StateApproved), ToState: string(hubu.StateDispatching), Now: now,
		})
	})
	if err != nil {
		return hubu.Operation{}, fmt.Errorf("resume: %w", err)
	}
	return s.operation(ctx, s.pool, row)
}

// MarkExecuting records that the executor accepted a decision. It is a no-op when the
// operation moved on already (the executor may settle before this is recorded).
func (s *Store) MarkExecuting(ctx context.Context, decisionID uuid.UUID, now time.Time) (hubu.Operation, error) {
	byDecision, err := s.byDecision(ctx, s.pool, decisionID)
	if err != nil {
		return hubu.Operation{}, err
	}
	next, err := s.q.SetOperationState(ctx, s.pool, hubudb.SetOperationStateParams{
		ID: byDecision.ID, FromState: string(hubu.StateDispatching), ToState: string(hubu.StateExecuting), Now: now,
	})
	if isNoRows(err) {
		return s.operationByID(ctx, byDecision.ID)
	}
	if err != nil {
		return hubu.Operation{}, fmt.Errorf("mark executing: %w", err)
	}
	return s.operation(ctx, s.pool, next)
}

// CountDispatchAttempt records one more try to hand a dispatching decision to the executor
// (for operators: it is no evidence that the executor got it). ok is false, and nothing
// changes, when the operation is no longer dispatching: it needs no hand-off.
func (s *Store) CountDispatchAttempt(ctx context.Context, decisionID uuid.UUID, now time.Time) (op hubu.Operation, ok bool, err error) {
	row, err := s.q.CountDispatchAttempt(ctx, s.pool, hubudb.CountDispatchAttemptParams{DecisionID: &decisionID, Now: now})
	if isNoRows(err) {
		op, err := s.GetDecision(ctx, decisionID)
		return op, false, err
	}
	if err != nil {
		return hubu.Operation{}, false, fmt.Errorf("count dispatch attempt: %w", err)
	}
	op, err = s.operation(ctx, s.pool, row)
	return op, err == nil, err
}

// GetDecision returns the operation a decision belongs to.
func (s *Store) GetDecision(ctx context.Context, decisionID uuid.UUID) (hubu.Operation, error) {
	row, err := s.byDecision(ctx, s.pool, decisionID)
	if err != nil {
		return hubu.Operation{}, err
	}
	return s.operation(ctx, s.pool, row)
}

// Settle captures what an execution cost and releases the rest of the hold. The operation
// succeeds; or, when failed is set (the provider charged, then failed the work), it fails
// with reason. Settling again with the same amount and outcome answers the same.
func (s *Store) Settle(ctx context.Context, decisionID uuid.UUID, amount int64, failed bool, reason string, now time.Time) (hubu.Operation, error) {
	to := hubu.StateSucceeded
	var failure *string
	if failed {
		if reason == "" {
			reason = "the execution failed after the provider charged"
		}
		to, failure = hubu.StateFailed, &reason
	}
	return s.finish(ctx, decisionID, now, func(tx pgx.Tx, row hubudb.Operation, t hubudb.LedgerTotalsRow) (hubudb.Operation, error) {
		switch {
		case row.State == string(to) && t.Captured == amount:
			return row, nil
		case row.State == string(hubu.StateSucceeded):
			return row, hubu.Errorf(hubu.CodeConflict, "the decision was settled already with another amount or outcome")
		case row.State == string(hubu.StateFailed) && t.Captured == 0:
			return row, hubu.Errorf(hubu.CodeConflict, "the decision was released already")
		case row.State == string(hubu.StateFailed):
			return row, hubu.Errorf(hubu.CodeConflict, "the decision was settled already with another amount or outcome")
		}
		if amount < 0 || amount > row.AmountMicros {
			return row, hubu.Errorf(hubu.CodeInvalidArguments, "the captured amount must be between 0 and the authorized %d micros", row.AmountMicros)
		}
		if err := s.settle(ctx, tx, row, amount, now); err != nil {
			return row, err
		}
		return s.q.SetOperationState(ctx, tx, hubudb.SetOperationStateParams{
			ID: row.ID, FromState: row.State, ToState: string(to), FailureReason: failure, Now: now,
		})
	})
}

// Release releases the whole hold of an execution that charged nothing; the operation fails.
// Releasing again answers the same.
func (s *Store) Release(ctx context.Context, decisionID uuid.UUID, reason string, now time.Time) (hubu.Operation, error) {
	if reason == "" {
		reason = "released by the executor"
	}
	return s.finish(ctx, decisionID, now, func(tx pgx.Tx, row hubudb.Operation, t hubudb.LedgerTotalsRow) (hubudb.Operation, error) {
		switch {
		case row.State == string(hubu.StateFailed) && t.Captured == 0:
			return row, nil
		case row.State == string(hubu.StateFailed), row.State == string(hubu.StateSucceeded):
			return row, hubu.Errorf(hubu.CodeConflict, "the decision was settled already")
		}
		if err := s.settle(ctx, tx, row, 0, now); err != nil {
			return row, err
		}
		return s.q.SetOperationState(ctx, tx, hubudb.SetOperationStateParams{
			ID: row.ID, FromState: row.State, ToState: string(hubu.StateFailed), FailureReason: &reason, Now: now,
		})
	})
}

// finish runs the executor's report of a decision's outcome on the locked operation.
func (s *Store) finish(ctx context.Context, decisionID uuid.UUID, now time.Time, fn func(pgx.Tx, hubudb.Operation, hubudb.LedgerTotalsRow) (hubudb.Operation, error)) (hubu.Operation, error) {
	row, err := s.byDecision(ctx, s.pool, decisionID)
	if err != nil {
		return hubu.Operation{}, err
	}
	row, err = withTxV(ctx, s.pool, func(tx pgx.Tx) (hubudb.Operation, error) {
		row, err := s.q.LockOperation(ctx, tx, row.ID)
		if err != nil {
			return row, fmt.Errorf("lock operation: %w", err)
		}
		switch hubu.State(row.State) {
		case hubu.StateApproved:
			return row, hubu.Errorf(hubu.CodeConflict, "the operation has not been resumed; there is nothing to settle")
		case hubu.StateDenied, hubu.StateExpired:
			// An approval that was denied or expired before the agent resumed it keeps its
			// decision id, but it was never handed to an executor: nothing may be reported.
			return row, hubu.Errorf(hubu.CodeConflict, "the operation was %s before it was executed; there is nothing to settle", row.State)
		}
		t, err := s.q.LedgerTotals(ctx, tx, row.ID)
		if err != nil {
			return row, fmt.Errorf("ledger totals: %w", err)
		}
		return fn(tx, row, t)
	})
	if err != nil {
		return hubu.Operation{}, err
	}
	return s.operation(ctx, s.pool, row)
}

// ExpireApprovals closes operations that waited for people past their deadline and releases
// their holds. It returns how many it closed.
func (s *Store) ExpireApprovals(ctx context.Context, now time.Time, limit int32) (int, error) {
	ids, err := s.q.ListExpiredApprovals(ctx, s.pool, hubudb.ListExpiredApprovalsParams{ApprovalExpiresAt: &now, Limit: limit})
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

// ListDispatching returns operations whose decision was issued at or before olderThan but
// that the executor has not acknowledged: their hand-off must be re-sent.
func (s *Store) ListDispatching(ctx context.Context, olderThan time.Time, limit int32) ([]hubu.Operation, error) {
	rows, err := s.q.ListDispatching(ctx, s.pool, hubudb.ListDispatchingParams{UpdatedAt: olderThan, Limit: limit})
	if err != nil {
		return nil, fmt.Errorf("list dispatching: %w", err)
	}
	out := make([]hubu.Operation, 0, len(rows))
	for _, r := range rows {
		op, err := s.operation(ctx, s.pool, r)
		if err != nil {
			return nil, err
		}
		out = append(out, op)
	}
	return out, nil
}

func (s *Store) expireIfDue(ctx context.Context, id uuid.UUID, now time.Time) (hubu.Operation, error) {
	row, err := withTxV(ctx, s.pool, func(tx pgx.Tx) (hubudb.Operation, error) {
		return s.lockAndExpire(ctx, tx, id, now)
	})
	if err != nil {
		return hubu.Operation{}, err
	}
	return s.operation(ctx, s.pool, row)
}

// lockAndExpire locks an operation and closes it when it waited for people past its
// deadline: held without a human decision, or approved without the agent's resume.
func (s *Store) lockAndExpire(ctx context.Context, tx pgx.Tx, id uuid.UUID, now time.Time) (hubudb.Operation, error) {
	row, err := s.q.LockOperation(ctx, tx, id)
	if err != nil {
		return row, fmt.Errorf("lock operation: %w", err)
	}
	if !waitsForPeople(row) || row.ApprovalExpiresAt == nil || now.Before(*row.ApprovalExpiresAt) {
		return row, nil
	}
	msg := "no one approved the operation in time"
	if row.State == string(hubu.StateApproved) {
		msg = "the agent did not resume the approved operation in time"
	}
	return s.close(ctx, tx, row, hubu.StateExpired, hubu.DenialDenied, msg, nil, now)
}

func waitsForPeople(row hubudb.Operation) bool {
	return row.State == string(hubu.StatePendingApproval) || row.State == string(hubu.StateApproved)
}

// close ends a held operation without a decision and releases its hold.
func (s *Store) close(ctx context.Context, tx pgx.Tx, row hubudb.Operation, state hubu.State, code, message string, by *string, now time.Time) (hubudb.Operation, error) {
	if err := s.settle(ctx, tx, row, 0, now); err != nil {
		return row, err
	}
	next, err := s.q.CloseOperation(ctx, tx, hubudb.CloseOperationParams{
		ID: row.ID, State: string(state), DenialCode: &code, DenialMessage: &message, DecidedBy: by, Now: &now,
	})
	if err != nil {
		return row, fmt.Errorf("close operation: %w", err)
	}
	return next, nil
}

func (s *Store) byDecision(ctx context.Context, db hubudb.DBTX, decisionID uuid.UUID) (hubudb.Operation, error) {
	row, err := s.q.GetOperationByDecision(ctx, db, &decisionID)
	if isNoRows(err) {
		return row, hubu.Errorf(hubu.CodeNotFound, "no decision %s", decisionID)
	}
	if err != nil {
		return row, fmt.Errorf("get decision: %w", err)
	}
	return row, nil
}

func (s *Store) operationByID(ctx context.Context, id uuid.UUID) (hubu.Operation, error) {
	row, err := s.q.GetOperation(ctx, s.pool, id)
	if err != nil {
		return hubu.Operation{}, fmt.Errorf("get operation: %w", err)
	}
	return s.operation(ctx, s.pool, row)
}

// operation converts a row and adds its ledger totals.
func (s *Store) operation(ctx context.Context, db hubudb.DBTX, r hubudb.Operation) (hubu.Operation, error) {
	t, err := s.q.LedgerTotals(ctx, db, r.ID)
	if err != nil {
		return hubu.Operation{}, fmt.Errorf("ledger totals: %w", err)
	}
	op := hubu.Operation{
		ID: r.ID, AgentID: r.AgentID, PublicHandle: r.PublicHandle, Tool: r.Tool, Arguments: r.Arguments,
		RequestHash: r.RequestHash, Account: r.Account, Scope: hubu.Scope{Provider: r.Provider, Model: r.Model, Size: r.Size},
		AmountMicros: r.AmountMicros, Currency: r.Currency, State: hubu.State(r.State), DecisionID: r.DecisionID,
		ApprovalExpiresAt: r.ApprovalExpiresAt, DecidedBy: r.DecidedBy, FailureReason: r.FailureReason,
		HeldMicros: t.Held - t.Captured - t.Released, CapturedMicros: t.Captured, ReleasedMicros: t.Released,
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
	return op, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
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
}

// ListDecisions returns every decision Hubu issued, oldest first, for reconciliation.
func (s *Store) ListDecisions(ctx context.Context) ([]DecisionSummary, error) {
	rows, err := s.q.ListDecisions(ctx, s.pool)
	if err != nil {
		return nil, fmt.Errorf("list decisions: %w", err)
	}
	out := make([]DecisionSummary, 0, len(rows))
	for _, r := range rows {
		out = append(out, DecisionSummary{
			DecisionID: r.DecisionID, PublicHandle: r.PublicHandle, State: hubu.State(r.State), AmountMicros: r.AmountMicros,
			Currency: r.Currency, HeldMicros: r.Held - r.Captured - r.Released, CapturedMicros: r.Captured, ReleasedMicros: r.Released,
		})
	}
	return out, nil
}
