--
-- upsert_atomic: point 7 of etl_upsert_batch (atomic).
-- Any error (bad row, constraint violation, cancel) leaves target and
-- ledger exactly as before, with the error's own SQLSTATE; the caller's
-- ROLLBACK undoes a successful call.
--
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS idem_etl CASCADE;
CREATE EXTENSION idem_etl;
DROP SCHEMA IF EXISTS atomic CASCADE;
RESET client_min_messages;

CREATE SCHEMA atomic;

\set schema atomic
\i sql/include/err.sql

CREATE TABLE atomic.parent (pid int PRIMARY KEY);
INSERT INTO atomic.parent VALUES (1), (2);
CREATE TABLE atomic.t (
    id    int PRIMARY KEY,
    qty   int NOT NULL CHECK (qty >= 0),
    email text UNIQUE,
    pid   int REFERENCES atomic.parent
);
CREATE TABLE atomic.b (id int, qty int, email text, pid int);

-- state(): the target's rows with their physical versions, and the ledger size
CREATE FUNCTION atomic.state() RETURNS text LANGUAGE sql AS $$
    SELECT coalesce((SELECT string_agg(format('%s/%s/%s/%s@%s:%s', id, qty, email, pid, ctid, xmin), ' ' ORDER BY id)
                       FROM atomic.t), '')
        || ' ledger=' || (SELECT count(*) FROM idem_etl.runs);
$$;

INSERT INTO atomic.b VALUES (1, 10, 'a@x', 1), (2, 20, 'b@x', 2), (3, 30, 'c@x', NULL), (5, 50, 'e@x', 1);
SELECT inserted, updated, unchanged, deleted, skipped FROM etl_upsert_batch('atomic.t', 'TABLE atomic.b');
SELECT * FROM atomic.t ORDER BY id;
SELECT atomic.state() AS before \gset

-- Each failing batch updates rows 1 and 2 (written first in key order),
-- deletes row 5 (delete_missing) and then hits a bad row with key 4.
-- The error is the target's own, and nothing at all remains of the call.

-- CHECK violation: 23514
TRUNCATE atomic.b;
INSERT INTO atomic.b VALUES (1, 11, 'a@x', 1), (2, 21, 'b@x', 2), (3, 30, 'c@x', NULL), (4, -1, 'd@x', 1);
SELECT * FROM atomic.err($$SELECT * FROM etl_upsert_batch('atomic.t', 'TABLE atomic.b', delete_missing => 'true')$$);
SELECT atomic.state() = :'before' AS unchanged;
-- NOT NULL violation on a non-key column: 23502
UPDATE atomic.b SET qty = NULL WHERE id = 4;
SELECT * FROM atomic.err($$SELECT * FROM etl_upsert_batch('atomic.t', 'TABLE atomic.b', delete_missing => 'true')$$);
SELECT atomic.state() = :'before' AS unchanged;
-- unique violation on another unique constraint: 23505
UPDATE atomic.b SET qty = 4, email = 'c@x' WHERE id = 4;
SELECT * FROM atomic.err($$SELECT * FROM etl_upsert_batch('atomic.t', 'TABLE atomic.b', delete_missing => 'true')$$);
SELECT atomic.state() = :'before' AS unchanged;
-- foreign key violation: 23503
UPDATE atomic.b SET email = 'd@x', pid = 99 WHERE id = 4;
SELECT * FROM atomic.err($$SELECT * FROM etl_upsert_batch('atomic.t', 'TABLE atomic.b', delete_missing => 'true')$$);
SELECT atomic.state() = :'before' AS unchanged;
-- a value out of range for the target column (bigint into int): 22003
SELECT * FROM atomic.err($$SELECT * FROM etl_upsert_batch('atomic.t',
    'SELECT id, CASE WHEN id = 4 THEN 3000000000 ELSE qty END AS qty, email, 1 AS pid FROM atomic.b',
    delete_missing => 'true')$$);
SELECT atomic.state() = :'before' AS unchanged;
-- an error raised by the source query: 22012
SELECT * FROM atomic.err($$SELECT * FROM etl_upsert_batch('atomic.t',
    'SELECT id, qty / (id - 4) AS qty, email, pid FROM atomic.b', delete_missing => 'true')$$);
