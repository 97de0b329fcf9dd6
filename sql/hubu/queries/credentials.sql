-- name: InsertCredential :exec
INSERT INTO credentials (id, token_hash, kind, name, agent_id, created_at, created_by, replaces)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8);

-- GetCredentialByHash finds a presented token's credential whatever its state: a revoked or
-- expired one is refused with its own code, so its holder learns why.
-- name: GetCredentialByHash :one
SELECT * FROM credentials WHERE token_hash = $1;

-- The record of credentials as operators see it: never the token hash; the names of the
-- operator credentials that issued and revoked each one, and the one that replaced it.
-- name: ListCredentials :many
SELECT c.id, c.kind, c.name, c.agent_id, c.created_at, c.expires_at, c.revoked_at,
       c.replaces, successor.id AS replaced_by,
       c.created_by, creator.name AS created_by_name,
       c.revoked_by, revoker.name AS revoked_by_name,
       c.oauth_client_id, client.name AS client_name, c.last_used_at
FROM credentials c
LEFT JOIN credentials successor ON successor.replaces = c.id
LEFT JOIN credentials creator ON creator.id = c.created_by
LEFT JOIN credentials revoker ON revoker.id = c.revoked_by
LEFT JOIN oauth_clients client ON client.client_id = c.oauth_client_id
ORDER BY c.kind, c.name, c.created_at, c.id;

-- name: GetCredential :one
SELECT c.id, c.kind, c.name, c.agent_id, c.created_at, c.expires_at, c.revoked_at,
       c.replaces, successor.id AS replaced_by,
       c.created_by, creator.name AS created_by_name,
       c.revoked_by, revoker.name AS revoked_by_name,
       c.oauth_client_id, client.name AS client_name, c.last_used_at
FROM credentials c
LEFT JOIN credentials successor ON successor.replaces = c.id
LEFT JOIN credentials creator ON creator.id = c.created_by
LEFT JOIN credentials revoker ON revoker.id = c.revoked_by
LEFT JOIN oauth_clients client ON client.client_id = c.oauth_client_id
WHERE c.id = $1;

-- LockCredentialsForChange locks the credentials in ids (the one about to be revoked or
-- rotated, and the operator's own, which the change will reference) together with every
-- operator credential that is valid with no end. All in id order, so two changes never
-- deadlock; and the check that some operator keeps a credential holds until commit (under
-- READ COMMITTED a row that another change revoked meanwhile is re-checked and drops out).
-- name: LockCredentialsForChange :many
SELECT id, kind, revoked_at, expires_at FROM credentials
WHERE id = ANY(@ids::uuid[]) OR (kind = 'operator' AND revoked_at IS NULL AND expires_at IS NULL)
ORDER BY id
FOR UPDATE;

-- name: RevokeCredential :exec
UPDATE credentials SET revoked_at = $2, revoked_by = $3 WHERE id = $1 AND revoked_at IS NULL;

-- name: SetCredentialExpiry :exec
UPDATE credentials SET expires_at = $2 WHERE id = $1;
