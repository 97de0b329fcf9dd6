-- A file of preallocated operation keys, made by the operator (hubu-unified-mcp preallocate).
-- The router claims one per new call, atomically, and never gives a key out twice.
CREATE TABLE IF NOT EXISTS preallocated_keys (
    operation_key TEXT PRIMARY KEY,
    claimed_at    INTEGER -- unix milliseconds; NULL while the key is free
);
