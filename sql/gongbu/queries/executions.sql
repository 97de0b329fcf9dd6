-- name: InsertExecution :one
-- The one insert per decision; a second request for the same decision inserts nothing.
-- It returns the database's epoch as the statement read it, so that the row and the epoch it
-- is judged by come in one round trip (see Store.Insert). A database without its epoch row
-- inserts nothing either.
WITH epoch AS (SELECT id, began_at FROM database_epoch)
INSERT INTO executions (decision_id, public_handle, agent_id, provider, model, size, arguments,
                        amount_micros, currency, vendor_key, state, lease_until, created_at, updated_at)
SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $13 FROM epoch
ON CONFLICT (decision_id) DO NOTHING
RETURNING sqlc.embed(executions), (SELECT id FROM epoch)::uuid AS epoch_id, (SELECT began_at FROM epoch)::timestamptz AS epoch_began_at;

-- name: GetExecution :one
SELECT * FROM executions WHERE decision_id = $1;

-- name: GetExecutionByHandle :one
SELECT * FROM executions WHERE public_handle = $1;

-- name: ListExecutions :many
SELECT * FROM executions ORDER BY created_at, decision_id;

-- name: ClaimExecution :one
-- Takes the lease of an open execution whose lease ran out (its worker crashed or gave up),
-- so exactly one worker acts on it at a time.
UPDATE executions
SET lease_until = sqlc.arg(lease_until), attempts = attempts + 1, lease_generation = lease_generation + 1,
    updated_at = sqlc.arg(now)
WHERE decision_id = sqlc.arg(decision_id) AND state = sqlc.arg(state) AND lease_until <= sqlc.arg(now)
RETURNING *;

-- name: ListClaimable :many
SELECT decision_id, state FROM executions
WHERE state IN ('submitting', 'submitted') AND lease_until <= $1
ORDER BY lease_until
LIMIT $2;

-- The writes below are fenced: each names the lease generation its worker holds, and finds no
-- row once another worker has claimed the execution. The fields they set are what the
-- domain's transitions (services/gongbu/transition.go) return.

-- name: MarkSubmitted :one
UPDATE executions
SET state = sqlc.arg(state), provider_job_id = sqlc.arg(provider_job_id), polling_url = sqlc.arg(polling_url),
    provider_cost_micros = sqlc.narg(provider_cost_micros),
    poll_deadline = sqlc.arg(poll_deadline), lease_until = sqlc.arg(lease_until), updated_at = sqlc.arg(now)
WHERE decision_id = sqlc.arg(decision_id) AND state = 'submitting' AND lease_generation = sqlc.arg(lease_generation)
RETURNING *;

-- name: ExtendLease :one
-- Commits without waiting for the WAL flush: set_config(..., true) is SET LOCAL for this
-- statement's own transaction, so the extension is one round trip (see Store.ExtendLease).
-- Never run it inside a transaction that writes anything else: the setting would apply to that
-- whole transaction's commit.
WITH async_commit AS (SELECT set_config('synchronous_commit', 'off', true))
UPDATE executions SET lease_until = sqlc.arg(lease_until), updated_at = sqlc.arg(now)
FROM async_commit
WHERE decision_id = sqlc.arg(decision_id) AND state IN ('submitting', 'submitted')
  AND lease_generation = sqlc.arg(lease_generation)
RETURNING decision_id;

-- name: FinishExecution :one
-- A success may come with the image the provider delivered, kept in the same statement: the
-- execution is never seen succeeded without it when it was downloaded.
WITH finished AS (
    UPDATE executions
    SET state = sqlc.arg(state), result_url = sqlc.arg(result_url), error = sqlc.arg(error),
        charged_micros = sqlc.arg(charged_micros), updated_at = sqlc.arg(now),
        image_mime_type = sqlc.narg(image_mime_type), image_sha256 = sqlc.narg(image_sha256),
        image_size = sqlc.narg(image_size), image_width = sqlc.narg(image_width), image_height = sqlc.narg(image_height),
        preview_sha256 = sqlc.narg(preview_sha256), preview_size = sqlc.narg(preview_size),
        preview_width = sqlc.narg(preview_width), preview_height = sqlc.narg(preview_height)
    WHERE executions.decision_id = sqlc.arg(decision_id) AND state IN ('submitting', 'submitted')
      AND lease_generation = sqlc.arg(lease_generation)
    RETURNING *
), kept AS (
    INSERT INTO execution_images (decision_id, image, preview, fetched_at)
    SELECT finished.decision_id, sqlc.narg(image)::bytea, sqlc.narg(preview)::bytea, sqlc.arg(now)
    FROM finished WHERE sqlc.narg(image)::bytea IS NOT NULL
)
SELECT * FROM finished;

