-- An operator resolves an indeterminate execution with `gongbu resolve`; resolved_at says
-- when. A resolved execution may have succeeded (the provider charged) without a job Gongbu
-- knows of, when the provider's answer to the submission was lost: the rule that a success
-- has a provider job excepts resolved executions.
ALTER TABLE executions ADD COLUMN resolved_at timestamptz;
ALTER TABLE executions DROP CONSTRAINT executions_check;
ALTER TABLE executions ADD CONSTRAINT executions_job_check
    CHECK ((state = 'submitted' OR (state = 'succeeded' AND resolved_at IS NULL)) <= (provider_job_id IS NOT NULL));
