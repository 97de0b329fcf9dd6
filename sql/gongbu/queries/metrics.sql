-- name: CountExecutionsByState :many
-- Executions by state, for the state gauges of /metrics. stuck counts the open ones whose
-- lease ran out (no worker holds them: a crash, or a pass that does not run); unreported
-- counts the finished ones whose outcome Hubu has not taken yet. Each count reads an index
-- rather than the table: the count by state executions_state alone (index-only), the others
-- the partial indexes executions_open and executions_unreported, which hold only the rows they
-- count among. One statement, so one snapshot.
WITH by_state AS (
    SELECT state, count(*) AS executions FROM executions GROUP BY state
), stuck AS (
    SELECT x.state, count(*) AS stuck FROM executions AS x
    WHERE x.state IN ('submitting', 'submitted') AND x.lease_until < sqlc.arg(now)
    GROUP BY x.state
), unreported AS (
    SELECT x.state, count(*) AS unreported FROM executions AS x
    WHERE x.state IN ('succeeded', 'failed') AND x.reported_at IS NULL
    GROUP BY x.state
)
SELECT by_state.state, by_state.executions::bigint AS executions,
       coalesce(stuck.stuck, 0)::bigint AS stuck, coalesce(unreported.unreported, 0)::bigint AS unreported
FROM by_state
LEFT JOIN stuck ON stuck.state = by_state.state
LEFT JOIN unreported ON unreported.state = by_state.state;

-- name: SetLocalStatementTimeout :exec
-- Bounds every later statement of this transaction (SET LOCAL): Postgres cancels one that runs
-- longer, and the connection stays in the pool, where a context that ends mid-query makes
-- pgx close it.
SELECT set_config('statement_timeout', sqlc.arg(milliseconds)::bigint::text, true);
