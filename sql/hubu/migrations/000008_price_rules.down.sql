-- A per-megapixel price has no flat form: the previous release would charge its first
-- megapixel for any size, so such entries go, and their models are unpriced (refused) until an
-- operator sets a flat price. The flux-schnell entry comes back as it was seeded.
DELETE FROM prices WHERE rule = 'megapixel';
ALTER TABLE prices
    DROP CONSTRAINT prices_megapixel_any_size,
    DROP CONSTRAINT prices_megapixel_amounts,
    DROP COLUMN input_mp_micros,
    DROP COLUMN extra_mp_micros,
    DROP COLUMN rule;
INSERT INTO prices (provider, model, size, amount_micros, currency, updated_at) VALUES
    ('bfl', 'flux-schnell', '*', 3000, 'USD', now())
ON CONFLICT (provider, model, size) DO NOTHING;
