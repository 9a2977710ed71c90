-- An example daily pipeline with idem_etl, run by `make demo` (demo/run-demo)
-- in a throwaway cluster.  Each day an extractor fills a staging table and
-- the load merges it into a fact table with etl_upsert_batch.  The point:
-- whatever gets rerun, retried or fails half-way, the facts stay right.
\set ON_ERROR_STOP on
\pset footer off

\echo
\echo '== Set-up: the extension, a fact table keyed by sale_id, a staging table'
CREATE EXTENSION idem_etl;
CREATE TABLE daily_sales (
    sale_id   bigint PRIMARY KEY,
    sale_date date          NOT NULL,
    store     text          NOT NULL,
    amount    numeric(10,2) NOT NULL
);
CREATE TABLE staging_sales (LIKE daily_sales);   -- no key: extracts can be messy

-- The extractor delivers the sales of 2024-06-01.
INSERT INTO staging_sales VALUES
    (1001, '2024-06-01', 'Lyon',  19.90),
    (1002, '2024-06-01', 'Lyon',  5.00),
    (1003, '2024-06-01', 'Paris', 42.00),
    (1004, '2024-06-01', 'Paris', 7.50),
    (1005, '2024-06-01', 'Nice',  12.00);

\echo
\echo '== 1. First load of 2024-06-01 (run_key = the business day): 5 rows inserted'
SELECT * FROM etl_upsert_batch('daily_sales', 'TABLE staging_sales',
                               run_key => '2024-06-01');

\echo '== 2. The same batch again, without run_key (say, a retried job):'
\echo '      every row compares equal, so nothing is written: unchanged = 5'
SELECT string_agg(xmin::text, ',' ORDER BY sale_id) AS xmins FROM daily_sales \gset
SELECT * FROM etl_upsert_batch('daily_sales', 'TABLE staging_sales');
SELECT string_agg(xmin::text, ',' ORDER BY sale_id) = :'xmins' AS no_row_rewritten
  FROM daily_sales;

\echo '== 3. The same batch again with its run_key: the ledger already has this'
\echo '      exact batch for 2024-06-01, so the call is skipped (and says so)'
SELECT * FROM etl_upsert_batch('daily_sales', 'TABLE staging_sales',
                               run_key => '2024-06-01');

\echo '== 4. 2024-06-02: 3 new sales, a late correction of sale 1003, and an'
\echo '      extractor bug: sale 1008 twice with different amounts.  Which one'
\echo '      is right cannot be decided, so the whole load fails ...'
TRUNCATE staging_sales;
INSERT INTO staging_sales VALUES
    (1003, '2024-06-01', 'Paris', 40.00),     -- corrected amount
    (1006, '2024-06-02', 'Lyon',  8.00),
    (1007, '2024-06-02', 'Nice',  30.00),
    (1008, '2024-06-02', 'Paris', 15.00),
    (1008, '2024-06-02', 'Paris', 51.00);     -- the bad row
SELECT count(*) AS sales_before, (SELECT count(*) FROM idem_etl.runs) AS runs_before
  FROM daily_sales \gset
\set ON_ERROR_STOP off
SELECT * FROM etl_upsert_batch('daily_sales', 'TABLE staging_sales',
                               run_key => '2024-06-02');
\set ON_ERROR_STOP on
\echo '   ... and leaves nothing behind: no new sale, 1003 not corrected, no ledger row'
SELECT :'SQLSTATE' AS error,
       count(*) = :sales_before AS sales_unchanged,
       (SELECT amount FROM daily_sales WHERE sale_id = 1003) AS amount_1003,
       (SELECT count(*) FROM idem_etl.runs) = :runs_before AS ledger_unchanged
  FROM daily_sales;

\echo '== 5. The extractor is fixed and the day is rerun: 3 inserted, 1 updated'
DELETE FROM staging_sales WHERE sale_id = 1008 AND amount = 51.00;
SELECT * FROM etl_upsert_batch('daily_sales', 'TABLE staging_sales',
                               run_key => '2024-06-02');
SELECT sale_date, count(*) AS sales, sum(amount) AS total
  FROM daily_sales GROUP BY sale_date ORDER BY sale_date;

