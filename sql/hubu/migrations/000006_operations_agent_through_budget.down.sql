ALTER TABLE operations ADD CONSTRAINT operations_agent_id_fkey FOREIGN KEY (agent_id) REFERENCES agents (id);
