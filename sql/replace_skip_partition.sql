--
-- replace_skip_partition: issue 10, points 1 and 2.  A replacement replaces
-- the whole partition holding the value, so skips, corrections and the lock
-- are keyed by the partition (its bound), not by the text of the value; a
-- skip is only valid while the partition still holds what that run loaded.
-- corrects names the last run that applied rows, never a skip.
--
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS idem_etl CASCADE;
CREATE EXTENSION idem_etl;
DROP SCHEMA IF EXISTS rskip CASCADE;
RESET client_min_messages;
CREATE SCHEMA rskip;

-- monthly partitions: 11-01 and 11-02 name the same partition
CREATE TABLE rskip.m (d date NOT NULL, id int NOT NULL, v text) PARTITION BY RANGE (d);
CREATE TABLE rskip.m_202611 PARTITION OF rskip.m FOR VALUES FROM ('2026-11-01') TO ('2026-12-01');
SELECT rows_loaded, rows_replaced, skipped FROM etl_replace_partition('rskip.m', '2026-11-01',
    $$SELECT '2026-11-01'::date AS d, 1 AS id, 'first' AS v$$, run_key => 'k');
SELECT rows_loaded, rows_replaced, skipped FROM etl_replace_partition('rskip.m', '2026-11-02',
    $$SELECT '2026-11-02'::date AS d, 2 AS id, 'second' AS v$$, run_key => 'k');
-- the first call again: the partition now holds the 11-02 load, so it is
-- a correction, not a skip (the old code skipped it and lost the row)
SELECT rows_loaded, rows_replaced, skipped FROM etl_replace_partition('rskip.m', '2026-11-01',
    $$SELECT '2026-11-01'::date AS d, 1 AS id, 'first' AS v$$, run_key => 'k');
SELECT * FROM rskip.m ORDER BY d, id;
-- and now, unchanged, it is skipped
SELECT rows_loaded, rows_replaced, skipped FROM etl_replace_partition('rskip.m', '2026-11-01',
    $$SELECT '2026-11-01'::date AS d, 1 AS id, 'first' AS v$$, run_key => 'k');
-- the ledger keeps the partition's bound
SELECT run_id, partition_value, partition_bound, skipped, corrects FROM idem_etl.runs ORDER BY run_id;

-- LIST partitions holding several values
CREATE TABLE rskip.l (region text NOT NULL, id int NOT NULL) PARTITION BY LIST (region);
CREATE TABLE rskip.l_eu PARTITION OF rskip.l FOR VALUES IN ('de', 'fr');
SELECT rows_loaded, skipped FROM etl_replace_partition('rskip.l', 'de', $$SELECT 'de' AS region, 1 AS id$$, run_key => 'k');
SELECT rows_loaded, skipped FROM etl_replace_partition('rskip.l', 'fr', $$SELECT 'fr' AS region, 2 AS id$$, run_key => 'k');
SELECT rows_loaded, skipped FROM etl_replace_partition('rskip.l', 'de', $$SELECT 'de' AS region, 1 AS id$$, run_key => 'k');
SELECT * FROM rskip.l ORDER BY id;

-- another run_key replaced the partition in between: no skip
CREATE TABLE rskip.d (d date NOT NULL, id int NOT NULL, PRIMARY KEY (d, id)) PARTITION BY RANGE (d);
CREATE TABLE rskip.d_20261128 PARTITION OF rskip.d FOR VALUES FROM ('2026-11-28') TO ('2026-11-29');
SELECT rows_loaded, skipped FROM etl_replace_partition('rskip.d', '2026-11-28', $$SELECT '2026-11-28'::date AS d, 1 AS id$$, run_key => 'a');
SELECT rows_loaded, skipped FROM etl_replace_partition('rskip.d', '2026-11-28', $$SELECT '2026-11-28'::date AS d, 2 AS id$$, run_key => 'b');
SELECT rows_loaded, skipped FROM etl_replace_partition('rskip.d', '2026-11-28', $$SELECT '2026-11-28'::date AS d, 1 AS id$$, run_key => 'a');
SELECT * FROM rskip.d ORDER BY id;
-- an upsert that wrote into the target since: no skip
SELECT inserted FROM etl_upsert_batch('rskip.d', $$SELECT '2026-11-28'::date AS d, 5 AS id$$);
SELECT rows_loaded, rows_replaced, skipped FROM etl_replace_partition('rskip.d', '2026-11-28', $$SELECT '2026-11-28'::date AS d, 1 AS id$$, run_key => 'a');
SELECT * FROM rskip.d ORDER BY id;
-- an upsert that wrote nothing does not count
SELECT inserted, unchanged FROM etl_upsert_batch('rskip.d', $$SELECT '2026-11-28'::date AS d, 1 AS id$$);
SELECT rows_loaded, skipped FROM etl_replace_partition('rskip.d', '2026-11-28', $$SELECT '2026-11-28'::date AS d, 1 AS id$$, run_key => 'a');
-- a restore since: no skip
SELECT rows_loaded, skipped FROM etl_replace_partition('rskip.d', '2026-11-28', $$SELECT '2026-11-28'::date AS d, 7 AS id$$, run_key => 'c', keep_replaced => '1 day');
SELECT etl_restore_partition('rskip.d', '2026-11-28');
SELECT * FROM rskip.d ORDER BY id;
SELECT rows_loaded, skipped FROM etl_replace_partition('rskip.d', '2026-11-28', $$SELECT '2026-11-28'::date AS d, 7 AS id$$, run_key => 'c');
SELECT * FROM rskip.d ORDER BY id;

