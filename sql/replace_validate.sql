--
-- replace_validate: point 4 of etl_replace_partition (validation before
-- anything changes).  A source row outside the partition's bounds, or with
-- NULL in the partition column: 23514 with the number of such rows and one
-- example value.  Violations of the parent's constraints keep their own
-- SQLSTATEs (primary key and unique 23505, check 23514, not null 23502,
-- foreign key 23503), and so do errors of the source itself.  In every
-- error case the target, its partitions (files and rows), the default
-- partition, the kept versions and the ledger are exactly as before.
--
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS idem_etl CASCADE;
CREATE EXTENSION idem_etl;
DROP SCHEMA IF EXISTS rvalid CASCADE;
RESET client_min_messages;

CREATE SCHEMA rvalid;

\set schema rvalid
\i sql/include/err.sql

CREATE TABLE rvalid.parent (pid int PRIMARY KEY);
INSERT INTO rvalid.parent VALUES (1), (2);
CREATE TABLE rvalid.t (
    d    date NOT NULL,
    id   int  NOT NULL,
    qty  int  NOT NULL CHECK (qty >= 0),
    code text,
    pid  int REFERENCES rvalid.parent,
    PRIMARY KEY (d, id),
    UNIQUE (d, code)
) PARTITION BY RANGE (d);
CREATE TABLE rvalid.t_20261127 PARTITION OF rvalid.t FOR VALUES FROM ('2026-11-27') TO ('2026-11-28');
CREATE TABLE rvalid.t_20261128 PARTITION OF rvalid.t FOR VALUES FROM ('2026-11-28') TO ('2026-11-29');
CREATE TABLE rvalid.t_default PARTITION OF rvalid.t DEFAULT;
INSERT INTO rvalid.t VALUES
    ('2026-11-27', 1, 10, 'a', 1), ('2026-11-28', 1, 10, 'a', 1), ('2026-11-28', 2, 20, 'b', 2),
    ('2026-11-30', 1, 30, 'c', NULL);

-- state(): every relation of the schema with its file and rows, the
-- partition tree, the kept versions and the ledger
CREATE FUNCTION rvalid.state() RETURNS text LANGUAGE plpgsql AS $$
DECLARE r record; s text := ''; x text;
BEGIN
    FOR r IN SELECT c.oid, c.relname, c.relkind FROM pg_class c
              WHERE c.relnamespace = 'rvalid'::regnamespace ORDER BY c.relname LOOP
        s := s || format('%s/%s/%s', r.relname, r.relkind, pg_relation_filenode(r.oid));
        IF r.relkind = 'r' THEN
            EXECUTE format('SELECT string_agg(format(''%%s@%%s'', x::text, x.xmin), '' '' ORDER BY x::text) FROM %s x',
                           r.oid::regclass) INTO x;
            s := s || ' [' || coalesce(x, '') || ']';
        END IF;
        s := s || E'\n';
    END LOOP;
    SELECT string_agg(format('%s %s', inhrelid::regclass, pg_get_expr(relpartbound, inhrelid)), ', ' ORDER BY 1)
      INTO x FROM pg_inherits JOIN pg_class ON oid = inhrelid WHERE inhparent = 'rvalid.t'::regclass;
    s := s || 'tree: ' || x || E'\n';
    s := s || 'kept: ' || (SELECT count(*) FROM idem_etl.replaced_partitions) || E'\n';
    s := s || 'ledger: ' || (SELECT count(*) FROM idem_etl.runs);
    RETURN s;
END $$;

-- the base of every bad source: two good rows
CREATE VIEW rvalid.good AS
SELECT * FROM (VALUES ('2026-11-28'::date, 1, 11, 'a', 1), ('2026-11-28'::date, 2, 21, 'b', 2))
    g(d, id, qty, code, pid);

