-- idem_etl benchmark, partition workload (issue 3, "Performance"): the
-- configurations, strategies, result tables and measuring helpers.  Run once
-- per benchmark by bench-in-cluster (psql variables: rows_day, rows_small,
-- with_etl); the table events itself is built per configuration, in a
-- schema of its own, by part-build.sql.  The helpers below name events and
-- its companion tables unqualified: part-run-one.sql sets search_path.
\set ON_ERROR_STOP 1
SET client_min_messages = warning;
SET check_function_bodies = off;   -- the helpers refer to events, created per configuration

-- The configurations, each measured on its own events table:
--   d100k  30 daily partitions of rows_day rows (100,000 at scale 1)
--   d10k   30 daily partitions of rows_small rows (10,000 at scale 1)
--   p300   300 daily partitions: the replaced day holds rows_day rows like
--          in d100k, the 299 others rows_small rows each, so that the table
--          holds about as many rows as d100k (2.99M + 0.1M against 3M) and
--          only the number of partitions differs: 300 partitions of rows_day
--          rows would be 30M rows, minutes to build for what only the count
--          of partitions should change.
-- The replaced day is the same in all: 2026-11-28, the partitions' last day
-- being 2026-11-30.
CREATE TABLE part_config (
    cfg         text PRIMARY KEY,
    ord         int  NOT NULL,
    label       text NOT NULL,
    n_parts     int  NOT NULL,
    rows_day    bigint NOT NULL,    -- rows of the replaced day, before and after
    rows_other  bigint NOT NULL,    -- rows of every other day
    sids        text[] NOT NULL     -- the strategies measured on it
);

INSERT INTO part_config VALUES
('d100k', 1, format('30 partitions x %s rows/day', :rows_day),
 30, :rows_day, :rows_day, '{a,b,c,e}'),
('d10k', 2, format('30 partitions x %s rows/day', :rows_small),
 30, :rows_small, :rows_small, '{a,b,c,e}'),
('p300', 3, format('300 partitions: the day %s rows, 299 x %s', :rows_day, :rows_small),
 300, :rows_day, :rows_small, '{c,e}');

