--
-- pipeline_create: issue 35, point 6.  Bad input to etl_pipeline_create gets
-- its SQLSTATE and creates nothing; a start in the future is allowed.
-- Pipelines in pg_regress belong to a NOLOGIN role: the worker fails their
-- jobs (28000) without running them, so only the test's own
-- etl_pipeline_run calls run periods.
--
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS idem_etl CASCADE;
CREATE EXTENSION idem_etl;
DROP SCHEMA IF EXISTS pcreate CASCADE;
DROP ROLE IF EXISTS pcreate_owner;
RESET client_min_messages;
CREATE SCHEMA pcreate;
\set schema pcreate
\i sql/include/err.sql
CREATE ROLE pcreate_owner NOLOGIN;
GRANT USAGE ON SCHEMA pcreate TO pcreate_owner;
SET ROLE pcreate_owner;

-- NULL name, command, every or start: 22004
SELECT * FROM pcreate.err($$SELECT etl_pipeline_create(NULL, 'SELECT 1', '1 day', now())$$);
SELECT * FROM pcreate.err($$SELECT etl_pipeline_create('p', 'SELECT 1', NULL, now())$$);
-- not one statement: 42601; transaction control: 0A000; a syntax error: 42601
SELECT * FROM pcreate.err($$SELECT etl_pipeline_create('p', 'SELECT 1; SELECT 2', '1 day', now())$$);
SELECT * FROM pcreate.err($$SELECT etl_pipeline_create('p', 'COMMIT', '1 day', now())$$);
SELECT * FROM pcreate.err($$SELECT etl_pipeline_create('p', 'SELEC {run_date}', '1 day', now())$$);
-- an unknown placeholder: 22023
SELECT * FROM pcreate.err($$SELECT etl_pipeline_create('p', 'SELECT {run_day}', '1 day', now())$$);
-- every not positive, or months with days or hours: 22023
SELECT * FROM pcreate.err($$SELECT etl_pipeline_create('p', 'SELECT 1', '0 days', now())$$);
SELECT * FROM pcreate.err($$SELECT etl_pipeline_create('p', 'SELECT 1', '-1 hour', now())$$);
SELECT * FROM pcreate.err($$SELECT etl_pipeline_create('p', 'SELECT 1', '1 month 1 day', now())$$);
SELECT * FROM pcreate.err($$SELECT etl_pipeline_create('p', 'SELECT 1', '1 month 2 hours', now())$$);
-- a time zone that does not exist: 22023
SELECT * FROM pcreate.err($$SELECT etl_pipeline_create('p', 'SELECT 1', '1 day', now(), time_zone => 'Mars/Olympus')$$);
-- the other options: 22023
SELECT * FROM pcreate.err($$SELECT etl_pipeline_create('p', 'SELECT 1', '1 day', now(), lag => '-1 hour')$$);
SELECT * FROM pcreate.err($$SELECT etl_pipeline_create('p', 'SELECT 1', '1 day', now(), lookback => -1)$$);
SELECT * FROM pcreate.err($$SELECT etl_pipeline_create('p', 'SELECT 1', '1 day', now(), max_catchup => 0)$$);
SELECT * FROM pcreate.err($$SELECT etl_pipeline_create('p', 'SELECT 1', '1 day', now(), on_failure => 'retry')$$);
SELECT * FROM pcreate.err($$SELECT etl_pipeline_create('p', 'SELECT 1', '1 day', now(), max_attempts => 0)$$);
SELECT * FROM pcreate.err($$SELECT etl_pipeline_create('p', 'SELECT 1', '1 day', 'infinity')$$);
SELECT * FROM pcreate.err($$SELECT etl_pipeline_create('', 'SELECT 1', '1 day', now())$$);
-- nothing was created
SELECT count(*) FROM idem_etl.pipelines;

-- a start in the future is allowed; nothing is due before it
SELECT etl_pipeline_create('future', 'SELECT {run_date}', '1 day', date_trunc('day', now()) + interval '3 days') > 0 AS created;
SELECT count(*) FROM etl_pipeline_run('future');
SELECT name, state, watermark, periods_behind,
       next_due = date_trunc('day', now()) + interval '4 days' AS due_after_first_period
  FROM idem_etl.pipelines_status;
-- the same name again, by the same role: 42710
SELECT * FROM pcreate.err($$SELECT etl_pipeline_create('future', 'SELECT 1', '1 hour', now())$$);
-- an unknown pipeline: 42704
SELECT * FROM pcreate.err($$SELECT * FROM etl_pipeline_run('nope')$$);
SELECT * FROM pcreate.err($$SELECT * FROM etl_pipeline_run('future', 0)$$);
-- a run needs READ COMMITTED: 0A000
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT * FROM pcreate.err($$SELECT * FROM etl_pipeline_run('future')$$);
ROLLBACK;
-- rerun bounds: 22023
SELECT * FROM pcreate.err($$SELECT etl_pipeline_rerun('future', now(), now() - interval '1 day')$$);

RESET ROLE;
SET client_min_messages = warning;
DROP EXTENSION idem_etl CASCADE;
DROP SCHEMA pcreate CASCADE;
DROP ROLE pcreate_owner;
