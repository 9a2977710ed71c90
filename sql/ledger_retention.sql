--
-- ledger_retention: the ledger is bounded.  Runs older than
-- idem_etl.run_retention (default 90 days) are deleted by the janitor and
-- by etl_cleanup(), except those a future skip or correction depends on:
-- the latest applied run of every (target, operation, run_key, partition),
-- and the latest change of every partition (a replacement, a restore, or
-- an upsert that wrote into the target).  A skip still works after
-- retention removed everything else.
--
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS idem_etl CASCADE;
CREATE EXTENSION idem_etl;
DROP SCHEMA IF EXISTS ret CASCADE;
RESET client_min_messages;
CREATE SCHEMA ret;
SHOW idem_etl.run_retention;

CREATE TABLE ret.t (id int PRIMARY KEY, v text);
CREATE TABLE ret.days (d date NOT NULL, v text) PARTITION BY RANGE (d);
CREATE TABLE ret.days_1 PARTITION OF ret.days FOR VALUES FROM ('2026-11-28') TO ('2026-11-29');

-- upserts: an applied run, two skips, and a run of another run_key
SELECT skipped FROM etl_upsert_batch('ret.t', 'SELECT 1 AS id, ''a'' AS v', run_key => 'day1');
SELECT skipped FROM etl_upsert_batch('ret.t', 'SELECT 1 AS id, ''a'' AS v', run_key => 'day1');
SELECT skipped FROM etl_upsert_batch('ret.t', 'SELECT 1 AS id, ''a'' AS v', run_key => 'day1');
SELECT skipped FROM etl_upsert_batch('ret.t', 'SELECT 2 AS id, ''b'' AS v', run_key => 'day2');
-- replacements: run_key r1 loads the day, then run_key r2 replaces it
SELECT skipped FROM etl_replace_partition('ret.days', '2026-11-28', 'SELECT ''2026-11-28''::date AS d, ''r1'' AS v', run_key => 'r1');
SELECT skipped FROM etl_replace_partition('ret.days', '2026-11-28', 'SELECT ''2026-11-28''::date AS d, ''r1'' AS v', run_key => 'r1');
SELECT skipped FROM etl_replace_partition('ret.days', '2026-11-28', 'SELECT ''2026-11-28''::date AS d, ''r2'' AS v', run_key => 'r2');

-- a table loaded with run_key, then dropped: its run decides nothing any
-- more (it was kept for ever, so that a new table given its OID after the
-- OID counter wrapped around would have its first load skipped)
CREATE TABLE ret.gone (id int PRIMARY KEY, v text);
SELECT skipped FROM etl_upsert_batch('ret.gone', 'SELECT 1 AS id, ''a'' AS v', run_key => 'day1');
DROP TABLE ret.gone;

-- all of it 100 days old (as the ledger's owner); one recent run
UPDATE idem_etl.runs SET started_at = started_at - interval '100 days',
                         finished_at = finished_at - interval '100 days';
SELECT skipped FROM etl_upsert_batch('ret.t', 'SELECT 3 AS id, ''c'' AS v');
SELECT run_id, operation, run_key, skipped FROM idem_etl.runs ORDER BY run_id;
SELECT etl_cleanup() AS dropped_partitions;
-- kept: the applied upserts of day1 and day2 (day1's skips are gone), both
-- replacements (each the latest of its run_key; r2 the latest change of
-- the partition), the recent run; not the dropped table's run
SELECT run_id, operation, run_key, skipped FROM idem_etl.runs ORDER BY run_id;

-- the skip of day1 still works
SELECT skipped FROM etl_upsert_batch('ret.t', 'SELECT 1 AS id, ''a'' AS v', run_key => 'day1');
-- and r1 is not skipped: r2 changed the partition since (a correction)
SELECT skipped, rows_loaded FROM etl_replace_partition('ret.days', '2026-11-28', 'SELECT ''2026-11-28''::date AS d, ''r1'' AS v', run_key => 'r1');
SELECT v FROM ret.days;

-- run_retention is a server setting: no session can shorten it
SET idem_etl.run_retention = '1s';

SET client_min_messages = warning;
DROP SCHEMA ret CASCADE;
DROP EXTENSION idem_etl;
