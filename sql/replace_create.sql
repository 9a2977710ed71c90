--
-- replace_create: point 3 of etl_replace_partition (which data is replaced).
-- The whole partition holding the value is replaced (for LIST, every value
-- of the partition; for RANGE, its whole range).  A missing partition is
-- created with the bounds that hold the value: LIST, that value; RANGE, the
-- width and alignment of the sibling partitions, or granularity (date and
-- timestamp values aligned with date_trunc to its unit).  With neither:
-- 22023 with a hint to pass granularity.  Rows of a DEFAULT partition inside
-- the new bounds are moved out of it and counted in rows_replaced.
--
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS idem_etl CASCADE;
CREATE EXTENSION idem_etl;
DROP SCHEMA IF EXISTS rcreate CASCADE;
RESET client_min_messages;

CREATE SCHEMA rcreate;

\set schema rcreate
\i sql/include/err.sql

-- where(p): the bound of a partition, its parent and its schema
CREATE FUNCTION rcreate.where_is(p regclass) RETURNS text LANGUAGE sql AS $$
    SELECT format('%s of %s in schema %s', pg_get_expr(c.relpartbound, c.oid),
                  i.inhparent::regclass, c.relnamespace::regnamespace)
      FROM pg_class c JOIN pg_inherits i ON i.inhrelid = c.oid WHERE c.oid = p;
$$;
-- bounds(t): the bounds of all partitions of t, in order
CREATE FUNCTION rcreate.bounds(t regclass) RETURNS SETOF text LANGUAGE sql AS $$
    SELECT pg_get_expr(c.relpartbound, c.oid)
      FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
     WHERE i.inhparent = t ORDER BY 1;
$$;
-- contents(t): which partition holds which rows
CREATE FUNCTION rcreate.contents(t regclass) RETURNS TABLE (bound text, rows text)
LANGUAGE plpgsql AS $$
BEGIN
    RETURN QUERY EXECUTE format(
        $q$SELECT pg_get_expr(c.relpartbound, c.oid), string_agg(x::text, ' ' ORDER BY x::text)
             FROM %s x JOIN pg_class c ON c.oid = x.tableoid
            GROUP BY 1 ORDER BY 1$q$, t);
END $$;

--
-- RANGE by day: a missing day gets the siblings' width and alignment
--
CREATE TABLE rcreate.daily (d date NOT NULL, id int NOT NULL, v text, PRIMARY KEY (d, id))
    PARTITION BY RANGE (d);
CREATE TABLE rcreate.daily_20261101 PARTITION OF rcreate.daily FOR VALUES FROM ('2026-11-01') TO ('2026-11-02');
CREATE TABLE rcreate.daily_20261102 PARTITION OF rcreate.daily FOR VALUES FROM ('2026-11-02') TO ('2026-11-03');
CREATE TABLE rcreate.daily_20261103 PARTITION OF rcreate.daily FOR VALUES FROM ('2026-11-03') TO ('2026-11-04');
INSERT INTO rcreate.daily VALUES ('2026-11-01', 1, 'a'), ('2026-11-02', 1, 'b');
SELECT rcreate.where_is(partition_table), rows_loaded, rows_replaced, skipped
  FROM etl_replace_partition('rcreate.daily', '2026-11-10',
       $$SELECT '2026-11-10'::date AS d, g AS id, 'x' AS v FROM generate_series(1, 3) g$$);
-- before the first sibling too
SELECT rcreate.where_is(partition_table), rows_loaded, rows_replaced, skipped
  FROM etl_replace_partition('rcreate.daily', '2026-10-31',
       $$SELECT '2026-10-31'::date AS d, 1 AS id, 'y' AS v$$);
SELECT * FROM rcreate.contents('rcreate.daily');
-- the created partition has the parent's index, attached
SELECT count(*) AS attached_indexes FROM pg_index x JOIN pg_inherits i ON i.inhrelid = x.indexrelid
 WHERE x.indrelid = (SELECT c.oid FROM pg_class c JOIN pg_inherits h ON h.inhrelid = c.oid
                      WHERE h.inhparent = 'rcreate.daily'::regclass
                        AND pg_get_expr(c.relpartbound, c.oid) LIKE '%11-10-2026%');
