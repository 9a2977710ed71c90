--
-- snapshot_errors: every refusal of etl_snapshot, with its SQLSTATE, before
-- anything is written; the rights it needs (SECURITY INVOKER: SELECT on
-- the table, INSERT on the columns it writes, UPDATE on valid_to, DELETE to
-- replace a version dated alike).
--
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS idem_etl CASCADE;
CREATE EXTENSION idem_etl;
DROP SCHEMA IF EXISTS snape CASCADE;
\set roles {idem_test_snap_user}
\i sql/include/drop_roles.sql
RESET client_min_messages;
CREATE SCHEMA snape;
\set schema snape
\i sql/include/err.sql

CREATE TABLE snape.dim (id int, k2 int, v text, t timestamptz, n int,
                        valid_from timestamptz, valid_to timestamptz, del boolean,
                        g int GENERATED ALWAYS AS (id * 2) STORED);
CREATE TABLE snape.ok AS SELECT 1 AS id, 'a'::text AS v;

-- arguments
SELECT * FROM snape.err($$SELECT * FROM etl_snapshot(NULL, 'SELECT 1', '{id}', valid_at => '2026-01-01')$$);
SELECT * FROM snape.err($$SELECT * FROM etl_snapshot('snape.dim', 'SELECT * FROM snape.ok', NULL, valid_at => '2026-01-01')$$);
SELECT * FROM snape.err($$SELECT * FROM etl_snapshot('snape.dim', 'SELECT * FROM snape.ok', '{}', valid_at => '2026-01-01')$$);
SELECT * FROM snape.err($$SELECT * FROM etl_snapshot('snape.dim', 'SELECT * FROM snape.ok', '{nope}', valid_at => '2026-01-01')$$);
SELECT * FROM snape.err($$SELECT * FROM etl_snapshot('snape.dim', 'SELECT * FROM snape.ok', '{id,id}', valid_at => '2026-01-01')$$);
SELECT * FROM snape.err($$SELECT * FROM etl_snapshot('snape.dim', 'SELECT * FROM snape.ok', '{g}', valid_at => '2026-01-01')$$);
SELECT * FROM snape.err($$SELECT * FROM etl_snapshot('snape.dim', 'SELECT * FROM snape.ok', '{id}', valid_at => '2026-01-01',
    valid_from_column => 'nope')$$);
SELECT * FROM snape.err($$SELECT * FROM etl_snapshot('snape.dim', 'SELECT * FROM snape.ok', '{id}', valid_at => '2026-01-01',
    valid_to_column => 'valid_from')$$);
SELECT * FROM snape.err($$SELECT * FROM etl_snapshot('snape.dim', 'SELECT * FROM snape.ok', '{id}', valid_at => '2026-01-01',
    valid_to_column => 'n')$$);
SELECT * FROM snape.err($$SELECT * FROM etl_snapshot('snape.dim', 'SELECT * FROM snape.ok', '{id}', valid_at => '2026-01-01',
    is_deleted_column => 'v')$$);
SELECT * FROM snape.err($$SELECT * FROM etl_snapshot('snape.dim', 'SELECT * FROM snape.ok', '{id}', valid_at => '2026-01-01',
    hard_deletes => 'purge')$$);
SELECT * FROM snape.err($$SELECT * FROM etl_snapshot('snape.dim', 'SELECT * FROM snape.ok', '{id}', updated_at => 't',
    hard_deletes => 'invalidate')$$);
SELECT * FROM snape.err($$SELECT * FROM etl_snapshot('snape.dim', 'SELECT * FROM snape.ok', '{id}', valid_at => '2026-01-01',
    hard_deletes => 'new_record')$$);
SELECT * FROM snape.err($$SELECT * FROM etl_snapshot('snape.dim', 'SELECT * FROM snape.ok', '{id}', valid_at => '2026-01-01',
    check_columns => '{v}', exclude_columns => '{v}')$$);
