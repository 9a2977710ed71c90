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


-- ---------------------------------------------------------------------------
-- pipelines (issue 35): scheduled loads that catch up (src/pipeline/).
-- Written by the extension only, with the owner's rights; a role sees its
-- own pipelines and their periods (superusers see all).
CREATE TABLE idem_etl.pipelines (
    pipeline_id  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name         text        NOT NULL,
    owner        name        NOT NULL,
    owner_oid    oid         NOT NULL,
    command      text        NOT NULL,
    every        interval    NOT NULL,
    start        timestamptz NOT NULL,
    lag          interval    NOT NULL,
    lookback     integer     NOT NULL CHECK (lookback BETWEEN 0 AND 1000),
    max_catchup  integer     CHECK (max_catchup >= 1),
    time_zone    text        NOT NULL,
    on_failure   text        NOT NULL CHECK (on_failure IN ('block', 'continue')),
    max_attempts integer     NOT NULL CHECK (max_attempts BETWEEN 1 AND 100),
    max_parallel integer     NOT NULL DEFAULT 1 CHECK (max_parallel BETWEEN 1 AND 64),
    -- a sequence pipeline (etl_pipeline_create_sequence): its source table,
    -- the key column that a sequence fills, that sequence, the largest
    -- range one run takes
    kind         text        NOT NULL DEFAULT 'time' CHECK (kind IN ('time', 'sequence')),
    source_oid   oid,
    key_column   name,
    sequence_oid oid,
    max_batch_size bigint    CHECK (max_batch_size >= 1),
    paused       boolean     NOT NULL DEFAULT false,
    state        text        NOT NULL DEFAULT 'ok'
                 CHECK (state IN ('ok', 'behind', 'retrying', 'failed', 'blocked')),
    job_id       bigint,
    created_at   timestamptz NOT NULL DEFAULT now(),
    UNIQUE (owner_oid, name)
);
COMMENT ON TABLE idem_etl.pipelines IS 'idem_etl pipelines (written by the extension only)';
ALTER TABLE idem_etl.pipelines ENABLE ROW LEVEL SECURITY;
CREATE POLICY pipelines_of_owner ON idem_etl.pipelines FOR SELECT
    USING (owner_oid OPERATOR(pg_catalog.=)
           (SELECT r.oid FROM pg_catalog.pg_roles r WHERE r.rolname OPERATOR(pg_catalog.=) CURRENT_USER));
REVOKE ALL ON idem_etl.pipelines FROM PUBLIC;
GRANT SELECT ON idem_etl.pipelines TO PUBLIC;

-- One row per period that ran, failed, waits for a retry or a rerun, or was
-- left out by max_catchup; a period's row commits with what its command did.
CREATE TABLE idem_etl.pipeline_periods (
    pipeline_id  bigint      NOT NULL REFERENCES idem_etl.pipelines ON DELETE CASCADE,
    period_start timestamptz NOT NULL,
    period_end   timestamptz NOT NULL,
    status       text        NOT NULL
                 CHECK (status IN ('succeeded', 'retrying', 'failed', 'queued', 'skipped')),
    attempts     integer     NOT NULL DEFAULT 0,
    last_error   text,
    retry_after  timestamptz,
    job_id       bigint,
    run_id       bigint,
    finished_at  timestamptz,
    -- a sequence pipeline's range of keys (period_start: when it first ran)
    from_id      bigint,
    to_id        bigint,
    PRIMARY KEY (pipeline_id, period_start)
);
CREATE INDEX pipeline_periods_ranges ON idem_etl.pipeline_periods (pipeline_id, from_id)
    WHERE from_id IS NOT NULL;
COMMENT ON TABLE idem_etl.pipeline_periods IS 'idem_etl: the periods of each pipeline (written by the extension only)';
ALTER TABLE idem_etl.pipeline_periods ENABLE ROW LEVEL SECURITY;
CREATE POLICY pipeline_periods_of_owner ON idem_etl.pipeline_periods FOR SELECT
    USING (EXISTS (SELECT FROM idem_etl.pipelines p
                   WHERE p.pipeline_id OPERATOR(pg_catalog.=) pipeline_periods.pipeline_id));
REVOKE ALL ON idem_etl.pipeline_periods FROM PUBLIC;
GRANT SELECT ON idem_etl.pipeline_periods TO PUBLIC;

CREATE FUNCTION idem_etl.pipelines_status(
    OUT name text, OUT owner name, OUT every interval, OUT paused boolean,
    OUT state text, OUT watermark timestamptz, OUT next_due timestamptz,
    OUT periods_behind bigint, OUT periods_skipped bigint, OUT last_error text,
    OUT job_id bigint, OUT pipeline_id bigint, OUT last_id bigint)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'idem_etl_pipelines_status'
LANGUAGE C VOLATILE STRICT;
CREATE VIEW idem_etl.pipelines_status AS SELECT * FROM idem_etl.pipelines_status();
GRANT SELECT ON idem_etl.pipelines_status TO PUBLIC;
COMMENT ON VIEW idem_etl.pipelines_status IS 'idem_etl: per pipeline, its watermark, next due time, periods behind and last error';

