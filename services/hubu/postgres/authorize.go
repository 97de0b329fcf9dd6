package postgres

import (
	"context"
	"encoding/json"
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