-- plain table: the same rules, per value
CREATE TABLE rskip.p (d date NOT NULL, id int NOT NULL);
SELECT rows_loaded, skipped FROM etl_replace_partition('rskip.p', '2026-11-28', $$SELECT '2026-11-28'::date AS d, 1 AS id$$, partition_column => 'd', run_key => 'a');
SELECT rows_loaded, skipped FROM etl_replace_partition('rskip.p', '2026-11-28', $$SELECT '2026-11-28'::date AS d, 2 AS id$$, partition_column => 'd', run_key => 'b');
SELECT rows_loaded, skipped FROM etl_replace_partition('rskip.p', '2026-11-28', $$SELECT '2026-11-28'::date AS d, 1 AS id$$, partition_column => 'd', run_key => 'a');
SELECT * FROM rskip.p ORDER BY id;

-- point 2: rows, the same rows (skipped), changed rows: the correction
-- names the first run, which applied the rows, not the skip
TRUNCATE idem_etl.runs;
CREATE TABLE rskip.c (d date NOT NULL, id int NOT NULL, v text, PRIMARY KEY (d, id)) PARTITION BY RANGE (d);
CREATE TABLE rskip.c_20261128 PARTITION OF rskip.c FOR VALUES FROM ('2026-11-28') TO ('2026-11-29');
CREATE TEMP TABLE ids (step int, run_id bigint);
INSERT INTO ids SELECT 1, run_id FROM etl_replace_partition('rskip.c', '2026-11-28', $$SELECT '2026-11-28'::date AS d, 1 AS id, 'a' AS v$$, run_key => 'k');
INSERT INTO ids SELECT 2, run_id FROM etl_replace_partition('rskip.c', '2026-11-28', $$SELECT '2026-11-28'::date AS d, 1 AS id, 'a' AS v$$, run_key => 'k');
INSERT INTO ids SELECT 3, run_id FROM etl_replace_partition('rskip.c', '2026-11-28', $$SELECT '2026-11-28'::date AS d, 1 AS id, 'b' AS v$$, run_key => 'k');
SELECT i.step, r.skipped, r.corrects = (SELECT run_id FROM ids WHERE step = 1) AS corrects_run_1
  FROM ids i JOIN idem_etl.runs r USING (run_id) ORDER BY i.step;
-- the same for upserts
INSERT INTO ids SELECT 11, run_id FROM etl_upsert_batch('rskip.c', $$SELECT '2026-11-28'::date AS d, 2 AS id, 'a' AS v$$, run_key => 'u');
INSERT INTO ids SELECT 12, run_id FROM etl_upsert_batch('rskip.c', $$SELECT '2026-11-28'::date AS d, 2 AS id, 'a' AS v$$, run_key => 'u');
INSERT INTO ids SELECT 13, run_id FROM etl_upsert_batch('rskip.c', $$SELECT '2026-11-28'::date AS d, 2 AS id, 'b' AS v$$, run_key => 'u');
SELECT i.step, r.skipped, r.corrects = (SELECT run_id FROM ids WHERE step = 11) AS corrects_run_11
  FROM ids i JOIN idem_etl.runs r USING (run_id) WHERE i.step > 10 ORDER BY i.step;

