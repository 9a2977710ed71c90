-- idem_etl benchmark: one measurement of one strategy (psql variables: sid,
-- rep, baseline, rerun, digest).  Builds a fresh copy of the target named
-- orders, outside the timing, then times the first apply and, unless this is
-- the baseline, the identical rerun of the same batch on the same copy.
\set ON_ERROR_STOP 1
SET client_min_messages = warning;

DROP TABLE IF EXISTS orders;
CREATE TABLE orders (
    order_id    bigint NOT NULL,
    customer_id int,
    amount      numeric(12,2),
    status      text,
    updated_at  timestamptz
) WITH (autovacuum_enabled = off);

\if :baseline
-- reference: the batch inserted into an empty table with no index
\else
SET maintenance_work_mem = '512MB';     -- this session only: quicker index builds
INSERT INTO orders SELECT * FROM orders_template;
ALTER TABLE orders ADD CONSTRAINT orders_pkey PRIMARY KEY (order_id);
CREATE INDEX orders_customer_id_idx ON orders (customer_id);
RESET maintenance_work_mem;
\endif
-- hint bits set, visibility map built, statistics fresh, no dead tuples
VACUUM (ANALYZE) orders;

-- Every timed phase starts right after a checkpoint: no checkpoint can fall
-- inside it (max_wal_size is far above what a phase writes, checkpoint_timeout
-- is long), and every strategy pays the same full-page images for the pages
-- it is first to modify.
SELECT pg_stat_force_next_flush() \g /dev/null
SELECT bench_dead_before(:'sid', 'first', :rep) \g /dev/null
CHECKPOINT;
CALL bench_timed(:'sid', 'first', :rep);
SELECT pg_stat_force_next_flush() \g /dev/null
SELECT bench_dead_after(:'sid', 'first', :rep) \g /dev/null

\if :rerun
-- The rerun starts from a vacuumed target, as it would once autovacuum has
-- been by.  Without this, the first statement to read a page the first apply
-- updated prunes it (and sets hint bits), writing WAL and full-page images
-- for thousands of pages whatever that statement is (a plain SELECT too),
-- which would be charged to the rerun.
VACUUM orders;
SELECT pg_stat_force_next_flush() \g /dev/null
SELECT bench_dead_before(:'sid', 'rerun', :rep) \g /dev/null
CHECKPOINT;
CALL bench_timed(:'sid', 'rerun', :rep);
SELECT pg_stat_force_next_flush() \g /dev/null
SELECT bench_dead_after(:'sid', 'rerun', :rep) \g /dev/null
\endif

\if :digest
SELECT bench_take_digest(:'sid') \g /dev/null
\endif

DROP TABLE orders;
