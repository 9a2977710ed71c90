--
-- upsert_duplicates: point 4 of etl_upsert_batch (duplicate keys in one batch).
-- Exact duplicates collapse silently; differing rows sharing a key without
-- order_by: 21000 naming one key and the number of keys, hint: pass
-- order_by; with order_by the first row wins; a tie for first place between
-- differing rows: the same 21000.
--
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS idem_etl CASCADE;
CREATE EXTENSION idem_etl;
DROP SCHEMA IF EXISTS dups CASCADE;
RESET client_min_messages;

CREATE SCHEMA dups;

\set schema dups
\i sql/include/err.sql

CREATE TABLE dups.t (id int PRIMARY KEY, v text, ts int, doc json, pos point);

-- the batch lives in a staging table so that its physical order can be varied
CREATE TABLE dups.b (id int, v text, ts int, doc json, pos point);

--
-- exact duplicates collapse, also with NULLs and with json/point (no = operator)
--
INSERT INTO dups.b VALUES
    (1, 'a', 1, '{"x": 1}', '(1,1)'),
    (1, 'a', 1, '{"x": 1}', '(1,1)'),
    (2, NULL, NULL, NULL, NULL),
    (2, NULL, NULL, NULL, NULL),
    (2, NULL, NULL, NULL, NULL),
    (3, 'c', 3, '[]', '(0,0)');
SELECT inserted, updated, unchanged, deleted, skipped FROM etl_upsert_batch('dups.t', 'TABLE dups.b');
SELECT * FROM dups.t ORDER BY id;
SELECT inserted, updated, unchanged, deleted, skipped FROM etl_upsert_batch('dups.t', 'TABLE dups.b');

--
-- differing rows sharing a key, no order_by: 21000, nothing written
--
TRUNCATE dups.b;
INSERT INTO dups.b VALUES (1, 'a', 1, NULL, NULL), (1, 'b', 1, NULL, NULL), (4, 'd', 1, NULL, NULL);
SELECT * FROM dups.err($$SELECT * FROM etl_upsert_batch('dups.t', 'TABLE dups.b')$$);
-- differing only by NULL against a value
TRUNCATE dups.b;
INSERT INTO dups.b VALUES (3, 'c', 3, '[]', NULL), (3, 'c', 3, '[]', '(0,0)');
SELECT * FROM dups.err($$SELECT * FROM etl_upsert_batch('dups.t', 'TABLE dups.b')$$);
-- differing only in a json value's text
TRUNCATE dups.b;
INSERT INTO dups.b VALUES (1, 'a', 1, '{"x": 1}', '(1,1)'), (1, 'a', 1, '{"x":1}', '(1,1)');
SELECT * FROM dups.err($$SELECT * FROM etl_upsert_batch('dups.t', 'TABLE dups.b')$$);
-- three keys affected: the message counts them
TRUNCATE dups.b;
INSERT INTO dups.b VALUES (5, 'x', 1, NULL, NULL), (5, 'y', 1, NULL, NULL),
                          (6, 'x', 1, NULL, NULL), (6, 'y', 1, NULL, NULL),
                          (7, 'x', 1, NULL, NULL), (7, 'y', 1, NULL, NULL),
                          (8, 'x', 1, NULL, NULL);
SELECT * FROM dups.err($$SELECT * FROM etl_upsert_batch('dups.t', 'TABLE dups.b')$$);
SELECT * FROM dups.t ORDER BY id;

--
-- order_by: the first row by that ordering wins, per key
--
TRUNCATE dups.b;
INSERT INTO dups.b VALUES (1, 'old', 1, NULL, NULL), (1, 'newest', 3, NULL, NULL), (1, 'mid', 2, NULL, NULL),
                          (4, 'd-new', 9, NULL, NULL), (4, 'd-old', 8, NULL, NULL);
SELECT inserted, updated, unchanged, deleted, skipped
  FROM etl_upsert_batch('dups.t', 'TABLE dups.b', order_by => 'ts DESC');
