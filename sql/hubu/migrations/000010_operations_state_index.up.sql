-- Every operation's state, for the state gauges (CountOperationsByState): their count by state
-- reads this small index alone (an index-only scan) where it read the whole table. Built
-- without blocking writes, while the previous release serves: the statement must be alone in
-- its migration (a concurrent build cannot run inside a transaction).
CREATE INDEX CONCURRENTLY IF NOT EXISTS operations_state ON operations (state);