\echo '== 6. A daily summary partitioned by day: each run replaces its day as a'
\echo '      whole (a fresh table swapped in), so a rerun cannot double the totals'
CREATE TABLE store_day (
    sale_date date          NOT NULL,
    store     text          NOT NULL,
    total     numeric(12,2) NOT NULL,
    PRIMARY KEY (sale_date, store)
) PARTITION BY RANGE (sale_date);
SELECT partition_table, rows_loaded, rows_replaced, skipped
  FROM etl_replace_partition('store_day', '2024-06-02',
       $$SELECT sale_date, store, sum(amount) AS total FROM daily_sales
          WHERE sale_date = '2024-06-02' GROUP BY 1, 2$$,
       granularity => '1 day', run_key => '2024-06-02');
\echo '   the same run again: skipped, the partition is not rewritten'
SELECT partition_table, rows_loaded, rows_replaced, skipped
  FROM etl_replace_partition('store_day', '2024-06-02',
       $$SELECT sale_date, store, sum(amount) AS total FROM daily_sales
          WHERE sale_date = '2024-06-02' GROUP BY 1, 2$$,
       granularity => '1 day', run_key => '2024-06-02');

\echo '== 7. The same load handed to the background worker, which retries it on'
\echo '      transient errors; etl_wait sleeps until it has ended'
SELECT etl_submit($$SELECT etl_replace_partition('store_day', '2024-06-01',
         'SELECT sale_date, store, sum(amount) AS total FROM daily_sales
           WHERE sale_date = ''2024-06-01'' GROUP BY 1, 2',
         granularity => '1 day')$$, job_name => 'store_day 2024-06-01') AS job_id \gset
SELECT etl_wait(:job_id, '1 minute') AS job_status;
SELECT sale_date, store, total FROM store_day ORDER BY 1, 2;

\echo '== 8. Audit before publish: tonight the extract came back empty.  With'
\echo '      min_replaced_ratio the day is not replaced by nothing (IE002), and'
\echo '      expect checks the batch before anything is written (IE001)'
\set ON_ERROR_STOP 0
SELECT * FROM etl_replace_partition('store_day', '2024-06-02',
       $$SELECT sale_date, store, sum(amount) AS total FROM daily_sales
          WHERE sale_date = '2024-06-02' AND false GROUP BY 1, 2$$,
       min_replaced_ratio => 0.5);
SELECT * FROM etl_upsert_batch('daily_sales', 'TABLE staging_sales',
       expect => 'count(*) FILTER (WHERE amount <= 0) = 0 AND count(*) >= 100');
\set ON_ERROR_STOP 1
SELECT sale_date, store, total FROM store_day WHERE sale_date = '2024-06-02' ORDER BY 2;

\echo '== 9. A monthly summary, loaded one day at a time: etl_replace_where'
\echo '      replaces the rows of one day only, the rest of the month is kept'
CREATE TABLE store_month (
    sale_date date          NOT NULL,
    store     text          NOT NULL,
    total     numeric(12,2) NOT NULL,
    PRIMARY KEY (sale_date, store)
) PARTITION BY RANGE (sale_date);
CREATE TABLE store_month_202406 PARTITION OF store_month
    FOR VALUES FROM ('2024-06-01') TO ('2024-07-01');
INSERT INTO store_month SELECT sale_date, store, total FROM store_day;
SELECT rows_loaded, rows_replaced, skipped
  FROM etl_replace_where('store_month', $$sale_date = '2024-06-02'$$,
       $$SELECT sale_date, store, sum(amount) * 2 AS total FROM daily_sales
          WHERE sale_date = '2024-06-02' GROUP BY 1, 2$$,
       run_key => '2024-06-02');
SELECT sale_date, store, total FROM store_month ORDER BY 1, 2;

\echo '== 10. The ledger: one row per committed call, newest first'
SELECT run_id, operation, coalesce(partition_value, '') AS value, run_key, outcome,
       batch_rows, inserted, updated, unchanged, rows_loaded, rows_replaced
  FROM idem_etl.run_history;