-- one good run first, so there is a ledger row and a kept version
SELECT rows_loaded, rows_replaced, skipped
  FROM etl_replace_partition('rvalid.t', '2026-11-28',
       $$SELECT '2026-11-28'::date AS d, 1 AS id, 10 AS qty, 'a' AS code, 1 AS pid
         UNION ALL SELECT '2026-11-28', 2, 20, 'b', 2$$,
       keep_replaced => '1 day');
SELECT rvalid.state() AS before \gset


--
-- rows outside the partition: 23514 with the count and an example value
--
-- two rows of another day (inside another partition)
SELECT * FROM rvalid.err($$SELECT * FROM etl_replace_partition('rvalid.t', '2026-11-28',
    $s$SELECT * FROM rvalid.good UNION ALL SELECT '2026-11-27', 3, 1, 'x', 1
       UNION ALL SELECT '2026-11-27', 4, 1, 'y', 1$s$)$$);
SELECT rvalid.state() = :'before' AS unchanged;
-- one row of a day that only the default partition would take
SELECT * FROM rvalid.err($$SELECT * FROM etl_replace_partition('rvalid.t', '2026-11-28',
    $s$SELECT * FROM rvalid.good UNION ALL SELECT '2026-12-25', 3, 1, 'x', 1$s$)$$);
SELECT rvalid.state() = :'before' AS unchanged;
-- a row of the day after: the upper bound is exclusive
SELECT * FROM rvalid.err($$SELECT * FROM etl_replace_partition('rvalid.t', '2026-11-28',
    $s$SELECT * FROM rvalid.good UNION ALL SELECT '2026-11-29', 3, 1, 'x', 1$s$)$$);
SELECT rvalid.state() = :'before' AS unchanged;
-- NULL in the partition column: 23514 too, counted
SELECT * FROM rvalid.err($$SELECT * FROM etl_replace_partition('rvalid.t', '2026-11-28',
    $s$SELECT * FROM rvalid.good UNION ALL SELECT NULL, 3, 1, 'x', 1 UNION ALL SELECT NULL, 4, 1, 'y', 1
       UNION ALL SELECT NULL, 5, 1, 'z', 1$s$)$$);
SELECT rvalid.state() = :'before' AS unchanged;
-- a missing partition (2026-11-30, its rows in the default partition) and a
-- row outside the bounds it would get: nothing created, default untouched
SELECT * FROM rvalid.err($$SELECT * FROM etl_replace_partition('rvalid.t', '2026-11-30',
    $s$SELECT '2026-11-30'::date AS d, 1 AS id, 1 AS qty, 'x' AS code, 1 AS pid
       UNION ALL SELECT '2026-12-01', 2, 1, 'y', 1$s$)$$);
SELECT rvalid.state() = :'before' AS unchanged;
-- the same with keep_replaced and a run_key: nothing kept, nothing recorded
SELECT * FROM rvalid.err($$SELECT * FROM etl_replace_partition('rvalid.t', '2026-11-28',
    $s$SELECT * FROM rvalid.good UNION ALL SELECT '2026-11-27', 3, 1, 'x', 1$s$,
    keep_replaced => '1 day', run_key => 'bad')$$);
SELECT rvalid.state() = :'before' AS unchanged;

--
-- constraint violations of the parent, with their own SQLSTATE
--
-- primary key: a duplicate inside the source
SELECT * FROM rvalid.err($$SELECT * FROM etl_replace_partition('rvalid.t', '2026-11-28',
    $s$SELECT * FROM rvalid.good UNION ALL SELECT '2026-11-28', 1, 5, 'z', 1$s$)$$);
SELECT rvalid.state() = :'before' AS unchanged;
-- unique (d, code)
SELECT * FROM rvalid.err($$SELECT * FROM etl_replace_partition('rvalid.t', '2026-11-28',
    $s$SELECT * FROM rvalid.good UNION ALL SELECT '2026-11-28', 3, 5, 'a', 1$s$)$$);
