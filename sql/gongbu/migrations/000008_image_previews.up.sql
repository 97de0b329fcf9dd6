-- Every result reaches the agent whatever its size: a kept image larger than an MCP client
-- takes embedded (a 4-megapixel PNG is many MiB) gets a preview, a scaled JPEG copy small
-- enough to embed, kept beside it; the original stays readable by reference. The image's and
-- the preview's sides are recorded so that an answer can say what the agent got.
--
-- This migration runs while the previous release serves: it only adds nullable columns.
-- Images the previous release keeps have no sides and no preview. Its pruning clears the
-- image's columns and not these, so no check ties a preview to an image: readers take a
-- preview only beside an image.
ALTER TABLE executions
    ADD COLUMN image_width integer,
    ADD COLUMN image_height integer,
    ADD COLUMN preview_sha256 bytea,
    ADD COLUMN preview_size integer,
    ADD COLUMN preview_width integer,
    ADD COLUMN preview_height integer,
    ADD CONSTRAINT executions_image_sides CHECK (
        (image_width IS NULL) = (image_height IS NULL) AND image_width > 0 AND image_height > 0) NOT VALID,
    ADD CONSTRAINT executions_preview_all_or_none CHECK (
        (preview_sha256 IS NULL) = (preview_size IS NULL) AND (preview_size IS NULL) = (preview_width IS NULL)
        AND (preview_width IS NULL) = (preview_height IS NULL)
        AND octet_length(preview_sha256) = 32 AND preview_size > 0 AND preview_width > 0 AND preview_height > 0) NOT VALID;
ALTER TABLE execution_images ADD COLUMN preview bytea CHECK (octet_length(preview) BETWEEN 1 AND 1048576);
