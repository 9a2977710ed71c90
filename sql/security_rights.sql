--
-- (expected/security_rights_1.out: PostgreSQL 17 and later, where an owner's privileges
-- include MAINTAIN, shown as "m" in an ACL)
-- security_rights: ordinary roles use what is theirs and nothing else.
-- Row security is never widened; job names are per role; another role's
-- job is indistinguishable from a missing one; privileges are checked
-- before anything is revealed or recorded; over-long keys are refused up
-- front; one role's object cannot stop the janitor; keys compare with
-- their index's own operators.
--
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS idem_etl CASCADE;
CREATE EXTENSION idem_etl;
DROP EXTENSION IF EXISTS citext;
DROP SCHEMA IF EXISTS rights CASCADE;
\set roles {idem_test_attacker,idem_test_victim,idem_test_reader,idem_test_bypass}
\i sql/include/drop_roles.sql
RESET client_min_messages;

CREATE SCHEMA rights;
GRANT USAGE, CREATE ON SCHEMA rights TO PUBLIC;
\set schema rights
\i sql/include/err.sql
CREATE ROLE idem_test_attacker;
CREATE ROLE idem_test_victim;
CREATE ROLE idem_test_reader;

--
-- Row security on the target: replacing would delete rows the caller
-- cannot see and load rows its policies forbid: 42501
--
SET ROLE idem_test_victim;
CREATE TABLE rights.days (d date NOT NULL, owner name NOT NULL, v text) PARTITION BY RANGE (d);
CREATE TABLE rights.days_20261128 PARTITION OF rights.days FOR VALUES FROM ('2026-11-28') TO ('2026-11-29');
INSERT INTO rights.days VALUES ('2026-11-28', 'idem_test_reader', 'mine'), ('2026-11-28', 'somebody', 'secret');
ALTER TABLE rights.days ENABLE ROW LEVEL SECURITY;
ALTER TABLE rights.days FORCE ROW LEVEL SECURITY;
CREATE POLICY own ON rights.days USING (owner = current_user);
SELECT * FROM rights.err($$SELECT * FROM etl_replace_partition('rights.days', '2026-11-28',
    'SELECT ''2026-11-28''::date AS d, current_user AS owner, ''x'' AS v')$$);
CREATE TABLE rights.plain (d date NOT NULL, owner name NOT NULL, v text);
ALTER TABLE rights.plain ENABLE ROW LEVEL SECURITY;
ALTER TABLE rights.plain FORCE ROW LEVEL SECURITY;
SELECT * FROM rights.err($$SELECT * FROM etl_replace_partition('rights.plain', '2026-11-28',
    'SELECT ''2026-11-28''::date AS d, current_user AS owner, ''x'' AS v', partition_column => 'd')$$);
ALTER TABLE rights.days NO FORCE ROW LEVEL SECURITY;

--
-- A partition with its own row security, policy and trigger keeps them
-- after a swap: the reader restricted on the partition stays restricted
--
ALTER TABLE rights.days_20261128 ENABLE ROW LEVEL SECURITY;
CREATE POLICY reader_own ON rights.days_20261128 FOR SELECT TO idem_test_reader
    USING (owner = current_user);
GRANT SELECT ON rights.days_20261128 TO idem_test_reader;
CREATE FUNCTION rights.stamp() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN NEW.v := NEW.v || ' (stamped)'; RETURN NEW; END $$;
CREATE TRIGGER stamp BEFORE UPDATE ON rights.days_20261128 FOR EACH ROW EXECUTE FUNCTION rights.stamp();
CREATE TRIGGER stamp_off BEFORE UPDATE OF v ON rights.days_20261128 FOR EACH ROW EXECUTE FUNCTION rights.stamp();
ALTER TABLE rights.days_20261128 DISABLE TRIGGER stamp_off;
SELECT rows_loaded, rows_replaced FROM etl_replace_partition('rights.days', '2026-11-28',
    $$SELECT * FROM (VALUES ('2026-11-28'::date, 'idem_test_reader'::name, 'mine again'),
                            ('2026-11-28', 'somebody', 'secret again')) s(d, owner, v)$$);
RESET ROLE;
SELECT relrowsecurity, relforcerowsecurity FROM pg_class WHERE oid = 'rights.days_20261128'::regclass;
SELECT polname, polroles::regrole[], pg_get_expr(polqual, polrelid) FROM pg_policy
 WHERE polrelid = 'rights.days_20261128'::regclass;
