-- Fails while a resolved success without a provider job exists: the first schema cannot hold it.
ALTER TABLE executions DROP CONSTRAINT executions_job_check;
ALTER TABLE executions ADD CONSTRAINT executions_check CHECK ((state IN ('submitted', 'succeeded')) <= (provider_job_id IS NOT NULL));
ALTER TABLE executions DROP COLUMN resolved_at;
