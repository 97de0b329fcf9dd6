-- Calls are the agent's: in OAuth mode one router serves many people, each the agent they
-- signed in as, and the same harness call id from two of them is two operations, never one
-- person's answer replayed to another. A call's identity becomes (agent, platform,
-- installation, harness call id); agent is the agent's id, or '' for the static token's agent
-- (and stdio), whose every call recorded before this migration stays its own.
--
-- The new key is built in this transaction, holding the table meanwhile, not CONCURRENTLY: a
-- router migrates the registry as it starts, while the routers starting with it wait for
-- golang-migrate's advisory lock, and a concurrent build waits for them in turn (a deadlock).
-- A registry is pruned of old calls, so the build is short.
--
-- A router of an earlier release names the old key in its insert (ON CONFLICT (platform,
-- installation_id, harness_call_id)), which no longer matches a unique index: once this has
-- run it cannot record a new call (the call fails, nothing is charged) until it is replaced.
ALTER TABLE calls ADD COLUMN agent text NOT NULL DEFAULT '';

ALTER TABLE calls
    DROP CONSTRAINT calls_pkey,
    ADD CONSTRAINT calls_pkey PRIMARY KEY (agent, platform, installation_id, harness_call_id);
