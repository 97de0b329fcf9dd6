-- Signs every console session out: replicas of the previous version keep them in memory.
DROP TABLE console_sessions;
