-- Wake-ups for whoever waits on an execution (a router's long-poll), in every replica.
--
-- Every insert of an execution and every change of its state notifies the channel
-- gongbu_execution with the execution's public handle, in the transaction that made the
-- change, so a listener hears of it only once it is committed. A notification is a hint to
-- read again, never the record: a listener that was disconnected misses it, and every waiter
-- re-reads on a backstop interval as well. The handle is what the agent already holds, so the
-- payload tells a listener nothing it could not read.
CREATE FUNCTION notify_execution_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('gongbu_execution', NEW.public_handle);
    RETURN NULL;
END;
$$;

CREATE TRIGGER executions_notify_insert AFTER INSERT ON executions
    FOR EACH ROW EXECUTE FUNCTION notify_execution_change();
CREATE TRIGGER executions_notify_state AFTER UPDATE OF state ON executions
    FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state) EXECUTE FUNCTION notify_execution_change();

-- A provider's webhook names its job; Gongbu finds the execution by it.
CREATE INDEX executions_provider_job ON executions (provider, provider_job_id) WHERE provider_job_id IS NOT NULL;
