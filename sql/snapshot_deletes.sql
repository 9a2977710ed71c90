--
-- snapshot_deletes: keys missing from the batch, by hard_deletes: 'ignore'
-- (the default) keeps their current version, 'invalidate' ends it at
-- valid_at, 'new_record' ends it and opens a deletion record (is_deleted
-- true), once: a rerun inserts nothing.  An empty batch tracking deletes is
-- refused (IE002) unless allow_shrink.  A deleted key that returns opens a
-- version no earlier than its deletion.
--
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS idem_etl CASCADE;
CREATE EXTENSION idem_etl;
DROP SCHEMA IF EXISTS snapd CASCADE;
RESET client_min_messages;
CREATE SCHEMA snapd;
SET DateStyle = ISO;
SET TimeZone = 'UTC';
\set schema snapd
\i sql/include/err.sql

CREATE TABLE snapd.inv (id int, v text, valid_from timestamptz, valid_to timestamptz);
CREATE UNIQUE INDEX ON snapd.inv (id) WHERE valid_to IS NULL;
CREATE INDEX ON snapd.inv (id, valid_from);
CREATE TABLE snapd.src (id int, v text);
INSERT INTO snapd.src VALUES (1, 'a'), (2, 'b'), (3, 'c');
SELECT inserted FROM etl_snapshot('snapd.inv', 'SELECT * FROM snapd.src', '{id}',
                                  valid_at => '2026-01-01', hard_deletes => 'invalidate');

-- ignore: key 3 stays current
DELETE FROM snapd.src WHERE id = 3;
SELECT inserted, closed, unchanged, deleted
  FROM etl_snapshot('snapd.inv', 'SELECT * FROM snapd.src', '{id}', valid_at => '2026-01-02');
-- invalidate: key 3 ends at valid_at; a rerun changes nothing
SELECT inserted, closed, unchanged, deleted
  FROM etl_snapshot('snapd.inv', 'SELECT * FROM snapd.src', '{id}', valid_at => '2026-01-02',
                    hard_deletes => 'invalidate');
SELECT inserted, closed, unchanged, deleted
  FROM etl_snapshot('snapd.inv', 'SELECT * FROM snapd.src', '{id}', valid_at => '2026-01-02',
                    hard_deletes => 'invalidate');
SELECT id, v, valid_from, valid_to FROM snapd.inv ORDER BY id, valid_from;
-- key 3 returns, unchanged: a new version from valid_at, after its deletion
INSERT INTO snapd.src VALUES (3, 'c');
SELECT inserted, closed, unchanged, deleted
  FROM etl_snapshot('snapd.inv', 'SELECT * FROM snapd.src', '{id}', valid_at => '2026-01-03',
                    hard_deletes => 'invalidate');
SELECT id, v, valid_from, valid_to FROM snapd.inv WHERE id = 3 ORDER BY valid_from;

-- dated by updated_at, a returning key whose rows predate its deletion opens
-- one version, at the deletion (the older rows are late)
CREATE TABLE snapd.upd (id int, v text, updated_at timestamptz, valid_from timestamptz, valid_to timestamptz);
SELECT inserted FROM etl_snapshot('snapd.upd', $q$SELECT 1 AS id, 'a' AS v, '2026-01-01'::timestamptz AS updated_at$q$,
                                  '{id}', updated_at => 'updated_at', valid_at => '2026-01-01',
                                  hard_deletes => 'invalidate');
SELECT deleted FROM etl_snapshot('snapd.upd', $q$SELECT 2 AS id, 'x' AS v, '2026-01-05'::timestamptz AS updated_at$q$,
                                 '{id}', updated_at => 'updated_at', valid_at => '2026-01-05',
                                 hard_deletes => 'invalidate');
SELECT inserted, late FROM etl_snapshot('snapd.upd',
    $q$SELECT * FROM (VALUES (1, 'a', '2026-01-01'::timestamptz), (1, 'b', '2026-01-02'), (2, 'x', '2026-01-05')) s(id, v, updated_at)$q$,
    '{id}', updated_at => 'updated_at', hard_deletes => 'invalidate', valid_at => '2026-01-05');
SELECT id, v, valid_from, valid_to FROM snapd.upd ORDER BY id, valid_from;

-- new_record: a deletion record, current, written once
CREATE TABLE snapd.rec (id int, v text, valid_from timestamptz, valid_to timestamptz, is_deleted boolean);
CREATE UNIQUE INDEX ON snapd.rec (id) WHERE valid_to IS NULL;
SELECT inserted FROM etl_snapshot('snapd.rec', $q$SELECT * FROM (VALUES (1, 'a'), (2, 'b')) s(id, v)$q$, '{id}',
                                  valid_at => '2026-01-01', hard_deletes => 'new_record',
                                  is_deleted_column => 'is_deleted');
SELECT inserted, closed, unchanged, deleted
  FROM etl_snapshot('snapd.rec', $q$SELECT 1 AS id, 'a' AS v$q$, '{id}',
                    valid_at => '2026-01-02', hard_deletes => 'new_record', is_deleted_column => 'is_deleted');
SELECT inserted, closed, unchanged, deleted
  FROM etl_snapshot('snapd.rec', $q$SELECT 1 AS id, 'a' AS v$q$, '{id}',
                    valid_at => '2026-01-03', hard_deletes => 'new_record', is_deleted_column => 'is_deleted');
-- key 2 returns: its deletion record ends, a new version opens
SELECT inserted, closed, unchanged, deleted
  FROM etl_snapshot('snapd.rec', $q$SELECT * FROM (VALUES (1, 'a'), (2, 'b')) s(id, v)$q$, '{id}',
                    valid_at => '2026-01-04', hard_deletes => 'new_record', is_deleted_column => 'is_deleted');
SELECT id, v, valid_from, valid_to, is_deleted FROM snapd.rec ORDER BY id, valid_from;

-- an empty batch that would end every current version: IE002, nothing written
SELECT * FROM snapd.err($$SELECT * FROM etl_snapshot('snapd.rec', 'SELECT * FROM snapd.src WHERE false', '{id}',
    valid_at => '2026-01-05', hard_deletes => 'new_record', is_deleted_column => 'is_deleted')$$);
SELECT * FROM snapd.err($$SELECT * FROM etl_snapshot('snapd.inv', 'SELECT * FROM snapd.src WHERE false', '{id}',
    valid_at => '2026-01-05', hard_deletes => 'invalidate')$$);
-- idem_etl.min_replaced_ratio applies as to replacements
SET idem_etl.min_replaced_ratio = 0.9;
SELECT * FROM snapd.err($$SELECT * FROM etl_snapshot('snapd.inv', 'SELECT * FROM snapd.src WHERE id = 1', '{id}',
    valid_at => '2026-01-05', hard_deletes => 'invalidate')$$);
RESET idem_etl.min_replaced_ratio;
-- without delete tracking an empty batch is harmless
SELECT inserted, closed, deleted FROM etl_snapshot('snapd.inv', 'SELECT * FROM snapd.src WHERE false', '{id}',
                                                   valid_at => '2026-01-05');
-- allow_shrink: the empty batch is applied
SELECT inserted, closed, deleted FROM etl_snapshot('snapd.inv', 'SELECT * FROM snapd.src WHERE false', '{id}',
    valid_at => '2026-01-05', hard_deletes => 'invalidate', allow_shrink => true);
SELECT count(*) AS current FROM snapd.inv WHERE valid_to IS NULL;

DROP SCHEMA snapd CASCADE;
