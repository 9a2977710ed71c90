--
-- replace_plain: point 5 of etl_replace_partition (plain table).
-- With partition_column on a non-partitioned table, the rows where
-- partition_column = value are deleted and the source rows inserted in the
-- same transaction: rows_replaced = rows deleted, rows_loaded = rows
-- inserted; other rows are not touched.  The same validation applies (23514
-- for rows of another value or NULL, the table's own constraints), and an
-- error leaves the table and the ledger as before.  Without partition_column:
-- 22023; an unknown one: 42703.
--
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS idem_etl CASCADE;
CREATE EXTENSION idem_etl;
DROP SCHEMA IF EXISTS rplain CASCADE;
RESET client_min_messages;

CREATE SCHEMA rplain;

\set schema rplain
\i sql/include/err.sql

CREATE TABLE rplain.facts (
    d      date NOT NULL,
    id     int  NOT NULL,
    amount numeric CHECK (amount >= 0),
    note   text DEFAULT 'loaded',
    PRIMARY KEY (d, id)
);
INSERT INTO rplain.facts (d, id, amount) VALUES
    ('2026-11-27', 1, 1), ('2026-11-27', 2, 2),
    ('2026-11-28', 1, 10), ('2026-11-28', 2, 20),
    ('2026-11-29', 1, 100);

-- the physical versions of the rows of other days, to show they are not touched
CREATE TABLE rplain.others AS
SELECT d, id, ctid::text AS ct, xmin::text AS xm FROM rplain.facts WHERE d <> '2026-11-28';
CREATE VIEW rplain.others_touched AS
SELECT count(*) FILTER (WHERE f.ctid::text <> o.ct OR f.xmin::text <> o.xm OR f.d IS NULL) AS touched,
       count(*) AS compared
  FROM rplain.others o LEFT JOIN rplain.facts f USING (d, id);
CREATE FUNCTION rplain.state() RETURNS text LANGUAGE sql AS $$
    SELECT (SELECT string_agg(format('%s@%s/%s', f::text, ctid, xmin), ' ' ORDER BY d, id) FROM rplain.facts f)
        || ' ledger=' || (SELECT count(*) FROM idem_etl.runs);
$$;

-- 2 rows of 2026-11-28 replaced by 3
SELECT partition_table, rows_loaded, rows_replaced, skipped
  FROM etl_replace_partition('rplain.facts', '2026-11-28',
       $$SELECT '2026-11-28'::date AS d, g AS id, g * 1.5 AS amount FROM generate_series(1, 3) g$$,
       partition_column => 'd');
SELECT * FROM rplain.facts ORDER BY d, id;
SELECT * FROM rplain.others_touched;
-- an identical rerun: the same contents
SELECT partition_table, rows_loaded, rows_replaced, skipped
  FROM etl_replace_partition('rplain.facts', '2026-11-28',
       $$SELECT '2026-11-28'::date AS d, g AS id, g * 1.5 AS amount FROM generate_series(1, 3) g$$,
       partition_column => 'd');
SELECT * FROM rplain.facts ORDER BY d, id;
-- a value with no rows yet: nothing replaced
SELECT partition_table, rows_loaded, rows_replaced, skipped
  FROM etl_replace_partition('rplain.facts', '2026-11-30',
       $$SELECT '2026-11-30'::date AS d, 1 AS id, 7 AS amount, 'given' AS note$$,
       partition_column => 'd');
-- an empty source deletes the value's rows
SELECT partition_table, rows_loaded, rows_replaced, skipped
  FROM etl_replace_partition('rplain.facts', '2026-11-30',
       $$SELECT '2026-11-30'::date AS d, 1 AS id WHERE false$$, allow_shrink => true,
       partition_column => 'd');
SELECT * FROM rplain.facts ORDER BY d, id;
SELECT * FROM rplain.others_touched;
-- the deletion and the insertion are one transaction: a caller's ROLLBACK undoes both
BEGIN;
SELECT rows_loaded, rows_replaced
  FROM etl_replace_partition('rplain.facts', '2026-11-28',
       $$SELECT '2026-11-28'::date AS d, 9 AS id, 9 AS amount$$, partition_column => 'd');
SELECT count(*) FROM rplain.facts WHERE d = '2026-11-28';
ROLLBACK;
SELECT count(*) FROM rplain.facts WHERE d = '2026-11-28';

--
-- validation: nothing changes on error
--
SELECT rplain.state() AS before \gset
-- rows of another value: 23514 with count and example
SELECT * FROM rplain.err($$SELECT * FROM etl_replace_partition('rplain.facts', '2026-11-28',
    $s$SELECT '2026-11-28'::date AS d, 1 AS id, 1 AS amount UNION ALL SELECT '2026-11-29', 5, 1
       UNION ALL SELECT '2026-11-29', 6, 1$s$, partition_column => 'd')$$);
SELECT rplain.state() = :'before' AS unchanged;
-- NULL in the partition column: 23514
SELECT * FROM rplain.err($$SELECT * FROM etl_replace_partition('rplain.facts', '2026-11-28',
    $s$SELECT '2026-11-28'::date AS d, 1 AS id, 1 AS amount UNION ALL SELECT NULL, 5, 1$s$,
    partition_column => 'd')$$);
SELECT rplain.state() = :'before' AS unchanged;
-- the table's own constraints: primary key 23505, check 23514
SELECT * FROM rplain.err($$SELECT * FROM etl_replace_partition('rplain.facts', '2026-11-28',
    $s$SELECT '2026-11-28'::date AS d, 1 AS id, 1 AS amount UNION ALL SELECT '2026-11-28', 1, 2$s$,
    partition_column => 'd')$$);
SELECT rplain.state() = :'before' AS unchanged;
SELECT * FROM rplain.err($$SELECT * FROM etl_replace_partition('rplain.facts', '2026-11-28',
    $s$SELECT '2026-11-28'::date AS d, 1 AS id, -1 AS amount$s$, partition_column => 'd')$$);
SELECT rplain.state() = :'before' AS unchanged;
-- a plain table without partition_column: 22023
SELECT * FROM rplain.err($$SELECT * FROM etl_replace_partition('rplain.facts', '2026-11-28',
    $s$SELECT '2026-11-28'::date AS d, 1 AS id, 1 AS amount$s$)$$);
SELECT rplain.state() = :'before' AS unchanged;
-- a partition_column the table does not have: 42703
SELECT * FROM rplain.err($$SELECT * FROM etl_replace_partition('rplain.facts', '2026-11-28',
    $s$SELECT '2026-11-28'::date AS d, 1 AS id, 1 AS amount$s$, partition_column => 'day')$$);
SELECT rplain.state() = :'before' AS unchanged;
-- the partition column missing from the source: 42703
SELECT * FROM rplain.err($$SELECT * FROM etl_replace_partition('rplain.facts', '2026-11-28',
    $s$SELECT 1 AS id, 1 AS amount$s$, partition_column => 'd')$$);
SELECT rplain.state() = :'before' AS unchanged;

--
-- run_key: an identical rerun is skipped and rewrites nothing
--
SELECT rows_loaded, rows_replaced, skipped
  FROM etl_replace_partition('rplain.facts', '2026-11-29',
       $$SELECT '2026-11-29'::date AS d, 1 AS id, 100 AS amount, 'keyed' AS note$$,
       partition_column => 'd', run_key => 'day 29');
CREATE TEMP TABLE v29 AS SELECT ctid::text AS ct, xmin::text AS xm FROM rplain.facts WHERE d = '2026-11-29';
SELECT rows_loaded, rows_replaced, skipped
  FROM etl_replace_partition('rplain.facts', '2026-11-29',
       $$SELECT '2026-11-29'::date AS d, 1 AS id, 100 AS amount, 'keyed' AS note$$,
       partition_column => 'd', run_key => 'day 29');
SELECT count(*) AS same_versions FROM rplain.facts f JOIN v29 v ON f.ctid::text = v.ct AND f.xmin::text = v.xm;

-- the ledger
SELECT operation, target, partition_value, partition_table, rows_loaded, rows_replaced, skipped
  FROM idem_etl.runs ORDER BY run_id;

SET client_min_messages = warning;
DROP SCHEMA rplain CASCADE;
DROP EXTENSION idem_etl;
RESET client_min_messages;
