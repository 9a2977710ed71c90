--
-- snapshot_batch: several rows of one key in one batch become a chain of
-- versions in the order of updated_at; exact duplicates collapse; differing
-- rows of one key dated alike are refused (21000).  Late rows, dated before
-- their key's current version, are skipped with a NOTICE and counted:
-- history is never rewritten.  A batch dating a different row at the
-- current version's valid_from replaces that version (a corrected rerun of
-- a date).  A batch in key order that changes nothing is recognised
-- without a join (snapshot_versions_none), with the same counts.
--
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS idem_etl CASCADE;
CREATE EXTENSION idem_etl;
DROP SCHEMA IF EXISTS snapb CASCADE;
RESET client_min_messages;
CREATE SCHEMA snapb;
SET DateStyle = ISO;
SET TimeZone = 'UTC';
\set schema snapb
\i sql/include/err.sql

CREATE TABLE snapb.dim (id int, v text, updated_at timestamptz,
                        valid_from timestamptz, valid_to timestamptz);
CREATE UNIQUE INDEX ON snapb.dim (id) WHERE valid_to IS NULL;
CREATE TABLE snapb.src (id int, v text, updated_at timestamptz);

-- key 1: three versions in one batch (one an exact duplicate), out of order;
-- key 2: a row that changes nothing after the first (no version)
INSERT INTO snapb.src VALUES
    (1, 'c', '2026-01-03'), (1, 'a', '2026-01-01'), (1, 'b', '2026-01-02'),
    (1, 'b', '2026-01-02'),
    (2, 'x', '2026-01-01'), (2, 'x', '2026-01-05');
SELECT inserted, closed, unchanged, late
  FROM etl_snapshot('snapb.dim', 'SELECT * FROM snapb.src', '{id}', updated_at => 'updated_at');
SELECT id, v, valid_from, valid_to FROM snapb.dim ORDER BY id, valid_from;

-- the same batch again: nothing written; its older rows are stored versions,
-- not late rows
CREATE TABLE snapb.before AS SELECT ctid AS row_ctid FROM snapb.dim;
SELECT inserted, closed, unchanged, late
  FROM etl_snapshot('snapb.dim', 'SELECT * FROM snapb.src', '{id}', updated_at => 'updated_at');
SELECT count(*) AS moved FROM snapb.dim d FULL JOIN snapb.before b ON b.row_ctid = d.ctid
 WHERE b.row_ctid IS NULL OR d.ctid IS NULL;

-- a late row (older than the current version of key 1) changes nothing
SELECT inserted, closed, unchanged, late
  FROM etl_snapshot('snapb.dim', $$SELECT 1 AS id, 'old' AS v, '2026-01-02 12:00+00'::timestamptz AS updated_at$$,
                    '{id}', updated_at => 'updated_at');
SELECT id, v, valid_from, valid_to FROM snapb.dim WHERE id = 1 ORDER BY valid_from;

-- differing rows of one key dated alike: 21000, nothing written
SELECT * FROM snapb.err($$SELECT * FROM etl_snapshot('snapb.dim',
    $q$SELECT * FROM (VALUES (3, 'p', '2026-01-09'::timestamptz), (3, 'q', '2026-01-09')) s(id, v, updated_at)$q$,
    '{id}', updated_at => 'updated_at')$$);
-- without updated_at every row is dated valid_at: two rows of a key differ
SELECT * FROM snapb.err($$SELECT * FROM etl_snapshot('snapb.dim',
    $q$SELECT * FROM (VALUES (3, 'p'), (3, 'q')) s(id, v)$q$, '{id}', valid_at => '2026-01-09')$$);
-- a NULL updated_at, the target not empty: 22004 naming the key
SELECT * FROM snapb.err($$SELECT * FROM etl_snapshot('snapb.dim',
    $q$SELECT * FROM (VALUES (1, 'z', NULL::timestamptz)) s(id, v, updated_at)$q$,
    '{id}', updated_at => 'updated_at')$$);
-- exact duplicates are one row
SELECT inserted, closed, unchanged
  FROM etl_snapshot('snapb.dim', $q$SELECT * FROM (VALUES (3, 'p'), (3, 'p')) s(id, v)$q$,
                    '{id}', valid_at => '2026-01-09');

-- a corrected rerun of a date: the version of 2026-01-09 is replaced, not
-- followed by one of zero length
SELECT inserted, closed, corrected, unchanged
  FROM etl_snapshot('snapb.dim', $q$SELECT 3 AS id, 'p2' AS v$q$, '{id}', valid_at => '2026-01-09');
SELECT id, v, valid_from, valid_to FROM snapb.dim WHERE id = 3 ORDER BY valid_from;
-- and the batch of the next date follows it
SELECT inserted, closed, corrected, unchanged
  FROM etl_snapshot('snapb.dim', $q$SELECT 3 AS id, 'p3' AS v$q$, '{id}', valid_at => '2026-01-10');
