-- Run once by the postgres image when its data volume is new (docker-entrypoint-initdb.d):
-- Hubu and Gongbu keep their data in databases of their own. Their migrations (the
-- hubu-migrate and gongbu-migrate jobs of compose.yaml) make the tables.
CREATE DATABASE hubu;
CREATE DATABASE gongbu;
