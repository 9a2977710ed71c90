--
-- snapshot_batch: several rows of one key in one batch become a chain of
-- versions in the order of updated_at; exact duplicates collapse; differing
-- rows of one key dated alike are refused (21000).  Late rows, dated before
-- their key's current version, are skipped with a NOTICE and counted:
-- history is never rewritten.  A batch dating a different row at the
-- current version's valid_from replaces that version (a corrected rerun of
-- a date).
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