-- a rerun of the older date finds its version stored: unchanged ...
SELECT inserted, closed, corrected, unchanged, late
  FROM etl_snapshot('snapb.dim', $q$SELECT 3 AS id, 'p2' AS v$q$, '{id}', valid_at => '2026-01-09');
-- ... and with other data it is late: skipped, history is never rewritten
SELECT inserted, closed, corrected, unchanged, late
  FROM etl_snapshot('snapb.dim', $q$SELECT 3 AS id, 'p9' AS v$q$, '{id}', valid_at => '2026-01-09');
SELECT id, v, valid_from, valid_to FROM snapb.dim WHERE id = 3 ORDER BY valid_from;

-- versions chain without gaps or overlaps, one current per key
SELECT id, count(*) FILTER (WHERE valid_to IS NULL) AS current,
       bool_and(valid_from < coalesce(valid_to, 'infinity')) AS ordered
  FROM snapb.dim GROUP BY id ORDER BY id;
SELECT a.id, a.valid_from, b.valid_from FROM snapb.dim a JOIN snapb.dim b
    ON a.id = b.id AND a.ctid <> b.ctid
   AND tstzrange(a.valid_from, a.valid_to) && tstzrange(b.valid_from, b.valid_to);

DROP SCHEMA snapb CASCADE;

-- A batch that comes in key order is first walked beside the current
-- versions read in key order; when nothing differs the call writes nothing
-- without joining the batch to the table.  Each case below runs on two
-- copies of one history, with the source in key order (the walk) and in
-- reverse order (the join alone): the counts and histories must match.
SET client_min_messages = warning;
DROP SCHEMA IF EXISTS snaps CASCADE;
RESET client_min_messages;
CREATE SCHEMA snaps;
-- the walk reads the current versions by an index, never after a sort:
-- on tables this small the planner would sort
SET enable_sort = off;

CREATE TABLE snaps.src (id int, v text, n int, updated_at timestamptz);
CREATE TABLE snaps.dim (id int, v text, n int, updated_at timestamptz,
                        valid_from timestamptz, valid_to timestamptz, deleted boolean);

-- snaps.apply(options): the same call on snaps.a (source in key order) and
-- snaps.b (reverse order); its counts, and whether both histories match
CREATE FUNCTION snaps.apply(opts text) RETURNS TABLE (inserted bigint, closed bigint,
    corrected bigint, unchanged bigint, deleted bigint, late bigint, same boolean)
LANGUAGE plpgsql AS $$
DECLARE
    ra record;
    rb record;
BEGIN
    EXECUTE format('SELECT * FROM etl_snapshot(''snaps.a'', ''SELECT * FROM snaps.src ORDER BY id'', ''{id}'', %s)', opts) INTO ra;
    EXECUTE format('SELECT * FROM etl_snapshot(''snaps.b'', ''SELECT * FROM snaps.src ORDER BY id DESC'', ''{id}'', %s)', opts) INTO rb;
    RETURN QUERY SELECT ra.inserted, ra.closed, ra.corrected, ra.unchanged, ra.deleted, ra.late,
        (ra.inserted, ra.closed, ra.corrected, ra.unchanged, ra.deleted, ra.late)
          = (rb.inserted, rb.closed, rb.corrected, rb.unchanged, rb.deleted, rb.late)
        AND (SELECT array_agg(a ORDER BY id, valid_from, valid_to NULLS LAST) FROM snaps.a a)::text
          = (SELECT array_agg(b ORDER BY id, valid_from, valid_to NULLS LAST) FROM snaps.b b)::text;
END $$;
CREATE FUNCTION snaps.reset(unique_index boolean) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    DROP TABLE IF EXISTS snaps.a, snaps.b;
    CREATE TABLE snaps.a (LIKE snaps.dim);
    CREATE TABLE snaps.b (LIKE snaps.dim);
    IF unique_index THEN
        CREATE UNIQUE INDEX ON snaps.a (id) WHERE valid_to IS NULL;
        CREATE UNIQUE INDEX ON snaps.b (id) WHERE valid_to IS NULL;
    ELSE
        CREATE INDEX ON snaps.a (id) WHERE valid_to IS NULL;
        CREATE INDEX ON snaps.b (id) WHERE valid_to IS NULL;
    END IF;
END $$;

INSERT INTO snaps.src SELECT g, 'v' || g, CASE WHEN g % 3 = 0 THEN NULL ELSE g END, '2026-01-01'
  FROM generate_series(1, 50) g;
