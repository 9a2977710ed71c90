--
-- upsert_ledger: point 9 of etl_upsert_batch (the ledger, run_key).
-- Every committed call adds a row to idem_etl.runs; with run_key, an
-- identical batch is skipped (NOTICE, skipped = t, unchanged = batch rows,
-- recorded), a different one is applied as a correction (NOTICE naming the
-- earlier run).  The fingerprint is order-independent and covers the rows
-- and the options.  run_history is newest first.  Ordinary roles read the
-- ledger but cannot write it (42501).
--
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS idem_etl CASCADE;
CREATE EXTENSION idem_etl;
DROP SCHEMA IF EXISTS ledger CASCADE;
\set roles {idem_test_ledger_reader}
\i sql/include/drop_roles.sql
RESET client_min_messages;

CREATE SCHEMA ledger;

\set schema ledger
\i sql/include/err.sql

-- the ledger has (at least) these columns
SELECT r.column_name, c.data_type
  FROM unnest(ARRAY['run_id', 'operation', 'target', 'run_key', 'fingerprint', 'batch_rows',
                    'inserted', 'updated', 'unchanged', 'deleted', 'skipped', 'corrects',
                    'started_at', 'finished_at', 'run_by']) WITH ORDINALITY AS r(column_name, n)
  LEFT JOIN information_schema.columns c
         ON c.table_schema = 'idem_etl' AND c.table_name = 'runs' AND c.column_name = r.column_name
 ORDER BY r.n;

CREATE TABLE ledger.t (id int PRIMARY KEY, code text NOT NULL UNIQUE, v text, version int);
CREATE TABLE ledger.b (id int, code text, v text, version int);
INSERT INTO ledger.b VALUES (1, 'A', 'one', 1), (2, 'B', 'two', 1), (3, 'C', 'three', 1);

-- results of every call, to refer to run_ids without printing them
CREATE TABLE ledger.calls (step text PRIMARY KEY, run_id bigint, inserted bigint, updated bigint,
                           unchanged bigint, deleted bigint, skipped boolean);
CREATE FUNCTION ledger.call(step text, source text, key_columns text[] DEFAULT NULL,
                            order_by text DEFAULT NULL, newer_column text DEFAULT NULL,
                            delete_missing text DEFAULT NULL, run_key text DEFAULT NULL,
                            target regclass DEFAULT 'ledger.t')
RETURNS TABLE (inserted bigint, updated bigint, unchanged bigint, deleted bigint, skipped boolean)
LANGUAGE sql AS $$
    INSERT INTO ledger.calls
    SELECT step, u.* FROM etl_upsert_batch(target, source, key_columns, order_by, newer_column,
                                           delete_missing, run_key) u
    RETURNING inserted, updated, unchanged, deleted, skipped;
$$;
-- the ledger row of a step (run_id as returned by the call)
CREATE VIEW ledger.rows AS
SELECT c.step, r.operation, r.target, r.run_key, r.batch_rows, r.inserted, r.updated, r.unchanged,
       r.deleted, r.skipped, r.corrects IS NOT NULL AS corrects,
       r.run_by = current_user AS run_by_me,
       r.started_at <= r.finished_at AND r.finished_at <= clock_timestamp() AS times_ok
  FROM ledger.calls c JOIN idem_etl.runs r USING (run_id);
CREATE FUNCTION ledger.fp(step text) RETURNS text LANGUAGE sql AS $$
    SELECT r.fingerprint FROM ledger.calls c JOIN idem_etl.runs r USING (run_id) WHERE c.step = $1;
$$;
CREATE FUNCTION ledger.run(step text) RETURNS bigint LANGUAGE sql AS $$
    SELECT run_id FROM ledger.calls c WHERE c.step = $1;
$$;

--
-- a plain call without run_key: one ledger row, returned run_id is its run_id
--
SELECT * FROM ledger.call('plain', 'TABLE ledger.b');
SELECT * FROM ledger.rows WHERE step = 'plain';
-- no fingerprint is taken without run_key: nothing would compare it
SELECT fingerprint AS no_fingerprint, target_oid = 'ledger.t'::regclass AS target_oid_ok
  FROM idem_etl.runs WHERE run_id = ledger.run('plain');
