--
-- upsert_collapse: rows of a batch that cannot win their key are dropped
-- while it is staged (collapse.c), and that must change no result.  Every
-- case compares etl_upsert_batch with the reference semantics:
--   INSERT ... SELECT DISTINCT ON (key) * FROM batch ORDER BY key, order_by
-- when no key has differing rows tied for first place (exact copies tied
-- are one row), and SQLSTATE 21000 otherwise; without order_by every row of
-- a key is in first place.  The batch is taken with the target's column
-- types and collations, as etl_upsert_batch stages it.  DEBUG1 says how many
-- rows collapse.c dropped, shown only where that count does not depend on
-- how much fits in work_mem.
--
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS idem_etl CASCADE;
CREATE EXTENSION idem_etl;
DROP SCHEMA IF EXISTS collapse CASCADE;
RESET client_min_messages;

CREATE SCHEMA collapse;

\set schema collapse
\i sql/include/err.sql

-- check(target, source, order_by, keys, debug, expect): empty the target, run
-- etl_upsert_batch and compare with the reference over the same rows.  Prints
-- "N rows, M differ from the reference" (rows compared as text, which tells
-- numeric 1.0 from 1.00 and json '{"x":1}' from '{"x": 1}'), or both
-- outcomes when either failed.  debug: DEBUG1 during etl_upsert_batch only.
CREATE FUNCTION collapse.check(target text, source text, order_by text DEFAULT NULL,
                               keys text DEFAULT 'id', debug boolean DEFAULT false,
                               expect text DEFAULT NULL)
RETURNS text LANGUAGE plpgsql AS $f$
DECLARE
    ties bigint;
    got text;
    ref text;
    nrows bigint;
    ndiff bigint;
    msgs text := current_setting('client_min_messages');
BEGIN
    EXECUTE format('TRUNCATE %s', target);
    IF to_regclass('pg_temp.batch') IS NOT NULL THEN DROP TABLE pg_temp.batch, pg_temp.ref; END IF;
    -- the batch with the target's types, collations and typmods
    EXECUTE format('CREATE TEMP TABLE batch AS SELECT * FROM %s LIMIT 0', target);
    EXECUTE format('CREATE TEMP TABLE ref AS SELECT * FROM %s LIMIT 0', target);
    EXECUTE format('INSERT INTO pg_temp.batch SELECT * FROM (%s) x_s', source);
    BEGIN
        -- keys whose first place (by rank) holds differing rows
        EXECUTE format($q$SELECT count(*) FROM (
                              SELECT count(DISTINCT x_b::text) AS n
                                FROM (SELECT x_b, %1$s, rank() OVER (PARTITION BY %1$s %2$s) AS r
                                        FROM pg_temp.batch x_b) x
                               WHERE r = 1 GROUP BY %1$s) y WHERE n > 1$q$,
                       keys, 'ORDER BY ' || order_by) INTO ties;
        IF ties > 0 THEN
            ref := 'error 21000';
        ELSE
            EXECUTE format('INSERT INTO pg_temp.ref SELECT DISTINCT ON (%1$s) * FROM pg_temp.batch ORDER BY %1$s%2$s',
                           keys, ', ' || order_by);
        END IF;
    EXCEPTION WHEN OTHERS THEN
        ref := 'error ' || SQLSTATE;
    END;
    BEGIN
        IF debug THEN PERFORM set_config('client_min_messages', 'debug1', true); END IF;
        PERFORM etl_upsert_batch(target::regclass, source, key_columns => string_to_array(keys, ', '),
                                 order_by => order_by, expect => expect);
        PERFORM set_config('client_min_messages', msgs, true);
    EXCEPTION WHEN OTHERS THEN
        PERFORM set_config('client_min_messages', msgs, true);
        got := 'error ' || SQLSTATE;
    END;
    IF got IS NOT NULL OR ref IS NOT NULL THEN
        RETURN format('%s; reference: %s', coalesce(got, 'no error'), coalesce(ref, 'no error'));
    END IF;
    EXECUTE format('SELECT count(*) FROM %s', target) INTO nrows;
    EXECUTE format($q$SELECT count(*) FROM (
                         (SELECT x_t::text FROM %1$s x_t EXCEPT ALL SELECT x_r::text FROM pg_temp.ref x_r)
                         UNION ALL
                         (SELECT x_r::text FROM pg_temp.ref x_r EXCEPT ALL SELECT x_t::text FROM %1$s x_t)) d$q$,
                   target) INTO ndiff;
    RETURN format('%s rows, %s differ from the reference', nrows, ndiff);
