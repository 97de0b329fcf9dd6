-- Every read of an operation carries its ledger totals (held counts every hold, including what
-- was captured or released since), in the same statement and so from the same snapshot.

-- name: GetOperationByKey :one
SELECT sqlc.embed(o), t.held, t.captured, t.released
FROM operations o, LATERAL (
    SELECT coalesce(sum(l.amount_micros) FILTER (WHERE l.kind = 'hold'), 0)::bigint    AS held,
           coalesce(sum(l.amount_micros) FILTER (WHERE l.kind = 'capture'), 0)::bigint AS captured,
           coalesce(sum(l.amount_micros) FILTER (WHERE l.kind = 'release'), 0)::bigint AS released
    FROM ledger_entries l WHERE l.operation_id = o.id
) t
WHERE o.agent_id = $1 AND o.operation_key = $2;

-- name: GetOperationByHandle :one
SELECT sqlc.embed(o), t.held, t.captured, t.released
FROM operations o, LATERAL (
    SELECT coalesce(sum(l.amount_micros) FILTER (WHERE l.kind = 'hold'), 0)::bigint    AS held,
           coalesce(sum(l.amount_micros) FILTER (WHERE l.kind = 'capture'), 0)::bigint AS captured,
           coalesce(sum(l.amount_micros) FILTER (WHERE l.kind = 'release'), 0)::bigint AS released
    FROM ledger_entries l WHERE l.operation_id = o.id
) t
WHERE o.public_handle = $1;

-- name: GetOperationByDecision :one
SELECT sqlc.embed(o), t.held, t.captured, t.released
FROM operations o, LATERAL (
    SELECT coalesce(sum(l.amount_micros) FILTER (WHERE l.kind = 'hold'), 0)::bigint    AS held,
           coalesce(sum(l.amount_micros) FILTER (WHERE l.kind = 'capture'), 0)::bigint AS captured,
           coalesce(sum(l.amount_micros) FILTER (WHERE l.kind = 'release'), 0)::bigint AS released
    FROM ledger_entries l WHERE l.operation_id = o.id
) t
WHERE o.decision_id = $1;

-- name: GetOperationByID :one
SELECT sqlc.embed(o), t.held, t.captured, t.released
FROM operations o, LATERAL (
    SELECT coalesce(sum(l.amount_micros) FILTER (WHERE l.kind = 'hold'), 0)::bigint    AS held,
           coalesce(sum(l.amount_micros) FILTER (WHERE l.kind = 'capture'), 0)::bigint AS captured,
           coalesce(sum(l.amount_micros) FILTER (WHERE l.kind = 'release'), 0)::bigint AS released
    FROM ledger_entries l WHERE l.operation_id = o.id
) t
WHERE o.id = $1;

-- name: LockOperationByID :exec
-- The locks a change of an operation is computed under. Each is a statement of its own, sent
-- in one round trip with the read that follows it (GetOperationBy…): under READ COMMITTED a
-- statement reads from a snapshot taken when it starts, so a read in the locking statement
-- itself would miss what the previous holder of the lock committed while this one waited.
SELECT 1 FROM operations WHERE id = $1 FOR UPDATE;

-- name: LockOperationByHandle :exec
SELECT 1 FROM operations WHERE public_handle = $1 FOR UPDATE;

-- name: LockOperationByDecision :exec
SELECT 1 FROM operations WHERE decision_id = $1 FOR UPDATE;

