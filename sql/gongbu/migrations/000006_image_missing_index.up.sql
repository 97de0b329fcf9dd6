-- The successes whose image the background pass still downloads. Built without blocking
-- writes, while the previous release serves: the statement must be alone in its migration (a
-- concurrent build cannot run inside a transaction).
CREATE INDEX CONCURRENTLY IF NOT EXISTS executions_image_missing ON executions (updated_at)
    WHERE state = 'succeeded' AND result_url IS NOT NULL AND image_sha256 IS NULL;