-- The strategies.  kind: 'hand' = hand-written; 'etl' = etl_replace_partition;
-- 'floor' = a measure of the least any swap does (partscale only).
-- The statements run in order in one server-side procedure; 'COMMIT' ends a
-- transaction and starts the next, '-- mark' records the time (the hand-
-- written swap's second transaction: parent lock hold by its own clock).
-- Placeholders: %DAY%, %NEXT% (the day and the day after, ISO dates),
-- %PART% (the day's partition), %REP% (the repetition).
CREATE TABLE part_strategy (
    sid    text PRIMARY KEY,
    ord    int  NOT NULL,
    label  text NOT NULL,
    kind   text NOT NULL,
    stmts  text[] NOT NULL
);

INSERT INTO part_strategy VALUES
('a', 1, '(a) DELETE + INSERT, one transaction', 'hand',
 ARRAY[$q$DELETE FROM events WHERE event_date = DATE '%DAY%'$q$,
       $q$INSERT INTO events SELECT * FROM events_src$q$]),
('b', 2, '(b) TRUNCATE partition + INSERT', 'hand',
 ARRAY[$q$TRUNCATE %PART%$q$,
       $q$INSERT INTO events SELECT * FROM events_src$q$]),
-- The swap as one would write it by hand: a table like the partition (no
-- indexes yet: they are built after the load, faster than maintained row by
-- row), loaded, indexed like the parent, a CHECK constraint equal to the
-- bound (ATTACH then skips its validation scan), analyzed, committed; then
-- one short transaction detaches and drops the old partition, gives the new
-- table and its indexes the old names and attaches it with the same bound.
('c', 3, '(c) hand-written swap', 'hand',
 ARRAY[$q$CREATE TABLE %PART%_new (LIKE %PART% INCLUDING DEFAULTS INCLUDING STORAGE INCLUDING COMPRESSION)$q$,
       $q$INSERT INTO %PART%_new SELECT * FROM events_src$q$,
       $q$ALTER TABLE %PART%_new ADD CONSTRAINT %PART%_new_pkey PRIMARY KEY (event_date, id)$q$,
       $q$CREATE INDEX %PART%_new_id_idx ON %PART%_new (id)$q$,
       $q$ALTER TABLE %PART%_new ADD CONSTRAINT %PART%_bound
              CHECK (event_date >= DATE '%DAY%' AND event_date < DATE '%NEXT%')$q$,
       $q$ANALYZE %PART%_new$q$,
       'COMMIT',
       '-- mark',
       $q$ALTER TABLE events DETACH PARTITION %PART%$q$,
       $q$DROP TABLE %PART%$q$,
       $q$ALTER TABLE %PART%_new RENAME TO %PART%$q$,
       $q$ALTER INDEX %PART%_new_pkey RENAME TO %PART%_pkey$q$,
       $q$ALTER INDEX %PART%_new_id_idx RENAME TO %PART%_id_idx$q$,
       $q$ALTER TABLE events ATTACH PARTITION %PART% FOR VALUES FROM ('%DAY%') TO ('%NEXT%')$q$]),
('e', 4, '(e) etl_replace_partition', 'etl',
 ARRAY[$q$SELECT * FROM etl_replace_partition('events', '%DAY%', 'TABLE events_src')$q$]),
-- Not a replacement: the least a swap in one transaction holds the parent
-- locked for, detaching the day's partition and attaching it again (a CHECK
-- constraint equal to the bound spares ATTACH its scan).  Its rows stay as
-- they were, so it is left out of the correctness checks.
('z', 5, '(z) bare DETACH + ATTACH', 'floor',
 ARRAY[$q$ALTER TABLE %PART% ADD CONSTRAINT %PART%_bound
              CHECK (event_date >= DATE '%DAY%' AND event_date < DATE '%NEXT%')$q$,
       'COMMIT',
       '-- mark',
       $q$ALTER TABLE events DETACH PARTITION %PART%$q$,
       $q$ALTER TABLE events ATTACH PARTITION %PART% FOR VALUES FROM ('%DAY%') TO ('%NEXT%')$q$]);

\if :with_etl
\else
DELETE FROM part_strategy WHERE kind = 'etl';
UPDATE part_config SET sids = array_remove(sids, 'e');
\endif

CREATE TABLE part_results (
    cfg          text NOT NULL,
    sid          text NOT NULL,
    rep          int  NOT NULL,
    ms           double precision,
    mark_ms      double precision,  -- from '-- mark' to the end (commit included)
    wal_bytes    numeric,
    dead_after   bigint,            -- n_dead_tup summed over events' partitions after the phase
    others_before bigint,           -- scans and row writes of the other partitions, before
    others_after  bigint,           -- ... and after the phase
    ckpt_during  boolean,
    result       text,              -- etl_replace_partition's result row, as JSON
    PRIMARY KEY (cfg, sid, rep)
);

-- Filled by part_lockwatch, a second session watching the timed one.
CREATE TABLE part_locks (
    cfg          text NOT NULL,
    sid          text NOT NULL,
    rep          int  NOT NULL,
    parent_ms    double precision,  -- ACCESS EXCLUSIVE on events held or queued (upper bound)
    parent_lo_ms double precision,  -- ... lower bound
    parent_n     int,               -- ... in how many separate spans
    writers_ms   double precision,  -- SHARE or stronger on events (blocks its writers)
    day_ms       double precision,  -- ACCESS EXCLUSIVE on events or on the day's partition
    polls        int,
    poll_ms      double precision,  -- mean time between two polls
    PRIMARY KEY (cfg, sid, rep)
);

-- Correctness, checked after the first repetition of every strategy.
CREATE TABLE part_checks (
    cfg          text NOT NULL,
    sid          text NOT NULL,
    day_ok       boolean,   -- the day's rows equal the source (count and digest)
    total_ok     boolean,   -- events holds the expected number of rows
    layout_ok    boolean,   -- same number of partitions, the day's partition has its name and bound
    others_ok    boolean,   -- every other partition has its oid and relfilenode of before
    detail       text,
    PRIMARY KEY (cfg, sid)
);

-- The day being replaced, and the names derived from it.
CREATE FUNCTION part_day() RETURNS date LANGUAGE sql IMMUTABLE AS $$ SELECT DATE '2026-11-28' $$;
CREATE FUNCTION part_name(d date) RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT 'events_p' || to_char(d, 'YYYYMMDD')
$$;
-- A strategy's statements in order, %DAY%, %NEXT% and %PART% filled in
-- (part_timed runs them; counted-run counts them).
CREATE FUNCTION part_stmts(p_sid text) RETURNS text[] LANGUAGE sql STABLE AS $$
    SELECT array_agg(replace(replace(replace(x, '%DAY%', part_day()::text),
                                     '%NEXT%', (part_day() + 1)::text),
                             '%PART%', part_name(part_day())) ORDER BY u.i)
      FROM part_strategy AS ps, unnest(ps.stmts) WITH ORDINALITY AS u(x, i)
     WHERE ps.sid = p_sid
$$;

-- n_dead_tup summed over the partitions of events.
CREATE FUNCTION part_dead_tuples() RETURNS bigint
LANGUAGE sql AS $$
    SELECT coalesce(sum(s.n_dead_tup), 0)::bigint
      FROM pg_partition_tree('events') AS t
      JOIN pg_stat_user_tables AS s ON s.relid = t.relid
$$;

-- Scans and row writes of the partitions other than the replaced day's (their
-- oids are recorded by part-build.sql in part_others): it must not change.
CREATE FUNCTION part_others_activity() RETURNS bigint
LANGUAGE sql AS $$
    SELECT coalesce(sum(coalesce(s.seq_scan, 0) + coalesce(s.idx_scan, 0)
                        + s.n_tup_ins + s.n_tup_upd + s.n_tup_del), 0)::bigint
      FROM part_others AS o
      JOIN pg_stat_user_tables AS s ON s.relid = o.relid
