-- Hubu caches credentials (by token hash) and the price catalog in each process, and drops
-- what it cached when either table changes. A change made by another replica, by `hubu
-- operator create`, or by hand is announced by these triggers: a notification on the table's
-- channel, sent by Postgres when (and only if) the changing transaction commits. The channel
-- names are the ones services/hubu/postgres listens on. The payload is empty: a process drops
-- the whole table's entries, and a notification never carries a token's hash.
CREATE FUNCTION hubu_notify_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify(TG_ARGV[0], '');
    RETURN NULL;
END;
$$;

-- Per statement, not per row: one notification however many rows changed (Postgres folds
-- identical notifications of one transaction into one as well).
CREATE TRIGGER credentials_notify_change
    AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON credentials
    FOR EACH STATEMENT EXECUTE FUNCTION hubu_notify_change('hubu_credentials');

CREATE TRIGGER prices_notify_change
    AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON prices
    FOR EACH STATEMENT EXECUTE FUNCTION hubu_notify_change('hubu_prices');