END
$f$;

CREATE TABLE collapse.t (id int PRIMARY KEY, v text, ts int, doc json, pos point, arr int[], n numeric);
-- the batch, in the order of o
CREATE TABLE collapse.b (o int, id int, v text, ts int, doc json, pos point, arr int[], n numeric);
\set src 'SELECT id, v, ts, doc, pos, arr, n FROM collapse.b ORDER BY o'

--
-- The order in which a key's rows come
--
-- differing rows tie for first place, then a better row comes, then a copy
-- of a tied row: the key is left to the sort from the tie on (its held row
-- and every later row staged), and the better row wins; key 2: a copy and a
-- loser dropped
INSERT INTO collapse.b (o, id, v, ts) VALUES
    (1, 1, 'tie-a', 5), (2, 1, 'tie-b', 5), (3, 1, 'best', 9), (4, 1, 'tie-a', 5),
    (5, 2, 'x', 1), (6, 2, 'x', 1), (7, 2, 'y', 0);
SELECT collapse.check('collapse.t', :'src', 'ts DESC', debug => true);
-- the same rows, the best first: the tie below it is dropped, no error
TRUNCATE collapse.b;
INSERT INTO collapse.b (o, id, v, ts) VALUES
    (1, 1, 'best', 9), (2, 1, 'tie-a', 5), (3, 1, 'tie-b', 5), (4, 1, 'best', 9), (5, 1, 'tie-a', 5);
SELECT collapse.check('collapse.t', :'src', 'ts DESC', debug => true);
-- a loser, then the winner, then a differing row tied with it, then a copy
-- of the winner: 21000 (the loser is the only row dropped)
TRUNCATE collapse.b;
INSERT INTO collapse.b (o, id, v, ts) VALUES (1, 1, 'low', 1), (2, 1, 'a', 9), (3, 1, 'b', 9), (4, 1, 'a', 9);
SELECT collapse.check('collapse.t', :'src', 'ts DESC', debug => true);
-- copies of the winner, then a differing row tied with them: 21000
TRUNCATE collapse.b;
INSERT INTO collapse.b (o, id, v, ts) VALUES (1, 1, 'a', 9), (2, 1, 'a', 9), (3, 1, 'b', 9);
SELECT collapse.check('collapse.t', :'src', 'ts DESC', debug => true);
-- copies of a row that a later row beats, and copies of that one
TRUNCATE collapse.b;
INSERT INTO collapse.b (o, id, v, ts) VALUES (1, 1, 'a', 1), (2, 1, 'a', 1), (3, 1, 'b', 2), (4, 1, 'b', 2), (5, 1, 'a', 1);
SELECT collapse.check('collapse.t', :'src', 'ts DESC', debug => true);
SELECT collapse.check('collapse.t', :'src', 'ts', debug => true);
-- without order_by: copies collapse, and a differing row anywhere is 21000
SELECT collapse.check('collapse.t', :'src', debug => true);
DELETE FROM collapse.b WHERE v = 'b';
SELECT collapse.check('collapse.t', :'src', debug => true);

--
-- NULLs in order_by: DESC puts them first, ASC last, unless NULLS says
-- otherwise; key 2 has two differing rows with a NULL ts
--
TRUNCATE collapse.b;
INSERT INTO collapse.b (o, id, v, ts) VALUES
    (1, 1, 'one', 1), (2, 1, 'null a', NULL), (3, 1, 'two', 2),
    (4, 2, 'null b', NULL), (5, 2, 'three', 3), (6, 2, 'null c', NULL), (7, 2, 'zero', 0);
SELECT collapse.check('collapse.t', :'src', 'ts DESC', debug => true);
SELECT collapse.check('collapse.t', :'src', 'ts DESC NULLS LAST', debug => true);
SELECT collapse.check('collapse.t', :'src', 'ts', debug => true);
SELECT collapse.check('collapse.t', :'src', 'ts NULLS FIRST', debug => true);
SELECT collapse.check('collapse.t', :'src', 'ts NULLS FIRST, v DESC', debug => true);
SELECT collapse.check('collapse.t', :'src', 'coalesce(ts, 2) DESC, v', debug => true);

