-- The schema before calls had an agent has room for the static token's agent alone. A call of
-- any other agent can neither be kept (it would become the static agent's, and its answer be
-- replayed to another person) nor dropped (its redelivery would be a new operation, charged
-- again), so going down is refused while the registry holds one: the insert below fails its
-- check, and the migration's transaction is rolled back.
CREATE TEMP TABLE calls_down_guard (
    agent TEXT NOT NULL CONSTRAINT calls_of_other_agents_than_the_static_one_cannot_go_down CHECK (agent = '')
);
INSERT INTO calls_down_guard (agent) SELECT DISTINCT agent FROM calls;
DROP TABLE calls_down_guard;

CREATE TABLE calls_without_agent (
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
    scope_digest    TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (platform, installation_id, harness_call_id)
);

INSERT INTO calls_without_agent (platform, installation_id, harness_call_id, tool, request_hash,
                                 operation_key, public_handle, result, created_at, updated_at, scope_digest)
SELECT platform, installation_id, harness_call_id, tool, request_hash,
       operation_key, public_handle, result, created_at, updated_at, scope_digest
FROM calls;

DROP TABLE calls;

ALTER TABLE calls_without_agent RENAME TO calls;
