--
-- upsert_types: point 10 of etl_upsert_batch (works with ...).
-- Partitioned targets (ON CONFLICT through the parent's unique key),
-- composite keys, quoted identifiers everywhere, the common column types;
-- an identical rerun of each is all unchanged.  Targets that are not
-- tables: 42809.
--
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS idem_etl CASCADE;
CREATE EXTENSION idem_etl;
DROP SCHEMA IF EXISTS types CASCADE;
DROP SCHEMA IF EXISTS "My Schema; ""Q"" x" CASCADE;
RESET client_min_messages;

CREATE SCHEMA types;

\set schema types
\i sql/include/err.sql

-- versions(rel): all physical row versions of a table (partitions included)
CREATE FUNCTION types.versions(rel regclass) RETURNS text LANGUAGE plpgsql AS $$
DECLARE r text;
BEGIN
    EXECUTE format('SELECT string_agg(v, '' '' ORDER BY v) FROM (SELECT tableoid::regclass::text || ctid::text || xmin::text AS v FROM %s) s', rel)
       INTO r;
    RETURN r;
END $$;

--
-- partitioned target, key through the parent's primary key
--
CREATE TABLE types.p (region text, id int, v text, amount numeric(10,2), PRIMARY KEY (region, id))
    PARTITION BY LIST (region);
CREATE TABLE types.p_eu PARTITION OF types.p FOR VALUES IN ('eu');
CREATE TABLE types.p_us PARTITION OF types.p FOR VALUES IN ('us');
CREATE TABLE types.p_other PARTITION OF types.p DEFAULT;
CREATE TABLE types.pb (region text, id int, v text, amount numeric(10,2));
INSERT INTO types.pb VALUES ('eu', 1, 'a', 1.5), ('eu', 2, 'b', 2), ('us', 1, 'c', 3.25), ('ap', 1, 'd', NULL);
SELECT inserted, updated, unchanged, deleted, skipped FROM etl_upsert_batch('types.p', 'TABLE types.pb');
SELECT tableoid::regclass AS partition, * FROM types.p ORDER BY region, id;
SELECT types.versions('types.p') AS p_before \gset
SELECT inserted, updated, unchanged, deleted, skipped FROM etl_upsert_batch('types.p', 'TABLE types.pb');
SELECT types.versions('types.p') = :'p_before' AS no_row_rewritten;
-- updates and inserts in several partitions, counted right
UPDATE types.pb SET v = 'B' WHERE region = 'eu' AND id = 2;
UPDATE types.pb SET amount = 4 WHERE region = 'ap';
INSERT INTO types.pb VALUES ('us', 2, 'e', 0), ('zz', 9, 'f', 9);
SELECT inserted, updated, unchanged, deleted, skipped FROM etl_upsert_batch('types.p', 'TABLE types.pb');
-- delete_missing across partitions
DELETE FROM types.pb WHERE id = 1;
SELECT inserted, updated, unchanged, deleted, skipped
  FROM etl_upsert_batch('types.p', 'TABLE types.pb', delete_missing => $$region IN ('eu', 'ap')$$);
SELECT tableoid::regclass AS partition, * FROM types.p ORDER BY region, id;
-- run_key skip on a partitioned target
SELECT inserted, updated, unchanged, deleted, skipped
  FROM etl_upsert_batch('types.p', 'TABLE types.pb', run_key => 'p1');
SELECT inserted, updated, unchanged, deleted, skipped
  FROM etl_upsert_batch('types.p', 'TABLE types.pb', run_key => 'p1');
-- a partition as the target
SELECT inserted, updated, unchanged, deleted, skipped
  FROM etl_upsert_batch('types.p_us', $$SELECT 'us' AS region, 2 AS id, 'e2' AS v, 0 AS amount$$);
SELECT * FROM types.p WHERE region = 'us' ORDER BY id;
-- a key that does not include the partition key cannot be unique: 42P10
SELECT * FROM types.err($$SELECT * FROM etl_upsert_batch('types.p', 'TABLE types.pb', key_columns => ARRAY['id'])$$);

-- two levels of partitioning, range then hash
CREATE TABLE types.p2 (day date, k int, v text, PRIMARY KEY (day, k)) PARTITION BY RANGE (day);
CREATE TABLE types.p2_2024 PARTITION OF types.p2 FOR VALUES FROM ('2024-01-01') TO ('2025-01-01')
    PARTITION BY HASH (k);
CREATE TABLE types.p2_2024_h0 PARTITION OF types.p2_2024 FOR VALUES WITH (MODULUS 2, REMAINDER 0);
CREATE TABLE types.p2_2024_h1 PARTITION OF types.p2_2024 FOR VALUES WITH (MODULUS 2, REMAINDER 1);
SELECT inserted, updated, unchanged, deleted, skipped
  FROM etl_upsert_batch('types.p2', $$SELECT '2024-03-01'::date + g % 3 AS day, g AS k, 'v' || g AS v FROM generate_series(1, 10) g$$);
SELECT inserted, updated, unchanged, deleted, skipped
  FROM etl_upsert_batch('types.p2', $$SELECT '2024-03-01'::date + g % 3 AS day, g AS k, CASE WHEN g = 5 THEN 'five' ELSE 'v' || g END AS v FROM generate_series(1, 10) g$$);

--
-- composite keys
--
CREATE TABLE types.comp (tenant int, sku text, day date, qty int, PRIMARY KEY (tenant, sku, day));
SELECT inserted, updated, unchanged, deleted, skipped
  FROM etl_upsert_batch('types.comp',
       $$SELECT * FROM (VALUES (1, 'a', date '2024-01-01', 1), (1, 'a', date '2024-01-02', 2),
                               (1, 'b', date '2024-01-01', 3), (2, 'a', date '2024-01-01', 4)) s(tenant, sku, day, qty)$$);
SELECT inserted, updated, unchanged, deleted, skipped
  FROM etl_upsert_batch('types.comp',
       $$SELECT * FROM (VALUES (2, 'a', date '2024-01-01', 4), (1, 'b', date '2024-01-01', 3),
                               (1, 'a', date '2024-01-02', 20), (1, 'a', date '2024-01-03', 5)) s(tenant, sku, day, qty)$$,
       delete_missing => 'tenant = 1');
SELECT * FROM types.comp ORDER BY tenant, sku, day;
-- the same key tuple twice with different values: 21000
SELECT * FROM types.err($$SELECT * FROM etl_upsert_batch('types.comp',
    'SELECT * FROM (VALUES (1, ''a'', date ''2024-01-01'', 1), (1, ''a'', date ''2024-01-01'', 2)) s(tenant, sku, day, qty)')$$);

--
-- quoted identifiers: capitals, spaces, quotes and semicolons in schema, table and column names
--
CREATE SCHEMA "My Schema; ""Q"" x";
CREATE TABLE "My Schema; ""Q"" x"."Tab ""Q"" ;1" (
    "Id Col"        int,
    "Code"          text,
    "Val;ue"        text,
    "Mixed""Quote"  int,
    "Ver Col"       int,
    "select"        text,
    PRIMARY KEY ("Id Col", "Code")
);
CREATE TABLE "My Schema; ""Q"" x"."Stage; ""src""" AS
SELECT * FROM (VALUES (1, 'A', 'x;y', 1, 1, 'kw'), (2, 'B', 'it''s', 2, 1, NULL),
                      (2, 'B', 'it''s older', 0, 0, NULL)) s("Id Col", "Code", "Val;ue", "Mixed""Quote", "Ver Col", "select");
SELECT inserted, updated, unchanged, deleted, skipped
  FROM etl_upsert_batch('"My Schema; ""Q"" x"."Tab ""Q"" ;1"',
       'TABLE "My Schema; ""Q"" x"."Stage; ""src"""',
       key_columns    => ARRAY['Id Col', 'Code'],
       order_by       => '"Ver Col" DESC, "Val;ue"',
       newer_column   => 'Ver Col',
       delete_missing => $$"Val;ue" <> 'keep;me' OR "Val;ue" IS NULL$$,
       run_key        => $$run "key"; 'quoted'$$);
SELECT * FROM "My Schema; ""Q"" x"."Tab ""Q"" ;1" ORDER BY 1, 2;
-- the identical rerun under the same run_key is skipped; without run_key it is all unchanged
SELECT inserted, updated, unchanged, deleted, skipped
  FROM etl_upsert_batch('"My Schema; ""Q"" x"."Tab ""Q"" ;1"',
       'TABLE "My Schema; ""Q"" x"."Stage; ""src"""',
       key_columns    => ARRAY['Id Col', 'Code'],
       order_by       => '"Ver Col" DESC, "Val;ue"',
       newer_column   => 'Ver Col',
       delete_missing => $$"Val;ue" <> 'keep;me' OR "Val;ue" IS NULL$$,
       run_key        => $$run "key"; 'quoted'$$);
SELECT inserted, updated, unchanged, deleted, skipped
  FROM etl_upsert_batch('"My Schema; ""Q"" x"."Tab ""Q"" ;1"',
       'TABLE "My Schema; ""Q"" x"."Stage; ""src"""',
       key_columns    => ARRAY['Id Col', 'Code'],
       order_by       => '"Ver Col" DESC, "Val;ue"',
       newer_column   => 'Ver Col',
       delete_missing => $$"Val;ue" <> 'keep;me' OR "Val;ue" IS NULL$$);
-- a row outside the delete_missing slice survives, the others missing from the batch go
INSERT INTO "My Schema; ""Q"" x"."Tab ""Q"" ;1" VALUES (7, 'K', 'keep;me', 0, 0, NULL), (8, 'L', 'drop;me', 0, 0, NULL);
SELECT inserted, updated, unchanged, deleted, skipped
  FROM etl_upsert_batch('"My Schema; ""Q"" x"."Tab ""Q"" ;1"',
       'TABLE "My Schema; ""Q"" x"."Stage; ""src"""',
       key_columns    => ARRAY['Id Col', 'Code'],
       order_by       => '"Ver Col" DESC, "Val;ue"',
       newer_column   => 'Ver Col',
       delete_missing => $$"Val;ue" <> 'keep;me' OR "Val;ue" IS NULL$$);
SELECT "Id Col", "Code", "Val;ue" FROM "My Schema; ""Q"" x"."Tab ""Q"" ;1" ORDER BY 1, 2;
-- the ledger names the target and keeps the run_key as given
SELECT target, run_key, skipped FROM idem_etl.runs
 WHERE target_oid = '"My Schema; ""Q"" x"."Tab ""Q"" ;1"'::regclass ORDER BY run_id;
-- errors name quoted columns as they are: a key column given quoted is not found (42703)
SELECT * FROM types.err($$SELECT * FROM etl_upsert_batch('"My Schema; ""Q"" x"."Tab ""Q"" ;1"',
    'TABLE "My Schema; ""Q"" x"."Stage; ""src"""', key_columns => ARRAY['"Id Col"', 'Code'])$$);
-- and a source column that is not in the target, with a quote in its name (42703)
SELECT * FROM types.err($$SELECT * FROM etl_upsert_batch('"My Schema; ""Q"" x"."Tab ""Q"" ;1"',
    'SELECT 1 AS "Id Col", ''A'' AS "Code", 1 AS "Odd""Name;"')$$);

--
-- the common column types; an identical rerun is all unchanged, a changed row is one update
--
CREATE TYPE types.mood AS ENUM ('sad', 'ok', 'happy');
CREATE DOMAIN types.posint AS int CHECK (VALUE > 0);
CREATE DOMAIN types.jdom AS json;
CREATE TYPE types.pair AS (a int, j json);
CREATE TABLE types.all_types (
    id      bigint PRIMARY KEY,
    n       numeric(12, 2),
    nn      numeric,
    f       float8,
    t       text,
    vc      varchar(10),
    b       boolean,
    jb      jsonb,
    j       json,
    ia      int[],
    ta      text[],
    ja      json[],
    ts      timestamptz,
    d       date,
    iv      interval,
    u       uuid,
    by      bytea,
    e       types.mood,
    dom     types.posint,
    jd      types.jdom,
    r       int4range,
    tr      tstzrange,
    pt      point,
    x       xml,
    c       types.pair,
    ip      inet
);
CREATE TABLE types.tb (LIKE types.all_types);
INSERT INTO types.tb VALUES
  (1, 12.50, 1e-20, 1.5, 'text', 'vc', true, '{"b": 2, "a": 1}', '{"b": 2, "a": 1}',
   '{1,2,3}', '{a,"b c",NULL}', ARRAY['{"x": 1}'::json, '[]'], '2024-01-02 03:04:05.678+00', '2024-02-29',
   '1 day 2 hours', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '\xdeadbeef', 'happy', 7, '{"d": true}',
   '[1,10)', '[2024-01-01 00:00+00,2024-02-01 00:00+00)', '(1.5,-2)', '<r a="1">x</r>', ROW(1, '{"p": 1}'),
   '10.0.0.1/8'),
  (2, -0.01, 'NaN', '-Infinity', '', '', false, '[]', '[]',
   '{}', '{}', '{}', '-infinity', '0001-01-01 BC', '0', '00000000-0000-0000-0000-000000000000', '\x', 'sad', 1, 'null',
   'empty', '(,)', '(0,0)', '', ROW(NULL, NULL), '::1'),
  (3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
   NULL, NULL, NULL, NULL, NULL, NULL),
  (4, 99999.99, 123456789012345678901234567890.123, 0, 'back\slash, quote''s', 'x', NULL, '{"nested": {"arr": [1, 2, {"k": null}]}}',
   '  {"spaces" :  1 }  ', '{{1,2},{3,4}}', '{"quote\"d","comma,"}', ARRAY[NULL::json], 'infinity', '9999-12-31',
   '-1 mon', 'ffffffff-ffff-ffff-ffff-ffffffffffff', '\x00ff00', 'ok', 2147483647, '[1, 2]', '[-5,5]', NULL,
   '(1e10,-1e-10)', '<a><b>t</b><!-- c --></a>', ROW(2, NULL), '2001:db8::/32');
SELECT inserted, updated, unchanged, deleted, skipped FROM etl_upsert_batch('types.all_types', 'TABLE types.tb');
SELECT count(*) AS differing_rows FROM (
    (SELECT tgt::text FROM types.all_types tgt EXCEPT SELECT bat::text FROM types.tb bat)
    UNION ALL
    (SELECT bat::text FROM types.tb bat EXCEPT SELECT tgt::text FROM types.all_types tgt)) d;
SELECT types.versions('types.all_types') AS types_before \gset
SELECT inserted, updated, unchanged, deleted, skipped FROM etl_upsert_batch('types.all_types', 'TABLE types.tb');
SELECT inserted, updated, unchanged, deleted, skipped FROM etl_upsert_batch('types.all_types', 'SELECT * FROM types.tb ORDER BY id DESC');
SELECT types.versions('types.all_types') = :'types_before' AS no_row_rewritten;
-- one change in each of a few columns of row 1, and one in row 4's json text: two updates
UPDATE types.tb SET ja = ARRAY['{"x": 2}'::json, '[]'], c = ROW(1, '{"p": 2}'), tr = '[2024-01-01 00:00+00,2024-03-01 00:00+00)'
 WHERE id = 1;
UPDATE types.tb SET j = '{"spaces" :  1 }' WHERE id = 4;
SELECT inserted, updated, unchanged, deleted, skipped FROM etl_upsert_batch('types.all_types', 'TABLE types.tb');
SELECT inserted, updated, unchanged, deleted, skipped FROM etl_upsert_batch('types.all_types', 'TABLE types.tb');
SELECT count(*) AS differing_rows FROM (
    (SELECT tgt::text FROM types.all_types tgt EXCEPT SELECT bat::text FROM types.tb bat)
    UNION ALL
    (SELECT bat::text FROM types.tb bat EXCEPT SELECT tgt::text FROM types.all_types tgt)) d;
-- a domain's CHECK applies: 23514
SELECT * FROM types.err($$SELECT * FROM etl_upsert_batch('types.all_types', 'SELECT 5 AS id, 0 AS dom')$$);
-- each type as the key
CREATE TABLE types.k_uuid (k uuid PRIMARY KEY, v int);
CREATE TABLE types.k_text (k text PRIMARY KEY, v int);
CREATE TABLE types.k_bytea (k bytea PRIMARY KEY, v int);
CREATE TABLE types.k_enum (k types.mood PRIMARY KEY, v int);
CREATE TABLE types.k_ts (k timestamptz PRIMARY KEY, v int);
CREATE TABLE types.k_num (k numeric PRIMARY KEY, v int);
SELECT inserted, updated, unchanged FROM etl_upsert_batch('types.k_uuid',
    $$SELECT * FROM (VALUES ('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid, 1), ('00000000-0000-0000-0000-000000000000', 2)) s(k, v)$$);
SELECT inserted, updated, unchanged FROM etl_upsert_batch('types.k_uuid',
    $$SELECT * FROM (VALUES ('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid, 1), ('00000000-0000-0000-0000-000000000000', 3)) s(k, v)$$);
SELECT inserted, updated, unchanged FROM etl_upsert_batch('types.k_text',
    $$SELECT * FROM (VALUES ('a', 1), ('A', 2), ('a ', 3), ('', 4)) s(k, v)$$);
SELECT inserted, updated, unchanged FROM etl_upsert_batch('types.k_text',
    $$SELECT * FROM (VALUES ('a', 1), ('A', 2), ('a ', 3), ('', 4)) s(k, v)$$);
SELECT inserted, updated, unchanged FROM etl_upsert_batch('types.k_bytea',
    $$SELECT * FROM (VALUES ('\x00'::bytea, 1), ('\x0000', 2), ('\x', 3)) s(k, v)$$);
SELECT inserted, updated, unchanged FROM etl_upsert_batch('types.k_bytea',
    $$SELECT * FROM (VALUES ('\x00'::bytea, 1), ('\x0000', 2), ('\x', 3)) s(k, v)$$);
SELECT inserted, updated, unchanged FROM etl_upsert_batch('types.k_enum',
    $$SELECT * FROM (VALUES ('ok'::types.mood, 1), ('sad', 2)) s(k, v)$$);
SELECT inserted, updated, unchanged FROM etl_upsert_batch('types.k_enum',
    $$SELECT * FROM (VALUES ('ok'::types.mood, 1), ('sad', 2)) s(k, v)$$);
SELECT inserted, updated, unchanged FROM etl_upsert_batch('types.k_ts',
    $$SELECT * FROM (VALUES ('2024-01-01 00:00+00'::timestamptz, 1), ('2024-01-02 00:00+00', 2)) s(k, v)$$);
-- the same instant written in another time zone is the same key
SELECT inserted, updated, unchanged FROM etl_upsert_batch('types.k_ts',
    $$SELECT * FROM (VALUES ('2024-01-01 01:00+01'::timestamptz, 1), ('2024-01-02 00:00+00', 2)) s(k, v)$$);
-- and twice in one batch with different values it is a conflicting duplicate: 21000
SELECT * FROM types.err($$SELECT * FROM etl_upsert_batch('types.k_ts',
    'SELECT * FROM (VALUES (''2024-01-01 00:00+00''::timestamptz, 1), (''2024-01-01 01:00+01'', 2)) s(k, v)')$$);
SELECT inserted, updated, unchanged FROM etl_upsert_batch('types.k_num',
    $$SELECT * FROM (VALUES (1.0, 1), (2, 2)) s(k, v)$$);
SELECT inserted, updated, unchanged FROM etl_upsert_batch('types.k_num',
    $$SELECT * FROM (VALUES (1.0, 1), (2, 2)) s(k, v)$$);

--
-- source columns of other (assignable) types than the target's: an
-- identical rerun is still all unchanged
--
CREATE TABLE types.conv (id bigint PRIMARY KEY, amount numeric(12, 2), name varchar(20), small smallint, at timestamptz);
SELECT inserted, updated, unchanged, deleted, skipped
  FROM etl_upsert_batch('types.conv',
       $$SELECT g AS id, g * 1.5 AS amount, 'name ' || g AS name, g AS small,
                '2024-01-01 00:00:00'::timestamp + g * interval '1 hour' AS at
           FROM generate_series(1, 5) g$$);
SELECT types.versions('types.conv') AS conv_before \gset
SELECT inserted, updated, unchanged, deleted, skipped
  FROM etl_upsert_batch('types.conv',
       $$SELECT g AS id, g * 1.5 AS amount, 'name ' || g AS name, g AS small,
                '2024-01-01 00:00:00'::timestamp + g * interval '1 hour' AS at
           FROM generate_series(1, 5) g$$);
SELECT types.versions('types.conv') = :'conv_before' AS no_row_rewritten;
SELECT id, amount, name, small FROM types.conv ORDER BY id;

--
-- targets that are not tables: 42809
--
CREATE VIEW types.v AS SELECT * FROM types.k_text;
CREATE MATERIALIZED VIEW types.mv AS SELECT * FROM types.k_text;
CREATE SEQUENCE types.seq;
SELECT * FROM types.err($$SELECT * FROM etl_upsert_batch('types.v', 'SELECT ''z'' AS k, 1 AS v')$$);
SELECT * FROM types.err($$SELECT * FROM etl_upsert_batch('types.mv', 'SELECT ''z'' AS k, 1 AS v')$$);
SELECT * FROM types.err($$SELECT * FROM etl_upsert_batch('types.seq', 'SELECT 1 AS last_value')$$);
SELECT * FROM types.err($$SELECT * FROM etl_upsert_batch('types.k_text_pkey', 'SELECT ''z'' AS k, 1 AS v')$$);
SELECT count(*) FROM types.k_text WHERE k = 'z';

-- idem_etl.same_image, the merge's change test: byte for byte, stricter
-- than "=", NULL the same as NULL; pairs of the same type only
SELECT idem_etl.same_image(1.0, 1.0) AS same, idem_etl.same_image(1.0, 1.00) AS scale,
       idem_etl.same_image('{"a": 1}'::json, '{"a": 1}'::json) AS json,
       idem_etl.same_image(point '(1,2)', point '(1,2)', NULL::text, NULL::text) AS nulls,
       idem_etl.same_image(1, 1, 'x'::text, NULL::text) AS null_and_value;
SELECT * FROM types.err($$SELECT idem_etl.same_image(1, 1, 2)$$);
SELECT * FROM types.err($$SELECT idem_etl.same_image(1, 1::bigint)$$);

-- idem_etl.image_hash, the Citus merge's change test: a 128-bit hash of the
-- same images; equal images hash alike (a compressed value as its
-- literal), and 1.0 against 1.00, a NULL's place, int against bigint differ
CREATE TABLE types.long (v text);
INSERT INTO types.long SELECT repeat('abc', 10000);
SELECT idem_etl.image_hash(1.0, 'x'::text) = idem_etl.image_hash(1.0, 'x'::varchar) AS same,
       idem_etl.image_hash(1.0) = idem_etl.image_hash(1.00) AS scale,
       idem_etl.image_hash(NULL::int, 1) = idem_etl.image_hash(1, NULL::int) AS null_place,
       idem_etl.image_hash(1) = idem_etl.image_hash(1::bigint) AS int_bigint,
       (SELECT idem_etl.image_hash(v) FROM types.long) = idem_etl.image_hash(repeat('abc', 10000)) AS compressed,
       (SELECT pg_column_compression(v) IS NOT NULL FROM types.long) AS was_compressed;
-- idem_etl.image_hash_half: the hash's halves as bigints (the uuid's bytes,
-- little-endian), which the Citus upsert sums by key range; 0 or 1 only
WITH b AS (
    SELECT half, sum(get_byte(uuid_send(idem_etl.image_hash(1, 'x'::text, NULL::int)), 8 * half + i)::numeric
                     * 256::numeric ^ i) AS n
      FROM generate_series(0, 1) half, generate_series(0, 7) i GROUP BY half)
SELECT bool_and(idem_etl.image_hash_half(half, 1, 'x'::text, NULL::int) =
                (CASE WHEN n >= 2::numeric ^ 63 THEN n - 2::numeric ^ 64 ELSE n END)::bigint) AS halves,
       count(*) AS n
  FROM b;
SELECT * FROM types.err($$SELECT idem_etl.image_hash_half(2, 1)$$);

SET client_min_messages = warning;
DROP SCHEMA types CASCADE;
DROP SCHEMA "My Schema; ""Q"" x" CASCADE;
DROP EXTENSION idem_etl;
RESET client_min_messages;
