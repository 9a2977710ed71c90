--
-- replace_many: point 7 (etl_replace_partitions, dynamic overwrite).
-- Every partition for which the source has at least one row is replaced,
-- partitions absent from the source are untouched (same file, same rows),
-- missing partitions are created, all in one transaction: one bad row
-- anywhere and nothing changes.  The source is evaluated once.  One result
-- row (and one ledger row) per partition replaced.
--
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS idem_etl CASCADE;
CREATE EXTENSION idem_etl;
DROP SCHEMA IF EXISTS rmany CASCADE;
RESET client_min_messages;

CREATE SCHEMA rmany;

\set schema rmany
\i sql/include/err.sql

CREATE TABLE rmany.t (d date NOT NULL, id int NOT NULL, v text, PRIMARY KEY (d, id)) PARTITION BY RANGE (d);
CREATE TABLE rmany.t_20261101 PARTITION OF rmany.t FOR VALUES FROM ('2026-11-01') TO ('2026-11-02');
CREATE TABLE rmany.t_20261102 PARTITION OF rmany.t FOR VALUES FROM ('2026-11-02') TO ('2026-11-03');
CREATE TABLE rmany.t_20261103 PARTITION OF rmany.t FOR VALUES FROM ('2026-11-03') TO ('2026-11-04');
CREATE TABLE rmany.t_20261104 PARTITION OF rmany.t FOR VALUES FROM ('2026-11-04') TO ('2026-11-05');
CREATE TABLE rmany.t_20261105 PARTITION OF rmany.t FOR VALUES FROM ('2026-11-05') TO ('2026-11-06');
INSERT INTO rmany.t SELECT d, g, 'old' FROM generate_series('2026-11-01'::date, '2026-11-05', '1 day') d,
                                           generate_series(1, 2) g;

-- files(): every partition with its bound, file and row versions
CREATE FUNCTION rmany.files() RETURNS TABLE (bound text, filenode oid, versions text)
LANGUAGE plpgsql AS $$
DECLARE r record;
BEGIN
    FOR r IN SELECT c.oid, pg_get_expr(c.relpartbound, c.oid) AS b
               FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
              WHERE i.inhparent = 'rmany.t'::regclass ORDER BY 2 LOOP
        bound := r.b;
        filenode := pg_relation_filenode(r.oid);
        EXECUTE format('SELECT string_agg(format(''%%s@%%s:%%s'', ctid, xmin, x::text), '' '' ORDER BY ctid) FROM %s x',
                       r.oid::regclass) INTO versions;
        RETURN NEXT;
    END LOOP;
END $$;
CREATE FUNCTION rmany.state() RETURNS text LANGUAGE sql AS $$
    SELECT string_agg(format('%s/%s/%s', bound, filenode, versions), E'\n' ORDER BY bound)
        || E'\nledger=' || (SELECT count(*) FROM idem_etl.runs)
      FROM rmany.files();
$$;
CREATE TABLE rmany.files_before AS SELECT * FROM rmany.files();

-- the source counts its own evaluations: each row takes a number
CREATE SEQUENCE rmany.evals;
CREATE TABLE rmany.src (d date, id int, v text);
INSERT INTO rmany.src VALUES
    ('2026-11-03', 1, 'new'), ('2026-11-01', 1, 'new'), ('2026-11-03', 2, 'new'),
    ('2026-11-03', 3, 'new'), ('2026-11-07', 1, 'new');

-- days 1 and 3 replaced, day 7 created (siblings are one day wide), the
-- others untouched
CREATE TABLE rmany.result AS
SELECT * FROM etl_replace_partitions('rmany.t',
    $$SELECT d, id, v || ' ' || nextval('rmany.evals') % 1 AS v FROM rmany.src$$);
SELECT pg_get_expr(c.relpartbound, c.oid) AS bound, r.rows_loaded, r.rows_replaced, r.skipped
  FROM rmany.result r JOIN pg_class c ON c.oid = r.partition_table
 ORDER BY 1;
-- the source ran once: one number per source row
SELECT last_value AS evaluated_rows FROM rmany.evals;
SELECT coalesce(b.bound, a.bound) AS bound,
       CASE WHEN b.bound IS NULL THEN 'added' WHEN a.bound IS NULL THEN 'gone'
            WHEN a.filenode <> b.filenode THEN 'new file'
            WHEN a.versions IS DISTINCT FROM b.versions THEN 'rows rewritten'
            ELSE 'untouched' END AS state
  FROM rmany.files_before b FULL JOIN rmany.files() a USING (bound)
 ORDER BY 1;
SELECT * FROM rmany.t
 WHERE d IN ('2026-11-01', '2026-11-03', '2026-11-07') ORDER BY d, id;
-- the ledger: one row per partition, the values of the partitions
SELECT operation, partition_value, rows_loaded, rows_replaced, skipped
  FROM idem_etl.runs ORDER BY partition_value;
-- the returned run_ids are the ledger's, one per partition
SELECT count(DISTINCT run_id) AS run_ids,
       count(*) FILTER (WHERE run_id IN (SELECT run_id FROM idem_etl.runs)) AS in_ledger
  FROM rmany.result;

