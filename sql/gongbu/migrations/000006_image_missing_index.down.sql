DROP INDEX CONCURRENTLY IF EXISTS executions_image_missing;
