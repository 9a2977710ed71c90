--
-- pipeline_sequence: issue 35, points 5 and 6.  A sequence pipeline runs
-- its command for each new range of keys {from_id} .. {to_id} of an
-- append-only table, in order, each range once, at most max_batch_size
-- keys at a time; a failed range keeps its bounds for its retries and
-- blocks the later ones (on_failure 'block') or not ('continue'); bad
-- sources are refused before anything is written.  (NOLOGIN owner: see
-- pipeline_create.  In-flight writers: isolation spec pipeline_sequence,
-- concurrent inserters: TAP 171_pipeline_sequence.)
--
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS idem_etl CASCADE;
CREATE EXTENSION idem_etl;
DROP SCHEMA IF EXISTS pseq CASCADE;
DROP ROLE IF EXISTS pseq_owner;
DROP ROLE IF EXISTS pseq_other;
RESET client_min_messages;
CREATE SCHEMA pseq;
CREATE ROLE pseq_owner NOLOGIN;
CREATE ROLE pseq_other NOLOGIN;
GRANT ALL ON SCHEMA pseq TO pseq_owner;
GRANT USAGE ON SCHEMA pseq TO pseq_other;
CREATE FUNCTION pseq.retry_now() RETURNS void LANGUAGE sql AS
  $$UPDATE idem_etl.pipeline_periods SET retry_after = now() - interval '1 second' WHERE status = 'retrying'$$;
SET ROLE pseq_owner;

-- 25 events, ranges of at most 10 keys: 1-10, 11-20, 21-25, in order
CREATE TABLE pseq.events (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, v int);
CREATE TABLE pseq.sums (from_id bigint, to_id bigint, n bigint, s bigint, run_key text);
INSERT INTO pseq.events (v) SELECT g FROM generate_series(1, 25) g;
SELECT etl_pipeline_create_sequence('sums',
    $$INSERT INTO pseq.sums SELECT {from_id}, {to_id}, count(*), sum(v), {run_key}
      FROM pseq.events WHERE id BETWEEN {from_id} AND {to_id}$$,
    'pseq.events', max_batch_size => 10) > 0 AS created;
SELECT kind, status, from_id, to_id, period_start IS NULL AS no_period FROM etl_pipeline_run('sums');
SELECT * FROM pseq.sums ORDER BY from_id;
-- nothing new: nothing runs
SELECT count(*) FROM etl_pipeline_run('sums');
-- new rows: the next range starts after the last
INSERT INTO pseq.events (v) SELECT g FROM generate_series(1, 3) g;
SELECT kind, status, from_id, to_id FROM etl_pipeline_run('sums');
-- max_periods bounds the ranges of one run; the next run goes on
INSERT INTO pseq.events (v) SELECT g FROM generate_series(1, 30) g;
SELECT from_id, to_id FROM etl_pipeline_run('sums', 2);
SELECT from_id, to_id FROM etl_pipeline_run('sums');
-- every event counted once
SELECT sum(n) AS counted, (SELECT count(*) FROM pseq.events) AS events,
       sum(s) = (SELECT sum(v) FROM pseq.events) AS sums_equal FROM pseq.sums;
SELECT name, state, watermark, periods_behind, last_id FROM idem_etl.pipelines_status;
SELECT status, count(*), min(from_id), max(to_id) FROM idem_etl.pipeline_periods GROUP BY 1;

-- a failing range: retried with the same bounds, blocking the later ones
CREATE TABLE pseq.broken (id bigint);
CREATE TABLE pseq.seen (from_id bigint, to_id bigint);
CREATE FUNCTION pseq.load(f bigint, t bigint) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO pseq.seen VALUES (f, t);
    IF EXISTS (SELECT FROM pseq.broken b WHERE b.id BETWEEN f AND t) THEN
        RAISE EXCEPTION 'key % is broken', (SELECT min(id) FROM pseq.broken) USING ERRCODE = 'data_exception';
    END IF;
END $$;
CREATE TABLE pseq.orders (id serial PRIMARY KEY, v int);
INSERT INTO pseq.orders (v) SELECT g FROM generate_series(1, 5) g;
INSERT INTO pseq.broken VALUES (3);
SELECT etl_pipeline_create_sequence('blk', $$SELECT pseq.load({from_id}, {to_id})$$, 'pseq.orders',
                                    max_batch_size => 2, max_attempts => 2) > 0 AS created;
