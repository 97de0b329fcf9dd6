-- Results by reference: Gongbu keeps the image a provider delivered.
--
-- A provider's delivery URL expires within minutes (BFL's after ten), so an image nobody
-- downloaded in time is lost although it was paid for. Gongbu downloads it once, when it
-- records the success, and serves it to the agent by public handle from then on; a router
-- keeps only the reference in its registry and embeds the image from here on every
-- redelivery, so a shared registry never holds image bytes.
--
-- The bytes live in their own table, so that reading and waiting on executions never touches
-- them; the executions row says whether there is an image, and what it is.
--
-- This migration runs while the previous release serves (docs/operations.md, rolling
-- upgrades): it only adds, and holds its lock on executions for no scan. The new columns are
-- NULL in every existing row, so their checks are added NOT VALID (they hold for every row
-- written from now on, and trivially for the rows before); the index is built concurrently by
-- the next migration.
CREATE TABLE execution_images (
    decision_id uuid PRIMARY KEY REFERENCES executions (decision_id) ON DELETE CASCADE,
    image       bytea NOT NULL CHECK (octet_length(image) BETWEEN 1 AND 33554432),
    fetched_at  timestamptz NOT NULL
);
-- Images are compressed already: keep them out of line without trying to compress them again.
ALTER TABLE execution_images ALTER COLUMN image SET STORAGE EXTERNAL;

-- Set in the statement that stores the image, all three or none.
ALTER TABLE executions
    ADD COLUMN image_mime_type text,
    ADD COLUMN image_sha256 bytea,
    ADD COLUMN image_size integer,
    -- A download that failed when the success was recorded is tried again by the background
    -- pass, a bounded number of times, no sooner than image_fetch_after.
    ADD COLUMN image_fetch_attempts integer NOT NULL DEFAULT 0,
    ADD COLUMN image_fetch_after timestamptz,
    ADD CONSTRAINT executions_image_mime_type CHECK (image_mime_type IN ('image/png', 'image/jpeg', 'image/webp')) NOT VALID,
    ADD CONSTRAINT executions_image_sha256 CHECK (octet_length(image_sha256) = 32) NOT VALID,
    ADD CONSTRAINT executions_image_size CHECK (image_size > 0) NOT VALID,
    ADD CONSTRAINT executions_image_all_or_none CHECK (
        (image_mime_type IS NULL) = (image_sha256 IS NULL) AND (image_sha256 IS NULL) = (image_size IS NULL)) NOT VALID;
