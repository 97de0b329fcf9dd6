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
		row      hubudb.Operation // the record already there, when replayed
		op       hubu.Operation
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

		verdict := policy.Decide(pol, scope, price.AmountMicros, price.Currency, used)
		ch, err := hubu.Operation{
			ID: uuid.New(), AgentID: agentID, PublicHandle: req.PublicHandle, Tool: req.Tool, Arguments: args,
			RequestHash: req.RequestHash, Account: agent.Account, Scope: scope, AmountMicros: price.AmountMicros,
			Currency: price.Currency, CreatedAt: now,
		}.Authorize(authorization[verdict.Action], verdict.Denial, s.ApprovalTTL)
		if err != nil {
			return result{}, err
		}
		o := ch.Operation
		code, message := denialColumns(o.Denial)
		row, err := s.q.InsertOperation(ctx, tx, hubudb.InsertOperationParams{
			ID: o.ID, AgentID: agentID, OperationKey: req.OperationKey, PublicHandle: req.PublicHandle,
			Tool: req.Tool, Arguments: args, RequestHash: req.RequestHash, Account: o.Account,
			Provider: scope.Provider, Model: scope.Model, Size: scope.Size, AmountMicros: o.AmountMicros,
			Currency: o.Currency, State: string(o.State), BudgetDay: day, DecisionID: o.DecisionID,
			DenialCode: code, DenialMessage: message, ApprovalExpiresAt: o.ApprovalExpiresAt, CreatedAt: now,
		})
		if uniqueViolation(err, "operations_public_handle_key") {
			return result{}, hubu.Errorf(hubu.CodeConflict, "the public handle belongs to another operation")
		}
		if err != nil {
			return result{}, fmt.Errorf("insert operation: %w", err)
		}
		if err := s.writeLedger(ctx, tx, row, ch.Ledger); err != nil {
			return result{}, err
		}
		return result{op: changed(row, ch)}, nil
	})
	if err != nil {
		return hubu.Operation{}, false, err
	}
	if res.replayed {
		op, err := s.replay(ctx, res.row, want, now)
		return op, true, err
	}
	return res.op, false, nil
}

// authorization is the first event of a new operation under each action of policy.
var authorization = map[policy.Action]hubu.Event{
	policy.Approve: hubu.EventAutoApprove, policy.Hold: hubu.EventHold, policy.Deny: hubu.EventRefuse,
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
	return op, each(rows, ledgerEntryOf), nil
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
	row, err := s.visible(ctx, hubu.Principal{Role: hubu.RoleOperator}, handle)
	if err != nil {
		return hubu.Operation{}, err
	}
	return s.transition(ctx, row.ID, expire(now), decision)
}

// Resume moves an approved operation to dispatching, once. In any other state it changes
// nothing and returns the operation as it is: re-sending can never skip an approval.
func (s *Store) Resume(ctx context.Context, who hubu.Principal, handle string, now time.Time) (hubu.Operation, error) {
	row, err := s.visible(ctx, who, handle)
	if err != nil {
		return hubu.Operation{}, err
	}
	return s.transition(ctx, row.ID, expire(now), func(op hubu.Operation) (hubu.Change, error) {
		return op.Resume(now), nil
	})
}

// MarkExecuting records that the executor accepted a decision. It is a no-op when the
// operation moved on already (the executor may settle before this is recorded).
func (s *Store) MarkExecuting(ctx context.Context, decisionID uuid.UUID, now time.Time) (hubu.Operation, error) {
	return s.onDecision(ctx, decisionID, func(op hubu.Operation) (hubu.Change, error) {
		return op.Accept(now), nil
	})
}

// CountDispatchAttempt records one more try to hand a dispatching decision to the executor
// (for operators: it is no evidence that the executor got it). ok is false, and nothing
// changes, when the operation is no longer dispatching: it needs no hand-off.
func (s *Store) CountDispatchAttempt(ctx context.Context, decisionID uuid.UUID, now time.Time) (op hubu.Operation, ok bool, err error) {
	op, err = s.onDecision(ctx, decisionID, func(op hubu.Operation) (hubu.Change, error) {
		return op.HandOff(now), nil
	})
	// A hand-off leaves a dispatching operation dispatching, and changes no other.
	return op, err == nil && op.State == hubu.StateDispatching, err
}

