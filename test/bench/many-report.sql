-- many workload: medians per case and strategy, and the ratio to the
-- hand-written statements of the same case
\pset footer off
SELECT 'Many values in one call (issue 10, point 13): etl_replace_partitions with 10,000 values on a plain table and 1,000 partitions, default max_locks_per_transaction (' || current_setting('max_locks_per_transaction') || '), median of ' || :runs || ' runs' AS title;
WITH m AS (
    SELECT kase, strategy, percentile_cont(0.5) WITHIN GROUP (ORDER BY ms) AS ms,
           max(advisory_locks) AS locks, bool_and(ok) AS ok
      FROM bench_many GROUP BY 1, 2)
SELECT format('  %-42s %-30s %10s ms  advisory locks %s%s%s', m.kase, m.strategy, round(m.ms::numeric, 1), m.locks,
              CASE WHEN h.ms IS NOT NULL AND m.strategy <> h.strategy
                   THEN format('  (%sx the hand-written)', round((m.ms / h.ms)::numeric, 2)) ELSE '' END,
              CASE WHEN m.ok THEN '' ELSE '  WRONG RESULT' END)
  FROM m LEFT JOIN m h ON h.kase = m.kase AND h.strategy LIKE 'hand-written%'
 ORDER BY m.kase, m.strategy;
SELECT CASE WHEN bool_and(ok) THEN 'PASS' ELSE 'FAIL' END
       || '  many: every call returned the expected number of values or partitions, with default settings'
  FROM bench_many;