SELECT tgname, tgenabled FROM pg_trigger WHERE tgrelid = 'rights.days_20261128'::regclass AND NOT tgisinternal
 ORDER BY tgname;
SET ROLE idem_test_reader;
SELECT owner, v FROM rights.days_20261128 ORDER BY owner;
RESET ROLE;
-- the partition's trigger runs for direct updates after the swap
UPDATE rights.days_20261128 SET v = 'direct' WHERE owner = 'somebody';
SELECT v FROM rights.days_20261128 WHERE owner = 'somebody';

--
-- Job names are per role: another role's pending job of the same name is
-- neither returned nor in the way (etl_submit and etl_backfill)
--
SET ROLE idem_test_attacker;
SELECT etl_submit('SELECT 1', job_name => 'nightly', run_after => '2999-01-01') AS attacker_job \gset
SELECT count(*) AS attacker_backfill FROM etl_backfill('SELECT {run_date}', '2026-11-01', '2026-11-02', job_name => 'bf');
SET ROLE idem_test_victim;
SELECT etl_submit('SELECT 2', job_name => 'nightly', run_after => '2999-01-01') AS victim_job \gset
SELECT :victim_job <> :attacker_job AS victim_got_its_own_job;
SELECT count(*) AS victim_backfill FROM etl_backfill('SELECT {run_date}', '2026-11-01', '2026-11-02', job_name => 'bf');
-- the same name again returns the caller's own pending job
SELECT etl_submit('SELECT 2', job_name => 'nightly') = :victim_job AS same_job_again;
RESET ROLE;
SELECT submitted_by, job_name, command FROM idem_etl.jobs ORDER BY job_id;

-- another role's job, and a job that does not exist: the same answer
SET ROLE idem_test_attacker;
SELECT regexp_replace(e, 'job [0-9]+', 'job N') FROM rights.err(format('SELECT etl_wait(%s, ''0 s'')', :victim_job)) e;
SELECT regexp_replace(e, 'job [0-9]+', 'job N') FROM rights.err('SELECT etl_wait(987654321, ''0 s'')') e;
SELECT regexp_replace(e, 'job [0-9]+', 'job N') FROM rights.err(format('SELECT etl_cancel(%s)', :victim_job)) e;
SELECT regexp_replace(e, 'job [0-9]+', 'job N') FROM rights.err('SELECT etl_cancel(987654321)') e;
RESET ROLE;
SELECT status FROM idem_etl.jobs WHERE job_id = :victim_job;
-- a role with BYPASSRLS skips the table's row security (it sees every
-- job, as PostgreSQL means), but waits for and cancels only the jobs of
-- roles it is a member of: it cancelled any role's queued job
CREATE ROLE idem_test_bypass BYPASSRLS;
SET ROLE idem_test_bypass;
SELECT count(*) AS sees_the_job FROM idem_etl.jobs WHERE job_id = :victim_job;
SELECT regexp_replace(e, 'job [0-9]+', 'job N') FROM rights.err(format('SELECT etl_cancel(%s)', :victim_job)) e;
SELECT regexp_replace(e, 'job [0-9]+', 'job N') FROM rights.err(format('SELECT etl_wait(%s, ''0 s'')', :victim_job)) e;
RESET ROLE;
SELECT status FROM idem_etl.jobs WHERE job_id = :victim_job;
DROP ROLE idem_test_bypass;

--
-- Argument checks before any work
--
SELECT * FROM rights.err($$SELECT etl_submit('SELECT 1', job_name => repeat('n', 1025))$$);
SELECT * FROM rights.err($$SELECT etl_backfill('SELECT {run_date}', '2026-11-01', '2026-11-01', job_name => repeat('n', 1024))$$);
SELECT * FROM rights.err($$SELECT * FROM etl_upsert_batch('rights.days', 'SELECT 1 AS x', run_key => repeat('k', 1025))$$);
SELECT * FROM rights.err($$SELECT * FROM etl_replace_partition('rights.days', '2026-11-28', 'SELECT 1 AS x', run_key => repeat('k', 2000))$$);
SELECT * FROM rights.err($$SELECT etl_wait(NULL)$$);
SELECT * FROM rights.err($$SELECT etl_submit('SELECT 1', max_attempts => 101)$$);
SELECT * FROM rights.err($$SELECT etl_submit('SELECT 1', max_attempts => 0)$$);
SELECT * FROM rights.err($$SELECT etl_submit('COMMIT')$$);
SELECT * FROM rights.err($$SELECT etl_backfill('SELECT 1', '2026-11-02', '2026-11-01')$$);
SELECT * FROM rights.err($$SELECT etl_backfill('SELECT 1', '2026-11-01', '2026-11-02', step => '-1 day')$$);
SELECT count(*) AS nothing_queued FROM idem_etl.jobs WHERE length(job_name) > 1000 OR command = 'COMMIT';

