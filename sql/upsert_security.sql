--
-- upsert_security: point 11 of etl_upsert_batch (security), and the
-- ordinary-role part of the foundation.
-- SECURITY INVOKER: the caller needs the usual privileges (42501 without
-- them, nothing written); an ordinary role owning its table can use
-- everything and the ledger records it; no argument can smuggle in a second
-- statement (42601), every identifier is quoted.
--
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS idem_etl CASCADE;
CREATE EXTENSION idem_etl;
DROP SCHEMA IF EXISTS sec CASCADE;
DROP SCHEMA IF EXISTS sec_owned CASCADE;
\set roles {idem_test_sec_limited,idem_test_sec_owner}
\i sql/include/drop_roles.sql
RESET client_min_messages;

CREATE SCHEMA sec;

\set schema sec
\i sql/include/err.sql

CREATE TABLE sec.t (id int PRIMARY KEY, v text);
INSERT INTO sec.t VALUES (1, 'one'), (2, 'two');
CREATE TABLE sec.secret (id int, v text);
INSERT INTO sec.secret VALUES (1, 'classified');
CREATE TABLE sec.victim (id int PRIMARY KEY, v text);
INSERT INTO sec.victim VALUES (1, 'still here'), (2, 'still here');
CREATE FUNCTION sec.state() RETURNS text LANGUAGE sql AS $$
    SELECT (SELECT string_agg(format('%s=%s@%s', id, v, xmin), ' ' ORDER BY id) FROM sec.t)
        || ' | ' || (SELECT string_agg(format('%s=%s', id, v), ' ' ORDER BY id) FROM sec.victim)
        || ' | ledger=' || (SELECT count(*) FROM idem_etl.runs);
$$;
SELECT sec.state() AS before \gset

--
-- privileges: SECURITY INVOKER, the caller's own rights apply
--
CREATE ROLE idem_test_sec_limited;
GRANT USAGE ON SCHEMA sec TO idem_test_sec_limited;
-- SELECT and INSERT, no UPDATE on the target; a batch that changes a row: 42501
GRANT SELECT, INSERT ON sec.t TO idem_test_sec_limited;
SET ROLE idem_test_sec_limited;
SELECT * FROM sec.err($$SELECT * FROM etl_upsert_batch('sec.t', 'SELECT 1 AS id, ''uno'' AS v')$$);
RESET ROLE;
-- SELECT and UPDATE, no INSERT; a batch with a new key: 42501
REVOKE ALL ON sec.t FROM idem_test_sec_limited;
GRANT SELECT, UPDATE ON sec.t TO idem_test_sec_limited;
SET ROLE idem_test_sec_limited;
SELECT * FROM sec.err($$SELECT * FROM etl_upsert_batch('sec.t', 'SELECT 3 AS id, ''three'' AS v')$$);
RESET ROLE;
-- SELECT, INSERT and UPDATE, no DELETE; delete_missing: 42501
REVOKE ALL ON sec.t FROM idem_test_sec_limited;
GRANT SELECT, INSERT, UPDATE ON sec.t TO idem_test_sec_limited;
SET ROLE idem_test_sec_limited;
SELECT * FROM sec.err($$SELECT * FROM etl_upsert_batch('sec.t', 'SELECT 1 AS id, ''one'' AS v',
                                                       delete_missing => 'true')$$);
