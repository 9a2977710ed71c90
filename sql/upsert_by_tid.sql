--
-- upsert_by_tid: stored rows updated through the tuple identifier the probe
-- found (issue 11, item 3).  On a plain table without triggers or rules of
-- its own and without row security applying to the caller, a batch of 100
-- keys or more updates the rows the probe found by their ctid (and inserts
-- the absent ones with a plain INSERT, see upsert_concurrent_writers.spec
-- for a key inserted meanwhile): the key
-- index is descended once per row (the probe), where INSERT ... ON CONFLICT
-- descends it again and locks the row first.  Elsewhere the rows go through
-- ON CONFLICT, whose BEFORE INSERT triggers and INSERT policies apply to
-- updated rows too, and which refuses tables with rules: those keep working
-- as before.
--
-- The index descents of a call are counted with pg_stat_get_xact_numscans,
-- before and after it (tid.run): one per probe, one per ON CONFLICT check.
--
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS idem_etl CASCADE;
CREATE EXTENSION idem_etl;
DROP SCHEMA IF EXISTS tid CASCADE;
\set roles {idem_test_tid_rls}
\i sql/include/drop_roles.sql
RESET client_min_messages;

CREATE SCHEMA tid;
\set schema tid
\i sql/include/err.sql

-- an etl_upsert_batch call's counts, and the descents of idx it made
CREATE FUNCTION tid.run(idx regclass, call text)
    RETURNS TABLE (inserted bigint, updated bigint, unchanged bigint, index_scans bigint)
    LANGUAGE plpgsql AS $$
DECLARE s0 bigint := pg_stat_get_xact_numscans(idx);
BEGIN
    EXECUTE 'SELECT inserted, updated, unchanged FROM ' || call INTO inserted, updated, unchanged;
    index_scans := pg_stat_get_xact_numscans(idx) - s0;
    RETURN NEXT;
