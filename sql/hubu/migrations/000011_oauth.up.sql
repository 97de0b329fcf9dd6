-- Hubu as an OAuth authorization server for the routers a team runs (issue: a router for a
-- team). A person signs in as their agent (a one-time invite code, or the team's OpenID Connect
-- provider) and allows a client; the grant is an agent credential like any other, listed and
-- revoked with them. Codes, access and refresh tokens are kept as SHA-256 hashes only.

-- Routers hold a credential of their own, with which they act for the grants whose tokens
-- people present to them.
ALTER TABLE credentials DROP CONSTRAINT credentials_kind_check;
ALTER TABLE credentials ADD CONSTRAINT credentials_kind_check
    CHECK (kind IN ('agent', 'operator', 'service', 'router'));
ALTER TABLE credentials
    -- Set on a grant: the OAuth client it was given to. A grant's token_hash is random: it has
    -- no bearer token of its own, only the access and refresh tokens below.
    ADD COLUMN oauth_client_id text,
    -- When a grant's token last reached a router (updated at most once a minute).
    ADD COLUMN last_used_at timestamptz;

-- The person an agent belongs to, as the team's OpenID Connect provider names them (a
-- verified email, lower-cased): signing in through the provider maps to this agent.
ALTER TABLE agents ADD COLUMN owner_email text;
CREATE UNIQUE INDEX agents_owner_email_key ON agents (owner_email) WHERE owner_email IS NOT NULL;

-- The authorization server's keys, made once by the first Hubu that needs them and shared by
-- every replica: the key that encrypts authorization codes and access token ids, and the
-- Ed25519 key that signs ID tokens.
CREATE TABLE oauth_keys (
    id           smallint PRIMARY KEY CHECK (id = 1),
    crypto_key   bytea NOT NULL CHECK (length(crypto_key) = 32),
    signing_key  bytea NOT NULL CHECK (length(signing_key) = 32), -- an Ed25519 seed
    signing_kid  text NOT NULL,
    created_at   timestamptz NOT NULL
);

-- Clients: registered dynamically (RFC 7591), or named by the URL of their metadata document
-- (client ID metadata documents), which Hubu fetched.
CREATE TABLE oauth_clients (
    client_id         text PRIMARY KEY,
    name              text NOT NULL,
    redirect_uris     text[] NOT NULL CHECK (cardinality(redirect_uris) > 0),
    metadata_document boolean NOT NULL,
    created_at        timestamptz NOT NULL,
    fetched_at        timestamptz
);

-- One-time sign-in codes an operator issued for an agent.
CREATE TABLE oauth_invites (
    code_hash  bytea PRIMARY KEY CHECK (length(code_hash) = 32),
    agent_id   uuid NOT NULL REFERENCES agents (id),
    created_by uuid REFERENCES credentials (id),
    created_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL,
    used_at    timestamptz
);

-- A browser signed in as an agent: consent pages in it need no second code for a while.
CREATE TABLE oauth_browser_sessions (
    id_hash    bytea PRIMARY KEY CHECK (length(id_hash) = 32),
    agent_id   uuid NOT NULL REFERENCES agents (id),
    via        text NOT NULL CHECK (via IN ('invite', 'oidc')),
    created_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL
);
CREATE INDEX oauth_browser_sessions_expires_at_idx ON oauth_browser_sessions (expires_at);

-- Authorization requests, from /oauth/authorize until their code is exchanged.
CREATE TABLE oauth_auth_requests (
    id                uuid PRIMARY KEY,
    client_id         text NOT NULL REFERENCES oauth_clients (client_id),
    redirect_uri      text NOT NULL,
    state             text NOT NULL,
    nonce             text NOT NULL,
    scopes            text[] NOT NULL,
    response_mode     text NOT NULL,
    resource          text NOT NULL,   -- RFC 8707: the router the tokens are for
    code_challenge    text NOT NULL,   -- PKCE, S256 only
    -- The browser that started the sign-in (a cookie's hash): only it may consent.
    browser_hash      bytea,
    -- The team's OpenID Connect provider's state, nonce and PKCE verifier while a person signs in there.
    upstream_state    text,
    upstream_nonce    text,
    upstream_verifier text,
    agent_id          uuid REFERENCES agents (id),      -- who signed in
    grant_id          uuid REFERENCES credentials (id), -- set when they allowed the client
    denied            boolean NOT NULL DEFAULT false,
    code_hash         bytea UNIQUE,
    code_used_at      timestamptz,
    created_at        timestamptz NOT NULL,
    expires_at        timestamptz NOT NULL
);
CREATE INDEX oauth_auth_requests_expires_at_idx ON oauth_auth_requests (expires_at);

-- Access and refresh tokens. A refresh token is used once: its use sets used_at and issues
-- the next; a second use is a replay, and revokes the grant.
CREATE TABLE oauth_tokens (
    token_hash      bytea PRIMARY KEY CHECK (length(token_hash) = 32),
    kind            text NOT NULL CHECK (kind IN ('access', 'refresh')),
    grant_id        uuid NOT NULL REFERENCES credentials (id),
    auth_request_id uuid NOT NULL,
    client_id       text NOT NULL,
    agent_id        uuid NOT NULL REFERENCES agents (id),
    audience        text NOT NULL,
    scopes          text[] NOT NULL,
    created_at      timestamptz NOT NULL,
    expires_at      timestamptz NOT NULL,
    used_at         timestamptz
);
CREATE INDEX oauth_tokens_grant_id_idx ON oauth_tokens (grant_id);
CREATE INDEX oauth_tokens_auth_request_id_idx ON oauth_tokens (auth_request_id);
-- Sign-ins sweep the tokens that expired a day ago (a spent refresh token is kept until it
-- would have expired: its replay must still revoke the grant).
CREATE INDEX oauth_tokens_expires_at_idx ON oauth_tokens (expires_at);
