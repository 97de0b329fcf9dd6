-- name: GetInstallation :one
SELECT installation_id FROM installation WHERE singleton = 1;

-- name: InsertInstallation :exec
INSERT INTO installation (singleton, installation_id, created_at) VALUES (1, ?, ?)
ON CONFLICT (singleton) DO NOTHING;

-- name: GetCall :one
SELECT * FROM calls WHERE platform = ? AND installation_id = ? AND harness_call_id = ?;

-- name: InsertCall :exec
INSERT INTO calls (platform, installation_id, harness_call_id, tool, request_hash, operation_key,
                   public_handle, scope_digest, created_at, updated_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?);

-- name: SetResult :exec
UPDATE calls SET result = ?, updated_at = ?
WHERE platform = ? AND installation_id = ? AND harness_call_id = ? AND result IS NULL;

-- name: GetCallByHandle :one
SELECT * FROM calls WHERE public_handle = ?;
