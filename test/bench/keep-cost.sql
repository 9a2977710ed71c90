-- test/bench/keep-cost.sql: what keeping a replaced partition costs (issue 30).
-- Run: pg_virtualenv -o shared_preload_libraries=idem_etl -o max_wal_size=4GB psql -X -q -f test/bench/keep-cost.sql
-- A 1,000,000-row day (86 MB with its index) replaced 12 times in turn with
-- keep_replaced 0 (dropped at commit) and 1 day (kept, detached): the
-- median time of each, the space the kept versions hold, and how long the
-- janitor's etl_cleanup() takes to drop them once expired.
\set ON_ERROR_STOP 1
CREATE EXTENSION IF NOT EXISTS idem_etl;
DROP TABLE IF EXISTS f, src;
CREATE TABLE f (d date NOT NULL, id bigint, amount numeric, note text) PARTITION BY RANGE (d);
CREATE TABLE f_1 PARTITION OF f FOR VALUES FROM ('2026-12-01') TO ('2026-12-02');
CREATE INDEX ON f (id);
CREATE TABLE src AS SELECT '2026-12-01'::date AS d, g::bigint AS id, (g % 1000)::numeric AS amount, 'note ' || g AS note FROM generate_series(1, 1000000) g;
VACUUM ANALYZE src;
SELECT * FROM etl_replace_partition('f', '2026-12-01', 'TABLE src', keep_replaced => '0');
CREATE TABLE timings (mode text, ms float8);
CREATE PROCEDURE one(mode text) LANGUAGE plpgsql AS $$
DECLARE t0 timestamptz; BEGIN
  t0 := clock_timestamp();
  PERFORM * FROM etl_replace_partition('f', '2026-12-01', 'TABLE src', keep_replaced => CASE mode WHEN 'keep' THEN interval '1 day' ELSE interval '0' END);
  INSERT INTO timings VALUES (mode, extract(epoch FROM clock_timestamp() - t0) * 1000);
END $$;
CALL one('drop'); CALL one('keep'); CALL one('drop'); CALL one('keep'); CALL one('drop'); CALL one('keep');
CALL one('drop'); CALL one('keep'); CALL one('drop'); CALL one('keep'); CALL one('drop'); CALL one('keep');
SELECT mode, count(*), round(percentile_cont(0.5) WITHIN GROUP (ORDER BY ms)::numeric, 1) AS median_ms FROM timings GROUP BY mode ORDER BY mode;
SELECT count(*) AS kept_versions, pg_size_pretty(sum(pg_total_relation_size(kept_oid))) AS kept_size,
       pg_size_pretty(pg_total_relation_size('f_1')) AS one_partition FROM idem_etl.replaced_partitions;
-- the janitor's work: dropping an expired kept version
UPDATE idem_etl.replaced_partitions SET keep_until = now() - interval '1 second';
\timing on
SELECT etl_cleanup() AS dropped;
