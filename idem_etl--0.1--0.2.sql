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

-- ---------------------------------------------------------------------------
-- Write-audit-publish: the ledger records the expectation a run met
-- (src/audit.c); run_history shows it.
ALTER TABLE idem_etl.runs ADD COLUMN expectation text;
CREATE OR REPLACE VIEW idem_etl.run_history AS
SELECT run_id,
       operation,
       target,
       run_key,
       CASE WHEN skipped THEN 'skipped'
            WHEN corrects IS NOT NULL THEN 'corrected'
            ELSE 'applied' END AS outcome,
       batch_rows,
       inserted,
       updated,
       unchanged,
       deleted,
       partition_value,
       partition_table,
       rows_loaded,
       rows_replaced,
       finished_at - started_at AS duration,
       started_at,
       finished_at,
       run_by,
       corrects,
       fingerprint,
       expectation
  FROM idem_etl.runs
 ORDER BY run_id DESC;

-- ---------------------------------------------------------------------------
-- Live progress of the calls (src/progress.c).
CREATE FUNCTION idem_etl.progress(
    OUT pid integer, OUT database name, OUT role name, OUT operation text,
    OUT target text, OUT run_key text, OUT phase text,
    OUT rows_done bigint, OUT rows_total bigint,
    OUT phase_start timestamptz, OUT call_start timestamptz)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'idem_etl_progress'
LANGUAGE C VOLATILE STRICT;
CREATE VIEW idem_etl.progress AS SELECT * FROM idem_etl.progress();
GRANT SELECT ON idem_etl.progress TO PUBLIC;
COMMENT ON VIEW idem_etl.progress IS 'idem_etl: one row per running call, with its phase and rows';

-- ---------------------------------------------------------------------------
-- New arguments: etl_upsert_batch(update_columns, exclude_columns, expect),
-- etl_replace_partition(s)(expect, min_replaced_ratio, allow_shrink).  A
-- function's argument list cannot change in place: the 0.1 versions are
-- dropped (a view or function of yours that calls one must be dropped first)
-- and the new ones created, with the same behaviour for the old arguments.
DROP FUNCTION etl_upsert_batch(regclass, text, text[], text, text, text, text);
CREATE FUNCTION etl_upsert_batch(
    target         regclass,
    source         text,
    key_columns    text[] DEFAULT NULL,
    order_by       text   DEFAULT NULL,
    newer_column   text   DEFAULT NULL,
    delete_missing text   DEFAULT NULL,
    run_key        text   DEFAULT NULL,
    update_columns text[] DEFAULT NULL,
    exclude_columns text[] DEFAULT NULL,
    expect         text   DEFAULT NULL)
RETURNS TABLE (run_id bigint, inserted bigint, updated bigint,
               unchanged bigint, deleted bigint, skipped boolean)
AS 'MODULE_PATHNAME', 'etl_upsert_batch'
LANGUAGE C VOLATILE SECURITY INVOKER;

COMMENT ON FUNCTION etl_upsert_batch(regclass, text, text[], text, text, text, text, text[], text[], text)
    IS 'merge a batch into a table by key; rerunning it changes nothing';

DROP FUNCTION etl_replace_partition(regclass, text, text, text, interval, interval, text);
CREATE FUNCTION etl_replace_partition(
    target           regclass,
    partition_value  text,
    source           text,
    partition_column text     DEFAULT NULL,
    granularity      interval DEFAULT NULL,
    keep_replaced    interval DEFAULT NULL,
    run_key          text     DEFAULT NULL,
    expect           text     DEFAULT NULL,
    min_replaced_ratio float8 DEFAULT NULL,
    allow_shrink     boolean  DEFAULT false)
RETURNS TABLE (run_id bigint, partition_table regclass, rows_loaded bigint,
               rows_replaced bigint, skipped boolean)
AS 'MODULE_PATHNAME', 'etl_replace_partition'
LANGUAGE C VOLATILE SECURITY INVOKER;

COMMENT ON FUNCTION etl_replace_partition(regclass, text, text, text, interval, interval, text, text, float8, boolean)
    IS 'replace the partition holding one run value with the rows of a query, atomically';

DROP FUNCTION etl_replace_partitions(regclass, text, text, interval, interval, text);
CREATE FUNCTION etl_replace_partitions(
    target           regclass,
    source           text,
    partition_column text     DEFAULT NULL,
    granularity      interval DEFAULT NULL,
    keep_replaced    interval DEFAULT NULL,
    run_key          text     DEFAULT NULL,
    expect           text     DEFAULT NULL,
    min_replaced_ratio float8 DEFAULT NULL,
    allow_shrink     boolean  DEFAULT false)
RETURNS TABLE (run_id bigint, partition_table regclass, rows_loaded bigint,
               rows_replaced bigint, skipped boolean)
AS 'MODULE_PATHNAME', 'etl_replace_partitions'
LANGUAGE C VOLATILE SECURITY INVOKER;

COMMENT ON FUNCTION etl_replace_partitions(regclass, text, text, interval, interval, text, text, float8, boolean)
    IS 'replace every partition the query has rows for, atomically (dynamic overwrite)';

-- ---------------------------------------------------------------------------
-- New: etl_replace_where (Delta Lake's replaceWhere).
CREATE FUNCTION etl_replace_where(
    target             regclass,
    condition          text,
    source             text,
    keep_replaced      interval DEFAULT NULL,
    run_key            text     DEFAULT NULL,
    expect             text     DEFAULT NULL,
    min_replaced_ratio float8   DEFAULT NULL,
    allow_shrink       boolean  DEFAULT false)
RETURNS TABLE (run_id bigint, rows_loaded bigint, rows_replaced bigint, skipped boolean)
AS 'MODULE_PATHNAME', 'etl_replace_where'
LANGUAGE C VOLATILE SECURITY INVOKER;

COMMENT ON FUNCTION etl_replace_where(regclass, text, text, interval, text, text, float8, boolean)
    IS 'replace the rows satisfying a condition with the rows of a query, atomically (replaceWhere)';

-- ---------------------------------------------------------------------------
-- Replacements and restores record the partition they left in place and its
-- file: a run_key skip needs both to be still there (a partition dropped,
-- replaced by another table or rewritten since is loaded again).  Older
-- runs have neither, and are skipped as long as a partition exists.
ALTER TABLE idem_etl.runs ADD COLUMN partition_oid oid;
ALTER TABLE idem_etl.runs ADD COLUMN partition_filenode oid;
