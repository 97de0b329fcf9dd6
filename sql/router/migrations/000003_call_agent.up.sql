-- Calls are the agent's: in OAuth mode one router serves many people, each the agent they
-- signed in as, and the same harness call id from two of them is two operations, never one
-- person's answer replayed to another. agent is the agent's id, or '' for the static token's
-- agent (and stdio), whose every call recorded before this migration stays its own.
--
-- SQLite cannot change a primary key in place: the table is rebuilt with agent in its key.
CREATE TABLE calls_by_agent (
    agent           TEXT NOT NULL DEFAULT '',
    platform        TEXT NOT NULL,
    installation_id TEXT NOT NULL,
    harness_call_id TEXT NOT NULL,
    tool            TEXT NOT NULL,
    request_hash    TEXT NOT NULL,
    operation_key   TEXT NOT NULL UNIQUE,
    public_handle   TEXT NOT NULL UNIQUE,
    scope_digest    TEXT NOT NULL DEFAULT '',
    result          TEXT,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL,
    PRIMARY KEY (agent, platform, installation_id, harness_call_id)
);

INSERT INTO calls_by_agent (agent, platform, installation_id, harness_call_id, tool, request_hash,
                            operation_key, public_handle, scope_digest, result, created_at, updated_at)
SELECT '', platform, installation_id, harness_call_id, tool, request_hash,
       operation_key, public_handle, scope_digest, result, created_at, updated_at
FROM calls;

DROP TABLE calls;

ALTER TABLE calls_by_agent RENAME TO calls;
