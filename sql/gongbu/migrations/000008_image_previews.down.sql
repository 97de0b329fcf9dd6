ALTER TABLE execution_images DROP COLUMN preview;
ALTER TABLE executions
    DROP CONSTRAINT executions_preview_all_or_none,
    DROP CONSTRAINT executions_image_sides,
    DROP COLUMN preview_height,
    DROP COLUMN preview_width,
    DROP COLUMN preview_size,
    DROP COLUMN preview_sha256,
    DROP COLUMN image_height,
    DROP COLUMN image_width;
