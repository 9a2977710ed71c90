-- idem_etl benchmark: data set, strategies and measuring helpers.
-- Run once per benchmark by run-bench (psql variables: n_target, n_batch,
-- with_etl).  Everything here is deterministic: generate_series and
-- arithmetic only, no random().
\set ON_ERROR_STOP 1
SET client_min_messages = warning;
SET check_function_bodies = off;   -- the helpers refer to orders, created per measurement

SELECT (:n_batch / 2)::bigint AS n_half,
       (:n_target / (:n_batch / 2))::bigint AS stride \gset

-- The template every measurement copies: order_id 1..n_target, in key order.
CREATE TABLE orders_template (
    order_id    bigint NOT NULL,
    customer_id int,
    amount      numeric(12,2),
    status      text,
    updated_at  timestamptz
) WITH (autovacuum_enabled = off);

INSERT INTO orders_template
SELECT g,
       (g * 7919) % 50000 + 1,
       ((g * 104729) % 1000000) / 100.0,
       (ARRAY['new', 'paid', 'shipped', 'delivered', 'returned'])[g % 5 + 1],
       timestamptz '2024-01-01 00:00:00+00' + g * interval '1 second'
  FROM generate_series(1::bigint, :n_target) AS g;

-- The batch: n_half existing keys spread evenly over the whole table (every
-- stride-th key, so every heap page is touched), a tenth of them changed in
-- amount, status and updated_at, the rest identical to the stored rows; and
-- n_half new keys above the current maximum.  Stored in a scrambled but
-- deterministic order, as a batch from a file or an API would come.
CREATE TABLE batch (LIKE orders_template) WITH (autovacuum_enabled = off);

INSERT INTO batch
SELECT * FROM (
    SELECT t.order_id,
           t.customer_id,
           CASE WHEN s.i % 10 = 0 THEN t.amount + 1.00 ELSE t.amount END,
           CASE WHEN s.i % 10 = 0 THEN 'corrected' ELSE t.status END,
           CASE WHEN s.i % 10 = 0 THEN t.updated_at + interval '1 day' ELSE t.updated_at END
      FROM generate_series(1::bigint, :n_half) AS s(i)
      JOIN orders_template AS t ON t.order_id = s.i * :stride
    UNION ALL
    SELECT :n_target + g,
           ((:n_target + g) * 7919) % 50000 + 1,
           (((:n_target + g) * 104729) % 1000000) / 100.0,
           'new',
           timestamptz '2025-01-01 00:00:00+00' + g * interval '1 second'
      FROM generate_series(1::bigint, :n_half) AS g
) AS x
ORDER BY md5(order_id::text);

VACUUM (ANALYZE) orders_template, batch;

-- What the target must hold after any strategy: an order-independent digest
-- of (template rows whose key is not in the batch) + (batch rows).
CREATE TABLE bench_expected AS
SELECT count(*) AS n_rows, sum(hashtext(x::text)::bigint) AS digest
  FROM (SELECT t.order_id, t.customer_id, t.amount, t.status, t.updated_at
          FROM orders_template AS t
         WHERE NOT EXISTS (SELECT 1 FROM batch AS b WHERE b.order_id = t.order_id)
        UNION ALL
        SELECT b.order_id, b.customer_id, b.amount, b.status, b.updated_at
          FROM batch AS b) AS x;

-- The strategies.  kind: 'hand' = hand-written statement counted for "best
-- hand-written"; 'extra' = hand-written, shown but not counted; 'etl' =
-- etl_upsert_batch; 'baseline' = reference insert into an empty table.
-- Each phase is a list of statements run in one transaction; %REP% is
-- replaced by the repetition number.
CREATE TABLE bench_strategy (
    sid        text PRIMARY KEY,
    ord        int  NOT NULL,
    label      text NOT NULL,
    kind       text NOT NULL,
    first_sql  text[] NOT NULL,
    rerun_sql  text[]
);

