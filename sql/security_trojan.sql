--
-- security_trojan: nothing a caller controls runs with another role's rights
-- (the "search_path trojan", CVE-2018-1058, against idem_etl).
--
-- The attacker is an ordinary role owning schema evil (and allowed to
-- create in public, as before PostgreSQL 15).  It plants there a version of
-- every operator and function idem_etl uses (sql/include/trojan.sql), each
-- logging current_user and making the attacker superuser when it runs as
-- one.  Then it makes idem_etl run them:
--   A. with the owner's rights: its own calls, with search_path = evil
--      first, write idem_etl's state tables as their owner (a superuser);
--   B. with a superuser's rights: a superuser loads a table while a schema
--      the attacker writes is in its search_path.
-- After each route: the attacker is not superuser, and no trap ran as
-- anybody but the attacker.
--
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS idem_etl CASCADE;
CREATE EXTENSION idem_etl;
DROP SCHEMA IF EXISTS evil CASCADE;
DROP SCHEMA IF EXISTS victim CASCADE;
DROP SCHEMA IF EXISTS trojan_public CASCADE;
\set roles {idem_test_attacker}
\i sql/include/drop_roles.sql
RESET client_min_messages;

CREATE ROLE idem_test_attacker LOGIN;
CREATE SCHEMA evil AUTHORIZATION idem_test_attacker;
GRANT USAGE ON SCHEMA evil TO PUBLIC;
-- the schema a superuser has in its search_path and others may write
CREATE SCHEMA trojan_public;
GRANT CREATE, USAGE ON SCHEMA trojan_public TO PUBLIC;
CREATE SCHEMA victim;

\set schema victim
\i sql/include/err.sql

SET ROLE idem_test_attacker;
\set trojan_schema evil
\i sql/include/trojan.sql
\set trojan_schema trojan_public
\i sql/include/trojan.sql
RESET ROLE;

-- the checks after every route
CREATE FUNCTION victim.verdict() RETURNS TABLE (attacker_is_superuser boolean, ran_as_others bigint, ran_as_attacker bigint)
LANGUAGE sql AS $$
    SELECT (SELECT rolsuper FROM pg_roles WHERE rolname = 'idem_test_attacker'),
           (SELECT count(*) FROM (SELECT who FROM evil.log UNION ALL SELECT who FROM trojan_public.log) l
             WHERE who <> 'idem_test_attacker'),
           (SELECT count(*) FROM (SELECT who FROM evil.log UNION ALL SELECT who FROM trojan_public.log) l
             WHERE who = 'idem_test_attacker')
$$;
-- the planted operators work: the attacker's own statement calls its own
SET ROLE idem_test_attacker;
SET search_path = evil, pg_catalog, public;
SELECT 1::bigint = 1::bigint AS planted_operator_runs;
RESET search_path;
RESET ROLE;
SELECT * FROM victim.verdict();

--
-- A. Routes to the owner's rights, from the attacker's own calls
--
SET ROLE idem_test_attacker;
CREATE TABLE evil.daily (d date NOT NULL, id int NOT NULL, v varchar, seen timestamptz,
                         PRIMARY KEY (d, id)) PARTITION BY RANGE (d);
CREATE TABLE evil.daily_20261128 PARTITION OF evil.daily FOR VALUES FROM ('2026-11-28') TO ('2026-11-29');
INSERT INTO evil.daily VALUES ('2026-11-28', 1, 'old', now());
CREATE TABLE evil.plain (d date NOT NULL, id int NOT NULL, v varchar, PRIMARY KEY (d, id));
SET search_path = evil, pg_catalog, public;

-- A1. job by name (job_name = $1, status IN (...)), then cancel (job_id = $1, ||)
SELECT etl_cancel(etl_submit('SELECT 1', job_name => 'x', run_after => now() + interval '1 day')) AS cancelled;
SELECT etl_submit('SELECT 1', job_name => 'x', run_after => now() + interval '1 day') > 0 AS queued;
SELECT etl_cancel(etl_submit('SELECT 1', job_name => 'x')) AS cancelled_again;
-- A2. etl_wait and a backfill (the names, the dates)
SELECT etl_wait(j, '0 s') FROM etl_backfill('SELECT {run_date}', '2026-11-01', '2026-11-02', job_name => 'bf') j;
SELECT count(*) AS cancelled FROM etl_backfill('SELECT {run_date}', '2026-11-01', '2026-11-02', job_name => 'bf') j
 WHERE etl_cancel(j);
-- A3. a replacement that keeps the old partition (now() + keep_replaced), with a run_key
SELECT rows_loaded, rows_replaced, skipped FROM etl_replace_partition('evil.daily', '2026-11-28',
    $$SELECT '2026-11-28'::date AS d, 2 AS id, 'new'::varchar AS v$$, keep_replaced => '1 day', run_key => 'k');
-- A4. its skipped rerun (the ledger lookup), and a restore (keep_until - now())
SELECT rows_loaded, skipped FROM etl_replace_partition('evil.daily', '2026-11-28',
    $$SELECT '2026-11-28'::date AS d, 2 AS id, 'new'::varchar AS v$$, keep_replaced => '1 day', run_key => 'k');