--
-- Privileges before anything else: a role without privileges learns
-- nothing about the table's keys, and records no skip
--
SET ROLE idem_test_victim;
CREATE TABLE rights.nokey (id int, v text);
CREATE TABLE rights.byday (d date NOT NULL, v text);
GRANT SELECT, INSERT ON rights.byday TO idem_test_attacker;
RESET ROLE;
SET ROLE idem_test_attacker;
SELECT * FROM rights.err($$SELECT * FROM etl_upsert_batch('rights.nokey', 'SELECT 1 AS id')$$);
SELECT * FROM rights.err($$SELECT * FROM etl_replace_partition('rights.byday', '2026-11-28',
    'SELECT ''2026-11-28''::date AS d', partition_column => 'd', run_key => 'r')$$);
RESET ROLE;
SELECT count(*) AS runs_of_attacker FROM idem_etl.runs WHERE run_by = 'idem_test_attacker';

--
-- Keys compare with their unique index's operators: a citext key matches
-- case-insensitively, as the index (and ON CONFLICT) does
--
CREATE EXTENSION citext SCHEMA rights;
CREATE TABLE rights.ci (k rights.citext PRIMARY KEY, v text);
INSERT INTO rights.ci VALUES ('Alice', 'old');
SELECT inserted, updated, unchanged FROM etl_upsert_batch('rights.ci',
    $$SELECT 'ALICE'::rights.citext AS k, 'new' AS v$$);
SELECT k, v FROM rights.ci;

--
-- One role's view on its kept partition does not stop the clean-up of
-- the others: a WARNING names it, the rest is dropped
--
SET ROLE idem_test_attacker;
CREATE TABLE rights.a (d date NOT NULL, v text) PARTITION BY RANGE (d);
CREATE TABLE rights.a_1 PARTITION OF rights.a FOR VALUES FROM ('2026-11-28') TO ('2026-11-29');
CREATE TABLE rights.a_2 PARTITION OF rights.a FOR VALUES FROM ('2026-11-29') TO ('2026-11-30');
SELECT count(*) FROM etl_replace_partitions('rights.a',
    $$SELECT * FROM (VALUES ('2026-11-28'::date, 'x'), ('2026-11-29', 'y')) s(d, v)$$,
    keep_replaced => '1 hour');
DO $$ BEGIN
    EXECUTE (SELECT format('CREATE VIEW rights.pin AS SELECT * FROM %s', kept_table)
               FROM idem_etl.replaced_partitions WHERE partition_value = '2026-11-28');
END $$;
RESET ROLE;
-- their time has come (as the state's owner, in the transaction of the
-- clean-up, so that the background janitor does not do it first): the
-- pinned one is kept, with a WARNING (2BP01, its name in the message), and
-- retried ten minutes later; the other one is dropped
\set VERBOSITY sqlstate
BEGIN;
UPDATE idem_etl.replaced_partitions SET keep_until = now() - interval '1 second';
SELECT etl_cleanup() AS dropped;
COMMIT;
\set VERBOSITY default
SELECT partition_value, keep_until > now() + interval '9 minutes' AS retried_later
  FROM idem_etl.replaced_partitions ORDER BY 1;
SELECT count(*) AS kept_tables FROM pg_class WHERE relname LIKE 'idem_etl_kept_%';

--
-- A replaced partition has exactly the privileges the old one had: not the
-- schema's default privileges for tables its owner creates, which the load
-- table got.  A grant revoked on the partition, or never given (a partition
-- made before the default privileges), stayed given after the swap.
--
SET ROLE idem_test_victim;
CREATE TABLE rights.pay (d date NOT NULL, v int) PARTITION BY LIST (d);
CREATE TABLE rights.pay_1 PARTITION OF rights.pay FOR VALUES IN ('2026-11-01');
ALTER DEFAULT PRIVILEGES IN SCHEMA rights GRANT SELECT ON TABLES TO idem_test_reader;
CREATE TABLE rights.pay_2 PARTITION OF rights.pay FOR VALUES IN ('2026-11-02');
REVOKE SELECT ON rights.pay_2 FROM idem_test_reader;
GRANT UPDATE ON rights.pay_2 TO idem_test_attacker WITH GRANT OPTION;
SET ROLE idem_test_attacker;
GRANT UPDATE ON rights.pay_2 TO idem_test_reader;
SET ROLE idem_test_victim;
SELECT string_agg(relname || ': ' || coalesce(relacl::text, 'owner only'), '; ' ORDER BY relname) AS acl_before
  FROM pg_class WHERE relnamespace = 'rights'::regnamespace AND relname IN ('pay_1', 'pay_2') \gset
