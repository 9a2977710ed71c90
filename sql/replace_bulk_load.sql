--
-- replace_bulk_load: issue 11, item 5.  etl_replace_partition writes the
-- source's rows into the new partition as COPY does (bulkload.c), buffered
-- and inserted a page at a time, hashing them for the fingerprint on the
-- way; the rows stored are those INSERT would store.  Shown here: several
-- buffers' worth of rows; values large enough to be TOASTed, from a source
-- whose values are TOASTed themselves; defaults, a volatile one among them
-- (then rows are written one at a time), stored generated columns and a
-- domain; an UNLOGGED partition; the same fingerprint as the staged path
-- of etl_replace_partitions for the same rows, and as a rerun's; and
-- etl_replace_partitions loading its partitions the same way.  Errors of
-- constraints keep INSERT's SQLSTATE, message and detail (replace_validate).
--
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS idem_etl CASCADE;
CREATE EXTENSION idem_etl;
DROP SCHEMA IF EXISTS rbulk CASCADE;
RESET client_min_messages;

CREATE SCHEMA rbulk;

CREATE DOMAIN rbulk.positive AS int CHECK (VALUE > 0);
CREATE SEQUENCE rbulk.seq;
CREATE TABLE rbulk.t (
    d       date NOT NULL,
    id      int NOT NULL,
    qty     rbulk.positive,
    payload text,
    plen    int GENERATED ALWAYS AS (length(payload)) STORED,
    status  text DEFAULT 'new',
    serial  bigint DEFAULT nextval('rbulk.seq'),
    loaded  timestamptz DEFAULT clock_timestamp(),
    PRIMARY KEY (d, id)
) PARTITION BY RANGE (d);
CREATE TABLE rbulk.t_20261128 PARTITION OF rbulk.t FOR VALUES FROM ('2026-11-28') TO ('2026-11-29');
CREATE TABLE rbulk.t_20261129 PARTITION OF rbulk.t FOR VALUES FROM ('2026-11-29') TO ('2026-11-30');

-- 2,500 rows (three buffers of 1,000 rows), two of them 320 kB of text
-- stored out of line in the source table: md5s that do not compress (a
-- repeated string compresses to 1.3 kB with lz4, 19's default
-- default_toast_compression, and then stays in line)
CREATE TABLE rbulk.src (d date, id int, qty int, payload text);
INSERT INTO rbulk.src
SELECT '2026-11-28', g, g % 7 + 1,
       CASE WHEN g IN (10, 2000)
            THEN (SELECT string_agg(md5(g || ':' || i), '') FROM generate_series(1, 10000) AS i)
            ELSE 'p' || g END
  FROM generate_series(1, 2500) AS g;
SELECT count(*) > 0 AS source_toasted
  FROM pg_class c JOIN pg_class t ON t.oid = c.reltoastrelid
 WHERE c.oid = 'rbulk.src'::regclass AND pg_relation_size(t.oid) > 0;

SELECT rows_loaded, rows_replaced, skipped
  FROM etl_replace_partition('rbulk.t', '2026-11-28', 'TABLE rbulk.src', run_key => 'a');
SELECT count(*) AS n, sum(qty) AS qty, sum(plen) AS plen,
       count(DISTINCT serial) AS serials, count(*) FILTER (WHERE status = 'new') AS status_default,
       count(*) FILTER (WHERE loaded IS NOT NULL) AS loaded_default,
       bool_and(payload = (SELECT s.payload FROM rbulk.src s WHERE s.id = t.id)) AS payloads_equal
  FROM rbulk.t_20261128 t;
SELECT count(*) > 0 AS partition_toasted
  FROM pg_class c JOIN pg_class t ON t.oid = c.reltoastrelid
 WHERE c.oid = 'rbulk.t_20261128'::regclass AND pg_relation_size(t.oid) > 0;

-- a rerun of the same rows is recognised (the fingerprint of the rows as
-- loaded), and so is the same batch through etl_replace_partitions
SELECT rows_loaded, skipped
  FROM etl_replace_partition('rbulk.t', '2026-11-28', 'TABLE rbulk.src', run_key => 'a');
SELECT partition_table, rows_loaded, skipped
  FROM etl_replace_partitions('rbulk.t', 'TABLE rbulk.src', run_key => 'a');
SELECT count(DISTINCT fingerprint) AS fingerprints FROM idem_etl.runs
 WHERE target = 'rbulk.t' AND run_key = 'a';

-- etl_replace_partitions writes each partition's rows the same way, from
-- the staged batch: two days, each with a TOASTed value
SELECT partition_table, rows_loaded, skipped
  FROM etl_replace_partitions('rbulk.t',
    $$SELECT d, id, qty, payload FROM rbulk.src WHERE id <= 1200
      UNION ALL SELECT '2026-11-29', id, qty, payload FROM rbulk.src WHERE id > 1200$$)
 ORDER BY 1;
