--
-- replace_rerun: point 6 of etl_replace_partition (idempotent).
-- Rerunning with the same source leaves the same contents.  With run_key,
-- an identical input (same fingerprint as the latest run for that target,
-- value and run_key) is skipped: nothing is rewritten (the partition keeps
-- its relfilenode), skipped = t, a NOTICE says so, the ledger records the
-- skip.  A changed input is a correction, applied in full with a NOTICE.
--
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS idem_etl CASCADE;
CREATE EXTENSION idem_etl;
DROP SCHEMA IF EXISTS rrerun CASCADE;
RESET client_min_messages;

CREATE SCHEMA rrerun;

CREATE TABLE rrerun.t (d date NOT NULL, id int NOT NULL, v text, PRIMARY KEY (d, id)) PARTITION BY RANGE (d);
CREATE TABLE rrerun.t_20261127 PARTITION OF rrerun.t FOR VALUES FROM ('2026-11-27') TO ('2026-11-28');
CREATE TABLE rrerun.t_20261128 PARTITION OF rrerun.t FOR VALUES FROM ('2026-11-28') TO ('2026-11-29');
CREATE TABLE rrerun.src (d date, id int, v text);
INSERT INTO rrerun.src VALUES ('2026-11-28', 1, 'a'), ('2026-11-28', 2, 'b'), ('2026-11-28', 3, 'c');

-- digest of a day's rows
CREATE FUNCTION rrerun.digest(day date) RETURNS text LANGUAGE sql AS $$
    SELECT count(*) || ' rows, ' || md5(coalesce(string_agg(t::text, ',' ORDER BY t::text), ''))
      FROM rrerun.t t WHERE d = day;
$$;
-- results of every call, to refer to run_ids without printing them
CREATE TABLE rrerun.calls (step text PRIMARY KEY, run_id bigint, filenode_before oid, filenode_after oid);
CREATE FUNCTION rrerun.call(step text, day text, source text, run_key text DEFAULT NULL)
RETURNS TABLE (rows_loaded bigint, rows_replaced bigint, skipped boolean, new_file boolean)
LANGUAGE plpgsql AS $$
DECLARE fn_before oid; r record;
BEGIN
    SELECT pg_relation_filenode(c.oid) INTO fn_before
      FROM pg_class c WHERE c.oid = to_regclass('rrerun.t_' || to_char(day::date, 'YYYYMMDD'));
    SELECT * INTO r FROM etl_replace_partition('rrerun.t', day, source, run_key => run_key);
    INSERT INTO rrerun.calls VALUES (step, r.run_id, fn_before, pg_relation_filenode(r.partition_table));
    rows_loaded := r.rows_loaded; rows_replaced := r.rows_replaced; skipped := r.skipped;
    new_file := fn_before IS DISTINCT FROM pg_relation_filenode(r.partition_table);
    RETURN NEXT;
END $$;
CREATE VIEW rrerun.ledger AS
SELECT c.step, r.operation, r.run_key, r.partition_value, r.rows_loaded, r.rows_replaced, r.skipped,
       r.corrects IS NOT NULL AS corrects
  FROM rrerun.calls c JOIN idem_etl.runs r USING (run_id);
CREATE FUNCTION rrerun.fp(step text) RETURNS text LANGUAGE sql AS $$
    SELECT r.fingerprint FROM rrerun.calls c JOIN idem_etl.runs r USING (run_id) WHERE c.step = $1;
$$;
CREATE FUNCTION rrerun.run(step text) RETURNS bigint LANGUAGE sql AS $$
    SELECT run_id FROM rrerun.calls c WHERE c.step = $1;
$$;

--
-- without run_key: a rerun is applied again (a new file) with the same result
--
SELECT * FROM rrerun.call('load', '2026-11-28', 'TABLE rrerun.src');
SELECT rrerun.digest('2026-11-28') AS after_load \gset
SELECT * FROM rrerun.call('rerun', '2026-11-28', 'TABLE rrerun.src');
SELECT rrerun.digest('2026-11-28') = :'after_load' AS same_contents;
SELECT * FROM rrerun.call('rerun reordered', '2026-11-28', 'SELECT * FROM rrerun.src ORDER BY id DESC');
SELECT rrerun.digest('2026-11-28') = :'after_load' AS same_contents;
SELECT * FROM rrerun.t ORDER BY d, id;
SELECT rrerun.fp('rerun') = rrerun.fp('load') AS same_fingerprint,
       rrerun.fp('rerun reordered') = rrerun.fp('load') AS reordered_same_fingerprint;

--
-- run_key: the first call with it is applied; an identical one is skipped
--
SELECT * FROM rrerun.call('day', '2026-11-28', 'TABLE rrerun.src', run_key => 'batch-28');
CREATE TABLE rrerun.versions AS SELECT id, ctid::text AS ct, xmin::text AS xm FROM rrerun.t_20261128;
SELECT * FROM rrerun.call('day rerun', '2026-11-28', 'TABLE rrerun.src', run_key => 'batch-28');
-- the same rows in another order: the same fingerprint, skipped too
SELECT * FROM rrerun.call('day reordered', '2026-11-28', 'SELECT * FROM rrerun.src ORDER BY id DESC',
                          run_key => 'batch-28');
