--
-- pipeline_run: issue 35, points 1 to 3.  A start 30 days in the past runs
-- 30 periods, once each, in order; a second run runs nothing; the
-- placeholders are quoted literals of the period; lookback reruns the
-- previous periods, picks up a late row, and writes nothing to the target
-- when nothing changed; max_catchup leaves the older missed periods for a
-- rerun.  (NOLOGIN owner: see pipeline_create.)
--
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS idem_etl CASCADE;
CREATE EXTENSION idem_etl;
DROP SCHEMA IF EXISTS prun CASCADE;
DROP ROLE IF EXISTS prun_owner;
RESET client_min_messages;
CREATE SCHEMA prun;
CREATE ROLE prun_owner NOLOGIN;
GRANT ALL ON SCHEMA prun TO prun_owner;
SET ROLE prun_owner;
SET TimeZone = 'UTC';

-- 30 daily periods: each appends its run_date and placeholders once
CREATE TABLE prun.log (seq serial, run_date date, period_start timestamptz,
                       period_end timestamptz, run_key text);
SELECT etl_pipeline_create('daily',
    $$INSERT INTO prun.log (run_date, period_start, period_end, run_key)
      VALUES ({run_date}, {period_start}, {period_end}, {run_key})$$,
    '1 day', date_trunc('day', now()) - interval '30 days') > 0 AS created;
SELECT count(*), count(*) FILTER (WHERE kind = 'due' AND status = 'succeeded') AS succeeded
  FROM etl_pipeline_run('daily');
-- in order, each day once, its bounds one day apart, run_key = run_date
SELECT count(*) AS periods, count(DISTINCT run_date) AS days,
       bool_and(run_date = (date_trunc('day', now()) - interval '30 days')::date + seq - 1) AS in_order,
       bool_and(period_end - period_start = interval '1 day') AS one_day,
       bool_and(period_start = run_date::timestamptz AND run_key = to_char(run_date, 'YYYY-MM-DD')) AS placeholders
  FROM prun.log;
-- a second run (a later tick) runs nothing
SELECT count(*) FROM etl_pipeline_run('daily');
SELECT count(*) FROM prun.log;
SELECT status, count(*), min(attempts), max(attempts) FROM idem_etl.pipeline_periods GROUP BY 1;
SELECT name, state, watermark = date_trunc('day', now()) AS watermark_today, periods_behind,
       next_due = date_trunc('day', now()) + interval '1 day' AS next_due_tomorrow
  FROM idem_etl.pipelines_status;

-- hourly periods in a zone: {period_start} and {period_end} carry the
-- offset, {run_date} of a period shorter than a day is its start
CREATE TABLE prun.lit (seq serial, t text);
SELECT etl_pipeline_create('lit', $$INSERT INTO prun.lit (t) VALUES ({period_start} || ' ' || {period_end} || ' ' || {run_date})$$,
    '1 hour', '2026-07-01 00:00 Europe/Berlin', time_zone => 'Europe/Berlin') > 0 AS created;
SET client_min_messages = error;   -- "behind" counts periods until now
SELECT count(*) FROM etl_pipeline_run('lit', 2);
RESET client_min_messages;
SELECT t FROM prun.lit ORDER BY seq;

-- lookback: a partition per day, replaced by the pipeline with run_key
CREATE TABLE prun.src (day date, id int, amount int);
CREATE TABLE prun.facts (day date NOT NULL, id int, amount int) PARTITION BY RANGE (day);
INSERT INTO prun.src SELECT current_date - d, i, 10
  FROM generate_series(1, 5) d, generate_series(1, 3) i;
SELECT etl_pipeline_create('facts',
    $$SELECT * FROM etl_replace_partition('prun.facts', {run_date},
        format('SELECT * FROM prun.src WHERE day = %L', {run_date}),
        granularity => '1 day', run_key => {run_key})$$,
    '1 day', current_date - 5, lookback => 2) > 0 AS created;