INSERT INTO bench_strategy VALUES
('a', 1, '(a) INSERT ON CONFLICT DO UPDATE', 'hand',
 ARRAY[$q$INSERT INTO orders SELECT * FROM batch
          ON CONFLICT (order_id) DO UPDATE
          SET customer_id = EXCLUDED.customer_id, amount = EXCLUDED.amount,
              status = EXCLUDED.status, updated_at = EXCLUDED.updated_at$q$],
 NULL),
('b', 2, '(b) ON CONFLICT DO UPDATE WHERE IS DISTINCT', 'hand',
 ARRAY[$q$INSERT INTO orders SELECT * FROM batch
          ON CONFLICT (order_id) DO UPDATE
          SET customer_id = EXCLUDED.customer_id, amount = EXCLUDED.amount,
              status = EXCLUDED.status, updated_at = EXCLUDED.updated_at
          WHERE (orders.customer_id, orders.amount, orders.status, orders.updated_at)
                IS DISTINCT FROM
                (EXCLUDED.customer_id, EXCLUDED.amount, EXCLUDED.status, EXCLUDED.updated_at)$q$],
 NULL),
('c', 3, '(c) MERGE', 'hand',
 ARRAY[$q$MERGE INTO orders AS o USING batch AS b ON o.order_id = b.order_id
          WHEN MATCHED THEN UPDATE
               SET customer_id = b.customer_id, amount = b.amount,
                   status = b.status, updated_at = b.updated_at
          WHEN NOT MATCHED THEN INSERT (order_id, customer_id, amount, status, updated_at)
               VALUES (b.order_id, b.customer_id, b.amount, b.status, b.updated_at)$q$],
 NULL),
('d', 4, '(d) DELETE + INSERT, one transaction', 'hand',
 ARRAY[$q$DELETE FROM orders WHERE order_id IN (SELECT order_id FROM batch)$q$,
       $q$INSERT INTO orders SELECT * FROM batch$q$],
 NULL),
('m', 5, '(m) MERGE WHEN MATCHED AND IS DISTINCT', 'extra',
 ARRAY[$q$MERGE INTO orders AS o USING batch AS b ON o.order_id = b.order_id
          WHEN MATCHED AND (o.customer_id, o.amount, o.status, o.updated_at)
                           IS DISTINCT FROM
                           (b.customer_id, b.amount, b.status, b.updated_at) THEN UPDATE
               SET customer_id = b.customer_id, amount = b.amount,
                   status = b.status, updated_at = b.updated_at
          WHEN NOT MATCHED THEN INSERT (order_id, customer_id, amount, status, updated_at)
               VALUES (b.order_id, b.customer_id, b.amount, b.status, b.updated_at)$q$],
 NULL),
('e', 6, '(e) etl_upsert_batch', 'etl',
 ARRAY[$q$SELECT * FROM etl_upsert_batch('orders', 'TABLE batch')$q$],
 NULL),
('f', 7, '(f) etl_upsert_batch, run_key', 'etl',
 ARRAY[$q$SELECT * FROM etl_upsert_batch('orders', 'TABLE batch', run_key => 'bench-%REP%')$q$],
 NULL),
('z', 8, 'baseline: INSERT batch into empty table', 'baseline',
 ARRAY[$q$INSERT INTO orders SELECT * FROM batch$q$],
 NULL);

-- The identical rerun applies the same statements again.
UPDATE bench_strategy SET rerun_sql = first_sql WHERE kind <> 'baseline';

\if :with_etl
\else
DELETE FROM bench_strategy WHERE kind = 'etl';
\endif

CREATE TABLE bench_results (
    sid          text NOT NULL,
    phase        text NOT NULL,   -- 'first' or 'rerun'
    rep          int  NOT NULL,
    ms           double precision,
    wal_bytes    numeric,
    dead_before  bigint,          -- n_dead_tup of the target before the phase
    dead_after   bigint,          -- ... and after it
    upd_before   bigint,          -- n_tup_upd + n_tup_del before the phase
    upd_after    bigint,          -- ... and after it: the difference is the
                                  -- number of dead row versions the phase made
    ckpt_during  boolean,         -- a checkpoint completed inside the timed part
    result       text,            -- etl_upsert_batch's result row, as JSON
    PRIMARY KEY (sid, phase, rep)
);