-- A partition the call creates is recorded under its bound as the catalog
-- prints it, as every later call reads it: its first identical rerun is
-- skipped.  It was recorded as IN ('7') and read back as IN (7), and the
-- first rerun rewrote the partition.
CREATE TABLE rskip.il (k int NOT NULL, v text) PARTITION BY LIST (k);
SELECT partition_table, rows_loaded, skipped FROM etl_replace_partition('rskip.il', '7',
    $$SELECT 7 AS k, 'a' AS v$$, run_key => 'r');
SELECT partition_table, rows_loaded, skipped FROM etl_replace_partition('rskip.il', '7',
    $$SELECT 7 AS k, 'a' AS v$$, run_key => 'r');
CREATE TABLE rskip.ir (k int NOT NULL, v text) PARTITION BY RANGE (k);
CREATE TABLE rskip.ir_0 PARTITION OF rskip.ir FOR VALUES FROM (0) TO (10);
SELECT partition_table, rows_loaded, skipped FROM etl_replace_partition('rskip.ir', '15',
    $$SELECT 15 AS k, 'a' AS v$$, run_key => 'r');
SELECT partition_table, rows_loaded, skipped FROM etl_replace_partition('rskip.ir', '15',
    $$SELECT 15 AS k, 'a' AS v$$, run_key => 'r');
SELECT partition_bound, skipped FROM idem_etl.runs
 WHERE target_oid IN ('rskip.il'::regclass, 'rskip.ir'::regclass) ORDER BY run_id;

-- A plain table: an etl_replace_where since the run changed the rows (its
-- condition cannot be compared with the value), so the rerun loads them
-- again; it was skipped, and the table kept the etl_replace_where's rows.
-- The value is taken as its type prints it: '20261128' is 2026-11-28.
CREATE TABLE rskip.plain (d date NOT NULL, id int, v text);
SELECT rows_loaded, rows_replaced, skipped FROM etl_replace_partition('rskip.plain', '2026-11-28',
    $$SELECT '2026-11-28'::date AS d, g AS id, 'a' AS v FROM generate_series(1, 3) g$$,
    partition_column => 'd', run_key => 'p');
SELECT rows_loaded, rows_replaced, skipped FROM etl_replace_where('rskip.plain', $$d = '2026-11-28'$$,
    $$SELECT '2026-11-28'::date AS d, 99 AS id, 'where' AS v$$);
SELECT rows_loaded, rows_replaced, skipped FROM etl_replace_partition('rskip.plain', '20261128',
    $$SELECT '2026-11-28'::date AS d, g AS id, 'a' AS v FROM generate_series(1, 3) g$$,
    partition_column => 'd', run_key => 'p');
SELECT rows_loaded, rows_replaced, skipped FROM etl_replace_partition('rskip.plain', '2026-11-28',
    $$SELECT '2026-11-28'::date AS d, g AS id, 'a' AS v FROM generate_series(1, 3) g$$,
    partition_column => 'd', run_key => 'p');
SELECT * FROM rskip.plain ORDER BY id;
-- on a partitioned table an etl_replace_where of another partition is no
-- change to this one: it records a replacement of each partition it rebuilt
SELECT rows_loaded, rows_replaced, skipped FROM etl_replace_where('rskip.ir', 'k = 3',
    'SELECT 3 AS k, ''w'' AS v');
SELECT partition_table, rows_loaded, skipped FROM etl_replace_partition('rskip.ir', '15',
    $$SELECT 15 AS k, 'a' AS v$$, run_key => 'r');

-- Values are printed with every digit, whatever the session's
-- extra_float_digits: at 0, 0.30000000000000004 printed as 0.3, another
-- value, and the source's rows were refused (23514)
CREATE TABLE rskip.fl (k float8 NOT NULL, v int);
CREATE TABLE rskip.fl_list (k float8 NOT NULL, v int) PARTITION BY LIST (k);
SET extra_float_digits = 0;
SELECT rows_loaded, skipped FROM etl_replace_partition('rskip.fl', '0.30000000000000004',
    $$SELECT 0.30000000000000004::float8 AS k, 1 AS v$$, partition_column => 'k');
SELECT partition_table, rows_loaded FROM etl_replace_partition('rskip.fl_list', '0.30000000000000004',
    $$SELECT 0.30000000000000004::float8 AS k, 1 AS v$$);
RESET extra_float_digits;
SELECT k::text, v FROM rskip.fl UNION ALL SELECT k::text, v FROM rskip.fl_list;