-- name: ListUnreported :many
-- Oldest first; a report Hubu did not take is deferred (DeferReport), so a few that keep
-- failing cannot hold back the rest.
SELECT * FROM executions
WHERE state IN ('succeeded', 'failed') AND reported_at IS NULL
ORDER BY updated_at, decision_id
LIMIT $1;

-- name: DeferReport :exec
-- Moves an unreported outcome that Hubu did not take to the back of ListUnreported.
UPDATE executions SET updated_at = $2 WHERE decision_id = $1 AND reported_at IS NULL;

-- name: MarkReported :exec
-- Commits without waiting for the WAL flush, as ExtendLease does (see Store.MarkReported).
-- Never run it inside a transaction that writes anything else.
WITH async_commit AS (SELECT set_config('synchronous_commit', 'off', true))
UPDATE executions SET reported_at = $2
FROM async_commit
WHERE decision_id = $1 AND reported_at IS NULL;

-- name: ResolveExecution :one
-- An operator's verdict on an indeterminate execution: succeeded with what the provider
-- charged, or failed with nothing charged. It is left unreported, so the running Gongbu
-- reports it to Hubu (settle or release) on its next pass.
UPDATE executions
SET state = sqlc.arg(state), charged_micros = sqlc.arg(charged_micros), error = sqlc.arg(error),
    resolved_at = sqlc.arg(now), updated_at = sqlc.arg(now), reported_at = NULL
WHERE decision_id = sqlc.arg(decision_id) AND state = 'indeterminate'
RETURNING *;

-- name: ResumeJob :one
-- An operator gives an indeterminate execution the job the provider took for it (a record
-- that failed logged it): it is submitted again, its lease free, so the background pass polls
-- it at once; the new lease generation fences any worker that still held the old one.
UPDATE executions
SET lease_until = sqlc.arg(now), state = 'submitted', provider_job_id = sqlc.arg(provider_job_id),
    polling_url = sqlc.arg(polling_url), poll_deadline = sqlc.arg(poll_deadline), error = NULL, resolved_at = sqlc.arg(now),
    lease_generation = lease_generation + 1, updated_at = sqlc.arg(now)
WHERE decision_id = sqlc.arg(decision_id) AND state = 'indeterminate' AND provider_job_id IS NULL
RETURNING *;

-- name: GetDatabaseEpoch :one
SELECT id, began_at FROM database_epoch;

-- name: RenewDatabaseEpoch :one
-- After a restore from a backup: rows of executions accepted since the backup may be gone, so
-- the record is unbroken only from now on.
UPDATE database_epoch SET id = gen_random_uuid(), began_at = clock_timestamp()
RETURNING id, began_at;

-- name: GetExecutionByJob :one
SELECT * FROM executions WHERE provider = $1 AND provider_job_id = $2;

-- name: ClaimSubmitted :one
-- Takes the lease of a submitted execution now, whoever holds it: a provider said the job is
-- done, so it is polled at once. Polling is a read; a worker that was about to poll it loses
-- its lease and writes nothing (every outcome write is fenced), so two never both record.
UPDATE executions
SET lease_until = sqlc.arg(lease_until), attempts = attempts + 1, lease_generation = lease_generation + 1,
    updated_at = sqlc.arg(now)
WHERE decision_id = sqlc.arg(decision_id) AND state = 'submitted'
RETURNING *;

-- name: ListImagesMissing :many
-- Successes whose image could not be downloaded when they were recorded, recent enough that
-- the provider's delivery URL may still work.
SELECT decision_id FROM executions
WHERE state = 'succeeded' AND result_url IS NOT NULL AND image_sha256 IS NULL
  AND updated_at > sqlc.arg(since) AND image_fetch_attempts < sqlc.arg(max_attempts)
  AND COALESCE(image_fetch_after, '-infinity') <= sqlc.arg(now)
ORDER BY updated_at
LIMIT sqlc.arg(max_rows);

-- name: ClaimImageFetch :one
-- One worker, in any replica, tries a missing image at a time: the claim counts the attempt
-- and puts the next one off by backoff_seconds, doubled for every attempt before it.
UPDATE executions
SET image_fetch_attempts = image_fetch_attempts + 1,
    image_fetch_after = sqlc.arg(now)::timestamptz
        + make_interval(secs => sqlc.arg(backoff_seconds)::float8 * power(2, image_fetch_attempts))
