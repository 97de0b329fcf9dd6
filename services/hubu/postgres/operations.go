package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"

	"hubu.dev/hubu/proto/contract"
	"hubu.dev/hubu/services/hubu"
	"hubu.dev/hubu/services/hubu/policy"
	"hubu.dev/hubu/sql/hubu/hubudb"
)

// Authorize creates the record for (agentID, req.OperationKey), or returns the existing one
// when the same key comes again with the same request: tool, arguments, request hash and the
// scope they name (replayed is then true). A request under the key that asks for different
// work is create_new_operation. The amount and the account are fixed when the record is
// first written: a replay never reads the catalog, nor uses the agent's account or policy as
// they are now, so an operator's later change to any of them (even removing the model) cannot
// turn a redelivery into a refusal. The decision and the budget hold are written in one transaction,
// under a lock on the agent's policy, so concurrent authorizations of one agent can never
// overspend its budget.
//
// Two round trips. The first is BEGIN, the policy lock (not taken when the key is recorded
// already: a redelivery waits for no decision) and, once it is held, the state the decision
// needs (policy, account, budget used, whether the key is recorded). The second is the record
// with its ledger hold and budget use, in one statement, and COMMIT; the lock is held for one
// round trip. Or, for a key that is recorded, the record and COMMIT (and then the expiry of an
// operation that waited for people past its deadline). The price comes from the catalog,
// cached; a catalog that must be read is read in the transaction, for new operations only.
//
// handOff says that the caller hands a decision issued here to the executor as soon as this
// returns: its first try is then counted in the same insert (hubu.Change.WithFirstHandOff).
func (s *Store) Authorize(ctx context.Context, agentID uuid.UUID, req hubu.AuthorizeRequest, now time.Time, handOff bool) (op hubu.Operation, replayed bool, err error) {
	// The size is resolved (with the model's defaults, and an edit's first input) only for a new
	// operation: a recorded one is compared as it was written, never as today's defaults make it.
	scope := hubu.Scope{Provider: hubu.ProviderBFL, Model: req.Arguments.Model}
	args, err := marshalArguments(req.Arguments)
	if err != nil {
		return hubu.Operation{}, false, fmt.Errorf("encode arguments: %w", err)
	}
	key := hubudb.GetOperationByKeyParams{AgentID: agentID, OperationKey: req.OperationKey}
	day, _ := policy.PeriodStart("day", now)
	since, until, err := budgetWindows(now)
	if err != nil {
		return hubu.Operation{}, false, err
	}
	type result struct {
		op       hubu.Operation
		recorded bool // the key has a record: replay it (op, when it was read here)
		read     bool // op is the record, read in the transaction
	}
	res, err := withPipeTx(ctx, s.pool, func(p *pipe) (result, error) {
		if err := s.q.LockPolicyForKey(ctx, p, hubudb.LockPolicyForKeyParams{AgentID: agentID, OperationKey: req.OperationKey}); err != nil {
			return result{}, fmt.Errorf("lock policy: %w", err)
		}
		st, err := s.q.AuthorizationState(ctx, p, hubudb.AuthorizationStateParams{
			AgentID: agentID, OperationKey: req.OperationKey, Since: since, Until: until,
		})
		if err != nil {
			return result{}, fmt.Errorf("read the agent's state: %w", err)
		}
		if st.Recorded {
			p.thenCommit()
			existing, err := s.byKey(ctx, p, key)
			if err != nil {
				return result{}, fmt.Errorf("read the recorded operation: %w", err)
			}
			return result{op: existing, recorded: true, read: true}, nil
		}
		if scope.Size, err = resolveSize(req); err != nil {
			return result{}, err
		}
		amount, currency, err := s.price(ctx, p, scope, req.Inputs)
		if err != nil {
			return result{}, err
		}
		pol := policyOfRow(st.Policy)
		used, err := usedIn(pol.BudgetPeriod, st.UsedMicros)
		if err != nil {
			return result{}, err
		}
		verdict := policy.Decide(pol, scope, amount, currency, used)
		ch, err := hubu.Operation{
			ID: uuid.New(), AgentID: agentID, PublicHandle: req.PublicHandle, Tool: req.Tool, Arguments: args,
			RequestHash: req.RequestHash, Account: st.Account, Scope: scope, AmountMicros: amount,
			Currency: currency, CreatedAt: now,
		}.Authorize(authorization[verdict.Action], verdict.Denial, s.ApprovalTTL)
		if err != nil {
			return result{}, err
		}
		if handOff {
			ch = ch.WithFirstHandOff()
		}
		o := ch.Operation
		code, message := denialColumns(o.Denial)
		l := ledgerColumnsOf(ch.Ledger)
		p.thenCommit()
		row, err := s.q.InsertAuthorization(ctx, p, hubudb.InsertAuthorizationParams{
			ID: o.ID, AgentID: agentID, OperationKey: req.OperationKey, PublicHandle: req.PublicHandle,
			Tool: req.Tool, Arguments: args, RequestHash: req.RequestHash, Account: o.Account,
			Provider: scope.Provider, Model: scope.Model, Size: scope.Size, AmountMicros: o.AmountMicros,
			Currency: o.Currency, State: string(o.State), BudgetDay: day, DecisionID: o.DecisionID,
			DenialCode: code, DenialMessage: message, ApprovalExpiresAt: o.ApprovalExpiresAt,
			DispatchAttempts: int32(o.DispatchAttempts), CreatedAt: now,
			BudgetDelta: l.budgetDelta, LedgerKinds: l.kinds, LedgerAmounts: l.amounts, LedgerCurrencies: l.currencies,
			LedgerCreatedAt: l.createdAt,
		})
		switch {
		case isNoRows(err): // the key's record exists after all; nothing was written
			return result{recorded: true}, nil
		case uniqueViolation(err, "operations_public_handle_key"):
			return result{}, hubu.Errorf(hubu.CodeConflict, "the public handle belongs to another operation")
		case err != nil:
			return result{}, fmt.Errorf("insert operation: %w", err)
		}
		return result{op: changed(hubudb.Operation(row), ch)}, nil
	})
	switch {
	case err != nil:
		return hubu.Operation{}, false, err
	case !res.recorded:
		return res.op, false, nil
	case !res.read:
		if res.op, err = s.byKey(ctx, s.db, key); err != nil {
			return hubu.Operation{}, false, fmt.Errorf("read the record that was found: %w", err)
		}
	}
	want := hubu.Operation{PublicHandle: req.PublicHandle, Arguments: args, Tool: req.Tool, RequestHash: req.RequestHash, Scope: scope}
	op, err = s.replay(ctx, res.op, want, now)
	return op, true, err
}

