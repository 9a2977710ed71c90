--
-- replace_keep: point 8 of etl_replace_partition (rollback of a bad load).
-- With keep_replaced (or the setting idem_etl.keep_replaced, seconds,
-- default 0: dropped at commit) the replaced partition is kept detached
-- under a generated name in the target's schema and recorded in
-- idem_etl.replaced_partitions until the interval has passed.
-- etl_restore_partition(target, value) swaps the most recently replaced
-- version back in and keeps the current one in its place, so a restore can
-- itself be undone.  etl_cleanup() drops the versions whose time has passed
-- and returns how many.  replaced_partitions is readable by everybody and
-- written by the extension only.
--
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS idem_etl CASCADE;
CREATE EXTENSION idem_etl;
DROP SCHEMA IF EXISTS rkeep CASCADE;
DROP SCHEMA IF EXISTS rkeep_owned CASCADE;
\set roles {idem_test_rkeep_reader,idem_test_rkeep_owner}
\i sql/include/drop_roles.sql
RESET client_min_messages;

CREATE SCHEMA rkeep;

\set schema rkeep
\i sql/include/err.sql

-- the state of the extension: the columns promised, readable by all
SELECT r.column_name, c.column_name IS NOT NULL AS present
  FROM unnest(ARRAY['target', 'partition_value', 'kept_table', 'keep_until']) WITH ORDINALITY AS r(column_name, n)
  LEFT JOIN information_schema.columns c
         ON c.table_schema = 'idem_etl' AND c.table_name = 'replaced_partitions' AND c.column_name = r.column_name
 ORDER BY r.n;
SHOW idem_etl.keep_replaced;

CREATE TABLE rkeep.t (d date NOT NULL, id int NOT NULL, v text, PRIMARY KEY (d, id)) PARTITION BY RANGE (d);
CREATE TABLE rkeep.t_20261127 PARTITION OF rkeep.t FOR VALUES FROM ('2026-11-27') TO ('2026-11-28');
CREATE TABLE rkeep.t_20261128 PARTITION OF rkeep.t FOR VALUES FROM ('2026-11-28') TO ('2026-11-29');
INSERT INTO rkeep.t VALUES ('2026-11-27', 1, 'day 27'), ('2026-11-28', 1, 'v1'), ('2026-11-28', 2, 'v1');

-- load(version, keep): replace day 28 with two rows of that version
CREATE FUNCTION rkeep.load(version text, keep interval DEFAULT NULL)
RETURNS TABLE (rows_loaded bigint, rows_replaced bigint) LANGUAGE sql AS $$
    SELECT rows_loaded, rows_replaced
      FROM etl_replace_partition('rkeep.t', '2026-11-28',
           format($s$SELECT '2026-11-28'::date AS d, g AS id, %L AS v FROM generate_series(1, 2) g$s$, version),
           keep_replaced => keep);
$$;
-- day28(): which version the partition holds
CREATE FUNCTION rkeep.day28() RETURNS text LANGUAGE sql AS $$
    SELECT string_agg(DISTINCT v, ',') || ' (' || count(*) || ' rows)' FROM rkeep.t WHERE d = '2026-11-28';
$$;
-- kept(): the kept versions with the version each holds, newest first
CREATE FUNCTION rkeep.kept() RETURNS TABLE (target text, holds text,
                                            in_target_schema boolean, detached boolean)
LANGUAGE plpgsql AS $$
DECLARE r record;
BEGIN
    FOR r IN SELECT * FROM idem_etl.replaced_partitions
              ORDER BY keep_until DESC, kept_table::text LOOP
        target := r.target::text;
        in_target_schema := (SELECT relnamespace = 'rkeep'::regnamespace FROM pg_class WHERE oid = r.kept_table::regclass);
        detached := NOT (SELECT relispartition FROM pg_class WHERE oid = r.kept_table::regclass);
        EXECUTE format('SELECT string_agg(DISTINCT v, '','') || '' ('' || count(*) || '' rows)'' FROM %s',
                       r.kept_table::regclass) INTO holds;
        RETURN NEXT;
    END LOOP;
