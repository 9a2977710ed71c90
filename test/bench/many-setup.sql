-- many workload (issue 10, point 13): etl_replace_partitions with many
-- values in one call, against the hand-written statements.
--   plain: a plain table, 10,000 values of 2 rows (20,000 rows) per call;
--   part:  a table partitioned by day, 1,000 daily partitions of 10 rows.
-- Timings go to bench_many (one row per repetition, case and strategy).
SET client_min_messages = warning;
DROP TABLE IF EXISTS bench_many;
-- one table per statement: a table of 1,000 partitions takes thousands of
-- locks to drop, two of them do not fit in the default lock table at once
DROP TABLE IF EXISTS many.part;
DROP TABLE IF EXISTS many.hpart;
DROP SCHEMA IF EXISTS many CASCADE;
CREATE TABLE bench_many (rep int, kase text, strategy text, ms float8, advisory_locks int,
                         ok boolean);
CREATE SCHEMA many;
-- the batches: every call reads the same rows
CREATE TABLE many.plain_src AS SELECT g / 2 AS v, g AS x, md5(g::text) AS note
                                FROM generate_series(2, 20001) g;
CREATE TABLE many.part_src AS SELECT DATE '2020-01-01' + g / 10 AS d, g AS id, md5(g::text) AS note
                               FROM generate_series(0, 9999) g;
ANALYZE many.plain_src, many.part_src;
