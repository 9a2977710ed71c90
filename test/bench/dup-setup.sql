-- idem_etl benchmark, dup workload (issue 11, item 1): batches with
-- duplicate keys.  psql variables: n_target, n_dup (the batch size, 1M at
-- scale 1), n_keys (distinct keys of the few-keys case, 1,000), with_etl.
--
--  dup_base   n_dup * 0.9 distinct rows: keys 2, 4, 6, ... (those up to
--             n_target exist in the target, every 5th of them with a changed
--             amount), in a scrambled order
--  dup_exact  dup_base plus an exact copy of every 9th row: n_dup rows, 10%
--             exact duplicates
--  dup_diff   dup_base plus, for every 9th row, an older version (a day
--             earlier, another amount): 10% differing duplicates that
--             order_by => 'updated_at DESC' resolves to dup_base's rows
--  dup_few_exact / dup_few_diff
--             n_dup rows over only n_keys keys (existing ones): identical
--             rows per key, or rows differing in updated_at (one newest each)
\set ON_ERROR_STOP 1
SET client_min_messages = warning;

SELECT (:n_dup * 9 / 10)::bigint AS n_base, 'wl_template_' || :n_target AS tmpl \gset

CALL wl_make_template(:'tmpl', :n_target);
VACUUM (ANALYZE) :"tmpl";

DROP TABLE IF EXISTS dup_base, dup_exact, dup_diff, dup_few_exact, dup_few_diff;
CREATE TABLE dup_base (order_id bigint NOT NULL, customer_id int, amount numeric(12,2),
                       status text, updated_at timestamptz) WITH (autovacuum_enabled = off);
CREATE TABLE dup_exact (LIKE dup_base) WITH (autovacuum_enabled = off);
CREATE TABLE dup_diff (LIKE dup_base) WITH (autovacuum_enabled = off);
CREATE TABLE dup_few_exact (LIKE dup_base) WITH (autovacuum_enabled = off);
CREATE TABLE dup_few_diff (LIKE dup_base) WITH (autovacuum_enabled = off);

-- g is the row's number; key 2g
CREATE TEMP VIEW dup_rows AS
SELECT g, 2 * g AS order_id, ((2 * g) * 7919) % 50000 + 1 AS customer_id,
       ((2 * g * 104729) % 1000000) / 100.0 + CASE WHEN g % 5 = 0 THEN 1 ELSE 0 END AS amount,
       (ARRAY['new', 'paid', 'shipped', 'delivered', 'returned'])[(2 * g) % 5 + 1] AS status,
       timestamptz '2024-01-01 00:00:00+00' + 2 * g * interval '1 second' AS updated_at
  FROM generate_series(1::bigint, :n_base) AS g;

INSERT INTO dup_base
SELECT order_id, customer_id, amount, status, updated_at FROM dup_rows ORDER BY md5(g::text);

INSERT INTO dup_exact
SELECT order_id, customer_id, amount, status, updated_at FROM (
    SELECT g, 0 AS v, order_id, customer_id, amount, status, updated_at FROM dup_rows
    UNION ALL
    SELECT g, 1, order_id, customer_id, amount, status, updated_at FROM dup_rows WHERE g % 9 = 0) AS x
 ORDER BY md5(g::text || v);

INSERT INTO dup_diff
SELECT order_id, customer_id, amount, status, updated_at FROM (
    SELECT g, 0 AS v, order_id, customer_id, amount, status, updated_at FROM dup_rows
    UNION ALL
    SELECT g, 1, order_id, customer_id, amount + 7, 'superseded', updated_at - interval '1 day'
      FROM dup_rows WHERE g % 9 = 0) AS x
 ORDER BY md5(g::text || v);

-- the few-keys case: key (g % n_keys) * (n_target / n_keys) + 1, all existing
INSERT INTO dup_few_exact
SELECT k, (k * 7919) % 50000 + 1, 1.00, 'few', timestamptz '2025-06-01 00:00:00+00'
  FROM (SELECT g, (g % :n_keys) * (:n_target / :n_keys) + 1 AS k
          FROM generate_series(1::bigint, :n_dup) AS g ORDER BY md5(g::text)) AS x;

