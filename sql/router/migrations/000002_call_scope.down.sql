ALTER TABLE calls DROP COLUMN scope_digest;
