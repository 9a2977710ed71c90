--
-- pipeline_failure: issue 35, points 1 and 4.  A failing period is
-- recorded with its error and retried; after max_attempts it fails for
-- good: with on_failure 'block' the later periods wait until it succeeds
-- (after etl_pipeline_rerun), with 'continue' they run.  The state changes
-- raise one WARNING each, not one per run.  (NOLOGIN owner: see
-- pipeline_create.  Time is simulated by moving retry_after back.)
--
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS idem_etl CASCADE;
CREATE EXTENSION idem_etl;
DROP SCHEMA IF EXISTS pfail CASCADE;
DROP ROLE IF EXISTS pfail_owner;
RESET client_min_messages;
CREATE SCHEMA pfail;
CREATE ROLE pfail_owner NOLOGIN;
GRANT ALL ON SCHEMA pfail TO pfail_owner;
SET TimeZone = 'UTC';
-- the "time passes" helper: due retries now (as the superuser)
CREATE FUNCTION pfail.retry_now() RETURNS void LANGUAGE sql AS
  $$UPDATE idem_etl.pipeline_periods SET retry_after = now() - interval '1 second' WHERE status = 'retrying'$$;
SET ROLE pfail_owner;
-- the day 3 days ago fails while pfail.bad holds it
CREATE TABLE pfail.bad (run_date date);
CREATE TABLE pfail.done (name text, run_date date);
INSERT INTO pfail.bad VALUES (current_date - 3);
CREATE FUNCTION pfail.load(name text, d date) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO pfail.done VALUES (name, d);
    IF EXISTS (SELECT FROM pfail.bad b WHERE b.run_date = d) THEN
        RAISE EXCEPTION 'source is broken' USING ERRCODE = 'data_exception';
    END IF;
END $$;
SELECT etl_pipeline_create('blk', $$SELECT pfail.load('blk', {run_date})$$, '1 day', current_date - 5,
                           max_attempts => 2) > 0 AS created;
SELECT etl_pipeline_create('cnt', $$SELECT pfail.load('cnt', {run_date})$$, '1 day', current_date - 5,
                           max_attempts => 2, on_failure => 'continue') > 0 AS created;

-- block: days -5 and -4 run, -3 fails (retrying), nothing after it
SELECT current_date - period_start::date AS days_ago, kind, status, error FROM etl_pipeline_run('blk') ORDER BY period_start;
SELECT state, periods_behind, last_error FROM idem_etl.pipelines_status WHERE name = 'blk';
-- before the retry is due a run does nothing, and raises no new WARNING
SELECT count(*) FROM etl_pipeline_run('blk');
RESET ROLE; SELECT pfail.retry_now(); SET ROLE pfail_owner;
-- the second attempt fails too: failed for good, the pipeline is blocked
SELECT current_date - period_start::date AS days_ago, kind, status FROM etl_pipeline_run('blk') ORDER BY period_start;
SELECT count(*) FROM etl_pipeline_run('blk');
SELECT state, periods_behind, next_due IS NULL AS no_next_run FROM idem_etl.pipelines_status WHERE name = 'blk';
-- the failed attempts left nothing behind
SELECT current_date - run_date AS days_ago, count(*) FROM pfail.done WHERE name = 'blk' GROUP BY 1 ORDER BY 1 DESC;
-- fixed upstream, the failed day is rerun; then the later days run, in order
DELETE FROM pfail.bad;
SELECT etl_pipeline_rerun('blk', current_date - 3, current_date - 3);
SELECT current_date - period_start::date AS days_ago, kind, status FROM etl_pipeline_run('blk') ORDER BY period_start;
SELECT state, periods_behind, watermark = current_date::timestamptz AS caught_up FROM idem_etl.pipelines_status WHERE name = 'blk';
SELECT current_date - period_start::date AS days_ago, status, attempts FROM idem_etl.pipeline_periods pp
  JOIN idem_etl.pipelines p USING (pipeline_id) WHERE p.name = 'blk' ORDER BY period_start;

-- continue: the failing day does not stop the later ones
INSERT INTO pfail.bad VALUES (current_date - 3);
SELECT current_date - period_start::date AS days_ago, kind, status FROM etl_pipeline_run('cnt') ORDER BY period_start;
RESET ROLE; SELECT pfail.retry_now(); SET ROLE pfail_owner;
SELECT current_date - period_start::date AS days_ago, kind, status FROM etl_pipeline_run('cnt') ORDER BY period_start;
SELECT state, periods_behind, watermark = (current_date - 3)::timestamptz AS watermark_before_failure
  FROM idem_etl.pipelines_status WHERE name = 'cnt';
SELECT current_date - run_date AS days_ago FROM pfail.done WHERE name = 'cnt' ORDER BY 1 DESC;

RESET ROLE;
SET client_min_messages = warning;
DROP EXTENSION idem_etl CASCADE;
DROP SCHEMA pfail CASCADE;
DROP ROLE pfail_owner;
