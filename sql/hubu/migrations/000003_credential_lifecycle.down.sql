ALTER TABLE credentials
    DROP CONSTRAINT credentials_revoked_by_with_revoked_at,
    DROP CONSTRAINT credentials_replaces_key,
    DROP COLUMN revoked_by,
    DROP COLUMN expires_at,
    DROP COLUMN replaces,
    DROP COLUMN created_by;
ALTER TABLE credentials DROP CONSTRAINT credentials_id_key;
ALTER TABLE credentials DROP COLUMN id;
