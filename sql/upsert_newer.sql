--
-- upsert_newer: point 5 of etl_upsert_batch (newer_column).
-- A stored row is overwritten only when the incoming value of newer_column
-- is >= the stored one; NULL never wins over a non-NULL.  Replaying an older
-- batch changes nothing (those rows count as unchanged), and batches applied
-- in any order converge to the same table.
--
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS idem_etl CASCADE;
CREATE EXTENSION idem_etl;
DROP SCHEMA IF EXISTS newer CASCADE;
RESET client_min_messages;

CREATE SCHEMA newer;

\set schema newer
\i sql/include/err.sql

CREATE TABLE newer.t (id int PRIMARY KEY, v text, version int);
-- three batches; for one key, two batches never carry different data under the same version
CREATE TABLE newer.batches (batch int, id int, v text, version int);
INSERT INTO newer.batches VALUES
    (1, 1, 'a1', 1), (1, 2, 'b1', 1), (1, 3, 'c1', 1),
    (2, 1, 'a2', 2), (2, 3, 'c2', 2), (2, 4, 'd2', 2),
    (3, 2, 'b3', 3), (3, 3, 'c0', 0), (3, 4, 'd3', 3), (3, 5, 'e3', 3);

-- batch 2 first, then the older batch 1 is replayed
SELECT inserted, updated, unchanged, deleted, skipped
  FROM etl_upsert_batch('newer.t', 'SELECT id, v, version FROM newer.batches WHERE batch = 2',
                        newer_column => 'version');
CREATE TABLE newer.versions AS SELECT id, xmin::text AS xm FROM newer.t;
-- keys 1 and 3 are stored with version 2: batch 1's rows for them count as unchanged;
-- key 2 is new
SELECT inserted, updated, unchanged, deleted, skipped
  FROM etl_upsert_batch('newer.t', 'SELECT id, v, version FROM newer.batches WHERE batch = 1',
                        newer_column => 'version');
SELECT t.*, t.xmin::text = s.xm AS same_version FROM newer.t t LEFT JOIN newer.versions s USING (id) ORDER BY id;
-- replaying batch 1 again, and batch 2 again: nothing changes
SELECT inserted, updated, unchanged, deleted, skipped
  FROM etl_upsert_batch('newer.t', 'SELECT id, v, version FROM newer.batches WHERE batch = 1',
                        newer_column => 'version');
SELECT inserted, updated, unchanged, deleted, skipped
  FROM etl_upsert_batch('newer.t', 'SELECT id, v, version FROM newer.batches WHERE batch = 2',
                        newer_column => 'version');
-- an equal version overwrites (>=)
SELECT inserted, updated, unchanged, deleted, skipped
  FROM etl_upsert_batch('newer.t', $$SELECT 1 AS id, 'a2 corrected' AS v, 2 AS version$$,
                        newer_column => 'version');
SELECT * FROM newer.t WHERE id = 1;
-- a mixed batch: one newer (updated), one older (unchanged), one equal and identical (unchanged), one new key
SELECT inserted, updated, unchanged, deleted, skipped
  FROM etl_upsert_batch('newer.t',
       $$SELECT * FROM (VALUES (1, 'a5', 5), (2, 'b0', 0), (3, 'c2', 2), (6, 'f1', 1)) s(id, v, version)$$,
       newer_column => 'version');
SELECT * FROM newer.t ORDER BY id;

--
-- NULL never wins over a non-NULL
--
-- stored version 5, incoming NULL: unchanged
SELECT inserted, updated, unchanged, deleted, skipped
  FROM etl_upsert_batch('newer.t', $$SELECT 1 AS id, 'a null' AS v, NULL::int AS version$$,
                        newer_column => 'version');
SELECT * FROM newer.t WHERE id = 1;
-- a new key with a NULL version is inserted
SELECT inserted, updated, unchanged, deleted, skipped
  FROM etl_upsert_batch('newer.t', $$SELECT 7 AS id, 'g null' AS v, NULL::int AS version$$,
                        newer_column => 'version');
-- stored NULL, incoming non-NULL: the incoming row wins
SELECT inserted, updated, unchanged, deleted, skipped
  FROM etl_upsert_batch('newer.t', $$SELECT 7 AS id, 'g1' AS v, 1 AS version$$,
                        newer_column => 'version');