--
-- Several columns, expressions, operators: the rows differ in v and ts
--
TRUNCATE collapse.b;
INSERT INTO collapse.b (o, id, v, ts)
    SELECT g, g % 5, (ARRAY['a', 'B', 'b', 'A', 'ab', NULL])[g % 6 + 1], (g * 7) % 4
      FROM generate_series(1, 60) g;
SELECT collapse.check('collapse.t', :'src', 'ts DESC, v', debug => true);
SELECT collapse.check('collapse.t', :'src', 'ts DESC, v DESC NULLS LAST', debug => true);
SELECT collapse.check('collapse.t', :'src', 'lower(v) DESC, ts - 1', debug => true);
SELECT collapse.check('collapse.t', :'src', 'length(v) DESC NULLS LAST, v COLLATE "C" DESC, ts', debug => true);
SELECT collapse.check('collapse.t', :'src', '(ts, v) DESC', debug => true);
SELECT collapse.check('collapse.t', :'src', 'ts USING >, v USING ~<~', debug => true);
-- ties at first place in every key: 21000
SELECT collapse.check('collapse.t', :'src', 'ts DESC', debug => true);
SELECT collapse.check('collapse.t', :'src', 'lower(v)', debug => true);

--
-- Collations: a column's own, COLLATE in order_by, ICU (a < A < b < B)
-- against "C" (A < B < a < b), and a case-insensitive one, under which
-- differing strings tie
--
CREATE COLLATION collapse.ci (provider = icu, locale = 'und-u-ks-level2', deterministic = false);
CREATE TABLE collapse.coll (id int PRIMARY KEY, c text COLLATE "C", u text COLLATE "und-x-icu",
                            i text COLLATE collapse.ci, ts int);
CREATE TABLE collapse.collb AS
    SELECT g AS o, g % 4 AS id, (ARRAY['a', 'B', 'b', 'A'])[g % 4 + 1] AS c,
           (ARRAY['b', 'A', 'a', 'B', 'b'])[g % 5 + 1] AS u, (ARRAY['x', 'X', 'y'])[g % 3 + 1] AS i, g % 7 AS ts
      FROM generate_series(1, 40) g;
\set csrc 'SELECT id, c, u, i, ts FROM collapse.collb ORDER BY o'
SELECT collapse.check('collapse.coll', :'csrc', 'c, u, ts', debug => true);
SELECT collapse.check('collapse.coll', :'csrc', 'u, c, ts', debug => true);
SELECT collapse.check('collapse.coll', :'csrc', 'c COLLATE "und-x-icu" DESC, u COLLATE "C" DESC, ts', debug => true);
SELECT collapse.check('collapse.coll', :'csrc', 'u COLLATE "C", c DESC, ts DESC', debug => true);
-- 'x' and 'X' tie under ci: differing rows tied for first place
SELECT collapse.check('collapse.coll', :'csrc', 'i, ts', debug => true);
SELECT collapse.check('collapse.coll', :'csrc', 'i DESC, ts', debug => true);
SELECT collapse.check('collapse.coll', :'csrc', 'i COLLATE "C", ts', debug => true);
-- keys that the index finds equal but that differ ('k' and 'K' under ci):
-- collapse.c does not compare them, the sort does
CREATE TABLE collapse.cikey (id text COLLATE collapse.ci PRIMARY KEY, v text, ts int);
SELECT collapse.check('collapse.cikey', $$SELECT * FROM (VALUES ('k', 'a', 1), ('K', 'b', 2), ('k', 'c', 3), ('K', 'b', 2), ('k', 'a', 1)) s(id, v, ts)$$,
                      'ts DESC', debug => true);
SELECT collapse.check('collapse.cikey', $$SELECT * FROM (VALUES ('k', 'a', 1), ('K', 'b', 2), ('k', 'c', 3), ('K', 'b', 2), ('k', 'a', 1)) s(id, v, ts)$$,
                      'ts', debug => true);
SELECT collapse.check('collapse.cikey', $$SELECT * FROM (VALUES ('k', 'a', 1), ('K', 'a', 1)) s(id, v, ts)$$,
                      'ts', debug => true);

