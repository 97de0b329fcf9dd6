-- name: GetInstallation :one
SELECT installation_id FROM installation WHERE singleton = 1;

-- name: InsertInstallation :exec
INSERT INTO installation (singleton, installation_id, created_at) VALUES (1, $1, $2)
ON CONFLICT (singleton) DO NOTHING;

-- name: GetCall :one
SELECT * FROM calls WHERE agent = $1 AND platform = $2 AND installation_id = $3 AND harness_call_id = $4;

-- name: InsertCall :execrows
-- InsertCall records a new call unless the call has a row already: it affects no row then. A
-- delivery racing another of the same call (in another router) waits here until the other's
-- row is committed or rolled back, so the loser can read the winner's row. Any other conflict
-- (a preallocated key used twice) is an error, never nothing.
INSERT INTO calls (agent, platform, installation_id, harness_call_id, tool, request_hash, operation_key,
                   public_handle, scope_digest, created_at, updated_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
ON CONFLICT (agent, platform, installation_id, harness_call_id) DO NOTHING;

-- name: SetResult :exec
-- Commits without waiting for the WAL flush: set_config(..., true) is SET LOCAL for this
-- statement's own transaction (see postgresStore.setResult). Never run it inside a transaction
-- that writes anything else.
WITH async_commit AS (SELECT set_config('synchronous_commit', 'off', true))
UPDATE calls SET result = $1, updated_at = $2
FROM async_commit
WHERE agent = $3 AND platform = $4 AND installation_id = $5 AND harness_call_id = $6 AND result IS NULL;

-- name: GetOperationKeyByHandle :one
-- GetOperationKeyByHandle finds a handle only among the agent's calls: another agent's is not found.
SELECT operation_key FROM calls WHERE public_handle = $1 AND agent = $2;

-- name: CountCalls :one
-- CountCalls counts the calls of an installation, and of them the final ones (with a result).
SELECT count(*) AS calls, count(result) AS final FROM calls WHERE installation_id = $1;

-- name: CountPrunableCalls :one
-- CountPrunableCalls counts what PruneCalls would delete, batch after batch.
SELECT count(*) FROM calls
WHERE installation_id = sqlc.arg(installation_id) AND result IS NOT NULL
  AND created_at < sqlc.arg(before) AND updated_at < sqlc.arg(before);

-- name: PruneCalls :execrows
-- PruneCalls deletes at most a batch of an installation's final calls that were created and
-- last updated before a time; never a call without a result. A batch is one statement, so
-- one small transaction, however many calls are pruned in all.
DELETE FROM calls WHERE operation_key IN (
    SELECT old.operation_key FROM calls AS old
    WHERE old.installation_id = sqlc.arg(installation_id) AND old.result IS NOT NULL
      AND old.created_at < sqlc.arg(before) AND old.updated_at < sqlc.arg(before)
    LIMIT sqlc.arg(batch)
);
