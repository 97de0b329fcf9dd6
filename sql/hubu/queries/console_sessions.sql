-- The approval console's sessions (migration 7). A session is found by the hash of the id its
-- cookie holds, never by the id.

-- name: InsertConsoleSession :exec
INSERT INTO console_sessions (id_hash, credential_id, operator, credential_hash, csrf_token, created_at, expires_at)
VALUES ($1, $2, $3, $4, $5, $6, $7);

-- name: GetConsoleSession :one
SELECT * FROM console_sessions WHERE id_hash = $1;

-- name: DeleteConsoleSession :exec
DELETE FROM console_sessions WHERE id_hash = $1;

-- name: DeleteExpiredConsoleSessions :execrows
DELETE FROM console_sessions WHERE expires_at <= sqlc.arg(now);

-- name: SetConsoleSessionFlash :exec
UPDATE console_sessions SET flash = sqlc.arg(flash) WHERE id_hash = sqlc.arg(id_hash);

-- name: TakeConsoleSessionFlash :one
-- Returns the session's flash and clears it, in one statement: of two pages that load at once
-- (on two replicas, say), one shows the message and the other nothing. The row lock of the
-- inner SELECT makes the second wait and then read the cleared flash.
UPDATE console_sessions s SET flash = ''
FROM (SELECT c.id_hash, c.flash FROM console_sessions c WHERE c.id_hash = sqlc.arg(id_hash) FOR UPDATE) old
WHERE s.id_hash = old.id_hash
RETURNING old.flash;