SELECT * FROM snape.err($$SELECT * FROM etl_snapshot('snape.dim', 'SELECT * FROM snape.ok', '{id}', valid_at => '2026-01-01',
    check_columns => '{id}')$$);
SELECT * FROM snape.err($$SELECT * FROM etl_snapshot('snape.dim', 'SELECT * FROM snape.ok', '{id}', valid_at => '2026-01-01',
    check_columns => '{n}')$$);
SELECT * FROM snape.err($$SELECT * FROM etl_snapshot('snape.dim', 'SELECT * FROM snape.ok', '{id}', valid_at => '2026-01-01',
    check_columns => '{{v}}')$$);
SELECT * FROM snape.err($$SELECT * FROM etl_snapshot('snape.dim', 'SELECT * FROM snape.ok', '{id}', valid_at => '2026-01-01',
    expect => 'count(*) > 1')$$);
SELECT * FROM snape.err($$SELECT * FROM etl_snapshot('snape.dim', 'SELECT * FROM snape.ok', '{id}', valid_at => '2026-01-01',
    current_valid_to => 'soon')$$);
SELECT * FROM snape.err($$SELECT * FROM etl_snapshot('snape.dim', 'SELECT * FROM snape.ok', '{valid_from}', valid_at => '2026-01-01')$$);
SELECT * FROM snape.err($$SELECT * FROM etl_snapshot('snape.dim', 'SELECT * FROM snape.ok', '{id}', valid_at => '2026-01-01',
    run_key => repeat('k', 1025))$$);
CREATE TABLE snape.odd (id int, j json, valid_from json, valid_to json);
SELECT * FROM snape.err($$SELECT * FROM etl_snapshot('snape.odd', 'SELECT 1 AS id', '{id}', valid_at => '2026-01-01')$$);
SELECT * FROM snape.err($$SELECT * FROM etl_snapshot('snape.odd', 'SELECT 1 AS id', '{j}', valid_at => '2026-01-01')$$);
SELECT * FROM snape.err($$SELECT etl_snapshot_ddl('snape.dim', '{nope}')$$);
SELECT * FROM snape.err($$SELECT etl_snapshot_ddl('snape.dim', '{}')$$);
SELECT * FROM snape.err($$SELECT etl_snapshot_ddl(NULL, '{id}')$$);
-- the source
SELECT * FROM snape.err($$SELECT * FROM etl_snapshot('snape.dim', 'SELECT 1 AS id; SELECT 2 AS id', '{id}', valid_at => '2026-01-01')$$);
SELECT * FROM snape.err($$SELECT * FROM etl_snapshot('snape.dim', 'SELECT 1 AS id, 2 AS nope', '{id}', valid_at => '2026-01-01')$$);
SELECT * FROM snape.err($$SELECT * FROM etl_snapshot('snape.dim', 'SELECT 1 AS k2', '{id}', valid_at => '2026-01-01')$$);
SELECT * FROM snape.err($$SELECT * FROM etl_snapshot('snape.dim', 'SELECT 1 AS id', '{id}', updated_at => 't')$$);
SELECT * FROM snape.err($$SELECT * FROM etl_snapshot('snape.dim', 'SELECT 1 AS id, now() AS valid_from', '{id}', valid_at => '2026-01-01')$$);
SELECT * FROM snape.err($$SELECT * FROM etl_snapshot('snape.dim', 'SELECT 1 AS id, true AS del', '{id}', valid_at => '2026-01-01',
    is_deleted_column => 'del')$$);
-- a NULL in a key column: refused, not a new version every run
SELECT * FROM snape.err($$SELECT * FROM etl_snapshot('snape.dim', 'SELECT * FROM (VALUES (1, 1), (2, NULL)) s(id, k2)',
    '{id,k2}', valid_at => '2026-01-01')$$);
-- a NULL updated_at
SELECT * FROM snape.err($$SELECT * FROM etl_snapshot('snape.dim', 'SELECT 1 AS id, NULL::timestamptz AS t', '{id}',
    updated_at => 't', valid_from_column => 'valid_from')$$);
