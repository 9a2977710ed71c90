--
-- upsert_shapes: issue 10, points 6, 10 and 11.  The target is the named
-- table (as for INSERT ... ON CONFLICT): rows of inheriting tables are
-- neither matched nor deleted.  No alias idem_etl invents can hide, or be
-- hidden by, a user's table or column name.  Keys: deferrable constraints
-- are refused by name, an index repeating a column is no key, key_columns
-- must be one-dimensional.
--
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS idem_etl CASCADE;
CREATE EXTENSION idem_etl;
DROP SCHEMA IF EXISTS ushape CASCADE;
RESET client_min_messages;
CREATE SCHEMA ushape;
\set schema ushape
\i sql/include/err.sql

-- point 6: inheritance.  The hand-written statement, on a copy:
CREATE TABLE ushape.cities (name text PRIMARY KEY, pop int);
CREATE TABLE ushape.capitals (state text) INHERITS (ushape.cities);
CREATE UNIQUE INDEX ON ushape.capitals (name);
INSERT INTO ushape.capitals VALUES ('Paris', 1, 'fr'), ('Rome', 2, 'it');
INSERT INTO ushape.cities VALUES ('Rome', 2);
BEGIN;
INSERT INTO ushape.cities VALUES ('Paris', 1), ('Rome', 3)
    ON CONFLICT (name) DO UPDATE SET pop = EXCLUDED.pop;
SELECT tableoid::regclass, * FROM ushape.cities ORDER BY 1, 2;
ROLLBACK;
-- etl_upsert_batch gives the same: Paris inserted into cities (a key present
-- only in capitals is not a match), Rome updated in cities only
SELECT inserted, updated, unchanged FROM etl_upsert_batch('ushape.cities',
    $$SELECT * FROM (VALUES ('Paris', 1), ('Rome', 3)) v(name, pop)$$);
SELECT tableoid::regclass, * FROM ushape.cities ORDER BY 1, 2;
-- rerun: nothing changes
SELECT inserted, updated, unchanged FROM etl_upsert_batch('ushape.cities',
    $$SELECT * FROM (VALUES ('Paris', 1), ('Rome', 3)) v(name, pop)$$);
-- a key in a child only, with a different value: still an insert, not 21000
SELECT inserted, updated, unchanged FROM etl_upsert_batch('ushape.cities',
    $$SELECT 'Rome' AS name, 2 AS pop UNION ALL SELECT 'Oslo', 4$$);
SELECT tableoid::regclass, * FROM ushape.cities ORDER BY 1, 2;
-- delete_missing deletes from the named table only: capitals keep theirs
SELECT deleted FROM etl_upsert_batch('ushape.cities',
    $$SELECT 'Oslo' AS name, 4 AS pop$$, delete_missing => 'true');
SELECT tableoid::regclass, * FROM ushape.cities ORDER BY 1, 2;
-- etl_replace_partition on a plain parent replaces the parent's rows only
CREATE TABLE ushape.ev (d date, id int);
CREATE TABLE ushape.ev_child () INHERITS (ushape.ev);
INSERT INTO ushape.ev_child VALUES ('2026-11-28', 9);
INSERT INTO ushape.ev VALUES ('2026-11-28', 1);
SELECT rows_loaded, rows_replaced FROM etl_replace_partition('ushape.ev', '2026-11-28',
    $$SELECT '2026-11-28'::date AS d, 2 AS id$$, partition_column => 'd');
SELECT tableoid::regclass, * FROM ushape.ev ORDER BY 1, 3;

-- point 10: a target named b, with delete_missing
CREATE TABLE ushape.b (id int PRIMARY KEY, d int);
INSERT INTO ushape.b VALUES (1, 1), (2, 1);
SELECT inserted, unchanged, deleted FROM etl_upsert_batch('ushape.b', $$SELECT 1 AS id, 1 AS d$$,
    delete_missing => 'd = 1');
SELECT * FROM ushape.b;
-- the condition may name the target by its name
INSERT INTO ushape.b VALUES (2, 1);
SELECT deleted FROM etl_upsert_batch('ushape.b', $$SELECT 1 AS id, 1 AS d$$,
    delete_missing => 'b.d = 1');
