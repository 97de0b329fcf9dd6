-- name: CountOperationsByState :many
-- Operations by state, for /metrics at scrape time; stuck counts the dispatching ones whose
-- hand-off keeps failing (many attempts) or that nobody re-sends (not touched since
-- stale_before), as docs/operations.md's alert does.
SELECT state, count(*)::bigint AS operations,
       (count(*) FILTER (WHERE state = 'dispatching'
           AND (dispatch_attempts >= sqlc.arg(stuck_attempts)::int OR updated_at < sqlc.arg(stale_before))))::bigint AS stuck
FROM operations
GROUP BY state;
