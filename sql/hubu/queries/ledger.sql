-- name: ListLedgerEntries :many
SELECT * FROM ledger_entries WHERE operation_id = $1 ORDER BY id;

-- name: SumBudgetUsage :one
-- What an agent spent in one budget period, [since, until). The upper bound matters: a usage
-- row dated after the period (recorded while Hubu's clock was ahead, say) belongs to a later
-- period and must not use up this one.
SELECT coalesce(sum(used_micros), 0)::bigint FROM budget_usage
WHERE agent_id = $1 AND day >= sqlc.arg(since) AND day < sqlc.arg(until);

-- name: ListLedgerEntriesOf :many
-- The ledger entries of several operations at once, for the approval console.
SELECT * FROM ledger_entries WHERE operation_id = ANY(sqlc.arg(operation_ids)::uuid[]) ORDER BY operation_id, id;
