--
-- safe_defaults: what a new user gets without setting anything (issue 30).
--  1. An empty batch never removes rows unless the call (allow_shrink) or
--     the setting idem_etl.allow_shrink says so: IE002 for
--     etl_replace_partition (a partition, a default partition's rows, a
--     plain table's value), etl_replace_where and delete_missing.  A batch
--     with rows may still leave a partition of its condition empty.
--  2. A replaced partition is kept for a day (idem_etl.keep_replaced).
--  3. A bare VALUES source fills the target's columns in order.
--  4. Column lists as users write them: 'id', 'a, b', or an array.
--  5. An error raised while evaluating an argument says which one, and a
--     source that may not be read is named with its schema.
--
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS idem_etl CASCADE;
CREATE EXTENSION idem_etl;
DROP SCHEMA IF EXISTS sd CASCADE;
DROP SCHEMA IF EXISTS sd_staging CASCADE;
RESET client_min_messages;
CREATE SCHEMA sd;
\set schema sd
\i sql/include/err.sql
-- err() and the argument the error's context names, if any
CREATE FUNCTION sd.err_arg(stmt text) RETURNS SETOF text LANGUAGE plpgsql AS $f$
DECLARE st text; msg text; ctx text;
BEGIN
    EXECUTE stmt;
    RETURN NEXT 'no error';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, ctx = PG_EXCEPTION_CONTEXT;
    RETURN NEXT 'SQLSTATE ' || st;
    RETURN NEXT 'message: ' || msg;
    RETURN NEXT 'context: ' || coalesce((regexp_match(ctx, 'argument "[a-z_]+"'))[1], '(none)');
END
$f$;

-- the built-in defaults (the test cluster's sessions start with
-- keep_replaced 0, see test/run-all)
SELECT name, boot_val, unit FROM pg_settings
 WHERE name IN ('idem_etl.keep_replaced', 'idem_etl.allow_shrink', 'idem_etl.min_replaced_ratio')
 ORDER BY name;

--
-- 1. empty batches
--
CREATE TABLE sd.fact_sales (sale_date date NOT NULL, id int, amount numeric)
    PARTITION BY RANGE (sale_date);
CREATE TABLE sd.fact_sales_20261202 PARTITION OF sd.fact_sales
    FOR VALUES FROM ('2026-12-02') TO ('2026-12-03');
CREATE TABLE sd.fact_sales_default PARTITION OF sd.fact_sales DEFAULT;
INSERT INTO sd.fact_sales SELECT '2026-12-02', g, g FROM generate_series(1, 500) g;
INSERT INTO sd.fact_sales SELECT '2026-12-07', g, g FROM generate_series(1, 5) g;
CREATE SCHEMA sd_staging;
CREATE TABLE sd_staging.sales AS SELECT * FROM sd.fact_sales WHERE false;
-- the issue's reproduction: an empty extract replacing a day of 500 rows
SELECT * FROM sd.err($$SELECT * FROM etl_replace_partition('sd.fact_sales', '2026-12-02',
    'SELECT * FROM sd_staging.sales WHERE false')$$);
SELECT count(*) AS day_intact FROM sd.fact_sales WHERE sale_date = '2026-12-02';
-- a day held by the default partition
SELECT * FROM sd.err($$SELECT * FROM etl_replace_partition('sd.fact_sales', '2026-12-07',
    'SELECT * FROM sd_staging.sales', granularity => '1 day')$$);
SELECT count(*) AS default_intact FROM sd.fact_sales_default;
-- etl_replace_where, a condition over two partitions
CREATE TABLE sd.events (d date NOT NULL, id int) PARTITION BY RANGE (d);
CREATE TABLE sd.events_1 PARTITION OF sd.events FOR VALUES FROM ('2026-12-01') TO ('2026-12-02');
CREATE TABLE sd.events_2 PARTITION OF sd.events FOR VALUES FROM ('2026-12-02') TO ('2026-12-03');
INSERT INTO sd.events VALUES ('2026-12-01', 1), ('2026-12-02', 2);
SELECT * FROM sd.err($$SELECT * FROM etl_replace_where('sd.events',
    $c$d >= '2026-12-01'$c$, 'SELECT * FROM sd.events WHERE false')$$);
SELECT count(*) AS all_intact FROM sd.events;
-- a batch with rows may leave a partition of its condition empty
SELECT rows_loaded, rows_replaced FROM etl_replace_where('sd.events',
    $c$d >= '2026-12-01'$c$, $s$SELECT '2026-12-02'::date AS d, 3 AS id$s$);
SELECT * FROM sd.events ORDER BY d;
-- etl_replace_partitions replaces only what the batch has rows for
SELECT count(*) AS replaced FROM etl_replace_partitions('sd.fact_sales', 'SELECT * FROM sd_staging.sales');
-- the call allows it
SELECT rows_loaded, rows_replaced FROM etl_replace_partition('sd.fact_sales', '2026-12-02',
    'SELECT * FROM sd_staging.sales', allow_shrink => true);
-- so does the setting; the argument overrides it
INSERT INTO sd.fact_sales VALUES ('2026-12-02', 1, 1);
SET idem_etl.allow_shrink = on;
SELECT * FROM sd.err($$SELECT * FROM etl_replace_partition('sd.fact_sales', '2026-12-02',
    'SELECT * FROM sd_staging.sales', allow_shrink => false)$$);
SELECT rows_loaded, rows_replaced FROM etl_replace_partition('sd.fact_sales', '2026-12-02',
    'SELECT * FROM sd_staging.sales');
RESET idem_etl.allow_shrink;
-- an empty batch into an empty partition removes nothing: no error
SELECT rows_loaded, rows_replaced FROM etl_replace_partition('sd.fact_sales', '2026-12-02',
    'SELECT * FROM sd_staging.sales');
-- a plain table's value
CREATE TABLE sd.plain (d date NOT NULL, id int);
INSERT INTO sd.plain VALUES ('2026-12-02', 1), ('2026-12-03', 2);
SELECT * FROM sd.err($$SELECT * FROM etl_replace_partition('sd.plain', '2026-12-02',
    'SELECT * FROM sd.plain WHERE false', partition_column => 'd')$$);
SELECT * FROM sd.err($$SELECT * FROM etl_replace_where('sd.plain', 'id > 0',
    'SELECT * FROM sd.plain WHERE false')$$);
SELECT count(*) AS plain_intact FROM sd.plain;
-- delete_missing with an empty batch
CREATE TABLE sd.customers (customer_id int PRIMARY KEY, name text, region text);
INSERT INTO sd.customers VALUES (1, 'a', 'eu'), (2, 'b', 'us');
SELECT * FROM sd.err($$SELECT * FROM etl_upsert_batch('sd.customers',
    'SELECT * FROM sd.customers WHERE false', delete_missing => 'true')$$);
SELECT count(*) AS customers_intact FROM sd.customers;
-- one that covers no row removes nothing: no error
SELECT deleted FROM etl_upsert_batch('sd.customers', 'SELECT * FROM sd.customers WHERE false',
    delete_missing => $$region = 'asia'$$);
SELECT deleted FROM etl_upsert_batch('sd.customers', 'SELECT * FROM sd.customers WHERE false',
    delete_missing => $$region = 'us'$$, allow_shrink => true);

--
-- 2. the previous version is kept (here with the default set explicitly:
-- this cluster's sessions start with 0) and can be restored
--
SET idem_etl.keep_replaced = '1d';
INSERT INTO sd.fact_sales SELECT '2026-12-02', g, g FROM generate_series(1, 3) g;
SELECT rows_loaded, rows_replaced FROM etl_replace_partition('sd.fact_sales', '2026-12-02',
    $$SELECT '2026-12-02'::date AS sale_date, 9 AS id, 9 AS amount$$);
SELECT partition_value, keep_until - replaced_at AS kept_for FROM idem_etl.replaced_partitions;
SELECT etl_restore_partition('sd.fact_sales', '2026-12-02');
SELECT count(*) AS restored FROM sd.fact_sales WHERE sale_date = '2026-12-02';
RESET idem_etl.keep_replaced;

--
-- 3. a bare VALUES source: the target's columns in order, as INSERT ... VALUES
--
SELECT inserted, updated, unchanged FROM etl_upsert_batch('sd.customers',
    $$VALUES (1, 'a', 'eu'), (3, 'c', 'us')$$);
SELECT * FROM sd.customers ORDER BY customer_id;
-- fewer columns: the first ones
SELECT inserted, updated, unchanged FROM etl_upsert_batch('sd.customers', $$VALUES (4, 'd')$$);
-- generated columns are left out
CREATE TABLE sd.gen (id int PRIMARY KEY, doubled int GENERATED ALWAYS AS (id * 2) STORED, v text);
SELECT inserted FROM etl_upsert_batch('sd.gen', $$VALUES (1, 'one')$$);
SELECT * FROM sd.gen;
-- too many columns: 42601 saying how to name them
SELECT * FROM sd.err($$SELECT * FROM etl_upsert_batch('sd.customers', 'VALUES (5, ''e'', ''eu'', 1)')$$);
-- a value that does not fit its column: the error names the source
SELECT * FROM sd.err_arg($$SELECT * FROM etl_upsert_batch('sd.customers', 'VALUES (''x'', ''e'')')$$);

--
-- 4. key_columns (and update_columns, exclude_columns) as users write them
--
CREATE TABLE sd.lines (order_id int, line_no int, "Qty" int, note text,
                       PRIMARY KEY (order_id, line_no));
SELECT inserted FROM etl_upsert_batch('sd.customers', $$VALUES (1, 'a', 'eu')$$, key_columns => 'customer_id');
SELECT inserted FROM etl_upsert_batch('sd.lines', 'SELECT 1 AS order_id, 1 AS line_no, 2 AS "Qty"',
    key_columns => 'order_id, line_no');
SELECT inserted FROM etl_upsert_batch('sd.lines', 'SELECT 1 AS order_id, 2 AS line_no, 2 AS "Qty"',
    key_columns => ' order_id ,line_no ');
SELECT updated FROM etl_upsert_batch('sd.lines', 'SELECT 1 AS order_id, 1 AS line_no, 3 AS "Qty", ''n'' AS note',
    key_columns => '{order_id,line_no}', update_columns => '"Qty"');
SELECT updated FROM etl_upsert_batch('sd.lines', 'SELECT 1 AS order_id, 1 AS line_no, 4 AS "Qty", ''m'' AS note',
    key_columns => ARRAY['order_id', 'line_no'], exclude_columns => 'note');
SELECT updated FROM etl_upsert_batch('sd.lines', 'SELECT 1 AS order_id, 1 AS line_no, 5 AS "Qty"',
    key_columns => ARRAY['order_id', 'line_no']::varchar[]);
SELECT updated FROM etl_upsert_batch('sd.lines', 'SELECT 1 AS order_id, 1 AS line_no, 6 AS "Qty"',
    key_columns => 'order_id, line_no'::varchar);
SELECT * FROM sd.lines ORDER BY 1, 2;
SELECT * FROM sd.err($$SELECT * FROM etl_upsert_batch('sd.lines', 'SELECT 1 AS order_id, 1 AS line_no',
    key_columns => 'order_id,')$$);
SELECT * FROM sd.err($$SELECT * FROM etl_upsert_batch('sd.lines', 'SELECT 1 AS order_id, 1 AS line_no',
    key_columns => 42)$$);
SELECT * FROM sd.err($$SELECT * FROM etl_upsert_batch('sd.lines', 'SELECT 1 AS order_id, 1 AS line_no',
    key_columns => 'order_id, order_id')$$);

--
-- 5. errors that name the argument
--
-- a partition_value that is not a date
SELECT * FROM sd.err_arg($$SELECT * FROM etl_replace_partition('sd.fact_sales', '2026-13-02',
    'SELECT * FROM sd_staging.sales')$$);
-- source and value swapped
SELECT * FROM sd.err_arg($$SELECT * FROM etl_replace_partition('sd.fact_sales',
    'SELECT * FROM sd_staging.sales', '2026-12-02')$$);
-- a syntax error in the source
SELECT * FROM sd.err_arg($$SELECT * FROM etl_replace_partition('sd.fact_sales', '2026-12-02',
    'SELEC * FROM sd_staging.sales')$$);
-- an error while the source runs
SELECT * FROM sd.err_arg($$SELECT * FROM etl_upsert_batch('sd.customers',
    'SELECT 1 / 0 AS customer_id')$$);
-- a source the role may not read, of the target's name: named with its schema
CREATE ROLE idem_test_sd_loader;
GRANT USAGE ON SCHEMA sd, sd_staging TO idem_test_sd_loader;
CREATE TABLE sd.sales (id int PRIMARY KEY, amount numeric);
CREATE TABLE sd_staging.sales2 (id int, amount numeric);
ALTER TABLE sd_staging.sales RENAME TO sales_old;
ALTER TABLE sd_staging.sales2 RENAME TO sales;
INSERT INTO sd_staging.sales VALUES (1, 10);
GRANT SELECT, INSERT, UPDATE ON sd.sales TO idem_test_sd_loader;
SET ROLE idem_test_sd_loader;
SELECT * FROM sd.err($$SELECT * FROM etl_upsert_batch('sd.sales', 'SELECT * FROM sd_staging.sales')$$);
-- through a subquery, a CTE and a view too
RESET ROLE;
CREATE VIEW sd.sales_view AS SELECT * FROM sd_staging.sales;
GRANT SELECT ON sd.sales_view TO idem_test_sd_loader;
CREATE ROLE idem_test_sd_viewer;
ALTER VIEW sd.sales_view OWNER TO idem_test_sd_viewer;
SET ROLE idem_test_sd_loader;
SELECT * FROM sd.err($$SELECT * FROM etl_upsert_batch('sd.sales',
    'WITH s AS (SELECT * FROM sd_staging.sales) SELECT * FROM s')$$);
SELECT * FROM sd.err($$SELECT * FROM etl_upsert_batch('sd.sales',
    'SELECT id, (SELECT max(amount) FROM sd_staging.sales) AS amount FROM sd.sales')$$);
-- a view reads with its owner's rights: the owner's missing right is named
SELECT * FROM sd.err($$SELECT * FROM etl_upsert_batch('sd.sales', 'SELECT * FROM sd.sales_view')$$);
RESET ROLE;
GRANT SELECT ON sd_staging.sales TO idem_test_sd_viewer;
SET ROLE idem_test_sd_loader;
SELECT inserted FROM etl_upsert_batch('sd.sales', 'SELECT * FROM sd.sales_view');
-- column privileges: the columns read are enough
RESET ROLE;
GRANT SELECT (id) ON sd_staging.sales TO idem_test_sd_loader;
SET ROLE idem_test_sd_loader;
SELECT inserted FROM etl_upsert_batch('sd.sales', 'SELECT id FROM sd_staging.sales');
RESET ROLE;

SET client_min_messages = warning;
DROP SCHEMA sd CASCADE;
DROP SCHEMA sd_staging CASCADE;
\set roles '{idem_test_sd_loader,idem_test_sd_viewer}'
\i sql/include/drop_roles.sql