-- name: InsertAuthorization :one
-- Records a new operation as its first move (a hubu.Change) left it, together with its ledger
-- entries and what they add to the budget use of its agent's day, in one statement (and the
-- first hand-off's count, when the caller makes that hand-off at once). The
-- budget row is created if it is the day's first (operations reference it). The caller holds
-- the agent's policy lock; should a record under the key exist, nothing is written and no row
-- comes back.
--
-- guarded is for a decision taken on a state read before the lock was held (Store.Authorize's
-- first try): the record is written only if that decision still stands on the state as it is
-- now, under the lock. The agent's policy and account must be the ones it was decided on, and
-- when the decision took the price within the budget (budget_checked_micros, -1 when it did
-- not get that far) the budget's use in the window [budget_since, budget_until) must still
-- leave room for it. Otherwise nothing is written and no row comes back. Unguarded, the caller
-- read the state under the lock itself.
WITH op AS (
    INSERT INTO operations (id, agent_id, operation_key, public_handle, tool, arguments, request_hash,
                            account, provider, model, size, amount_micros, currency, state,
                            budget_day, decision_id, denial_code, denial_message,
                            approval_expires_at, dispatch_attempts, created_at, updated_at)
    SELECT sqlc.arg(id), sqlc.arg(agent_id), sqlc.arg(operation_key), sqlc.arg(public_handle), sqlc.arg(tool),
           sqlc.arg(arguments), sqlc.arg(request_hash), sqlc.arg(account), sqlc.arg(provider), sqlc.arg(model),
           sqlc.arg(size), sqlc.arg(amount_micros), sqlc.arg(currency), sqlc.arg(state), sqlc.arg(budget_day),
           sqlc.narg(decision_id), sqlc.narg(denial_code), sqlc.narg(denial_message), sqlc.narg(approval_expires_at),
           sqlc.arg(dispatch_attempts), sqlc.arg(created_at), sqlc.arg(created_at)
    WHERE NOT sqlc.arg(guarded)::boolean OR EXISTS (
        SELECT 1 FROM policies p JOIN agents a ON a.id = p.agent_id
        WHERE p.agent_id = sqlc.arg(agent_id) AND a.account = sqlc.arg(account)
            AND (p.currency, p.per_operation_ceiling_micros, p.auto_approve_limit_micros, p.budget_micros,
                 p.budget_period, p.allowed_providers, p.allowed_models, p.updated_at)
              = (sqlc.arg(policy_currency)::text, sqlc.arg(policy_ceiling_micros)::bigint,
                 sqlc.arg(policy_auto_approve_micros)::bigint, sqlc.arg(policy_budget_micros)::bigint,
                 sqlc.arg(policy_budget_period)::text, sqlc.arg(policy_allowed_providers)::text[],
                 sqlc.arg(policy_allowed_models)::text[], sqlc.arg(policy_updated_at)::timestamptz)
            AND (sqlc.arg(budget_checked_micros)::bigint < 0 OR sqlc.arg(budget_checked_micros)::bigint <= p.budget_micros - (
                SELECT coalesce(sum(b.used_micros), 0) FROM budget_usage b
                WHERE b.agent_id = p.agent_id AND b.day >= sqlc.arg(budget_since)::timestamptz AND b.day < sqlc.arg(budget_until)::timestamptz))
    )
    ON CONFLICT (agent_id, operation_key) DO NOTHING
    RETURNING *
), budget AS (
    INSERT INTO budget_usage (agent_id, day, used_micros)
    SELECT op.agent_id, op.budget_day, sqlc.arg(budget_delta)::bigint FROM op
    ON CONFLICT (agent_id, day) DO UPDATE SET used_micros = budget_usage.used_micros + EXCLUDED.used_micros
    WHERE EXCLUDED.used_micros <> 0
), entries AS (
    INSERT INTO ledger_entries (operation_id, kind, amount_micros, currency, created_at)
    SELECT op.id, (sqlc.arg(ledger_kinds)::text[])[i], (sqlc.arg(ledger_amounts)::bigint[])[i],
           (sqlc.arg(ledger_currencies)::text[])[i], (sqlc.arg(ledger_created_at)::timestamptz[])[i]
    FROM op, generate_subscripts(sqlc.arg(ledger_kinds)::text[], 1) AS i
    ORDER BY i
)
SELECT * FROM op;