END $$;
-- the partition of day 28 is still the same one to the outside
CREATE FUNCTION rkeep.partition28() RETURNS text LANGUAGE sql AS $$
    SELECT format('%s of %s %s', c.oid::regclass, i.inhparent::regclass, pg_get_expr(c.relpartbound, c.oid))
      FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
     WHERE c.oid = to_regclass('rkeep.t_20261128');
$$;
CREATE FUNCTION rkeep.tables() RETURNS bigint LANGUAGE sql AS $$
    SELECT count(*) FROM pg_class WHERE relnamespace = 'rkeep'::regnamespace AND relkind = 'r';
$$;

--
-- default: nothing kept, the replaced partition is dropped
--
SELECT rkeep.tables() AS tables_before \gset
SELECT * FROM rkeep.load('v1');
SELECT count(*) AS kept FROM idem_etl.replaced_partitions;
SELECT rkeep.tables() = :tables_before AS no_table_left;

--
-- keep_replaced => '1 day': the old version is kept, detached, in the
-- target's schema, until about a day from now
--
SELECT now() AS t0 \gset
SELECT * FROM rkeep.load('v2', '1 day');
SELECT rkeep.day28(), rkeep.partition28();
SELECT * FROM rkeep.kept();
SELECT partition_value::date = '2026-11-28' AS value_ok,
       keep_until >= :'t0'::timestamptz + interval '1 day'
   AND keep_until <= clock_timestamp() + interval '1 day' AS keep_until_ok
  FROM idem_etl.replaced_partitions;
SELECT rkeep.tables() = :tables_before + 1 AS one_table_more;
-- the parent does not see the kept rows
SELECT count(*) FROM rkeep.t;

--
-- restore: the kept version is swapped back in, the current one is kept
--
SELECT pg_relation_filenode('rkeep.t_20261127') AS fn27 \gset
SELECT etl_restore_partition('rkeep.t', '2026-11-28');
SELECT rkeep.day28(), rkeep.partition28();
SELECT * FROM rkeep.kept();
-- a second restore undoes the first
SELECT etl_restore_partition('rkeep.t', '2026-11-28');
SELECT rkeep.day28(), rkeep.partition28();
SELECT * FROM rkeep.kept();
-- and a third one undoes that
SELECT etl_restore_partition('rkeep.t', '2026-11-28');
SELECT rkeep.day28();
SELECT etl_restore_partition('rkeep.t', '2026-11-28');
SELECT rkeep.day28();
-- the value is a value, not text in the session's DateStyle: kept
-- versions are found whatever DateStyle recorded them or looks them up
SET DateStyle = 'ISO, YMD';
SELECT etl_restore_partition('rkeep.t', '2026-11-28');
SELECT rkeep.day28();
SET DateStyle = 'German';
SELECT etl_restore_partition('rkeep.t', '28.11.2026');
SELECT rkeep.day28();
RESET DateStyle;
-- the other day was not touched
SELECT pg_relation_filenode('rkeep.t_20261127') = :fn27 AS day27_same_file;
SELECT * FROM rkeep.t WHERE d = '2026-11-27';

-- with two kept versions, a restore takes the most recently replaced one
SELECT * FROM rkeep.load('v3', '1 day');
SELECT rkeep.day28();
SELECT * FROM rkeep.kept();
SELECT etl_restore_partition('rkeep.t', '2026-11-28');
SELECT rkeep.day28();
SELECT * FROM rkeep.kept();

-- nothing kept for a value: an error, nothing changes
SELECT * FROM rkeep.err($$SELECT etl_restore_partition('rkeep.t', '2026-11-27')$$);
SELECT * FROM rkeep.err($$SELECT etl_restore_partition('rkeep.t', '2026-12-01')$$);
SELECT rkeep.day28();

-- restores are in the ledger
SELECT operation, count(*) FROM idem_etl.runs GROUP BY 1 ORDER BY 1;

