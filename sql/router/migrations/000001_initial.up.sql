-- The router's registry: one row per trusted call, committed before any backend sees it.

-- The installation id is made once, the first time a registry is opened, and kept: two
-- installations that see the same harness call id record two separate operations.
CREATE TABLE installation (
    singleton       INTEGER PRIMARY KEY CHECK (singleton = 1),
    installation_id TEXT NOT NULL,
    created_at      INTEGER NOT NULL -- unix milliseconds
);

-- operation_key is private: it goes to Hubu and nowhere else. result holds the final
-- CallToolResult (already scrubbed) once the operation's outcome cannot change.
CREATE TABLE calls (
    platform        TEXT NOT NULL,
    installation_id TEXT NOT NULL,
    harness_call_id TEXT NOT NULL,
    tool            TEXT NOT NULL,
    request_hash    TEXT NOT NULL,
    operation_key   TEXT NOT NULL UNIQUE,
    public_handle   TEXT NOT NULL UNIQUE,
    result          TEXT,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL,
    PRIMARY KEY (platform, installation_id, harness_call_id)
);
