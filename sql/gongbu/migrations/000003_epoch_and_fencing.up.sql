-- The evidence behind "never submitted" and the fence on every outcome write.
--
-- database_epoch holds one row: since when this database has kept an unbroken record of every
-- execution it accepted. Gongbu records an execution before it calls a provider, so a decision
-- it has no row for was never submitted by it, provided the decision was issued after the
-- epoch began and Hubu never saw an executor accept it. A database restored from a backup, or
-- made anew, may have lost rows: `gongbu renew-epoch` starts a new epoch after a restore, and a
-- new database starts its own, so decisions issued before either are treated as possibly
-- submitted.
CREATE TABLE database_epoch (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    id        uuid NOT NULL,
    began_at  timestamptz NOT NULL
);
INSERT INTO database_epoch (id, began_at) VALUES (gen_random_uuid(), clock_timestamp());

-- lease_generation grows with every claim of an execution; each write of its outcome names the
-- generation it holds, so a worker that lost its lease can no longer write.
ALTER TABLE executions ADD COLUMN lease_generation bigint NOT NULL DEFAULT 0;
