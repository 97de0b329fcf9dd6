-- name: InsertOperation :one
INSERT INTO operations (id, agent_id, operation_key, public_handle, tool, arguments, request_hash,
                        account, provider, model, size, amount_micros, currency, state,
                        budget_day, decision_id, denial_code, denial_message,
                        approval_expires_at, created_at, updated_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $20)
RETURNING *;

-- name: GetOperationByKey :one
SELECT * FROM operations WHERE agent_id = $1 AND operation_key = $2;

-- name: GetOperationByHandle :one
SELECT * FROM operations WHERE public_handle = $1;

-- name: GetOperationByDecision :one
SELECT * FROM operations WHERE decision_id = $1;

-- name: LockOperation :one
SELECT * FROM operations WHERE id = $1 FOR UPDATE;

-- name: UpdateOperation :one
-- Writes one transition of an operation (a hubu.Change) over every column a transition may
-- change. The caller holds the row locked; the state guard still refuses to write a change
-- computed from a state the row is no longer in.
UPDATE operations
SET state = sqlc.arg(to_state), decision_id = sqlc.narg(decision_id), decided_by = sqlc.narg(decided_by),
    decided_at = sqlc.narg(decided_at), approval_expires_at = sqlc.narg(approval_expires_at),
    denial_code = sqlc.narg(denial_code), denial_message = sqlc.narg(denial_message),
    failure_reason = sqlc.narg(failure_reason), dispatch_attempts = sqlc.arg(dispatch_attempts),
    updated_at = sqlc.arg(now)
WHERE id = sqlc.arg(id) AND state = sqlc.arg(from_state)
RETURNING *;

-- name: ListPendingApprovals :many
-- Each listing of operations carries their ledger totals (as LedgerTotals), in one query.
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
