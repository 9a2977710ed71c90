-- idem_etl 0.2 -> 0.3: turns a 0.2 installation into exactly what a fresh
-- CREATE EXTENSION idem_etl VERSION '0.3' gives, keeping the data.  Checked
-- by test/t/130_upgrade.pl, which compares the catalogs of an updated and of
-- a fresh database (test/upgrade/objects.sql).
\echo Use "ALTER EXTENSION idem_etl UPDATE TO '0.3'" to load this file. \quit

-- ---------------------------------------------------------------------------
-- The ledger records what on_schema_change did to a target.
ALTER TABLE idem_etl.runs ADD COLUMN schema_changes text;

-- ---------------------------------------------------------------------------
-- Internal: counts the rows a one-statement phase reads (the merge of
-- etl_upsert_batch), for idem_etl.progress (src/state/progress.c).
CREATE FUNCTION idem_etl.progress_tick() RETURNS boolean
AS 'MODULE_PATHNAME', 'idem_etl_progress_tick'
LANGUAGE C VOLATILE;

-- ---------------------------------------------------------------------------
-- etl_upsert_batch: column lists as "any" (one name, a comma list or an
-- array), allow_shrink (an empty batch with delete_missing is refused
-- otherwise) and on_schema_change.  A new signature: the old function goes.
DROP FUNCTION etl_upsert_batch(regclass, text, text[], text, text, text, text, text[], text[], text);
-- key_columns, update_columns and exclude_columns are "any": a text array,
-- or one string with a name or names separated by commas (src/util/args.c).
CREATE FUNCTION etl_upsert_batch(
    target         regclass,
    source         text,
    key_columns    "any"  DEFAULT NULL,
    order_by       text   DEFAULT NULL,
    newer_column   text   DEFAULT NULL,
    delete_missing text   DEFAULT NULL,
    run_key        text   DEFAULT NULL,
    update_columns "any"  DEFAULT NULL,
    exclude_columns "any" DEFAULT NULL,
    expect         text   DEFAULT NULL,
    allow_shrink   boolean DEFAULT NULL,
    on_schema_change text DEFAULT NULL)
RETURNS TABLE (run_id bigint, inserted bigint, updated bigint,
               unchanged bigint, deleted bigint, skipped boolean)
AS 'MODULE_PATHNAME', 'etl_upsert_batch'
LANGUAGE C VOLATILE SECURITY INVOKER;

COMMENT ON FUNCTION etl_upsert_batch(regclass, text, "any", text, text, text, text, "any", "any", text, boolean, text)
    IS 'merge a batch into a table by key; rerunning it changes nothing';

-- allow_shrink defaults to NULL: idem_etl.allow_shrink then decides;
-- etl_replace_partition(s) take on_schema_change (a new signature).
DROP FUNCTION etl_replace_partition(regclass, text, text, text, interval, interval, text, text, float8, boolean);
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
    allow_shrink     boolean  DEFAULT NULL,
    on_schema_change text     DEFAULT NULL)
RETURNS TABLE (run_id bigint, partition_table regclass, rows_loaded bigint,
               rows_replaced bigint, skipped boolean)
AS 'MODULE_PATHNAME', 'etl_replace_partition'
LANGUAGE C VOLATILE SECURITY INVOKER;

DROP FUNCTION etl_replace_partitions(regclass, text, text, interval, interval, text, text, float8, boolean);
CREATE FUNCTION etl_replace_partitions(
    target           regclass,
    source           text,
    partition_column text     DEFAULT NULL,
    granularity      interval DEFAULT NULL,
    keep_replaced    interval DEFAULT NULL,
    run_key          text     DEFAULT NULL,
    expect           text     DEFAULT NULL,
    min_replaced_ratio float8 DEFAULT NULL,
    allow_shrink     boolean  DEFAULT NULL,
    on_schema_change text     DEFAULT NULL)
RETURNS TABLE (run_id bigint, partition_table regclass, rows_loaded bigint,
               rows_replaced bigint, skipped boolean)
AS 'MODULE_PATHNAME', 'etl_replace_partitions'
LANGUAGE C VOLATILE SECURITY INVOKER;

CREATE OR REPLACE FUNCTION etl_replace_where(
    target             regclass,
    condition          text,
    source             text,
    keep_replaced      interval DEFAULT NULL,
    run_key            text     DEFAULT NULL,
    expect             text     DEFAULT NULL,
    min_replaced_ratio float8   DEFAULT NULL,
    allow_shrink       boolean  DEFAULT NULL)
RETURNS TABLE (run_id bigint, rows_loaded bigint, rows_replaced bigint, skipped boolean)
AS 'MODULE_PATHNAME', 'etl_replace_where'
LANGUAGE C VOLATILE SECURITY INVOKER;

COMMENT ON FUNCTION etl_replace_partition(regclass, text, text, text, interval, interval, text, text, float8, boolean, text)
    IS 'replace the partition holding one run value with the rows of a query, atomically';

COMMENT ON FUNCTION etl_replace_partitions(regclass, text, text, interval, interval, text, text, float8, boolean, text)
    IS 'replace every partition the query has rows for, atomically (dynamic overwrite)';

-- job notices
-- The NOTICE, INFO and WARNING messages of the job's latest attempt that
-- raised any, one a line, the last 20 (a job worker has no client, and the
-- server log takes WARNING and above only by default): worker_job.c.
ALTER TABLE idem_etl.jobs ADD COLUMN notices text;

-- etl_snapshot (SCD type 2)
CREATE FUNCTION etl_snapshot(
    target            regclass,
    source            text,
    key_columns       "any",
    updated_at        text        DEFAULT NULL,
    valid_at          timestamptz DEFAULT NULL,
    check_columns     "any"       DEFAULT NULL,
    exclude_columns   "any"       DEFAULT NULL,
    hard_deletes      text        DEFAULT 'ignore',
    allow_shrink      boolean     DEFAULT NULL,
    valid_from_column text        DEFAULT 'valid_from',
    valid_to_column   text        DEFAULT 'valid_to',
    is_deleted_column text        DEFAULT NULL,
    current_valid_to  text        DEFAULT NULL,
    run_key           text        DEFAULT NULL,
    expect            text        DEFAULT NULL,
    on_schema_change  text        DEFAULT NULL)
RETURNS TABLE (run_id bigint, inserted bigint, closed bigint, corrected bigint,
               unchanged bigint, deleted bigint, late bigint, skipped boolean)
AS 'MODULE_PATHNAME', 'etl_snapshot'
LANGUAGE C VOLATILE SECURITY INVOKER;

COMMENT ON FUNCTION etl_snapshot(regclass, text, "any", text, timestamptz, "any", "any", text, boolean, text, text, text, text, text, text, text)
    IS 'keep the history of a source as versions (SCD type 2); rerunning it changes nothing';

CREATE FUNCTION etl_snapshot_ddl(
    target            regclass,
    key_columns       "any",
    valid_from_column text DEFAULT 'valid_from',
    valid_to_column   text DEFAULT 'valid_to',
    current_valid_to  text DEFAULT NULL)
RETURNS text
AS 'MODULE_PATHNAME', 'etl_snapshot_ddl'
LANGUAGE C STABLE SECURITY INVOKER;

COMMENT ON FUNCTION etl_snapshot_ddl(regclass, "any", text, text, text)
    IS 'the indexes and temporal key recommended for an etl_snapshot target, as text';
