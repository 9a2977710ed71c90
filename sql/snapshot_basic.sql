--
-- snapshot_basic: etl_snapshot keeps a key's versions in the user's table,
-- half-open [valid_from, valid_to), the current one with valid_to NULL (or
-- a sentinel), and an identical rerun writes nothing.  Change detection
-- compares the tracked columns byte for byte: NULL -> value and value ->
-- NULL are changes, NULL -> NULL is not, and a change of an untracked
-- column opens no version.
--
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS idem_etl CASCADE;
CREATE EXTENSION idem_etl;
DROP SCHEMA IF EXISTS snap CASCADE;
RESET client_min_messages;
CREATE SCHEMA snap;
SET DateStyle = ISO;

CREATE TABLE snap.customers (
    id         int,
    name       text,
    city       text,
    doc        json,
    updated_at timestamptz,
    valid_from timestamptz NOT NULL,
    valid_to   timestamptz
);
-- the recommended DDL, printed, never run by etl_snapshot
SELECT etl_snapshot_ddl('snap.customers', '{id}') LIKE '%WITHOUT OVERLAPS%' AS has_temporal_key;
SELECT line FROM regexp_split_to_table(etl_snapshot_ddl('snap.customers', '{id}'), E'\n') AS line
 WHERE line LIKE 'CREATE%INDEX%';
CREATE UNIQUE INDEX ON snap.customers (id) WHERE valid_to IS NULL;
CREATE INDEX ON snap.customers (id, valid_from);

CREATE TABLE snap.src (id int, name text, city text, doc json, updated_at timestamptz);
INSERT INTO snap.src VALUES
    (1, 'Ann', 'Oslo',  '{"a": 1}', '2026-01-01 00:00+00'),
    (2, 'Bob', NULL,    NULL,       '2026-01-01 00:00+00'),
    (3, 'Cid', 'Rome',  '[1]',      '2026-01-01 00:00+00');

-- first load: every key opens its first version, current
SELECT inserted, closed, corrected, unchanged, deleted, late, skipped
  FROM etl_snapshot('snap.customers', 'SELECT * FROM snap.src', '{id}', updated_at => 'updated_at');
SELECT id, name, city, valid_from, valid_to FROM snap.customers ORDER BY id, valid_from;
SELECT operation, batch_rows, inserted, updated, unchanged FROM idem_etl.runs ORDER BY run_id DESC LIMIT 1;

-- identical rerun: unchanged = 3, no new row version, no dead tuple
CREATE TABLE snap.before AS SELECT id, valid_from, xmin::text AS row_xmin, ctid AS row_ctid FROM snap.customers;
SELECT pg_stat_force_next_flush();
CREATE TABLE snap.stats AS SELECT n_tup_ins, n_tup_upd, n_tup_del FROM pg_stat_user_tables
 WHERE relid = 'snap.customers'::regclass;
SELECT inserted, closed, corrected, unchanged, deleted, late, skipped
  FROM etl_snapshot('snap.customers', 'SELECT * FROM snap.src', '{id}', updated_at => 'updated_at');
SELECT pg_stat_force_next_flush();
SELECT s.n_tup_ins - b.n_tup_ins AS ins, s.n_tup_upd - b.n_tup_upd AS upd, s.n_tup_del - b.n_tup_del AS del
  FROM pg_stat_user_tables s, snap.stats b WHERE s.relid = 'snap.customers'::regclass;
SELECT count(*) AS moved FROM snap.customers c
  FULL JOIN snap.before b ON b.id = c.id AND b.valid_from = c.valid_from
 WHERE b.row_xmin IS DISTINCT FROM c.xmin::text OR b.row_ctid IS DISTINCT FROM c.ctid;

