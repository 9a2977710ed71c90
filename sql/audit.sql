--
-- audit: write-audit-publish.  expect is checked over the staged batch
-- before anything is written (IE001 with the expression and the values of
-- its aggregates); min_replaced_ratio refuses a replacement that would
-- shrink a partition or a value's rows below that fraction (IE002) unless
-- allow_shrink.  The ledger records the expectation met.
--
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS idem_etl CASCADE;
CREATE EXTENSION idem_etl;
DROP SCHEMA IF EXISTS aud CASCADE;
RESET client_min_messages;
CREATE SCHEMA aud;
\set schema aud
\i sql/include/err.sql

CREATE TABLE aud.orders (id int PRIMARY KEY, amount numeric);
CREATE TABLE aud.src (id int, amount numeric);
INSERT INTO aud.src SELECT g, g * 10 FROM generate_series(1, 5) g;

-- met: loaded, and recorded
SELECT inserted FROM etl_upsert_batch('aud.orders', 'TABLE aud.src',
    expect => 'count(*) >= 5 AND count(*) FILTER (WHERE amount < 0) = 0');
SELECT expectation FROM idem_etl.runs ORDER BY run_id DESC LIMIT 1;
-- not met: nothing written, the values shown
INSERT INTO aud.src VALUES (6, -1);
SELECT * FROM aud.err($$SELECT * FROM etl_upsert_batch('aud.orders', 'TABLE aud.src',
    expect => 'count(*) >= 5 AND count(*) FILTER (WHERE amount < 0) = 0')$$);
SELECT count(*) AS still_five FROM aud.orders;
-- NULL is not met either
SELECT * FROM aud.err($$SELECT * FROM etl_upsert_batch('aud.orders', 'SELECT * FROM aud.src WHERE false',
    expect => 'max(amount) > 0')$$);
-- a skip is audited too: the same batch with run_key, now failing
SELECT skipped FROM etl_upsert_batch('aud.orders', 'SELECT * FROM aud.src WHERE id <= 5',
    expect => 'sum(amount) > 0', run_key => 'r');
SELECT * FROM aud.err($$SELECT * FROM etl_upsert_batch('aud.orders', 'SELECT * FROM aud.src WHERE id <= 5',
    expect => 'sum(amount) > 1000', run_key => 'r')$$);
-- expectations the parser reads but a scan by parentheses did not (42601
-- before): quotes, comments, constructs that become calls, WITHIN GROUP;
-- met, then not met with the value of each call shown
SELECT inserted, unchanged FROM etl_upsert_batch('aud.orders', 'SELECT * FROM aud.src WHERE id <= 5',
    expect => $e$EXTRACT(year FROM max(now())) > 2000 AND count(*) FILTER (WHERE amount::text <> $q$a)$q$) = 5
             AND sum(amount /* ) */) > 0 AND (now(), now()) OVERLAPS (now(), now())
             AND max(now()) AT TIME ZONE 'UTC' IS NOT NULL
             AND percentile_cont(0.5) WITHIN GROUP (ORDER BY amount) FILTER (WHERE id > 0) = 30$e$);
