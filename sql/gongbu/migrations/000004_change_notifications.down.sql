DROP INDEX executions_provider_job;
DROP TRIGGER executions_notify_state ON executions;
DROP TRIGGER executions_notify_insert ON executions;
DROP FUNCTION notify_execution_change();