SELECT id, v, ts FROM dups.t WHERE id IN (1, 4) ORDER BY id;
-- the opposite ordering picks the other end
SELECT inserted, updated, unchanged, deleted, skipped
  FROM etl_upsert_batch('dups.t', 'TABLE dups.b', order_by => 'ts');
SELECT id, v, ts FROM dups.t WHERE id IN (1, 4) ORDER BY id;
-- an expression
SELECT inserted, updated, unchanged, deleted, skipped
  FROM etl_upsert_batch('dups.t', 'TABLE dups.b', order_by => 'length(v) DESC, v');
SELECT id, v, ts FROM dups.t WHERE id IN (1, 4) ORDER BY id;

-- the result does not depend on the physical order of the batch
CREATE TABLE dups.t2 (LIKE dups.t INCLUDING ALL);
CREATE TABLE dups.b2 AS SELECT * FROM dups.b ORDER BY id DESC, ts;
SELECT inserted, updated, unchanged, deleted, skipped
  FROM etl_upsert_batch('dups.t', 'TABLE dups.b', order_by => 'ts DESC');
SELECT inserted, updated, unchanged, deleted, skipped
  FROM etl_upsert_batch('dups.t2', 'TABLE dups.b2', order_by => 'ts DESC');
SELECT (SELECT string_agg(t::text, ' ' ORDER BY id) FROM dups.t t WHERE id IN (1, 4))
     = (SELECT string_agg(t::text, ' ' ORDER BY id) FROM dups.t2 t) AS same_result;

-- ties below first place do not matter
TRUNCATE dups.b;
INSERT INTO dups.b VALUES (1, 'winner', 5, NULL, NULL), (1, 'loser a', 1, NULL, NULL), (1, 'loser b', 1, NULL, NULL);
SELECT inserted, updated, unchanged, deleted, skipped
  FROM etl_upsert_batch('dups.t', 'TABLE dups.b', order_by => 'ts DESC');
SELECT id, v, ts FROM dups.t WHERE id = 1;
-- identical rows tied for first place are one row
TRUNCATE dups.b;
INSERT INTO dups.b VALUES (1, 'same', 7, NULL, NULL), (1, 'same', 7, NULL, NULL), (1, 'other', 6, NULL, NULL);
SELECT inserted, updated, unchanged, deleted, skipped
  FROM etl_upsert_batch('dups.t', 'TABLE dups.b', order_by => 'ts DESC');
SELECT id, v, ts FROM dups.t WHERE id = 1;

-- differing rows tied for first place: 21000, nothing written
TRUNCATE dups.b;
INSERT INTO dups.b VALUES (1, 'tie a', 9, NULL, NULL), (1, 'tie b', 9, NULL, NULL), (1, 'older', 2, NULL, NULL),
                          (4, 'fine', 1, NULL, NULL);
SELECT * FROM dups.err($$SELECT * FROM etl_upsert_batch('dups.t', 'TABLE dups.b', order_by => 'ts DESC')$$);
SELECT id, v, ts FROM dups.t WHERE id IN (1, 4) ORDER BY id;
-- a tie that differs only in a json column (no = operator)
TRUNCATE dups.b;
INSERT INTO dups.b VALUES (1, 'j', 9, '{"a": 1}', NULL), (1, 'j', 9, '{"a": 2}', NULL);
SELECT * FROM dups.err($$SELECT * FROM etl_upsert_batch('dups.t', 'TABLE dups.b', order_by => 'ts DESC')$$);
-- a second ordering column breaks the tie
SELECT inserted, updated, unchanged, deleted, skipped
  FROM etl_upsert_batch('dups.t', 'TABLE dups.b', order_by => 'ts DESC, doc::text DESC');
SELECT id, v, ts, doc FROM dups.t WHERE id = 1;

-- NULLs in the ordering follow ORDER BY rules: DESC puts NULLs first
TRUNCATE dups.b;
INSERT INTO dups.b VALUES (1, 'null ts', NULL, NULL, NULL), (1, 'ts 1', 1, NULL, NULL);
SELECT inserted, updated, unchanged, deleted, skipped
  FROM etl_upsert_batch('dups.t', 'TABLE dups.b', order_by => 'ts DESC');