SELECT rvalid.state() = :'before' AS unchanged;
-- check
SELECT * FROM rvalid.err($$SELECT * FROM etl_replace_partition('rvalid.t', '2026-11-28',
    $s$SELECT * FROM rvalid.good UNION ALL SELECT '2026-11-28', 3, -1, 'z', 1$s$)$$);
SELECT rvalid.state() = :'before' AS unchanged;
-- not null
SELECT * FROM rvalid.err($$SELECT * FROM etl_replace_partition('rvalid.t', '2026-11-28',
    $s$SELECT * FROM rvalid.good UNION ALL SELECT '2026-11-28', 3, NULL, 'z', 1$s$)$$);
SELECT rvalid.state() = :'before' AS unchanged;
-- not null of a column missing from the source (its default is NULL)
SELECT * FROM rvalid.err($$SELECT * FROM etl_replace_partition('rvalid.t', '2026-11-28',
    $s$SELECT d, id, code FROM rvalid.good$s$)$$);
SELECT rvalid.state() = :'before' AS unchanged;
-- foreign key
SELECT * FROM rvalid.err($$SELECT * FROM etl_replace_partition('rvalid.t', '2026-11-28',
    $s$SELECT * FROM rvalid.good UNION ALL SELECT '2026-11-28', 3, 1, 'z', 99$s$)$$);
SELECT rvalid.state() = :'before' AS unchanged;
-- the same violations in a missing partition: nothing created
SELECT * FROM rvalid.err($$SELECT * FROM etl_replace_partition('rvalid.t', '2026-11-30',
    $s$SELECT '2026-11-30'::date AS d, 1 AS id, 1 AS qty, 'x' AS code, 99 AS pid$s$)$$);
SELECT rvalid.state() = :'before' AS unchanged;

--
-- errors of the source and of its columns
--
-- a value out of range for the column (bigint into int): 22003
SELECT * FROM rvalid.err($$SELECT * FROM etl_replace_partition('rvalid.t', '2026-11-28',
    $s$SELECT d, id, CASE WHEN id = 2 THEN 3000000000 ELSE qty END AS qty, code, pid FROM rvalid.good$s$)$$);
SELECT rvalid.state() = :'before' AS unchanged;
-- an error raised by the source query: 22012
SELECT * FROM rvalid.err($$SELECT * FROM etl_replace_partition('rvalid.t', '2026-11-28',
    $s$SELECT d, id, qty + 0 / (2 - id) AS qty, code, pid FROM rvalid.good$s$)$$);
SELECT rvalid.state() = :'before' AS unchanged;
-- a source column the target does not have: 42703 naming it
SELECT * FROM rvalid.err($$SELECT * FROM etl_replace_partition('rvalid.t', '2026-11-28',
    $s$SELECT *, 'oops' AS nmae FROM rvalid.good$s$)$$);
SELECT rvalid.state() = :'before' AS unchanged;
-- the partition column missing from the source: 42703
SELECT * FROM rvalid.err($$SELECT * FROM etl_replace_partition('rvalid.t', '2026-11-28',
    $s$SELECT id, qty, code, pid FROM rvalid.good$s$)$$);
SELECT rvalid.state() = :'before' AS unchanged;
-- a partition_value that is not a value of the column's type
SELECT * FROM rvalid.err($$SELECT * FROM etl_replace_partition('rvalid.t', 'not a date',
    'TABLE rvalid.good')$$);
SELECT rvalid.state() = :'before' AS unchanged;

-- the good source still works afterwards, and the error cases left nothing
SELECT rows_loaded, rows_replaced, skipped
  FROM etl_replace_partition('rvalid.t', '2026-11-28', 'TABLE rvalid.good');
SELECT * FROM rvalid.t ORDER BY d, id;
SELECT operation, partition_value, rows_loaded, rows_replaced, skipped FROM idem_etl.runs ORDER BY run_id;

SET client_min_messages = warning;
DROP SCHEMA rvalid CASCADE;
DROP EXTENSION idem_etl;
RESET client_min_messages;
