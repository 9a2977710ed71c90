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
RESET work_mem;

-- order_by over a column the source does not have: 42703
SELECT * FROM dups.err($$SELECT * FROM etl_upsert_batch('dups.t', 'TABLE dups.b', order_by => 'nonesuch DESC')$$);

SET client_min_messages = warning;
DROP SCHEMA dups CASCADE;
DROP EXTENSION idem_etl;
RESET client_min_messages;