SELECT tableoid::regclass AS p, count(*) AS n, sum(qty) AS qty, sum(plen) AS plen,
       count(DISTINCT serial) AS serials, count(*) FILTER (WHERE status = 'new') AS status_default,
       bool_and(payload = (SELECT s.payload FROM rbulk.src s WHERE s.id = t.id)) AS payloads_equal
  FROM rbulk.t t GROUP BY 1 ORDER BY 1;

-- a value the domain refuses: 23514, nothing changed
SELECT count(*) AS runs_before FROM idem_etl.runs \gset
\set VERBOSITY sqlstate
SELECT rows_loaded FROM etl_replace_partition('rbulk.t', '2026-11-28',
    'SELECT d, id, 0 AS qty, payload FROM rbulk.src');
\set VERBOSITY default
SELECT count(*) = :runs_before AS ledger_unchanged, (SELECT count(*) FROM rbulk.t_20261128) AS rows_kept
  FROM idem_etl.runs;

-- a column of a NOT NULL domain that the source leaves out, with no
-- default, is refused as INSERT refuses it (23502), into an existing
-- partition or a new one; it was stored as NULL.  A domain's own default
-- is used.
CREATE DOMAIN rbulk.required AS int NOT NULL CHECK (VALUE > 0);
CREATE DOMAIN rbulk.defaulted AS int DEFAULT 7 NOT NULL;
CREATE TABLE rbulk.n (d date NOT NULL, id int NOT NULL, q rbulk.required, r rbulk.defaulted)
    PARTITION BY RANGE (d);
CREATE TABLE rbulk.n_1 PARTITION OF rbulk.n FOR VALUES FROM ('2026-11-01') TO ('2026-11-02');
\set VERBOSITY sqlstate
INSERT INTO rbulk.n (d, id) VALUES ('2026-11-01', 1);
SELECT rows_loaded FROM etl_replace_partition('rbulk.n', '2026-11-01',
    $$SELECT '2026-11-01'::date AS d, 1 AS id$$);
SELECT rows_loaded FROM etl_replace_partitions('rbulk.n',
    $$SELECT '2026-11-02'::date AS d, 2 AS id$$, granularity => '1 day');
\set VERBOSITY default
SELECT rows_loaded FROM etl_replace_partition('rbulk.n', '2026-11-01',
    $$SELECT '2026-11-01'::date AS d, 1 AS id, 5 AS q$$);
SELECT d, id, q, r FROM rbulk.n;

-- a column the source leaves out takes the parent's default, as an INSERT
-- into the parent gives it, not one the partition has of its own (which an
-- INSERT into the partition alone applies, and which it keeps): the same
-- row came out differently whether the partition existed or not
CREATE TABLE rbulk.pd (d date NOT NULL, id int NOT NULL, status text DEFAULT 'parent',
                       note text) PARTITION BY RANGE (d);
CREATE TABLE rbulk.pd_1 PARTITION OF rbulk.pd FOR VALUES FROM ('2026-11-01') TO ('2026-11-02');
ALTER TABLE rbulk.pd_1 ALTER COLUMN status SET DEFAULT 'partition', ALTER COLUMN note SET DEFAULT 'partition';
INSERT INTO rbulk.pd (d, id) VALUES ('2026-11-01', 0);
SELECT rows_loaded FROM etl_replace_partition('rbulk.pd', '2026-11-01', $$SELECT '2026-11-01'::date AS d, 1 AS id$$);
SELECT rows_loaded FROM etl_replace_where('rbulk.pd', 'id = 2', $$SELECT '2026-11-01'::date AS d, 2 AS id$$);
SELECT rows_loaded FROM etl_replace_partitions('rbulk.pd', $$SELECT '2026-11-02'::date AS d, 3 AS id$$,
    granularity => '1 day');
INSERT INTO rbulk.pd (d, id) VALUES ('2026-11-01', 4);
SELECT tableoid::regclass AS p, id, status, note FROM rbulk.pd ORDER BY id;
SELECT a.attname, pg_get_expr(d.adbin, d.adrelid) AS partition_default
  FROM pg_attrdef d JOIN pg_attribute a ON a.attrelid = d.adrelid AND a.attnum = d.adnum
 WHERE d.adrelid = 'rbulk.pd_1'::regclass ORDER BY 1;

-- an UNLOGGED partition is replaced by an UNLOGGED table
CREATE UNLOGGED TABLE rbulk.t_20261130 PARTITION OF rbulk.t FOR VALUES FROM ('2026-11-30') TO ('2026-12-01');
SELECT rows_loaded
  FROM etl_replace_partition('rbulk.t', '2026-11-30',
    $$SELECT '2026-11-30'::date AS d, g AS id, 1 AS qty, 'u' AS payload FROM generate_series(1, 1500) AS g$$);
SELECT relpersistence, (SELECT count(*) FROM rbulk.t_20261130) AS n
  FROM pg_class WHERE oid = 'rbulk.t_20261130'::regclass;

DROP SCHEMA rbulk CASCADE;
