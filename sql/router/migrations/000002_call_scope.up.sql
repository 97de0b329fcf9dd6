-- The conversation a call id arrived in, where the harness says so (Codex's threadId): a
-- digest, never the id itself. The same call id under another scope is not a redelivery but a
-- repeated id (a model that reuses tool-call ids across conversations), and is refused. Rows
-- recorded before this column existed have no scope ('') and are never refused for one.
ALTER TABLE calls ADD COLUMN scope_digest TEXT NOT NULL DEFAULT '';