-- without run_key an identical call is applied again (not skipped) and recorded
SELECT * FROM ledger.call('plain again', 'TABLE ledger.b');
SELECT ledger.run('plain again') > ledger.run('plain') AS newer_run_id;
SELECT count(*) FROM idem_etl.runs;

--
-- run_key: an identical batch is skipped, says so, and is recorded
--
SELECT * FROM ledger.call('day1', 'TABLE ledger.b', run_key => '2024-06-01');
CREATE TABLE ledger.versions AS SELECT id, xmin::text AS xm, ctid::text AS ct FROM ledger.t;
SELECT * FROM ledger.call('day1 rerun', 'TABLE ledger.b', run_key => '2024-06-01');
-- the same rows in another order: the fingerprint does not change, so skipped too
SELECT * FROM ledger.call('day1 reordered', 'SELECT * FROM ledger.b ORDER BY id DESC', run_key => '2024-06-01');
SELECT step, run_key, batch_rows, inserted, updated, unchanged, deleted, skipped, corrects, run_by_me, times_ok
  FROM ledger.rows WHERE step LIKE 'day1%' ORDER BY step;
SELECT ledger.fp('day1') ~ '^[0-9a-f]{32}$' AS has_fingerprint,
       ledger.fp('day1 rerun') = ledger.fp('day1') AS rerun_same_fp,
       ledger.fp('day1 reordered') = ledger.fp('day1') AS reordered_same_fp;
-- the skipped calls wrote nothing to the target
SELECT count(*) AS rewritten FROM ledger.t t JOIN ledger.versions v USING (id)
 WHERE t.xmin::text <> v.xm OR t.ctid::text <> v.ct;

-- a different batch under the same run_key is applied in full (a correction),
-- with a NOTICE naming the earlier run
UPDATE ledger.b SET v = 'two, corrected' WHERE id = 2;
INSERT INTO ledger.b VALUES (4, 'D', 'four', 1);
SELECT * FROM ledger.call('day1 correction', 'TABLE ledger.b', run_key => '2024-06-01');
SELECT step, batch_rows, inserted, updated, unchanged, skipped, corrects FROM ledger.rows
 WHERE step = 'day1 correction';
-- it names the last run for the run_key that applied rows (not the skips after it)
SELECT corrects = ledger.run('day1') AS corrects_last_applied_run
  FROM idem_etl.runs WHERE run_id = ledger.run('day1 correction');
-- its rerun is skipped
SELECT * FROM ledger.call('day1 correction rerun', 'TABLE ledger.b', run_key => '2024-06-01');
-- going back to the original batch is again a correction (the latest run decides)
DELETE FROM ledger.b WHERE id = 4;
UPDATE ledger.b SET v = 'two' WHERE id = 2;
SELECT * FROM ledger.call('day1 back', 'TABLE ledger.b', run_key => '2024-06-01');
SELECT ledger.fp('day1 back') = ledger.fp('day1') AS back_to_day1_fp;

-- another run_key, or the same run_key on another target, is independent
SELECT * FROM ledger.call('day2', 'TABLE ledger.b', run_key => '2024-06-02');
CREATE TABLE ledger.t2 (LIKE ledger.t INCLUDING ALL);
SELECT * FROM ledger.call('day1 on t2', 'TABLE ledger.b', run_key => '2024-06-01', target => 'ledger.t2');
SELECT step, target, run_key, inserted, unchanged, skipped FROM ledger.rows
 WHERE step IN ('day2', 'day1 on t2') ORDER BY step;

