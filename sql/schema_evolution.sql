--
-- schema_evolution: on_schema_change (issue 32), opt-in for etl_upsert_batch
-- and etl_replace_partition(s).  The default (NULL, or 'fail') is today's:
-- a source column the target lacks is 42703.  'append_new_columns' adds it
-- (no default, in the call's transaction, recorded in the ledger) and widens
-- a column only where no value can be lost; nothing else changes.
--
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS idem_etl CASCADE;
CREATE EXTENSION idem_etl;
DROP SCHEMA IF EXISTS se CASCADE;
RESET client_min_messages;
CREATE SCHEMA se;
\set schema se
\i sql/include/err.sql

CREATE TABLE se.customers (id int PRIMARY KEY, name varchar(5), score int);
INSERT INTO se.customers VALUES (1, 'ann', 10);
-- the default, and 'fail': a new source column is an error
SELECT * FROM se.err($$SELECT * FROM etl_upsert_batch('se.customers',
    'SELECT 1 AS id, ''ann'' AS name, ''eu'' AS region')$$);
SELECT * FROM se.err($$SELECT * FROM etl_upsert_batch('se.customers',
    'SELECT 1 AS id, ''ann'' AS name, ''eu'' AS region', on_schema_change => 'fail')$$);
SELECT * FROM se.err($$SELECT * FROM etl_upsert_batch('se.customers',
    'SELECT 1 AS id', on_schema_change => 'sync_all_columns')$$);
-- append_new_columns: added without a default, the old rows read NULL
SELECT inserted, updated, unchanged FROM etl_upsert_batch('se.customers',
    $$SELECT 2 AS id, 'bob'::varchar(5) AS name, 'eu'::text AS region$$,
    on_schema_change => 'append_new_columns');
SELECT * FROM se.customers ORDER BY id;
SELECT attname, format_type(atttypid, atttypmod), atthasdef FROM pg_attribute
 WHERE attrelid = 'se.customers'::regclass AND attnum > 0 ORDER BY attnum;
SELECT operation, schema_changes FROM idem_etl.runs ORDER BY run_id DESC LIMIT 1;
-- the same batch again: nothing to change, nothing written
SELECT inserted, updated, unchanged FROM etl_upsert_batch('se.customers',
    $$SELECT 2 AS id, 'bob'::varchar(5) AS name, 'eu'::text AS region$$,
    on_schema_change => 'append_new_columns');
SELECT schema_changes FROM idem_etl.runs ORDER BY run_id DESC LIMIT 1;
-- widening without loss: integer to bigint, varchar(5) to text
SELECT inserted FROM etl_upsert_batch('se.customers',
    $$SELECT 3 AS id, 'a longer name'::text AS name, 5000000000::bigint AS score$$,
    on_schema_change => 'append_new_columns');
SELECT id, name, score FROM se.customers WHERE id = 3;
SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute
 WHERE attrelid = 'se.customers'::regclass AND attname IN ('name', 'score') ORDER BY attnum;
SELECT schema_changes FROM idem_etl.runs ORDER BY run_id DESC LIMIT 1;
-- never narrowed, never across families: a smaller or another type is cast
-- as without on_schema_change
SELECT updated FROM etl_upsert_batch('se.customers',
    $$SELECT 3 AS id, 7::smallint AS score, 'x'::varchar(2) AS name$$,
    on_schema_change => 'append_new_columns');
SELECT updated FROM etl_upsert_batch('se.customers',
    $$SELECT 3 AS id, 8.0::numeric AS score$$, on_schema_change => 'append_new_columns');
SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute
 WHERE attrelid = 'se.customers'::regclass AND attname IN ('name', 'score') ORDER BY attnum;
-- atomic: a load that fails after the change leaves the table as it was
SELECT * FROM se.err($$SELECT * FROM etl_upsert_batch('se.customers',
    'SELECT 4 AS id, 1 AS tier', on_schema_change => 'append_new_columns', expect => 'count(*) > 1')$$);
SELECT count(*) AS tier_column FROM pg_attribute WHERE attrelid = 'se.customers'::regclass AND attname = 'tier';
-- only the owner may change the table: 42501
CREATE ROLE idem_test_se_loader;
GRANT USAGE ON SCHEMA se TO idem_test_se_loader;
GRANT SELECT, INSERT, UPDATE ON se.customers TO idem_test_se_loader;
SET ROLE idem_test_se_loader;
SELECT * FROM se.err($$SELECT * FROM etl_upsert_batch('se.customers',
    'SELECT 5 AS id, 1 AS tier', on_schema_change => 'append_new_columns')$$);
RESET ROLE;

-- a partitioned table: the parent is altered first, so the new partition
-- built for the replacement attaches with the new column, and the other
-- partitions have it too
CREATE TABLE se.events (d date NOT NULL, id int, v text) PARTITION BY RANGE (d);
CREATE TABLE se.events_1 PARTITION OF se.events FOR VALUES FROM ('2026-12-01') TO ('2026-12-02');
CREATE TABLE se.events_2 PARTITION OF se.events FOR VALUES FROM ('2026-12-02') TO ('2026-12-03');
INSERT INTO se.events VALUES ('2026-12-01', 1, 'a'), ('2026-12-02', 2, 'b');
SELECT * FROM se.err($$SELECT * FROM etl_replace_partition('se.events', '2026-12-02',
    'SELECT ''2026-12-02''::date AS d, 2 AS id, ''b'' AS v, 0.5::numeric AS weight')$$);
SELECT rows_loaded, rows_replaced FROM etl_replace_partition('se.events', '2026-12-02',
    $$SELECT '2026-12-02'::date AS d, 2 AS id, 'b' AS v, 0.5::numeric AS weight$$,
    on_schema_change => 'append_new_columns');
SELECT tableoid::regclass, * FROM se.events ORDER BY d;
SELECT operation, partition_value, schema_changes FROM idem_etl.runs ORDER BY run_id DESC LIMIT 1;
SELECT count(*) AS replaced FROM etl_replace_partitions('se.events',
    $$SELECT '2026-12-01'::date AS d, 1 AS id, 'a' AS v, 2 AS weight, true AS flag$$,
    on_schema_change => 'append_new_columns');
SELECT tableoid::regclass, * FROM se.events ORDER BY d;

SET client_min_messages = warning;
DROP SCHEMA se CASCADE;
\set roles '{idem_test_se_loader}'
\i sql/include/drop_roles.sql