-- loads through the partition itself, or through an ancestor of the
-- target, change it too: the identical rerun is not skipped (it was, and
-- the rows written since stayed)
CREATE TABLE rskip.u (d date NOT NULL, id int, v int, PRIMARY KEY (d, id)) PARTITION BY RANGE (d);
CREATE TABLE rskip.u_1 PARTITION OF rskip.u FOR VALUES FROM ('2026-11-01') TO ('2026-11-02');
SELECT rows_loaded, skipped FROM etl_replace_partition('rskip.u', '2026-11-01',
    $$SELECT '2026-11-01'::date AS d, 1 AS id, 1 AS v$$, run_key => 'k');
SELECT inserted FROM etl_upsert_batch('rskip.u_1', $$SELECT '2026-11-01'::date AS d, 2 AS id, 2 AS v$$);
SELECT rows_loaded, skipped FROM etl_replace_partition('rskip.u', '2026-11-01',
    $$SELECT '2026-11-01'::date AS d, 1 AS id, 1 AS v$$, run_key => 'k');
SELECT rows_loaded FROM etl_replace_where('rskip.u_1', 'id = 3', $$SELECT '2026-11-01'::date AS d, 3 AS id, 3 AS v$$);
SELECT rows_loaded, skipped FROM etl_replace_partition('rskip.u', '2026-11-01',
    $$SELECT '2026-11-01'::date AS d, 1 AS id, 1 AS v$$, run_key => 'k');
SELECT rows_loaded, skipped FROM etl_replace_partition('rskip.u', '2026-11-01',
    $$SELECT '2026-11-01'::date AS d, 1 AS id, 1 AS v$$, run_key => 'k');
SELECT * FROM rskip.u;
-- a partition of a partition, loaded through the root
CREATE TABLE rskip.ml (d date NOT NULL, c text NOT NULL, v int, PRIMARY KEY (d, c)) PARTITION BY RANGE (d);
CREATE TABLE rskip.ml_11 PARTITION OF rskip.ml FOR VALUES FROM ('2026-11-01') TO ('2026-12-01')
    PARTITION BY LIST (c);
CREATE TABLE rskip.ml_11_a PARTITION OF rskip.ml_11 FOR VALUES IN ('a');
SELECT rows_loaded, skipped FROM etl_replace_partition('rskip.ml_11', 'a',
    $$SELECT '2026-11-05'::date AS d, 'a' AS c, 1 AS v$$, run_key => 'k');
INSERT INTO rskip.ml VALUES ('2026-11-06', 'a', 99);
SELECT inserted FROM etl_upsert_batch('rskip.ml', $$SELECT '2026-11-07'::date AS d, 'a' AS c, 2 AS v$$,
    key_columns => '{d,c}');
SELECT rows_loaded, skipped FROM etl_replace_partition('rskip.ml_11', 'a',
    $$SELECT '2026-11-05'::date AS d, 'a' AS c, 1 AS v$$, run_key => 'k');
SELECT * FROM rskip.ml;
-- etl_replace_where with run_key on the parent: an upsert straight into
-- one of its partitions is a change
SELECT rows_loaded, skipped FROM etl_replace_where('rskip.u', 'id >= 1',
    $$SELECT '2026-11-01'::date AS d, 1 AS id, 1 AS v$$, run_key => 'w');
SELECT inserted FROM etl_upsert_batch('rskip.u_1', $$SELECT '2026-11-01'::date AS d, 4 AS id, 4 AS v$$);
SELECT rows_loaded, skipped FROM etl_replace_where('rskip.u', 'id >= 1',
    $$SELECT '2026-11-01'::date AS d, 1 AS id, 1 AS v$$, run_key => 'w');
SELECT * FROM rskip.u;

-- a skip needs the partition the run left in place, with the same file:
-- one dropped (a retention job; a backfill then loads it again), detached
-- and replaced by an empty table, or truncated since is loaded again (the
-- old code skipped all three and the day stayed empty)
CREATE TABLE rskip.days (d date NOT NULL, id int NOT NULL) PARTITION BY RANGE (d);
CREATE FUNCTION rskip.load(day date) RETURNS TABLE (rows_loaded bigint, skipped boolean)
LANGUAGE sql AS $$
    SELECT rows_loaded, skipped FROM etl_replace_partition('rskip.days', day::text,
        format('SELECT %L::date AS d, g AS id FROM generate_series(1, 3) AS g', day),
        granularity => '1 day', run_key => day::text)