--
-- Columns without an = operator (json, point), arrays and numerics: rows
-- are copies only when their binary images are equal
--
TRUNCATE collapse.b;
INSERT INTO collapse.b VALUES
    (1, 1, 'a', 1, '{"x": 1}', '(1,1)', '{1,NULL}', 1.0),
    (2, 1, 'a', 1, '{"x": 1}', '(1,1)', '{1,NULL}', 1.0),
    (3, 2, NULL, NULL, NULL, NULL, NULL, NULL),
    (4, 2, NULL, NULL, NULL, NULL, NULL, NULL),
    (5, 3, 'c', 3, '[]', '(0,0)', '{}', 'NaN'),
    (6, 3, 'c', 3, '[]', '(0,0)', '{}', 'NaN');
SELECT collapse.check('collapse.t', :'src', debug => true);
SELECT collapse.check('collapse.t', :'src', 'ts DESC', debug => true);
-- a row that differs only in json text, in a point, in an array's NULL, in
-- a numeric's scale: tied with the winner, 21000; ranked by that column's
-- text (or value), no error
INSERT INTO collapse.b VALUES (7, 1, 'a', 1, '{"x":1}', '(1,1)', '{1,NULL}', 1.0);
SELECT collapse.check('collapse.t', :'src', 'ts DESC', debug => true);
SELECT collapse.check('collapse.t', :'src', 'ts DESC, doc::text', debug => true);
DELETE FROM collapse.b WHERE o = 7;
INSERT INTO collapse.b VALUES (7, 1, 'a', 1, '{"x": 1}', '(1,2)', '{1,NULL}', 1.0);
SELECT collapse.check('collapse.t', :'src', 'ts DESC', debug => true);
SELECT collapse.check('collapse.t', :'src', 'ts DESC, pos[1] DESC', debug => true);
DELETE FROM collapse.b WHERE o = 7;
INSERT INTO collapse.b VALUES (7, 1, 'a', 1, '{"x": 1}', '(1,1)', '{1}', 1.0);
SELECT collapse.check('collapse.t', :'src', 'ts DESC', debug => true);
SELECT collapse.check('collapse.t', :'src', 'ts DESC, arr', debug => true);
DELETE FROM collapse.b WHERE o = 7;
INSERT INTO collapse.b VALUES (7, 1, 'a', 1, '{"x": 1}', '(1,1)', '{1,NULL}', 1.00);
SELECT collapse.check('collapse.t', :'src', 'ts DESC, n', debug => true);
SELECT collapse.check('collapse.t', :'src', 'ts DESC, n::text DESC', debug => true);
-- NaN sorts above every number
INSERT INTO collapse.b VALUES (8, 3, 'c', 3, '[]', '(0,0)', '{}', 1e300);
SELECT collapse.check('collapse.t', :'src', 'n DESC, n::text', debug => true);
SELECT collapse.check('collapse.t', :'src', 'n, n::text', debug => true);

--
-- Numeric keys equal but differently scaled (1.0, 1.00): equal for the
-- index and its hash, different images.  collapse.c stages rows of the
-- other image; the winner is the first row of both.
--
CREATE TABLE collapse.num (id numeric PRIMARY KEY, v text, ts int);
\set nsrc 'SELECT * FROM (VALUES (1.0, ''a'', 1), (1.00, ''b'', 2), (1.0, ''c'', 3), (1.00, ''b'', 2), (1.0, ''a'', 1), (2, ''z'', 0)) s(id, v, ts)'
SELECT collapse.check('collapse.num', :'nsrc', 'ts DESC', debug => true);
SELECT collapse.check('collapse.num', :'nsrc', 'ts', debug => true);
SELECT collapse.check('collapse.num', :'nsrc', 'v DESC', debug => true);
SELECT collapse.check('collapse.num', :'nsrc', 'id::text, ts', debug => true);
-- otherwise equal rows of the two scales differ: without order_by and tied: 21000
SELECT collapse.check('collapse.num', $$SELECT * FROM (VALUES (1.0, 'a', 1), (1.00, 'a', 1), (1.0, 'a', 1)) s(id, v, ts)$$, NULL, debug => true);
SELECT collapse.check('collapse.num', $$SELECT * FROM (VALUES (1.0, 'a', 1), (1.00, 'a', 1), (1.0, 'a', 1)) s(id, v, ts)$$, 'ts', debug => true);
SELECT collapse.check('collapse.num', $$SELECT * FROM (VALUES (1.0, 'a', 1), (1.00, 'a', 0), (1.0, 'a', 1)) s(id, v, ts)$$, 'ts', debug => true);