-- a granularity overrides the siblings: January 2027 as a month
SELECT rcreate.where_is(partition_table), rows_loaded, rows_replaced, skipped
  FROM etl_replace_partition('rcreate.daily', '2027-01-15',
       $$SELECT '2027-01-15'::date AS d, 1 AS id, 'm' AS v UNION ALL SELECT '2027-01-31', 2, 'm'$$,
       granularity => '1 month');
SELECT * FROM rcreate.bounds('rcreate.daily');

--
-- RANGE by month: siblings a month wide (28 to 31 days) give a month
--
CREATE TABLE rcreate.monthly (d date NOT NULL, v text) PARTITION BY RANGE (d);
CREATE TABLE rcreate.monthly_202601 PARTITION OF rcreate.monthly FOR VALUES FROM ('2026-01-01') TO ('2026-02-01');
CREATE TABLE rcreate.monthly_202602 PARTITION OF rcreate.monthly FOR VALUES FROM ('2026-02-01') TO ('2026-03-01');
CREATE TABLE rcreate.monthly_202603 PARTITION OF rcreate.monthly FOR VALUES FROM ('2026-03-01') TO ('2026-04-01');
SELECT rcreate.where_is(partition_table), rows_loaded, rows_replaced
  FROM etl_replace_partition('rcreate.monthly', '2026-05-17',
       $$SELECT '2026-05-17'::date AS d, 'may' AS v$$);
SELECT rcreate.where_is(partition_table), rows_loaded, rows_replaced
  FROM etl_replace_partition('rcreate.monthly', '2025-12-31',
       $$SELECT '2025-12-31'::date AS d, 'dec' AS v$$);
-- an existing month is replaced as a whole: any day of it names it, and
-- the source may hold every day of the month
INSERT INTO rcreate.monthly VALUES ('2026-02-03', 'old'), ('2026-02-20', 'old');
SELECT rcreate.where_is(partition_table), rows_loaded, rows_replaced
  FROM etl_replace_partition('rcreate.monthly', '2026-02-14',
       $$SELECT '2026-02-01'::date AS d, 'new' AS v UNION ALL SELECT '2026-02-28', 'new'$$);
SELECT * FROM rcreate.contents('rcreate.monthly');

--
-- RANGE on integers: width 10, aligned at 5 (..., [-5,5), [5,15), [15,25), ...)
--
CREATE TABLE rcreate.ints (k int NOT NULL, v text) PARTITION BY RANGE (k);
CREATE TABLE rcreate.ints_5 PARTITION OF rcreate.ints FOR VALUES FROM (5) TO (15);
CREATE TABLE rcreate.ints_15 PARTITION OF rcreate.ints FOR VALUES FROM (15) TO (25);
SELECT rcreate.where_is(partition_table), rows_loaded
  FROM etl_replace_partition('rcreate.ints', '47', 'SELECT 47 AS k, ''a'' AS v UNION ALL SELECT 54, ''b''');
SELECT rcreate.where_is(partition_table), rows_loaded
  FROM etl_replace_partition('rcreate.ints', '-3', 'SELECT -3 AS k, ''c'' AS v');
SELECT * FROM rcreate.bounds('rcreate.ints');

--
-- RANGE on timestamps: siblings a day wide; granularity '1 hour'
--
CREATE TABLE rcreate.ts (t timestamp NOT NULL, v text) PARTITION BY RANGE (t);
CREATE TABLE rcreate.ts_20261101 PARTITION OF rcreate.ts FOR VALUES FROM ('2026-11-01') TO ('2026-11-02');
CREATE TABLE rcreate.ts_20261102 PARTITION OF rcreate.ts FOR VALUES FROM ('2026-11-02') TO ('2026-11-03');
SELECT rcreate.where_is(partition_table), rows_loaded
  FROM etl_replace_partition('rcreate.ts', '2026-11-10 13:45:10',
       $$SELECT '2026-11-10 13:45:10'::timestamp AS t, 'a' AS v UNION ALL SELECT '2026-11-10 00:00', 'b'$$);
