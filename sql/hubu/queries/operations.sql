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

-- name: ApproveOperation :one
-- The agent must resume an approved operation before its new deadline.
UPDATE operations
SET state = 'approved', decision_id = $2, decided_by = $3, decided_at = $4, updated_at = $4, approval_expires_at = $5
WHERE id = $1 AND state = 'pending_approval'
RETURNING *;

-- name: CloseOperation :one
-- Ends an operation that waits for people (held, or approved but not resumed) as denied or expired.
UPDATE operations
SET state = sqlc.arg(state), denial_code = sqlc.arg(denial_code), denial_message = sqlc.arg(denial_message),
    decided_by = coalesce(sqlc.narg(decided_by), decided_by), decided_at = sqlc.arg(now), updated_at = sqlc.arg(now)
WHERE id = sqlc.arg(id) AND state IN ('pending_approval', 'approved')
RETURNING *;

-- name: SetOperationState :one
UPDATE operations
SET state = sqlc.arg(to_state), failure_reason = sqlc.arg(failure_reason), updated_at = sqlc.arg(now)
WHERE id = sqlc.arg(id) AND state = sqlc.arg(from_state)
RETURNING *;

-- name: ListPendingApprovals :many
SELECT * FROM operations WHERE state = 'pending_approval' ORDER BY created_at, id;

-- name: ListExpiredApprovals :many
SELECT id FROM operations
WHERE state IN ('pending_approval', 'approved') AND approval_expires_at <= $1
ORDER BY approval_expires_at
LIMIT $2;

-- name: ListDispatching :many
-- Operations whose decision was issued but not yet acknowledged by the executor.
SELECT * FROM operations
WHERE state = 'dispatching' AND updated_at <= $1
ORDER BY updated_at
LIMIT $2;

-- name: CountDispatchAttempt :one
-- Counts a try to hand a decision to the executor, for operators. No row when the operation
-- is no longer dispatching. updated_at moves too: ListDispatching waits from the last try.
UPDATE operations SET dispatch_attempts = dispatch_attempts + 1, updated_at = sqlc.arg(now)
WHERE decision_id = sqlc.arg(decision_id) AND state = 'dispatching'
RETURNING *;

-- name: GetOperation :one
SELECT * FROM operations WHERE id = $1;

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
SELECT * FROM operations ORDER BY created_at DESC, id DESC LIMIT $1;
