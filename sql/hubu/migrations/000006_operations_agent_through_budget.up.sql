-- An operation's agent must exist, and the reference that says so is now the one to its budget
-- row (migration 4): operations (agent_id, budget_day) references budget_usage (agent_id, day),
-- and budget_usage (agent_id) references agents (id), all columns NOT NULL, neither reference
-- cascading. So no operation can name a missing agent, and no agent with operations can be
-- deleted, without operations_agent_id_fkey, whose check was one more query, and one more row
-- lock (on the agent, WAL-logged), in every authorization.
ALTER TABLE operations DROP CONSTRAINT operations_agent_id_fkey;