CREATE TABLE rcreate.ts_h (t timestamp NOT NULL, v text) PARTITION BY RANGE (t);
SELECT rcreate.where_is(partition_table), rows_loaded
  FROM etl_replace_partition('rcreate.ts_h', '2026-11-10 13:45:10',
       $$SELECT '2026-11-10 13:45:10'::timestamp AS t, 'a' AS v UNION ALL SELECT '2026-11-10 13:59:59.999999', 'b'$$,
       granularity => '1 hour');
SELECT rcreate.where_is(partition_table), rows_loaded
  FROM etl_replace_partition('rcreate.ts_h', '2026-11-11 08:00',
       $$SELECT '2026-11-11 08:30'::timestamp AS t, 'c' AS v$$,
       granularity => '1 day');

--
-- no sibling: granularity '1 month' for 2026-11-05 gives [2026-11-01, 2026-12-01);
-- without it, 22023 with a hint to pass granularity, nothing created
--
CREATE TABLE rcreate.empty (d date NOT NULL, v text) PARTITION BY RANGE (d);
SELECT * FROM rcreate.err($$SELECT * FROM etl_replace_partition('rcreate.empty', '2026-11-05',
    'SELECT ''2026-11-05''::date AS d, ''x'' AS v')$$);
SELECT count(*) AS partitions FROM rcreate.bounds('rcreate.empty');
SELECT rcreate.where_is(partition_table), rows_loaded, rows_replaced
  FROM etl_replace_partition('rcreate.empty', '2026-11-05',
       $$SELECT '2026-11-05'::date AS d, 'x' AS v UNION ALL SELECT '2026-11-30', 'y'
         UNION ALL SELECT '2026-11-01', 'z'$$,
       granularity => '1 month');
SELECT * FROM rcreate.contents('rcreate.empty');
-- only a DEFAULT partition is no sibling either
CREATE TABLE rcreate.onlydef (d date NOT NULL, v text) PARTITION BY RANGE (d);
CREATE TABLE rcreate.onlydef_default PARTITION OF rcreate.onlydef DEFAULT;
INSERT INTO rcreate.onlydef VALUES ('2026-11-05', 'in default');
SELECT * FROM rcreate.err($$SELECT * FROM etl_replace_partition('rcreate.onlydef', '2026-11-05',
    'SELECT ''2026-11-05''::date AS d, ''x'' AS v')$$);
SELECT * FROM rcreate.contents('rcreate.onlydef');

--
-- LIST: a partition of several values is replaced as a whole; a missing
-- value gets a partition of its own
--
CREATE TABLE rcreate.regional (region text NOT NULL, id int NOT NULL, v text) PARTITION BY LIST (region);
CREATE TABLE rcreate.regional_euuk PARTITION OF rcreate.regional FOR VALUES IN ('eu', 'uk');
CREATE TABLE rcreate.regional_us PARTITION OF rcreate.regional FOR VALUES IN ('us');
INSERT INTO rcreate.regional VALUES ('eu', 1, 'old'), ('eu', 2, 'old'), ('uk', 3, 'old'), ('us', 4, 'old');
SELECT rcreate.where_is(partition_table), rows_loaded, rows_replaced
  FROM etl_replace_partition('rcreate.regional', 'eu',
       $$SELECT 'eu' AS region, 10 AS id, 'new' AS v UNION ALL SELECT 'eu', 11, 'new'$$);
SELECT * FROM rcreate.contents('rcreate.regional');
-- naming either value of the partition is the same
SELECT rcreate.where_is(partition_table), rows_loaded, rows_replaced
  FROM etl_replace_partition('rcreate.regional', 'uk',
       $$SELECT 'uk' AS region, 20 AS id, 'new' AS v UNION ALL SELECT 'eu', 21, 'new'$$);
SELECT * FROM rcreate.contents('rcreate.regional');
SELECT rcreate.where_is(partition_table), rows_loaded, rows_replaced
  FROM etl_replace_partition('rcreate.regional', 'br',
       $$SELECT 'br' AS region, 30 AS id, 'new' AS v$$);
-- a value that needs quoting
SELECT rcreate.where_is(partition_table), rows_loaded, rows_replaced
  FROM etl_replace_partition('rcreate.regional', 'it''s',
       $$SELECT 'it''s' AS region, 40 AS id, 'quoted' AS v$$);
SELECT * FROM rcreate.contents('rcreate.regional');

