ALTER TABLE executions DROP COLUMN provider_cost_micros;