END $$;
CREATE FUNCTION tid.summary(t text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE r text;
BEGIN
    EXECUTE format('SELECT string_agg(v || '':'' || n, '' '' ORDER BY v)'
                   ' FROM (SELECT v, count(*) AS n FROM %s GROUP BY v) s', t) INTO r;
    RETURN r;
END $$;

CREATE TABLE tid.t (id int PRIMARY KEY, v text, n int);
\set idx tid.t_pkey
INSERT INTO tid.t SELECT g, 'old', 0 FROM generate_series(1, 300) AS g;

-- 300 keys: 200 stored (updated by ctid), 100 absent (a plain INSERT, under
-- a savepoint): 300 probes and no second check
SELECT * FROM tid.run(:'idx', $$etl_upsert_batch('tid.t', 'SELECT g AS id, ''new'' AS v, 1 AS n FROM generate_series(101, 400) AS g')$$);
SELECT tid.summary('tid.t');

-- the same batch again: nothing changed, nothing written (300 probes)
SELECT * FROM tid.run(:'idx', $$etl_upsert_batch('tid.t', 'SELECT g AS id, ''new'' AS v, 1 AS n FROM generate_series(101, 400) AS g')$$);

-- 99 keys: one INSERT ... ON CONFLICT, the stored rows checked again (198)
SELECT * FROM tid.run(:'idx', $$etl_upsert_batch('tid.t', 'SELECT g AS id, ''small'' AS v, 2 AS n FROM generate_series(1, 99) AS g')$$);

-- newer_column: the rule holds on the updates by ctid
SELECT * FROM tid.run(:'idx', $$etl_upsert_batch('tid.t', 'SELECT g AS id, ''newer'' AS v, CASE WHEN g % 2 = 0 THEN 5 ELSE 0 END AS n FROM generate_series(1, 200) AS g',
                        newer_column => 'n')$$);
SELECT tid.summary('tid.t');

-- update_columns: only those are set and compared
SELECT inserted, updated, unchanged
  FROM etl_upsert_batch('tid.t', 'SELECT g AS id, ''cols'' AS v, 9 AS n FROM generate_series(1, 150) AS g',
                        update_columns => ARRAY['n']);
SELECT count(*) FILTER (WHERE n = 9) AS n_set, count(*) FILTER (WHERE v = 'cols') AS v_set
  FROM tid.t WHERE id <= 150;

--
-- a BEFORE INSERT trigger: ON CONFLICT fires it for the rows it updates too,
-- so they go through ON CONFLICT, and the trigger's value is stored
--
CREATE TABLE tid.trig (id int PRIMARY KEY, v text, n int);
\set idx tid.trig_pkey
INSERT INTO tid.trig SELECT g, 'old', 0 FROM generate_series(1, 150) AS g;
CREATE FUNCTION tid.lower_v() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN NEW.v := lower(NEW.v); RETURN NEW; END $$;
CREATE TRIGGER lower_v BEFORE INSERT ON tid.trig FOR EACH ROW EXECUTE FUNCTION tid.lower_v();
SELECT * FROM tid.run(:'idx', $$etl_upsert_batch('tid.trig', 'SELECT g AS id, ''UPPER'' AS v, 1 AS n FROM generate_series(1, 150) AS g')$$);
SELECT tid.summary('tid.trig');

--
-- a BEFORE INSERT trigger that skips rows (returns NULL): the counts are the
-- rows written.  Of 50 stored keys and 150 absent ones, the trigger lets
-- only the even ones through: 25 updated, 75 inserted, the other 100 left
-- alone (the plain INSERT of the absent rows is counted by the rows it
-- returns, not by the absent keys of the batch)
--
CREATE TABLE tid.skip (id int PRIMARY KEY, v text);
INSERT INTO tid.skip SELECT g, 'old' FROM generate_series(1, 50) AS g;
CREATE FUNCTION tid.skip_odd() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN IF NEW.id % 2 = 1 THEN RETURN NULL; END IF; RETURN NEW; END $$;
CREATE TRIGGER skip_odd BEFORE INSERT ON tid.skip FOR EACH ROW EXECUTE FUNCTION tid.skip_odd();
SELECT inserted, updated, unchanged
  FROM etl_upsert_batch('tid.skip', 'SELECT g AS id, ''new'' AS v FROM generate_series(1, 200) AS g');
SELECT tid.summary('tid.skip'), count(*) AS total FROM tid.skip;

--
-- statement-level triggers with transition tables: the merge's statements
-- are one query, whose statements writing the same table share their
-- transition tables and fire each statement trigger once.  So a batch of
-- 99 keys (one INSERT ... ON CONFLICT) and one of 150 (a plain INSERT of
-- the absent rows beside the ON CONFLICT of the stored ones) both fire the
-- INSERT and the UPDATE trigger once, each seeing every row the call
-- inserted or updated
--
CREATE TABLE tid.stmt (id int PRIMARY KEY, v text);
CREATE TABLE tid.stmt_log (call text, op text, n bigint);
INSERT INTO tid.stmt SELECT g, 'old' FROM generate_series(1, 100) AS g;
CREATE FUNCTION tid.log_stmt() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO tid.stmt_log SELECT current_setting('tid.call'), TG_OP, count(*) FROM changed;
    RETURN NULL;
END $$;
CREATE TRIGGER log_ins AFTER INSERT ON tid.stmt REFERENCING NEW TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION tid.log_stmt();
CREATE TRIGGER log_upd AFTER UPDATE ON tid.stmt REFERENCING NEW TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION tid.log_stmt();
SET tid.call = '99 keys';
SELECT inserted, updated, unchanged
  FROM etl_upsert_batch('tid.stmt', 'SELECT g AS id, ''a'' AS v FROM generate_series(51, 149) AS g');
SET tid.call = '150 keys';
SELECT inserted, updated, unchanged
  FROM etl_upsert_batch('tid.stmt', 'SELECT g AS id, ''b'' AS v FROM generate_series(101, 250) AS g');
RESET tid.call;
SELECT * FROM tid.stmt_log ORDER BY call DESC, op;

--
-- rules: ON CONFLICT refuses a table with rules (0A000), whatever the batch
--
CREATE TABLE tid.ruled (id int PRIMARY KEY, v text);
CREATE TABLE tid.ruled_log (id int, v text);
INSERT INTO tid.ruled SELECT g, 'old' FROM generate_series(1, 150) AS g;
CREATE RULE log_update AS ON UPDATE TO tid.ruled DO ALSO INSERT INTO tid.ruled_log VALUES (NEW.id, NEW.v);
SELECT * FROM tid.err($$SELECT * FROM etl_upsert_batch('tid.ruled',
    'SELECT g AS id, ''new'' AS v FROM generate_series(1, 150) AS g')$$);
SELECT tid.summary('tid.ruled'), (SELECT count(*) FROM tid.ruled_log) AS logged;

--
-- row security: ON CONFLICT checks the INSERT policies on the rows it
-- updates too; so does a batch of 100 keys or more
--
CREATE TABLE tid.rls (id int PRIMARY KEY, v text, n int);
INSERT INTO tid.rls SELECT g, 'old', 0 FROM generate_series(1, 150) AS g;
CREATE ROLE idem_test_tid_rls;
GRANT USAGE ON SCHEMA tid TO idem_test_tid_rls;
GRANT SELECT, INSERT, UPDATE ON tid.rls TO idem_test_tid_rls;
ALTER TABLE tid.rls ENABLE ROW LEVEL SECURITY;
CREATE POLICY sel ON tid.rls FOR SELECT USING (true);
CREATE POLICY upd ON tid.rls FOR UPDATE USING (true) WITH CHECK (true);
CREATE POLICY ins ON tid.rls FOR INSERT WITH CHECK (v <> 'forbidden');
SET ROLE idem_test_tid_rls;
SELECT * FROM tid.err($$SELECT * FROM etl_upsert_batch('tid.rls',
    'SELECT g AS id, ''forbidden'' AS v, 1 AS n FROM generate_series(1, 150) AS g')$$);
SELECT inserted, updated, unchanged
  FROM etl_upsert_batch('tid.rls', 'SELECT g AS id, ''allowed'' AS v, 1 AS n FROM generate_series(1, 150) AS g');
RESET ROLE;
SELECT tid.summary('tid.rls');

--
-- a partitioned target and an inheritance parent
--
CREATE TABLE tid.parted (id int PRIMARY KEY, v text) PARTITION BY RANGE (id);
CREATE TABLE tid.parted_1 PARTITION OF tid.parted FOR VALUES FROM (1) TO (1000);
INSERT INTO tid.parted SELECT g, 'old' FROM generate_series(1, 150) AS g;
SELECT inserted, updated, unchanged
  FROM etl_upsert_batch('tid.parted', 'SELECT g AS id, ''new'' AS v FROM generate_series(51, 250) AS g');
SELECT tid.summary('tid.parted');
CREATE TABLE tid.parent (id int PRIMARY KEY, v text);
CREATE TABLE tid.child (id int PRIMARY KEY, v text) INHERITS (tid.parent);
INSERT INTO tid.parent SELECT g, 'old' FROM generate_series(1, 150) AS g;
INSERT INTO tid.child VALUES (1000, 'child');
SELECT inserted, updated, unchanged
  FROM etl_upsert_batch('tid.parent', 'SELECT g AS id, ''new'' AS v FROM generate_series(1, 200) AS g');
SELECT tid.summary('ONLY tid.parent'), tid.summary('tid.child');

-- a unique violation that is not a key inserted meanwhile (here, of another
-- unique index) fails the call at once: the batch is tried once, not
-- twice (any 23505 of the plain INSERT made the whole merge run again with
-- ON CONFLICT, and its triggers fire again); a trigger counts the rows tried
CREATE TABLE tid.uv (id int PRIMARY KEY, v text UNIQUE);
INSERT INTO tid.uv VALUES (0, 'taken');
CREATE SEQUENCE tid.uv_tried;
CREATE FUNCTION tid.count_tried() RETURNS trigger LANGUAGE plpgsql AS
    $$BEGIN PERFORM nextval('tid.uv_tried'); RETURN NEW; END$$;
CREATE TRIGGER count_tried BEFORE INSERT ON tid.uv FOR EACH ROW EXECUTE FUNCTION tid.count_tried();
SELECT * FROM tid.err($$SELECT * FROM etl_upsert_batch('tid.uv',
    'SELECT g AS id, CASE WHEN g = 150 THEN ''taken'' ELSE ''v'' || g END AS v FROM generate_series(1, 150) AS g')$$);
SELECT last_value AS rows_tried FROM tid.uv_tried;
SELECT count(*) AS rows_kept FROM tid.uv;

DROP SCHEMA tid CASCADE;
\set roles {idem_test_tid_rls}
\i sql/include/drop_roles.sql
