--
-- upsert_columns: update some columns, insert all (dbt's
-- merge_update_columns / merge_exclude_columns).  New rows are inserted
-- with every source column; existing rows have only the named columns
-- updated and compared.
--
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS idem_etl CASCADE;
CREATE EXTENSION idem_etl;
DROP SCHEMA IF EXISTS cols CASCADE;
RESET client_min_messages;
CREATE SCHEMA cols;
\set schema cols
\i sql/include/err.sql

CREATE TABLE cols.customers (id int PRIMARY KEY, name text, tier text, created_at date);
INSERT INTO cols.customers VALUES (1, 'Ann', 'gold', '2026-01-01'), (2, 'Bob', 'silver', '2026-02-01');

-- update_columns: name only; created_at of existing rows is kept, a new
-- row gets every column
SELECT inserted, updated, unchanged FROM etl_upsert_batch('cols.customers',
    $$SELECT * FROM (VALUES (1, 'Ann B.', 'platinum', '2026-11-30'::date), (3, 'Cy', 'bronze', '2026-11-30')) s(id, name, tier, created_at)$$,
    update_columns => ARRAY['name']);
SELECT * FROM cols.customers ORDER BY id;
-- a change in another column only is not a change: unchanged
SELECT inserted, updated, unchanged FROM etl_upsert_batch('cols.customers',
    $$SELECT 2 AS id, 'Bob' AS name, 'gold' AS tier, '2030-01-01'::date AS created_at$$,
    update_columns => ARRAY['name']);
SELECT * FROM cols.customers WHERE id = 2;

-- exclude_columns: everything but created_at
SELECT inserted, updated, unchanged FROM etl_upsert_batch('cols.customers',
    $$SELECT 2 AS id, 'Bob' AS name, 'gold' AS tier, '2030-01-01'::date AS created_at$$,
    exclude_columns => ARRAY['created_at']);
SELECT * FROM cols.customers WHERE id = 2;

-- part of the fingerprint: the same batch with other update columns is a
-- correction, not a skip
SELECT skipped FROM etl_upsert_batch('cols.customers', 'SELECT 1 AS id, ''Ann'' AS name, ''x'' AS tier',
    update_columns => ARRAY['name'], run_key => 'k');
SELECT skipped FROM etl_upsert_batch('cols.customers', 'SELECT 1 AS id, ''Ann'' AS name, ''x'' AS tier',
    update_columns => ARRAY['name'], run_key => 'k');
SELECT skipped FROM etl_upsert_batch('cols.customers', 'SELECT 1 AS id, ''Ann'' AS name, ''x'' AS tier',
    update_columns => ARRAY['tier'], run_key => 'k');
SELECT * FROM cols.customers WHERE id = 1;

-- refused, before anything runs
SELECT * FROM cols.err($$SELECT * FROM etl_upsert_batch('cols.customers', 'SELECT 1 AS id', update_columns => ARRAY['nope'])$$);
SELECT * FROM cols.err($$SELECT * FROM etl_upsert_batch('cols.customers', 'SELECT 1 AS id, ''a'' AS name', update_columns => ARRAY['id'])$$);
SELECT * FROM cols.err($$SELECT * FROM etl_upsert_batch('cols.customers', 'SELECT 1 AS id', exclude_columns => ARRAY['id'])$$);
SELECT * FROM cols.err($$SELECT * FROM etl_upsert_batch('cols.customers', 'SELECT 1 AS id, ''a'' AS name',
    update_columns => ARRAY['name'], exclude_columns => ARRAY['tier'])$$);
SELECT * FROM cols.err($$SELECT * FROM etl_upsert_batch('cols.customers', 'SELECT 1 AS id', update_columns => ARRAY['name'])$$);
SELECT * FROM cols.err($$SELECT * FROM etl_upsert_batch('cols.customers', 'SELECT 1 AS id', update_columns => ARRAY[['name']])$$);
SELECT * FROM cols.err($$SELECT * FROM etl_upsert_batch('cols.customers', 'SELECT 1 AS id', exclude_columns => ARRAY['tier', 'tier'])$$);
-- a generated column as update_columns or newer_column: 0A000 saying so
-- (it was 42703, "missing from the source", though the source had it)
CREATE TABLE cols.gen (id int PRIMARY KEY, a int, n int GENERATED ALWAYS AS (a) STORED);
SELECT * FROM cols.err($$SELECT * FROM etl_upsert_batch('cols.gen', 'SELECT 1 AS id, 2 AS a, 5 AS n',
    update_columns => ARRAY['n'])$$);
SELECT * FROM cols.err($$SELECT * FROM etl_upsert_batch('cols.gen', 'SELECT 1 AS id, 2 AS a, 5 AS n',
    newer_column => 'n')$$);

SET client_min_messages = warning;
DROP SCHEMA cols CASCADE;
DROP EXTENSION idem_etl;
