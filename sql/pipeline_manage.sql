--
-- pipeline_manage: issue 35, point 4.  Pause, resume, rerun (atomic per
-- period: a failing rerun leaves the old data, unlike a DELETE + INSERT,
-- SQLMesh #5843), drop; another role can neither see, run nor manage a
-- pipeline; a superuser can manage it, and its command runs as the owner.
-- (NOLOGIN owners: see pipeline_create.)
--
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS idem_etl CASCADE;
CREATE EXTENSION idem_etl;
DROP SCHEMA IF EXISTS pmanage CASCADE;
DROP ROLE IF EXISTS pmanage_owner;
DROP ROLE IF EXISTS pmanage_other;
RESET client_min_messages;
CREATE SCHEMA pmanage;
\set schema pmanage
\i sql/include/err.sql
CREATE ROLE pmanage_owner NOLOGIN;
CREATE ROLE pmanage_other NOLOGIN;
GRANT ALL ON SCHEMA pmanage TO pmanage_owner, pmanage_other;
SET TimeZone = 'UTC';
SET ROLE pmanage_owner;
CREATE TABLE pmanage.src (day date, id int, amount int);
CREATE TABLE pmanage.facts (day date NOT NULL, id int, amount int, loaded_by name DEFAULT current_user)
  PARTITION BY RANGE (day);
INSERT INTO pmanage.src SELECT current_date - d, i, 10 FROM generate_series(1, 3) d, generate_series(1, 2) i;
SELECT etl_pipeline_create('facts',
    $$SELECT * FROM etl_replace_partition('pmanage.facts', {run_date},
        format('SELECT day, id, amount / (SELECT count(*) FROM pmanage.src WHERE day = %1$L AND amount > 0)::int AS amount, current_user AS loaded_by FROM pmanage.src WHERE day = %1$L', {run_date}),
        granularity => '1 day', run_key => {run_key})$$,
    '1 day', current_date - 3) > 0 AS created;

-- paused: a run does nothing (NOTICE), the status shows it, no next run
SELECT etl_pipeline_pause('facts'), etl_pipeline_pause('facts') AS again;
SELECT count(*) FROM etl_pipeline_run('facts');
SELECT paused, next_due IS NULL AS no_next_run, periods_behind FROM idem_etl.pipelines_status;
SELECT etl_pipeline_resume('facts'), etl_pipeline_resume('facts') AS again;
SET client_min_messages = warning;   -- the ledger's NOTICEs name dates
SELECT count(*) FROM etl_pipeline_run('facts');
SELECT current_date - day AS days_ago, count(*), sum(amount) FROM pmanage.facts GROUP BY 1 ORDER BY 1 DESC;

-- a rerun that fails (division by zero: every amount of the day is 0)
-- leaves the day's old rows in place
UPDATE pmanage.src SET amount = 0 WHERE day = current_date - 2;
SELECT etl_pipeline_rerun('facts', current_date - 2, current_date - 2);
SELECT current_date - period_start::date AS days_ago, kind, status, error FROM etl_pipeline_run('facts');
SELECT current_date - day AS days_ago, count(*), sum(amount) FROM pmanage.facts GROUP BY 1 ORDER BY 1 DESC;
-- fixed: the rerun swaps the new rows in
UPDATE pmanage.src SET amount = 30 WHERE day = current_date - 2;
SELECT etl_pipeline_rerun('facts', current_date - 2, current_date - 2);
SELECT current_date - period_start::date AS days_ago, kind, status FROM etl_pipeline_run('facts');
SELECT current_date - day AS days_ago, count(*), sum(amount) FROM pmanage.facts GROUP BY 1 ORDER BY 1 DESC;
RESET ROLE;

-- another role: sees nothing, can neither run nor manage it (42704), and
-- may create its own pipeline of the same name
SET ROLE pmanage_other;
SELECT count(*) FROM idem_etl.pipelines;
SELECT count(*) FROM idem_etl.pipeline_periods;
SELECT count(*) FROM idem_etl.pipelines_status;
SELECT * FROM pmanage.err($$SELECT * FROM etl_pipeline_run('facts')$$);
SELECT * FROM pmanage.err($$SELECT etl_pipeline_pause('facts')$$);
SELECT * FROM pmanage.err($$SELECT etl_pipeline_rerun('facts', now() - interval '9 days', now())$$);
SELECT * FROM pmanage.err($$SELECT etl_pipeline_drop('facts')$$);
SELECT etl_pipeline_create('facts', 'SELECT {run_date}', '1 day', current_date + 1) > 0 AS own_created;
SELECT name, owner FROM idem_etl.pipelines_status;
RESET ROLE;

-- a superuser sees both; a name two roles use is ambiguous for it (42P08)
SELECT name, owner FROM idem_etl.pipelines_status ORDER BY owner;
SELECT * FROM pmanage.err($$SELECT etl_pipeline_pause('facts')$$);
SET ROLE pmanage_other;
SELECT etl_pipeline_drop('facts');
RESET ROLE;
-- now it is not: a superuser may rerun it, but not run it in its own
-- session (42501): the periods run as the owner, in a session of that role
SELECT etl_pipeline_rerun('facts', current_date - 1, current_date - 1);
SELECT * FROM pmanage.err($$SELECT * FROM etl_pipeline_run('facts')$$);
UPDATE pmanage.src SET amount = 50 WHERE day = current_date - 1;
SET ROLE pmanage_owner;
SELECT current_date - period_start::date AS days_ago, kind, status FROM etl_pipeline_run('facts');
RESET ROLE;
SELECT DISTINCT loaded_by FROM pmanage.facts;

-- drop: the pipeline and its periods go, the data stay
SET ROLE pmanage_owner;
SELECT etl_pipeline_drop('facts');
SELECT count(*) FROM idem_etl.pipelines;
RESET ROLE;
SELECT count(*) FROM idem_etl.pipeline_periods;
SELECT count(*) FROM pmanage.facts;

SET client_min_messages = warning;
DROP EXTENSION idem_etl CASCADE;
DROP SCHEMA pmanage CASCADE;
DROP ROLE pmanage_owner;
DROP ROLE pmanage_other;