SET client_min_messages = warning;  -- the ledger's skip NOTICEs name dates
-- two periods; the second reruns the first (unchanged: skipped)
SELECT current_date - period_start::date AS days_ago, kind, status
  FROM etl_pipeline_run('facts', 2) ORDER BY period_start, kind;
CREATE TEMP TABLE before AS SELECT day, id, xmin::text AS x, tableoid AS part FROM prun.facts;
-- a late row for the second day arrives
INSERT INTO prun.src VALUES (current_date - 4, 4, 10);
SELECT current_date - period_start::date AS days_ago, kind, status, run_id IS NOT NULL AS ran
  FROM etl_pipeline_run('facts', 1) ORDER BY period_start, kind;
RESET client_min_messages;
SELECT current_date - day AS days_ago, count(*) FROM prun.facts GROUP BY 1 ORDER BY 1 DESC;
-- the first day, unchanged, was not written: same row versions, same partition
SELECT count(*) AS rows_unchanged FROM prun.facts f JOIN before b
    ON b.day = f.day AND b.id = f.id AND b.x = f.xmin::text AND b.part = f.tableoid
 WHERE f.day = current_date - 5;
SELECT outcome, count(*) FROM idem_etl.run_history WHERE target = 'prun.facts' GROUP BY 1 ORDER BY 1;

-- an unchanged rerun (a lookback, a retry) is told by the source's
-- fingerprint alone: its rows are not loaded again to be compared, and it
-- writes no WAL but the ledger's row (5,000 rows loaded: some 200 kB)
CREATE TABLE prun.big (day date NOT NULL, id int, amount int) PARTITION BY RANGE (day);
SELECT rows_loaded FROM etl_replace_partition('prun.big', '2026-01-01',
    $$SELECT '2026-01-01'::date AS day, g AS id, g AS amount FROM generate_series(1, 5000) g$$,
    granularity => '1 day', run_key => '2026-01-01');
SET client_min_messages = warning;  -- the skip's NOTICE names the run
SELECT pg_catalog.pg_current_wal_insert_lsn() AS w0 \gset
SELECT rows_loaded, skipped FROM etl_replace_partition('prun.big', '2026-01-01',
    $$SELECT '2026-01-01'::date AS day, g AS id, g AS amount FROM generate_series(1, 5000) g$$,
    granularity => '1 day', run_key => '2026-01-01');
RESET client_min_messages;
SELECT pg_catalog.pg_wal_lsn_diff(pg_catalog.pg_current_wal_insert_lsn(), :'w0') < 8192 AS no_wal_but_the_ledgers;

-- max_catchup 3: of 6 missed periods, the older 3 are left out (a WARNING
-- names them), the latest 3 run by themselves; the rest on request
CREATE TABLE prun.caught (run_date date);
SELECT etl_pipeline_create('catch', $$INSERT INTO prun.caught VALUES ({run_date})$$,
    '1 day', current_date - 6, max_catchup => 3) > 0 AS created;
SET client_min_messages = error;
SELECT count(*) FROM etl_pipeline_run('catch');
RESET client_min_messages;
SELECT current_date - run_date AS days_ago FROM prun.caught ORDER BY 1 DESC;
SELECT status, count(*) FROM idem_etl.pipeline_periods pp JOIN idem_etl.pipelines p USING (pipeline_id)
 WHERE p.name = 'catch' GROUP BY 1 ORDER BY 1;
SELECT periods_skipped, periods_behind FROM idem_etl.pipelines_status WHERE name = 'catch';
SELECT etl_pipeline_rerun('catch', current_date - 6, current_date - 5);
SELECT current_date - period_start::date AS days_ago, kind, status FROM etl_pipeline_run('catch') ORDER BY period_start;
SELECT current_date - run_date AS days_ago FROM prun.caught ORDER BY 1 DESC;

RESET ROLE;
SET client_min_messages = warning;
DROP EXTENSION idem_etl CASCADE;
DROP SCHEMA prun CASCADE;
DROP ROLE prun_owner;