CREATE TABLE bench_digest (
    sid     text PRIMARY KEY,
    n_rows  bigint,
    digest  numeric
);

-- n_dead_tup drops when a later statement prunes a page (the rerun's reads
-- can prune what the first apply left), so the dead row versions a phase
-- makes are counted from n_tup_upd + n_tup_del, which only grow.
CREATE FUNCTION bench_dead_tuples() RETURNS bigint
LANGUAGE sql AS $$
    SELECT coalesce((SELECT n_dead_tup FROM pg_stat_user_tables
                      WHERE relid = to_regclass('orders')), 0)
$$;

CREATE FUNCTION bench_upd_del() RETURNS bigint
LANGUAGE sql AS $$
    SELECT coalesce((SELECT n_tup_upd + n_tup_del FROM pg_stat_user_tables
                      WHERE relid = to_regclass('orders')), 0)
$$;

-- Call after SELECT pg_stat_force_next_flush() in a separate statement.
CREATE FUNCTION bench_dead_before(p_sid text, p_phase text, p_rep int) RETURNS void
LANGUAGE sql AS $$
    INSERT INTO bench_results (sid, phase, rep, dead_before, upd_before)
    VALUES (p_sid, p_phase, p_rep, bench_dead_tuples(), bench_upd_del())
$$;

CREATE FUNCTION bench_dead_after(p_sid text, p_phase text, p_rep int) RETURNS void
LANGUAGE sql AS $$
    UPDATE bench_results SET dead_after = bench_dead_tuples(), upd_after = bench_upd_del()
     WHERE sid = p_sid AND phase = p_phase AND rep = p_rep
$$;

CREATE FUNCTION bench_take_digest(p_sid text) RETURNS void
LANGUAGE sql AS $$
    INSERT INTO bench_digest
    SELECT p_sid, count(*), sum(hashtext(o::text)::bigint) FROM orders AS o
$$;

-- The timed part.  Timing and WAL are taken inside the server, so psql and
-- the network add nothing: the statements of one phase run in a transaction
-- of their own, and the time runs from just before the first statement to
-- just after COMMIT returns (the commit is included, the same for all).
-- WAL is the difference of the WAL insert position over the same span
-- (pg_current_wal_insert_lsn rather than pg_current_wal_lsn, whose write
-- position can lag behind records already inserted; after a commit both
-- are past the commit record).
CREATE PROCEDURE bench_timed(p_sid text, p_phase text, p_rep int)
LANGUAGE plpgsql AS $$
DECLARE
    stmts  text[];
    res    text;
    t0     timestamptz;
    t1     timestamptz;
    l0     pg_lsn;
    l1     pg_lsn;
    redo0  pg_lsn;
    redo1  pg_lsn;
BEGIN
    SELECT CASE p_phase WHEN 'first' THEN first_sql ELSE rerun_sql END
      INTO stmts FROM bench_strategy WHERE sid = p_sid;
    redo0 := (pg_control_checkpoint()).redo_lsn;
    COMMIT;                             -- the timed statements get a transaction of their own

    l0 := pg_current_wal_insert_lsn();
    t0 := clock_timestamp();
    res := bench_exec(stmts, p_rep);    -- bench-common.sql
    COMMIT;
    t1 := clock_timestamp();
    l1 := pg_current_wal_insert_lsn();

    redo1 := (pg_control_checkpoint()).redo_lsn;
    UPDATE bench_results
       SET ms = 1000 * extract(epoch FROM t1 - t0),
           wal_bytes = pg_wal_lsn_diff(l1, l0),
           ckpt_during = (redo1 <> redo0),
           result = res
     WHERE sid = p_sid AND phase = p_phase AND rep = p_rep;
    COMMIT;
END
$$;
