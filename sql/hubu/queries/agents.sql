-- name: InsertAgent :one
INSERT INTO agents (id, name, account, created_at)
VALUES ($1, $2, $3, $4)
RETURNING *;

-- name: GetAgent :one
SELECT * FROM agents WHERE id = $1;

-- name: ListAgents :many
SELECT * FROM agents ORDER BY name;

-- name: SetAgentAccount :one
UPDATE agents SET account = $2 WHERE id = $1
RETURNING *;

-- name: UpsertPolicy :one
INSERT INTO policies (agent_id, currency, per_operation_ceiling_micros, auto_approve_limit_micros,
                      budget_micros, budget_period, allowed_providers, allowed_models, updated_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
ON CONFLICT (agent_id) DO UPDATE SET
    currency = EXCLUDED.currency,
    per_operation_ceiling_micros = EXCLUDED.per_operation_ceiling_micros,
    auto_approve_limit_micros = EXCLUDED.auto_approve_limit_micros,
    budget_micros = EXCLUDED.budget_micros,
    budget_period = EXCLUDED.budget_period,
    allowed_providers = EXCLUDED.allowed_providers,
    allowed_models = EXCLUDED.allowed_models,
    updated_at = EXCLUDED.updated_at
RETURNING *;

-- name: GetPolicy :one
SELECT * FROM policies WHERE agent_id = $1;

-- name: ListPolicies :many
SELECT * FROM policies;

-- name: LockPolicyForKey :exec
-- LockPolicyForKey serializes every decision that spends one agent's budget: it locks the
-- agent's policy, unless a record under the key was committed already (a redelivery decides
-- nothing, so it waits for no one's decision). It is sent in one round trip with
-- AuthorizationState, a statement of its own so that its snapshot is taken once the lock is
-- held and sees every decision committed before; that read, not this one, says whether the
-- key is recorded.
SELECT 1 FROM policies p
WHERE p.agent_id = sqlc.arg(agent_id)
    AND NOT EXISTS (SELECT 1 FROM operations o WHERE o.agent_id = sqlc.arg(agent_id) AND o.operation_key = sqlc.arg(operation_key))
FOR UPDATE OF p;

-- name: AuthorizationState :one
-- What a new authorization of one agent is decided on, read after LockPolicyForKey: the policy,
-- the agent's account, its budget use in each window [since[i], until[i]) (the caller passes the
-- budget periods that contain now, and picks the policy's), and whether a record under the key
-- is committed (before the request came, or while it waited for the lock): then there is
-- nothing to decide, and no lock was taken or the record's writer held it before.
SELECT sqlc.embed(p), a.account,
    ARRAY(
        SELECT coalesce(sum(b.used_micros), 0)::bigint
        FROM generate_subscripts(sqlc.arg(since)::timestamptz[], 1) AS w
        LEFT JOIN budget_usage b ON b.agent_id = p.agent_id
            AND b.day >= (sqlc.arg(since)::timestamptz[])[w] AND b.day < (sqlc.arg(until)::timestamptz[])[w]
        GROUP BY w
        ORDER BY w
    )::bigint[] AS used_micros,
    EXISTS (SELECT 1 FROM operations o WHERE o.agent_id = p.agent_id AND o.operation_key = sqlc.arg(operation_key)) AS recorded
FROM policies p JOIN agents a ON a.id = p.agent_id
WHERE p.agent_id = sqlc.arg(agent_id);

-- name: AgentHasOperations :one
SELECT EXISTS (SELECT 1 FROM operations WHERE agent_id = $1);
