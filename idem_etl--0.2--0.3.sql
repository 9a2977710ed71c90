-- idem_etl 0.2 -> 0.3: turns a 0.2 installation into exactly what a fresh
-- CREATE EXTENSION idem_etl VERSION '0.3' gives, keeping the data.  Checked
-- by test/t/130_upgrade.pl, which compares the catalogs of an updated and of
-- a fresh database (test/upgrade/objects.sql).
\echo Use "ALTER EXTENSION idem_etl UPDATE TO '0.3'" to load this file. \quit

-- job notices
-- The NOTICE, INFO and WARNING messages of the job's latest attempt, one a
-- line, the last 20 (a job worker has no client, and the server log takes
-- WARNING and above only by default): src/worker/worker_job.c.
ALTER TABLE idem_etl.jobs ADD COLUMN notices text;