INSERT INTO dup_few_diff
SELECT k, (k * 7919) % 50000 + 1, (g % 100000) / 100.0, 'few',
       timestamptz '2025-06-01 00:00:00+00' + g * interval '1 second'
  FROM (SELECT g, (g % :n_keys) * (:n_target / :n_keys) + 1 AS k
          FROM generate_series(1::bigint, :n_dup) AS g ORDER BY md5(g::text)) AS x;

VACUUM (ANALYZE) dup_base, dup_exact, dup_diff, dup_few_exact, dup_few_diff;

DELETE FROM wl_strategy WHERE wl LIKE 'dup%';
DELETE FROM wl_results WHERE wl LIKE 'dup%';

-- The hand-written statement: DISTINCT ON + ON CONFLICT ... WHERE IS DISTINCT
-- FROM (the best hand-written upsert of the upsert workload).
CREATE TEMP TABLE dup_hand_tail AS SELECT
$q$ ON CONFLICT (order_id) DO UPDATE
          SET customer_id = EXCLUDED.customer_id, amount = EXCLUDED.amount,
              status = EXCLUDED.status, updated_at = EXCLUDED.updated_at
          WHERE (orders.customer_id, orders.amount, orders.status, orders.updated_at)
                IS DISTINCT FROM
                (EXCLUDED.customer_id, EXCLUDED.amount, EXCLUDED.status, EXCLUDED.updated_at)$q$ AS t;

INSERT INTO wl_strategy (wl, sid, ord, label, kind, tmpl, stmts)
SELECT 'dup', sid, ord, label, kind, :'tmpl', ARRAY[stmt]
  FROM (VALUES
    ('nodup_h', 1, 'no duplicates: hand-written ON CONFLICT WHERE IS DISTINCT', 'hand',
     'INSERT INTO orders SELECT * FROM dup_base' || (SELECT t FROM dup_hand_tail)),
    ('nodup_e', 2, 'no duplicates: etl_upsert_batch', 'etl',
     $q$SELECT * FROM etl_upsert_batch('orders', 'TABLE dup_base')$q$),
    ('exact_h', 3, '10% exact duplicates: hand-written DISTINCT ON', 'hand',
     'INSERT INTO orders SELECT DISTINCT ON (order_id) * FROM dup_exact ORDER BY order_id' || (SELECT t FROM dup_hand_tail)),
    ('exact_e', 4, '10% exact duplicates: etl_upsert_batch', 'etl',
     $q$SELECT * FROM etl_upsert_batch('orders', 'TABLE dup_exact')$q$),
    ('diff_h', 5, '10% differing, newest wins: hand-written DISTINCT ON', 'hand',
     'INSERT INTO orders SELECT DISTINCT ON (order_id) * FROM dup_diff ORDER BY order_id, updated_at DESC' || (SELECT t FROM dup_hand_tail)),
    ('diff_e', 6, '10% differing, newest wins: etl_upsert_batch, order_by', 'etl',
     $q$SELECT * FROM etl_upsert_batch('orders', 'TABLE dup_diff', order_by => 'updated_at DESC')$q$),
    ('fewx_h', 7, format('%s keys, exact: hand-written DISTINCT ON', :n_keys), 'hand',
     'INSERT INTO orders SELECT DISTINCT ON (order_id) * FROM dup_few_exact ORDER BY order_id' || (SELECT t FROM dup_hand_tail)),
    ('fewx_e', 8, format('%s keys, exact: etl_upsert_batch', :n_keys), 'etl',
     $q$SELECT * FROM etl_upsert_batch('orders', 'TABLE dup_few_exact')$q$),
    ('fewd_h', 9, format('%s keys, differing: hand-written DISTINCT ON', :n_keys), 'hand',
     'INSERT INTO orders SELECT DISTINCT ON (order_id) * FROM dup_few_diff ORDER BY order_id, updated_at DESC' || (SELECT t FROM dup_hand_tail)),
    ('fewd_e', 10, format('%s keys, differing: etl_upsert_batch, order_by', :n_keys), 'etl',
     $q$SELECT * FROM etl_upsert_batch('orders', 'TABLE dup_few_diff', order_by => 'updated_at DESC')$q$)
  ) AS s(sid, ord, label, kind, stmt);

\if :with_etl
\else
DELETE FROM wl_strategy WHERE wl = 'dup' AND kind = 'etl';
\endif