-- NULL -> value (Bob's city), value -> NULL (Cid's doc): changes;
-- NULL -> NULL (Bob's doc) is not; json compared byte for byte
UPDATE snap.src SET city = 'Lima', updated_at = '2026-01-02 00:00+00' WHERE id = 2;
UPDATE snap.src SET doc = NULL, updated_at = '2026-01-02 00:00+00' WHERE id = 3;
SELECT inserted, closed, corrected, unchanged, deleted, late, skipped
  FROM etl_snapshot('snap.customers', 'SELECT * FROM snap.src', '{id}', updated_at => 'updated_at');
SELECT id, name, city, doc, valid_from, valid_to FROM snap.customers ORDER BY id, valid_from;

-- a newer updated_at alone is no change (updated_at only dates versions)
UPDATE snap.src SET updated_at = '2026-01-03 00:00+00' WHERE id = 1;
SELECT inserted, closed, unchanged
  FROM etl_snapshot('snap.customers', 'SELECT * FROM snap.src', '{id}', updated_at => 'updated_at');
-- nor is a change of a column left out with exclude_columns ...
UPDATE snap.src SET name = 'Anna', updated_at = '2026-01-04 00:00+00' WHERE id = 1;
SELECT inserted, closed, unchanged
  FROM etl_snapshot('snap.customers', 'SELECT * FROM snap.src', '{id}', updated_at => 'updated_at',
                    exclude_columns => '{name}');
-- ... or not named by check_columns
SELECT inserted, closed, unchanged
  FROM etl_snapshot('snap.customers', 'SELECT * FROM snap.src', '{id}', updated_at => 'updated_at',
                    check_columns => '{city}');
-- tracked again, the name opens a version dated by the row's updated_at
SELECT inserted, closed, unchanged
  FROM etl_snapshot('snap.customers', 'SELECT * FROM snap.src', '{id}', updated_at => 'updated_at');
SELECT id, name, valid_from, valid_to FROM snap.customers WHERE id = 1 ORDER BY valid_from;
-- a key is never current twice
SELECT id, count(*) FROM snap.customers WHERE valid_to IS NULL GROUP BY id HAVING count(*) > 1;

-- run_key: the same batch under the same run_key is skipped, read-only
SELECT inserted, unchanged, skipped
  FROM etl_snapshot('snap.customers', 'SELECT * FROM snap.src', '{id}', updated_at => 'updated_at',
                    run_key => '2026-01-04');
SELECT inserted, unchanged, skipped
  FROM etl_snapshot('snap.customers', 'SELECT * FROM snap.src', '{id}', updated_at => 'updated_at',
                    run_key => '2026-01-04');
SELECT operation, run_key, skipped FROM idem_etl.runs ORDER BY run_id DESC LIMIT 2;

-- composite keys, other column names, a sentinel for current versions, and
-- is_deleted
CREATE TABLE snap.prices (
    shop     text,
    sku      int,
    price    numeric,
    from_ts  timestamptz NOT NULL,
    to_ts    timestamptz NOT NULL,
    gone     boolean NOT NULL
);
CREATE UNIQUE INDEX ON snap.prices (shop, sku) WHERE to_ts = 'infinity';
SELECT line FROM regexp_split_to_table(etl_snapshot_ddl('snap.prices', '{shop,sku}', 'from_ts', 'to_ts', 'infinity'), E'\n') AS line
 WHERE line LIKE 'CREATE UNIQUE%';
CREATE TABLE snap.price_src (shop text, sku int, price numeric);
INSERT INTO snap.price_src VALUES ('a', 1, 1.0), ('a', 2, 2.0), ('b', 1, 3.0);
SELECT inserted, closed, unchanged
  FROM etl_snapshot('snap.prices', 'SELECT * FROM snap.price_src', '{shop,sku}',
                    valid_at => '2026-01-01 00:00+00', valid_from_column => 'from_ts',
                    valid_to_column => 'to_ts', current_valid_to => 'infinity',
                    is_deleted_column => 'gone');
-- 1.0 -> 1.00 is a change: the stored bytes would change
UPDATE snap.price_src SET price = 1.00 WHERE shop = 'a' AND sku = 1;
UPDATE snap.price_src SET price = 5 WHERE shop = 'b';
SELECT inserted, closed, unchanged
  FROM etl_snapshot('snap.prices', 'SELECT * FROM snap.price_src', '{shop,sku}',
                    valid_at => '2026-01-02 00:00+00', valid_from_column => 'from_ts',
                    valid_to_column => 'to_ts', current_valid_to => 'infinity',
                    is_deleted_column => 'gone');
SELECT shop, sku, price, from_ts, to_ts, gone FROM snap.prices ORDER BY shop, sku, from_ts;

-- a snapshot that wrote rows is a change for the run_key skips of the
-- replacements of the same table: their rerun applies again
CREATE TABLE snap.mixed (d date NOT NULL, id int, v text, valid_from timestamptz, valid_to timestamptz);
SELECT rows_loaded, skipped FROM etl_replace_partition('snap.mixed', '2026-01-01',
    $q$SELECT '2026-01-01'::date AS d, 1 AS id, 'a' AS v, '2026-01-01 00:00+00'::timestamptz AS valid_from$q$,
    partition_column => 'd', run_key => 'r1');
SELECT inserted FROM etl_snapshot('snap.mixed', $q$SELECT '2026-01-01'::date AS d, 1 AS id, 'b' AS v$q$, '{id}',
                                  valid_at => '2026-01-02 00:00+00');
SELECT rows_loaded, skipped FROM etl_replace_partition('snap.mixed', '2026-01-01',
    $q$SELECT '2026-01-01'::date AS d, 1 AS id, 'a' AS v, '2026-01-01 00:00+00'::timestamptz AS valid_from$q$,
    partition_column => 'd', run_key => 'r1');
SELECT d, id, v FROM snap.mixed;

DROP SCHEMA snap CASCADE;