$$;

-- Call after SELECT pg_stat_force_next_flush() in a separate statement.
CREATE FUNCTION part_before(p_cfg text, p_sid text, p_rep int) RETURNS void
LANGUAGE sql AS $$
    INSERT INTO part_results (cfg, sid, rep, others_before)
    VALUES (p_cfg, p_sid, p_rep, part_others_activity())
$$;

CREATE FUNCTION part_after(p_cfg text, p_sid text, p_rep int) RETURNS void
LANGUAGE sql AS $$
    UPDATE part_results SET dead_after = part_dead_tuples(), others_after = part_others_activity()
     WHERE cfg = p_cfg AND sid = p_sid AND rep = p_rep
$$;

-- The timed part, as bench_timed in setup.sql: timing and WAL taken inside
-- the server, from just before the first statement to just after the last
-- COMMIT returns.
CREATE PROCEDURE part_timed(p_cfg text, p_sid text, p_rep int)
LANGUAGE plpgsql AS $$
DECLARE
    v_stmts text[] := part_stmts(p_sid);
    s      text;
    res    text;
    t0     timestamptz;
    tm     timestamptz;
    t1     timestamptz;
    l0     pg_lsn;
    l1     pg_lsn;
    redo0  pg_lsn;
    redo1  pg_lsn;