SELECT id, v, ts FROM dups.t WHERE id = 1;
SELECT inserted, updated, unchanged, deleted, skipped
  FROM etl_upsert_batch('dups.t', 'TABLE dups.b', order_by => 'ts DESC NULLS LAST');
SELECT id, v, ts FROM dups.t WHERE id = 1;

-- more keys than work_mem holds the hashes of (64kB: 8,192): the sort that
-- picks the winners finds the duplicates instead, with the same results
SET work_mem = '64kB';
CREATE TABLE dups.big (id int PRIMARY KEY, v text, ts int);
SELECT inserted, updated, unchanged FROM etl_upsert_batch('dups.big',
    'SELECT g AS id, ''v'' || g AS v, 1 AS ts FROM generate_series(1, 20000) g');
-- every key twice, exact duplicates: nothing changes
SELECT inserted, updated, unchanged FROM etl_upsert_batch('dups.big',
    'SELECT g AS id, ''v'' || g AS v, 1 AS ts FROM generate_series(1, 20000) g, generate_series(1, 2)');
-- an older and a newer row for each key: the newest wins
SELECT inserted, updated, unchanged FROM etl_upsert_batch('dups.big',
    'SELECT g AS id, ''w'' || (g + t) AS v, t AS ts FROM generate_series(1, 20000) g, generate_series(1, 2) t',
    order_by => 'ts DESC');
SELECT count(*) FILTER (WHERE v = 'w' || (id + 2) AND ts = 2) AS newest, count(*) FROM dups.big;
-- one key with differing rows among 20,000: 21000
SELECT * FROM dups.err($$SELECT * FROM etl_upsert_batch('dups.big',
    'SELECT g AS id, ''w'' || (g + 2) AS v, 2 AS ts FROM generate_series(1, 20000) g UNION ALL SELECT 777, ''other'', 2')$$);
-- Beyond work_mem the key hashes go to temporary files by their top bits
-- (4 files at 64kB); a file of more than 8,192 is split again by the next
-- bits.  40,000 distinct keys (about 10,000 a file): every file is split
-- once.
CREATE TABLE dups.huge (id int PRIMARY KEY, v text, ts int);
SELECT inserted, updated, unchanged FROM etl_upsert_batch('dups.huge',
    'SELECT g AS id, ''h'' || g AS v, 1 AS ts FROM generate_series(1, 40000) g');
-- one differing duplicate among them, last: found in a split file, 21000
SELECT * FROM dups.err($$SELECT * FROM etl_upsert_batch('dups.huge',
    'SELECT g AS id, ''h'' || g AS v, 1 AS ts FROM generate_series(1, 40000) g UNION ALL SELECT 39999, ''other'', 1')$$);
-- 10,000 rows of one key after 20,000 others: its file is split down to the
-- last bit and still holds them all; exact copies are one row
SELECT inserted, updated, unchanged FROM etl_upsert_batch('dups.huge',
    $$SELECT g AS id, 'i' || g AS v, 1 AS ts FROM generate_series(1, 20000) g
      UNION ALL SELECT 5, 'i5', 1 FROM generate_series(1, 10000)$$);
SELECT id, v FROM dups.huge WHERE id IN (5, 6) ORDER BY id;
-- and one of them differing: 21000
SELECT * FROM dups.err($$SELECT * FROM etl_upsert_batch('dups.huge',
    $q$SELECT g AS id, 'i' || g AS v, 1 AS ts FROM generate_series(1, 20000) g
       UNION ALL SELECT 5, 'i5', 1 FROM generate_series(1, 10000)
       UNION ALL SELECT 5, 'j5', 1$q$)$$);
-- A run skipped by its run_key never checks its keys: their files are
-- closed all the same, without "temporary file leak" warnings.
SELECT inserted, skipped FROM etl_upsert_batch('dups.huge',
    'SELECT g AS id, ''k'' || g AS v, 1 AS ts FROM generate_series(1, 20000) g', run_key => 'spilled');