SELECT * FROM ushape.b;
-- columns named like the aliases idem_etl uses, with order_by and duplicates
CREATE TABLE ushape.ra (id int PRIMARY KEY, a int, s int, b int, t int, n int, r int,
                        idem_etl_rank int, idem_src int, k int, same int);
SELECT inserted FROM etl_upsert_batch('ushape.ra',
    $$SELECT * FROM (VALUES (1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1), (1, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2))
        v(id, a, s, b, t, n, r, idem_etl_rank, idem_src, k, same)$$,
    order_by => 'idem_etl_rank DESC');
SELECT updated FROM etl_upsert_batch('ushape.ra',
    $$SELECT * FROM (VALUES (1, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3), (1, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4))
        v(id, a, s, b, t, n, r, idem_etl_rank, idem_src, k, same)$$,
    order_by => 's');
SELECT * FROM ushape.ra;
-- exact duplicates collapse, differing ones are 21000 (the a alias)
SELECT unchanged FROM etl_upsert_batch('ushape.ra',
    $$SELECT * FROM (VALUES (1, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3), (1, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3))
        v(id, a, s, b, t, n, r, idem_etl_rank, idem_src, k, same)$$);
SELECT * FROM ushape.err($$SELECT * FROM etl_upsert_batch('ushape.ra',
    'SELECT * FROM (VALUES (1, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3), (1, 5, 3, 3, 3, 3, 3, 3, 3, 3, 3))
        v(id, a, s, b, t, n, r, idem_etl_rank, idem_src, k, same)')$$);
-- a target named a, with a column a, and delete_missing over both
CREATE TABLE ushape.a (a int PRIMARY KEY, s int);
INSERT INTO ushape.a VALUES (1, 0), (2, 0);
SELECT inserted, deleted FROM etl_upsert_batch('ushape.a', $$SELECT 3 AS a, 0 AS s$$,
    delete_missing => 'a.s = 0 AND a > 1');
SELECT * FROM ushape.a ORDER BY a;

-- point 11: keys
CREATE TABLE ushape.dk (id int PRIMARY KEY DEFERRABLE, v text);
SELECT * FROM ushape.err($$SELECT * FROM etl_upsert_batch('ushape.dk', 'SELECT 1 AS id')$$);
CREATE TABLE ushape.du (id int, v text, CONSTRAINT du_id UNIQUE (id) DEFERRABLE INITIALLY DEFERRED);
SELECT * FROM ushape.err($$SELECT * FROM etl_upsert_batch('ushape.du', 'SELECT 1 AS id', key_columns => '{id}')$$);
-- a deferrable constraint beside a plain unique index: still refused (ON
-- CONFLICT would refuse to infer its arbiter)
CREATE UNIQUE INDEX du_plain ON ushape.du (id);
SELECT * FROM ushape.err($$SELECT * FROM etl_upsert_batch('ushape.du', 'SELECT 1 AS id', key_columns => '{id}')$$);
-- an index repeating a column is no key on the other column
CREATE TABLE ushape.rep (a int, b int);
CREATE UNIQUE INDEX ON ushape.rep (a, a);
SELECT * FROM ushape.err($$SELECT * FROM etl_upsert_batch('ushape.rep', 'SELECT 1 AS a, 1 AS b', key_columns => '{a,b}')$$);
SELECT * FROM ushape.err($$SELECT * FROM etl_upsert_batch('ushape.rep', 'SELECT 1 AS a, 1 AS b', key_columns => '{a}')$$);
-- key_columns: two dimensions (2202E), duplicate names (42701)
CREATE TABLE ushape.k (id int PRIMARY KEY);
SELECT * FROM ushape.err($$SELECT * FROM etl_upsert_batch('ushape.k', 'SELECT 1 AS id', key_columns => ARRAY[['id']])$$);
SELECT * FROM ushape.err($$SELECT * FROM etl_upsert_batch('ushape.k', 'SELECT 1 AS id', key_columns => ARRAY['id', 'id'])$$);

SET client_min_messages = warning;
DROP SCHEMA ushape CASCADE;