SELECT from_id, to_id, status, error FROM etl_pipeline_run('blk');
RESET ROLE;
SELECT pseq.retry_now();
SET ROLE pseq_owner;
-- the retry takes the same range 3-4, fails for good; 5 waits
SELECT from_id, to_id, kind, status FROM etl_pipeline_run('blk');
SELECT count(*) FROM etl_pipeline_run('blk');
SELECT name, state, periods_behind, last_error FROM idem_etl.pipelines_status WHERE name = 'blk';
-- fixed and rerun (a range is named by when it first ran): 3-4 runs again, then 5
DELETE FROM pseq.broken;
SELECT etl_pipeline_rerun('blk', period_start, period_start) AS queued
  FROM idem_etl.pipeline_periods WHERE status = 'failed';
SELECT from_id, to_id, kind, status FROM etl_pipeline_run('blk');
SELECT * FROM pseq.seen ORDER BY from_id, to_id;

-- continue: the failed range stays failed, the later ones run
TRUNCATE pseq.seen;
INSERT INTO pseq.broken VALUES (1);
SELECT etl_pipeline_create_sequence('cnt', $$SELECT pseq.load({from_id}, {to_id})$$, 'pseq.orders',
                                    max_batch_size => 2, max_attempts => 1, on_failure => 'continue') > 0 AS created;
SELECT from_id, to_id, status FROM etl_pipeline_run('cnt');
SELECT name, state FROM idem_etl.pipelines_status WHERE name = 'cnt';

-- another role neither sees nor runs them
RESET ROLE;
SET ROLE pseq_other;
SELECT count(*) FROM idem_etl.pipelines_status;
SELECT count(*) FROM idem_etl.pipeline_periods;
\set VERBOSITY sqlstate
SELECT etl_pipeline_run('sums');
\set VERBOSITY default
RESET ROLE;
SET ROLE pseq_owner;

-- bad input: nothing is written (each its SQLSTATE)
\set VERBOSITY sqlstate
CREATE TABLE pseq.nokey (id int, v int);
SELECT etl_pipeline_create_sequence('x', 'SELECT {from_id}', 'pseq.nokey');
CREATE TABLE pseq.cached (id bigserial, v int);
ALTER SEQUENCE pseq.cached_id_seq CACHE 10;
SELECT etl_pipeline_create_sequence('x', 'SELECT {from_id}', 'pseq.cached');
CREATE SEQUENCE pseq.down INCREMENT -1;
CREATE TABLE pseq.countdown (id bigint DEFAULT nextval('pseq.down'), v int);
ALTER SEQUENCE pseq.down OWNED BY pseq.countdown.id;
SELECT etl_pipeline_create_sequence('x', 'SELECT {from_id}', 'pseq.countdown');
CREATE TABLE pseq.two (a serial, b serial);
SELECT etl_pipeline_create_sequence('x', 'SELECT {from_id}', 'pseq.two');
SELECT etl_pipeline_create_sequence('x', 'SELECT {from_id}', 'pseq.two', key_column => 'b') > 0 AS created_with_key;
SELECT etl_pipeline_create_sequence('y', 'SELECT 1', 'pseq.events', key_column => 'v');
SELECT etl_pipeline_create_sequence('y', 'SELECT 1', 'pseq.events', key_column => 'nope');
SELECT etl_pipeline_create_sequence('y', 'SELECT {run_date}', 'pseq.events');
SELECT etl_pipeline_create_sequence('y', 'SELECT 1; SELECT 2', 'pseq.events');
SELECT etl_pipeline_create_sequence('y', 'SELECT 1', 'pseq.events', max_batch_size => 0);
SELECT etl_pipeline_create_sequence('y', 'SELECT 1', 'pseq.events', every => '0');
SELECT etl_pipeline_create_sequence('y', 'SELECT 1', 'pseq.events', on_failure => 'retry');
SELECT etl_pipeline_create_sequence('sums', 'SELECT 1', 'pseq.events');
SELECT etl_pipeline_create_sequence('y', 'SELECT 1', 'pseq.events_id_seq');
SELECT etl_pipeline_create_sequence(NULL, 'SELECT 1', 'pseq.events');
RESET ROLE;
CREATE TABLE pseq.secret (id serial);
SET ROLE pseq_owner;
SELECT etl_pipeline_create_sequence('y', 'SELECT 1', 'pseq.secret');
\set VERBOSITY default
SELECT name FROM idem_etl.pipelines ORDER BY name;
RESET ROLE;