--
-- Multi-column keys (numeric and text), and NULL keys under a NULLS NOT
-- DISTINCT unique index (key_columns)
--
CREATE TABLE collapse.mk (a numeric, b text, v text, ts int, PRIMARY KEY (a, b));
\set msrc 'SELECT * FROM (VALUES (1, ''x'', ''p'', 1), (1.0, ''x'', ''q'', 2), (1, ''x'', ''r'', 3), (1, ''y'', ''p'', 1), (1, ''y'', ''p'', 1), (1, ''x'', ''p'', 1), (2, ''x'', ''s'', 5)) s(a, b, v, ts)'
SELECT collapse.check('collapse.mk', :'msrc', 'ts DESC', 'a, b', debug => true);
SELECT collapse.check('collapse.mk', :'msrc', 'ts', 'a, b', debug => true);
SELECT collapse.check('collapse.mk', :'msrc', 'v DESC', 'a, b', debug => true);
SELECT collapse.check('collapse.mk', :'msrc', NULL, 'a, b', debug => true);
CREATE TABLE collapse.nnd (a int, b int, v text, ts int, UNIQUE NULLS NOT DISTINCT (a, b));
\set nnsrc 'SELECT * FROM (VALUES (NULL::int, 1, ''p'', 1), (NULL, 1, ''q'', 2), (1, NULL, ''r'', 1), (1, NULL, ''r'', 1), (NULL, NULL, ''s'', 1), (NULL, NULL, ''t'', 0), (NULL, NULL, ''s'', 1)) s(a, b, v, ts)'
SELECT collapse.check('collapse.nnd', :'nnsrc', 'ts DESC', 'a, b', debug => true);
SELECT collapse.check('collapse.nnd', :'nnsrc', 'ts', 'a, b', debug => true);
SELECT collapse.check('collapse.nnd', :'nnsrc', 'v DESC', 'a, b', debug => true);
SELECT collapse.check('collapse.nnd', :'nnsrc', 'ts DESC, v = ''q''', 'a, b', debug => true);
SELECT collapse.check('collapse.nnd', :'nnsrc', NULL, 'a, b', debug => true);

--
-- order_by that collapse.c does not evaluate (volatile, a subquery): only
-- copies are dropped, the sort decides the rest
--
CREATE FUNCTION collapse.vol(int) RETURNS int LANGUAGE sql VOLATILE AS 'SELECT $1';
TRUNCATE collapse.b;
INSERT INTO collapse.b (o, id, v, ts) VALUES
    (1, 1, 'a', 1), (2, 1, 'b', 2), (3, 1, 'a', 1), (4, 1, 'b', 2), (5, 2, 'c', 0), (6, 2, 'c', 0);
SELECT collapse.check('collapse.t', :'src', 'collapse.vol(ts) DESC', debug => true);
SELECT collapse.check('collapse.t', :'src', 'ts DESC, (SELECT 0)', debug => true);
SELECT collapse.check('collapse.t', :'src', 'ts DESC', debug => true);

--
-- expect audits the batch as the source produced it: nothing is dropped
-- (no DEBUG1), and the result is the same
--
SELECT collapse.check('collapse.t', :'src', 'ts DESC', debug => true, expect => 'count(*) = 6');
INSERT INTO collapse.b (o, id, v, ts) VALUES (7, 1, 'tie', 2);
SELECT collapse.check('collapse.t', :'src', 'ts DESC', debug => true, expect => 'count(*) = 7');

--
-- order_by over a column the source does not have, even if the target has
-- it: 42703, before anything is written
--
CREATE TABLE collapse.w (id int PRIMARY KEY, v text, ts int, extra int DEFAULT 0);
SELECT * FROM collapse.err($$SELECT * FROM etl_upsert_batch('collapse.w', 'SELECT 1 AS id, ''a'' AS v, 1 AS ts', order_by => 'extra DESC')$$);
SELECT * FROM collapse.err($$SELECT * FROM etl_upsert_batch('collapse.w', 'SELECT 1 AS id, ''a'' AS v, 1 AS ts', order_by => 'nonesuch')$$);
SELECT count(*) FROM collapse.w;

