-- Gongbu's first schema: one execution per decision Hubu issued.

-- state: submitting (about to call the provider, recorded first), submitted (the provider
-- has the job), succeeded, failed, indeterminate (the provider may have charged and we cannot
-- know; an operator reconciles it). reported_at is set once Hubu has the outcome.
CREATE TABLE executions (
    decision_id     uuid PRIMARY KEY,
    public_handle   text NOT NULL UNIQUE,
    agent_id        uuid NOT NULL,
    provider        text NOT NULL,
    model           text NOT NULL,
    size            text NOT NULL,
    arguments       jsonb NOT NULL,
    amount_micros   bigint NOT NULL CHECK (amount_micros >= 0),
    currency        text NOT NULL,
    vendor_key      text NOT NULL UNIQUE,
    state           text NOT NULL CHECK (state IN ('submitting', 'submitted', 'succeeded', 'failed', 'indeterminate')),
    provider_job_id text,
    polling_url     text,
    result_url      text,
    error           text,
    attempts        integer NOT NULL DEFAULT 0,
    lease_until     timestamptz NOT NULL,
    poll_deadline   timestamptz,
    charged_micros  bigint,
    reported_at     timestamptz,
    created_at      timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL,
    CHECK ((state IN ('submitted', 'succeeded')) <= (provider_job_id IS NOT NULL))
);

CREATE INDEX executions_open ON executions (lease_until) WHERE state IN ('submitting', 'submitted');
CREATE INDEX executions_unreported ON executions (updated_at) WHERE state IN ('succeeded', 'failed') AND reported_at IS NULL;