// GetDecision returns the operation a decision belongs to.
func (s *Store) GetDecision(ctx context.Context, decisionID uuid.UUID) (hubu.Operation, error) {
	row, err := s.byDecision(ctx, decisionID)
	if err != nil {
		return hubu.Operation{}, err
	}
	return s.operation(ctx, s.pool, row)
}

// Settle captures what an execution cost and releases the rest of the hold
// (hubu.Operation.Settle).
func (s *Store) Settle(ctx context.Context, decisionID uuid.UUID, amount int64, failed bool, reason string, now time.Time) (hubu.Operation, error) {
	return s.onDecision(ctx, decisionID, func(op hubu.Operation) (hubu.Change, error) {
		return op.Settle(amount, failed, reason, now)
	})
}

// Release releases the whole hold of an execution that charged nothing; the operation fails
// (hubu.Operation.Release).
func (s *Store) Release(ctx context.Context, decisionID uuid.UUID, reason string, now time.Time) (hubu.Operation, error) {
	return s.onDecision(ctx, decisionID, func(op hubu.Operation) (hubu.Change, error) {
		return op.Release(reason, now)
	})
}

// onDecision runs a report about a decision on its operation.
func (s *Store) onDecision(ctx context.Context, decisionID uuid.UUID, report event) (hubu.Operation, error) {
	row, err := s.byDecision(ctx, decisionID)
	if err != nil {
		return hubu.Operation{}, err
	}
	return s.transition(ctx, row.ID, report)
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
	return each(rows, func(r hubudb.ListDispatchingRow) hubu.Operation {
		return operationOf(r.Operation, r.Held, r.Captured, r.Released)
	}), nil
}

func (s *Store) expireIfDue(ctx context.Context, id uuid.UUID, now time.Time) (hubu.Operation, error) {
	return s.transition(ctx, id, expire(now))
}

func waitsForPeople(row hubudb.Operation) bool {
	return row.State == string(hubu.StatePendingApproval) || row.State == string(hubu.StateApproved)
}

// event is one of the operation's transitions (hubu.Operation's methods) with its arguments.
type event func(hubu.Operation) (hubu.Change, error)

// expire closes an operation that waited for people past its deadline: any read or decision
// of one that waits for people runs it first.
func expire(now time.Time) event {
	return func(op hubu.Operation) (hubu.Change, error) { return op.Expire(now) }
}

// transition runs events one after the other on the operation id, which it holds locked,
// and writes what each changes. A refusal (a *hubu.Error) stops the run and is returned
// after what the events before it changed (an expiry) is committed.
func (s *Store) transition(ctx context.Context, id uuid.UUID, events ...event) (hubu.Operation, error) {
	type out struct {
		op      hubu.Operation
		refusal error
	}
	res, err := withTxV(ctx, s.pool, func(tx pgx.Tx) (out, error) {
		row, err := s.q.LockOperation(ctx, tx, id)
		if err != nil {
			return out{}, fmt.Errorf("lock operation: %w", err)
		}
		// Read after the lock: every ledger entry of an operation is written under it.
		op, err := s.operation(ctx, tx, row)
		if err != nil {
			return out{}, err
		}
		for _, ev := range events {
			ch, err := ev(op)
			if err != nil && hubu.ErrorCode(err) != hubu.CodeInternal {
				return out{refusal: err}, nil
			}
			if err != nil {
				return out{}, err
			}
			if op, err = s.write(ctx, tx, ch); err != nil {
				return out{}, err
			}
		}
		return out{op: op}, nil
	})
	if err != nil {
		return hubu.Operation{}, err
	}
	return res.op, res.refusal
}

// write stores a change computed under the operation's lock: its new state, guarded by the
// state it was computed from, and its ledger entries.
func (s *Store) write(ctx context.Context, tx pgx.Tx, ch hubu.Change) (hubu.Operation, error) {
	if ch.Event == "" {
		return ch.Operation, nil
	}
	o := ch.Operation
	code, message := denialColumns(o.Denial)
	row, err := s.q.UpdateOperation(ctx, tx, hubudb.UpdateOperationParams{
		ID: o.ID, FromState: string(ch.From), ToState: string(o.State), DecisionID: o.DecisionID,
		DecidedBy: o.DecidedBy, DecidedAt: o.DecidedAt, ApprovalExpiresAt: o.ApprovalExpiresAt,
		DenialCode: code, DenialMessage: message, FailureReason: o.FailureReason,
		DispatchAttempts: int32(o.DispatchAttempts), Now: o.UpdatedAt,
	})
	if err != nil {
		return hubu.Operation{}, fmt.Errorf("%s operation: %w", ch.Event, err)
	}
	if err := s.writeLedger(ctx, tx, row, ch.Ledger); err != nil {
		return hubu.Operation{}, err
	}
	return changed(row, ch), nil
}

