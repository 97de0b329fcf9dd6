-- name: GetInstallation :one
SELECT installation_id FROM installation WHERE singleton = 1;

-- name: InsertInstallation :exec
INSERT INTO installation (singleton, installation_id, created_at) VALUES (1, ?, ?)
ON CONFLICT (singleton) DO NOTHING;

-- name: GetCall :one
SELECT * FROM calls WHERE agent = ? AND platform = ? AND installation_id = ? AND harness_call_id = ?;

-- name: InsertCall :exec
INSERT INTO calls (agent, platform, installation_id, harness_call_id, tool, request_hash, operation_key,
                   public_handle, scope_digest, created_at, updated_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?);

-- name: SetResult :exec
UPDATE calls SET result = ?, updated_at = ?
WHERE agent = ? AND platform = ? AND installation_id = ? AND harness_call_id = ? AND result IS NULL;

-- name: GetCallByHandle :one
-- GetCallByHandle finds a handle only among the agent's calls: another agent's is not found.
SELECT * FROM calls WHERE public_handle = ? AND agent = ?;

-- name: CountCalls :one
-- CountCalls counts the calls of an installation, and of them the final ones (with a result).
SELECT count(*) AS calls, count(result) AS final FROM calls WHERE installation_id = ?;

-- name: CountPrunableCalls :one
-- CountPrunableCalls counts what PruneCalls would delete, batch after batch.
SELECT count(*) FROM calls
WHERE installation_id = sqlc.arg(installation_id) AND result IS NOT NULL
  AND created_at < sqlc.arg(before) AND updated_at < sqlc.arg(before);

-- name: PruneCalls :execrows
-- PruneCalls deletes at most a batch of an installation's final calls that were created and
-- last updated before a time (unix milliseconds); never a call without a result. A batch is
-- one short write transaction, so routers sharing the file wait for it only briefly.
DELETE FROM calls WHERE operation_key IN (
    SELECT old.operation_key FROM calls AS old
    WHERE old.installation_id = sqlc.arg(installation_id) AND old.result IS NOT NULL
      AND old.created_at < sqlc.arg(before) AND old.updated_at < sqlc.arg(before)
    LIMIT sqlc.arg(batch)
);
