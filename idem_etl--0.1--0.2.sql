-- idem_etl 0.1 -> 0.2: turns a 0.1 installation into exactly what a fresh
-- CREATE EXTENSION idem_etl VERSION '0.2' gives, keeping the data (ledger
-- rows, queued and finished jobs, kept partitions).  Checked by
-- test/t/130_upgrade.pl, which compares the catalogs of an updated and of a
-- fresh database (test/upgrade/objects.sql).
\echo Use "ALTER EXTENSION idem_etl UPDATE TO '0.2'" to load this file. \quit

-- ---------------------------------------------------------------------------
-- The ledger: replace and restore runs record the partition's bound, and
-- run_key skips of etl_replace_partition are keyed by it (src/ledger.c,
-- ledger_partition_prior).
ALTER TABLE idem_etl.runs ADD COLUMN partition_bound text;
CREATE INDEX runs_partition ON idem_etl.runs (target_oid, partition_bound, run_id);

-- Old replace and restore runs get the bound of their partition, so that an
-- identical rerun with the same run_key is still skipped after the update.
-- The bound is the text 0.2 compares: pg_get_expr() of the partition's
-- relpartbound printed with DateStyle ISO, IntervalStyle postgres and, for
-- timestamptz keys, in UTC (src/partmap.c, existing_partition).
--  1. the partition now named as the run's partition_table, when it is still
--     a partition of the run's target (a replacement keeps the partition's
--     name, a restore swaps the kept table back under it);
--  2. otherwise, for a replacement that kept the partition it replaced, the
--     bound recorded with the kept table (the same partition's bound).
-- Runs left without a bound: replacements of plain tables (0.2 keys them by
-- an expression on the partition column, which 0.1 did not record) and
-- partitions dropped or detached by hand since.  Their first rerun after the
-- update replaces the rows again (the same rows: nothing changes but the
-- ledger) and records the bound; later reruns are skipped as before.
DO $upgrade$
DECLARE
    old_tz text := pg_catalog.current_setting('TimeZone');
    old_ds text := pg_catalog.current_setting('DateStyle');
    old_is text := pg_catalog.current_setting('IntervalStyle');
BEGIN
    PERFORM pg_catalog.set_config('TimeZone', 'UTC', true);
    PERFORM pg_catalog.set_config('DateStyle', 'ISO', true);
    PERFORM pg_catalog.set_config('IntervalStyle', 'postgres', true);

    UPDATE idem_etl.runs r
       SET partition_bound = pg_catalog.pg_get_expr(c.relpartbound, c.oid)
      FROM pg_catalog.pg_class c, pg_catalog.pg_inherits i
     WHERE r.operation OPERATOR(pg_catalog.=) ANY (ARRAY['replace_partition', 'restore_partition'])
       AND r.partition_table IS NOT NULL
       AND c.oid OPERATOR(pg_catalog.=) pg_catalog.to_regclass(r.partition_table)
       AND c.relispartition
       AND i.inhrelid OPERATOR(pg_catalog.=) c.oid
       AND i.inhparent OPERATOR(pg_catalog.=) r.target_oid;

    UPDATE idem_etl.runs r
       SET partition_bound = k.bound
      FROM idem_etl.replaced_partitions k
     WHERE r.partition_bound IS NULL
       AND r.operation OPERATOR(pg_catalog.=) 'replace_partition'
       AND k.run_id OPERATOR(pg_catalog.=) r.run_id;

    PERFORM pg_catalog.set_config('TimeZone', old_tz, true);
    PERFORM pg_catalog.set_config('DateStyle', old_ds, true);
    PERFORM pg_catalog.set_config('IntervalStyle', old_is, true);
END
$upgrade$;

-- ---------------------------------------------------------------------------
-- The job queue: job names are per submitting role; max_attempts at most
-- 100 (etl_submit refuses more).  Jobs of 0.1 queued with more attempts keep
-- 100 of them.
DROP INDEX idem_etl.jobs_pending_name;
-- Job names are per submitting role: another role's job of the same name
-- is neither returned to you nor in your way.
CREATE UNIQUE INDEX jobs_pending_name ON idem_etl.jobs (submitted_by_oid, job_name)
    WHERE status IN ('queued', 'running');

UPDATE idem_etl.jobs SET max_attempts = 100 WHERE max_attempts > 100;
ALTER TABLE idem_etl.jobs DROP CONSTRAINT jobs_max_attempts_check;
ALTER TABLE idem_etl.jobs ADD CONSTRAINT jobs_max_attempts_check
    CHECK (max_attempts BETWEEN 1 AND 100);

-- ---------------------------------------------------------------------------
-- The background worker's view of each database's work (src/worker_status.c).
CREATE FUNCTION idem_etl.worker_status(
    OUT database name, OUT queued integer, OUT running integer,
    OUT next_due timestamptz, OUT oldest_due_wait interval,
    OUT next_housekeeping timestamptz, OUT waiting_reason text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'idem_etl_worker_status'
LANGUAGE C VOLATILE STRICT;
CREATE VIEW idem_etl.worker_status AS SELECT * FROM idem_etl.worker_status();
GRANT SELECT ON idem_etl.worker_status TO PUBLIC;
COMMENT ON VIEW idem_etl.worker_status IS 'idem_etl: per database, queued and running jobs and why due jobs wait';