$$;
SELECT * FROM rskip.load('2026-11-01');
SELECT * FROM rskip.load('2026-11-01');
SELECT partition_oid = 'rskip.days_20261101'::regclass AS partition_recorded,
       partition_filenode = pg_relation_filenode('rskip.days_20261101') AS file_recorded
  FROM idem_etl.runs WHERE target_oid = 'rskip.days'::regclass ORDER BY run_id DESC LIMIT 1;
DROP TABLE rskip.days_20261101;
SELECT * FROM rskip.load('2026-11-01');
SELECT count(*) FROM rskip.days;
ALTER TABLE rskip.days DETACH PARTITION rskip.days_20261101;
ALTER TABLE rskip.days_20261101 RENAME TO days_archived;
CREATE TABLE rskip.days_20261101 PARTITION OF rskip.days FOR VALUES FROM ('2026-11-01') TO ('2026-11-02');
SELECT * FROM rskip.load('2026-11-01');
SELECT count(*) FROM rskip.days;
TRUNCATE rskip.days_20261101;
SELECT * FROM rskip.load('2026-11-01');
SELECT count(*) FROM rskip.days;
SELECT * FROM rskip.load('2026-11-01');
-- etl_replace_partitions the same
SELECT partition_table, rows_loaded, skipped FROM etl_replace_partitions('rskip.days',
    $$SELECT d::date, 1 AS id FROM generate_series('2026-11-02'::date, '2026-11-03', '1 day') AS d$$,
    granularity => '1 day', run_key => 'both');
DROP TABLE rskip.days_20261102;
SELECT partition_table, rows_loaded, skipped FROM etl_replace_partitions('rskip.days',
    $$SELECT d::date, 1 AS id FROM generate_series('2026-11-02'::date, '2026-11-03', '1 day') AS d$$,
    granularity => '1 day', run_key => 'both');
SELECT d, count(*) FROM rskip.days GROUP BY d ORDER BY d;
-- etl_replace_where on a partitioned table: a partition it rebuilt, dropped
-- since, is rebuilt again
SELECT rows_loaded, skipped FROM etl_replace_where('rskip.days', $$d BETWEEN '2026-11-02' AND '2026-11-03'$$,
    $$SELECT d::date, 2 AS id FROM generate_series('2026-11-02'::date, '2026-11-03', '1 day') AS d$$, run_key => 'w');
SELECT rows_loaded, skipped FROM etl_replace_where('rskip.days', $$d BETWEEN '2026-11-02' AND '2026-11-03'$$,
    $$SELECT d::date, 2 AS id FROM generate_series('2026-11-02'::date, '2026-11-03', '1 day') AS d$$, run_key => 'w');
DROP TABLE rskip.days_20261103;
CREATE TABLE rskip.days_20261103 PARTITION OF rskip.days FOR VALUES FROM ('2026-11-03') TO ('2026-11-04');
SELECT rows_loaded, skipped FROM etl_replace_where('rskip.days', $$d BETWEEN '2026-11-02' AND '2026-11-03'$$,
    $$SELECT d::date, 2 AS id FROM generate_series('2026-11-02'::date, '2026-11-03', '1 day') AS d$$, run_key => 'w');
SELECT d, id FROM rskip.days WHERE d >= '2026-11-02' ORDER BY d;
SELECT rows_loaded, skipped FROM etl_replace_where('rskip.days', $$d BETWEEN '2026-11-02' AND '2026-11-03'$$,
    $$SELECT d::date, 2 AS id FROM generate_series('2026-11-02'::date, '2026-11-03', '1 day') AS d$$, run_key => 'w');
-- one it rebuilt, detached since (archived: same table, same file), is
-- rebuilt too; it was skipped, and the day stayed empty
ALTER TABLE rskip.days DETACH PARTITION rskip.days_20261103;
ALTER TABLE rskip.days_20261103 RENAME TO days_20261103_archive;
CREATE TABLE rskip.days_20261103 PARTITION OF rskip.days FOR VALUES FROM ('2026-11-03') TO ('2026-11-04');
SELECT rows_loaded, skipped FROM etl_replace_where('rskip.days', $$d BETWEEN '2026-11-02' AND '2026-11-03'$$,
    $$SELECT d::date, 2 AS id FROM generate_series('2026-11-02'::date, '2026-11-03', '1 day') AS d$$, run_key => 'w');
SELECT d, id FROM rskip.days WHERE d >= '2026-11-02' ORDER BY d;

SET client_min_messages = warning;
DROP SCHEMA rskip CASCADE;
