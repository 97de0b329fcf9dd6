-- name: InsertLedgerEntry :one
INSERT INTO ledger_entries (operation_id, kind, amount_micros, currency, created_at)
VALUES ($1, $2, $3, $4, $5)
RETURNING *;

-- name: ListLedgerEntries :many
SELECT * FROM ledger_entries WHERE operation_id = $1 ORDER BY id;

-- name: LedgerTotals :one
SELECT
    coalesce(sum(amount_micros) FILTER (WHERE kind = 'hold'), 0)::bigint    AS held,
    coalesce(sum(amount_micros) FILTER (WHERE kind = 'capture'), 0)::bigint AS captured,
    coalesce(sum(amount_micros) FILTER (WHERE kind = 'release'), 0)::bigint AS released
FROM ledger_entries WHERE operation_id = $1;

-- name: EnsureBudgetUsage :exec
INSERT INTO budget_usage (agent_id, day, used_micros)
VALUES ($1, $2, 0)
ON CONFLICT (agent_id, day) DO NOTHING;

-- name: SumBudgetUsage :one
-- What an agent spent in one budget period, [since, until). The upper bound matters: a usage
-- row dated after the period (recorded while Hubu's clock was ahead, say) belongs to a later
-- period and must not use up this one.
SELECT coalesce(sum(used_micros), 0)::bigint FROM budget_usage
WHERE agent_id = $1 AND day >= sqlc.arg(since) AND day < sqlc.arg(until);

-- name: AddBudgetUsage :one
UPDATE budget_usage SET used_micros = used_micros + sqlc.arg(delta)::bigint
WHERE agent_id = $1 AND day = $2
RETURNING used_micros;

-- name: ListLedgerEntriesOf :many
-- The ledger entries of several operations at once, for the approval console.
SELECT * FROM ledger_entries WHERE operation_id = ANY(sqlc.arg(operation_ids)::uuid[]) ORDER BY operation_id, id;
