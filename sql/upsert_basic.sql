--
-- upsert_basic: point 1 of etl_upsert_batch (idempotent).
-- An identical rerun reports unchanged = N, writes no new row version (xmin
-- and ctid of every row stay the same) and leaves no dead tuple, also for
-- columns whose types have no equality operator (json, point, xml).
--
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS idem_etl CASCADE;
CREATE EXTENSION idem_etl;
DROP SCHEMA IF EXISTS basic CASCADE;
RESET client_min_messages;

CREATE SCHEMA basic;

CREATE TABLE basic.items (
    id   int PRIMARY KEY,
    name text,
    qty  int,
    doc  json,
    pos  point,
    x    xml,
    note text
);

-- the batch: same columns, no key (a plain staging table)
CREATE TABLE basic.batch (LIKE basic.items);
INSERT INTO basic.batch VALUES
    (1, 'apple', 10,   '{"color": "red"}',        '(1,2)',       '<a>1</a>',         NULL),
    (2, 'pear',  NULL, '[1, 2, 3]',               '(0,0)',       '<b/>',             'n2'),
    (3, 'plum',  7,    NULL,                      NULL,          NULL,               NULL),
    (4, 'fig',   0,    '{"k": {"nested": true}}', '(-1.5,2.25)', '<c x="1">t</c>',   '');

-- per-row physical version of the target, to compare before and after
CREATE TABLE basic.versions (id int, xmin_before text, ctid_before text, xmax_before text);
CREATE FUNCTION basic.save_versions() RETURNS void LANGUAGE sql AS $$
    DELETE FROM basic.versions;
    INSERT INTO basic.versions SELECT id, xmin::text, ctid::text, xmax::text FROM basic.items;