--
-- work_mem = 64kB holds a few dozen keys of these.  Once the table is full,
-- the keys it holds are still collapsed (if it had dropped one row per 16
-- keys by then), other keys are staged as they come; otherwise it is given
-- up and every held row staged.  The counts shown do not depend on where it
-- fills: keys 1-20 come first, keys from 20900 on well after it is full.
--
CREATE TABLE collapse.big (id int PRIMARY KEY, v text, ts int);
SET work_mem = '64kB';
-- keys 1-20 with 10 rows each (ts 0-9: 180 rows dropped), 20,000 new keys
-- (the table fills and stays), then better rows for keys 1-10 (they replace
-- the held rows: 10 dropped) and for keys 20900-20999 (not held: staged),
-- copies of the winners and worse rows for keys 11-20 (20 dropped), worse
-- rows for keys 20950-20999 (staged)
CREATE TABLE collapse.bigb AS
    SELECT 1 AS phase, j AS o, k AS id, 'k' || k || '@' || j AS v, (j * 7) % 10 AS ts
      FROM generate_series(1, 20) k, generate_series(1, 10) j
    UNION ALL SELECT 2, g, g, 'new' || g, 0 FROM generate_series(1000, 20999) g
    UNION ALL SELECT 3, k, k, 'better' || k, 10 FROM generate_series(1, 10) k
    UNION ALL SELECT 3, k, k, 'k' || k || '@7', 9 FROM generate_series(11, 20) k
    UNION ALL SELECT 3, k, k, 'worse' || k, -1 FROM generate_series(11, 20) k
    UNION ALL SELECT 4, g, g, 'better' || g, 10 FROM generate_series(20900, 20999) g
    UNION ALL SELECT 4, g, g, 'worse' || g, -1 FROM generate_series(20950, 20999) g;
\set bsrc 'SELECT id, v, ts FROM collapse.bigb ORDER BY phase, o, id'
SELECT collapse.check('collapse.big', :'bsrc', 'ts DESC', debug => true);
-- ascending: the rows dropped are others, as many
SELECT collapse.check('collapse.big', :'bsrc', 'ts, v', debug => true);
SELECT collapse.check('collapse.big', :'bsrc', 'ts DESC', debug => true, expect => 'true');
-- a differing row tied with a held key's best, after the table is full
SELECT * FROM collapse.err($$SELECT * FROM etl_upsert_batch('collapse.big',
    'SELECT id, v, ts FROM (TABLE collapse.bigb UNION ALL SELECT 5, 0, 17, ''tie'', 9) s ORDER BY phase, o, id',
    order_by => 'ts DESC')$$);
-- the same rows, the 20,000 new keys first: the table fills before it has
-- dropped anything and is given up (no DEBUG1); the sort finds every
-- duplicate
SELECT collapse.check('collapse.big', 'SELECT id, v, ts FROM collapse.bigb ORDER BY phase <> 2, o DESC, id', 'ts DESC', debug => true);
SELECT collapse.check('collapse.big', 'SELECT id, v, ts FROM collapse.bigb ORDER BY phase <> 2, o DESC, id', 'ts', debug => true);
-- given up with two rows dropped before it filled, and key 1 released by a
-- tie that a row after the table was given up breaks
SELECT collapse.check('collapse.big', $$
    SELECT * FROM (VALUES (1, 'tie-a', 5), (1, 'tie-b', 5), (2, 'x', 1), (2, 'x', 1), (3, 'z', 0), (3, 'z', 0)) s(id, v, ts)
    UNION ALL (SELECT g, 'new' || g, 0 FROM generate_series(1000, 20999) g ORDER BY g)
    UNION ALL SELECT * FROM (VALUES (1, 'best', 9), (1, 'tie-a', 5), (2, 'x', 1), (1000, 'better', 1)) s(id, v, ts)$$,
    'ts DESC', debug => true);
RESET work_mem;

--
-- With work_mem to spare, whether the table pays is looked at when it holds
-- 1,024 keys, 2,048, ...: dropped fewer than one row per 16 keys held, it is
-- given up
--
-- 5,000 distinct keys, then a copy of each: given up at the 1,024th key
-- (nothing dropped), no DEBUG1
SELECT collapse.check('collapse.big', $$SELECT g AS id, 'c' || g AS v, g % 3 AS ts FROM generate_series(1, 5000) g
                                        UNION ALL SELECT g, 'c' || g, g % 3 FROM generate_series(1, 5000) g$$,
                      'ts DESC', debug => true);
