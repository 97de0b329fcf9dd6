ALTER TABLE operations DROP COLUMN dispatch_attempts;