// writeLedger appends entries to an operation's ledger and moves its agent's budget use
// (of the day it was authorized) with them.
func (s *Store) writeLedger(ctx context.Context, tx pgx.Tx, row hubudb.Operation, entries []hubu.LedgerEntry) error {
	for _, e := range entries {
		if _, err := s.q.InsertLedgerEntry(ctx, tx, hubudb.InsertLedgerEntryParams{
			OperationID: row.ID, Kind: e.Kind, AmountMicros: e.AmountMicros, Currency: e.Currency, CreatedAt: e.CreatedAt,
		}); err != nil {
			return fmt.Errorf("ledger %s: %w", e.Kind, err)
		}
		if delta := e.BudgetDelta(); delta != 0 {
			if _, err := s.q.AddBudgetUsage(ctx, tx, hubudb.AddBudgetUsageParams{AgentID: row.AgentID, Day: row.BudgetDay, Delta: delta}); err != nil {
				return fmt.Errorf("budget %s: %w", e.Kind, err)
			}
		}
	}
	return nil
}

func (s *Store) byDecision(ctx context.Context, decisionID uuid.UUID) (hubudb.Operation, error) {
	row, err := s.q.GetOperationByDecision(ctx, s.pool, &decisionID)
	if err != nil {
		return row, queryError(err, "get decision", hubu.Errorf(hubu.CodeNotFound, "no decision %s", decisionID))
	}
	return row, nil
}

// operation adds its ledger totals to a row.
func (s *Store) operation(ctx context.Context, db hubudb.DBTX, r hubudb.Operation) (hubu.Operation, error) {
	t, err := s.q.LedgerTotals(ctx, db, r.ID)
	if err != nil {
		return hubu.Operation{}, fmt.Errorf("ledger totals: %w", err)
	}
	return operationOf(r, t.Held, t.Captured, t.Released), nil
}

// changed is a row as a change left it, with the ledger totals the change computed: no one
// else writes the ledger of an operation while its lock is held.
func changed(r hubudb.Operation, ch hubu.Change) hubu.Operation {
	o := ch.Operation
	return operationOf(r, o.HeldMicros+o.CapturedMicros+o.ReleasedMicros, o.CapturedMicros, o.ReleasedMicros)
}

// operationOf converts a row with its ledger totals, as LedgerTotals sums them: held counts
// every hold, including what was captured or released since.
func operationOf(r hubudb.Operation, held, captured, released int64) hubu.Operation {
	op := hubu.Operation{
		ID: r.ID, AgentID: r.AgentID, PublicHandle: r.PublicHandle, Tool: r.Tool, Arguments: r.Arguments,
		RequestHash: r.RequestHash, Account: r.Account, Scope: hubu.Scope{Provider: r.Provider, Model: r.Model, Size: r.Size},
		AmountMicros: r.AmountMicros, Currency: r.Currency, State: hubu.State(r.State), DecisionID: r.DecisionID,
		ApprovalExpiresAt: r.ApprovalExpiresAt, DecidedBy: r.DecidedBy, DecidedAt: r.DecidedAt, FailureReason: r.FailureReason,
		HeldMicros: held - captured - released, CapturedMicros: captured, ReleasedMicros: released,
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
	return each(rows, func(r hubudb.ListDecisionsRow) DecisionSummary {
		return DecisionSummary{
			DecisionID: r.DecisionID, PublicHandle: r.PublicHandle, State: hubu.State(r.State), AmountMicros: r.AmountMicros,
			Currency: r.Currency, HeldMicros: r.Held - r.Captured - r.Released, CapturedMicros: r.Captured, ReleasedMicros: r.Released,
		}
	}), nil
}