--
-- cleanup: nothing expired yet
--
-- a version whose time has passed, not yet dropped, restored: the version
-- it displaces is kept as long as it was (it was kept for no time at all,
-- so that restore could not be undone); in one transaction, before the
-- background janitor can drop it
BEGIN;
UPDATE idem_etl.replaced_partitions
   SET replaced_at = now() - interval '1 day', keep_until = now() - interval '1 second'
 WHERE kept_id = (SELECT max(kept_id) FROM idem_etl.replaced_partitions WHERE partition_name = 't_20261128');
SELECT etl_restore_partition('rkeep.t', '2026-11-28');
SELECT keep_until > now() + interval '23 hours' AS displaced_kept_a_day
  FROM idem_etl.replaced_partitions WHERE partition_name = 't_20261128'
 ORDER BY kept_id DESC LIMIT 1;
COMMIT;
SELECT count(*) AS kept_before FROM idem_etl.replaced_partitions \gset
SELECT etl_cleanup();
SELECT count(*) = :kept_before AS all_still_kept FROM idem_etl.replaced_partitions;
-- a version whose time has come (made so by the state's owner, in the
-- clean-up's own transaction, so that the background janitor, which acts
-- at keep_until, cannot get there first): cleanup drops it (table and
-- record) and nothing else
SELECT * FROM etl_replace_partition('rkeep.t', '2026-11-27',
    $$SELECT '2026-11-27'::date AS d, 1 AS id, 'day 27 new' AS v$$, keep_replaced => '1 minute') \gset r_
SELECT kept_table AS expired_table FROM idem_etl.replaced_partitions
 ORDER BY keep_until LIMIT 1 \gset
SELECT to_regclass(:'expired_table') IS NOT NULL AS expired_exists;
BEGIN;
UPDATE idem_etl.replaced_partitions SET keep_until = now() - interval '1 second'
 WHERE kept_table = :'expired_table';
SELECT etl_cleanup();
COMMIT;
SELECT to_regclass(:'expired_table') IS NULL AS expired_dropped;
SELECT count(*) AS still_kept FROM idem_etl.replaced_partitions;
SELECT count(*) = :kept_before AS others_still_kept FROM idem_etl.replaced_partitions;
SELECT etl_cleanup();
-- a kept version can no longer be restored once cleaned up
SELECT * FROM rkeep.err($$SELECT etl_restore_partition('rkeep.t', '2026-11-27')$$);

--
-- the setting idem_etl.keep_replaced (seconds) applies when keep_replaced is NULL
--
SET idem_etl.keep_replaced = 3600;
SHOW idem_etl.keep_replaced;
SELECT now() AS t1 \gset
SELECT * FROM rkeep.load('v4');
SELECT keep_until >= :'t1'::timestamptz + interval '1 hour'
   AND keep_until <= clock_timestamp() + interval '1 hour' AS keep_until_ok
  FROM idem_etl.replaced_partitions
 WHERE keep_until < now() + interval '2 hours';
SET idem_etl.keep_replaced = '2h';
SHOW idem_etl.keep_replaced;
-- an explicit 0 overrides the setting: not kept
SELECT count(*) AS kept_before FROM idem_etl.replaced_partitions \gset
SELECT * FROM rkeep.load('v5', '0');
SELECT count(*) = :kept_before AS nothing_more_kept FROM idem_etl.replaced_partitions;
RESET idem_etl.keep_replaced;
SELECT * FROM rkeep.load('v6');
SELECT count(*) = :kept_before AS nothing_more_kept FROM idem_etl.replaced_partitions;
SELECT rkeep.day28();

--
-- everybody may read the kept versions' record, nobody may write it
--
CREATE ROLE idem_test_rkeep_reader;
GRANT USAGE ON SCHEMA rkeep TO idem_test_rkeep_reader;
SET ROLE idem_test_rkeep_reader;
SELECT count(*) > 0 AS can_read FROM idem_etl.replaced_partitions;
SELECT * FROM rkeep.err($$DELETE FROM idem_etl.replaced_partitions$$);
SELECT * FROM rkeep.err($$UPDATE idem_etl.replaced_partitions SET keep_until = now()$$);
SELECT * FROM rkeep.err($$INSERT INTO idem_etl.replaced_partitions (target, partition_value, kept_table, keep_until)
                          SELECT target, partition_value, kept_table, keep_until FROM idem_etl.replaced_partitions$$);
