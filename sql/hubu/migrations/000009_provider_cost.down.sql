ALTER TABLE operations DROP COLUMN provider_cost_micros;
