--
-- upsert_delete_missing: point 6 of etl_upsert_batch (delete_missing).
-- Deletes exactly the target rows that satisfy the expression and whose key
-- is absent from the batch (counted in deleted); rows outside the slice are
-- untouched.
--
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS idem_etl CASCADE;
CREATE EXTENSION idem_etl;
DROP SCHEMA IF EXISTS delmiss CASCADE;
RESET client_min_messages;

CREATE SCHEMA delmiss;

\set schema delmiss
\i sql/include/err.sql

CREATE TABLE delmiss.t (id int PRIMARY KEY, region text, v text);
CREATE FUNCTION delmiss.reset() RETURNS void LANGUAGE sql AS $$
    DELETE FROM delmiss.t;
    INSERT INTO delmiss.t VALUES
        (1, 'eu', 'one'), (2, 'eu', 'two'), (3, 'eu', 'three'), (4, 'eu', 'four'),
        (5, 'us', 'five'), (6, 'us', 'six'), (7, 'us', 'seven'),
        (8, NULL, 'eight');
$$;
SELECT delmiss.reset();

-- the eu slice: 1 unchanged, 2 changed, 9 new; 3 and 4 are missing and go;
-- us rows and the row with a NULL region are outside the slice
SELECT inserted, updated, unchanged, deleted, skipped
  FROM etl_upsert_batch('delmiss.t',
       $$SELECT * FROM (VALUES (1, 'eu', 'one'), (2, 'eu', 'TWO'), (9, 'eu', 'nine')) s(id, region, v)$$,
       delete_missing => $$region = 'eu'$$);
SELECT * FROM delmiss.t ORDER BY id;
-- the same again: nothing left to delete
SELECT inserted, updated, unchanged, deleted, skipped
  FROM etl_upsert_batch('delmiss.t',
       $$SELECT * FROM (VALUES (1, 'eu', 'one'), (2, 'eu', 'TWO'), (9, 'eu', 'nine')) s(id, region, v)$$,
       delete_missing => $$region = 'eu'$$);
SELECT count(*) FROM delmiss.t;

-- a batch row outside the slice is upserted and never deleted; slice rows in
-- the batch survive even when the batch moves them out of the slice
SELECT delmiss.reset();
SELECT inserted, updated, unchanged, deleted, skipped
  FROM etl_upsert_batch('delmiss.t',
       $$SELECT * FROM (VALUES (1, 'eu', 'one'), (2, 'us', 'two moved'), (5, 'us', 'FIVE')) s(id, region, v)$$,
       delete_missing => $$region = 'eu'$$);
SELECT * FROM delmiss.t ORDER BY id;

-- delete_missing => 'true': the target becomes exactly the batch
SELECT delmiss.reset();
SELECT inserted, updated, unchanged, deleted, skipped
  FROM etl_upsert_batch('delmiss.t',
       $$SELECT * FROM (VALUES (5, 'us', 'five'), (10, 'eu', 'ten')) s(id, region, v)$$,
       delete_missing => 'true');
SELECT * FROM delmiss.t ORDER BY id;

-- 'false' deletes nothing
SELECT delmiss.reset();
SELECT inserted, updated, unchanged, deleted, skipped
  FROM etl_upsert_batch('delmiss.t', $$SELECT 1 AS id, 'eu' AS region, 'one' AS v$$,
                        delete_missing => 'false');
SELECT count(*) FROM delmiss.t;

-- an expression that is NULL for a row does not delete it
SELECT inserted, updated, unchanged, deleted, skipped
  FROM etl_upsert_batch('delmiss.t', $$SELECT 1 AS id, 'eu' AS region, 'one' AS v$$,
                        delete_missing => $$region <> 'us'$$);
SELECT * FROM delmiss.t ORDER BY id;

-- an empty batch deletes the whole slice, when the call allows it (else
-- IE002, see sql/safe_defaults.sql)
SELECT delmiss.reset();
SELECT inserted, updated, unchanged, deleted, skipped
  FROM etl_upsert_batch('delmiss.t', $$SELECT id, region, v FROM delmiss.t WHERE false$$,
                        delete_missing => $$region = 'us'$$, allow_shrink => true);
SELECT * FROM delmiss.t ORDER BY id;

-- an expression over several columns, with a function call
SELECT delmiss.reset();
SELECT inserted, updated, unchanged, deleted, skipped
  FROM etl_upsert_batch('delmiss.t', $$SELECT 1 AS id, 'eu' AS region, 'one' AS v$$,
                        delete_missing => $$region = 'eu' AND length(v) > 3 OR id = 7$$);
SELECT * FROM delmiss.t ORDER BY id;