-- name: WriteChange :one
-- Writes one transition of an operation (a hubu.Change) over every column a transition may
-- change, with its ledger entries and what they move the budget use of the operation's day by,
-- in one statement. The guard refuses a change computed from another version of the row: the
-- state and the hand-off count it was computed from. Under the operation's lock it always
-- holds; without the lock (a hand-off step, see Store.move) a row that moved on meanwhile is
-- left as it is, nothing is written, and no row comes back.
WITH op AS (
    UPDATE operations o
    SET state = sqlc.arg(to_state), decision_id = sqlc.narg(decision_id), decided_by = sqlc.narg(decided_by),
        decided_at = sqlc.narg(decided_at), approval_expires_at = sqlc.narg(approval_expires_at),
        denial_code = sqlc.narg(denial_code), denial_message = sqlc.narg(denial_message),
        failure_reason = sqlc.narg(failure_reason), dispatch_attempts = sqlc.arg(dispatch_attempts),
        provider_cost_micros = sqlc.narg(provider_cost_micros), updated_at = sqlc.arg(now)
    WHERE o.id = sqlc.arg(id) AND o.state = sqlc.arg(from_state) AND o.dispatch_attempts = sqlc.arg(from_dispatch_attempts)
    RETURNING *
), budget AS (
    UPDATE budget_usage b SET used_micros = b.used_micros + sqlc.arg(budget_delta)::bigint
    FROM op
    WHERE sqlc.arg(budget_delta)::bigint <> 0 AND b.agent_id = op.agent_id AND b.day = op.budget_day
), entries AS (
    INSERT INTO ledger_entries (operation_id, kind, amount_micros, currency, created_at)
    SELECT op.id, (sqlc.arg(ledger_kinds)::text[])[i], (sqlc.arg(ledger_amounts)::bigint[])[i],
           (sqlc.arg(ledger_currencies)::text[])[i], (sqlc.arg(ledger_created_at)::timestamptz[])[i]
    FROM op, generate_subscripts(sqlc.arg(ledger_kinds)::text[], 1) AS i
    ORDER BY i
)
SELECT * FROM op;

-- name: ListPendingApprovals :many
SELECT sqlc.embed(o), t.held, t.captured, t.released
FROM operations o, LATERAL (
    SELECT coalesce(sum(l.amount_micros) FILTER (WHERE l.kind = 'hold'), 0)::bigint    AS held,
           coalesce(sum(l.amount_micros) FILTER (WHERE l.kind = 'capture'), 0)::bigint AS captured,
           coalesce(sum(l.amount_micros) FILTER (WHERE l.kind = 'release'), 0)::bigint AS released
    FROM ledger_entries l WHERE l.operation_id = o.id
) t
WHERE o.state = 'pending_approval'
ORDER BY o.created_at, o.id;

-- name: ListExpiredApprovals :many
SELECT id FROM operations
WHERE state IN ('pending_approval', 'approved') AND approval_expires_at <= $1
ORDER BY approval_expires_at
LIMIT $2;

-- name: ListDispatching :many
-- Operations whose decision was issued but not yet acknowledged by the executor.
SELECT sqlc.embed(o), t.held, t.captured, t.released
FROM operations o, LATERAL (
    SELECT coalesce(sum(l.amount_micros) FILTER (WHERE l.kind = 'hold'), 0)::bigint    AS held,
           coalesce(sum(l.amount_micros) FILTER (WHERE l.kind = 'capture'), 0)::bigint AS captured,
           coalesce(sum(l.amount_micros) FILTER (WHERE l.kind = 'release'), 0)::bigint AS released
    FROM ledger_entries l WHERE l.operation_id = o.id
) t
WHERE o.state = 'dispatching' AND o.updated_at <= $1
ORDER BY o.updated_at
LIMIT $2;

-- name: ListDecisions :many
SELECT o.decision_id::uuid AS decision_id, o.public_handle, o.state, o.amount_micros, o.currency,
    o.provider_cost_micros, o.created_at,
    coalesce(sum(l.amount_micros) FILTER (WHERE l.kind = 'hold'), 0)::bigint    AS held,
    coalesce(sum(l.amount_micros) FILTER (WHERE l.kind = 'capture'), 0)::bigint AS captured,
    coalesce(sum(l.amount_micros) FILTER (WHERE l.kind = 'release'), 0)::bigint AS released
FROM operations o LEFT JOIN ledger_entries l ON l.operation_id = o.id
WHERE o.decision_id IS NOT NULL
GROUP BY o.id
ORDER BY o.created_at, o.id;

-- name: ListRecentOperations :many
-- The newest operations first, for the approval console.
SELECT sqlc.embed(o), t.held, t.captured, t.released
FROM operations o, LATERAL (
    SELECT coalesce(sum(l.amount_micros) FILTER (WHERE l.kind = 'hold'), 0)::bigint    AS held,
           coalesce(sum(l.amount_micros) FILTER (WHERE l.kind = 'capture'), 0)::bigint AS captured,
           coalesce(sum(l.amount_micros) FILTER (WHERE l.kind = 'release'), 0)::bigint AS released
    FROM ledger_entries l WHERE l.operation_id = o.id
) t
ORDER BY o.created_at DESC, o.id DESC
LIMIT $1;
