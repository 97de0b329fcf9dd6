-- name: InsertCredential :exec
INSERT INTO credentials (token_hash, kind, name, agent_id, created_at)
VALUES ($1, $2, $3, $4, $5);

-- name: GetActiveCredential :one
SELECT * FROM credentials WHERE token_hash = $1 AND revoked_at IS NULL;