RESET ROLE;
-- every right on the target, none on the table the source reads: 42501
GRANT DELETE ON sec.t TO idem_test_sec_limited;
SET ROLE idem_test_sec_limited;
SELECT * FROM sec.err($$SELECT * FROM etl_upsert_batch('sec.t', 'SELECT id + 10 AS id, v FROM sec.secret')$$);
RESET ROLE;
-- SELECT on some columns only, INSERT and UPDATE on those: 42501 saying why
-- (the statement failed instead, on the target's system columns)
REVOKE ALL ON sec.t FROM idem_test_sec_limited;
GRANT SELECT (id, v), INSERT (id, v), UPDATE (v) ON sec.t TO idem_test_sec_limited;
SET ROLE idem_test_sec_limited;
SELECT * FROM sec.err($$SELECT * FROM etl_upsert_batch('sec.t', 'SELECT 1 AS id, ''one'' AS v')$$);
RESET ROLE;
-- with SELECT on the table, column privileges for INSERT and UPDATE do
-- (rolled back: the state must stay as it was)
REVOKE ALL ON sec.t FROM idem_test_sec_limited;
GRANT SELECT, INSERT (id, v), UPDATE (v) ON sec.t TO idem_test_sec_limited;
BEGIN;
SET LOCAL ROLE idem_test_sec_limited;
SELECT inserted, updated, unchanged FROM etl_upsert_batch('sec.t',
    $$SELECT id, v || '!' AS v FROM sec.t UNION ALL SELECT 5, 'five'$$);
ROLLBACK;
-- no privilege at all on the target: 42501
REVOKE ALL ON sec.t FROM idem_test_sec_limited;
SET ROLE idem_test_sec_limited;
SELECT * FROM sec.err($$SELECT * FROM etl_upsert_batch('sec.t', 'SELECT 1 AS id, ''one'' AS v')$$);
RESET ROLE;
SELECT sec.state() = :'before' AS untouched;

--
-- an ordinary role owning its table can use every option; run_by records it
--
CREATE ROLE idem_test_sec_owner;
CREATE SCHEMA sec_owned AUTHORIZATION idem_test_sec_owner;
GRANT USAGE ON SCHEMA sec TO idem_test_sec_owner;
SET ROLE idem_test_sec_owner;
CREATE TABLE sec_owned.t (id int PRIMARY KEY, region text, v text, version int);
CREATE TABLE sec_owned.b (id int, region text, v text, version int);
INSERT INTO sec_owned.b VALUES (1, 'eu', 'a', 1), (1, 'eu', 'a-older', 0), (2, 'eu', 'b', 1), (3, 'us', 'c', 1);
SELECT inserted, updated, unchanged, deleted, skipped
  FROM etl_upsert_batch('sec_owned.t', 'TABLE sec_owned.b', key_columns => ARRAY['id'],
                        order_by => 'version DESC', newer_column => 'version',
                        delete_missing => $$region = 'eu'$$, run_key => 'owner day 1');
-- skip under run_key works for this role too (it reads the ledger)
SELECT inserted, updated, unchanged, deleted, skipped
  FROM etl_upsert_batch('sec_owned.t', 'TABLE sec_owned.b', key_columns => ARRAY['id'],
                        order_by => 'version DESC', newer_column => 'version',
                        delete_missing => $$region = 'eu'$$, run_key => 'owner day 1');
-- a correction, also with a temp table as the source
CREATE TEMP TABLE owner_stage AS SELECT * FROM sec_owned.b WHERE id <> 2;
SELECT inserted, updated, unchanged, deleted, skipped
  FROM etl_upsert_batch('sec_owned.t', 'TABLE owner_stage', key_columns => ARRAY['id'],
                        order_by => 'version DESC', newer_column => 'version',
                        delete_missing => $$region = 'eu'$$, run_key => 'owner day 1');
SELECT * FROM sec_owned.t ORDER BY id;
SELECT run_key, inserted, updated, unchanged, deleted, skipped, run_by FROM idem_etl.runs
 WHERE target_oid = 'sec_owned.t'::regclass ORDER BY run_id;
-- it still cannot write the ledger
SELECT * FROM sec.err($$DELETE FROM idem_etl.runs WHERE run_by = current_user$$);
SELECT * FROM sec.err($$UPDATE idem_etl.runs SET skipped = true$$);
-- nor load into a table it has no rights on
SELECT * FROM sec.err($$SELECT * FROM etl_upsert_batch('sec.t', 'SELECT 1 AS id, ''mine'' AS v')$$);
DROP TABLE owner_stage;
RESET ROLE;
SELECT count(*) FROM idem_etl.runs WHERE run_by = 'idem_test_sec_owner';

--
-- injection attempts: each is an error, the victim stays
--
SELECT sec.state() AS before \gset
-- a second statement in order_by
SELECT * FROM sec.err($$SELECT * FROM etl_upsert_batch('sec.t', 'SELECT 1 AS id, ''x'' AS v',
    order_by => 'v; DROP TABLE sec.victim')$$);
SELECT * FROM sec.err($$SELECT * FROM etl_upsert_batch('sec.t', 'SELECT 1 AS id, ''x'' AS v',
    order_by => 'v) AS x; DROP TABLE sec.victim; --')$$);
-- order_by that is more than an ORDER BY list
SELECT * FROM sec.err($$SELECT * FROM etl_upsert_batch('sec.t', 'SELECT 1 AS id, ''x'' AS v',
    order_by => 'v LIMIT 0')$$);
-- a second statement in source
SELECT * FROM sec.err($$SELECT * FROM etl_upsert_batch('sec.t', 'SELECT 1; DROP TABLE sec.victim')$$);
SELECT * FROM sec.err($$SELECT * FROM etl_upsert_batch('sec.t',
    'SELECT 1 AS id, ''x'' AS v; DROP TABLE sec.victim')$$);
-- breaking out of a wrapping subquery
SELECT * FROM sec.err($$SELECT * FROM etl_upsert_batch('sec.t',
    'SELECT 1 AS id, ''x'' AS v) s; DROP TABLE sec.victim; SELECT * FROM (SELECT 1')$$);
-- a source that is not a query
SELECT * FROM sec.err($$SELECT * FROM etl_upsert_batch('sec.t', 'DELETE FROM sec.victim RETURNING id, v')$$);
SELECT * FROM sec.err($$SELECT * FROM etl_upsert_batch('sec.t', 'DROP TABLE sec.victim')$$);
SELECT * FROM sec.err($$SELECT * FROM etl_upsert_batch('sec.t', '')$$);
-- a key column name built to close the conflict target
SELECT * FROM sec.err($$SELECT * FROM etl_upsert_batch('sec.t', 'SELECT 1 AS id, ''x'' AS v',
    key_columns => ARRAY['id) DO NOTHING; --'])$$);
SELECT * FROM sec.err($$SELECT * FROM etl_upsert_batch('sec.t', 'SELECT 1 AS id, ''x'' AS v',
    key_columns => ARRAY['id") DO NOTHING; DROP TABLE sec.victim; --'])$$);
-- a second statement in delete_missing, or an expression that escapes its parentheses
SELECT * FROM sec.err($$SELECT * FROM etl_upsert_batch('sec.t', 'SELECT 1 AS id, ''x'' AS v',
    delete_missing => 'true; DROP TABLE sec.victim')$$);
SELECT * FROM sec.err($$SELECT * FROM etl_upsert_batch('sec.t', 'SELECT 1 AS id, ''x'' AS v',
    delete_missing => 'false) OR (true')$$);
-- newer_column is a column name, not SQL
SELECT * FROM sec.err($$SELECT * FROM etl_upsert_batch('sec.t', 'SELECT 1 AS id, ''x'' AS v',
    newer_column => 'v; DROP TABLE sec.victim')$$);
SELECT sec.state() = :'before' AS untouched;
SELECT * FROM sec.victim ORDER BY id;

-- a run_key is a value: quotes and semicolons in it are harmless
SELECT inserted, updated, unchanged, deleted, skipped
  FROM etl_upsert_batch('sec.t', 'SELECT 1 AS id, ''one'' AS v', run_key => $$x'); DROP TABLE sec.victim; --$$);
SELECT run_key FROM idem_etl.runs WHERE target_oid = 'sec.t'::regclass;
SELECT * FROM sec.victim ORDER BY id;

-- a table that really has a column named id) DO NOTHING; -- can use it as the key
CREATE TABLE sec.odd ("id) DO NOTHING; --" int PRIMARY KEY, "v""; DROP TABLE sec.victim; --" text);
SELECT inserted, updated, unchanged, deleted, skipped
  FROM etl_upsert_batch('sec.odd',
       $$SELECT 1 AS "id) DO NOTHING; --", 'a' AS "v""; DROP TABLE sec.victim; --"$$,
       key_columns => ARRAY['id) DO NOTHING; --']);
SELECT inserted, updated, unchanged, deleted, skipped
  FROM etl_upsert_batch('sec.odd',
       $$SELECT * FROM (VALUES (1, 'b'), (2, 'c')) s("id) DO NOTHING; --", "v""; DROP TABLE sec.victim; --")$$,
       key_columns => ARRAY['id) DO NOTHING; --'],
       order_by => '"v""; DROP TABLE sec.victim; --" DESC',
       newer_column => 'v"; DROP TABLE sec.victim; --',
       delete_missing => '"id) DO NOTHING; --" > 5');
-- and as the default key (its primary key)
SELECT inserted, updated, unchanged, deleted, skipped
  FROM etl_upsert_batch('sec.odd',
       $$SELECT * FROM (VALUES (1, 'b'), (2, 'c')) s("id) DO NOTHING; --", "v""; DROP TABLE sec.victim; --")$$);
SELECT * FROM sec.odd ORDER BY 1;
SELECT * FROM sec.victim ORDER BY id;

SET client_min_messages = warning;
DROP SCHEMA sec CASCADE;
DROP SCHEMA sec_owned CASCADE;
DROP EXTENSION idem_etl;
RESET client_min_messages;
DROP ROLE idem_test_sec_limited;
DROP ROLE idem_test_sec_owner;