--
-- the fingerprint covers the rows and the options (each call with a run_key
-- of its own: a first run, applied, its fingerprint taken)
--
SELECT * FROM ledger.call('fp base', 'SELECT id, code, v, version FROM ledger.b', run_key => 'fp base');
SELECT * FROM ledger.call('fp value', $$SELECT id, code, CASE WHEN id = 3 THEN 'x' ELSE v END AS v, version FROM ledger.b$$, run_key => 'fp value');
SELECT * FROM ledger.call('fp base 2', 'SELECT id, code, v, version FROM ledger.b', run_key => 'fp base 2');
SELECT * FROM ledger.call('fp key_columns', 'SELECT id, code, v, version FROM ledger.b', key_columns => ARRAY['code'], run_key => 'fp key_columns');
SELECT * FROM ledger.call('fp order_by', 'SELECT id, code, v, version FROM ledger.b', order_by => 'version DESC', run_key => 'fp order_by');
SELECT * FROM ledger.call('fp newer_column', 'SELECT id, code, v, version FROM ledger.b', newer_column => 'version', run_key => 'fp newer_column');
SELECT * FROM ledger.call('fp delete_missing', 'SELECT id, code, v, version FROM ledger.b', delete_missing => 'id > 100', run_key => 'fp delete_missing');
SELECT * FROM ledger.call('fp delete_missing 2', 'SELECT id, code, v, version FROM ledger.b', delete_missing => 'id > 101', run_key => 'fp delete_missing 2');
SELECT * FROM ledger.call('fp fewer rows', 'SELECT id, code, v, version FROM ledger.b WHERE id < 3', run_key => 'fp fewer rows');
SELECT * FROM ledger.call('fp base 3', 'SELECT id, code, v, version FROM ledger.b', run_key => 'fp base 3');
SELECT step, ledger.fp(step) = ledger.fp('fp base') AS same_as_base
  FROM ledger.calls WHERE step LIKE 'fp %' ORDER BY run_id;
-- all the option variants differ from each other too
SELECT count(DISTINCT ledger.fp(step)) FROM ledger.calls
 WHERE step IN ('fp base', 'fp value', 'fp key_columns', 'fp order_by', 'fp newer_column',
                'fp delete_missing', 'fp delete_missing 2', 'fp fewer rows');
-- values are not confused across column or row boundaries, nor NULL with ''
CREATE TABLE ledger.s (id int PRIMARY KEY, a text, b text);
SELECT * FROM ledger.call('sep ab|c', $$SELECT 1 AS id, 'ab' AS a, 'c' AS b$$, target => 'ledger.s', run_key => 'sep ab|c');
SELECT * FROM ledger.call('sep a|bc', $$SELECT 1 AS id, 'a' AS a, 'bc' AS b$$, target => 'ledger.s', run_key => 'sep a|bc');
SELECT * FROM ledger.call('sep null', $$SELECT 1 AS id, 'a' AS a, NULL AS b$$, target => 'ledger.s', run_key => 'sep null');
SELECT * FROM ledger.call('sep empty', $$SELECT 1 AS id, 'a' AS a, '' AS b$$, target => 'ledger.s', run_key => 'sep empty');
SELECT * FROM ledger.call('sep 2 rows', $$SELECT * FROM (VALUES (1, 'a', 'b'), (2, 'c', 'd')) v(id, a, b)$$, target => 'ledger.s', run_key => 'sep 2 rows');
SELECT * FROM ledger.call('sep 2 rows swapped', $$SELECT * FROM (VALUES (1, 'a', 'd'), (2, 'c', 'b')) v(id, a, b)$$, target => 'ledger.s', run_key => 'sep 2 rows swapped');
SELECT * FROM ledger.call('sep 2 rows again', $$SELECT * FROM (VALUES (2, 'c', 'd'), (1, 'a', 'b')) v(id, a, b)$$, target => 'ledger.s', run_key => 'sep 2 rows again');
SELECT count(DISTINCT ledger.fp(step)) AS distinct_fps, count(*) AS calls FROM ledger.calls
 WHERE step IN ('sep ab|c', 'sep a|bc', 'sep null', 'sep empty', 'sep 2 rows', 'sep 2 rows swapped');
SELECT ledger.fp('sep 2 rows again') = ledger.fp('sep 2 rows') AS order_independent;

-- a skip under run_key needs the same options too: new options, applied
SELECT * FROM ledger.call('opt day', 'TABLE ledger.b', run_key => 'opt');
SELECT * FROM ledger.call('opt day newer', 'TABLE ledger.b', run_key => 'opt', newer_column => 'version');
SELECT * FROM ledger.call('opt day newer again', 'TABLE ledger.b', run_key => 'opt', newer_column => 'version');

-- a skipped call deletes nothing either, although the applied one did
CREATE TABLE ledger.dm (id int PRIMARY KEY, v text);
INSERT INTO ledger.dm VALUES (1, 'a'), (2, 'b'), (3, 'c'), (4, 'd');
SELECT * FROM ledger.call('dm day', $$SELECT * FROM (VALUES (1, 'a'), (2, 'B')) s(id, v)$$,
                          delete_missing => 'true', run_key => 'dm', target => 'ledger.dm');