SELECT snaps.reset(true);
-- first load, then an identical rerun (the walk finds nothing), a rerun
-- dated earlier (late rows, which the walk leaves to the join)
SELECT * FROM snaps.apply($$valid_at => '2026-01-01', exclude_columns => '{updated_at}'$$);
SELECT * FROM snaps.apply($$valid_at => '2026-01-02', exclude_columns => '{updated_at}'$$);
SELECT * FROM snaps.apply($$valid_at => '2025-12-31', exclude_columns => '{updated_at}'$$);
-- a change in the middle, a NULL that becomes a value, a new key at the end
UPDATE snaps.src SET v = 'changed' WHERE id = 25;
UPDATE snaps.src SET n = 3 WHERE id = 3;
INSERT INTO snaps.src VALUES (51, 'v51', 51, '2026-01-01');
SELECT * FROM snaps.apply($$valid_at => '2026-01-03', exclude_columns => '{updated_at}'$$);
SELECT * FROM snaps.apply($$valid_at => '2026-01-04', exclude_columns => '{updated_at}'$$);
-- a change in an excluded column changes nothing
UPDATE snaps.src SET updated_at = '2026-01-05';
SELECT * FROM snaps.apply($$valid_at => '2026-01-05', exclude_columns => '{updated_at}'$$);
-- a key missing from the batch, with hard deletes: invalidated, then a
-- deletion record; the key that returns opens a version again
DELETE FROM snaps.src WHERE id = 10;
SELECT * FROM snaps.apply($$valid_at => '2026-01-06', exclude_columns => '{updated_at}', hard_deletes => 'ignore'$$);
SELECT * FROM snaps.apply($$valid_at => '2026-01-07', exclude_columns => '{updated_at}', hard_deletes => 'new_record', is_deleted_column => 'deleted'$$);
SELECT * FROM snaps.apply($$valid_at => '2026-01-08', exclude_columns => '{updated_at}', hard_deletes => 'new_record', is_deleted_column => 'deleted'$$);
INSERT INTO snaps.src VALUES (10, 'v10', 10, '2026-01-05');
SELECT * FROM snaps.apply($$valid_at => '2026-01-09', exclude_columns => '{updated_at}', hard_deletes => 'new_record', is_deleted_column => 'deleted'$$);
SELECT * FROM snaps.apply($$valid_at => '2026-01-10', exclude_columns => '{updated_at}', hard_deletes => 'invalidate'$$);

-- dated by updated_at: unchanged rows dated later, then one dated before
-- its current version (late)
SELECT snaps.reset(true);
SELECT * FROM snaps.apply($$updated_at => 'updated_at'$$);
UPDATE snaps.src SET updated_at = '2026-02-01';
SELECT * FROM snaps.apply($$updated_at => 'updated_at'$$);
UPDATE snaps.src SET updated_at = '2026-01-02', v = 'older' WHERE id = 7;
SELECT * FROM snaps.apply($$updated_at => 'updated_at'$$);

-- no unique index (an index on the key of the current versions, not
-- unique): two current versions of key 5, one equal to the batch's
-- row and one not; the walk leaves the key to the join
SELECT snaps.reset(false);
SELECT * FROM snaps.apply($$valid_at => '2026-01-01', exclude_columns => '{updated_at}'$$);
INSERT INTO snaps.a SELECT id, 'other', n, updated_at, valid_from, NULL, NULL FROM snaps.a WHERE id = 5;
INSERT INTO snaps.b SELECT id, 'other', n, updated_at, valid_from, NULL, NULL FROM snaps.b WHERE id = 5;
SELECT * FROM snaps.apply($$valid_at => '2026-01-02', exclude_columns => '{updated_at}'$$);
-- a current version with a NULL key is not in any batch
INSERT INTO snaps.a VALUES (NULL, 'x', 1, NULL, '2026-01-01', NULL, NULL);
INSERT INTO snaps.b VALUES (NULL, 'x', 1, NULL, '2026-01-01', NULL, NULL);
SELECT * FROM snaps.apply($$valid_at => '2026-01-03', exclude_columns => '{updated_at}'$$);
SELECT * FROM snaps.apply($$valid_at => '2026-01-04', exclude_columns => '{updated_at}', hard_deletes => 'invalidate'$$);

-- text keys in key order under the column's collation
CREATE TABLE snaps.tsrc (k text COLLATE "C", v int);
CREATE TABLE snaps.tdim (k text COLLATE "C", v int, valid_from timestamptz, valid_to timestamptz);
CREATE UNIQUE INDEX ON snaps.tdim (k) WHERE valid_to IS NULL;
INSERT INTO snaps.tsrc VALUES ('B', 1), ('a', 2), ('b', 3);
SELECT inserted, unchanged FROM etl_snapshot('snaps.tdim', 'SELECT * FROM snaps.tsrc ORDER BY k COLLATE "C"', '{k}', valid_at => '2026-01-01');
SELECT inserted, unchanged FROM etl_snapshot('snaps.tdim', 'SELECT * FROM snaps.tsrc ORDER BY k COLLATE "C"', '{k}', valid_at => '2026-01-02');
UPDATE snaps.tsrc SET v = 20 WHERE k = 'a';
SELECT inserted, closed, unchanged FROM etl_snapshot('snaps.tdim', 'SELECT * FROM snaps.tsrc ORDER BY k COLLATE "C"', '{k}', valid_at => '2026-01-03');
SELECT k, v, valid_from, valid_to FROM snaps.tdim ORDER BY k, valid_from;

DROP SCHEMA snaps CASCADE;
RESET enable_sort;
