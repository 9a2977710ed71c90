--
-- replace_ledger: point 11 of etl_replace_partition (the ledger).
-- Every committed call adds rows to idem_etl.runs: operation
-- 'replace_partition' (one row per partition replaced), the value and the
-- partition's name, rows_loaded, rows_replaced, fingerprint, skipped, the
-- times and the role; a restore adds a 'restore_partition' row.  Calls that
-- fail or are rolled back leave nothing.  idem_etl.run_history shows them.
--
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS idem_etl CASCADE;
CREATE EXTENSION idem_etl;
DROP SCHEMA IF EXISTS rledger CASCADE;
\set roles {idem_test_rledger_owner}
\i sql/include/drop_roles.sql
RESET client_min_messages;

CREATE ROLE idem_test_rledger_owner;
CREATE SCHEMA rledger AUTHORIZATION idem_test_rledger_owner;

-- the ledger has (at least) these columns
SELECT r.column_name, c.data_type
  FROM unnest(ARRAY['run_id', 'operation', 'target', 'run_key', 'partition_value', 'partition_table',
                    'rows_loaded', 'rows_replaced', 'fingerprint', 'skipped', 'corrects',
                    'started_at', 'finished_at', 'run_by']) WITH ORDINALITY AS r(column_name, n)
  LEFT JOIN information_schema.columns c
         ON c.table_schema = 'idem_etl' AND c.table_name = 'runs' AND c.column_name = r.column_name
 ORDER BY r.n;
SELECT r.column_name, c.column_name IS NOT NULL AS present
  FROM unnest(ARRAY['run_id', 'operation', 'target', 'run_key', 'outcome', 'partition_value',
                    'partition_table', 'rows_loaded', 'rows_replaced', 'duration', 'run_by'])
       WITH ORDINALITY AS r(column_name, n)
  LEFT JOIN information_schema.columns c
         ON c.table_schema = 'idem_etl' AND c.table_name = 'run_history' AND c.column_name = r.column_name
 ORDER BY r.n;

SET ROLE idem_test_rledger_owner;
CREATE TABLE rledger.t (d date NOT NULL, id int NOT NULL, v text, PRIMARY KEY (d, id)) PARTITION BY RANGE (d);
CREATE TABLE rledger.t_20261127 PARTITION OF rledger.t FOR VALUES FROM ('2026-11-27') TO ('2026-11-28');
CREATE TABLE rledger.t_20261128 PARTITION OF rledger.t FOR VALUES FROM ('2026-11-28') TO ('2026-11-29');
INSERT INTO rledger.t VALUES ('2026-11-28', 1, 'old'), ('2026-11-28', 2, 'old');

-- results of every call
CREATE TABLE rledger.calls (step text PRIMARY KEY, run_id bigint, partition_table regclass,
                            rows_loaded bigint, rows_replaced bigint, skipped boolean);
CREATE FUNCTION rledger.call(step text, day text, source text, run_key text DEFAULT NULL,
                             keep interval DEFAULT NULL)
RETURNS TABLE (rows_loaded bigint, rows_replaced bigint, skipped boolean) LANGUAGE sql AS $$
    INSERT INTO rledger.calls
    SELECT step, r.run_id, r.partition_table, r.rows_loaded, r.rows_replaced, r.skipped
      FROM etl_replace_partition('rledger.t', day, source, keep_replaced => keep, run_key => run_key) r
    RETURNING rows_loaded, rows_replaced, skipped;
$$;
CREATE VIEW rledger.rows AS
SELECT c.step, r.operation, r.target, r.run_key, r.partition_value, r.partition_table,
       r.rows_loaded, r.rows_replaced, r.skipped, r.corrects IS NOT NULL AS corrects,
       length(r.fingerprint) > 0 AS has_fingerprint,
       r.run_by = current_user AS run_by_me,
       r.started_at <= r.finished_at AND r.finished_at <= clock_timestamp() AS times_ok
  FROM rledger.calls c JOIN idem_etl.runs r USING (run_id);
RESET ROLE;

SET ROLE idem_test_rledger_owner;
-- a plain call: one row, its run_id returned; no fingerprint (has_fingerprint
-- f): without run_key nothing compares it
SELECT count(*) AS runs_before FROM idem_etl.runs \gset
SELECT * FROM rledger.call('plain', '2026-11-28',
    $$SELECT '2026-11-28'::date AS d, g AS id, 'new' AS v FROM generate_series(1, 3) g$$);
SELECT count(*) - :runs_before AS new_runs FROM idem_etl.runs;
SELECT * FROM rledger.rows WHERE step = 'plain';
-- the returned partition_table is the one named in the ledger
SELECT c.partition_table::text = r.partition_table AS same_partition
  FROM rledger.calls c JOIN idem_etl.runs r USING (run_id) WHERE c.step = 'plain';
-- a created partition is recorded with its name
SELECT * FROM rledger.call('created', '2026-11-29',
    $$SELECT '2026-11-29'::date AS d, 1 AS id, 'new' AS v$$);
