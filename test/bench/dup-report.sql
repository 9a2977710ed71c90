-- idem_etl benchmark, dup workload: summary and targets (psql -At;
-- variables n_dup, n_keys, runs, with_etl).
\set ON_ERROR_STOP 1
SET client_min_messages = warning;
SELECT '';
SELECT format('Duplicates (issue 11, item 1): %s-row batches (10%% duplicates; and over %s keys) into a copy of the', :n_dup, :n_keys);
SELECT format('%s-row target;', :n_target);
SELECT format('first apply on a fresh copy of the target, median of %s runs; "vs hand" = time / the hand-written statement', :runs);
SELECT 'of the same batch, "vs no dup" = time / etl_upsert_batch of the batch without its duplicates';
SELECT '';
SELECT format('%-58s | %9s | %7s | %9s | %s', 'case', 'median ms', 'vs hand', 'vs no dup', 'min-max ms');
SELECT repeat('-', 59) || '+' || repeat('-', 11) || '+' || repeat('-', 9) || '+' || repeat('-', 11) || '+' || repeat('-', 12);
SELECT format('%-58s | %9s | %7s | %9s | %s', m.label, to_char(m.ms, 'FM9999990'),
              CASE WHEN m.kind = 'etl' THEN to_char(m.ms / h.ms, 'FM990.00') ELSE '' END,
              CASE WHEN m.kind = 'etl' AND m.sid <> 'nodup_e' AND m.sid !~ '^few' THEN to_char(m.ms / n.ms, 'FM990.00') ELSE '' END,
              to_char(m.ms_min, 'FM9999990') || '-' || to_char(m.ms_max, 'FM9999990'))
  FROM wl_med AS m
  LEFT JOIN wl_med AS h ON h.wl = m.wl AND h.sid = split_part(m.sid, '_', 1) || '_h'
  LEFT JOIN wl_med AS n ON n.wl = m.wl AND n.sid = 'nodup_e'
 WHERE m.wl = 'dup' ORDER BY m.ord;

SELECT '';
SELECT 'Sanity checks:';
SELECT format('%s  every strategy over dup_base, dup_exact and dup_diff leaves the same table (digest)',
              CASE WHEN count(DISTINCT digest) = 1 THEN 'PASS' ELSE 'FAIL' END)
  FROM wl_results WHERE wl = 'dup' AND rep = 1 AND sid !~ '^few';
SELECT format('%s  the %s-key cases: etl_upsert_batch leaves the same table as the hand-written statement (%s)',
              CASE WHEN bool_and(e.digest = h.digest) THEN 'PASS' ELSE 'FAIL' END, :n_keys,
              string_agg(e.sid, ', '))
  FROM wl_results AS e JOIN wl_results AS h ON h.wl = e.wl AND h.rep = e.rep AND h.sid = split_part(e.sid, '_', 1) || '_h'
 WHERE e.wl = 'dup' AND e.rep = 1 AND e.sid ~ '^few.*_e$';

\if :with_etl
SELECT '';
SELECT 'Targets (issue 11, item 1):';
SELECT format('%s  %s: %s ms = %sx %s (%s ms); target <= %sx',
              CASE WHEN e.ms <= lim * b.ms THEN 'PASS' ELSE 'FAIL' END, e.label,
              to_char(e.ms, 'FM9999990'), to_char(e.ms / b.ms, 'FM990.00'), what,
              to_char(b.ms, 'FM9999990'), to_char(lim, 'FM0.0'))
  FROM (VALUES (1, 'exact_e', 'nodup_e', 'the batch without duplicates', 1.3),
               (2, 'exact_e', 'exact_h', 'the hand-written DISTINCT ON', 1.0),
               (3, 'diff_e', 'nodup_e', 'the batch without duplicates', 1.3),
               (4, 'diff_e', 'diff_h', 'the hand-written DISTINCT ON', 1.0),
               (5, 'fewx_e', 'fewx_h', 'the hand-written DISTINCT ON', 1.0),
               (6, 'fewd_e', 'fewd_h', 'the hand-written DISTINCT ON', 1.0)) AS t(o, es, bs, what, lim)
  JOIN wl_med AS e ON e.wl = 'dup' AND e.sid = t.es
  JOIN wl_med AS b ON b.wl = 'dup' AND b.sid = t.bs
 ORDER BY o;
\endif
