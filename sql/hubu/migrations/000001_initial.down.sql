DROP TABLE budget_usage;
DROP TRIGGER ledger_entries_append_only ON ledger_entries;
DROP FUNCTION ledger_entries_append_only();
DROP TABLE ledger_entries;
DROP TABLE operations;
DROP TABLE prices;
DROP TABLE policies;
DROP TABLE credentials;
DROP TABLE agents;