WHERE decision_id = sqlc.arg(decision_id) AND state = 'succeeded' AND result_url IS NOT NULL
  AND image_sha256 IS NULL AND image_fetch_attempts < sqlc.arg(max_attempts)
  AND COALESCE(image_fetch_after, '-infinity') <= sqlc.arg(now)
RETURNING *;

-- name: KeepImage :one
-- Keeps an image downloaded after its success was recorded; a second download of the same
-- image changes nothing.
WITH described AS (
    UPDATE executions
    SET image_mime_type = sqlc.arg(image_mime_type), image_sha256 = sqlc.arg(image_sha256),
        image_size = sqlc.arg(image_size), image_width = sqlc.narg(image_width), image_height = sqlc.narg(image_height),
        preview_sha256 = sqlc.narg(preview_sha256), preview_size = sqlc.narg(preview_size),
        preview_width = sqlc.narg(preview_width), preview_height = sqlc.narg(preview_height)
    WHERE executions.decision_id = sqlc.arg(decision_id) AND state = 'succeeded' AND image_sha256 IS NULL
    RETURNING *
), kept AS (
    INSERT INTO execution_images (decision_id, image, preview, fetched_at)
    SELECT described.decision_id, sqlc.arg(image)::bytea, sqlc.narg(preview)::bytea, sqlc.arg(now) FROM described
)
SELECT described.decision_id FROM described;

-- name: GetExecutionWithImageByHandle :one
-- The execution of an operation by its public handle and, when it succeeded with a kept
-- image of no more than embed_limit bytes, the image, or else its preview when that is no
-- larger (NULL otherwise): a long-poll's answer that embeds the image, in one statement, so
-- the image is the one the row describes.
SELECT sqlc.embed(e),
    (CASE WHEN e.state = 'succeeded' AND e.image_size <= sqlc.arg(embed_limit)::integer THEN i.image END)::bytea AS image,
    (CASE WHEN e.state = 'succeeded' AND e.image_size > sqlc.arg(embed_limit)::integer
          AND e.preview_size <= sqlc.arg(embed_limit)::integer THEN i.preview END)::bytea AS preview
FROM executions e LEFT JOIN execution_images i USING (decision_id)
WHERE e.public_handle = sqlc.arg(public_handle);

-- name: GetImageByHandle :one
SELECT e.image_mime_type, e.image_sha256, i.image
FROM executions e JOIN execution_images i USING (decision_id)
WHERE e.public_handle = $1;

-- name: GetInputImage :one
-- An earlier result an edit names, with the agent it belongs to.
SELECT e.agent_id, e.image_mime_type, i.image
FROM executions e JOIN execution_images i USING (decision_id)
WHERE e.public_handle = $1 AND e.state = 'succeeded' AND e.image_mime_type IS NOT NULL;

-- name: GetPreviewByHandle :one
SELECT e.preview_sha256, i.preview
FROM executions e JOIN execution_images i USING (decision_id)
WHERE e.public_handle = $1 AND e.image_sha256 IS NOT NULL AND e.preview_sha256 IS NOT NULL AND i.preview IS NOT NULL;

-- name: PruneImages :execrows
-- Deletes up to max_rows kept images fetched more than older_than_seconds ago by the
-- database's clock, and the executions' description of them, in one statement: an execution
-- never describes an image Gongbu no longer keeps.
WITH doomed AS (
    SELECT decision_id FROM execution_images
    WHERE fetched_at < now() - make_interval(secs => sqlc.arg(older_than_seconds)::float8)
    ORDER BY fetched_at
    LIMIT sqlc.arg(max_rows)
    FOR UPDATE SKIP LOCKED
), undescribed AS (
    -- and no download attempts left: the provider's link expired long ago
    UPDATE executions SET image_mime_type = NULL, image_sha256 = NULL, image_size = NULL, image_width = NULL,
        image_height = NULL, preview_sha256 = NULL, preview_size = NULL, preview_width = NULL, preview_height = NULL,
        image_fetch_attempts = 2147483647
    FROM doomed WHERE executions.decision_id = doomed.decision_id
    RETURNING executions.decision_id
)
DELETE FROM execution_images USING undescribed WHERE execution_images.decision_id = undescribed.decision_id;

-- name: CountPrunableImages :one
SELECT count(*)::bigint AS images, coalesce(sum(octet_length(image) + coalesce(octet_length(preview), 0)), 0)::bigint AS bytes
FROM execution_images
WHERE fetched_at < now() - make_interval(secs => sqlc.arg(older_than_seconds)::float8);
