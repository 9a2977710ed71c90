-- idem_etl benchmark, partition workload: summary tables and target checks
-- from part_results and part_locks.  psql variables: with_etl, runs.
-- Prints plain text lines (run with -At).
\set ON_ERROR_STOP 1
SET client_min_messages = warning;

CREATE TEMP VIEW pmed AS
SELECT r.cfg, c.ord AS cfg_ord, c.label AS cfg_label, c.n_parts, c.rows_day, c.rows_other,
       r.sid, s.ord, s.label, s.kind,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY r.ms)                  AS ms,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY r.mark_ms)             AS mark_ms,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY r.wal_bytes::float8)   AS wal,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY r.dead_after)          AS dead_left,
       max(r.dead_after)                                                  AS dead_max,
       max(r.others_after - r.others_before)                              AS others_max,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY l.parent_ms)           AS parent_ms,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY l.parent_lo_ms)        AS parent_lo_ms,
       max(l.parent_n)                                                    AS parent_spans,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY l.writers_ms)          AS writers_ms,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY l.day_ms)              AS day_ms,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY l.poll_ms)             AS poll_ms,
       min(r.ms) AS ms_min, max(r.ms) AS ms_max, count(*) AS n, count(l.*) AS n_locks
  FROM part_results AS r
  JOIN part_strategy AS s USING (sid)
  JOIN part_config AS c USING (cfg)
  LEFT JOIN part_locks AS l USING (cfg, sid, rep)
 GROUP BY r.cfg, c.ord, c.label, c.n_parts, c.rows_day, c.rows_other, r.sid, s.ord, s.label, s.kind;

-- the hand-written swap (c) of the same configuration: the reference
CREATE TEMP VIEW pref AS SELECT cfg, ms FROM pmed WHERE sid = 'c';

SELECT format('Partition workload: events(event_date date, id bigint, payload text), partitioned by RANGE (event_date),'
              || ' one partition a day, primary key (event_date, id) and a secondary index on (id), no DEFAULT partition.');
SELECT format('Replaced: the day %s, by a source table (TABLE events_src) of as many rows with the same ids and every'
              || ' payload changed, in key order. Median of %s runs.', part_day(), :runs);