SELECT inserted, skipped FROM etl_upsert_batch('dups.huge',
    'SELECT g AS id, ''k'' || g AS v, 1 AS ts FROM generate_series(1, 20000) g', run_key => 'spilled');
RESET work_mem;

--
-- Rows that cannot win their key are recognised while the batch is staged,
-- and not staged (DEBUG1 says how many rows were): exact copies, and rows
-- order_by puts after another row of their key.  A batch of many rows over
-- few keys is not staged and sorted whole.  Nothing else changes.
--
CREATE TABLE dups.few (id int PRIMARY KEY, v text, doc json);
SET client_min_messages = debug1;
SELECT inserted, updated, unchanged FROM etl_upsert_batch('dups.few',
    'SELECT g % 100 AS id, ''v'' || g % 100 AS v, ''{"k": 1}''::json AS doc FROM generate_series(1, 200000) g');
-- expect audits the batch as the source produced it: every row staged
SELECT inserted, updated, unchanged FROM etl_upsert_batch('dups.few',
    'SELECT g % 100 AS id, ''v'' || g % 100 AS v, ''{"k": 1}''::json AS doc FROM generate_series(1, 200000) g',
    expect => 'count(*) = 200000');
RESET client_min_messages;
SELECT count(*), min(id), max(id), min(v), max(v) FROM dups.few;
-- the copies count in the fingerprint and the ledger: the same batch again
-- under its run_key is skipped, one copy more is another batch
SELECT skipped FROM etl_upsert_batch('dups.few',
    'SELECT g % 100 AS id, ''v'' || g % 100 AS v, ''{"k": 1}''::json AS doc FROM generate_series(1, 200000) g',
    run_key => 'few');
SELECT skipped FROM etl_upsert_batch('dups.few',
    'SELECT g % 100 AS id, ''v'' || g % 100 AS v, ''{"k": 1}''::json AS doc FROM generate_series(1, 200000) g',
    run_key => 'few');
SELECT skipped, unchanged FROM etl_upsert_batch('dups.few',
    'SELECT g % 100 AS id, ''v'' || g % 100 AS v, ''{"k": 1}''::json AS doc FROM generate_series(1, 200001) g',
    run_key => 'few');
SELECT batch_rows, skipped, corrects IS NOT NULL AS corrects FROM idem_etl.runs
 WHERE run_key = 'few' ORDER BY run_id;
-- one differing row among the copies: 21000, one key
SELECT * FROM dups.err($$SELECT * FROM etl_upsert_batch('dups.few',
    'SELECT g % 100 AS id, CASE g WHEN 777 THEN ''other'' ELSE ''v'' || g % 100 END AS v, ''{"k": 1}''::json AS doc FROM generate_series(1, 200000) g')$$);
-- differing only in json text, which has no = operator: 21000 too
SELECT * FROM dups.err($$SELECT * FROM etl_upsert_batch('dups.few',
    'SELECT g % 100 AS id, ''v'' || g % 100 AS v, CASE g WHEN 777 THEN ''{"k":1}'' ELSE ''{"k": 1}'' END::json AS doc FROM generate_series(1, 200000) g')$$);
-- order_by: copies of an older and of a newer row per key, the newer wins
CREATE TABLE dups.fewts (id int PRIMARY KEY, v text, ts int);
SET client_min_messages = debug1;
SELECT inserted, updated, unchanged FROM etl_upsert_batch('dups.fewts',
    'SELECT g % 100 AS id, ''v'' || g % 100 || ''@'' || g / 100 % 2 AS v, g / 100 % 2 AS ts FROM generate_series(1, 200000) g',
    order_by => 'ts DESC');
RESET client_min_messages;
SELECT count(*) FILTER (WHERE ts = 1 AND v = 'v' || id || '@1') AS newest, count(*) FROM dups.fewts;
-- every row differs, the newest of each key wins: the same table as DISTINCT ON
CREATE FUNCTION dups.fewts_batch() RETURNS TABLE (id int, v text, ts int) LANGUAGE sql AS
  $$SELECT (g * 7) % 100, 'w' || g, (g * 7919) % 100003 FROM generate_series(1, 100000) g$$;