--
-- DEFAULT partition: its rows inside the new bounds are the data being
-- replaced: moved out and counted in rows_replaced; the rest stays
--
CREATE TABLE rcreate.withdef (d date NOT NULL, id int NOT NULL, v text, PRIMARY KEY (d, id))
    PARTITION BY RANGE (d);
CREATE TABLE rcreate.withdef_20261101 PARTITION OF rcreate.withdef FOR VALUES FROM ('2026-11-01') TO ('2026-11-02');
CREATE TABLE rcreate.withdef_20261102 PARTITION OF rcreate.withdef FOR VALUES FROM ('2026-11-02') TO ('2026-11-03');
CREATE TABLE rcreate.withdef_default PARTITION OF rcreate.withdef DEFAULT;
INSERT INTO rcreate.withdef VALUES
    ('2026-11-01', 1, 'day 1'), ('2026-11-01', 2, 'day 1'),
    ('2026-11-10', 1, 'landed in default'), ('2026-11-10', 2, 'landed in default'),
    ('2026-11-10', 3, 'landed in default'),
    ('2026-11-11', 1, 'other day in default'), ('2026-12-01', 1, 'december in default'),
    ('2026-12-24', 1, 'december in default');
SELECT * FROM rcreate.contents('rcreate.withdef');
-- replacing an existing day does not touch the default partition
SELECT pg_relation_filenode('rcreate.withdef_default') AS def_fn \gset
SELECT rcreate.where_is(partition_table), rows_loaded, rows_replaced
  FROM etl_replace_partition('rcreate.withdef', '2026-11-01',
       $$SELECT '2026-11-01'::date AS d, 1 AS id, 'day 1 new' AS v$$);
SELECT pg_relation_filenode('rcreate.withdef_default') = :def_fn AS default_same_file;
-- a day that landed in the default partition: 3 rows replaced by 2
SELECT rcreate.where_is(partition_table), rows_loaded, rows_replaced
  FROM etl_replace_partition('rcreate.withdef', '2026-11-10',
       $$SELECT '2026-11-10'::date AS d, g AS id, 'loaded' AS v FROM generate_series(1, 2) g$$);
SELECT * FROM rcreate.contents('rcreate.withdef');
-- a month (granularity) takes both December rows out of the default partition
SELECT rcreate.where_is(partition_table), rows_loaded, rows_replaced
  FROM etl_replace_partition('rcreate.withdef', '2026-12-15',
       $$SELECT '2026-12-15'::date AS d, 1 AS id, 'december loaded' AS v$$,
       granularity => '1 month');
SELECT * FROM rcreate.contents('rcreate.withdef');
-- now the siblings have different widths (a day, a month): the bounds
-- cannot be inferred, 22023, nothing changes
SELECT * FROM rcreate.err($$SELECT * FROM etl_replace_partition('rcreate.withdef', '2026-11-11',
    'SELECT ''2026-11-11''::date AS d, 1 AS id, ''x'' AS v')$$);
SELECT count(*) AS partitions FROM rcreate.bounds('rcreate.withdef');
-- an empty source for a day in the default partition: its rows are removed
SELECT rcreate.where_is(partition_table), rows_loaded, rows_replaced
  FROM etl_replace_partition('rcreate.withdef', '2026-11-11',
       $$SELECT '2026-11-11'::date AS d, 1 AS id, 'x' AS v WHERE false$$, allow_shrink => true,
       granularity => '1 day');
SELECT * FROM rcreate.contents('rcreate.withdef');

-- LIST with a DEFAULT partition
CREATE TABLE rcreate.regional_default PARTITION OF rcreate.regional DEFAULT;
INSERT INTO rcreate.regional VALUES ('jp', 50, 'in default'), ('jp', 51, 'in default'), ('kr', 52, 'in default');
SELECT rcreate.where_is(partition_table), rows_loaded, rows_replaced
  FROM etl_replace_partition('rcreate.regional', 'jp',
       $$SELECT 'jp' AS region, 60 AS id, 'loaded' AS v$$);
SELECT * FROM rcreate.contents('rcreate.regional');

SET client_min_messages = warning;
DROP SCHEMA rcreate CASCADE;
DROP EXTENSION idem_etl;
RESET client_min_messages;
