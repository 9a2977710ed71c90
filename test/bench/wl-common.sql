-- idem_etl benchmark: what the issue-11 workloads (dup-run, matrix-run,
-- small-run) share: target templates, a strategy table, a results table and
-- the timed procedure.  Idempotent: each workload script runs it first.
\set ON_ERROR_STOP 1
SET client_min_messages = warning;
SET check_function_bodies = off;

-- The orders table of the upsert workload, n rows, key 1..n in key order,
-- as an unindexed template that each measurement copies.
CREATE OR REPLACE PROCEDURE wl_make_template(p_name text, p_n bigint)
LANGUAGE plpgsql AS $$
BEGIN
    IF to_regclass(p_name) IS NOT NULL THEN
        RETURN;
    END IF;
    EXECUTE format($f$CREATE TABLE %I (
        order_id bigint NOT NULL, customer_id int, amount numeric(12,2),
        status text, updated_at timestamptz) WITH (autovacuum_enabled = off)$f$, p_name);
    EXECUTE format($f$INSERT INTO %I
        SELECT g, (g * 7919) %% 50000 + 1, ((g * 104729) %% 1000000) / 100.0,
               (ARRAY['new', 'paid', 'shipped', 'delivered', 'returned'])[g %% 5 + 1],
               timestamptz '2024-01-01 00:00:00+00' + g * interval '1 second'
          FROM generate_series(1::bigint, %s) AS g$f$, p_name, p_n);
    COMMIT;
    EXECUTE format('ANALYZE %I', p_name);
END
$$;

-- A fresh copy of a template as orders, with the primary key and the
-- secondary index (the caller vacuums it: VACUUM cannot run in a procedure).
CREATE OR REPLACE PROCEDURE wl_fresh_orders(p_template text)
LANGUAGE plpgsql AS $$
BEGIN
    DROP TABLE IF EXISTS orders;
    CREATE TABLE orders (
        order_id bigint NOT NULL, customer_id int, amount numeric(12,2),
        status text, updated_at timestamptz) WITH (autovacuum_enabled = off);
    SET LOCAL maintenance_work_mem = '512MB';
    EXECUTE format('INSERT INTO orders SELECT * FROM %I', p_template);
    ALTER TABLE orders ADD CONSTRAINT orders_pkey PRIMARY KEY (order_id);
    CREATE INDEX orders_customer_id_idx ON orders (customer_id);
    COMMIT;
END
$$;

CREATE TABLE IF NOT EXISTS wl_strategy (
    wl     text NOT NULL,      -- workload (and case)
    sid    text NOT NULL,
    ord    int  NOT NULL,
    label  text NOT NULL,
    kind   text NOT NULL,      -- 'hand', 'etl'
    tmpl   text,               -- the template the target is copied from
    stmts  text[] NOT NULL,
    PRIMARY KEY (wl, sid)
);

CREATE TABLE IF NOT EXISTS wl_results (
    wl      text NOT NULL,
    sid     text NOT NULL,
    rep     int  NOT NULL,
    ms      double precision,
    wal     numeric,
    result  text,
    digest  numeric,
    PRIMARY KEY (wl, sid, rep)
);

-- Timed inside the server, commit included, like bench_timed (setup.sql).
CREATE OR REPLACE PROCEDURE wl_timed(p_wl text, p_sid text, p_rep int)
LANGUAGE plpgsql AS $$
DECLARE
    stmts text[];
    res   text;
    t0    timestamptz;
    t1    timestamptz;
    l0    pg_lsn;
    l1    pg_lsn;
BEGIN
    SELECT w.stmts INTO stmts FROM wl_strategy AS w WHERE wl = p_wl AND sid = p_sid;
    COMMIT;
    l0 := pg_current_wal_insert_lsn();
    t0 := clock_timestamp();
    res := bench_exec(stmts, p_rep);    -- bench-common.sql
    COMMIT;
    t1 := clock_timestamp();
    l1 := pg_current_wal_insert_lsn();
    INSERT INTO wl_results (wl, sid, rep, ms, wal, result)
    VALUES (p_wl, p_sid, p_rep, 1000 * extract(epoch FROM t1 - t0), pg_wal_lsn_diff(l1, l0), res)
    ON CONFLICT (wl, sid, rep) DO UPDATE SET ms = EXCLUDED.ms, wal = EXCLUDED.wal, result = EXCLUDED.result;
    COMMIT;
END
$$;

CREATE OR REPLACE PROCEDURE wl_take_digest(p_wl text, p_sid text, p_rep int)
LANGUAGE sql AS $$
    UPDATE wl_results SET digest = (SELECT sum(hashtext(o::text)::bigint) FROM orders AS o)
     WHERE wl = p_wl AND sid = p_sid AND rep = p_rep
$$;

-- Medians per strategy, and the ratio to the best hand-written one of the
-- same workload case.
CREATE OR REPLACE VIEW wl_med AS
SELECT w.wl, w.sid, w.ord, w.label, w.kind,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY r.ms) AS ms,
       min(r.ms) AS ms_min, max(r.ms) AS ms_max, count(*) AS n,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY r.wal::float8) AS wal,
       min(r.result) AS result
  FROM wl_strategy AS w JOIN wl_results AS r USING (wl, sid)
 GROUP BY w.wl, w.sid, w.ord, w.label, w.kind;
