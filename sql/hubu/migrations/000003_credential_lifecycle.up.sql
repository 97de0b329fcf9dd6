-- Credentials get an id that operators can name without the token, and a lifecycle beside
-- revoked_at: who revoked one, and rotation (the new credential names the one it replaces,
-- which stays valid until expires_at, a short overlap for restarting its holders one at a time).
-- Every existing credential gets a random id; new ones get theirs from Hubu. The default stays,
-- so that replicas of the previous version, which insert credentials without an id, keep
-- working during a rolling upgrade.
ALTER TABLE credentials ADD COLUMN id uuid NOT NULL DEFAULT gen_random_uuid();
ALTER TABLE credentials ADD CONSTRAINT credentials_id_key UNIQUE (id);

ALTER TABLE credentials
    -- The operator credential that issued this one through the API (by a rotation).
    ADD COLUMN created_by uuid REFERENCES credentials (id),
    -- The credential this one replaced; a credential is replaced at most once.
    ADD COLUMN replaces uuid REFERENCES credentials (id),
    -- Set by a rotation: the replaced credential is refused from then on.
    ADD COLUMN expires_at timestamptz,
    -- The operator credential that revoked this one (NULL for a revocation made before this
    -- column existed).
    ADD COLUMN revoked_by uuid REFERENCES credentials (id),
    ADD CONSTRAINT credentials_replaces_key UNIQUE (replaces),
    ADD CONSTRAINT credentials_revoked_by_with_revoked_at CHECK (revoked_by IS NULL OR revoked_at IS NOT NULL);
