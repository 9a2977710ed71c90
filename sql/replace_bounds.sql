--
-- replace_bounds: issue 10, points 3 and 4.  Bounds of new RANGE partitions
-- and the values stored in the ledger never depend on the session's
-- TimeZone: timestamptz partitions follow idem_etl.partition_time_zone
-- (default UTC) and values are stored in UTC.  Widths of several units are
-- aligned to a fixed grid (a sibling of that width, else the Unix epoch;
-- whole weeks start on Monday), and widths that cannot be aligned are 22023.
--
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS idem_etl CASCADE;
CREATE EXTENSION idem_etl;
DROP SCHEMA IF EXISTS rbound CASCADE;
RESET client_min_messages;
CREATE SCHEMA rbound;
\set schema rbound
\i sql/include/err.sql
CREATE FUNCTION rbound.parts(t regclass) RETURNS TABLE (part text, bound text) LANGUAGE sql AS $$
    SELECT c.relname::text, pg_get_expr(c.relpartbound, c.oid)
      FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
     WHERE i.inhparent = t ORDER BY 1;
$$;

-- point 3: a day partition made from a UTC session, the next from New York
CREATE TABLE rbound.ev (ts timestamptz NOT NULL, id int) PARTITION BY RANGE (ts);
SET TimeZone = 'UTC';
SELECT rows_loaded FROM etl_replace_partition('rbound.ev', '2026-03-08',
    $$SELECT '2026-03-08 12:00+00'::timestamptz AS ts, 1 AS id$$, granularity => '1 day');
SET TimeZone = 'America/New_York';
SELECT rows_loaded FROM etl_replace_partition('rbound.ev', '2026-03-09',
    $$SELECT '2026-03-09 12:00+00'::timestamptz AS ts, 2 AS id$$);
SET TimeZone = 'UTC';
-- contiguous UTC days, whichever session made them
SELECT * FROM rbound.parts('rbound.ev');
-- the value is stored in UTC
SELECT partition_value, partition_bound FROM idem_etl.runs ORDER BY run_id;
-- keep a replaced version, and restore it from another zone
SELECT rows_loaded FROM etl_replace_partition('rbound.ev', '2026-03-09',
    $$SELECT '2026-03-09 13:00+00'::timestamptz AS ts, 3 AS id$$, keep_replaced => '1 day');
SET TimeZone = 'Europe/Berlin';
SELECT etl_restore_partition('rbound.ev', '2026-03-09');
SET TimeZone = 'UTC';
SELECT * FROM rbound.ev ORDER BY ts;
-- a value with an explicit offset is that instant
SET TimeZone = 'Asia/Tokyo';
SELECT rows_loaded, rows_replaced FROM etl_replace_partition('rbound.ev', '2026-03-09 23:30:00-05',
    $$SELECT '2026-03-10 04:30+00'::timestamptz AS ts, 4 AS id$$);
SET TimeZone = 'UTC';
SELECT * FROM rbound.parts('rbound.ev');

-- partitions following another zone's days: idem_etl.partition_time_zone,
-- across the change to daylight saving time (2026-03-08 in New York)
CREATE TABLE rbound.ny (ts timestamptz NOT NULL, id int) PARTITION BY RANGE (ts);
SET idem_etl.partition_time_zone = 'America/New_York';
SET TimeZone = 'Asia/Tokyo';
SELECT rows_loaded FROM etl_replace_partition('rbound.ny', '2026-03-07',
    $$SELECT '2026-03-07 12:00-05'::timestamptz AS ts, 1 AS id$$, granularity => '1 day');
SELECT rows_loaded FROM etl_replace_partition('rbound.ny', '2026-03-08',
    $$SELECT '2026-03-08 12:00-04'::timestamptz AS ts, 2 AS id$$);
SELECT rows_loaded FROM etl_replace_partition('rbound.ny', '2026-03-09',
    $$SELECT '2026-03-09 12:00-04'::timestamptz AS ts, 3 AS id$$);
SET TimeZone = 'UTC';
SELECT * FROM rbound.parts('rbound.ny');
RESET idem_etl.partition_time_zone;