$$;
-- same_version: t = the row was not rewritten, f = new row version, NULL = new row;
-- not_locked: xmax unchanged (ON CONFLICT ... DO UPDATE ... WHERE <changed> would
-- leave the locker's xid in xmax of every conflicting row it did not update)
CREATE VIEW basic.rewritten AS
SELECT i.id, (i.xmin::text = v.xmin_before AND i.ctid::text = v.ctid_before) AS same_version,
       i.xmax::text = v.xmax_before AS not_locked
  FROM basic.items i LEFT JOIN basic.versions v USING (id);

-- the target equals the batch (compared as text: json, point, xml have no =)
CREATE VIEW basic.diff AS
(SELECT 'only in target' AS side, t::text AS row FROM basic.items t
 EXCEPT SELECT 'only in target', b::text FROM basic.batch b)
UNION ALL
(SELECT 'only in batch', b::text FROM basic.batch b
 EXCEPT SELECT 'only in batch', t::text FROM basic.items t);

CREATE VIEW basic.stats AS
SELECT n_tup_ins, n_tup_upd, n_tup_del, n_dead_tup
  FROM pg_stat_user_tables WHERE relid = 'basic.items'::regclass;

-- first load: everything is inserted
SELECT inserted, updated, unchanged, deleted, skipped
  FROM etl_upsert_batch('basic.items', 'TABLE basic.batch');
SELECT * FROM basic.items ORDER BY id;
SELECT * FROM basic.diff;
SELECT pg_stat_force_next_flush();
SELECT * FROM basic.stats;
SELECT basic.save_versions();

-- identical rerun: all unchanged, no row rewritten
SELECT inserted, updated, unchanged, deleted, skipped
  FROM etl_upsert_batch('basic.items', 'TABLE basic.batch');
-- and again, the same rows in another physical order
SELECT inserted, updated, unchanged, deleted, skipped
  FROM etl_upsert_batch('basic.items', 'SELECT * FROM basic.batch ORDER BY id DESC');
-- and a third time, with the key named explicitly
SELECT inserted, updated, unchanged, deleted, skipped
  FROM etl_upsert_batch('basic.items', 'TABLE basic.batch', key_columns => ARRAY['id']);
SELECT * FROM basic.rewritten ORDER BY id;
SELECT * FROM basic.diff;
SELECT pg_stat_force_next_flush();
-- no update, no delete, no dead tuple since the first load
SELECT * FROM basic.stats;

-- a batch with some changes: only the changed rows get new versions
UPDATE basic.batch SET qty = 5 WHERE id = 2;                        -- NULL -> value
UPDATE basic.batch SET note = NULL WHERE id = 4;                    -- '' -> NULL
UPDATE basic.batch SET x = '<a>2</a>' WHERE id = 1;                 -- xml
INSERT INTO basic.batch VALUES (5, 'kiwi', 1, '{}', '(5,5)', '<k/>', NULL);
SELECT basic.save_versions();
SELECT inserted, updated, unchanged, deleted, skipped
  FROM etl_upsert_batch('basic.items', 'TABLE basic.batch');
SELECT * FROM basic.rewritten ORDER BY id;
SELECT * FROM basic.diff;
SELECT pg_stat_force_next_flush();
SELECT * FROM basic.stats;

-- a change in json text alone (whitespace) is a change: json keeps its text
UPDATE basic.batch SET doc = '{"k":{"nested":true}}' WHERE id = 4;
SELECT basic.save_versions();
SELECT inserted, updated, unchanged, deleted, skipped
  FROM etl_upsert_batch('basic.items', 'TABLE basic.batch');
SELECT * FROM basic.rewritten ORDER BY id;
SELECT doc FROM basic.items WHERE id = 4;

-- a change in a point alone
UPDATE basic.batch SET pos = '(0,0.5)' WHERE id = 2;
SELECT basic.save_versions();
SELECT inserted, updated, unchanged, deleted, skipped
  FROM etl_upsert_batch('basic.items', 'TABLE basic.batch');
SELECT * FROM basic.rewritten ORDER BY id;

-- value -> NULL in json, point and xml
UPDATE basic.batch SET doc = NULL, pos = NULL, x = NULL WHERE id = 1;
SELECT basic.save_versions();
SELECT inserted, updated, unchanged, deleted, skipped
  FROM etl_upsert_batch('basic.items', 'TABLE basic.batch');
SELECT * FROM basic.rewritten ORDER BY id;
SELECT * FROM basic.diff;

-- now apply the final batch again, several times: nothing moves any more
SELECT basic.save_versions();
SELECT pg_stat_force_next_flush();
CREATE TEMP TABLE stats_before AS SELECT * FROM basic.stats;
SELECT inserted, updated, unchanged, deleted, skipped
  FROM etl_upsert_batch('basic.items', 'TABLE basic.batch');
SELECT inserted, updated, unchanged, deleted, skipped
  FROM etl_upsert_batch('basic.items', 'TABLE basic.batch');
SELECT inserted, updated, unchanged, deleted, skipped
  FROM etl_upsert_batch('basic.items', 'SELECT * FROM basic.batch ORDER BY random()');
SELECT * FROM basic.rewritten ORDER BY id;
SELECT * FROM basic.diff;
SELECT pg_stat_force_next_flush();
-- differences in the counters since before the three reruns: all zero
SELECT s.n_tup_ins - b.n_tup_ins AS ins, s.n_tup_upd - b.n_tup_upd AS upd,
       s.n_tup_del - b.n_tup_del AS del, s.n_dead_tup - b.n_dead_tup AS new_dead
  FROM basic.stats s, stats_before b;

-- an empty batch changes nothing and returns zeros
SELECT inserted, updated, unchanged, deleted, skipped
  FROM etl_upsert_batch('basic.items', 'SELECT * FROM basic.batch WHERE false');
SELECT count(*) FROM basic.items;

-- a larger batch (staged, not held in memory): first load, then identical rerun
CREATE TABLE basic.big (id bigint PRIMARY KEY, v text, j json);
SELECT inserted, updated, unchanged, deleted, skipped
  FROM etl_upsert_batch('basic.big',
       $$SELECT g AS id, md5(g::text) AS v, json_build_object('g', g) AS j FROM generate_series(1, 20000) g$$);
CREATE TEMP TABLE big_versions AS SELECT id, xmin::text AS xm, ctid::text AS ct, xmax::text AS xx FROM basic.big;
SELECT inserted, updated, unchanged, deleted, skipped
  FROM etl_upsert_batch('basic.big',
       $$SELECT g AS id, md5(g::text) AS v, json_build_object('g', g) AS j FROM generate_series(20000, 1, -1) g$$);
SELECT count(*) AS rewritten_rows
  FROM basic.big b JOIN big_versions v USING (id)
 WHERE b.xmin::text <> v.xm OR b.ctid::text <> v.ct;
SELECT count(*) AS locked_rows FROM basic.big b JOIN big_versions v USING (id) WHERE b.xmax::text <> v.xx;
-- one row in 20000 changed: exactly one new row version
SELECT inserted, updated, unchanged, deleted, skipped
  FROM etl_upsert_batch('basic.big',
       $$SELECT g AS id, CASE WHEN g = 777 THEN 'changed' ELSE md5(g::text) END AS v,
                json_build_object('g', g) AS j FROM generate_series(1, 20000) g$$);
SELECT id FROM basic.big b JOIN big_versions v USING (id)
 WHERE b.xmin::text <> v.xm OR b.ctid::text <> v.ct OR b.xmax::text <> v.xx;
-- a batch as large as its (analyzed) target may be merge-joined with it
-- instead of probing the key index row by row: the same outcome, rows
-- written in key order, unchanged ones left alone
ANALYZE basic.big;
DELETE FROM big_versions;
INSERT INTO big_versions SELECT id, xmin::text, ctid::text, xmax::text FROM basic.big;
SELECT inserted, updated, unchanged, deleted, skipped
  FROM etl_upsert_batch('basic.big',
       $$SELECT g AS id, CASE WHEN g % 1000 = 0 THEN 'again' ELSE md5(g::text) END AS v,
                json_build_object('g', g) AS j FROM generate_series(20001, -4999, -1) g$$);
SELECT count(*) FILTER (WHERE v = 'again') AS changed, count(*) FILTER (WHERE id <= 0 OR id > 20000) AS new,
       count(*) FILTER (WHERE (b.xmin::text, b.ctid::text, b.xmax::text) = (v.xm, v.ct, v.xx)) AS untouched
  FROM basic.big b LEFT JOIN big_versions v USING (id);

-- the result is one row
SELECT count(*), bool_and(run_id IS NOT NULL) AS has_run_id
  FROM etl_upsert_batch('basic.items', 'TABLE basic.batch');

DROP TABLE stats_before, big_versions;
SET client_min_messages = warning;
DROP SCHEMA basic CASCADE;
DROP EXTENSION idem_etl;
RESET client_min_messages;
