-- idem_etl benchmark, partition workload: build events for one
-- configuration (psql variable cfg, a row of part_config) in a schema of its
-- own, part_<cfg>, with the day's original rows (events_day_orig, to restore
-- the day between measurements) and the source that replaces them
-- (events_src).  Every configuration has its schema, so that all of them
-- exist at once and the measurements go round-robin over configurations
-- too (the 300-partition target compares two of them).  Deterministic:
-- generate_series, md5 and arithmetic only.
\set ON_ERROR_STOP 1
SET client_min_messages = warning;

SELECT n_parts, rows_day, rows_other, part_day() AS day, part_name(part_day()) AS part,
       'part_' || cfg AS schema
  FROM part_config WHERE cfg = :'cfg' \gset

DROP SCHEMA IF EXISTS :"schema" CASCADE;
CREATE SCHEMA :"schema";
SET search_path = :"schema", public;

-- events(event_date, id, payload), range-partitioned by day; primary key
-- (event_date, id) and a secondary index on id, both declared on the parent
-- (so every partition has them).  The partitions are the n_parts days up to
-- 2026-11-30; no DEFAULT partition.  No per-table storage parameters:
-- autovacuum is off in the whole cluster.
CREATE TABLE events (
    event_date date   NOT NULL,
    id         bigint NOT NULL,
    payload    text
) PARTITION BY RANGE (event_date);

SELECT format('CREATE TABLE %I PARTITION OF events FOR VALUES FROM (%L) TO (%L)',
              part_name(d::date), d::date, d::date + 1)
  FROM generate_series(DATE '2026-11-30' - (:n_parts - 1), DATE '2026-11-30', interval '1 day') AS d
\gexec

-- The rows: ids 1..n per day, in key order (the order an export by key
-- gives, and the easiest for the strategies that maintain the indexes row
-- by row); payload about 60 bytes.
INSERT INTO events
SELECT d::date, g, format('event %s of %s: %s', g, d::date, md5(d::date || '/' || g))
  FROM generate_series(DATE '2026-11-30' - (:n_parts - 1), DATE '2026-11-30', interval '1 day') AS d,
       LATERAL generate_series(1::bigint, CASE WHEN d::date = :'day' THEN :rows_day ELSE :rows_other END) AS g;

-- indexes built after the load, on every partition at once
SET maintenance_work_mem = '512MB';
ALTER TABLE events ADD CONSTRAINT events_pkey PRIMARY KEY (event_date, id);
CREATE INDEX events_id_idx ON events (id);
RESET maintenance_work_mem;

-- The day's original rows, to restore the partition between measurements,
-- and the new contents: the same ids, every payload changed.
CREATE TABLE events_day_orig AS SELECT * FROM events WHERE event_date = :'day' ORDER BY id;
CREATE TABLE events_src AS
SELECT event_date, id, format('event %s of %s, corrected: %s', id, event_date, md5(event_date || '/' || id || '/v2')) AS payload
  FROM events_day_orig ORDER BY id;

-- The other partitions, which no strategy may touch: their oid and
-- relfilenode now (part-run-one.sql compares after each strategy's first
-- run, and watches their scan and write counters around every phase).
CREATE TABLE part_others AS
SELECT c.oid AS relid, c.relname, c.relfilenode
  FROM pg_inherits AS i JOIN pg_class AS c ON c.oid = i.inhrelid
 WHERE i.inhparent = 'events'::regclass AND c.relname <> :'part';

VACUUM (ANALYZE) events, events_src, events_day_orig;
