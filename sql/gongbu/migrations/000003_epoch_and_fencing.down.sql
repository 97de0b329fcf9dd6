ALTER TABLE executions DROP COLUMN lease_generation;
DROP TABLE database_epoch;