SELECT r.partition_table = c.partition_table::text AS created_name_recorded,
       r.partition_table <> 'rledger.t' AS names_the_partition
  FROM rledger.calls c JOIN idem_etl.runs r USING (run_id) WHERE c.step = 'created';
-- with run_key: applied, skipped, corrected
SELECT * FROM rledger.call('keyed', '2026-11-28',
    $$SELECT '2026-11-28'::date AS d, 1 AS id, 'keyed' AS v$$, run_key => 'k');
SELECT * FROM rledger.call('keyed again', '2026-11-28',
    $$SELECT '2026-11-28'::date AS d, 1 AS id, 'keyed' AS v$$, run_key => 'k');
SELECT * FROM rledger.call('keyed corrected', '2026-11-28',
    $$SELECT '2026-11-28'::date AS d, 1 AS id, 'keyed, corrected' AS v$$, run_key => 'k');
SELECT step, run_key, rows_loaded, rows_replaced, skipped, corrects, has_fingerprint, run_by_me, times_ok
  FROM rledger.rows WHERE step LIKE 'keyed%' ORDER BY step;

-- a call that fails leaves no row
SELECT count(*) AS runs_before FROM idem_etl.runs \gset
DO $$
BEGIN
    PERFORM etl_replace_partition('rledger.t', '2026-11-28',
        $s$SELECT '2026-11-28'::date AS d, 1 AS id, 'x' AS v UNION ALL SELECT '2026-11-28', 1, 'y'$s$);
EXCEPTION WHEN unique_violation THEN
    RAISE NOTICE 'failed as expected';
END $$;
SELECT count(*) - :runs_before AS new_runs FROM idem_etl.runs;
-- a call rolled back by the caller leaves no row (and no change)
BEGIN;
SELECT rows_loaded FROM etl_replace_partition('rledger.t', '2026-11-28',
    $$SELECT '2026-11-28'::date AS d, 7 AS id, 'rolled back' AS v$$);
ROLLBACK;
SELECT count(*) - :runs_before AS new_runs FROM idem_etl.runs;
SELECT * FROM rledger.t ORDER BY d, id;

-- a restore is recorded as restore_partition
SELECT * FROM rledger.call('kept', '2026-11-27',
    $$SELECT '2026-11-27'::date AS d, 1 AS id, 'kept' AS v$$, keep => '1 day');
SELECT etl_restore_partition('rledger.t', '2026-11-27') AS restored \gset
SELECT operation, target, partition_value, partition_table = :'restored' AS names_partition,
       run_by = current_user AS run_by_me, started_at <= finished_at AS times_ok
  FROM idem_etl.runs WHERE run_id = (SELECT max(run_id) FROM idem_etl.runs);

-- etl_replace_partitions: one row per partition, each with its own value
SELECT max(run_id) AS last_run FROM idem_etl.runs \gset
SELECT count(*) FROM etl_replace_partitions('rledger.t',
    $$SELECT * FROM (VALUES ('2026-11-27'::date, 1, 'many'), ('2026-11-28', 1, 'many'),
                            ('2026-11-28', 2, 'many')) s(d, id, v)$$);
SELECT operation, partition_value, partition_table, rows_loaded, rows_replaced, skipped,
       fingerprint AS no_fingerprint
  FROM idem_etl.runs WHERE run_id > :last_run ORDER BY partition_table;
-- with run_key, each partition's own fingerprint: that of a call for it alone
SELECT max(run_id) AS last_run FROM idem_etl.runs \gset
SELECT count(*) FROM etl_replace_partitions('rledger.t',
    $$SELECT * FROM (VALUES ('2026-11-27'::date, 1, 'many'), ('2026-11-28', 1, 'many'),
                            ('2026-11-28', 2, 'many')) s(d, id, v)$$, run_key => 'many');
SELECT partition_value, fingerprint ~ '^[0-9a-f]{32}$' AS has_fingerprint
  FROM idem_etl.runs WHERE run_id > :last_run ORDER BY partition_table;
SELECT run_id AS one_run FROM etl_replace_partition('rledger.t', '2026-11-27',
    $$SELECT '2026-11-27'::date AS d, 1 AS id, 'many' AS v$$, run_key => 'one') \gset
SELECT (SELECT fingerprint FROM idem_etl.runs WHERE run_id = :one_run)
       = (SELECT fingerprint FROM idem_etl.runs WHERE run_key = 'many' AND partition_value = '2026-11-27')
       AS same_as_in_many;

-- run_history: newest first, with the outcome
SELECT operation, target, run_key, outcome, partition_value, partition_table, rows_loaded, rows_replaced,
       duration >= interval '0' AS duration_ok, run_by = current_user AS run_by_me
  FROM idem_etl.run_history;
RESET ROLE;

SET client_min_messages = warning;
DROP SCHEMA rledger CASCADE;
DROP EXTENSION idem_etl;
RESET client_min_messages;
DROP ROLE idem_test_rledger_owner;
