--
-- replace_scale: issue 10, point 13.  etl_replace_partitions reads the
-- staged batch in one pass.  On a plain table: one DELETE for every value
-- present and one INSERT, and one lock for the whole target instead of one
-- advisory lock per value (10,000 values used to take 10,000 entries of the
-- shared lock table: 4,000 values in one transaction failed with "out of
-- shared memory" on a server with less room).  On a partitioned table: one
-- lock for all partitions, each partition's rows read once, in partition
-- order, even when the partitions of a LIST table hold interleaved values.
-- Results, counts, skips and corrections are those of one call per value.
--
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS idem_etl CASCADE;
CREATE EXTENSION idem_etl;
DROP SCHEMA IF EXISTS rscale CASCADE;
RESET client_min_messages;

CREATE SCHEMA rscale;

-- plain table, 10,000 values, 2 rows each; 4,000 of them there before
CREATE TABLE rscale.plain (v int NOT NULL, x int, note text DEFAULT 'filled');
INSERT INTO rscale.plain (v, x) SELECT g, -1 FROM generate_series(1, 4000) g;
INSERT INTO rscale.plain (v, x) SELECT g, -1 FROM generate_series(20001, 20010) g;

BEGIN;
SELECT count(*) AS results, sum(rows_loaded) AS loaded, sum(rows_replaced) AS replaced,
       count(*) FILTER (WHERE skipped) AS skipped, count(DISTINCT run_id) AS runs
  FROM etl_replace_partitions('rscale.plain',
        $$SELECT g / 2 AS v, g AS x FROM generate_series(2, 20001) g$$,
        partition_column => 'v', run_key => 'k');
-- one advisory lock, not one per value
SELECT locktype, count(*) FROM pg_locks
 WHERE pid = pg_backend_pid() AND locktype = 'advisory' GROUP BY 1;
COMMIT;
SELECT count(*), count(DISTINCT v), min(v), max(v), sum(x),
       count(*) FILTER (WHERE x = -1) AS untouched FROM rscale.plain;
-- per value: rows replaced are that value's old rows
SELECT partition_value, rows_loaded, rows_replaced FROM idem_etl.runs
 WHERE target_oid = 'rscale.plain'::regclass AND partition_value IN ('1', '3999', '4000', '4001', '10000')
 ORDER BY partition_value::int;

-- a rerun with value 5 changed: 9,999 skips, one correction
SET client_min_messages = warning;
SELECT count(*) AS results, sum(rows_loaded) AS loaded, sum(rows_replaced) AS replaced,
       count(*) FILTER (WHERE skipped) AS skipped
  FROM etl_replace_partitions('rscale.plain',
        $$SELECT g / 2 AS v, CASE WHEN g / 2 = 5 THEN 0 ELSE g END AS x FROM generate_series(2, 20001) g$$,
        partition_column => 'v', run_key => 'k');
RESET client_min_messages;
SELECT r.partition_value, r.rows_loaded, r.rows_replaced, r.corrects = c.run_id AS corrects_first
  FROM idem_etl.runs r,
       LATERAL (SELECT run_id FROM idem_etl.runs f WHERE f.target_oid = r.target_oid
                 AND f.partition_value = '5' AND f.run_id < r.run_id ORDER BY run_id LIMIT 1) c
 WHERE r.target_oid = 'rscale.plain'::regclass AND NOT r.skipped AND r.corrects IS NOT NULL;
SELECT count(*), sum(x) FROM rscale.plain WHERE v = 5;

-- numeric values equal by = but printed differently are one value
CREATE TABLE rscale.num (v numeric NOT NULL, x int);
INSERT INTO rscale.num VALUES (1.00, 0), (2, 0);
SELECT partition_table, rows_loaded, rows_replaced, skipped
  FROM etl_replace_partitions('rscale.num', $$SELECT * FROM (VALUES (1.0, 1), (1, 2), (3, 3)) s(v, x)$$,
                              partition_column => 'v');
SELECT v, x FROM rscale.num ORDER BY x;

-- partitioned, 200 daily partitions created, then replaced in one call (make bench
-- measures 1,000)
CREATE TABLE rscale.p (d date NOT NULL, id int NOT NULL, x int, PRIMARY KEY (d, id))
    PARTITION BY RANGE (d);
SELECT count(*) AS partitions, sum(rows_loaded) AS loaded
  FROM etl_replace_partitions('rscale.p',
        $$SELECT '2024-01-01'::date + g / 3 AS d, g AS id, g AS x FROM generate_series(0, 599) g$$,
        granularity => '1 day');
BEGIN;
SELECT count(*) AS partitions, sum(rows_loaded) AS loaded, sum(rows_replaced) AS replaced
  FROM etl_replace_partitions('rscale.p',
        $$SELECT '2024-01-01'::date + g / 3 AS d, g AS id, -g AS x FROM generate_series(0, 599) g$$);
SELECT locktype, count(*) FROM pg_locks
 WHERE pid = pg_backend_pid() AND locktype = 'advisory' GROUP BY 1;
COMMIT;
SELECT count(*), sum(x), count(DISTINCT tableoid) FROM rscale.p;
SELECT count(*) AS misplaced FROM rscale.p
 WHERE tableoid <> format('rscale.p_%s', to_char(d, 'YYYYMMDD'))::regclass;

-- LIST partitions whose values interleave in sort order: each partition
-- gets exactly its rows
CREATE TABLE rscale.l (region text NOT NULL, id int, x int) PARTITION BY LIST (region);
CREATE TABLE rscale.l_eu PARTITION OF rscale.l FOR VALUES IN ('de', 'fr', 'it');
CREATE TABLE rscale.l_am PARTITION OF rscale.l FOR VALUES IN ('ca', 'es_mx', 'us');
INSERT INTO rscale.l VALUES ('de', 0, 0), ('us', 0, 0);
SELECT partition_table, rows_loaded, rows_replaced, skipped
  FROM etl_replace_partitions('rscale.l',
        $$SELECT r AS region, g AS id, g AS x FROM unnest(ARRAY['us','ca','it','de','fr','es_mx','pl']) r,
                 generate_series(1, 3) g$$)
 ORDER BY partition_table::text;
SELECT tableoid::regclass AS part, string_agg(DISTINCT region, ',' ORDER BY region) AS regions, count(*)
  FROM rscale.l GROUP BY 1 ORDER BY 1;
-- the same again with run_key, twice: the second is skipped as a whole
SELECT count(*) FILTER (WHERE skipped) AS skipped
  FROM etl_replace_partitions('rscale.l',
        $$SELECT r AS region, g AS id, g AS x FROM unnest(ARRAY['us','ca','it','de','fr','es_mx','pl']) r,
                 generate_series(1, 3) g$$, run_key => 'r');
SET client_min_messages = warning;
SELECT count(*) FILTER (WHERE skipped) AS skipped
  FROM etl_replace_partitions('rscale.l',
        $$SELECT r AS region, g AS id, g AS x FROM unnest(ARRAY['us','ca','it','de','fr','es_mx','pl']) r,
                 generate_series(1, 3) g$$, run_key => 'r');
-- one call per partition with the same rows is skipped too: same fingerprint
SELECT skipped FROM etl_replace_partition('rscale.l', 'fr',
        $$SELECT r AS region, g AS id, g AS x FROM unnest(ARRAY['it','de','fr']) r,
                 generate_series(1, 3) g$$, run_key => 'r');
RESET client_min_messages;

DROP SCHEMA rscale CASCADE;
