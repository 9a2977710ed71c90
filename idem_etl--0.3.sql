-- idem_etl 0.3: the ledger, etl_upsert_batch, partition replacement and the job queue
\echo Use "CREATE EXTENSION idem_etl" to load this file. \quit

-- The extension's own state lives in the schema idem_etl; the user-facing
-- functions go to the schema given to CREATE EXTENSION.
CREATE SCHEMA idem_etl;
GRANT USAGE ON SCHEMA idem_etl TO PUBLIC;

-- The ledger: one row per committed call.  Only the extension's C code writes
-- it, with the rights of this table's owner; everybody may read it.
CREATE TABLE idem_etl.runs (
    run_id       bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    operation    text        NOT NULL,
    target       text        NOT NULL,
    target_oid   oid         NOT NULL,
    run_key      text,
    fingerprint  text        NOT NULL,
    batch_rows   bigint      NOT NULL,
    inserted     bigint      NOT NULL DEFAULT 0,
    updated      bigint      NOT NULL DEFAULT 0,
    unchanged    bigint      NOT NULL DEFAULT 0,
    deleted      bigint      NOT NULL DEFAULT 0,
    partition_value text,
    partition_table text,
    rows_loaded  bigint,
    rows_replaced bigint,
    skipped      boolean     NOT NULL DEFAULT false,
    corrects     bigint,
    started_at   timestamptz NOT NULL,
    finished_at  timestamptz NOT NULL,
    run_by       name        NOT NULL,
    -- replace and restore runs: the partition's bound (skips are keyed by it)
    partition_bound text,
    -- the expect that the batch met (write-audit-publish), and
    -- min_replaced_ratio when it was checked
    expectation  text,
    -- replacements and restores of a partition: the partition the run left
    -- in place, and its file; a run_key skip needs both to be still there
    partition_oid      oid,
    partition_filenode oid,
    -- what on_schema_change did to the target (columns added, widened)
    schema_changes     text
);
CREATE INDEX runs_lookup ON idem_etl.runs (target_oid, operation, run_key, partition_value, run_id);
CREATE INDEX runs_partition ON idem_etl.runs (target_oid, partition_bound, run_id);
COMMENT ON TABLE idem_etl.runs IS 'idem_etl ledger: one row per committed call (written by the extension only)';

REVOKE ALL ON idem_etl.runs FROM PUBLIC;
GRANT SELECT ON idem_etl.runs TO PUBLIC;

CREATE VIEW idem_etl.run_history AS
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
GRANT SELECT ON idem_etl.run_history TO PUBLIC;

