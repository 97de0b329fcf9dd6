-- name: GetDecisionKeyInUse :one
SELECT * FROM decision_keys WHERE retired_at IS NULL;

-- InsertDecisionKey makes the key in use unless another replica made one first; either way
-- GetDecisionKeyInUse then reads the one every replica uses.
-- name: InsertDecisionKey :exec
INSERT INTO decision_keys (kid, seed, created_at)
VALUES ($1, $2, $3)
ON CONFLICT DO NOTHING;

-- ListDecisionKeys is every key a decision Gongbu may still be handed was signed with.
-- name: ListDecisionKeys :many
SELECT * FROM decision_keys ORDER BY created_at;
