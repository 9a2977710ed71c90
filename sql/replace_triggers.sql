--
-- replace_triggers: a partition replacement swaps a new table in; it
-- inserts and deletes no row through the target, so triggers on INSERT or
-- DELETE would not run.  Where one would fire for an INSERT of the rows
-- into the target or a DELETE of the replaced ones (the partition's row
-- triggers, cloned ones included; for a new partition, the row triggers of
-- the tables it would be cloned from; the target's statement triggers),
-- the call is refused (0A000) before anything is done: a BEFORE trigger
-- that changes rows, or an AFTER trigger that keeps an audit trail, was
-- silently bypassed.  Triggers on UPDATE, disabled ones, and ones that do
-- not fire under session_replication_role are no obstacle; the plain-table
-- path, which deletes and inserts, fires them.
--
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS idem_etl CASCADE;
CREATE EXTENSION idem_etl;
DROP SCHEMA IF EXISTS rtrg CASCADE;
RESET client_min_messages;

CREATE SCHEMA rtrg;
\set schema rtrg
\i sql/include/err.sql

CREATE TABLE rtrg.audit (op text, tbl text, id int);
CREATE FUNCTION rtrg.norm() RETURNS trigger LANGUAGE plpgsql AS
$$BEGIN NEW.v := upper(NEW.v); RETURN NEW; END$$;
CREATE FUNCTION rtrg.aud() RETURNS trigger LANGUAGE plpgsql AS
$$BEGIN
    INSERT INTO rtrg.audit VALUES (TG_OP, TG_TABLE_NAME,
        CASE WHEN TG_LEVEL = 'ROW' THEN coalesce(NEW.id, OLD.id) END);
    RETURN NULL;
END$$;

CREATE TABLE rtrg.ev (d date NOT NULL, id int NOT NULL, v text) PARTITION BY RANGE (d);
CREATE TABLE rtrg.ev_1 PARTITION OF rtrg.ev FOR VALUES FROM ('2026-11-01') TO ('2026-11-02');
INSERT INTO rtrg.ev VALUES ('2026-11-01', 1, 'old');

-- state(): the rows and every table of the schema, to show nothing changed
CREATE FUNCTION rtrg.state() RETURNS text LANGUAGE sql AS $$
    SELECT (SELECT string_agg(c.relname || ':' || c.relfilenode, ' ' ORDER BY c.relname)
              FROM pg_class c WHERE c.relnamespace = 'rtrg'::regnamespace AND c.relkind IN ('r', 'p'))
           || ' | ' || (SELECT string_agg(id || '=' || v, ' ' ORDER BY id) FROM rtrg.ev)
           || ' | ' || (SELECT count(*) FROM rtrg.audit)
           || ' | ' || (SELECT count(*) FROM idem_etl.runs)
$$;
SELECT rtrg.state() AS before \gset

-- a BEFORE row trigger of the parent (cloned to its partitions): every
-- replacement refused, of an existing partition or by creating one
CREATE TRIGGER norm BEFORE INSERT ON rtrg.ev FOR EACH ROW EXECUTE FUNCTION rtrg.norm();
SELECT * FROM rtrg.err($$SELECT * FROM etl_replace_partition('rtrg.ev', '2026-11-01',
    'SELECT ''2026-11-01''::date AS d, 2 AS id, ''new'' AS v')$$);
SELECT * FROM rtrg.err($$SELECT * FROM etl_replace_partitions('rtrg.ev',
    'SELECT ''2026-11-02''::date AS d, 3 AS id, ''new'' AS v', granularity => '1 day')$$);
SELECT * FROM rtrg.err($$SELECT * FROM etl_replace_where('rtrg.ev', 'id >= 1',
    'SELECT ''2026-11-01''::date AS d, 4 AS id, ''new'' AS v')$$);
DROP TRIGGER norm ON rtrg.ev;
-- the partition's own AFTER DELETE row trigger
CREATE TRIGGER aud_del AFTER DELETE ON rtrg.ev_1 FOR EACH ROW EXECUTE FUNCTION rtrg.aud();
SELECT * FROM rtrg.err($$SELECT * FROM etl_replace_partition('rtrg.ev', '2026-11-01',
    'SELECT ''2026-11-01''::date AS d, 2 AS id, ''new'' AS v')$$);
DROP TRIGGER aud_del ON rtrg.ev_1;
-- a statement trigger of the target, enabled ALWAYS
CREATE TRIGGER aud_stmt AFTER INSERT ON rtrg.ev FOR EACH STATEMENT EXECUTE FUNCTION rtrg.aud();
ALTER TABLE rtrg.ev ENABLE ALWAYS TRIGGER aud_stmt;
SELECT * FROM rtrg.err($$SELECT * FROM etl_replace_partition('rtrg.ev', '2026-11-01',
    'SELECT ''2026-11-01''::date AS d, 2 AS id, ''new'' AS v')$$);
DROP TRIGGER aud_stmt ON rtrg.ev;
SELECT rtrg.state() = :'before' AS nothing_changed;

-- no obstacle: a trigger on UPDATE, a disabled one, one that fires only on
-- replicas; the new partition has them all, as they were
CREATE TRIGGER upd BEFORE UPDATE ON rtrg.ev_1 FOR EACH ROW EXECUTE FUNCTION rtrg.norm();
CREATE TRIGGER off AFTER INSERT ON rtrg.ev_1 FOR EACH ROW EXECUTE FUNCTION rtrg.aud();
ALTER TABLE rtrg.ev_1 DISABLE TRIGGER off;
CREATE TRIGGER repl AFTER INSERT ON rtrg.ev_1 FOR EACH ROW EXECUTE FUNCTION rtrg.aud();
ALTER TABLE rtrg.ev_1 ENABLE REPLICA TRIGGER repl;
SELECT rows_loaded FROM etl_replace_partition('rtrg.ev', '2026-11-01',
    $$SELECT '2026-11-01'::date AS d, 2 AS id, 'new' AS v$$);
SELECT tgname, tgenabled FROM pg_trigger WHERE tgrelid = 'rtrg.ev_1'::regclass ORDER BY 1;
DROP TRIGGER upd ON rtrg.ev_1;
DROP TRIGGER off ON rtrg.ev_1;
DROP TRIGGER repl ON rtrg.ev_1;

-- the way to load past a trigger on purpose: disabled for the call, in its
-- transaction (on the parent it is disabled on every partition too)
CREATE TRIGGER aud AFTER INSERT OR DELETE ON rtrg.ev FOR EACH ROW EXECUTE FUNCTION rtrg.aud();
BEGIN;
ALTER TABLE rtrg.ev DISABLE TRIGGER aud;
SELECT rows_loaded FROM etl_replace_partition('rtrg.ev', '2026-11-01',
    $$SELECT '2026-11-01'::date AS d, 3 AS id, 'new' AS v$$);
ALTER TABLE rtrg.ev ENABLE TRIGGER aud;
COMMIT;
SELECT tgrelid::regclass, tgenabled FROM pg_trigger
 WHERE tgname = 'aud' AND tgrelid IN ('rtrg.ev'::regclass, 'rtrg.ev_1'::regclass) ORDER BY 1;
INSERT INTO rtrg.ev VALUES ('2026-11-01', 4, 'insert');
SELECT op, tbl, id FROM rtrg.audit ORDER BY id;
-- a rerun its run_key skips changes nothing, and is not refused
BEGIN;
ALTER TABLE rtrg.ev DISABLE TRIGGER aud;
SELECT rows_loaded, skipped FROM etl_replace_partition('rtrg.ev', '2026-11-01',
    $$SELECT '2026-11-01'::date AS d, 7 AS id, 'keyed' AS v$$, run_key => 'k');
ALTER TABLE rtrg.ev ENABLE TRIGGER aud;
COMMIT;
SELECT rows_loaded, skipped FROM etl_replace_partition('rtrg.ev', '2026-11-01',
    $$SELECT '2026-11-01'::date AS d, 7 AS id, 'keyed' AS v$$, run_key => 'k');

-- a restore swaps rows in and out as a replacement does: refused too
BEGIN;
ALTER TABLE rtrg.ev DISABLE TRIGGER aud;
SELECT rows_loaded FROM etl_replace_partition('rtrg.ev', '2026-11-01',
    $$SELECT '2026-11-01'::date AS d, 6 AS id, 'kept' AS v$$, keep_replaced => '1 day');
ALTER TABLE rtrg.ev ENABLE TRIGGER aud;
COMMIT;
SELECT * FROM rtrg.err($$SELECT etl_restore_partition('rtrg.ev', '2026-11-01')$$);
SELECT id, v FROM rtrg.ev ORDER BY id;

-- a plain table is replaced by DELETE and INSERT: its triggers fire
CREATE TABLE rtrg.pl (d date NOT NULL, id int NOT NULL, v text);
INSERT INTO rtrg.pl VALUES ('2026-11-01', 1, 'old');
CREATE TRIGGER norm BEFORE INSERT ON rtrg.pl FOR EACH ROW EXECUTE FUNCTION rtrg.norm();
CREATE TRIGGER aud AFTER INSERT OR DELETE ON rtrg.pl FOR EACH ROW EXECUTE FUNCTION rtrg.aud();
SELECT rows_loaded, rows_replaced FROM etl_replace_partition('rtrg.pl', '2026-11-01',
    $$SELECT '2026-11-01'::date AS d, 5 AS id, 'plain' AS v$$, partition_column => 'd');
SELECT id, v FROM rtrg.pl;
SELECT op, tbl, id FROM rtrg.audit WHERE tbl = 'pl' ORDER BY op, id;

SET client_min_messages = warning;
DROP SCHEMA rtrg CASCADE;
DROP EXTENSION idem_etl;
RESET client_min_messages;
