--
-- read_only: every function that writes refuses a read-only transaction
-- (BEGIN READ ONLY, default_transaction_read_only, a hot standby) with
-- 25006 before doing anything, as PostgreSQL's own commands do.  On a
-- standby, the partition functions failed with 55000 and a hint about lock
-- modes, and an upsert with run_key printed "skipping ... Nothing was
-- written" before failing at the ledger.
--
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS idem_etl CASCADE;
CREATE EXTENSION idem_etl;
DROP SCHEMA IF EXISTS ro CASCADE;
RESET client_min_messages;
CREATE SCHEMA ro;
\set schema ro
\i sql/include/err.sql

CREATE TABLE ro.t (id int PRIMARY KEY, v text);
CREATE TABLE ro.p (d date NOT NULL, id int NOT NULL) PARTITION BY RANGE (d);
CREATE TABLE ro.p_20261128 PARTITION OF ro.p FOR VALUES FROM ('2026-11-28') TO ('2026-11-29');
SELECT inserted FROM etl_upsert_batch('ro.t', 'SELECT 1 AS id, ''a'' AS v', run_key => 'k');

BEGIN READ ONLY;
SELECT * FROM ro.err($$SELECT * FROM etl_upsert_batch('ro.t', 'SELECT 1 AS id, ''a'' AS v', run_key => 'k')$$);
SELECT * FROM ro.err($$SELECT * FROM etl_replace_partition('ro.p', '2026-11-28', 'SELECT ''2026-11-28''::date AS d, 1 AS id')$$);
SELECT * FROM ro.err($$SELECT * FROM etl_replace_partitions('ro.p', 'SELECT ''2026-11-28''::date AS d, 1 AS id')$$);
SELECT * FROM ro.err($$SELECT * FROM etl_replace_where('ro.t', 'id = 1', 'SELECT 1 AS id, ''a'' AS v')$$);
SELECT * FROM ro.err($$SELECT etl_restore_partition('ro.p', '2026-11-28')$$);
SELECT * FROM ro.err($$SELECT etl_cleanup()$$);
SELECT * FROM ro.err($$SELECT etl_submit('SELECT 1')$$);
SELECT * FROM ro.err($$SELECT etl_backfill('SELECT {run_date}', '2026-11-01', '2026-11-02')$$);
SELECT * FROM ro.err($$SELECT etl_cancel(1)$$);
-- what only reads works
SELECT count(*) FROM idem_etl.run_history;
SELECT count(*) FROM idem_etl.progress;
COMMIT;

SET default_transaction_read_only = on;
SELECT * FROM ro.err($$SELECT * FROM etl_upsert_batch('ro.t', 'SELECT 2 AS id, ''b'' AS v')$$);
RESET default_transaction_read_only;
SELECT count(*) AS runs FROM idem_etl.runs;

SET client_min_messages = warning;
DROP SCHEMA ro CASCADE;