SELECT * FROM aud.err($$SELECT * FROM etl_upsert_batch('aud.orders', 'SELECT * FROM aud.src WHERE id <= 5',
    expect => 'count(*) FILTER (WHERE amount::text <> $q$a)$q$) = 4
               AND percentile_cont(0.5) WITHIN GROUP (ORDER BY amount) FILTER (WHERE id > 0) = 30')$$);
-- a subquery's calls are its own: not cut out and evaluated outside it (42703)
SELECT inserted, unchanged FROM etl_upsert_batch('aud.orders', 'SELECT * FROM aud.src WHERE id <= 5',
    expect => 'count(*) = 5 AND EXISTS (SELECT 1 FROM (VALUES (1)) v(g) WHERE abs(g) = 1)');
SELECT * FROM aud.err($$SELECT * FROM etl_upsert_batch('aud.orders', 'SELECT * FROM aud.src WHERE id <= 5',
    expect => 'count(*) = (SELECT count(*) + 1 FROM aud.src WHERE id <= 5)')$$);
-- refused before anything runs: not one expression (42601), not over aggregates (42803)
SELECT * FROM aud.err($$SELECT * FROM etl_upsert_batch('aud.orders', 'TABLE aud.src', expect => 'true; DROP TABLE aud.orders')$$);
SELECT * FROM aud.err($$SELECT * FROM etl_upsert_batch('aud.orders', 'TABLE aud.src', expect => 'amount > 0')$$);

-- replacements: a partitioned day and a plain table's value
CREATE TABLE aud.events (d date NOT NULL, id int NOT NULL, v text) PARTITION BY RANGE (d);
CREATE TABLE aud.events_20261128 PARTITION OF aud.events FOR VALUES FROM ('2026-11-28') TO ('2026-11-29');
INSERT INTO aud.events SELECT '2026-11-28', g, 'old' FROM generate_series(1, 100) g;
SELECT * FROM aud.err($$SELECT * FROM etl_replace_partition('aud.events', '2026-11-28',
    'SELECT ''2026-11-28''::date AS d, 1 AS id, ''x'' AS v', expect => 'count(*) >= 50')$$);
-- the classic incident: an empty extract replacing a full day
SET idem_etl.min_replaced_ratio = 0.5;
SELECT * FROM aud.err($$SELECT * FROM etl_replace_partition('aud.events', '2026-11-28',
    'SELECT ''2026-11-28''::date AS d, 1 AS id, ''x'' AS v WHERE false')$$);
SELECT count(*) AS day_intact FROM aud.events;
-- enough rows: replaced, and the ratio recorded
SELECT rows_loaded, rows_replaced FROM etl_replace_partition('aud.events', '2026-11-28',
    'SELECT ''2026-11-28''::date AS d, g AS id, ''new'' AS v FROM generate_series(1, 60) g');
SELECT expectation FROM idem_etl.runs ORDER BY run_id DESC LIMIT 1;
-- allow_shrink: the caller says the smaller day is right
SELECT rows_loaded, rows_replaced FROM etl_replace_partition('aud.events', '2026-11-28',
    'SELECT ''2026-11-28''::date AS d, 1 AS id, ''one'' AS v', allow_shrink => true);
-- the argument overrides the setting
INSERT INTO aud.events SELECT '2026-11-28', g, 'old' FROM generate_series(2, 100) g;
SELECT rows_loaded FROM etl_replace_partition('aud.events', '2026-11-28',
    'SELECT ''2026-11-28''::date AS d, 1 AS id, ''x'' AS v', min_replaced_ratio => 0);
RESET idem_etl.min_replaced_ratio;
SELECT * FROM aud.err($$SELECT * FROM etl_replace_partition('aud.events', '2026-11-28',
    'SELECT ''2026-11-28''::date AS d', min_replaced_ratio => 1.5)$$);
-- a plain table's value
CREATE TABLE aud.daily (d date NOT NULL, v int);
INSERT INTO aud.daily SELECT '2026-11-28', g FROM generate_series(1, 10) g;
SELECT * FROM aud.err($$SELECT * FROM etl_replace_partition('aud.daily', '2026-11-28',
    'SELECT ''2026-11-28''::date AS d, 1 AS v', partition_column => 'd', min_replaced_ratio => 0.9)$$);
SELECT * FROM aud.err($$SELECT * FROM etl_replace_partitions('aud.daily',
    'SELECT ''2026-11-28''::date AS d, 1 AS v', partition_column => 'd', expect => 'count(*) > 1')$$);
SELECT count(*) AS value_intact FROM aud.daily;

SET client_min_messages = warning;
DROP SCHEMA aud CASCADE;
DROP EXTENSION idem_etl;
