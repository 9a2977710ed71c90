-- idem_etl benchmark, matrix workload (issue 11, item 4): one target per
-- size and one batch per (target, batch size), built by formula (psql
-- variables: n_target, sizes (comma-separated batch sizes), with_etl).
-- The target mx_orders_<n> holds keys 1..n with the values of the upsert
-- workload's template; a batch of b rows has b/2 existing keys spread over
-- the whole target (a tenth of them changed) and b/2 new keys above n, in a
-- scrambled order, as in the upsert workload.
\set ON_ERROR_STOP 1
SET client_min_messages = warning;

CREATE OR REPLACE FUNCTION mx_row(k bigint, changed boolean,
    OUT order_id bigint, OUT customer_id int, OUT amount numeric(12,2), OUT status text, OUT updated_at timestamptz)
LANGUAGE sql IMMUTABLE AS $$
    SELECT k, ((k * 7919) % 50000 + 1)::int,
           ((k * 104729) % 1000000) / 100.0 + CASE WHEN changed THEN 1 ELSE 0 END,
           CASE WHEN changed THEN 'corrected' ELSE (ARRAY['new', 'paid', 'shipped', 'delivered', 'returned'])[k % 5 + 1] END,
           timestamptz '2024-01-01 00:00:00+00' + k * interval '1 second' + CASE WHEN changed THEN interval '1 day' ELSE interval '0' END
$$;

SELECT 'mx_orders_' || :n_target AS tgt \gset
SELECT to_regclass(:'tgt') IS NULL AS build \gset
\if :build
SET maintenance_work_mem = '512MB';
CREATE TABLE :"tgt" (
    order_id bigint NOT NULL, customer_id int, amount numeric(12,2),
    status text, updated_at timestamptz) WITH (autovacuum_enabled = off);
INSERT INTO :"tgt" SELECT (mx_row(g, false)).* FROM generate_series(1::bigint, :n_target) AS g;
ALTER TABLE :"tgt" ADD PRIMARY KEY (order_id);
CREATE INDEX ON :"tgt" (customer_id);
RESET maintenance_work_mem;
VACUUM (ANALYZE) :"tgt";
\endif

CREATE TABLE IF NOT EXISTS mx_batches (n_target bigint, n_batch bigint, name text, PRIMARY KEY (n_target, n_batch));
SELECT format(q, 'mx_b_' || :n_target || '_' || b, :'tgt', :n_target, b)
  FROM unnest(string_to_array(:'sizes', ',')::bigint[]) AS b,
       unnest(ARRAY[
           'CREATE TABLE IF NOT EXISTS %1$I (LIKE %2$I) WITH (autovacuum_enabled = off)',
           'TRUNCATE %1$I',
           $f$INSERT INTO %1$I
              SELECT (mx_row(k, changed)).* FROM (
                  SELECT s * (%3$s / (%4$s / 2)) AS k, s %% 10 = 0 AS changed, s AS o
                    FROM generate_series(1::bigint, %4$s / 2) AS s
                  UNION ALL
                  SELECT %3$s + s, false, s + %4$s FROM generate_series(1::bigint, %4$s / 2) AS s) AS x
               ORDER BY md5(o::text)$f$,
           'VACUUM (ANALYZE) %1$I',
           'INSERT INTO mx_batches VALUES (%3$s, %4$s, %1$L) ON CONFLICT DO NOTHING']) WITH ORDINALITY AS u(q, i)
 ORDER BY b, i \gexec

-- Undo what a strategy did to the target: remove the new keys, give the
-- changed rows their values back (outside the timing; the caller vacuums).
CREATE OR REPLACE PROCEDURE mx_restore(p_target text, p_n bigint, p_batch text)
LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format('DELETE FROM %I WHERE order_id > %s', p_target, p_n);
    EXECUTE format($f$UPDATE %1$I AS o SET customer_id = r.customer_id, amount = r.amount, status = r.status, updated_at = r.updated_at
                        FROM %2$I AS b, LATERAL mx_row(b.order_id, false) AS r
                       WHERE o.order_id = b.order_id AND b.order_id <= %3$s
                         AND (o.customer_id, o.amount, o.status, o.updated_at) IS DISTINCT FROM
                             (r.customer_id, r.amount, r.status, r.updated_at)$f$, p_target, p_batch, p_n);
    COMMIT;
