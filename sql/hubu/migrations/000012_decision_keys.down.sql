DROP TABLE decision_keys;
