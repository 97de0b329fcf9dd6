-- name: GetDecisionKeyInUse :one
SELECT * FROM decision_keys WHERE retired_at IS NULL;

-- InsertDecisionKey makes the key in use unless another replica made one first; either way
-- GetDecisionKeyInUse then reads the one every replica uses.
-- name: InsertDecisionKey :exec
INSERT INTO decision_keys (kid, seed, created_at)
VALUES ($1, $2, $3)
ON CONFLICT DO NOTHING;

-- ListDecisionKeys is every key that something Gongbu may still be shown was signed with: the
-- one in use, and those retired after sqlc.arg(retired_after).
-- name: ListDecisionKeys :many
SELECT * FROM decision_keys WHERE retired_at IS NULL OR retired_at > sqlc.arg(retired_after) ORDER BY created_at;