END
$$;

-- The diff (w) is given, computed on the state before the first apply
-- (after mx_restore and VACUUM; outside the timing): the batch's rows of
-- stored keys, its new rows, and its changed rows with the tuple identifier
-- of the stored version, each in the order the timed statement reads it.
CREATE OR REPLACE PROCEDURE mx_w_prep(p_target text, p_batch text)
LANGUAGE plpgsql AS $$
BEGIN
    DROP TABLE IF EXISTS mx_w_stored, mx_w_new, mx_w_changed;
    EXECUTE format('CREATE TABLE mx_w_stored WITH (autovacuum_enabled = off) AS
                    SELECT b.* FROM %I AS b JOIN %I AS o USING (order_id) ORDER BY order_id', p_batch, p_target);
    EXECUTE format('CREATE TABLE mx_w_new WITH (autovacuum_enabled = off) AS
                    SELECT b.* FROM %I AS b WHERE NOT EXISTS (SELECT FROM %I AS o WHERE o.order_id = b.order_id)
                     ORDER BY order_id', p_batch, p_target);
    EXECUTE format($f$CREATE TABLE mx_w_changed WITH (autovacuum_enabled = off) AS
                      SELECT o.ctid AS tid, b.* FROM %I AS b JOIN %I AS o USING (order_id)
                       WHERE (o.customer_id, o.amount, o.status, o.updated_at) IS DISTINCT FROM
                             (b.customer_id, b.amount, b.status, b.updated_at)
                       ORDER BY o.ctid$f$, p_batch, p_target);
    ANALYZE mx_w_stored, mx_w_new, mx_w_changed;
    COMMIT;
END
$$;

CREATE TABLE IF NOT EXISTS mx_results (
    n_target bigint, n_batch bigint, sid text, phase text, rep int, ms double precision, result text,
    PRIMARY KEY (n_target, n_batch, sid, phase, rep));

-- The strategies: (b) and (m), the best hand-written ones of the upsert
-- workload at every size measured there, (e), and the floors of a first
-- apply (w) and of an identical rerun (f*).  %T% is the target, %B% the
-- batch.
CREATE TABLE IF NOT EXISTS mx_strategy (sid text PRIMARY KEY, ord int, label text, kind text, stmt text);
TRUNCATE mx_strategy;
INSERT INTO mx_strategy VALUES
('b', 1, '(b) ON CONFLICT DO UPDATE WHERE IS DISTINCT', 'hand',
 $q$INSERT INTO %T% AS o SELECT * FROM %B%
    ON CONFLICT (order_id) DO UPDATE
    SET customer_id = EXCLUDED.customer_id, amount = EXCLUDED.amount,
        status = EXCLUDED.status, updated_at = EXCLUDED.updated_at
    WHERE (o.customer_id, o.amount, o.status, o.updated_at)
          IS DISTINCT FROM
          (EXCLUDED.customer_id, EXCLUDED.amount, EXCLUDED.status, EXCLUDED.updated_at)$q$),
('m', 2, '(m) MERGE WHEN MATCHED AND IS DISTINCT', 'hand',
 $q$MERGE INTO %T% AS o USING %B% AS b ON o.order_id = b.order_id
    WHEN MATCHED AND (o.customer_id, o.amount, o.status, o.updated_at)
                     IS DISTINCT FROM
                     (b.customer_id, b.amount, b.status, b.updated_at) THEN UPDATE
         SET customer_id = b.customer_id, amount = b.amount,
             status = b.status, updated_at = b.updated_at
    WHEN NOT MATCHED THEN INSERT (order_id, customer_id, amount, status, updated_at)
         VALUES (b.order_id, b.customer_id, b.amount, b.status, b.updated_at)$q$),
('e', 3, '(e) etl_upsert_batch', 'etl',
 $q$SELECT * FROM etl_upsert_batch('%T%', 'TABLE %B%')$q$),
-- Not upserts: the least any upsert that writes only changed rows must do,
-- looking every key up and comparing, as one read-only join; the floor is
-- the fastest of the planner's plan (f), an index nested loop in the
-- batch's order (fn) and in key order (fs, the batch sorted first, as
-- etl_upsert_batch probes), and a merge join (fm).  Statements are
-- separated by ';;'; %S% is the batch as the join reads it.
('f', 4, '(f) read-only lookup join', 'rerun floor', NULL),
('fn', 5, '(f) read-only lookup join, nested loop', 'rerun floor',
 'SET LOCAL enable_hashjoin = off;; SET LOCAL enable_mergejoin = off;; '),
('fs', 6, '(f) read-only lookup join, sorted batch, nested loop', 'rerun floor',
 'SET LOCAL enable_hashjoin = off;; SET LOCAL enable_mergejoin = off;; '),
('fm', 7, '(f) read-only lookup join, merge join', 'rerun floor',
 'SET LOCAL enable_hashjoin = off;; SET LOCAL enable_nestloop = off;; '),
-- Not an upsert either: the least a first apply must do, the work left
-- when the diff is known beforehand (mx_w_prep computes it, untimed): the
-- stored keys looked up and compared (one index descent each, read-only),
-- a plain INSERT of the new rows (an upsert cannot insert with less: the
-- unique index descends once per row), and an UPDATE of the changed rows
-- by the tuple identifiers the prep found (no lookup at all).  Each part is
-- work every upsert does; what the oracle saves is telling them apart.  The
-- fastest of the planner's plan (w) and an index nested loop (wn) for the
-- lookup, in key order either way.
('w', 8, '(w) the writes alone, the diff known', 'first floor', NULL),
('wn', 9, '(w) the writes alone, the diff known, nested loop', 'first floor',
 'SET LOCAL enable_hashjoin = off;; SET LOCAL enable_mergejoin = off;; ');
UPDATE mx_strategy SET stmt = coalesce(stmt, '') ||
 $q$SELECT count(*) FROM mx_w_stored AS b JOIN %T% AS o ON o.order_id = b.order_id
     WHERE (o.customer_id, o.amount, o.status, o.updated_at)
           IS DISTINCT FROM
           (b.customer_id, b.amount, b.status, b.updated_at);;
    INSERT INTO %T% SELECT * FROM mx_w_new;;
    UPDATE %T% AS o SET customer_id = c.customer_id, amount = c.amount,
                        status = c.status, updated_at = c.updated_at
      FROM mx_w_changed AS c WHERE o.ctid = c.tid$q$
 WHERE kind = 'first floor';
UPDATE mx_strategy SET stmt = coalesce(stmt, '') ||
 $q$SELECT count(*) FROM %S% AS b LEFT JOIN %T% AS o ON o.order_id = b.order_id
    WHERE o.order_id IS NULL
       OR (o.customer_id, o.amount, o.status, o.updated_at)
          IS DISTINCT FROM
          (b.customer_id, b.amount, b.status, b.updated_at)$q$
 WHERE kind = 'rerun floor';
UPDATE mx_strategy SET stmt = replace(stmt, '%S%', CASE sid WHEN 'fs' THEN '(SELECT * FROM %B% ORDER BY order_id OFFSET 0)' ELSE '%B%' END)
 WHERE kind = 'rerun floor';
\if :with_etl
\else
DELETE FROM mx_strategy WHERE kind = 'etl';
\endif

CREATE OR REPLACE PROCEDURE mx_timed(p_n bigint, p_b bigint, p_sid text, p_phase text, p_rep int)
LANGUAGE plpgsql AS $$
DECLARE
    s   text;
    res text;
    t0  timestamptz;
    t1  timestamptz;
BEGIN
    SELECT replace(replace(stmt, '%T%', 'mx_orders_' || p_n), '%B%', 'mx_b_' || p_n || '_' || p_b)
      INTO s FROM mx_strategy WHERE sid = p_sid;
    COMMIT;
    t0 := clock_timestamp();
    res := bench_exec(string_to_array(s, ';;'), p_rep);  -- bench-common.sql
    COMMIT;
    t1 := clock_timestamp();
    INSERT INTO mx_results VALUES (p_n, p_b, p_sid, p_phase, p_rep, 1000 * extract(epoch FROM t1 - t0), res)
    ON CONFLICT (n_target, n_batch, sid, phase, rep) DO UPDATE SET ms = EXCLUDED.ms, result = EXCLUDED.result;
    COMMIT;
END
$$;