CREATE FUNCTION etl_pipeline_create(
    name         text,
    command      text,
    every        interval,
    start        timestamptz,
    lag          interval DEFAULT '0',
    lookback     integer  DEFAULT 0,
    max_catchup  integer  DEFAULT NULL,
    time_zone    text     DEFAULT 'UTC',
    on_failure   text     DEFAULT 'block',
    max_attempts integer  DEFAULT 5,
    max_parallel integer  DEFAULT 1)
RETURNS bigint
AS 'MODULE_PATHNAME', 'etl_pipeline_create'
LANGUAGE C VOLATILE SECURITY INVOKER;
COMMENT ON FUNCTION etl_pipeline_create(text, text, interval, timestamptz, interval, integer, integer, text, text, integer, integer)
    IS 'create a pipeline: its command runs once per period, in order, catching up after downtime';

CREATE FUNCTION etl_pipeline_create_sequence(
    name           text,
    command        text,
    source         regclass,
    key_column     name     DEFAULT NULL,
    max_batch_size bigint   DEFAULT NULL,
    every          interval DEFAULT '1 minute',
    on_failure     text     DEFAULT 'block',
    max_attempts   integer  DEFAULT 5)
RETURNS bigint
AS 'MODULE_PATHNAME', 'etl_pipeline_create_sequence'
LANGUAGE C VOLATILE SECURITY INVOKER;
COMMENT ON FUNCTION etl_pipeline_create_sequence(text, text, regclass, name, bigint, interval, text, integer)
    IS 'create a sequence pipeline: its command runs for each new range of keys of an append-only table';

CREATE FUNCTION etl_pipeline_run(name text, max_periods integer DEFAULT NULL)
RETURNS TABLE (period_start timestamptz, period_end timestamptz, kind text,
               status text, error text, run_id bigint, from_id bigint, to_id bigint)
AS 'MODULE_PATHNAME', 'etl_pipeline_run'
LANGUAGE C VOLATILE SECURITY INVOKER;
COMMENT ON FUNCTION etl_pipeline_run(text, integer)
    IS 'run the due periods of a pipeline in this session, oldest first';

CREATE FUNCTION etl_pipeline_pause(name text) RETURNS boolean
AS 'MODULE_PATHNAME', 'etl_pipeline_pause'
LANGUAGE C VOLATILE STRICT SECURITY INVOKER;
COMMENT ON FUNCTION etl_pipeline_pause(text) IS 'pause a pipeline: nothing runs until it is resumed';

CREATE FUNCTION etl_pipeline_resume(name text) RETURNS boolean
AS 'MODULE_PATHNAME', 'etl_pipeline_resume'
LANGUAGE C VOLATILE STRICT SECURITY INVOKER;
COMMENT ON FUNCTION etl_pipeline_resume(text) IS 'resume a paused pipeline: it catches up';

CREATE FUNCTION etl_pipeline_drop(name text) RETURNS boolean
AS 'MODULE_PATHNAME', 'etl_pipeline_drop'
LANGUAGE C VOLATILE STRICT SECURITY INVOKER;
COMMENT ON FUNCTION etl_pipeline_drop(text) IS 'drop a pipeline and its periods (not the data it loaded)';

CREATE FUNCTION etl_pipeline_rerun(name text, from_value timestamptz, to_value timestamptz)
RETURNS integer
AS 'MODULE_PATHNAME', 'etl_pipeline_rerun'
LANGUAGE C VOLATILE SECURITY INVOKER;
COMMENT ON FUNCTION etl_pipeline_rerun(text, timestamptz, timestamptz)
    IS 'queue the periods of a pipeline starting from from_value to to_value to run again';

-- Internal: a 128-bit hash of its arguments' binary images, which the
-- Citus upsert compares on the shards (see src/stage/compare.c).
CREATE FUNCTION idem_etl.image_hash(VARIADIC "any") RETURNS uuid
AS 'MODULE_PATHNAME', 'idem_etl_image_hash'
LANGUAGE C IMMUTABLE PARALLEL SAFE;

-- Internal: half 0 or 1 of image_hash's value as a bigint, which sum()
-- adds up: the Citus upsert compares ranges of keys by these sums (see
-- src/citus/citus_ranges.c).
CREATE FUNCTION idem_etl.image_hash_half(half integer, VARIADIC "any") RETURNS bigint
AS 'MODULE_PATHNAME', 'idem_etl_image_hash_half'
LANGUAGE C IMMUTABLE PARALLEL SAFE;

-- Internal: the batch that etl_upsert_batch is loading into a Citus table
-- in this session, for the INSERT ... SELECT that sends it to the shards
-- (see src/citus/citus_rows.c).
CREATE FUNCTION idem_etl.citus_batch(columns smallint[], hash_columns smallint[])
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'idem_etl_citus_batch'
LANGUAGE C STRICT VOLATILE;