-- point 4: two-day partitions on the epoch's grid, either order
CREATE TABLE rbound.d2 (d date NOT NULL, id int) PARTITION BY RANGE (d);
SELECT rows_loaded FROM etl_replace_partition('rbound.d2', '2026-11-28', $$SELECT '2026-11-28'::date AS d, 1 AS id$$, granularity => '2 days');
SELECT rows_loaded FROM etl_replace_partition('rbound.d2', '2026-11-27', $$SELECT '2026-11-27'::date AS d, 2 AS id$$, granularity => '2 days');
SELECT rows_loaded FROM etl_replace_partition('rbound.d2', '2026-11-29', $$SELECT '2026-11-29'::date AS d, 3 AS id$$, granularity => '2 days');
SELECT * FROM rbound.parts('rbound.d2');
-- a sibling two days wide sets the grid
CREATE TABLE rbound.d3 (d date NOT NULL, id int) PARTITION BY RANGE (d);
CREATE TABLE rbound.d3_a PARTITION OF rbound.d3 FOR VALUES FROM ('2026-11-27') TO ('2026-11-29');
SELECT rows_loaded FROM etl_replace_partition('rbound.d3', '2026-11-30', $$SELECT '2026-11-30'::date AS d, 1 AS id$$, granularity => '2 days');
SELECT * FROM rbound.parts('rbound.d3');
-- weeks start on Monday (2026-11-28 is a Saturday), two months on the epoch's grid
CREATE TABLE rbound.w (d date NOT NULL, id int) PARTITION BY RANGE (d);
SELECT rows_loaded FROM etl_replace_partition('rbound.w', '2026-11-28', $$SELECT '2026-11-28'::date AS d, 1 AS id$$, granularity => '1 week');
SELECT rows_loaded FROM etl_replace_partition('rbound.w', '2026-12-14', $$SELECT '2026-12-14'::date AS d, 1 AS id$$, granularity => '2 weeks');
SELECT * FROM rbound.parts('rbound.w');
CREATE TABLE rbound.m2 (d date NOT NULL, id int) PARTITION BY RANGE (d);
SELECT rows_loaded FROM etl_replace_partition('rbound.m2', '2026-11-28', $$SELECT '2026-11-28'::date AS d, 1 AS id$$, granularity => '2 months');
SELECT rows_loaded FROM etl_replace_partition('rbound.m2', '2026-12-02', $$SELECT '2026-12-02'::date AS d, 1 AS id$$, granularity => '2 months');
SELECT rows_loaded FROM etl_replace_partition('rbound.m2', '1969-12-02', $$SELECT '1969-12-02'::date AS d, 1 AS id$$, granularity => '2 months');
SELECT * FROM rbound.parts('rbound.m2');
-- hours and minutes on timestamps
CREATE TABLE rbound.h (ts timestamp NOT NULL, id int) PARTITION BY RANGE (ts);
SELECT rows_loaded FROM etl_replace_partition('rbound.h', '2026-11-28 07:10', $$SELECT '2026-11-28 07:10'::timestamp AS ts, 1 AS id$$, granularity => '6 hours');
SELECT rows_loaded FROM etl_replace_partition('rbound.h', '2026-11-28 12:50', $$SELECT '2026-11-28 12:50'::timestamp AS ts, 1 AS id$$, granularity => '15 minutes');
SELECT * FROM rbound.parts('rbound.h');
-- widths that cannot be aligned: 22023, naming the width; nothing created
SELECT * FROM rbound.err($$SELECT * FROM etl_replace_partition('rbound.h', '2026-12-01', 'SELECT ''2026-12-01''::timestamp AS ts', granularity => '1 day 2 hours')$$);
SELECT * FROM rbound.err($$SELECT * FROM etl_replace_partition('rbound.h', '2026-12-01', 'SELECT ''2026-12-01''::timestamp AS ts', granularity => '1 month 1 day')$$);
SELECT * FROM rbound.err($$SELECT * FROM etl_replace_partition('rbound.d2', '2026-12-01', 'SELECT ''2026-12-01''::date AS d', granularity => '6 hours')$$);
SELECT * FROM rbound.err($$SELECT * FROM etl_replace_partition('rbound.d2', '2026-12-01', 'SELECT ''2026-12-01''::date AS d', granularity => '-1 day')$$);
SELECT count(*) FROM rbound.parts('rbound.h');

-- infinite values: a partition that holds one is replaced; none is made
-- for one, nor a slice (it was [infinity, infinity), refused with 23514)
CREATE TABLE rbound.mm (d date, v int) PARTITION BY RANGE (d);
CREATE TABLE rbound.mm_min PARTITION OF rbound.mm FOR VALUES FROM (MINVALUE) TO ('2026-01-01');
INSERT INTO rbound.mm VALUES ('-infinity', 1), ('2020-01-01', 2);
SELECT * FROM rbound.err($$SELECT * FROM etl_replace_partition('rbound.mm', 'infinity',
    'SELECT ''infinity''::date AS d, 50 AS v')$$);
SELECT * FROM rbound.err($$SELECT * FROM etl_replace_partition('rbound.mm', '-infinity',
    'SELECT ''-infinity''::date AS d, 50 AS v', granularity => '1 day')$$);
SELECT partition_table, rows_loaded, rows_replaced FROM etl_replace_partition('rbound.mm', '-infinity',
    $$SELECT '-infinity'::date AS d, 50 AS v$$);
SELECT * FROM rbound.mm;

SET client_min_messages = warning;
DROP SCHEMA rbound CASCADE;
