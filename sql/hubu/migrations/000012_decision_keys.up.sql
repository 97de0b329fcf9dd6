-- The keys Hubu signs decisions with (Ed25519), so that Gongbu can check a hand-off without
-- asking Hubu about it. One key is in use at a time (the partial unique index): the first
-- replica to start makes it, and every replica signs with it. Gongbu reads the public halves
-- (GET /v1/decision-keys). retired_at is for a rotation: a retired key stays listed for a while
-- (Store.DecisionKeys), so that what it signed stays checkable until it expires.
CREATE TABLE decision_keys (
    kid         text PRIMARY KEY,
    seed        bytea NOT NULL CHECK (length(seed) = 32),
    created_at  timestamptz NOT NULL,
    retired_at  timestamptz
);
CREATE UNIQUE INDEX decision_keys_one_in_use ON decision_keys ((true)) WHERE retired_at IS NULL;
