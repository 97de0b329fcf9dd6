-- The approval console's sessions, shared by every Hubu replica on this database: an operator
-- who signed in through one replica stays signed in whichever replica the load balancer picks
-- next, and a sign-out through any of them ends the session everywhere.
--
-- The browser's cookie holds a random session id (256 bits); only its SHA-256 is kept here, so
-- someone who can read this table cannot present a session. credential_hash is the hash of the
-- operator token the session was opened with (as credentials.token_hash holds it): every request
-- looks it up again, so a revoked or expired credential ends its sessions at once.
CREATE TABLE console_sessions (
    id_hash         bytea PRIMARY KEY CHECK (length(id_hash) = 32),
    credential_id   uuid NOT NULL REFERENCES credentials (id) ON DELETE CASCADE,
    operator        text NOT NULL,
    credential_hash bytea NOT NULL,
    -- The session's CSRF token: every form of the session carries it, every POST must. It is
    -- no credential by itself (a POST needs the cookie too).
    csrf_token      text NOT NULL,
    -- A one-time message for the session's next page (post, redirect, get): the redirect may
    -- reach another replica than the one that set it.
    flash           text NOT NULL DEFAULT '',
    created_at      timestamptz NOT NULL,
    expires_at      timestamptz NOT NULL
);

-- Sign-ins sweep the sessions that expired.
CREATE INDEX console_sessions_expires_at_idx ON console_sessions (expires_at);