-- 200 keys three times over first (400 rows dropped: enough at 1,024, 2,048
-- and 4,096 keys), then 5,000 new keys, then a copy and a worse row of each
-- of the 5,200 keys: all dropped
SELECT collapse.check('collapse.big', $$SELECT g AS id, 'c' || g AS v, 1 AS ts FROM generate_series(1, 200) g, generate_series(1, 3)
                                        UNION ALL SELECT g, 'c' || g, 1 FROM generate_series(1001, 6000) g
                                        UNION ALL SELECT g, 'c' || g, 1 FROM generate_series(1, 200) g
                                        UNION ALL SELECT g, 'c' || g, 1 FROM generate_series(1001, 6000) g
                                        UNION ALL SELECT g, 'd' || g, 0 FROM generate_series(1, 200) g
                                        UNION ALL SELECT g, 'd' || g, 0 FROM generate_series(1001, 6000) g$$,
                      'ts DESC', debug => true);
-- 100 rows dropped first: enough at 1,024 keys, not at 2,048 (given up)
SELECT collapse.check('collapse.big', $$SELECT g AS id, 'c' || g AS v, 1 AS ts FROM generate_series(1, 100) g, generate_series(1, 2)
                                        UNION ALL SELECT g, 'c' || g, 1 FROM generate_series(1001, 6000) g
                                        UNION ALL SELECT g, 'd' || g, 2 FROM generate_series(1, 6000) g$$,
                      'ts DESC', debug => true);

--
-- Random batches (materialized first): few keys with many rows, small value
-- domains so that ties, copies and NULLs are frequent; order_by lists that
-- decide every tie must succeed, the others mostly end in 21000.  Also with
-- the table full (work_mem = 64kB, no DEBUG1: its counts depend on where it
-- fills).
--
SELECT setseed(0.25);
CREATE TABLE collapse.rnd AS
    SELECT floor(random() * 1e9)::int AS o, 1 + floor(random() * 300)::int AS id,
           (ARRAY['a', 'A', 'b', 'B', NULL, 'é', 'e'])[1 + floor(random() * 7)] AS v,
           CASE WHEN random() < 0.1 THEN NULL ELSE floor(random() * 20)::int END AS ts,
           (ARRAY['{"x":1}', '{"x": 1}', NULL])[1 + floor(random() * 3)]::json AS doc,
           (ARRAY['(1,1)', '(1,2)', NULL])[1 + floor(random() * 3)]::point AS pos,
           (ARRAY['{1}', '{1,NULL}', '{2}', NULL])[1 + floor(random() * 4)]::int[] AS arr,
           (ARRAY[1.0, 1.00, 2, NULL, 'NaN'])[1 + floor(random() * 5)] AS n
      FROM generate_series(1, 2000);
INSERT INTO collapse.rnd SELECT floor(random() * 1e9)::int, id, v, ts, doc, pos, arr, n FROM collapse.rnd WHERE random() < 0.5;
\set rsrc 'SELECT id, v, ts, doc, pos, arr, n FROM collapse.rnd ORDER BY o, id, v, ts'
SELECT ob, collapse.check('collapse.t', :'rsrc', ob) FROM unnest(ARRAY[
    'ts DESC, v COLLATE "C" NULLS FIRST, n::text, doc::text DESC, arr, pos[0], pos[1] DESC',
    'v COLLATE "und-x-icu" DESC NULLS LAST, ts - 1 NULLS FIRST, n::text DESC, doc::text, arr DESC NULLS LAST, pos[1], pos[0] NULLS FIRST',
    'n DESC, n::text, lower(v), v COLLATE "C", coalesce(ts, -1) DESC, arr::text, doc::text, point(pos[1], pos[0])::text',
    'arr NULLS FIRST, ts, (v, n)::text COLLATE "C" DESC, doc::text, pos::text',
    'ts DESC, v, n DESC',
    'v COLLATE "C", ts DESC',
    NULL]) ob;
