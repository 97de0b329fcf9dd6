-- Hubu's first schema: agents and their credentials, policies, the price catalog,
-- authorization records (operations), the append-only ledger and per-period budget usage.

CREATE TABLE agents (
    id         uuid PRIMARY KEY,
    name       text NOT NULL UNIQUE,
    account    text NOT NULL,
    created_at timestamptz NOT NULL
);

-- One row per credential. Only the SHA-256 of a token is stored; the token is shown once.
CREATE TABLE credentials (
    token_hash bytea PRIMARY KEY,
    kind       text NOT NULL CHECK (kind IN ('agent', 'operator', 'service')),
    name       text NOT NULL,
    agent_id   uuid REFERENCES agents (id),
    created_at timestamptz NOT NULL,
    revoked_at timestamptz,
    CHECK ((kind = 'agent') = (agent_id IS NOT NULL))
);

CREATE TABLE policies (
    agent_id                     uuid PRIMARY KEY REFERENCES agents (id),
    currency                     text NOT NULL,
    per_operation_ceiling_micros bigint NOT NULL CHECK (per_operation_ceiling_micros >= 0),
    auto_approve_limit_micros    bigint NOT NULL CHECK (auto_approve_limit_micros >= 0),
    budget_micros                bigint NOT NULL CHECK (budget_micros >= 0),
    budget_period                text NOT NULL CHECK (budget_period IN ('day', 'week', 'month')),
    allowed_providers            text[] NOT NULL,
    allowed_models               text[] NOT NULL,
    updated_at                   timestamptz NOT NULL
);

-- size is "<width>x<height>" or "*" (any size without an entry of its own).
CREATE TABLE prices (
    provider      text NOT NULL,
    model         text NOT NULL,
    size          text NOT NULL,
    amount_micros bigint NOT NULL CHECK (amount_micros >= 0),
    currency      text NOT NULL,
    updated_at    timestamptz NOT NULL,
    PRIMARY KEY (provider, model, size)
);

INSERT INTO prices (provider, model, size, amount_micros, currency, updated_at) VALUES
    ('bfl', 'flux-schnell',       '*',  3000, 'USD', now()),
    ('bfl', 'flux-dev',           '*', 25000, 'USD', now()),
    ('bfl', 'flux-pro-1.1',       '*', 40000, 'USD', now()),
    ('bfl', 'flux-pro-1.1-ultra', '*', 60000, 'USD', now());

-- One authorization record per (agent_id, operation_key). operation_key is the router's
-- private key and never leaves Hubu; public_handle is what agents and operators see.
CREATE TABLE operations (
    id                  uuid PRIMARY KEY,
    agent_id            uuid NOT NULL REFERENCES agents (id),
    operation_key       text NOT NULL,
    public_handle       text NOT NULL UNIQUE,
    tool                text NOT NULL,
    arguments           jsonb NOT NULL,
    request_hash        text NOT NULL,
    account             text NOT NULL,
    provider            text NOT NULL,
    model               text NOT NULL,
    size                text NOT NULL,
    amount_micros       bigint NOT NULL CHECK (amount_micros >= 0),
    currency            text NOT NULL,
    state               text NOT NULL CHECK (state IN ('pending_approval', 'approved', 'dispatching',
                            'executing', 'succeeded', 'failed', 'denied', 'expired')),
    budget_day          timestamptz NOT NULL, -- midnight UTC of the day it was authorized
    decision_id         uuid UNIQUE,
    denial_code         text,
    denial_message      text,
    approval_expires_at timestamptz,
    decided_by          text,
    decided_at          timestamptz,
    failure_reason      text,
    created_at          timestamptz NOT NULL,
    updated_at          timestamptz NOT NULL,
    UNIQUE (agent_id, operation_key),
    -- A decision exists from approval on; an approved operation that expires keeps its
    -- (never executed) decision id.
    CHECK (state NOT IN ('approved', 'dispatching', 'executing', 'succeeded', 'failed') OR decision_id IS NOT NULL),
    CHECK (state <> 'pending_approval' OR decision_id IS NULL)
);

CREATE INDEX operations_awaiting_people ON operations (approval_expires_at) WHERE state IN ('pending_approval', 'approved');
CREATE INDEX operations_dispatching ON operations (updated_at) WHERE state = 'dispatching';

-- Append-only: a trigger refuses UPDATE and DELETE. For every operation,
-- held = sum(hold) - sum(capture) - sum(release), and it is 0 once the operation is final.
CREATE TABLE ledger_entries (
    id            bigserial PRIMARY KEY,
    operation_id  uuid NOT NULL REFERENCES operations (id),
    kind          text NOT NULL CHECK (kind IN ('hold', 'capture', 'release')),
    amount_micros bigint NOT NULL CHECK (amount_micros > 0),
    currency      text NOT NULL,
    created_at    timestamptz NOT NULL
);

CREATE INDEX ledger_entries_operation ON ledger_entries (operation_id, id);

CREATE FUNCTION ledger_entries_append_only() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'ledger_entries is append-only';
END;
$$;

CREATE TRIGGER ledger_entries_append_only
    BEFORE UPDATE OR DELETE ON ledger_entries
    FOR EACH ROW EXECUTE FUNCTION ledger_entries_append_only();

-- What one agent has used per UTC day: outstanding holds plus captures of the operations
-- authorized that day, updated in the same transaction as the ledger. A budget period's use
-- is the sum of its days, so changing an agent's period never forgets what was spent.
CREATE TABLE budget_usage (
    agent_id    uuid NOT NULL REFERENCES agents (id),
    day         timestamptz NOT NULL,
    used_micros bigint NOT NULL CHECK (used_micros >= 0),
    PRIMARY KEY (agent_id, day)
);
