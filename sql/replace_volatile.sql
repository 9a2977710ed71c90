--
-- replace_volatile: issue 10, point 5.  The fingerprint that decides a skip
-- covers the rows the source produced and the options, not what the table
-- filled in itself: a column with DEFAULT now() (or clock_timestamp(), a
-- sequence, an identity) must not make every rerun a correction.
--
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS idem_etl CASCADE;
CREATE EXTENSION idem_etl;
DROP SCHEMA IF EXISTS rvol CASCADE;
RESET client_min_messages;

CREATE SCHEMA rvol;
CREATE SEQUENCE rvol.s;
CREATE TABLE rvol.t (
    d         date NOT NULL,
    id        int  NOT NULL,
    v         text,
    loaded_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    serial    bigint DEFAULT nextval('rvol.s'),
    PRIMARY KEY (d, id)
) PARTITION BY RANGE (d);
CREATE TABLE rvol.t_20261128 PARTITION OF rvol.t FOR VALUES FROM ('2026-11-28') TO ('2026-11-29');

SELECT rows_loaded, skipped FROM etl_replace_partition('rvol.t', '2026-11-28',
    $$SELECT * FROM (VALUES ('2026-11-28'::date, 1, 'a'), ('2026-11-28', 2, 'b')) v(d, id, v)$$, run_key => 'k');
SELECT pg_relation_filenode('rvol.t_20261128') AS filenode \gset
-- the same rows again: skipped, although loaded_at and serial would differ
-- (told by the fingerprint alone: no row is loaded, no sequence value drawn)
SELECT rows_loaded, skipped FROM etl_replace_partition('rvol.t', '2026-11-28',
    $$SELECT * FROM (VALUES ('2026-11-28'::date, 1, 'a'), ('2026-11-28', 2, 'b')) v(d, id, v)$$, run_key => 'k');
SELECT pg_relation_filenode('rvol.t_20261128') = :filenode AS not_rewritten;
-- through etl_replace_partitions too
SELECT rows_loaded, skipped FROM etl_replace_partitions('rvol.t',
    $$SELECT * FROM (VALUES ('2026-11-28'::date, 2, 'b'), ('2026-11-28', 1, 'a')) v(d, id, v)$$, run_key => 'k');
-- a changed row is a correction, and the defaults are filled in anew (the
-- skipped reruns above drew no value of rvol.s: serial goes on from 3)
SELECT rows_loaded, skipped FROM etl_replace_partition('rvol.t', '2026-11-28',
    $$SELECT * FROM (VALUES ('2026-11-28'::date, 1, 'a'), ('2026-11-28', 2, 'c')) v(d, id, v)$$, run_key => 'k');
SELECT id, v, serial FROM rvol.t ORDER BY id;
-- supplying a defaulted column makes it part of the input
SELECT rows_loaded, skipped FROM etl_replace_partition('rvol.t', '2026-11-28',
    $$SELECT * FROM (VALUES ('2026-11-28'::date, 1, 'a', 7::bigint), ('2026-11-28', 2, 'c', 8)) v(d, id, v, serial)$$, run_key => 'k');
SELECT rows_loaded, skipped FROM etl_replace_partition('rvol.t', '2026-11-28',
    $$SELECT * FROM (VALUES ('2026-11-28'::date, 1, 'a', 7::bigint), ('2026-11-28', 2, 'c', 8)) v(d, id, v, serial)$$,
    run_key => 'k');
SELECT id, v, serial FROM rvol.t ORDER BY id;

DROP SCHEMA rvol CASCADE;
