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
// Two round trips, and the policy lock held inside Postgres only. The first reads the state a
// decision needs (policy, account, budget used, whether the key is recorded) without a lock,
// and the decision is taken on it. The second is BEGIN, the policy lock, the record with its
// ledger hold and budget use, and COMMIT, as one batch: the record is written only if the
// decision still stands on the state under the lock (InsertAuthorization's guard), so the lock
// is held for that statement and the commit's flush and never across a wait for Hubu. When the
// state moved (another authorization used the budget, the policy or account changed, the key
// was recorded meanwhile) nothing was written, and the locked path decides again
// (authorizeLocked). A recorded key is replayed: the record's read is the second round trip.
// The price comes from the catalog, cached; a catalog that must be read is read for new
// operations only.
//
// handOff says that the caller hands a decision issued here to the executor as soon as this
// returns: its first try is then counted in the same insert (hubu.Change.WithFirstHandOff).
func (s *Store) Authorize(ctx context.Context, agentID uuid.UUID, req hubu.AuthorizeRequest, now time.Time, handOff bool) (op hubu.Operation, replayed bool, err error) {
	a, err := s.newAuthRequest(agentID, req, now, handOff)
	if err != nil {
		return hubu.Operation{}, false, err
	}
	st, err := s.q.AuthorizationState(ctx, s.db, a.stateParams())
	if err != nil {
		return hubu.Operation{}, false, fmt.Errorf("read the agent's state: %w", err)
	}
	if st.Recorded {
		return a.replayRecorded(ctx, s, s.db, now)
	}
	d, err := s.decideNew(ctx, s.db, a, st)
	if err != nil {
		return hubu.Operation{}, false, err
	}
	if s.testHookDecided != nil {
		s.testHookDecided()
	}
	d.insert.Guarded = true
	row, err := withPipeTx(ctx, s.pool, func(p *pipe) (hubudb.InsertAuthorizationRow, error) {
		if err := s.q.LockPolicyForKey(ctx, p, a.lockParams()); err != nil {
			return hubudb.InsertAuthorizationRow{}, fmt.Errorf("lock policy: %w", err)
		}
		p.thenCommit()
		return s.q.InsertAuthorization(ctx, p, d.insert)
	})
	switch {
	case isNoRows(err): // the state moved since it was read: decide under the lock
		return s.authorizeLocked(ctx, a)
	case uniqueViolation(err, "operations_public_handle_key"):
		return hubu.Operation{}, false, hubu.Errorf(hubu.CodeConflict, "the public handle belongs to another operation")
	case err != nil:
		return hubu.Operation{}, false, fmt.Errorf("insert operation: %w", err)
	}
	return changed(hubudb.Operation(row), d.change), false, nil
}

// authorizeLocked is Authorize deciding under the agent's policy lock, for when the state
// moved between the first try's read and its write. Two round trips: BEGIN, the policy lock
// (not taken when the key is recorded already: a redelivery waits for no decision) and, once
// it is held, the state; then the record with its ledger hold and budget use, and COMMIT. The
// lock is held across a round trip to Hubu here, which is why it is not the first try. Or, for
// a key that is recorded, the record and COMMIT (and then the expiry of an operation that
// waited for people past its deadline).
func (s *Store) authorizeLocked(ctx context.Context, a authRequest) (op hubu.Operation, replayed bool, err error) {
	type result struct {
		op       hubu.Operation
		recorded bool // the key has a record: replay it (op, when it was read here)
		read     bool // op is the record, read in the transaction
	}
	res, err := withPipeTx(ctx, s.pool, func(p *pipe) (result, error) {
		if err := s.q.LockPolicyForKey(ctx, p, a.lockParams()); err != nil {
			return result{}, fmt.Errorf("lock policy: %w", err)
		}
		st, err := s.q.AuthorizationState(ctx, p, a.stateParams())
		if err != nil {
			return result{}, fmt.Errorf("read the agent's state: %w", err)
		}
		if st.Recorded {
			p.thenCommit()
			existing, err := s.byKey(ctx, p, a.key)
			if err != nil {
				return result{}, fmt.Errorf("read the recorded operation: %w", err)
			}
			return result{op: existing, recorded: true, read: true}, nil
		}
		d, err := s.decideNew(ctx, p, a, st)
		if err != nil {
			return result{}, err
		}
		p.thenCommit()
		row, err := s.q.InsertAuthorization(ctx, p, d.insert)
		switch {
		case isNoRows(err): // the key's record exists after all; nothing was written
			return result{recorded: true}, nil
		case uniqueViolation(err, "operations_public_handle_key"):
			return result{}, hubu.Errorf(hubu.CodeConflict, "the public handle belongs to another operation")
		case err != nil:
			return result{}, fmt.Errorf("insert operation: %w", err)
		}
		return result{op: changed(hubudb.Operation(row), d.change)}, nil
	})
	switch {
	case err != nil:
		return hubu.Operation{}, false, err
	case !res.recorded:
		return res.op, false, nil
	case res.read:
		op, err = a.replay(ctx, s, res.op)
		return op, true, err
	}
	return a.replayRecorded(ctx, s, s.db, a.now)
}

// authRequest is one Authorize call's request, as the statements take it.
type authRequest struct {
	agentID      uuid.UUID
	req          hubu.AuthorizeRequest
	now          time.Time
	handOff      bool
	scope        hubu.Scope // the size is resolved for a new operation only (decide)
	args         []byte
	key          hubudb.GetOperationByKeyParams
	day          time.Time
	since, until []time.Time // the budget periods that contain now, one for each of budgetPeriods
}

