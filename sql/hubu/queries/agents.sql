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

-- LockPolicy serializes every decision that spends one agent's budget.
-- name: LockPolicy :one
SELECT * FROM policies WHERE agent_id = $1 FOR UPDATE;

-- name: AgentHasOperations :one
SELECT EXISTS (SELECT 1 FROM operations WHERE agent_id = $1);