SELECT count(*) AS written FROM snape.dim;

-- targets
CREATE VIEW snape.v AS SELECT * FROM snape.dim;
SELECT * FROM snape.err($$SELECT * FROM etl_snapshot('snape.v', 'SELECT 1 AS id', '{id}', valid_at => '2026-01-01')$$);
CREATE TABLE snape.parted (id int, valid_from timestamptz, valid_to timestamptz) PARTITION BY RANGE (valid_from);
SELECT * FROM snape.err($$SELECT * FROM etl_snapshot('snape.parted', 'SELECT 1 AS id', '{id}', valid_at => '2026-01-01')$$);
BEGIN READ ONLY;
SELECT * FROM snape.err($$SELECT * FROM etl_snapshot('snape.dim', 'SELECT 1 AS id', '{id}', valid_at => '2026-01-01')$$);
ROLLBACK;

-- rights: SECURITY INVOKER, checked before anything is written
SELECT prosecdef FROM pg_proc WHERE proname = 'etl_snapshot';
CREATE ROLE idem_test_snap_user;
GRANT USAGE ON SCHEMA snape TO idem_test_snap_user;
GRANT SELECT ON snape.ok TO idem_test_snap_user;
SET ROLE idem_test_snap_user;
SELECT * FROM snape.err($$SELECT * FROM etl_snapshot('snape.dim', 'SELECT * FROM snape.ok', '{id}', valid_at => '2026-01-01')$$);
RESET ROLE;
GRANT SELECT (id, v), INSERT ON snape.dim TO idem_test_snap_user;
SET ROLE idem_test_snap_user;
SELECT * FROM snape.err($$SELECT * FROM etl_snapshot('snape.dim', 'SELECT * FROM snape.ok', '{id}', valid_at => '2026-01-01')$$);
RESET ROLE;
GRANT SELECT ON snape.dim TO idem_test_snap_user;
SET ROLE idem_test_snap_user;
SELECT * FROM snape.err($$SELECT * FROM etl_snapshot('snape.dim', 'SELECT * FROM snape.ok', '{id}', valid_at => '2026-01-01')$$);
RESET ROLE;
GRANT UPDATE (valid_to) ON snape.dim TO idem_test_snap_user;
SET ROLE idem_test_snap_user;
SELECT inserted FROM etl_snapshot('snape.dim', 'SELECT * FROM snape.ok', '{id}', valid_at => '2026-01-01');
-- replacing the version of a date needs DELETE
SELECT * FROM snape.err($$SELECT * FROM etl_snapshot('snape.dim', 'SELECT 1 AS id, ''b'' AS v', '{id}', valid_at => '2026-01-01')$$);
RESET ROLE;
-- row-level security applying to the caller would hide current versions
ALTER TABLE snape.dim ENABLE ROW LEVEL SECURITY;
CREATE POLICY p ON snape.dim USING (true);
SET ROLE idem_test_snap_user;
SELECT * FROM snape.err($$SELECT * FROM etl_snapshot('snape.dim', 'SELECT * FROM snape.ok', '{id}', valid_at => '2026-01-02')$$);
RESET ROLE;
ALTER TABLE snape.dim DISABLE ROW LEVEL SECURITY;

-- generated SQL is qualified: a caller's operator in its search_path is not used
CREATE FUNCTION snape.trap(int, int) RETURNS boolean LANGUAGE sql AS 'SELECT (SELECT count(*) FROM pg_class) < 0';
CREATE OPERATOR snape.= (LEFTARG = int, RIGHTARG = int, FUNCTION = snape.trap);
SET search_path = snape, public, pg_catalog;
SELECT inserted, closed, unchanged FROM etl_snapshot('snape.dim', 'SELECT 1 AS id, ''a'' AS v', '{id}', valid_at => '2026-01-03');
RESET search_path;

DROP SCHEMA snape CASCADE;
\set roles {idem_test_snap_user}
\i sql/include/drop_roles.sql
