-- An operation's budget use is kept on the row of the agent's day it was authorized
-- (operations.budget_day); every ledger entry that moves the budget updates that row, in the
-- entry's own statement. The reference makes the row's existence part of the schema, so that
-- update can never find no row and leave the budget behind its ledger: a new authorization
-- creates the row in the statement that records the operation, and no row an operation names
-- can be deleted. Every version of Hubu created the row before the operation; the insert below
-- only makes the upgrade safe on a database that someone edited by hand.
INSERT INTO budget_usage (agent_id, day, used_micros)
SELECT DISTINCT agent_id, budget_day, 0 FROM operations
ON CONFLICT (agent_id, day) DO NOTHING;

ALTER TABLE operations ADD CONSTRAINT operations_budget_usage_fkey
    FOREIGN KEY (agent_id, budget_day) REFERENCES budget_usage (agent_id, day);