RESET ROLE;

--
-- an ordinary role owning its target can keep and restore (the kept
-- version goes to the target's schema, where the owner may create)
--
CREATE ROLE idem_test_rkeep_owner;
CREATE SCHEMA rkeep_owned AUTHORIZATION idem_test_rkeep_owner;
GRANT USAGE ON SCHEMA rkeep TO idem_test_rkeep_owner;
SET ROLE idem_test_rkeep_owner;
CREATE TABLE rkeep_owned.t (d date NOT NULL, v text) PARTITION BY LIST (d);
CREATE TABLE rkeep_owned.t_28 PARTITION OF rkeep_owned.t FOR VALUES IN ('2026-11-28');
INSERT INTO rkeep_owned.t VALUES ('2026-11-28', 'first');
SELECT rows_loaded, rows_replaced FROM etl_replace_partition('rkeep_owned.t', '2026-11-28',
    $$SELECT '2026-11-28'::date AS d, 'second' AS v$$, keep_replaced => '1 day');
SELECT etl_restore_partition('rkeep_owned.t', '2026-11-28');
SELECT * FROM rkeep_owned.t;
SELECT c.relnamespace::regnamespace AS kept_in, c.relowner::regrole AS kept_owner
  FROM idem_etl.replaced_partitions r JOIN pg_class c ON c.oid = r.kept_table::regclass
 WHERE r.target::text = 'rkeep_owned.t';
RESET ROLE;

-- A monthly partition: every value of the month names it, and the latest
-- version kept of it is restored whichever value names it.  Versions were
-- looked up by the text of the value: the 5th found the version replaced
-- on the 5th, older than the one the 20th replaced, and the 1st none.
CREATE TABLE rkeep.mon (d date NOT NULL, v text) PARTITION BY RANGE (d);
CREATE TABLE rkeep.mon_202611 PARTITION OF rkeep.mon FOR VALUES FROM ('2026-11-01') TO ('2026-12-01');
INSERT INTO rkeep.mon VALUES ('2026-11-03', 'version 0');
SELECT rows_loaded, rows_replaced FROM etl_replace_partition('rkeep.mon', '2026-11-05',
    $$SELECT date '2026-11-05' AS d, 'version 1' AS v$$, keep_replaced => '1 day');
SELECT rows_loaded, rows_replaced FROM etl_replace_partition('rkeep.mon', '2026-11-20',
    $$SELECT date '2026-11-20' AS d, 'version 2' AS v$$, keep_replaced => '1 day');
SELECT etl_restore_partition('rkeep.mon', '2026-11-05');
SELECT * FROM rkeep.mon;
SELECT etl_restore_partition('rkeep.mon', '2026-11-01');
SELECT * FROM rkeep.mon;
-- the partition dropped since, and no other whose bounds new ones could
-- follow: the version kept for the value, under its own bound (the new
-- bounds were inferred first, and failed with 22023)
CREATE TABLE rkeep.lone (d date NOT NULL, v text) PARTITION BY RANGE (d);
CREATE TABLE rkeep.lone_202611 PARTITION OF rkeep.lone FOR VALUES FROM ('2026-11-01') TO ('2026-12-01');
INSERT INTO rkeep.lone VALUES ('2026-11-03', 'original');
SELECT rows_loaded FROM etl_replace_partition('rkeep.lone', '2026-11-05',
    $$SELECT date '2026-11-05' AS d, 'replacement' AS v$$, keep_replaced => '1 day');
DROP TABLE rkeep.lone_202611;
SELECT etl_restore_partition('rkeep.lone', '2026-11-05');
SELECT tableoid::regclass, * FROM rkeep.lone;

SET client_min_messages = warning;
DROP SCHEMA rkeep CASCADE;
DROP SCHEMA rkeep_owned CASCADE;
DROP EXTENSION idem_etl;
RESET client_min_messages;
DROP ROLE idem_test_rkeep_reader;
DROP ROLE idem_test_rkeep_owner;
