-- idem_etl benchmark, memory test: an empty target and an n_mem-row batch
-- (psql variable n_mem).  Deterministic: the keys 1..n_mem in a scrambled
-- order (g * 1000003 mod n_mem is a permutation when n_mem is not a multiple
-- of the prime 1000003).
\set ON_ERROR_STOP 1
SET client_min_messages = warning;

DROP TABLE IF EXISTS orders_mem, batch_big;
CREATE TABLE orders_mem (
    order_id    bigint PRIMARY KEY,
    customer_id int,
    amount      numeric(12,2),
    status      text,
    updated_at  timestamptz
) WITH (autovacuum_enabled = off);
CREATE INDEX orders_mem_customer_id_idx ON orders_mem (customer_id);

CREATE TABLE batch_big (LIKE orders_mem) WITH (autovacuum_enabled = off);
SELECT CASE WHEN :n_mem % 1000003 = 0 THEN 999983 ELSE 1000003 END AS mem_prime \gset
INSERT INTO batch_big
SELECT k,
       (k * 7919) % 50000 + 1,
       ((k * 104729) % 1000000) / 100.0,
       (ARRAY['new', 'paid', 'shipped', 'delivered', 'returned'])[k % 5 + 1],
       timestamptz '2024-01-01 00:00:00+00' + k * interval '1 second'
  FROM (SELECT (g * :mem_prime) % :n_mem + 1 AS k
          FROM generate_series(0::bigint, :n_mem - 1) AS g) AS s;
VACUUM (ANALYZE) orders_mem, batch_big;
CHECKPOINT;
