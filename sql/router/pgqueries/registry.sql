-- name: GetInstallation :one
SELECT installation_id FROM installation WHERE singleton = 1;

-- name: InsertInstallation :exec
INSERT INTO installation (singleton, installation_id, created_at) VALUES (1, $1, $2)
ON CONFLICT (singleton) DO NOTHING;

-- name: GetCall :one
SELECT * FROM calls WHERE platform = $1 AND installation_id = $2 AND harness_call_id = $3;

-- name: InsertCall :execrows
-- InsertCall records a new call unless the call has a row already: it affects no row then. A
-- delivery racing another of the same call (in another router) waits here until the other's
-- row is committed or rolled back, so the loser can read the winner's row. Any other conflict
-- (a preallocated key used twice) is an error, never nothing.
INSERT INTO calls (platform, installation_id, harness_call_id, tool, request_hash, operation_key,
                   public_handle, scope_digest, created_at, updated_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
ON CONFLICT (platform, installation_id, harness_call_id) DO NOTHING;

-- name: SetResult :exec
UPDATE calls SET result = $1, updated_at = $2
WHERE platform = $3 AND installation_id = $4 AND harness_call_id = $5 AND result IS NULL;

-- name: GetOperationKeyByHandle :one
SELECT operation_key FROM calls WHERE public_handle = $1;
