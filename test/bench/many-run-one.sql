-- one repetition of every case and strategy of the many workload (rep = :rep)
SET client_min_messages = warning;
-- one table per statement (see many-setup.sql)
DROP TABLE IF EXISTS many.plain, many.hplain;
DROP TABLE IF EXISTS many.part;
DROP TABLE IF EXISTS many.hpart;
CREATE TABLE many.plain (v int NOT NULL, x int, note text);
CREATE TABLE many.hplain (v int NOT NULL, x int, note text);
INSERT INTO many.plain SELECT * FROM many.plain_src WHERE v % 2 = 0;
INSERT INTO many.hplain SELECT * FROM many.plain_src WHERE v % 2 = 0;
CREATE TABLE many.part (d date NOT NULL, id int NOT NULL, note text, PRIMARY KEY (d, id))
    PARTITION BY RANGE (d);
CREATE TABLE many.hpart (d date NOT NULL, id int NOT NULL, note text, PRIMARY KEY (d, id))
    PARTITION BY RANGE (d);
SELECT format('CREATE TABLE many.hpart_%s PARTITION OF many.hpart FOR VALUES FROM (%L) TO (%L)',
              to_char(d, 'YYYYMMDD'), d, d + 1)
  FROM generate_series(0, 999) g, LATERAL (SELECT DATE '2020-01-01' + g AS d) x \gexec
INSERT INTO many.hpart SELECT * FROM many.part_src;
CHECKPOINT;
SELECT set_config('bench.rep', :'rep', false);

-- timed(case, strategy, statements, expected result of the last one)
CREATE OR REPLACE FUNCTION pg_temp.timed(kase text, strategy text, stmts text[], expect bigint)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE t0 timestamptz; n bigint; locks int; stmt text;
BEGIN
    t0 := clock_timestamp();
    FOREACH stmt IN ARRAY stmts[1:array_length(stmts, 1) - 1] LOOP
        EXECUTE stmt;
    END LOOP;
    EXECUTE stmts[array_length(stmts, 1)] INTO n;
    SELECT count(*) INTO locks FROM pg_locks WHERE pid = pg_backend_pid() AND locktype = 'advisory';
    INSERT INTO bench_many VALUES (current_setting('bench.rep')::int, kase, strategy,
        1000 * extract(epoch FROM clock_timestamp() - t0), locks, n = expect);
END $$;

-- plain, 10,000 values: half of them present before (as many rows as the batch)
SELECT pg_temp.timed('plain 10,000 values', 'etl_replace_partitions',
    ARRAY[$$SELECT count(*) FROM etl_replace_partitions('many.plain', 'TABLE many.plain_src',
                                                  partition_column => 'v')$$], 10000);
SELECT pg_temp.timed('plain 10,000 values', 'hand-written DELETE + INSERT',
    ARRAY[$$DELETE FROM many.hplain WHERE v IN (SELECT v FROM many.plain_src)$$,
          $$WITH i AS (INSERT INTO many.hplain SELECT * FROM many.plain_src RETURNING v)
            SELECT count(DISTINCT v) FROM i$$], 10000);
-- an identical rerun, with run_key the second time: 10,000 skips
SELECT pg_temp.timed('plain 10,000 values, rerun', 'etl_replace_partitions',
    ARRAY[$$SELECT count(*) FROM etl_replace_partitions('many.plain', 'TABLE many.plain_src',
                                                  partition_column => 'v', run_key => 'k')$$], 10000);
-- the cluster runs without autovacuum: analyze the ledger as it would
ANALYZE idem_etl.runs;
SELECT pg_temp.timed('plain 10,000 values, rerun skipped', 'etl_replace_partitions',
    ARRAY[$$SELECT count(*) FILTER (WHERE skipped) FROM etl_replace_partitions('many.plain',
        'TABLE many.plain_src', partition_column => 'v', run_key => 'k')$$], 10000);

-- partitioned, 1,000 daily partitions: created by the first call, replaced by the second
SELECT pg_temp.timed('partitioned 1,000 partitions, created', 'etl_replace_partitions',
    ARRAY[$$SELECT count(*) FROM etl_replace_partitions('many.part', 'TABLE many.part_src',
                                                  granularity => '1 day')$$], 1000);
SELECT pg_temp.timed('partitioned 1,000 partitions, replaced', 'etl_replace_partitions',
    ARRAY[$$SELECT count(*) FROM etl_replace_partitions('many.part', 'TABLE many.part_src')$$], 1000);
SELECT pg_temp.timed('partitioned 1,000 partitions, replaced', 'hand-written DELETE + INSERT',
    ARRAY[$$DELETE FROM many.hpart$$,
          $$WITH i AS (INSERT INTO many.hpart SELECT * FROM many.part_src RETURNING d)
            SELECT count(DISTINCT d) FROM i$$], 1000);