SELECT 'Strategies: (a) DELETE the day + INSERT through events, one transaction; (b) TRUNCATE the day''s partition'
       || ' + INSERT through events, one transaction; (c) CREATE TABLE (LIKE the partition), INSERT, primary key and'
       || ' index, CHECK equal to the bound, ANALYZE, COMMIT, then one transaction: DETACH, DROP the old partition,'
       || ' RENAME the new table and its indexes, ATTACH; (e) etl_replace_partition(''events'', '''
       || part_day() || ''', ''TABLE events_src'').';
SELECT 'Each run starts from the original day''s partition (restored, indexed, VACUUM ANALYZEd and checkpointed outside'
       || ' the timing); timed inside the server from the first statement to the end of the last COMMIT.';

SELECT E'\n' || format('%s (%s rows):', c.label, c.rows_day + (c.n_parts - 1) * c.rows_other)
       || E'\n' || format('%-38s | %9s | %6s | %8s | %6s | %9s | %9s | %9s | %s',
                          'strategy', 'median ms', 'ratio', 'WAL MB', 'dead', 'parent ms', 'writers', 'day ms', 'min-max ms')
       || E'\n' || repeat('-', 39) || '+' || repeat('-', 11) || '+' || repeat('-', 8) || '+' || repeat('-', 10)
       || '+' || repeat('-', 8) || '+' || repeat('-', 11) || '+' || repeat('-', 11) || '+' || repeat('-', 11)
       || '+' || repeat('-', 11)
       || E'\n' || string_agg(
            format('%-38s | %9s | %6s | %8s | %6s | %9s | %9s | %9s | %s',
                   m.label,
                   to_char(m.ms, 'FM999999990.0'),
                   coalesce(to_char(m.ms / p.ms, 'FM990.00'), '-') || CASE WHEN m.sid = 'c' THEN '*' ELSE ' ' END,
                   to_char(m.wal / 1048576.0, 'FM99990.00'),
                   m.dead_left::bigint,
                   to_char(m.parent_ms, 'FM999990.0'),
                   to_char(m.writers_ms, 'FM999990.0'),
                   to_char(m.day_ms, 'FM999990.0'),
                   to_char(m.ms_min, 'FM999999990') || '-' || to_char(m.ms_max, 'FM999999990')),
            E'\n' ORDER BY m.ord)
  FROM part_config AS c
  JOIN pmed AS m USING (cfg)
  LEFT JOIN pref AS p USING (cfg)
 GROUP BY c.ord, c.label, c.rows_day, c.n_parts, c.rows_other
 ORDER BY c.ord;

SELECT '';
SELECT 'ratio: median time / median time of the hand-written swap (c) of the same configuration (marked *).';
SELECT 'WAL MB: median WAL written by the phase (insert-position difference; each phase starts right after a checkpoint).';
SELECT 'dead: median n_dead_tup summed over the partitions of events after the phase (pg_stat_user_tables after'
       || ' pg_stat_force_next_flush(), autovacuum off).';
SELECT 'parent ms: how long the phase held (or queued for) an ACCESS EXCLUSIVE lock on events, which blocks every'
       || ' reader and writer of the table; writers: SHARE or stronger on events (blocks its writers: ATTACH''s SHARE'
       || ' UPDATE EXCLUSIVE does not); day ms: ACCESS EXCLUSIVE on events or on the day''s partition (blocks readers'
       || ' of that day; TRUNCATE holds it for the whole load).';
SELECT format('How: a second session polls pg_locks for the timed session''s locks, granted or waiting (median poll'
              || ' period %s ms over all runs); a lock counts from the last poll before it appeared to the first poll'
              || ' after it was gone: an upper bound, at most two poll periods more than the truth.',
              to_char(percentile_cont(0.5) WITHIN GROUP (ORDER BY poll_ms), 'FM990.00'))
  FROM part_locks;
SELECT format('Cross-check on (c), whose swap transaction is ours (%s): its own clock from just before DETACH to the'
              || ' end of COMMIT, median %s ms; the watcher: %s ms (upper bound), %s ms (lower bound: first to last poll'
              || ' that saw the lock), seen in %s of %s runs.',
              m.cfg_label, to_char(m.mark_ms, 'FM999990.0'), to_char(m.parent_ms, 'FM999990.0'),
              to_char(m.parent_lo_ms, 'FM999990.0'),
              (SELECT count(*) FROM part_locks AS l WHERE l.cfg = m.cfg AND l.sid = 'c' AND l.parent_n > 0), m.n)
  FROM pmed AS m WHERE m.sid = 'c' ORDER BY m.cfg_ord;
SELECT 'The own clock may read more than the watcher: it also counts DETACH''s work before the lock is granted and'
       || ' what COMMIT does after releasing the locks (unlinking the dropped partition''s files and dropping its pages'
       || ' from shared_buffers).';

-- ---------------------------------------------------------------- checks
SELECT '';
SELECT 'Sanity checks (partition workload):';

SELECT format('%s  every strategy leaves the day''s partition holding exactly the source rows (count and digest),'
              || ' events the expected number of rows, as many partitions, the day''s under its name and bound,'
              || ' every other partition the same relation with the same file; no table left behind',
              CASE WHEN bool_and(day_ok AND total_ok AND layout_ok AND others_ok AND detail IS NULL)
                        AND count(*) = (SELECT count(*) FROM part_config, unnest(sids))
                   THEN 'PASS' ELSE 'FAIL' END)
       || coalesce(': wrong for ' || string_agg(format('%s/%s (day %s, total %s, layout %s, others %s%s)',
                                                       cfg, sid, day_ok, total_ok, layout_ok, others_ok,
                                                       ', left: ' || detail), '; ')
                                     FILTER (WHERE NOT (day_ok AND total_ok AND layout_ok AND others_ok)
                                                   OR detail IS NOT NULL), '')
  FROM part_checks;

SELECT format('%s  the hand-written strategies neither read nor write any other partition (scan and row counters'
              || ' unchanged)%s',
              CASE WHEN coalesce(max(others_max) FILTER (WHERE kind = 'hand'), 0) = 0 THEN 'PASS' ELSE 'FAIL' END,
              coalesce(': not for ' || string_agg(cfg || '/' || sid, ', ') FILTER (WHERE kind = 'hand' AND others_max <> 0), ''))
  FROM pmed;

SELECT format('%s  no checkpoint completed inside a timed phase%s',
              CASE WHEN count(*) FILTER (WHERE ckpt_during) = 0 THEN 'PASS' ELSE 'FAIL' END,
              CASE WHEN count(*) FILTER (WHERE ckpt_during) > 0
                   THEN ' (' || count(*) FILTER (WHERE ckpt_during) || ' phases had one)' ELSE '' END)
  FROM part_results;

SELECT format('%s  the lock watcher recorded every phase (%s of %s)',
              CASE WHEN (SELECT count(*) FROM part_locks) = (SELECT count(*) FROM part_results)
                   THEN 'PASS' ELSE 'FAIL' END,
              (SELECT count(*) FROM part_locks), (SELECT count(*) FROM part_results));

\if :with_etl
SELECT format('%s  (e) reports rows_loaded = rows_replaced = the day''s rows, skipped = false, partition_table = %s (got %s)',
              CASE WHEN bool_and((r.result::json->>'rows_loaded')::bigint = c.rows_day
                             AND (r.result::json->>'rows_replaced')::bigint = c.rows_day
                             AND NOT (r.result::json->>'skipped')::boolean
                             AND r.result::json->>'partition_table' = part_name(part_day()))
                   THEN 'PASS' ELSE 'FAIL' END,
              part_name(part_day()),
              string_agg(DISTINCT c.cfg || ': ' || (r.result::jsonb - 'run_id')::text, '; '))
  FROM part_results AS r JOIN part_config AS c USING (cfg)
 WHERE r.sid = 'e';

SELECT '';
SELECT 'Targets (issue 3, Performance):';

CREATE TEMP VIEW ptgt AS
SELECT (SELECT ms FROM pmed WHERE cfg = 'd100k' AND sid = 'e') AS e100,
       (SELECT ms FROM pmed WHERE cfg = 'd100k' AND sid = 'c') AS c100,
       (SELECT ms FROM pmed WHERE cfg = 'd100k' AND sid = 'a') AS a100,
       (SELECT ms FROM pmed WHERE cfg = 'd10k' AND sid = 'e') AS e10,
       (SELECT ms FROM pmed WHERE cfg = 'd10k' AND sid = 'c') AS c10,
       (SELECT ms FROM pmed WHERE cfg = 'p300' AND sid = 'e') AS e300,
       (SELECT ms FROM pmed WHERE cfg = 'p300' AND sid = 'c') AS c300,
       (SELECT parent_ms FROM pmed WHERE cfg = 'd100k' AND sid = 'e') AS lock100,
       (SELECT parent_ms FROM pmed WHERE cfg = 'd10k' AND sid = 'e') AS lock10,
       (SELECT parent_ms FROM pmed WHERE cfg = 'p300' AND sid = 'e') AS lock300,
       (SELECT max(dead_max) FROM pmed WHERE sid = 'e') AS e_dead,
       (SELECT max(others_max) FROM pmed WHERE sid = 'e') AS e_others,
       (SELECT label FROM part_config WHERE cfg = 'd100k') AS l100,
       (SELECT label FROM part_config WHERE cfg = 'd10k') AS l10,
       (SELECT label FROM part_config WHERE cfg = 'p300') AS l300;

SELECT format('%s  %s: etl_replace_partition %s ms = %sx the hand-written swap (%s ms); target <= 1.20x',
              CASE WHEN e100 <= 1.2 * c100 THEN 'PASS' ELSE 'FAIL' END, l100,
              to_char(e100, 'FM9999990.0'), to_char(e100 / c100, 'FM990.00'), to_char(c100, 'FM9999990.0'))
  FROM ptgt;
SELECT format('%s  %s: etl_replace_partition %s ms = %sx DELETE + INSERT (%s ms); target < 1.00x (faster)',
              CASE WHEN e100 < a100 THEN 'PASS' ELSE 'FAIL' END, l100,
              to_char(e100, 'FM9999990.0'), to_char(e100 / a100, 'FM990.00'), to_char(a100, 'FM9999990.0'))
  FROM ptgt;
SELECT format('info  %s: etl_replace_partition %s ms = %sx the hand-written swap (%s ms) (no target at this size)',
              l10, to_char(e10, 'FM9999990.0'), to_char(e10 / c10, 'FM990.00'), to_char(c10, 'FM9999990.0'))
  FROM ptgt;
SELECT format('%s  etl_replace_partition leaves %s dead tuples in events (most in any run, any configuration); target 0',
              CASE WHEN e_dead = 0 THEN 'PASS' ELSE 'FAIL' END, e_dead)
  FROM ptgt;
SELECT format('%s  %s: etl_replace_partition locks the parent (ACCESS EXCLUSIVE) for %s ms (median); target <= 30 ms',
              CASE WHEN lock10 <= 30 THEN 'PASS' ELSE 'FAIL' END, l10, to_char(lock10, 'FM999990.0'))
  FROM ptgt;
SELECT format('%s  %s: etl_replace_partition locks the parent (ACCESS EXCLUSIVE) for %s ms (median); target <= 30 ms',
              CASE WHEN lock100 <= 30 THEN 'PASS' ELSE 'FAIL' END, l100, to_char(lock100, 'FM999990.0'))
  FROM ptgt;
SELECT format('%s  %s: etl_replace_partition %s ms = %sx its time with 30 partitions (%s ms); target <= 1.20x'
              || ' (the hand-written swap: %sx; parent locked %s ms)',
              CASE WHEN e300 <= 1.2 * e100 THEN 'PASS' ELSE 'FAIL' END, l300,
              to_char(e300, 'FM9999990.0'), to_char(e300 / e100, 'FM990.00'), to_char(e100, 'FM9999990.0'),
              to_char(c300 / c100, 'FM990.00'), to_char(lock300, 'FM999990.0'))
  FROM ptgt;
SELECT format('%s  etl_replace_partition neither reads nor writes any other partition (scan and row counters of'
              || ' the other partitions unchanged in every run; issue 3, point 1)%s',
              CASE WHEN e_others = 0 THEN 'PASS' ELSE 'FAIL' END,
              CASE WHEN e_others <> 0 THEN format(': up to %s more', e_others) ELSE '' END)
  FROM ptgt;
\endif
