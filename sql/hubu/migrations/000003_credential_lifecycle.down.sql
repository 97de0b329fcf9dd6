-- The previous version knows only revoked_at: a credential a rotation replaced would be valid
-- again without expires_at, leaked ones included. Rolling back ends every rotation's overlap.
UPDATE credentials SET revoked_at = least(expires_at, now())
WHERE revoked_at IS NULL AND expires_at IS NOT NULL;

ALTER TABLE credentials
    DROP CONSTRAINT credentials_revoked_by_with_revoked_at,
    DROP CONSTRAINT credentials_replaces_key,
    DROP COLUMN revoked_by,
    DROP COLUMN expires_at,
    DROP COLUMN replaces,
    DROP COLUMN created_by;
ALTER TABLE credentials DROP CONSTRAINT credentials_id_key;
ALTER TABLE credentials DROP COLUMN id;