SELECT etl_restore_partition('evil.daily', '2026-11-28') IS NOT NULL AS restored;
SELECT etl_cleanup() AS dropped;
-- A5. a new partition (bounds inferred from the siblings: date + interval, <>)
SELECT rows_loaded FROM etl_replace_partition('evil.daily', '2026-11-29',
    $$SELECT '2026-11-29'::date AS d, 1 AS id, 'new'::varchar AS v$$);
-- A6. a plain table by value (date =), and an upsert with newer_column (>=) and delete_missing
SELECT rows_loaded FROM etl_replace_partition('evil.plain', '2026-11-28',
    $$SELECT '2026-11-28'::date AS d, 1 AS id, 'p'::varchar AS v$$, partition_column => 'd', run_key => 'p');
SELECT inserted, updated, deleted FROM etl_upsert_batch('evil.daily',
    $$SELECT '2026-11-29'::date AS d, 1 AS id, 'u'::varchar AS v, now() AS seen$$,
    newer_column => 'seen', delete_missing => $$d = '2026-11-29'$$, run_key => 'u');
RESET search_path;
RESET ROLE;
SELECT * FROM victim.verdict();

--
-- B. Routes to a superuser's rights: a superuser loads the victim's tables
-- while trojan_public is in its search_path
--
CREATE TABLE victim.vk (k varchar PRIMARY KEY, v text, seen timestamptz);
INSERT INTO victim.vk VALUES ('a', 'old', '2026-01-01'), ('gone', 'old', '2026-01-01');
CREATE TABLE victim.days (d date NOT NULL, k varchar NOT NULL, v text, PRIMARY KEY (d, k)) PARTITION BY RANGE (d);
CREATE TABLE victim.days_20261128 PARTITION OF victim.days FOR VALUES FROM ('2026-11-28') TO ('2026-11-29');
CREATE TABLE victim.days_default PARTITION OF victim.days DEFAULT;
CREATE TABLE victim.ref (d date, k varchar, FOREIGN KEY (d, k) REFERENCES victim.days);
-- B1. the default search_path ("$user", public with pg_catalog first): the
-- planted varchar = is an exact match and would beat pg_catalog's text =
SET search_path = "$user", public, trojan_public;
SELECT inserted, updated, unchanged, deleted FROM etl_upsert_batch('victim.vk',
    $$SELECT 'a'::varchar AS k, 'new' AS v, '2026-02-01'::timestamptz AS seen
      UNION ALL SELECT 'b', 'new', '2026-02-01'$$,
    newer_column => 'seen', delete_missing => 'true');
SELECT * FROM victim.verdict();
-- B2. trojan_public before pg_catalog: every operator of the statements
SET search_path = trojan_public, pg_catalog, public;
SELECT inserted, updated, unchanged, deleted FROM etl_upsert_batch('victim.vk',
    $$SELECT 'a'::varchar AS k, 'newer' AS v, '2026-03-01'::timestamptz AS seen
      UNION ALL SELECT 'a', 'newer', '2026-03-01'
      UNION ALL SELECT 'c', 'x', '2026-03-01'$$,
    newer_column => 'seen', order_by => 'seen DESC', delete_missing => 'true', run_key => 'b2');
SELECT inserted, skipped FROM etl_upsert_batch('victim.vk',
    $$SELECT 'a'::varchar AS k, 'newer' AS v, '2026-03-01'::timestamptz AS seen
      UNION ALL SELECT 'a', 'newer', '2026-03-01'
      UNION ALL SELECT 'c', 'x', '2026-03-01'$$,
    newer_column => 'seen', order_by => 'seen DESC', delete_missing => 'true', run_key => 'b2');
-- B3. partitions: an existing one (bound constraint, indexes, foreign keys
-- referencing it), a new one next to a default partition, every value of a
-- source, kept and restored
SELECT rows_loaded, rows_replaced FROM etl_replace_partition('victim.days', '2026-11-28',
    $$SELECT '2026-11-28'::date AS d, 'a'::varchar AS k, 'v' AS v$$, keep_replaced => '1 hour');
SELECT rows_loaded FROM etl_replace_partition('victim.days', '2026-11-30',
    $$SELECT '2026-11-30'::date AS d, 'a'::varchar AS k, 'v' AS v$$, granularity => '1 day');
SELECT pg_catalog.count(*) AS partitions FROM etl_replace_partitions('victim.days',
    $$SELECT d::date, 'b'::varchar AS k, 'w' AS v FROM generate_series('2026-11-28'::date, '2026-11-30', '1 day') d$$);
SELECT etl_restore_partition('victim.days', '2026-11-28') IS NOT NULL AS restored;
RESET search_path;
SELECT * FROM victim.verdict();
SELECT k, v FROM victim.vk ORDER BY k;

-- what ran as another role than the attacker: nothing
SELECT DISTINCT who, what FROM (SELECT who, what FROM evil.log UNION ALL SELECT who, what FROM trojan_public.log) l WHERE who <> 'idem_test_attacker';

SET client_min_messages = warning;
DROP SCHEMA evil CASCADE;
DROP SCHEMA trojan_public CASCADE;
DROP SCHEMA victim CASCADE;
\set roles {idem_test_attacker}
\i sql/include/drop_roles.sql
DROP EXTENSION idem_etl CASCADE;