SET client_min_messages = debug1;
SELECT inserted, updated, unchanged FROM etl_upsert_batch('dups.fewts',
    'SELECT * FROM dups.fewts_batch()', order_by => 'ts DESC');
RESET client_min_messages;
SELECT count(*) FROM (SELECT * FROM dups.fewts
                      EXCEPT (SELECT DISTINCT ON (id) * FROM dups.fewts_batch() ORDER BY id, ts DESC)) d;
-- volatile functions or subqueries in order_by: left to the sort (a key's
-- rows are collapsed while staging only while they are copies of one row:
-- no DEBUG1 here); the same winners
CREATE FUNCTION dups.vol(int) RETURNS int LANGUAGE sql VOLATILE AS 'SELECT $1';
SET client_min_messages = debug1;
SELECT inserted, updated, unchanged FROM etl_upsert_batch('dups.fewts',
    'SELECT id, v, ts + 1 AS ts FROM dups.fewts_batch(), generate_series(1, 2)', order_by => 'dups.vol(ts) DESC');
SELECT inserted, updated, unchanged FROM etl_upsert_batch('dups.fewts',
    'SELECT id, v, ts + 2 AS ts FROM dups.fewts_batch()', order_by => 'ts DESC, (SELECT 0)');
RESET client_min_messages;
SELECT count(*) FILTER (WHERE (id, v, ts - 2) IN (SELECT DISTINCT ON (id) * FROM dups.fewts_batch() ORDER BY id, ts DESC)) AS same,
       count(*) FROM dups.fewts;
-- two differing rows tie for first place, then a third beats them: no error
SELECT inserted, updated, unchanged FROM etl_upsert_batch('dups.fewts',
    $$SELECT id, v, ts FROM (VALUES (1, 'tie-a', 5, 1), (1, 'tie-b', 5, 2), (1, 'tie-a', 5, 3), (1, 'best', 9, 4),
                                    (1, 'tie-b', 5, 5), (1, 'low', 0, 6)) s(id, v, ts, o) ORDER BY o$$,
    order_by => 'ts DESC');
SELECT * FROM dups.fewts WHERE id = 1;
-- NULLS FIRST/LAST and collations as ORDER BY has them
CREATE TABLE dups.coll (id int PRIMARY KEY, v text COLLATE "C", ts int);
SET client_min_messages = debug1;
SELECT inserted FROM etl_upsert_batch('dups.coll',
    $$SELECT g % 3 AS id, (ARRAY['a', 'B', 'b', 'A'])[g % 4 + 1] AS v, NULLIF(g % 5, 0) AS ts FROM generate_series(1, 60) g$$,
    order_by => 'v DESC, ts DESC NULLS LAST');
SELECT * FROM dups.coll ORDER BY id;
SELECT inserted, updated FROM etl_upsert_batch('dups.coll',
    $$SELECT g % 3 AS id, (ARRAY['a', 'B', 'b', 'A'])[g % 4 + 1] AS v, NULLIF(g % 5, 0) AS ts FROM generate_series(1, 60) g$$,
    order_by => 'v COLLATE "C" ASC, ts DESC');
RESET client_min_messages;
SELECT * FROM dups.coll ORDER BY id;
-- keys equal for the index but not in binary image (numeric 1.0, 1.00): the
-- sort decides between them
CREATE TABLE dups.num (id numeric PRIMARY KEY, v text, ts int);
SELECT inserted FROM etl_upsert_batch('dups.num',
    $$SELECT id, v, ts FROM (VALUES (1.0, 'one', 1, 1), (1.00, 'two', 2, 2), (1.0, 'one', 1, 3)) s(id, v, ts, o) ORDER BY o$$,
    order_by => 'ts DESC');
