--
-- security_etl_role: the role layout of the README's recipe "An ETL role".
-- Table privileges are enough for etl_upsert_batch, not for a partition
-- swap: etl_replace_partition needs the privileges of the partitioned
-- table's owner (ATTACH and DETACH PARTITION are the owner's), 42501
-- otherwise, and MAINTAIN (PostgreSQL 17 and later) does not replace them.
-- What works: an owner role that cannot log in owns the tables, and the
-- login role the loads run as is a member of it (INHERIT, the default; with
-- NOINHERIT it must SET ROLE to the owner first).  The output is the same
-- on every major: MAINTAIN is granted, and checked, on 17 and later only.
--
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS idem_etl CASCADE;
CREATE EXTENSION idem_etl;
DROP SCHEMA IF EXISTS etlrole CASCADE;
\set roles {idem_test_loader,idem_test_etl,idem_test_etl_noinherit,idem_test_etl_owner}
\i sql/include/drop_roles.sql
RESET client_min_messages;

CREATE SCHEMA etlrole;
GRANT USAGE ON SCHEMA etlrole TO PUBLIC;
\set schema etlrole
\i sql/include/err.sql
-- the SQLSTATE of a statement, or 'no error'
CREATE FUNCTION etlrole.state(stmt text) RETURNS text LANGUAGE sql
AS $$SELECT e FROM etlrole.err(stmt) e WHERE e LIKE 'SQLSTATE%' OR e = 'no error'$$;
GRANT EXECUTE ON FUNCTION etlrole.err(text), etlrole.state(text) TO PUBLIC;

CREATE TABLE etlrole.daily_sales (sale_id bigint PRIMARY KEY, sale_date date NOT NULL, amount numeric(10,2));
CREATE TABLE etlrole.events (event_date date NOT NULL, id bigint NOT NULL, payload text,
                             PRIMARY KEY (event_date, id)) PARTITION BY RANGE (event_date);
CREATE TABLE etlrole.events_20261127 PARTITION OF etlrole.events FOR VALUES FROM ('2026-11-27') TO ('2026-11-28');
CREATE TABLE etlrole.events_20261128 PARTITION OF etlrole.events FOR VALUES FROM ('2026-11-28') TO ('2026-11-29');
INSERT INTO etlrole.events SELECT d, g, 'old' FROM generate_series('2026-11-27'::date, '2026-11-28', '1 day') d,
                                                  generate_series(1, 4) g;
CREATE TABLE etlrole.staging (LIKE etlrole.events);
INSERT INTO etlrole.staging SELECT d, g, 'new' FROM generate_series('2026-11-27'::date, '2026-11-29', '1 day') d,
                                                     generate_series(1, 3) g;

--
-- Table privileges only: the upsert works, the swap is refused with 42501
-- before anything is locked or written
--
CREATE ROLE idem_test_loader;
GRANT SELECT, INSERT, UPDATE, DELETE ON etlrole.daily_sales, etlrole.events TO idem_test_loader;
GRANT SELECT ON etlrole.staging TO idem_test_loader;
SET ROLE idem_test_loader;
SELECT inserted, updated, skipped FROM etl_upsert_batch('etlrole.daily_sales',
    $$SELECT 1 AS sale_id, date '2026-11-28' AS sale_date, 9.99 AS amount$$, run_key => 'privileges');
SELECT etlrole.state($$SELECT * FROM etl_replace_partition('etlrole.events', '2026-11-28',
    'SELECT * FROM etlrole.staging WHERE event_date = ''2026-11-28''')$$) AS replace_with_table_privileges;
RESET ROLE;

--
-- MAINTAIN (17 and later) on top: still 42501, and so is a plain DETACH
-- PARTITION by that role; nothing was swapped
--
DO $$
BEGIN
    IF current_setting('server_version_num')::int >= 170000 THEN
        EXECUTE 'GRANT MAINTAIN ON etlrole.events TO idem_test_loader';
    END IF;
END $$;
SELECT CASE WHEN current_setting('server_version_num')::int >= 170000
            THEN has_table_privilege('idem_test_loader', 'etlrole.events', 'MAINTAIN')
            ELSE true END AS maintain_granted_on_17_and_later;
