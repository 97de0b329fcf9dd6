-- What the provider stated an operation's execution cost (Gongbu reports it with the settle),
-- beside the amount held and the amount captured: a stated cost above the hold is captured at
-- the hold, and this column is how an operator sees the difference.
ALTER TABLE operations ADD COLUMN provider_cost_micros bigint CHECK (provider_cost_micros >= 0);