// resolveSize checks a new operation's request against its model and returns the size it
// makes (contract.ImageRequest.ResolveSize): an edit that names none makes its first input's,
// which must have been read (ErrInputsNeeded).
func resolveSize(req hubu.AuthorizeRequest) (string, error) {
	if err := req.Arguments.Check(req.Tool == hubu.ToolEditImage); err != nil {
		return "", hubu.Errorf(hubu.CodeInvalidArguments, "arguments: %s", err.Error())
	}
	var first *contract.Dimensions
	switch {
	case len(req.Inputs) > 0:
		first = &req.Inputs[0]
	case len(req.Arguments.InputImages) > 0:
		return "", hubu.ErrInputsNeeded
	}
	size, err := req.Arguments.ResolveSize(first)
	if err != nil {
		return "", hubu.Errorf(hubu.CodeInvalidArguments, "%s", err.Error())
	}
	return size, nil
}

// authorization is the first event of a new operation under each action of policy.
var authorization = map[policy.Action]hubu.Event{
	policy.Approve: hubu.EventAutoApprove, policy.Hold: hubu.EventHold, policy.Deny: hubu.EventRefuse,
}

// budgetPeriods are the periods a policy's budget may have (policies.budget_period).
var budgetPeriods = []string{"day", "week", "month"}

// budgetWindows are the budget periods that contain now, one for each of budgetPeriods.
func budgetWindows(now time.Time) (since, until []time.Time, err error) {
	for _, period := range budgetPeriods {
		start, err := policy.PeriodStart(period, now)
		if err != nil {
			return nil, nil, err
		}
		since, until = append(since, start), append(until, policy.PeriodEnd(period, start))
	}
	return since, until, nil
}

// usedIn picks period's budget use from used, one for each of budgetPeriods.
func usedIn(period string, used []int64) (int64, error) {
	i := slices.Index(budgetPeriods, period)
	if i < 0 || len(used) != len(budgetPeriods) {
		return 0, fmt.Errorf("budget use of period %q: %d windows read", period, len(used))
	}
	return used[i], nil
}

// replay checks that a re-sent request asks for exactly the work the record holds. The
// arguments are compared as well as their hash, so a router bug cannot pass off other work
// under a matching hash. The amount, currency and account are not compared: the request
// carries none of them, and what the catalog or the agent's account says now has no bearing
// on an operation already decided.
func (s *Store) replay(ctx context.Context, existing, want hubu.Operation, now time.Time) (hubu.Operation, error) {
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
		{"provider", existing.Scope.Provider, want.Scope.Provider},
		{"model", existing.Scope.Model, want.Scope.Model},
	} {
		if d.got != d.want {
			return hubu.Operation{}, hubu.Errorf(hubu.CodeCreateNewOperation,
				"this operation key was authorized for a request with other %s; a changed request needs a new operation", d.field)
		}
	}
	return s.current(ctx, existing, now)
}

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

func (s *Store) expireIfDue(ctx context.Context, id uuid.UUID, now time.Time) (hubu.Operation, error) {
	return s.transition(ctx, s.byID(id), expire(now))
}

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