INSERT INTO ledger.dm VALUES (5, 'added since');
SELECT * FROM ledger.call('dm day rerun', $$SELECT * FROM (VALUES (2, 'B'), (1, 'a')) s(id, v)$$,
                          delete_missing => 'true', run_key => 'dm', target => 'ledger.dm');
SELECT * FROM ledger.dm ORDER BY id;
SELECT step, batch_rows, inserted, updated, unchanged, deleted, skipped FROM ledger.rows
 WHERE step LIKE 'dm %' ORDER BY step;

--
-- run_history: newest first, with outcome and counts
--
SELECT (array_agg(run_id) = array_agg(run_id ORDER BY run_id DESC)) AS newest_first
  FROM idem_etl.run_history;
SELECT count(*) = (SELECT count(*) FROM idem_etl.runs) AS all_runs FROM idem_etl.run_history;
SELECT h.operation, h.target, h.run_key, h.outcome, h.batch_rows, h.inserted, h.updated,
       h.unchanged, h.deleted, h.duration >= interval '0' AS duration_ok,
       h.run_by = current_user AS run_by_me
  FROM idem_etl.run_history h JOIN ledger.calls c USING (run_id)
 WHERE c.step LIKE 'day1%'
 ORDER BY h.run_id DESC;

--
-- an ordinary role can read the ledger but cannot write it
--
CREATE ROLE idem_test_ledger_reader;
GRANT USAGE ON SCHEMA ledger TO idem_test_ledger_reader;
SET ROLE idem_test_ledger_reader;
SELECT count(*) > 0 AS can_read FROM idem_etl.runs;
SELECT count(*) > 0 AS can_read_history FROM idem_etl.run_history;
SELECT * FROM ledger.err($$INSERT INTO idem_etl.runs (operation, target, target_oid, run_key, fingerprint,
    batch_rows, started_at, finished_at, run_by)
    VALUES ('upsert', 'ledger.t', 0, 'forged', 'x', 0, now(), now(), 'nobody')$$);
SELECT * FROM ledger.err($$UPDATE idem_etl.runs SET fingerprint = 'forged'$$);
SELECT * FROM ledger.err($$DELETE FROM idem_etl.runs$$);
SELECT * FROM ledger.err($$TRUNCATE idem_etl.runs$$);
SELECT * FROM ledger.err($$INSERT INTO idem_etl.run_history (operation, target) VALUES ('upsert', 'forged')$$);
SELECT * FROM ledger.err($$DELETE FROM idem_etl.run_history$$);
RESET ROLE;
-- nothing forged
SELECT count(*) FROM idem_etl.runs WHERE run_key = 'forged' OR fingerprint = 'forged';

SET client_min_messages = warning;
DROP SCHEMA ledger CASCADE;
DROP EXTENSION idem_etl;
RESET client_min_messages;
DROP ROLE idem_test_ledger_reader;

--
-- DROP EXTENSION removes the ledger with everything else; CREATE EXTENSION
-- ... SCHEMA puts the function there and the ledger in idem_etl
--
SELECT count(*) AS idem_etl_schemas FROM pg_namespace WHERE nspname = 'idem_etl';
SELECT count(*) AS functions FROM pg_proc WHERE proname = 'etl_upsert_batch';
SET client_min_messages = warning;
DROP SCHEMA IF EXISTS ledger_fn CASCADE;
RESET client_min_messages;
CREATE SCHEMA ledger_fn;
CREATE EXTENSION idem_etl SCHEMA ledger_fn;
SELECT pronamespace::regnamespace AS function_schema FROM pg_proc WHERE proname = 'etl_upsert_batch';
CREATE TABLE ledger_fn.t (id int PRIMARY KEY, v text);
SELECT inserted FROM ledger_fn.etl_upsert_batch('ledger_fn.t', 'SELECT 1 AS id, ''a'' AS v');
SELECT count(*) FROM idem_etl.runs;
DROP EXTENSION idem_etl;
SELECT count(*) AS idem_etl_schemas FROM pg_namespace WHERE nspname = 'idem_etl';
SET client_min_messages = warning;
DROP SCHEMA ledger_fn CASCADE;
RESET client_min_messages;
