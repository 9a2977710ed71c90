--
-- jobs_args: issue 10, point 12.  Argument checks of the job functions, each
-- with its SQLSTATE, before anything is queued.
--
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS idem_etl CASCADE;
CREATE EXTENSION idem_etl;
DROP SCHEMA IF EXISTS jargs CASCADE;
RESET client_min_messages;
CREATE SCHEMA jargs;
\set schema jargs
\i sql/include/err.sql

-- etl_wait: NULL job_id is 22004
SELECT * FROM jargs.err($$SELECT etl_wait(NULL)$$);
SELECT * FROM jargs.err($$SELECT etl_wait(NULL, '1s')$$);
-- etl_backfill: from_value after to_value, a step that is not positive: 22023
SELECT * FROM jargs.err($$SELECT etl_backfill('SELECT {run_date}', '2026-11-02', '2026-11-01')$$);
SELECT * FROM jargs.err($$SELECT etl_backfill('SELECT {run_date}', '2026-11-01', '2026-11-02', '0 days')$$);
SELECT * FROM jargs.err($$SELECT etl_backfill('SELECT {run_date}', '2026-11-01', '2026-11-02', '-1 day')$$);
SELECT * FROM jargs.err($$SELECT etl_backfill('SELECT {run_date}', '2026-11-01', '2026-11-02', '1 day -24 hours')$$);
-- NULL command or bounds: 22004
SELECT * FROM jargs.err($$SELECT etl_submit(NULL)$$);
SELECT * FROM jargs.err($$SELECT etl_backfill(NULL, '2026-11-01', '2026-11-02')$$);
SELECT * FROM jargs.err($$SELECT etl_backfill('SELECT {run_date}', NULL, '2026-11-02')$$);
SELECT * FROM jargs.err($$SELECT etl_backfill('SELECT {run_date}', '2026-11-01', NULL)$$);
SELECT * FROM jargs.err($$SELECT etl_backfill('SELECT {run_date}', '2026-11-01', '2026-11-02', NULL)$$);
-- a command of several statements: 42601, nothing queued
SELECT * FROM jargs.err($$SELECT etl_submit('SELECT 1; SELECT 2')$$);
-- max_attempts outside 1..100: 22023
SELECT * FROM jargs.err($$SELECT etl_submit('SELECT 1', max_attempts => 0)$$);
SELECT * FROM jargs.err($$SELECT etl_submit('SELECT 1', max_attempts => 101)$$);
SELECT * FROM jargs.err($$SELECT etl_submit('SELECT 1', max_attempts => -5)$$);
-- nothing was queued
SELECT count(*) FROM idem_etl.jobs;
-- etl_wait(id, NULL) waits without limit: on an ended job it returns at once
SELECT etl_submit('SELECT 1', run_after => now() + interval '1 day') AS job \gset
SELECT etl_cancel(:job);
SELECT etl_wait(:job, NULL);

-- a run_after before the submission counts as the submission: no role can
-- put its jobs ahead of those already waiting
BEGIN;
SELECT etl_submit('SELECT 1', run_after => '2000-01-01') AS early \gset
SELECT etl_submit('SELECT 1', run_after => '-infinity') AS earliest \gset
SELECT etl_submit('SELECT 1', run_after => now() + interval '1 day') AS later \gset
SELECT job_id = :early AS early, run_after = now() AS at_now, run_after - now() AS after_now
  FROM idem_etl.jobs WHERE job_id IN (:early, :earliest, :later) ORDER BY job_id;
SELECT etl_cancel(:early), etl_cancel(:earliest), etl_cancel(:later);
COMMIT;

SET client_min_messages = warning;
DROP SCHEMA jargs CASCADE;