SELECT rows_loaded FROM etl_replace_partition('rights.pay', '2026-11-01', $$SELECT '2026-11-01'::date AS d, 1 AS v$$);
SELECT rows_loaded FROM etl_replace_partition('rights.pay', '2026-11-02', $$SELECT '2026-11-02'::date AS d, 2 AS v$$);
SELECT rows_loaded FROM etl_replace_where('rights.pay', $$d = '2026-11-02'$$, $$SELECT '2026-11-02'::date AS d, 3 AS v$$);
-- the same entries, grantors included (reader's UPDATE was granted by attacker)
SELECT string_agg(relname || ': ' || coalesce(relacl::text, 'owner only'), '; ' ORDER BY relname) = :'acl_before' AS same_privileges
  FROM pg_class WHERE relnamespace = 'rights'::regnamespace AND relname IN ('pay_1', 'pay_2');
SELECT relname, relacl FROM pg_class WHERE relnamespace = 'rights'::regnamespace AND relname IN ('pay_1', 'pay_2') ORDER BY 1;
SET ROLE idem_test_reader;
SELECT * FROM rights.err($$SELECT * FROM rights.pay_1$$);
SELECT * FROM rights.err($$SELECT * FROM rights.pay_2$$);
RESET ROLE;
-- the privileges' dependencies follow them: dropping the grantees' objects
-- finds them on the new partitions
SELECT pg_describe_object(classid, objid, objsubid) AS object, refobjid::regrole AS role, deptype
  FROM pg_shdepend
 WHERE objid IN ('rights.pay_1'::regclass, 'rights.pay_2'::regclass) AND deptype = 'a'
 ORDER BY 1, 2;
-- a restore puts a kept version back with the privileges the partition it
-- displaces has now: a privilege revoked since the version was kept is
-- not given back
SET ROLE idem_test_victim;
GRANT SELECT ON rights.pay_1 TO idem_test_reader;
SELECT rows_loaded FROM etl_replace_partition('rights.pay', '2026-11-01',
    $$SELECT '2026-11-01'::date AS d, 4 AS v$$, keep_replaced => '1 day');
REVOKE SELECT ON rights.pay_1 FROM idem_test_reader;
SELECT etl_restore_partition('rights.pay', '2026-11-01')::regclass AS restored;
SELECT v, has_table_privilege('idem_test_reader', 'rights.pay_1', 'SELECT') AS reader_may_select
  FROM rights.pay_1;
RESET ROLE;
ALTER DEFAULT PRIVILEGES FOR ROLE idem_test_victim IN SCHEMA rights REVOKE SELECT ON TABLES FROM idem_test_reader;
-- and the displaced partition's owner: the version kept the owner of the
-- day it was replaced, who got the partition back and its new owner lost it
CREATE TABLE rights.own (d date NOT NULL, v int) PARTITION BY LIST (d);
CREATE TABLE rights.own_1 PARTITION OF rights.own FOR VALUES IN ('2026-11-01');
SELECT rows_loaded FROM etl_replace_partition('rights.own', '2026-11-01',
    $$SELECT '2026-11-01'::date AS d, 1 AS v$$, keep_replaced => '1 day');
ALTER TABLE rights.own_1 OWNER TO idem_test_victim;
SELECT etl_restore_partition('rights.own', '2026-11-01')::regclass AS restored;
SELECT relowner::regrole AS owner, relacl FROM pg_class WHERE oid = 'rights.own_1'::regclass;
SET ROLE idem_test_victim;
SELECT count(*) AS owner_reads FROM rights.own_1;
RESET ROLE;

SET client_min_messages = warning;
DROP SCHEMA rights CASCADE;
\set roles {idem_test_attacker,idem_test_victim,idem_test_reader}
\i sql/include/drop_roles.sql
DROP EXTENSION idem_etl CASCADE;