-- Replaced partitions kept (detached, under a generated name in the
-- target's schema) so that etl_restore_partition can swap them back until
-- keep_until; etl_cleanup drops them after that.  Written by the extension
-- only, like the ledger.
CREATE TABLE idem_etl.replaced_partitions (
    kept_id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    target          text        NOT NULL,
    target_oid      oid         NOT NULL,
    partition_value text        NOT NULL,
    partition_name  text        NOT NULL,
    bound           text        NOT NULL,
    check_sql       text        NOT NULL,
    kept_table      text        NOT NULL,
    kept_oid        oid         NOT NULL,
    run_id          bigint,
    replaced_at     timestamptz NOT NULL,
    keep_until      timestamptz NOT NULL
);
CREATE INDEX replaced_partitions_lookup
    ON idem_etl.replaced_partitions (target_oid, partition_value, kept_id);
COMMENT ON TABLE idem_etl.replaced_partitions IS 'idem_etl: replaced partitions kept for etl_restore_partition (written by the extension only)';
REVOKE ALL ON idem_etl.replaced_partitions FROM PUBLIC;
GRANT SELECT ON idem_etl.replaced_partitions TO PUBLIC;

-- The job queue of the background worker.  Written by the extension only;
-- each role sees its own jobs (members of the submitting role and
-- superusers see them all).
CREATE TABLE idem_etl.jobs (
    job_id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_name         text,
    command          text        NOT NULL,
    status           text        NOT NULL DEFAULT 'queued'
                     CHECK (status IN ('queued', 'running', 'succeeded', 'failed', 'cancelled')),
    attempts         integer     NOT NULL DEFAULT 0,
    max_attempts     integer     NOT NULL CHECK (max_attempts BETWEEN 1 AND 100),
    last_error       text,
    submitted_by     name        NOT NULL,
    submitted_by_oid oid         NOT NULL,
    submitted_at     timestamptz NOT NULL DEFAULT now(),
    run_after        timestamptz NOT NULL,
    started_at       timestamptz,
    finished_at      timestamptz,
    worker_pid       integer
);
-- job notices
-- The NOTICE, INFO and WARNING messages of the job's latest attempt that
-- raised any, one a line, the last 20 (a job worker has no client, and the
-- server log takes WARNING and above only by default): worker_job.c.
ALTER TABLE idem_etl.jobs ADD COLUMN notices text;
-- Job names are per submitting role: another role's job of the same name
-- is neither returned to you nor in your way.
CREATE UNIQUE INDEX jobs_pending_name ON idem_etl.jobs (submitted_by_oid, job_name)
    WHERE status IN ('queued', 'running');
CREATE INDEX jobs_due ON idem_etl.jobs (run_after, job_id) WHERE status = 'queued';
COMMENT ON TABLE idem_etl.jobs IS 'idem_etl job queue (written by the extension only)';
ALTER TABLE idem_etl.jobs ENABLE ROW LEVEL SECURITY;
CREATE POLICY jobs_of_member ON idem_etl.jobs FOR SELECT
    USING (pg_catalog.pg_has_role(submitted_by_oid, 'MEMBER'));
REVOKE ALL ON idem_etl.jobs FROM PUBLIC;
GRANT SELECT ON idem_etl.jobs TO PUBLIC;

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

-- Live progress of idem_etl's calls (src/progress.c), like pg_stat_progress_copy.
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

-- Internal: counts the rows a one-statement phase reads (the merge of
-- etl_upsert_batch), for idem_etl.progress (src/state/progress.c).
CREATE FUNCTION idem_etl.progress_tick() RETURNS boolean
AS 'MODULE_PATHNAME', 'idem_etl_progress_tick'
LANGUAGE C VOLATILE;

-- Internal: the change test of the merge (see src/compare.c).
CREATE FUNCTION idem_etl.same_image(VARIADIC "any") RETURNS boolean
AS 'MODULE_PATHNAME', 'idem_etl_same_image'
LANGUAGE C IMMUTABLE PARALLEL SAFE;

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

COMMENT ON FUNCTION etl_replace_partition(regclass, text, text, text, interval, interval, text, text, float8, boolean, text)
    IS 'replace the partition holding one run value with the rows of a query, atomically';

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

COMMENT ON FUNCTION etl_replace_partitions(regclass, text, text, interval, interval, text, text, float8, boolean, text)
    IS 'replace every partition the query has rows for, atomically (dynamic overwrite)';

CREATE FUNCTION etl_replace_where(
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

COMMENT ON FUNCTION etl_replace_where(regclass, text, text, interval, text, text, float8, boolean)
    IS 'replace the rows satisfying a condition with the rows of a query, atomically (replaceWhere)';

CREATE FUNCTION etl_restore_partition(target regclass, partition_value text)
RETURNS regclass
AS 'MODULE_PATHNAME', 'etl_restore_partition'
LANGUAGE C VOLATILE STRICT SECURITY INVOKER;

COMMENT ON FUNCTION etl_restore_partition(regclass, text)
    IS 'swap the most recently replaced version of a partition back in';

CREATE FUNCTION etl_cleanup() RETURNS integer
AS 'MODULE_PATHNAME', 'etl_cleanup'
LANGUAGE C VOLATILE SECURITY INVOKER;

COMMENT ON FUNCTION etl_cleanup()
    IS 'drop replaced partitions whose keep_replaced time has passed';

CREATE FUNCTION etl_submit(
    command      text,
    job_name     text        DEFAULT NULL,
    max_attempts integer     DEFAULT 5,
    run_after    timestamptz DEFAULT now())
RETURNS bigint
AS 'MODULE_PATHNAME', 'etl_submit'
LANGUAGE C VOLATILE SECURITY INVOKER;

COMMENT ON FUNCTION etl_submit(text, text, integer, timestamptz)
    IS 'queue a statement for the background worker, to run as the current role with retries';

CREATE FUNCTION etl_wait(job_id bigint, timeout interval DEFAULT '1 hour')
RETURNS text
AS 'MODULE_PATHNAME', 'etl_wait'
LANGUAGE C VOLATILE SECURITY INVOKER;

COMMENT ON FUNCTION etl_wait(bigint, interval)
    IS 'wait until a job has ended (or the timeout) and return its status';

CREATE FUNCTION etl_cancel(job_id bigint)
RETURNS boolean
AS 'MODULE_PATHNAME', 'etl_cancel'
LANGUAGE C VOLATILE STRICT SECURITY INVOKER;

COMMENT ON FUNCTION etl_cancel(bigint)
    IS 'cancel a queued or running job';

CREATE FUNCTION etl_backfill(
    command    text,
    from_value date,
    to_value   date,
    step       interval DEFAULT '1 day',
    job_name   text     DEFAULT NULL)
RETURNS SETOF bigint
AS 'MODULE_PATHNAME', 'etl_backfill'
LANGUAGE C VOLATILE SECURITY INVOKER;

COMMENT ON FUNCTION etl_backfill(text, date, date, interval, text)
    IS 'queue one job per date, {run_date} replaced by the date, oldest first';

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
