--
-- upsert_plan_cache: the merge of a small batch runs through a plan kept for
-- the session.  The kept plan follows the target's changes (new and retyped
-- columns), is checked against the privileges of whoever calls (another
-- role of the same session), follows row security and search_path, and a
-- nested call with its own staged batch gets a relation of its own.
--
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS idem_etl CASCADE;
CREATE EXTENSION idem_etl;
DROP SCHEMA IF EXISTS pc, pc2 CASCADE;
\set roles {idem_test_pc_writer,idem_test_pc_reader}
\i sql/include/drop_roles.sql
RESET client_min_messages;
CREATE SCHEMA pc;
\set schema pc
\i sql/include/err.sql

CREATE TABLE pc.t (id int PRIMARY KEY, v text);
SELECT inserted, updated, unchanged FROM etl_upsert_batch('pc.t', 'SELECT 1 AS id, ''a'' AS v');
SELECT inserted, updated, unchanged FROM etl_upsert_batch('pc.t', 'SELECT 1 AS id, ''b'' AS v');

-- the column changes type: the kept plan is made again, values are cast to the new type
ALTER TABLE pc.t ALTER COLUMN v TYPE int USING length(v);
SELECT inserted, updated, unchanged FROM etl_upsert_batch('pc.t', 'SELECT 1 AS id, 7 AS v');
SELECT * FROM pc.t;
-- a column is added and dropped: same text, new plan
ALTER TABLE pc.t ADD COLUMN w text;
SELECT inserted, updated, unchanged FROM etl_upsert_batch('pc.t', 'SELECT 1 AS id, 7 AS v');
ALTER TABLE pc.t DROP COLUMN w;
SELECT inserted, updated, unchanged FROM etl_upsert_batch('pc.t', 'SELECT 2 AS id, 8 AS v');
SELECT * FROM pc.t ORDER BY id;

-- privileges: the plan the owner's calls kept does not let a reader write
CREATE ROLE idem_test_pc_writer;
CREATE ROLE idem_test_pc_reader;
GRANT USAGE ON SCHEMA pc TO idem_test_pc_writer, idem_test_pc_reader;
GRANT SELECT, INSERT, UPDATE ON pc.t TO idem_test_pc_writer;
GRANT SELECT ON pc.t TO idem_test_pc_reader;
SET ROLE idem_test_pc_writer;
SELECT inserted, updated, unchanged FROM etl_upsert_batch('pc.t', 'SELECT 2 AS id, 9 AS v');
SET ROLE idem_test_pc_reader;
SELECT * FROM pc.err($$SELECT * FROM etl_upsert_batch('pc.t', 'SELECT 2 AS id, 10 AS v')$$);
RESET ROLE;

-- row security: the writer's kept plan does not let it update rows its policy hides
ALTER TABLE pc.t ENABLE ROW LEVEL SECURITY;
CREATE POLICY mine ON pc.t TO idem_test_pc_writer USING (id = 2) WITH CHECK (id = 2);
SET ROLE idem_test_pc_writer;
SELECT inserted, updated, unchanged FROM etl_upsert_batch('pc.t', 'SELECT 2 AS id, 11 AS v');
SELECT * FROM pc.err($$SELECT * FROM etl_upsert_batch('pc.t', 'SELECT 1 AS id, 11 AS v')$$);
RESET ROLE;
ALTER TABLE pc.t DISABLE ROW LEVEL SECURITY;
SELECT * FROM pc.t ORDER BY id;

-- search_path: the same text names the target the caller's search_path finds
CREATE SCHEMA pc2;
CREATE TABLE pc2.t (id int PRIMARY KEY, v int);
SET search_path = pc, public;
SELECT inserted, updated, unchanged FROM etl_upsert_batch('t', 'SELECT 3 AS id, 1 AS v');
SET search_path = pc2, public;
SELECT inserted, updated, unchanged FROM etl_upsert_batch('t', 'SELECT 3 AS id, 1 AS v');
RESET search_path;
SELECT 'pc' AS s, * FROM pc.t WHERE id = 3 UNION ALL SELECT 'pc2', * FROM pc2.t;

-- a source that calls etl_upsert_batch itself: each call stages its own batch
CREATE FUNCTION pc.inner_load() RETURNS SETOF int LANGUAGE sql AS $$
    SELECT inserted::int FROM etl_upsert_batch('pc2.t', 'SELECT 4 AS id, 4 AS v');
$$;
SELECT inserted, updated, unchanged FROM etl_upsert_batch('pc.t', 'SELECT 5 AS id, pc.inner_load() AS v');
SELECT 'pc' AS s, * FROM pc.t WHERE id = 5 UNION ALL SELECT 'pc2', * FROM pc2.t WHERE id = 4;

-- a trigger on the target loads 40 other tables while the outer merge runs
-- through its kept plan: more statements than the cache keeps (32); the
-- running plan is not dropped under the outer call
DO $$ BEGIN FOR i IN 1..40 LOOP EXECUTE format('CREATE TABLE pc.c%s (id int PRIMARY KEY)', i); END LOOP; END $$;
CREATE TABLE pc.outer_t (id int PRIMARY KEY, v int);
CREATE FUNCTION pc.fill_cache() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    FOR i IN 1..40 LOOP
        PERFORM etl_upsert_batch(format('pc.c%s', i)::regclass, 'SELECT 1 AS id');
    END LOOP;
    RETURN NEW;
END
$$;
CREATE TRIGGER fill BEFORE INSERT ON pc.outer_t FOR EACH ROW EXECUTE FUNCTION pc.fill_cache();
SELECT inserted, updated, unchanged FROM etl_upsert_batch('pc.outer_t', 'SELECT 1 AS id, 1 AS v');
SELECT inserted, updated, unchanged FROM etl_upsert_batch('pc.outer_t', 'SELECT 2 AS id, 2 AS v');
SELECT (SELECT count(*) FROM pc.outer_t) AS outer_rows,
       (SELECT sum((xpath('/row/count/text()', query_to_xml(format('SELECT count(*) FROM pc.c%s', i), false, true, '')))[1]::text::int)
          FROM generate_series(1, 40) i) AS inner_rows;

SET client_min_messages = warning;
DROP SCHEMA pc, pc2 CASCADE;
\i sql/include/drop_roles.sql
RESET client_min_messages;