SET work_mem = '64kB';
SELECT ob, collapse.check('collapse.t', :'rsrc', ob) FROM unnest(ARRAY[
    'ts DESC, v COLLATE "C" NULLS FIRST, n::text, doc::text DESC, arr, pos[0], pos[1] DESC',
    'n DESC, n::text, lower(v), v COLLATE "C", coalesce(ts, -1) DESC, arr::text, doc::text, point(pos[1], pos[0])::text',
    'ts DESC, v, n DESC']) ob;
RESET work_mem;

-- order_by items that are column positions: 42P10.  A position means a
-- column in a query's ORDER BY and a constant in a window's, and the list is
-- used in both.
CREATE TABLE collapse.pos (v text, id int PRIMARY KEY, ts int);
SELECT * FROM collapse.err($$SELECT * FROM etl_upsert_batch('collapse.pos',
    'SELECT * FROM (VALUES (''z'', 1, 5), (''a'', 1, 1)) b(v, id, ts)', order_by => '1 DESC, ts')$$);
SELECT * FROM collapse.err($$SELECT * FROM etl_upsert_batch('collapse.pos',
    'SELECT * FROM (VALUES (''z'', 1, 5)) b(v, id, ts)', order_by => 'ts, -2')$$);
-- an integer inside an expression is a constant, as everywhere
SELECT collapse.check('collapse.pos', $$SELECT * FROM (VALUES ('z', 1, 5), ('a', 1, 1)) b(v, id, ts)$$,
                      '1 + ts DESC');

-- order_by is evaluated only for rows whose key has other rows in the
-- batch, in whatever order they come: a batch whose keys are distinct never
-- evaluates it (a zero divisor is no error, first or last), as the sort of
-- dedup.c never ran for such a batch
CREATE TABLE collapse.dz (id int PRIMARY KEY, ts int);
SELECT inserted FROM etl_upsert_batch('collapse.dz',
    $$SELECT g AS id, CASE WHEN g = 1 THEN 0 ELSE g END AS ts FROM generate_series(1, 20000) g ORDER BY g$$,
    order_by => '1 / ts');
TRUNCATE collapse.dz;
SELECT inserted FROM etl_upsert_batch('collapse.dz',
    $$SELECT g AS id, CASE WHEN g = 1 THEN 0 ELSE g END AS ts FROM generate_series(1, 20000) g ORDER BY g DESC$$,
    order_by => '1 / ts');
-- a key with two rows, one of them with the zero: 22012, first or last
SELECT * FROM collapse.err($$SELECT * FROM etl_upsert_batch('collapse.dz',
    'SELECT * FROM (VALUES (1, 0), (1, 1), (2, 2)) b(id, ts)', order_by => '1 / ts')$$);
SELECT * FROM collapse.err($$SELECT * FROM etl_upsert_batch('collapse.dz',
    'SELECT * FROM (VALUES (2, 2), (1, 1), (1, 0)) b(id, ts)', order_by => '1 / ts')$$);

-- A column whose type lives in a schema the caller has no USAGE on: the
-- caller may still write the table, and order_by is still evaluated while
-- staging (the analysis names no type)
SET client_min_messages = warning;
DROP ROLE IF EXISTS idem_test_rcollapse;
RESET client_min_messages;
CREATE ROLE idem_test_rcollapse;
CREATE SCHEMA collapse_types;
CREATE TYPE collapse_types.mood AS ENUM ('sad', 'ok', 'happy');
CREATE TABLE collapse.moods (id int PRIMARY KEY, m collapse_types.mood, ts int);
CREATE TABLE collapse.moods_src (id int, m collapse_types.mood, ts int);
INSERT INTO collapse.moods_src VALUES (1, 'ok', 1), (1, 'happy', 2), (2, 'sad', 1);
GRANT USAGE ON SCHEMA collapse TO idem_test_rcollapse;
GRANT ALL ON collapse.moods, collapse.moods_src TO idem_test_rcollapse;
SET ROLE idem_test_rcollapse;
SET client_min_messages = debug1;
SELECT inserted FROM etl_upsert_batch('collapse.moods', 'TABLE collapse.moods_src', order_by => 'ts DESC');
RESET client_min_messages;
RESET ROLE;
SELECT * FROM collapse.moods ORDER BY id;

SET client_min_messages = warning;
DROP SCHEMA collapse_types CASCADE;
DROP SCHEMA collapse CASCADE;
DROP ROLE idem_test_rcollapse;
DROP EXTENSION idem_etl;
RESET client_min_messages;
