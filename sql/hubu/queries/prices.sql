-- name: ListPrices :many
SELECT * FROM prices ORDER BY provider, model, size;

-- name: UpsertPrice :one
INSERT INTO prices (provider, model, size, rule, amount_micros, extra_mp_micros, input_mp_micros, currency, updated_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
ON CONFLICT (provider, model, size) DO UPDATE SET
    rule = EXCLUDED.rule,
    amount_micros = EXCLUDED.amount_micros,
    extra_mp_micros = EXCLUDED.extra_mp_micros,
    input_mp_micros = EXCLUDED.input_mp_micros,
    currency = EXCLUDED.currency,
    updated_at = EXCLUDED.updated_at
RETURNING *;
