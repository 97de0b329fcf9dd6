-- name: ClaimKey :one
UPDATE preallocated_keys SET claimed_at = ?
WHERE operation_key = (SELECT operation_key FROM preallocated_keys WHERE claimed_at IS NULL ORDER BY operation_key LIMIT 1)
RETURNING operation_key;

-- name: AddKey :exec
INSERT INTO preallocated_keys (operation_key) VALUES (?);

-- name: CountFreeKeys :one
SELECT count(*) FROM preallocated_keys WHERE claimed_at IS NULL;