--
-- one bad row anywhere: nothing changes
--
SELECT rmany.state() AS before \gset
-- a primary key duplicate in the last partition only
SELECT * FROM rmany.err($$SELECT * FROM etl_replace_partitions('rmany.t',
    $s$SELECT * FROM (VALUES ('2026-11-02'::date, 1, 'x'), ('2026-11-04', 1, 'x'), ('2026-11-05', 1, 'x'),
                             ('2026-11-05', 1, 'y')) s(d, id, v)$s$)$$);
SELECT rmany.state() = :'before' AS unchanged;
-- a NULL in the partition column: 23514
SELECT * FROM rmany.err($$SELECT * FROM etl_replace_partitions('rmany.t',
    $s$SELECT * FROM (VALUES ('2026-11-02'::date, 1, 'x'), (NULL, 2, 'x')) s(d, id, v)$s$)$$);
SELECT rmany.state() = :'before' AS unchanged;
-- an error raised by the source after some rows
SELECT * FROM rmany.err($$SELECT * FROM etl_replace_partitions('rmany.t',
    $s$SELECT d, id, (10 / (3 - id))::text AS v FROM rmany.src$s$)$$);
SELECT rmany.state() = :'before' AS unchanged;
-- a day with no partition on a target whose bounds cannot be inferred (no
-- sibling, no granularity): 22023, nothing created
CREATE TABLE rmany.bare (d date NOT NULL, v text) PARTITION BY RANGE (d);
SELECT * FROM rmany.err($$SELECT * FROM etl_replace_partitions('rmany.bare',
    $s$SELECT '2026-11-01'::date AS d, 'x' AS v$s$)$$);
SELECT count(*) AS partitions FROM pg_inherits WHERE inhparent = 'rmany.bare'::regclass;
-- with granularity it can
CREATE TABLE rmany.result_bare AS
SELECT * FROM etl_replace_partitions('rmany.bare',
    $s$SELECT * FROM (VALUES ('2026-11-01'::date, 'a'), ('2026-11-30', 'b'), ('2026-12-02', 'c')) s(d, v)$s$,
    granularity => '1 month');
SELECT pg_get_expr(c.relpartbound, c.oid) AS bound, r.rows_loaded, r.rows_replaced
  FROM rmany.result_bare r JOIN pg_class c ON c.oid = r.partition_table
 ORDER BY 1;

--
-- an empty source replaces nothing
--
CREATE TABLE rmany.files_empty AS SELECT * FROM rmany.files();
SELECT count(*) FROM etl_replace_partitions('rmany.t', 'SELECT * FROM rmany.src WHERE false');
SELECT count(*) AS changed_partitions
  FROM rmany.files_empty b FULL JOIN rmany.files() a USING (bound)
 WHERE a.filenode IS DISTINCT FROM b.filenode OR a.versions IS DISTINCT FROM b.versions;

--
-- run_key: an identical rerun is skipped for every partition, nothing rewritten
--
CREATE TABLE rmany.result_keyed AS
SELECT * FROM etl_replace_partitions('rmany.t', 'TABLE rmany.src', run_key => 'nightly');
SELECT pg_get_expr(c.relpartbound, c.oid) AS bound, r.rows_loaded, r.skipped
  FROM rmany.result_keyed r JOIN pg_class c ON c.oid = r.partition_table
 ORDER BY 1;
CREATE TABLE rmany.files_keyed AS SELECT * FROM rmany.files();
SELECT pg_get_expr(c.relpartbound, c.oid) AS bound, r.rows_loaded, r.skipped
  FROM etl_replace_partitions('rmany.t', 'TABLE rmany.src', run_key => 'nightly') r
  JOIN pg_class c ON c.oid = r.partition_table
 ORDER BY 1;
SELECT count(*) AS changed_partitions
  FROM rmany.files_keyed b FULL JOIN rmany.files() a USING (bound)
 WHERE a.filenode IS DISTINCT FROM b.filenode OR a.versions IS DISTINCT FROM b.versions;

--
-- plain table: every value present in the source is replaced
--
CREATE TABLE rmany.plain (d date NOT NULL, id int NOT NULL, v text, PRIMARY KEY (d, id));
INSERT INTO rmany.plain SELECT d, g, 'old' FROM generate_series('2026-11-01'::date, '2026-11-03', '1 day') d,
                                               generate_series(1, 2) g;
SELECT partition_table, rows_loaded, rows_replaced, skipped
  FROM etl_replace_partitions('rmany.plain',
       $s$SELECT * FROM (VALUES ('2026-11-01'::date, 5, 'new'), ('2026-11-04', 1, 'new')) s(d, id, v)$s$,
       partition_column => 'd')
 ORDER BY rows_replaced;
SELECT * FROM rmany.plain ORDER BY d, id;

SET client_min_messages = warning;
DROP SCHEMA rmany CASCADE;
DROP EXTENSION idem_etl;
RESET client_min_messages;
