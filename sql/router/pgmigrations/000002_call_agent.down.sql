-- The schema before calls had an agent has room for the static token's agent alone. A call of
-- any other agent can neither be kept (it would become the static agent's, and its answer be
-- replayed to another person) nor dropped (its redelivery would be a new operation, charged
-- again), so going down is refused while the registry holds one.
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM calls WHERE agent <> '') THEN
        RAISE EXCEPTION 'the registry holds calls of agents other than the static one: it cannot go down to a schema without agents';
    END IF;
END
$$;

ALTER TABLE calls
    DROP CONSTRAINT calls_pkey,
    ADD CONSTRAINT calls_pkey PRIMARY KEY (platform, installation_id, harness_call_id);

ALTER TABLE calls DROP COLUMN agent;
