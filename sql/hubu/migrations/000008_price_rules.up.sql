-- Prices per megapixel, as BFL prices FLUX.2. A price's rule is flat (amount_micros an image,
-- as every price before this migration) or megapixel: amount_micros for the first megapixel
-- of output, extra_mp_micros for each further one and input_mp_micros for each megapixel of the
-- input images (hubu.Price.AmountFor has the arithmetic). A per-megapixel price covers every
-- size of its model ('*'). The default keeps a Hubu of the previous release, still serving
-- during a rolling upgrade, writing flat prices as it always did.
ALTER TABLE prices
    ADD COLUMN rule text NOT NULL DEFAULT 'flat' CHECK (rule IN ('flat', 'megapixel')),
    ADD COLUMN extra_mp_micros bigint CHECK (extra_mp_micros >= 0),
    ADD COLUMN input_mp_micros bigint CHECK (input_mp_micros >= 0),
    ADD CONSTRAINT prices_megapixel_amounts CHECK ((rule = 'megapixel') = (extra_mp_micros IS NOT NULL AND input_mp_micros IS NOT NULL)),
    ADD CONSTRAINT prices_megapixel_any_size CHECK (rule = 'flat' OR size = '*');

-- BFL's published prices (1 credit = $0.01) for the models this release adds; an operator's
-- own entry for one of them is kept. flux-pro-1.1, flux-pro-1.1-ultra and flux-dev keep the
-- entries they have. flux-schnell is no model of BFL's API: its seeded entry goes (operations
-- recorded under it keep their amounts).
INSERT INTO prices (provider, model, size, rule, amount_micros, extra_mp_micros, input_mp_micros, currency, updated_at) VALUES
    ('bfl', 'flux-2-pro',       '*', 'megapixel', 30000, 15000, 15000, 'USD', now()),
    ('bfl', 'flux-2-max',       '*', 'megapixel', 70000, 30000, 30000, 'USD', now()),
    ('bfl', 'flux-2-flex',      '*', 'megapixel', 60000, 60000, 60000, 'USD', now()),
    ('bfl', 'flux-2-klein-4b',  '*', 'megapixel', 14000,  1000,  1000, 'USD', now()),
    ('bfl', 'flux-2-klein-9b',  '*', 'megapixel', 15000,  2000,  2000, 'USD', now())
ON CONFLICT (provider, model, size) DO NOTHING;
INSERT INTO prices (provider, model, size, amount_micros, currency, updated_at) VALUES
    ('bfl', 'flux-kontext-pro', '*', 40000, 'USD', now()),
    ('bfl', 'flux-kontext-max', '*', 80000, 'USD', now())
ON CONFLICT (provider, model, size) DO NOTHING;
DELETE FROM prices WHERE provider = 'bfl' AND model = 'flux-schnell' AND size = '*' AND amount_micros = 3000;