BEGIN
    redo0 := (pg_control_checkpoint()).redo_lsn;
    COMMIT;                             -- the timed statements get transactions of their own

    l0 := pg_current_wal_insert_lsn();
    t0 := clock_timestamp();
    -- COMMIT and '-- mark' are the procedure's: each other statement goes
    -- alone to bench_exec (bench-common.sql: %REP%, the SELECT's row).
    FOREACH s IN ARRAY v_stmts LOOP
        IF s = 'COMMIT' THEN
            COMMIT;
        ELSIF s = '-- mark' THEN
            tm := clock_timestamp();
        ELSE
            res := coalesce(bench_exec(ARRAY[s], p_rep), res);
        END IF;
    END LOOP;
    COMMIT;
    t1 := clock_timestamp();
    l1 := pg_current_wal_insert_lsn();

    redo1 := (pg_control_checkpoint()).redo_lsn;
    UPDATE part_results
       SET ms = 1000 * extract(epoch FROM t1 - t0),
           mark_ms = 1000 * extract(epoch FROM t1 - tm),
           wal_bytes = pg_wal_lsn_diff(l1, l0),
           ckpt_during = (redo1 <> redo0),
           result = res
     WHERE cfg = p_cfg AND sid = p_sid AND rep = p_rep;
    COMMIT;
END
$$;

-- How long the parent is locked, measured from outside: this procedure runs
-- in a second session (started by part-lockwatch) and polls pg_locks about
-- once a millisecond for the locks of the timed session (p_pid) on events
-- (p_parent) and on the day's partition as it was before the phase
-- (p_part).  A poll costs about 20 us, and pg_sleep's wait is rounded up to
-- whole milliseconds.  It does not poll faster: reading pg_locks takes all
-- the lock manager's partition locks, and polling without a pause was seen
-- to slow the very DETACH/ATTACH being measured (by 2x on small tables).
-- A lock counts granted or still waiting (a queued ACCESS EXCLUSIVE request
-- blocks new readers just as well), summed over all the spans in which it
-- is seen (a retry after lock_timeout makes several):
--   upper bound: from the last poll before it appeared to the first poll
--                after it was gone (what is reported);
--   lower bound: from the first to the last poll that saw it.
-- The true hold lies in between: each is off by at most one poll period.
-- Handshake with the timed session (run-one's part): it holds the advisory
-- lock (71717, 1) for as long as the phase lasts; this procedure holds
-- (71717, 2) while it watches, so the timed session can wait for it to be
-- ready before the phase and for its result after.
CREATE PROCEDURE part_lockwatch(p_cfg text, p_sid text, p_rep int, p_pid int, p_parent oid, p_part oid)
LANGUAGE plpgsql AS $$
DECLARE
    t        timestamptz;
    t_prev   timestamptz;
    t_start  timestamptz;
    in_phase boolean;
    cur      boolean[];
    seen     boolean[] := '{f,f,f}';
    since    timestamptz[] := '{NULL,NULL,NULL}';   -- last poll without the lock
    first_t  timestamptz[] := '{NULL,NULL,NULL}';   -- first poll with it
    last_t   timestamptz[] := '{NULL,NULL,NULL}';   -- last poll with it
    hi       double precision[] := '{0,0,0}';
    lo       double precision[] := '{0,0,0}';
    spans    int[] := '{0,0,0}';
    polls    int := 0;
    i        int;
BEGIN
    PERFORM pg_advisory_lock(71717, 2);
    t_start := clock_timestamp();
    t_prev := t_start;
    LOOP
        t := clock_timestamp();
        -- 1: ACCESS EXCLUSIVE on events: blocks its readers and writers
        -- 2: SHARE or stronger on events: blocks its writers (ROW EXCLUSIVE)
        -- 3: ACCESS EXCLUSIVE on events or on the day's partition: blocks
        --    readers of that day
        SELECT coalesce(bool_or(locktype = 'advisory' AND classid = 71717 AND objid = 1
                                AND objsubid = 2), false),
               ARRAY[coalesce(bool_or(locktype = 'relation' AND relation = p_parent
                                      AND mode = 'AccessExclusiveLock'), false),
                     coalesce(bool_or(locktype = 'relation' AND relation = p_parent
                                      AND mode IN ('ShareLock', 'ShareRowExclusiveLock',
                                                   'ExclusiveLock', 'AccessExclusiveLock')), false),
                     coalesce(bool_or(locktype = 'relation' AND relation IN (p_parent, p_part)
                                      AND mode = 'AccessExclusiveLock'), false)]
          INTO in_phase, cur
          FROM pg_locks
         WHERE pid = p_pid;
        polls := polls + 1;
        FOR i IN 1..3 LOOP
            IF cur[i] AND NOT seen[i] THEN
                seen[i] := true;
                since[i] := t_prev;
                first_t[i] := t;
            END IF;
            IF cur[i] THEN
                last_t[i] := t;
            END IF;
            IF seen[i] AND (NOT cur[i] OR NOT in_phase) THEN
                seen[i] := false;
                hi[i] := hi[i] + 1000 * extract(epoch FROM t - since[i]);
                lo[i] := lo[i] + 1000 * extract(epoch FROM last_t[i] - first_t[i]);
                spans[i] := spans[i] + 1;
            END IF;
        END LOOP;
        EXIT WHEN NOT in_phase;
        IF t - t_start > interval '30 minutes' THEN
            RAISE EXCEPTION 'part_lockwatch: the phase of (%, %, %) lasts more than 30 minutes',
                            p_cfg, p_sid, p_rep;
        END IF;
        t_prev := t;
        PERFORM pg_sleep(0.0005);
    END LOOP;

    INSERT INTO part_locks
    VALUES (p_cfg, p_sid, p_rep, hi[1], lo[1], spans[1], hi[2], hi[3], polls,
            1000 * extract(epoch FROM t - t_start) / greatest(polls - 1, 1));
    COMMIT;
    PERFORM pg_advisory_unlock(71717, 2);
END
$$;