-- with newer_column: an older batch row leaves its stored row alone but its key
-- is in the batch, so the row is not deleted
CREATE TABLE delmiss.nv (id int PRIMARY KEY, v text, version int);
INSERT INTO delmiss.nv VALUES (1, 'new', 5), (2, 'new', 5), (3, 'new', 5);
SELECT inserted, updated, unchanged, deleted, skipped
  FROM etl_upsert_batch('delmiss.nv',
       $$SELECT * FROM (VALUES (1, 'old', 1), (2, 'newer', 6)) s(id, v, version)$$,
       newer_column => 'version', delete_missing => 'true');
SELECT * FROM delmiss.nv ORDER BY id;

-- composite key: only (region, id) pairs absent from the batch go
CREATE TABLE delmiss.comp (region text, id int, v text, PRIMARY KEY (region, id));
INSERT INTO delmiss.comp VALUES ('eu', 1, 'a'), ('eu', 2, 'b'), ('us', 1, 'c'), ('us', 2, 'd');
SELECT inserted, updated, unchanged, deleted, skipped
  FROM etl_upsert_batch('delmiss.comp',
       $$SELECT * FROM (VALUES ('eu', 2, 'b'), ('us', 1, 'c')) s(region, id, v)$$,
       delete_missing => 'true');
SELECT * FROM delmiss.comp ORDER BY region, id;

-- NULLS NOT DISTINCT key: a NULL key in the batch keeps its stored row
CREATE TABLE delmiss.nnd (k int, v text, UNIQUE NULLS NOT DISTINCT (k));
INSERT INTO delmiss.nnd VALUES (NULL, 'null key'), (1, 'one'), (2, 'two');
SELECT inserted, updated, unchanged, deleted, skipped
  FROM etl_upsert_batch('delmiss.nnd',
       $$SELECT * FROM (VALUES (NULL::int, 'null key'), (1, 'one')) s(k, v)$$,
       key_columns => ARRAY['k'], delete_missing => 'true');
SELECT * FROM delmiss.nnd ORDER BY k;
-- composite: the batch's rows with a NULL in the key are matched apart from
-- the others (one scan of the whole batch per stored row was quadratic)
CREATE TABLE delmiss.nnd2 (a int, b int, v text, UNIQUE NULLS NOT DISTINCT (a, b));
INSERT INTO delmiss.nnd2 VALUES (NULL, NULL, 'both'), (NULL, 1, 'a null'), (1, NULL, 'b null'),
    (1, 1, 'none'), (2, NULL, 'b null, gone'), (NULL, 2, 'a null, gone'), (2, 2, 'gone');
SELECT inserted, updated, unchanged, deleted
  FROM etl_upsert_batch('delmiss.nnd2',
       $$SELECT * FROM (VALUES (NULL::int, NULL::int, 'both'), (NULL, 1, 'a null'), (1, NULL, 'b null'),
                               (1, 1, 'none'), (3, 3, 'new')) s(a, b, v)$$,
       key_columns => ARRAY['a', 'b'], delete_missing => 'true');
SELECT * FROM delmiss.nnd2 ORDER BY a, b;

-- the ledger counts the deletions
SELECT inserted, updated, unchanged, deleted FROM idem_etl.runs
 WHERE target_oid = 'delmiss.nnd'::regclass ORDER BY run_id DESC LIMIT 1;

--
-- errors leave the target untouched
--
SELECT delmiss.reset();
-- a column that the target does not have: 42703
SELECT * FROM delmiss.err($$SELECT * FROM etl_upsert_batch('delmiss.t',
    'SELECT 1 AS id, ''eu'' AS region, ''one'' AS v', delete_missing => 'nonesuch = 1')$$);
-- not a boolean: 42804
\set VERBOSITY sqlstate
SELECT * FROM etl_upsert_batch('delmiss.t',
    'SELECT 1 AS id, ''eu'' AS region, ''one'' AS v', delete_missing => 'id + 1');
\set VERBOSITY default
-- not one expression: 42601
SELECT * FROM delmiss.err($$SELECT * FROM etl_upsert_batch('delmiss.t',
    'SELECT 1 AS id, ''eu'' AS region, ''one'' AS v', delete_missing => 'true; SELECT 1')$$);
SELECT * FROM delmiss.err($$SELECT * FROM etl_upsert_batch('delmiss.t',
    'SELECT 1 AS id, ''eu'' AS region, ''one'' AS v', delete_missing => 'region = ''eu'') OR (true')$$);
SELECT * FROM delmiss.t ORDER BY id;

SET client_min_messages = warning;
DROP SCHEMA delmiss CASCADE;
DROP EXTENSION idem_etl;
RESET client_min_messages;
