-- name: ListPrices :many
SELECT * FROM prices ORDER BY provider, model, size;

-- name: UpsertPrice :one
INSERT INTO prices (provider, model, size, amount_micros, currency, updated_at)
VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (provider, model, size) DO UPDATE SET
    amount_micros = EXCLUDED.amount_micros,
    currency = EXCLUDED.currency,
    updated_at = EXCLUDED.updated_at
RETURNING *;