func (s *Store) newAuthRequest(agentID uuid.UUID, req hubu.AuthorizeRequest, now time.Time, handOff bool) (authRequest, error) {
	args, err := marshalArguments(req.Arguments)
	if err != nil {
		return authRequest{}, fmt.Errorf("encode arguments: %w", err)
	}
	day, _ := policy.PeriodStart("day", now)
	since, until, err := budgetWindows(now)
	if err != nil {
		return authRequest{}, err
	}
	return authRequest{
		agentID: agentID, req: req, now: now, handOff: handOff,
		scope: hubu.Scope{Provider: hubu.ProviderBFL, Model: req.Arguments.Model}, args: args,
		key: hubudb.GetOperationByKeyParams{AgentID: agentID, OperationKey: req.OperationKey},
		day: day, since: since, until: until,
	}, nil
}

func (a authRequest) lockParams() hubudb.LockPolicyForKeyParams {
	return hubudb.LockPolicyForKeyParams{AgentID: a.agentID, OperationKey: a.req.OperationKey}
}

func (a authRequest) stateParams() hubudb.AuthorizationStateParams {
	return hubudb.AuthorizationStateParams{AgentID: a.agentID, OperationKey: a.req.OperationKey, Since: a.since, Until: a.until}
}

// replayRecorded reads the record under the key, which the state said exists, and replays it.
func (a authRequest) replayRecorded(ctx context.Context, s *Store, db hubudb.DBTX, now time.Time) (hubu.Operation, bool, error) {
	existing, err := s.byKey(ctx, db, a.key)
	if err != nil {
		return hubu.Operation{}, false, fmt.Errorf("read the record that was found: %w", err)
	}
	op, err := a.replay(ctx, s, existing)
	return op, true, err
}

func (a authRequest) replay(ctx context.Context, s *Store, existing hubu.Operation) (hubu.Operation, error) {
	want := hubu.Operation{PublicHandle: a.req.PublicHandle, Arguments: a.args, Tool: a.req.Tool, RequestHash: a.req.RequestHash, Scope: a.scope}
	return s.replay(ctx, existing, want, a.now)
}

// firstMove is a new operation's first move, and the statement that records it, guarded by the
// state it was decided on (the caller sets Guarded when that state was read without the lock).
type firstMove struct {
	change hubu.Change
	insert hubudb.InsertAuthorizationParams
}

// decideNew takes a new operation's first move on st, its agent's state.
func (s *Store) decideNew(ctx context.Context, db hubudb.DBTX, a authRequest, st hubudb.AuthorizationStateRow) (firstMove, error) {
	scope := a.scope
	var err error
	if scope.Size, err = resolveSize(a.req); err != nil {
		return firstMove{}, err
	}
	amount, currency, err := s.price(ctx, db, scope, a.req.Inputs)
	if err != nil {
		return firstMove{}, err
	}
	pol := policyOfRow(st.Policy)
	window := slices.Index(budgetPeriods, pol.BudgetPeriod)
	used, err := usedIn(pol.BudgetPeriod, st.UsedMicros)
	if err != nil {
		return firstMove{}, err
	}
	verdict := policy.Decide(pol, scope, amount, currency, used)
	ch, err := hubu.Operation{
		ID: uuid.New(), AgentID: a.agentID, PublicHandle: a.req.PublicHandle, Tool: a.req.Tool, Arguments: a.args,
		RequestHash: a.req.RequestHash, Account: st.Account, Scope: scope, AmountMicros: amount,
		Currency: currency, CreatedAt: a.now,
	}.Authorize(authorization[verdict.Action], verdict.Denial, s.ApprovalTTL)
	if err != nil {
		return firstMove{}, err
	}
	if a.handOff {
		ch = ch.WithFirstHandOff()
	}
	// A verdict other than a refusal found the price within the budget left: the guard asks
	// that it still is. A refusal on a state that moved stays a refusal of that state.
	budgetChecked := int64(-1)
	if verdict.Action != policy.Deny {
		budgetChecked = amount
	}
	o := ch.Operation
	code, message := denialColumns(o.Denial)
	l := ledgerColumnsOf(ch.Ledger)
	return firstMove{change: ch, insert: hubudb.InsertAuthorizationParams{
		ID: o.ID, AgentID: a.agentID, OperationKey: a.req.OperationKey, PublicHandle: a.req.PublicHandle,
		Tool: a.req.Tool, Arguments: a.args, RequestHash: a.req.RequestHash, Account: o.Account,
		Provider: scope.Provider, Model: scope.Model, Size: scope.Size, AmountMicros: o.AmountMicros,
		Currency: o.Currency, State: string(o.State), BudgetDay: a.day, DecisionID: o.DecisionID,
		DenialCode: code, DenialMessage: message, ApprovalExpiresAt: o.ApprovalExpiresAt,
		DispatchAttempts: int32(o.DispatchAttempts), CreatedAt: a.now,
		PolicyCurrency: st.Policy.Currency, PolicyCeilingMicros: st.Policy.PerOperationCeilingMicros,
		PolicyAutoApproveMicros: st.Policy.AutoApproveLimitMicros, PolicyBudgetMicros: st.Policy.BudgetMicros,
		PolicyBudgetPeriod: st.Policy.BudgetPeriod, PolicyAllowedProviders: st.Policy.AllowedProviders,
		PolicyAllowedModels: st.Policy.AllowedModels, PolicyUpdatedAt: st.Policy.UpdatedAt,
		BudgetCheckedMicros: budgetChecked, BudgetSince: a.since[window], BudgetUntil: a.until[window],
		BudgetDelta: l.budgetDelta, LedgerKinds: l.kinds, LedgerAmounts: l.amounts, LedgerCurrencies: l.currencies,
		LedgerCreatedAt: l.createdAt,
	}}, nil
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