SELECT atomic.state() = :'before' AS unchanged;
-- a trigger on the target raising an error on the last row: P0001
CREATE FUNCTION atomic.refuse_4() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.id = 4 THEN RAISE EXCEPTION 'row 4 refused by trigger'; END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER refuse_4 BEFORE INSERT OR UPDATE ON atomic.t FOR EACH ROW EXECUTE FUNCTION atomic.refuse_4();
UPDATE atomic.b SET pid = 1 WHERE id = 4;
SELECT * FROM atomic.err($$SELECT * FROM etl_upsert_batch('atomic.t', 'TABLE atomic.b', delete_missing => 'true')$$);
SELECT atomic.state() = :'before' AS unchanged;
DROP TRIGGER refuse_4 ON atomic.t;

-- the same errors at top level, where they abort the statement (SQLSTATE only)
\set VERBOSITY sqlstate
UPDATE atomic.b SET qty = -1 WHERE id = 4;
SELECT inserted FROM etl_upsert_batch('atomic.t', 'TABLE atomic.b', delete_missing => 'true');
UPDATE atomic.b SET qty = NULL WHERE id = 4;
SELECT inserted FROM etl_upsert_batch('atomic.t', 'TABLE atomic.b', delete_missing => 'true');
\set VERBOSITY default
SELECT atomic.state() = :'before' AS unchanged;

--
-- a statement_timeout cancel (57014) leaves everything as before
--
-- in a slow source
\set VERBOSITY sqlstate
SET statement_timeout = '200ms';
SELECT inserted FROM etl_upsert_batch('atomic.t',
    $$SELECT b.* FROM atomic.b b WHERE b.id < 4 AND pg_sleep(1)::text = ''$$,
    delete_missing => 'true');
RESET statement_timeout;
\set VERBOSITY default
SELECT atomic.state() = :'before' AS unchanged;
-- in the middle of the writes: a trigger sleeps on row 3, after rows 1 and 2 were updated
CREATE FUNCTION atomic.slow_3() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.id = 3 THEN PERFORM pg_sleep(10); END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER slow_3 BEFORE INSERT OR UPDATE ON atomic.t FOR EACH ROW EXECUTE FUNCTION atomic.slow_3();
UPDATE atomic.b SET qty = qty + 1 WHERE id < 4;
DELETE FROM atomic.b WHERE id = 4;
\set VERBOSITY sqlstate
SET statement_timeout = '300ms';
SELECT inserted FROM etl_upsert_batch('atomic.t', 'TABLE atomic.b', delete_missing => 'true');
RESET statement_timeout;
\set VERBOSITY default
SELECT atomic.state() = :'before' AS unchanged;
DROP TRIGGER slow_3 ON atomic.t;

--
-- the caller's ROLLBACK undoes a successful call, ledger row included
--
BEGIN;
SELECT inserted, updated, unchanged, deleted, skipped
  FROM etl_upsert_batch('atomic.t', 'TABLE atomic.b', delete_missing => 'true');
SELECT id, qty FROM atomic.t ORDER BY id;
SELECT count(*) FROM idem_etl.runs;
ROLLBACK;
SELECT atomic.state() = :'before' AS unchanged;

-- a failed call inside a transaction, rolled back to a savepoint, then a good one
BEGIN;
SAVEPOINT s;
\set VERBOSITY sqlstate
SELECT inserted FROM etl_upsert_batch('atomic.t', 'SELECT 1 AS id, -5 AS qty');
\set VERBOSITY default
ROLLBACK TO SAVEPOINT s;
SELECT inserted, updated, unchanged, deleted, skipped
  FROM etl_upsert_batch('atomic.t', 'TABLE atomic.b', delete_missing => 'true');
-- a second call in the same transaction
SELECT inserted, updated, unchanged, deleted, skipped
  FROM etl_upsert_batch('atomic.t', $$SELECT 6 AS id, 60 AS qty$$);
COMMIT;
SELECT * FROM atomic.t ORDER BY id;
SELECT count(*) FROM idem_etl.runs;

-- a failed run with a run_key leaves no ledger row: its corrected rerun is
-- applied in full, neither skipped nor reported as a correction
SELECT atomic.state() AS before \gset
\set VERBOSITY sqlstate
SELECT inserted FROM etl_upsert_batch('atomic.t', $$SELECT 7 AS id, -7 AS qty$$, run_key => 'day 1');
\set VERBOSITY default
SELECT atomic.state() = :'before' AS unchanged;
SELECT inserted, updated, unchanged, deleted, skipped
  FROM etl_upsert_batch('atomic.t', $$SELECT 7 AS id, 7 AS qty$$, run_key => 'day 1');
SELECT count(*) FROM idem_etl.runs WHERE run_key = 'day 1';

SET client_min_messages = warning;
DROP SCHEMA atomic CASCADE;
DROP EXTENSION idem_etl;
RESET client_min_messages;