SELECT * FROM dups.num;
-- copies of two differing rows tied for first place: 21000
SELECT * FROM dups.err($$SELECT * FROM etl_upsert_batch('dups.fewts',
    'SELECT g % 100 AS id, ''v'' || g % 100 || ''@'' || g / 100 % 2 AS v, 7 AS ts FROM generate_series(1, 200000) g',
    order_by => 'ts DESC')$$);

-- Whether holding rows pays is looked at when the table holds 1,024 keys,
-- 2,048, ...: 20,000 distinct rows and then their copies are staged whole
-- (no row dropped by the 1,024th key: given up), 5,000 keys twenty times
-- over in a shuffled order are staged once each (at the 1,024th key about
-- a hundred rows were dropped already)
CREATE TABLE dups.look (id int PRIMARY KEY, v text);
SET client_min_messages = debug1;
SELECT inserted, unchanged FROM etl_upsert_batch('dups.look',
    $$SELECT g AS id, 'v' || g AS v FROM generate_series(1, 20000) g
      UNION ALL SELECT g, 'v' || g FROM generate_series(1, 20000) g$$);
SELECT inserted, unchanged FROM etl_upsert_batch('dups.look',
    $$SELECT id, 'v' || id AS v FROM (SELECT abs(hashint4(g)) % 5000 AS id FROM generate_series(1, 100000) g) s$$);
RESET client_min_messages;

-- The copies are remembered in at most work_mem.  Copies that come first
-- keep the table in use once it is full: later copies of the rows it holds
-- are still recognised, other rows are staged.
SET work_mem = '64kB';
SET client_min_messages = debug1;
SELECT inserted, updated, unchanged FROM etl_upsert_batch('dups.big',
    $$SELECT id, v, ts FROM (
             SELECT 1 AS o, g % 100 AS id, 'c' || g % 100 AS v, 0 AS ts FROM generate_series(1, 1000) g
             UNION ALL SELECT 2, g, 'd' || g, 0 FROM generate_series(100, 20099) g
             UNION ALL SELECT 3, g % 100, 'c' || g % 100, 0 FROM generate_series(1, 1000) g) s
      ORDER BY o$$);
RESET client_min_messages;
-- the same with copies of rows it could not hold: the sort finds those
SELECT inserted, updated, unchanged FROM etl_upsert_batch('dups.big',
    $$SELECT id, v, ts FROM (
             SELECT 1 AS o, g % 100 AS id, 'c' || g % 100 AS v, 1 AS ts FROM generate_series(1, 1000) g
             UNION ALL SELECT 2, g, 'd' || g, 1 FROM generate_series(100, 20099) g
             UNION ALL SELECT 3, g % 100, 'c' || g % 100, 1 FROM generate_series(1, 1000) g
             UNION ALL SELECT 4, g, 'd' || g, 1 FROM generate_series(100, 20099, 7) g) s
      ORDER BY o$$);
SELECT count(*) FILTER (WHERE v = CASE WHEN id < 100 THEN 'c' ELSE 'd' END || id AND ts = 1) AS c_d,
       count(*) FROM dups.big;
-- a batch whose first work_mem of rows has no copies is staged whole: the
-- sort finds its duplicates, with the same results
SET client_min_messages = debug1;
SELECT inserted, updated, unchanged FROM etl_upsert_batch('dups.big',
    $$SELECT g AS id, 'e' || g AS v, 0 AS ts FROM generate_series(1, 20000) g
      UNION ALL SELECT g, 'e' || g, 0 FROM generate_series(1, 20000) g$$);
RESET client_min_messages;
SELECT count(*) FILTER (WHERE v = 'e' || id) AS e, count(*) FROM dups.big;
RESET work_mem;

-- order_by over a column the source does not have: 42703
SELECT * FROM dups.err($$SELECT * FROM etl_upsert_batch('dups.t', 'TABLE dups.b', order_by => 'nonesuch DESC')$$);

SET client_min_messages = warning;
DROP SCHEMA dups CASCADE;
DROP EXTENSION idem_etl;
RESET client_min_messages;
