-- idem_etl benchmark, partition workload: one measurement of one strategy
-- (psql variables: cfg, sid, rep, check).  Restores the day's partition to
-- its original contents, outside the timing, then times the replacement
-- while part-lockwatch watches this session's locks from a second one.
\set ON_ERROR_STOP 1
SET client_min_messages = warning;

SELECT 'part_' || :'cfg' AS schema \gset
SET search_path = :"schema", public;     -- events and its tables for this configuration (part-build.sql)

SELECT part_day() AS day, part_day() + 1 AS next, part_name(part_day()) AS part,
       part_name(part_day()) || '_pkey' AS part_pkey, part_name(part_day()) || '_id_idx' AS part_id_idx,
       rows_day, rows_other, n_parts
  FROM part_config WHERE cfg = :'cfg' \gset

-- Restore: drop whatever partition now holds the day (found by its bound,
-- whatever its name), then build it again as part-build.sql did: loaded,
-- indexes built after the load, attached (ATTACH validates by a scan, outside
-- the timing), hint bits set, visibility map built, statistics fresh.
SELECT format('ALTER TABLE events DETACH PARTITION %s', c.oid::regclass),
       format('DROP TABLE %s', c.oid::regclass)
  FROM pg_inherits AS i JOIN pg_class AS c ON c.oid = i.inhrelid
 WHERE i.inhparent = 'events'::regclass
   AND pg_get_expr(c.relpartbound, c.oid) = format('FOR VALUES FROM (%L) TO (%L)', :'day', :'next')
\gexec
SET maintenance_work_mem = '512MB';
CREATE TABLE :"part" (LIKE events);
INSERT INTO :"part" SELECT * FROM events_day_orig;
ALTER TABLE :"part" ADD CONSTRAINT :"part_pkey" PRIMARY KEY (event_date, id);
CREATE INDEX :"part_id_idx" ON :"part" (id);
ALTER TABLE events ATTACH PARTITION :"part" FOR VALUES FROM (:'day') TO (:'next');
RESET maintenance_work_mem;
VACUUM (ANALYZE) :"part";

-- The lock watcher (part-lockwatch, a second session) watches this session
-- for as long as it holds the advisory lock (71717, 1).
SELECT pg_backend_pid() AS pid, 'events'::regclass::oid AS parent_oid,
       :'part'::regclass::oid AS part_oid \gset
\setenv PART_PID :pid
\setenv PART_PARENT :parent_oid
\setenv PART_PART :part_oid
\setenv PART_CFG :cfg
\setenv PART_SID :sid
\setenv PART_REP :rep
SELECT pg_advisory_lock(71717, 1) \g /dev/null
\! "$BENCH_DIR/part-lockwatch" &
DO $$
BEGIN
    FOR i IN 1..2000 LOOP
        PERFORM FROM pg_locks
          WHERE locktype = 'advisory' AND classid = 71717 AND objid = 2 AND objsubid = 2 AND granted;
        IF FOUND THEN
            RETURN;
        END IF;
        PERFORM pg_sleep(0.005);
    END LOOP;
    RAISE EXCEPTION 'the lock watcher (part-lockwatch) did not start within 10 s';
END
$$;

-- Every timed phase starts right after a checkpoint, as in run-one.sql.
SELECT pg_stat_force_next_flush() \g /dev/null
SELECT part_before(:'cfg', :'sid', :rep) \g /dev/null
CHECKPOINT;
CALL part_timed(:'cfg', :'sid', :rep);
-- end of the phase; wait for the watcher to record what it saw
SELECT pg_advisory_unlock(71717, 1) \g /dev/null
SELECT pg_advisory_lock(71717, 2) \g /dev/null
SELECT pg_advisory_unlock(71717, 2) \g /dev/null
DO $$
BEGIN
    FOR i IN 1..2000 LOOP
        PERFORM pg_stat_clear_snapshot();   -- else pg_stat_activity stays as first read in this transaction
        PERFORM FROM pg_stat_activity WHERE application_name = 'idem_etl_bench_lockwatch';
        IF NOT FOUND THEN
            RETURN;
        END IF;
        PERFORM pg_sleep(0.005);
    END LOOP;
    RAISE EXCEPTION 'the lock watcher (part-lockwatch) did not disconnect within 10 s';
END
$$;
SELECT pg_stat_force_next_flush() \g /dev/null
SELECT part_after(:'cfg', :'sid', :rep) \g /dev/null

\if :check
-- The day holds exactly the source rows, events the expected number of
-- rows, the partitions are as many as before with the day's under its name
-- and bound, and every other partition is the very same relation, same file.
INSERT INTO part_checks
SELECT :'cfg', :'sid',
       (SELECT (count(*), sum(hashtext(e::text)::bigint)) FROM events AS e WHERE event_date = :'day')
         IS NOT DISTINCT FROM
       (SELECT (count(*), sum(hashtext(s::text)::bigint)) FROM events_src AS s),
       (SELECT count(*) FROM events) = :rows_day + (:n_parts - 1) * :rows_other,
       (SELECT count(*) = :n_parts
               AND count(*) FILTER (WHERE c.relname = :'part'
                                    AND pg_get_expr(c.relpartbound, c.oid)
                                        = format('FOR VALUES FROM (%L) TO (%L)', :'day', :'next')) = 1
          FROM pg_inherits AS i JOIN pg_class AS c ON c.oid = i.inhrelid
         WHERE i.inhparent = 'events'::regclass),
       (SELECT count(*) = (SELECT count(*) FROM part_others)
          FROM part_others AS o
          JOIN pg_inherits AS i ON i.inhrelid = o.relid AND i.inhparent = 'events'::regclass
          JOIN pg_class AS c ON c.oid = o.relid AND c.relfilenode = o.relfilenode),
       (SELECT string_agg(c.relname, ', ' ORDER BY c.relname)
          FROM pg_class AS c
         WHERE c.relnamespace = :'schema'::regnamespace
           AND c.relname LIKE 'events%' AND c.relkind = 'r' AND NOT c.relispartition
           AND c.relname NOT IN ('events_src', 'events_day_orig'));
\endif
