-- name: GetOAuthKeys :one
SELECT * FROM oauth_keys WHERE id = 1;

-- InsertOAuthKeys makes the authorization server's keys unless another replica made them
-- first; either way GetOAuthKeys then reads the ones every replica uses.
-- name: InsertOAuthKeys :exec
INSERT INTO oauth_keys (id, crypto_key, signing_key, signing_kid, created_at)
VALUES (1, $1, $2, $3, $4)
ON CONFLICT (id) DO NOTHING;

-- UpsertOAuthClient records a client: a registration, or a fetch of a metadata document
-- (which replaces what the last fetch said).
-- name: UpsertOAuthClient :exec
INSERT INTO oauth_clients (client_id, name, redirect_uris, metadata_document, created_at, fetched_at)
VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (client_id) DO UPDATE
SET name = EXCLUDED.name, redirect_uris = EXCLUDED.redirect_uris, fetched_at = EXCLUDED.fetched_at
WHERE oauth_clients.metadata_document;

-- name: GetOAuthClient :one
SELECT * FROM oauth_clients WHERE client_id = $1;

-- name: InsertInvite :exec
INSERT INTO oauth_invites (code_hash, agent_id, created_by, created_at, expires_at)
VALUES ($1, $2, $3, $4, $5);

-- UseInvite spends a sign-in code: once, before it expires.
-- name: UseInvite :one
UPDATE oauth_invites SET used_at = @now
WHERE code_hash = @code_hash AND used_at IS NULL AND expires_at > @now
RETURNING agent_id;

-- name: InsertBrowserSession :exec
INSERT INTO oauth_browser_sessions (id_hash, agent_id, via, created_at, expires_at)
VALUES ($1, $2, $3, $4, $5);

-- name: GetBrowserSession :one
SELECT * FROM oauth_browser_sessions WHERE id_hash = @id_hash AND expires_at > @now;

-- DeleteExpiredOAuthRows sweeps the browser sessions that ended, and the authorization requests
-- and tokens that expired before the second time (a day earlier: a code or refresh token
-- replayed after its expiry is refused as unknown, and revokes nothing).
-- name: DeleteExpiredOAuthRows :exec
WITH sessions AS (DELETE FROM oauth_browser_sessions WHERE oauth_browser_sessions.expires_at < $1),
     tokens AS (DELETE FROM oauth_tokens WHERE oauth_tokens.expires_at < $2)
DELETE FROM oauth_auth_requests WHERE oauth_auth_requests.expires_at < $2;

-- name: InsertAuthRequest :exec
INSERT INTO oauth_auth_requests (id, client_id, redirect_uri, state, nonce, scopes, response_mode,
                                 resource, code_challenge, created_at, expires_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11);

-- name: GetAuthRequest :one
SELECT * FROM oauth_auth_requests WHERE id = $1;

-- name: SetAuthRequestBrowser :execrows
UPDATE oauth_auth_requests SET browser_hash = $2 WHERE id = $1 AND browser_hash IS NULL;

-- name: SetAuthRequestUpstream :exec
UPDATE oauth_auth_requests SET upstream_state = $2, upstream_nonce = $3, upstream_verifier = $4
WHERE id = $1 AND agent_id IS NULL;

-- SetAuthRequestAgent records who signed in, once, on a request no one decided yet.
-- name: SetAuthRequestAgent :execrows
UPDATE oauth_auth_requests SET agent_id = $2, upstream_state = NULL, upstream_nonce = NULL, upstream_verifier = NULL
WHERE id = $1 AND grant_id IS NULL AND NOT denied AND (agent_id IS NULL OR agent_id = $2);

-- name: SetAuthRequestGrant :execrows
UPDATE oauth_auth_requests SET grant_id = $2
WHERE id = $1 AND agent_id IS NOT NULL AND grant_id IS NULL AND NOT denied;

-- name: DenyAuthRequest :execrows
UPDATE oauth_auth_requests SET denied = true WHERE id = $1 AND grant_id IS NULL;

-- SaveAuthCode records the code issued for an allowed request; from then on the request lives
-- only as long as its code.
-- name: SaveAuthCode :execrows
UPDATE oauth_auth_requests SET code_hash = $2, expires_at = LEAST(expires_at, $3)
WHERE id = $1 AND grant_id IS NOT NULL AND code_hash IS NULL;

-- name: GetAuthRequestByCode :one
SELECT * FROM oauth_auth_requests WHERE code_hash = $1;

-- UseAuthCode spends a request's code: the first exchange wins, any other is a replay.
-- name: UseAuthCode :execrows
UPDATE oauth_auth_requests SET code_used_at = $2 WHERE id = $1 AND code_used_at IS NULL;

-- name: InsertOAuthToken :exec
INSERT INTO oauth_tokens (token_hash, kind, grant_id, auth_request_id, client_id, agent_id, audience,
                          scopes, created_at, expires_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10);

-- GetOAuthToken reads a token with its grant's state: a revoked or expired grant refuses it.
-- name: GetOAuthToken :one
SELECT t.*, g.revoked_at AS grant_revoked_at, g.expires_at AS grant_expires_at
FROM oauth_tokens t JOIN credentials g ON g.id = t.grant_id
WHERE t.token_hash = $1;

-- UseRefreshToken spends a refresh token: its rotation succeeds once.
-- name: UseRefreshToken :execrows
UPDATE oauth_tokens SET used_at = $2 WHERE token_hash = $1 AND kind = 'refresh' AND used_at IS NULL;

-- name: DeleteOAuthToken :exec
DELETE FROM oauth_tokens WHERE token_hash = $1 AND kind = 'access';

-- name: GrantOfAuthRequest :one
SELECT grant_id FROM oauth_auth_requests WHERE id = $1;

-- name: InsertGrant :exec
INSERT INTO credentials (id, token_hash, kind, name, agent_id, created_at, oauth_client_id)
VALUES ($1, $2, 'agent', $3, $4, $5, $6);

-- GetGrant is a grant credential with its client's name; any other credential is not found.
-- name: GetGrant :one
SELECT c.id, c.agent_id, c.name, c.created_at, c.expires_at, c.revoked_at, c.oauth_client_id, c.last_used_at
FROM credentials c
WHERE c.id = $1 AND c.oauth_client_id IS NOT NULL;

-- TouchGrant records a grant's use, at most once a minute.
-- name: TouchGrant :exec
UPDATE credentials SET last_used_at = $2
WHERE id = $1 AND (last_used_at IS NULL OR last_used_at < $3);

-- name: GetAgentByOwnerEmail :one
SELECT * FROM agents WHERE owner_email = $1;

-- name: SetAgentOwnerEmail :execrows
UPDATE agents SET owner_email = $2 WHERE id = $1;

-- ClearAuthRequestUpstream forgets a sign-in at the provider that failed: its state, nonce and
-- verifier are used once.
-- name: ClearAuthRequestUpstream :exec
UPDATE oauth_auth_requests SET upstream_state = NULL, upstream_nonce = NULL, upstream_verifier = NULL WHERE id = $1;
