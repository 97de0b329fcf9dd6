-- name: CountExecutionsByState :many
-- Executions by state, for /metrics at scrape time. stuck counts the open ones whose lease ran
-- out (no worker holds them: a crash, or a pass that does not run); unreported counts the
-- finished ones whose outcome Hubu has not taken yet.
SELECT state, count(*)::bigint AS executions,
       (count(*) FILTER (WHERE state IN ('submitting', 'submitted') AND lease_until < sqlc.arg(now)))::bigint AS stuck,
       (count(*) FILTER (WHERE state IN ('succeeded', 'failed') AND reported_at IS NULL))::bigint AS unreported
FROM executions
GROUP BY state;
