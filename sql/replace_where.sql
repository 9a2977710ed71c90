--
-- replace_where: etl_replace_where (Delta Lake's replaceWhere).  The rows
-- satisfying a condition are replaced, atomically, by the rows of a source
-- that must satisfy it too (23514).  On a partitioned table the partitions
-- the condition touches are rebuilt with their other rows and swapped in
-- (a day inside a month: the month's other days are kept); the others are
-- left alone.  Skips and corrections by run_key are keyed by the condition.
--
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS idem_etl CASCADE;
CREATE EXTENSION idem_etl;
DROP SCHEMA IF EXISTS rw CASCADE;
RESET client_min_messages;
CREATE SCHEMA rw;
\set schema rw
\i sql/include/err.sql

-- a plain table: one statement deletes the covered rows and inserts the new
CREATE TABLE rw.daily (d date NOT NULL, id int NOT NULL, v text, PRIMARY KEY (d, id));
INSERT INTO rw.daily SELECT '2026-11-01'::date + i % 5, i, 'old' FROM generate_series(1, 50) i;
SELECT rows_loaded, rows_replaced, skipped FROM etl_replace_where('rw.daily',
    $$d BETWEEN '2026-11-02' AND '2026-11-03'$$,
    $$SELECT '2026-11-02'::date AS d, 1 AS id, 'new' AS v UNION ALL SELECT '2026-11-03', 2, 'new'$$);
SELECT d, count(*), min(v) FROM rw.daily GROUP BY d ORDER BY d;
-- the condition may name the table
SELECT rows_loaded, rows_replaced FROM etl_replace_where('rw.daily', $$daily.d = '2026-11-05'$$,
    $$SELECT '2026-11-05'::date AS d, 9 AS id, 'five' AS v$$);
-- a source row outside the condition: refused, nothing changed
SELECT * FROM rw.err($$SELECT * FROM etl_replace_where('rw.daily', 'd = ''2026-11-01''',
    'SELECT ''2026-11-01''::date AS d, 1 AS id, ''x'' AS v UNION ALL SELECT ''2026-11-04'', 2, ''y''')$$);
SELECT count(*) AS still_ten_on_the_first FROM rw.daily WHERE d = '2026-11-01';
-- not one expression: 42601
SELECT * FROM rw.err($$SELECT * FROM etl_replace_where('rw.daily', 'true) OR (true', 'SELECT 1 AS id')$$);

-- a partitioned table with monthly partitions: replace one day of November
CREATE TABLE rw.events (d date NOT NULL, id int NOT NULL, v text, PRIMARY KEY (d, id))
    PARTITION BY RANGE (d);
CREATE TABLE rw.events_202610 PARTITION OF rw.events FOR VALUES FROM ('2026-10-01') TO ('2026-11-01');
CREATE TABLE rw.events_202611 PARTITION OF rw.events FOR VALUES FROM ('2026-11-01') TO ('2026-12-01');
INSERT INTO rw.events SELECT '2026-10-01'::date + i, i, 'old' FROM generate_series(0, 60) i;
SELECT 'rw.events_202610'::regclass::oid AS october \gset
SELECT pg_relation_filenode('rw.events_202610') AS october_file \gset
SELECT rows_loaded, rows_replaced, skipped FROM etl_replace_where('rw.events',
    $$d = '2026-11-02'$$,
    $$SELECT '2026-11-02'::date AS d, g AS id, 'new' AS v FROM generate_series(100, 102) g$$,
    run_key => '2026-11-02');
-- November: its other 29 days kept, the 2nd replaced; October untouched
SELECT tableoid::regclass AS partition, count(*) AS rows,
       count(*) FILTER (WHERE d = '2026-11-02') AS on_the_2nd,
       count(*) FILTER (WHERE v = 'new') AS new
  FROM rw.events GROUP BY 1 ORDER BY 1;
SELECT pg_relation_filenode('rw.events_202610') = :october_file AS october_untouched;
-- the rebuilt partition is a fresh table: no dead tuples
SELECT n_dead_tup FROM pg_stat_user_tables WHERE relid = 'rw.events_202611'::regclass;
-- the same call again: skipped
SELECT rows_loaded, skipped FROM etl_replace_where('rw.events', $$d = '2026-11-02'$$,
    $$SELECT '2026-11-02'::date AS d, g AS id, 'new' AS v FROM generate_series(100, 102) g$$,
    run_key => '2026-11-02');
-- after another write into the table, not skipped: loaded again, with a
-- NOTICE saying why; the same rows, so not a correction
SELECT inserted FROM etl_upsert_batch('rw.events', $$SELECT '2026-11-02'::date AS d, 999 AS id, 'upsert' AS v$$);
SELECT rows_loaded, rows_replaced, skipped FROM etl_replace_where('rw.events', $$d = '2026-11-02'$$,
    $$SELECT '2026-11-02'::date AS d, g AS id, 'new' AS v FROM generate_series(100, 102) g$$,
    run_key => '2026-11-02');
SELECT count(*) AS rows_on_the_2nd FROM rw.events WHERE d = '2026-11-02';
-- other rows for the same run_key and condition: a correction, which the
-- ledger row's corrects names
SELECT rows_loaded, rows_replaced, skipped FROM etl_replace_where('rw.events', $$d = '2026-11-02'$$,
    $$SELECT '2026-11-02'::date AS d, g AS id, 'fixed' AS v FROM generate_series(100, 102) g$$,
    run_key => '2026-11-02');
SELECT count(*) FILTER (WHERE v = 'fixed') AS fixed, count(*) AS rows_on_the_2nd FROM rw.events WHERE d = '2026-11-02';
SELECT operation, run_key, partition_bound, skipped, corrects IS NOT NULL AS corrects, rows_loaded, rows_replaced
  FROM idem_etl.runs WHERE target = 'rw.events' ORDER BY run_id;
-- a condition across partitions: the end of October and the start of November
SELECT rows_loaded, rows_replaced FROM etl_replace_where('rw.events',
    $$d BETWEEN '2026-10-30' AND '2026-11-01'$$,
    $$SELECT '2026-10-31'::date AS d, 1 AS id, 'edge' AS v$$);
SELECT d, count(*), min(v) FROM rw.events WHERE d BETWEEN '2026-10-29' AND '2026-11-02' GROUP BY d ORDER BY d;

-- etl_replace_partition with a granularity narrower than the partition:
-- only the slice (a NOTICE says so), the month's other days kept
SELECT rows_loaded, rows_replaced, skipped FROM etl_replace_partition('rw.events', '2026-11-05',
    $$SELECT '2026-11-05'::date AS d, 7 AS id, 'slice' AS v$$, granularity => '1 day', run_key => 's');
SELECT count(*) AS november_rows, count(*) FILTER (WHERE d = '2026-11-05') AS on_the_5th,
       min(v) FILTER (WHERE d = '2026-11-05') AS v_5th
  FROM rw.events_202611;
SELECT skipped FROM etl_replace_partition('rw.events', '2026-11-05',
    $$SELECT '2026-11-05'::date AS d, 7 AS id, 'slice' AS v$$, granularity => '1 day', run_key => 's');
-- etl_replace_partitions does not slice: 0A000 (it replaced the whole
-- month with the source's one day, the other days lost without a word)
SELECT * FROM rw.err($$SELECT * FROM etl_replace_partitions('rw.events',
    'SELECT ''2026-11-05''::date AS d, 8 AS id, ''x'' AS v', granularity => '1 day')$$);
SELECT count(*) AS november_rows FROM rw.events_202611;
-- a granularity wider than the partition holding the value replaces that
-- partition alone (it replaced the whole month of days, calling it a slice)
CREATE TABLE rw.days (d date NOT NULL, v int) PARTITION BY RANGE (d);
CREATE TABLE rw.days_1 PARTITION OF rw.days FOR VALUES FROM ('2026-11-01') TO ('2026-11-02');
CREATE TABLE rw.days_2 PARTITION OF rw.days FOR VALUES FROM ('2026-11-02') TO ('2026-11-03');
INSERT INTO rw.days VALUES ('2026-11-01', 1), ('2026-11-02', 2);
SELECT rows_loaded, rows_replaced FROM etl_replace_partition('rw.days', '2026-11-02',
    $$SELECT '2026-11-02'::date AS d, 20 AS v$$, granularity => '1 month');
SELECT tableoid::regclass, * FROM rw.days ORDER BY d;
-- a partition holding part of the granule: that part only (the whole
-- partition was replaced: February's and March's rows were lost)
CREATE TABLE rw.odd (d date NOT NULL, v int) PARTITION BY RANGE (d);
CREATE TABLE rw.odd_a PARTITION OF rw.odd FOR VALUES FROM ('2024-01-01') TO ('2024-01-15');
CREATE TABLE rw.odd_b PARTITION OF rw.odd FOR VALUES FROM ('2024-01-15') TO ('2024-03-15');
INSERT INTO rw.odd VALUES ('2024-01-10', 1), ('2024-01-16', 2), ('2024-01-31', 3), ('2024-02-10', 4), ('2024-03-01', 5);
SELECT rows_loaded, rows_replaced FROM etl_replace_partition('rw.odd', '2024-01-20',
    $$SELECT '2024-01-20'::date AS d, 20 AS v$$, granularity => '1 month');
SELECT tableoid::regclass, * FROM rw.odd ORDER BY d;
-- etl_replace_partitions replaces whole partitions: refused there too
SELECT * FROM rw.err($$SELECT * FROM etl_replace_partitions('rw.odd',
    'SELECT ''2024-01-20''::date AS d, 21 AS v', granularity => '1 month')$$);

-- audited like the other loads
SELECT * FROM rw.err($$SELECT * FROM etl_replace_where('rw.events', 'd = ''2026-11-03''',
    'SELECT ''2026-11-03''::date AS d, 1 AS id, ''x'' AS v WHERE false', min_replaced_ratio => 0.5)$$);
SELECT * FROM rw.err($$SELECT * FROM etl_replace_where('rw.events', 'd = ''2026-11-03''',
    'SELECT ''2026-11-03''::date AS d, 1 AS id, ''x'' AS v', expect => 'count(*) > 10')$$);

-- a default partition holding covered rows: refused
CREATE TABLE rw.events_default PARTITION OF rw.events DEFAULT;
INSERT INTO rw.events VALUES ('2027-01-15', 1, 'in default');
SELECT * FROM rw.err($$SELECT * FROM etl_replace_where('rw.events', 'd >= ''2027-01-01''',
    'SELECT ''2027-01-15''::date AS d, 1 AS id, ''x'' AS v')$$);
-- rows of the default partition in a new partition's bounds that the
-- condition does not cover are carried into it (they were deleted, and
-- counted as replaced)
INSERT INTO rw.events VALUES ('2027-01-20', 1, 'default, not covered');
SELECT rows_loaded, rows_replaced FROM etl_replace_where('rw.events', 'd = ''2027-01-20'' AND id = 2',
    'SELECT ''2027-01-20''::date AS d, 2 AS id, ''new'' AS v');
SELECT tableoid::regclass, * FROM rw.events WHERE d >= '2027-01-01' ORDER BY d, id;
-- the same when the DEFAULT partition is partitioned itself: its rows were
-- read with ONLY, so none was carried (and all were deleted), and covered
-- rows in its partitions were not refused
CREATE TABLE rw.sub (d date NOT NULL, v text) PARTITION BY RANGE (d);
CREATE TABLE rw.sub_202610 PARTITION OF rw.sub FOR VALUES FROM ('2026-10-01') TO ('2026-11-01');
CREATE TABLE rw.sub_def PARTITION OF rw.sub DEFAULT PARTITION BY LIST (v);
CREATE TABLE rw.sub_def_all PARTITION OF rw.sub_def DEFAULT;
INSERT INTO rw.sub VALUES ('2026-11-01', 'keep me'), ('2026-11-15', 'keep me too');
SELECT rows_loaded, rows_replaced FROM etl_replace_where('rw.sub', $$d = '2026-11-02'$$,
    $$SELECT date '2026-11-02' AS d, 'new' AS v$$);
SELECT tableoid::regclass, * FROM rw.sub ORDER BY d;
INSERT INTO rw.sub VALUES ('2026-12-03', 'covered, in the default');
SELECT * FROM rw.err($$SELECT * FROM etl_replace_where('rw.sub', 'd = ''2026-12-03''',
    'SELECT ''2026-12-03''::date AS d, ''x'' AS v')$$);

-- a NULL partition value (the server crashed on a LIST partition holding
-- NULL, and a RANGE table's NULL source row was dropped without a word into
-- a new partition for 2000-01-01)
CREATE TABLE rw.ln (k text, v int) PARTITION BY LIST (k);
CREATE TABLE rw.ln_null PARTITION OF rw.ln FOR VALUES IN (NULL, 'z');
CREATE TABLE rw.ln_y PARTITION OF rw.ln FOR VALUES IN ('y');
INSERT INTO rw.ln VALUES (NULL, 1), ('z', 3), ('z', 1), ('y', 1), (NULL, 5);
-- a source row without a value: 23514, as etl_replace_partitions
SELECT * FROM rw.err($$SELECT * FROM etl_replace_where('rw.ln', 'v = 1',
    'SELECT NULL::text AS k, 1 AS v')$$);
-- covered rows with NULL are replaced with their partition's other rows
SELECT rows_loaded, rows_replaced FROM etl_replace_where('rw.ln', 'v = 1',
    $$SELECT 'z'::text AS k, 1 AS v$$);
SELECT tableoid::regclass, * FROM rw.ln ORDER BY 1, 2, 3;
-- a partition of which the condition covers only NULLs cannot be found
SELECT * FROM rw.err($$SELECT * FROM etl_replace_where('rw.ln', 'k IS NULL',
    'SELECT ''z''::text AS k, 1 AS v WHERE false')$$);
CREATE TABLE rw.rn (d date, v int) PARTITION BY RANGE (d);
CREATE TABLE rw.rn_1 PARTITION OF rw.rn FOR VALUES FROM ('2026-01-01') TO ('2026-02-01');
SELECT * FROM rw.err($$SELECT * FROM etl_replace_where('rw.rn', 'v = 1',
    'SELECT NULL::date AS d, 1 AS v')$$);
SELECT relname FROM pg_class WHERE relname LIKE 'rn%' AND relnamespace = 'rw'::regnamespace ORDER BY 1;

-- a plain table with a BEFORE INSERT trigger that skips rows: rows_loaded is
-- the rows written (the staged rows count the insert only where no trigger
-- can skip one)
CREATE FUNCTION rw.skip_odd() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN IF NEW.id % 2 = 1 THEN RETURN NULL; END IF; RETURN NEW; END $$;
CREATE TRIGGER skip_odd BEFORE INSERT ON rw.daily FOR EACH ROW EXECUTE FUNCTION rw.skip_odd();
SELECT rows_loaded, rows_replaced FROM etl_replace_where('rw.daily', $$d = '2026-11-04'$$,
    $$SELECT '2026-11-04'::date AS d, g AS id, 'four' AS v FROM generate_series(1, 9) AS g$$);
SELECT count(*) AS written FROM rw.daily WHERE d = '2026-11-04';

SET client_min_messages = warning;
DROP SCHEMA rw CASCADE;
DROP EXTENSION idem_etl;
