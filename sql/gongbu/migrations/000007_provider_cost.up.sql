-- What the provider stated a job costs when it took it (BFL's submit answer's cost), in the
-- decision's currency's micro-units: what Hubu captures, never above the decision's amount.
-- NULL where the provider states none (then the decision's amount is captured).
ALTER TABLE executions ADD COLUMN provider_cost_micros bigint CHECK (provider_cost_micros >= 0);