SET ROLE idem_test_loader;
SELECT etlrole.state($$SELECT * FROM etl_replace_partition('etlrole.events', '2026-11-28',
    'SELECT * FROM etlrole.staging WHERE event_date = ''2026-11-28''')$$) AS replace_with_maintain;
SELECT etlrole.state($$SELECT * FROM etl_replace_partitions('etlrole.events',
    'SELECT * FROM etlrole.staging WHERE event_date = ''2026-11-28''')$$) AS replace_partitions_with_maintain;
SELECT etlrole.state($$ALTER TABLE etlrole.events DETACH PARTITION etlrole.events_20261127$$) AS detach_with_maintain;
RESET ROLE;
SELECT payload, count(*) FROM etlrole.events GROUP BY payload;
SELECT count(*) AS runs_recorded FROM idem_etl.runs WHERE operation <> 'upsert';

--
-- The layout that works: idem_test_etl_owner (NOLOGIN) owns the tables and
-- may create in the schema (load tables, new partitions) and read the
-- sources; idem_test_etl, the role the loads log in as, is a member of it
-- and inherits its rights.  A partition created by a call belongs to the
-- role that made the call.
--
CREATE ROLE idem_test_etl_owner NOLOGIN;
GRANT CREATE ON SCHEMA etlrole TO idem_test_etl_owner;
GRANT SELECT ON etlrole.staging TO idem_test_etl_owner;
ALTER TABLE etlrole.daily_sales OWNER TO idem_test_etl_owner;
ALTER TABLE etlrole.events OWNER TO idem_test_etl_owner;
ALTER TABLE etlrole.events_20261127 OWNER TO idem_test_etl_owner;
ALTER TABLE etlrole.events_20261128 OWNER TO idem_test_etl_owner;
CREATE ROLE idem_test_etl LOGIN IN ROLE idem_test_etl_owner;
SET ROLE idem_test_etl;
SELECT inserted, updated, skipped FROM etl_upsert_batch('etlrole.daily_sales',
    $$SELECT 2 AS sale_id, date '2026-11-28' AS sale_date, 1.00 AS amount$$, run_key => 'member');
-- an existing partition, then a missing one (created), then a rerun
SELECT partition_table, rows_loaded, rows_replaced, skipped FROM etl_replace_partition('etlrole.events', '2026-11-28',
    'SELECT * FROM etlrole.staging WHERE event_date = ''2026-11-28''', run_key => '2026-11-28');
SELECT partition_table, rows_loaded, rows_replaced, skipped FROM etl_replace_partition('etlrole.events', '2026-11-29',
    'SELECT * FROM etlrole.staging WHERE event_date = ''2026-11-29''', run_key => '2026-11-29');
SET client_min_messages = warning;
SELECT partition_table, rows_loaded, rows_replaced, skipped FROM etl_replace_partition('etlrole.events', '2026-11-28',
    'SELECT * FROM etlrole.staging WHERE event_date = ''2026-11-28''', run_key => '2026-11-28');
RESET client_min_messages;
RESET ROLE;
-- the partitions, their owner, and who ran the loads
SELECT c.relname, pg_get_userbyid(c.relowner) AS owner
  FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
 WHERE i.inhparent = 'etlrole.events'::regclass ORDER BY 1;
SELECT operation, partition_value, skipped, run_by FROM idem_etl.runs
 WHERE run_by = 'idem_test_etl' ORDER BY run_id;

--
-- A member with NOINHERIT has the owner's rights only after SET ROLE
--
CREATE ROLE idem_test_etl_noinherit LOGIN NOINHERIT IN ROLE idem_test_etl_owner;
SET ROLE idem_test_etl_noinherit;
SELECT etlrole.state($$SELECT * FROM etl_replace_partition('etlrole.events', '2026-11-27',
    'SELECT * FROM etlrole.staging WHERE event_date = ''2026-11-27''')$$) AS replace_without_set_role;
SET ROLE idem_test_etl_owner;
SELECT etlrole.state($$SELECT * FROM etl_replace_partition('etlrole.events', '2026-11-27',
    'SELECT * FROM etlrole.staging WHERE event_date = ''2026-11-27''')$$) AS replace_after_set_role;
RESET ROLE;
SELECT event_date, payload, count(*) FROM etlrole.events GROUP BY 1, 2 ORDER BY 1;

SET client_min_messages = warning;
DROP SCHEMA etlrole CASCADE;
\i sql/include/drop_roles.sql