SELECT * FROM newer.t WHERE id = 7;

--
-- batches applied in any order converge (all 6 orders of 3 batches)
--
CREATE TABLE newer.orders (ord text, a int, b int, c int);
INSERT INTO newer.orders VALUES
    ('123', 1, 2, 3), ('132', 1, 3, 2), ('213', 2, 1, 3),
    ('231', 2, 3, 1), ('312', 3, 1, 2), ('321', 3, 2, 1);
DO $$
DECLARE o record; b int;
BEGIN
    FOR o IN SELECT * FROM newer.orders LOOP
        EXECUTE format('CREATE TABLE newer.%I (id int PRIMARY KEY, v text, version int)', 'c' || o.ord);
        FOREACH b IN ARRAY ARRAY[o.a, o.b, o.c] LOOP
            PERFORM etl_upsert_batch(format('newer.%I', 'c' || o.ord)::regclass,
                                     format('SELECT id, v, version FROM newer.batches WHERE batch = %s', b),
                                     newer_column => 'version');
        END LOOP;
    END LOOP;
END $$;
SELECT 'c123' AS tab, string_agg(format('%s:%s:%s', id, v, version), ' ' ORDER BY id) FROM newer.c123
UNION ALL SELECT 'c132', string_agg(format('%s:%s:%s', id, v, version), ' ' ORDER BY id) FROM newer.c132
UNION ALL SELECT 'c213', string_agg(format('%s:%s:%s', id, v, version), ' ' ORDER BY id) FROM newer.c213
UNION ALL SELECT 'c231', string_agg(format('%s:%s:%s', id, v, version), ' ' ORDER BY id) FROM newer.c231
UNION ALL SELECT 'c312', string_agg(format('%s:%s:%s', id, v, version), ' ' ORDER BY id) FROM newer.c312
UNION ALL SELECT 'c321', string_agg(format('%s:%s:%s', id, v, version), ' ' ORDER BY id) FROM newer.c321
ORDER BY 1;
-- and replaying any batch on the converged table changes nothing
SELECT b.batch, u.inserted, u.updated, u.unchanged
  FROM generate_series(1, 3) AS b(batch),
       LATERAL etl_upsert_batch('newer.c321',
                format('SELECT id, v, version FROM newer.batches WHERE batch = %s', b.batch),
                newer_column => 'version') u
 ORDER BY b.batch;

--
-- newer_column with duplicates in the batch (order_by picks the row, then it
-- is compared with the stored one) and a timestamptz column
--
CREATE TABLE newer.ts (id int PRIMARY KEY, v text, updated_at timestamptz);
SELECT inserted, updated, unchanged, deleted, skipped
  FROM etl_upsert_batch('newer.ts',
       $$SELECT * FROM (VALUES (1, 'x', '2024-01-02 00:00+00'::timestamptz),
                               (1, 'y', '2024-01-03 00:00+00'),
                               (2, 'z', '2024-01-01 00:00+00')) s(id, v, updated_at)$$,
       order_by => 'updated_at DESC', newer_column => 'updated_at');
SELECT id, v FROM newer.ts ORDER BY id;
SELECT inserted, updated, unchanged, deleted, skipped
  FROM etl_upsert_batch('newer.ts',
       $$SELECT * FROM (VALUES (1, 'older', '2024-01-02 12:00+00'::timestamptz),
                               (2, 'newer', '2024-01-01 00:00:01+00')) s(id, v, updated_at)$$,
       order_by => 'updated_at DESC', newer_column => 'updated_at');
SELECT id, v FROM newer.ts ORDER BY id;

--
-- errors: newer_column not in the target or not in the source: 42703
--
SELECT * FROM newer.err($$SELECT * FROM etl_upsert_batch('newer.t',
    'SELECT 1 AS id, ''x'' AS v, 9 AS version', newer_column => 'nonesuch')$$);
SELECT * FROM newer.err($$SELECT * FROM etl_upsert_batch('newer.t',
    'SELECT 1 AS id, ''x'' AS v', newer_column => 'version')$$);
SELECT * FROM newer.t WHERE id = 1;

SET client_min_messages = warning;
DROP SCHEMA newer CASCADE;
DROP EXTENSION idem_etl;
RESET client_min_messages;
