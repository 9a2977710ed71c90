-- idem_etl benchmark, memory test: one etl_upsert_batch call of the big
-- batch in a fresh connection, its backend watched by mem-sampler (which
-- reads /proc/<pid>/status; environment: BENCH_DIR, BENCH_MEM_DIR).
\set ON_ERROR_STOP 1
SET client_min_messages = warning;
SELECT 1 \g /dev/null
SELECT pg_backend_pid() AS pid \gset
\setenv BENCH_MEM_PID :pid
\! "$BENCH_DIR/mem-sampler" start
SELECT clock_timestamp() AS t0 \gset
SELECT row_to_json(r) AS result FROM etl_upsert_batch('orders_mem', 'TABLE batch_big') AS r \gset
SELECT round(1000 * extract(epoch FROM clock_timestamp() - :'t0'::timestamptz)) AS ms \gset
\! "$BENCH_DIR/mem-sampler" stop
\echo ms=:ms
\echo result=:result
