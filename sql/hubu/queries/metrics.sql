-- name: CountOperationsByState :many
-- Operations by state, for the state gauges of /metrics; stuck counts the dispatching ones
-- whose hand-off keeps failing (many attempts) or that nobody re-sends (not touched since
-- stale_before), as docs/operations.md's alert does. Each count reads an index rather than
-- the table: the count by state operations_state alone (index-only), the stuck ones
-- operations_dispatching, which holds only the dispatching. One statement, so one snapshot.
WITH by_state AS (
    SELECT state, count(*) AS operations FROM operations GROUP BY state
), stuck AS (
    SELECT count(*) AS stuck FROM operations AS o
    WHERE o.state = 'dispatching'
      AND (o.dispatch_attempts >= sqlc.arg(stuck_attempts)::int OR o.updated_at < sqlc.arg(stale_before))
)
SELECT by_state.state, by_state.operations::bigint AS operations,
       (CASE WHEN by_state.state = 'dispatching' THEN stuck.stuck ELSE 0 END)::bigint AS stuck
FROM by_state CROSS JOIN stuck;

-- name: SetLocalStatementTimeout :exec
-- Bounds every later statement of this transaction (SET LOCAL): Postgres cancels one that runs
-- longer, and the connection stays in the pool, where a context that ends mid-query makes
-- pgx close it.
SELECT set_config('statement_timeout', sqlc.arg(milliseconds)::bigint::text, true);
