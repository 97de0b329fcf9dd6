-- The router's registry in Postgres, shared by a router fleet: the same rows as the SQLite
-- file (../migrations), one per trusted call, committed before any backend sees the call.

-- The installation id is made once, by the first router to open the database, and kept: every
-- router of the fleet has it. Two installations that see the same harness call id record two
-- separate operations.
CREATE TABLE installation (
    singleton       integer PRIMARY KEY CHECK (singleton = 1),
    installation_id text NOT NULL,
    created_at      timestamptz NOT NULL
);

-- operation_key is private: it goes to Hubu and nowhere else. result holds the final
-- CallToolResult (already scrubbed) once the operation's outcome cannot change; it is written
-- once (SetResult keeps the first). scope_digest is the digest of the conversation the call id
-- arrived in, where the harness says so, or '' (see ../migrations/000002_call_scope.up.sql).
CREATE TABLE calls (
    platform        text NOT NULL,
    installation_id text NOT NULL,
    harness_call_id text NOT NULL,
    tool            text NOT NULL,
    request_hash    text NOT NULL,
    operation_key   text NOT NULL UNIQUE,
    public_handle   text NOT NULL UNIQUE,
    scope_digest    text NOT NULL DEFAULT '',
    result          text,
    created_at      timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL,
    PRIMARY KEY (platform, installation_id, harness_call_id)
);