-- nothing rewritten: same file, same row versions, same contents
SELECT count(*) AS rewritten FROM rrerun.t_20261128 t FULL JOIN rrerun.versions v USING (id)
 WHERE t.ctid::text IS DISTINCT FROM v.ct OR t.xmin::text IS DISTINCT FROM v.xm;
SELECT rrerun.digest('2026-11-28') = :'after_load' AS same_contents;
SELECT step, operation, run_key, partition_value, rows_loaded, rows_replaced, skipped, corrects
  FROM rrerun.ledger WHERE step LIKE 'day%' ORDER BY rrerun.run(step);
SELECT rrerun.fp('day rerun') = rrerun.fp('day') AS same_fingerprint;

--
-- a changed input under the same run_key: a correction, applied in full
--
UPDATE rrerun.src SET v = 'b corrected' WHERE id = 2;
INSERT INTO rrerun.src VALUES ('2026-11-28', 4, 'd');
SELECT * FROM rrerun.call('day correction', '2026-11-28', 'TABLE rrerun.src', run_key => 'batch-28');
SELECT * FROM rrerun.t ORDER BY d, id;
SELECT step, rows_loaded, rows_replaced, skipped, corrects FROM rrerun.ledger WHERE step = 'day correction';
-- it names the last run for the run_key that applied rows (not the skips after it)
SELECT corrects = rrerun.run('day') AS corrects_last_applied_run
  FROM idem_etl.runs WHERE run_id = rrerun.run('day correction');
-- its rerun is skipped
SELECT * FROM rrerun.call('day correction rerun', '2026-11-28', 'TABLE rrerun.src', run_key => 'batch-28');
-- going back to the original input is a correction again (the latest run decides)
DELETE FROM rrerun.src WHERE id = 4;
UPDATE rrerun.src SET v = 'b' WHERE id = 2;
SELECT * FROM rrerun.call('day back', '2026-11-28', 'TABLE rrerun.src', run_key => 'batch-28');
SELECT rrerun.digest('2026-11-28') = :'after_load' AS same_contents_as_first;

--
-- the run_key is per (target, value): the same run_key on another value is
-- independent; an empty source under a run_key is skipped when repeated
--
SELECT * FROM rrerun.call('other day', '2026-11-27',
    $$SELECT '2026-11-27'::date AS d, 1 AS id, 'x' AS v$$, run_key => 'batch-28');
SELECT * FROM rrerun.call('other day rerun', '2026-11-27',
    $$SELECT '2026-11-27'::date AS d, 1 AS id, 'x' AS v$$, run_key => 'batch-28');
-- an empty day, allowed by the setting (else IE002, see sql/safe_defaults.sql)
SET idem_etl.allow_shrink = on;
SELECT * FROM rrerun.call('empty', '2026-11-27',
    $$SELECT '2026-11-27'::date AS d, 1 AS id, 'x' AS v WHERE false$$, run_key => 'batch-27');
SELECT * FROM rrerun.call('empty rerun', '2026-11-27',
    $$SELECT '2026-11-27'::date AS d, 1 AS id, 'x' AS v WHERE false$$, run_key => 'batch-27');
RESET idem_etl.allow_shrink;
SELECT count(*) FROM rrerun.t WHERE d = '2026-11-27';

-- a skip under run_key also holds after the partition was changed by hand:
-- the input decides, not the contents
INSERT INTO rrerun.t VALUES ('2026-11-28', 99, 'by hand');
SELECT * FROM rrerun.call('after hand edit', '2026-11-28', 'TABLE rrerun.src', run_key => 'batch-28');
SELECT count(*) FROM rrerun.t WHERE id = 99;

SELECT step, run_key, partition_value, rows_loaded, rows_replaced, skipped, corrects
  FROM rrerun.ledger ORDER BY rrerun.run(step);

-- the value and the rows are values, not text in the session's DateStyle:
-- the same day and the same rows read in another DateStyle are the same
-- input, skipped (the NOTICE is shown above; its wording of the value is
-- left to the implementation here)
SET client_min_messages = warning;
SET DateStyle = 'ISO, YMD';
SELECT * FROM rrerun.call('iso', '2026-11-28', 'TABLE rrerun.src', run_key => 'batch-28');
SET DateStyle = 'German';
SELECT * FROM rrerun.call('german', '28.11.2026', 'TABLE rrerun.src', run_key => 'batch-28');
RESET DateStyle;
RESET client_min_messages;
SELECT rrerun.fp('iso') = rrerun.fp('day') AS iso_same_fingerprint,
       rrerun.fp('german') = rrerun.fp('day') AS german_same_fingerprint;
SELECT step, skipped, corrects FROM rrerun.ledger WHERE step IN ('iso', 'german') ORDER BY rrerun.run(step);


SET client_min_messages = warning;
DROP SCHEMA rrerun CASCADE;
DROP EXTENSION idem_etl;
RESET client_min_messages;
