--
-- pipeline_period: issue 35, point 1.  Periods are computed in the
-- pipeline's time zone: hourly periods across the changes to and from
-- summer time in Europe/Berlin are 23 and 25 on those days, each once;
-- daily periods there are 23 and 25 hours long; monthly periods from the
-- 31st do not drift.  (NOLOGIN owner: see pipeline_create.)
--
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS idem_etl CASCADE;
CREATE EXTENSION idem_etl;
DROP SCHEMA IF EXISTS pperiod CASCADE;
DROP ROLE IF EXISTS pperiod_owner;
RESET client_min_messages;
CREATE SCHEMA pperiod;
CREATE ROLE pperiod_owner NOLOGIN;
GRANT ALL ON SCHEMA pperiod TO pperiod_owner;
SET ROLE pperiod_owner;
SET TimeZone = 'UTC';     -- the session's zone does not matter
CREATE TABLE pperiod.log (name text, period_start timestamptz, period_end timestamptz, run_date text);

SELECT etl_pipeline_create('hourly',
    $$INSERT INTO pperiod.log VALUES ('hourly', {period_start}, {period_end}, {run_date})$$,
    '1 hour', '2026-03-28 00:00 Europe/Berlin', time_zone => 'Europe/Berlin') > 0 AS created;
SELECT etl_pipeline_create('daily',
    $$INSERT INTO pperiod.log VALUES ('daily', {period_start}, {period_end}, {run_date})$$,
    '1 day', '2026-03-27 00:00 Europe/Berlin', time_zone => 'Europe/Berlin') > 0 AS created;
SELECT etl_pipeline_create('monthly',
    $$INSERT INTO pperiod.log VALUES ('monthly', {period_start}, {period_end}, {run_date})$$,
    '1 month', '2026-01-31 00:00 UTC') > 0 AS created;
SELECT etl_pipeline_create('fall',
    $$INSERT INTO pperiod.log VALUES ('fall', {period_start}, {period_end}, {run_date})$$,
    '1 hour', '2026-10-25 00:00 Europe/Berlin', time_zone => 'Europe/Berlin') > 0 AS created;
SELECT etl_pipeline_create('fall_daily',
    $$INSERT INTO pperiod.log VALUES ('fall_daily', {period_start}, {period_end}, {run_date})$$,
    '1 day', '2026-10-24 00:00 Europe/Berlin', time_zone => 'Europe/Berlin') > 0 AS created;
SET client_min_messages = error;   -- "behind" counts periods until now
SELECT count(*) FROM etl_pipeline_run('fall', 26);
SELECT count(*) FROM etl_pipeline_run('fall_daily', 3);
-- 2026-03-28 .. 2026-03-30 (the 29th has 23 hours), then 2026-10-24 .. 26 (the 25th has 25)
SELECT count(*) FROM etl_pipeline_run('hourly', 24 + 23 + 24);
SELECT count(*) FROM etl_pipeline_run('daily', 4);
SELECT count(*) FROM etl_pipeline_run('monthly', 4);
RESET client_min_messages;

SET TimeZone = 'Europe/Berlin';
SELECT period_start::date AS day, count(*) AS periods, count(DISTINCT period_start) AS distinct_starts,
       min(period_start)::time AS first, max(period_start)::time AS last
  FROM pperiod.log WHERE name = 'hourly' GROUP BY 1 ORDER BY 1;
-- the hour that does not exist on the 29th is not a period
SELECT to_char(period_start, 'HH24:MI TZH') AS start, to_char(period_end, 'HH24:MI TZH') AS end, run_date
  FROM pperiod.log WHERE name = 'hourly' AND period_start::date = '2026-03-29' ORDER BY period_start LIMIT 4;
-- no gap, no overlap
SELECT count(*) AS gaps FROM (SELECT period_end, lead(period_start) OVER (ORDER BY period_start) AS next
                                FROM pperiod.log WHERE name = 'hourly') s
 WHERE next IS NOT NULL AND next <> period_end;
SELECT run_date, period_end - period_start AS length FROM pperiod.log WHERE name = 'daily' ORDER BY period_start;
-- autumn: 25 hourly periods on the 25th, two of them start at 02:00
SELECT period_start::date AS day, count(*) AS periods, count(DISTINCT period_start) AS distinct_starts
  FROM pperiod.log WHERE name = 'fall' GROUP BY 1 ORDER BY 1;
SELECT to_char(period_start, 'HH24:MI TZH') AS start, run_date
  FROM pperiod.log WHERE name = 'fall' AND period_start::time BETWEEN '01:00' AND '03:00' ORDER BY period_start;
SELECT run_date, period_end - period_start AS length FROM pperiod.log WHERE name = 'fall_daily' ORDER BY period_start;
SET TimeZone = 'UTC';
SELECT run_date, period_start::date AS starts, period_end::date AS ends FROM pperiod.log WHERE name = 'monthly' ORDER BY period_start;

RESET ROLE;
SET client_min_messages = warning;
DROP EXTENSION idem_etl CASCADE;
DROP SCHEMA pperiod CASCADE;
DROP ROLE pperiod_owner;
