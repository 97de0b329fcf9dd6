-- How many times Hubu has handed an operation's decision to the executor. Each hand-off is
-- counted, and the count committed, before the executor is called; a hand-off that provably
-- never left Hubu (the connection to the executor was never made) is taken back. The executor
-- reads the count: only the decision's one and only hand-off is a first submission, the one
-- case in which a provider's refusal proves that nothing was charged.
ALTER TABLE operations ADD COLUMN dispatch_attempts integer NOT NULL DEFAULT 0 CHECK (dispatch_attempts >= 0);
