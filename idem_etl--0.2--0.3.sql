-- idem_etl 0.2 -> 0.3: turns a 0.2 installation into exactly what a fresh
-- CREATE EXTENSION idem_etl VERSION '0.3' gives, keeping the data.  Checked
-- by test/t/130_upgrade.pl, which compares the catalogs of an updated and of
-- a fresh database (test/upgrade/objects.sql).
\echo Use "ALTER EXTENSION idem_etl UPDATE TO '0.3'" to load this file. \quit

-- etl_snapshot (SCD type 2)
CREATE FUNCTION etl_snapshot(
    target            regclass,
    source            text,
    key_columns       text[],
    updated_at        text        DEFAULT NULL,
    valid_at          timestamptz DEFAULT NULL,
    check_columns     text[]      DEFAULT NULL,
    exclude_columns   text[]      DEFAULT NULL,
    hard_deletes      text        DEFAULT 'ignore',
    allow_shrink      boolean     DEFAULT false,
    valid_from_column text        DEFAULT 'valid_from',
    valid_to_column   text        DEFAULT 'valid_to',
    is_deleted_column text        DEFAULT NULL,
    current_valid_to  text        DEFAULT NULL,
    run_key           text        DEFAULT NULL,
    expect            text        DEFAULT NULL)
RETURNS TABLE (run_id bigint, inserted bigint, closed bigint, corrected bigint,
               unchanged bigint, deleted bigint, late bigint, skipped boolean)
AS 'MODULE_PATHNAME', 'etl_snapshot'
LANGUAGE C VOLATILE SECURITY INVOKER;

COMMENT ON FUNCTION etl_snapshot(regclass, text, text[], text, timestamptz, text[], text[], text, boolean, text, text, text, text, text, text)
    IS 'keep the history of a source as versions (SCD type 2); rerunning it changes nothing';

CREATE FUNCTION etl_snapshot_ddl(
    target            regclass,
    key_columns       text[],
    valid_from_column text DEFAULT 'valid_from',
    valid_to_column   text DEFAULT 'valid_to',
    current_valid_to  text DEFAULT NULL)
RETURNS text
AS 'MODULE_PATHNAME', 'etl_snapshot_ddl'
LANGUAGE C STABLE SECURITY INVOKER;

COMMENT ON FUNCTION etl_snapshot_ddl(regclass, text[], text, text, text)
    IS 'the indexes and temporal key recommended for an etl_snapshot target, as text';
