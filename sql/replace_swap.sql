--
-- (expected/replace_swap_1.out: PostgreSQL 17 and later, where an owner's privileges
-- include MAINTAIN, shown as "m" in an ACL)
-- replace_swap: point 1 of etl_replace_partition (swap, not rewrite).
-- The partition holding the value is replaced by a new table with the same
-- name and bounds, carrying over the old one's owner, grants, storage
-- parameters and comment, with every index of the parent (and the
-- partition's own indexes) built, and analyzed.  It has a new relfilenode;
-- no other partition is read or rewritten (their relfilenodes, row versions
-- and scan counters stay the same); nothing is left behind.
--
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS idem_etl CASCADE;
CREATE EXTENSION idem_etl;
DROP SCHEMA IF EXISTS rswap CASCADE;
\set roles {idem_test_rswap_owner,idem_test_rswap_reader}
\i sql/include/drop_roles.sql
RESET client_min_messages;

CREATE SCHEMA rswap;
CREATE ROLE idem_test_rswap_owner;
CREATE ROLE idem_test_rswap_reader;
GRANT USAGE ON SCHEMA rswap TO idem_test_rswap_reader;

CREATE TABLE rswap.events (
    event_date date   NOT NULL,
    id         bigint NOT NULL,
    payload    text,
    status     text DEFAULT 'new',
    plen       int GENERATED ALWAYS AS (length(payload)) STORED,
    PRIMARY KEY (event_date, id)
) PARTITION BY RANGE (event_date);
CREATE INDEX events_payload_idx ON rswap.events (payload);
CREATE TABLE rswap.events_20261127 PARTITION OF rswap.events FOR VALUES FROM ('2026-11-27') TO ('2026-11-28');
CREATE TABLE rswap.events_20261128 PARTITION OF rswap.events FOR VALUES FROM ('2026-11-28') TO ('2026-11-29');
CREATE TABLE rswap.events_20261129 PARTITION OF rswap.events FOR VALUES FROM ('2026-11-29') TO ('2026-11-30');
INSERT INTO rswap.events (event_date, id, payload)
SELECT d::date, g, format('old %s %s', d::date, g)
  FROM generate_series('2026-11-27'::date, '2026-11-29', '1 day') d, generate_series(1, 5) g;

-- what the partition carries: owner, grants (table and column), storage
-- parameters, comment, and an index of its own
ALTER TABLE rswap.events_20261128 OWNER TO idem_test_rswap_owner;
GRANT SELECT ON rswap.events_20261128 TO idem_test_rswap_reader;
GRANT INSERT, DELETE ON rswap.events_20261128 TO idem_test_rswap_reader WITH GRANT OPTION;
GRANT UPDATE (status) ON rswap.events_20261128 TO idem_test_rswap_reader;
ALTER TABLE rswap.events_20261128 SET (fillfactor = 70, autovacuum_enabled = false);
COMMENT ON TABLE rswap.events_20261128 IS 'the day of 2026-11-28';
CREATE INDEX events_20261128_status_idx ON rswap.events_20261128 (status);

-- properties(p): everything of a partition that must survive the swap
CREATE FUNCTION rswap.properties(p regclass) RETURNS TABLE (property text, value text)
LANGUAGE sql AS $$
    SELECT 'name', c.oid::regclass::text FROM pg_class c WHERE c.oid = p
    UNION ALL
    SELECT 'parent', i.inhparent::regclass::text FROM pg_inherits i WHERE i.inhrelid = p
    UNION ALL
    SELECT 'bound', pg_get_expr(c.relpartbound, c.oid) FROM pg_class c WHERE c.oid = p
    UNION ALL
    SELECT 'owner', c.relowner::regrole::text FROM pg_class c WHERE c.oid = p
    UNION ALL
    SELECT 'grant', (SELECT string_agg(format('%s:%s%s', a.grantee::regrole, a.privilege_type,
                                              CASE WHEN a.is_grantable THEN '*' ELSE '' END),
                                       ' ' ORDER BY a.grantee::regrole::text, a.privilege_type)
                       FROM pg_class c, aclexplode(c.relacl) a WHERE c.oid = p)
    UNION ALL
    SELECT 'column grant', (SELECT string_agg(format('%s.%s:%s', t.attname, a.grantee::regrole, a.privilege_type),
                                              ' ' ORDER BY t.attname, a.grantee::regrole::text)
                              FROM pg_attribute t, aclexplode(t.attacl) a
                             WHERE t.attrelid = p AND NOT t.attisdropped)
    UNION ALL
    SELECT 'reloptions', array_to_string(c.reloptions, ' ') FROM pg_class c WHERE c.oid = p
    UNION ALL
    SELECT 'comment', obj_description(p, 'pg_class')
    UNION ALL
    SELECT 'persistence', c.relpersistence::text FROM pg_class c WHERE c.oid = p
    UNION ALL
    -- index definitions without their names
    SELECT 'index', (SELECT string_agg(regexp_replace(pg_get_indexdef(x.indexrelid), 'INDEX \S+ ON \S+', 'INDEX ON')
                                       || CASE WHEN x.indisvalid THEN '' ELSE ' (invalid)' END
                                       || CASE WHEN EXISTS (SELECT FROM pg_inherits h WHERE h.inhrelid = x.indexrelid)
                                               THEN ' (attached)' ELSE '' END,
                                       '; ' ORDER BY 1)
                       FROM pg_index x WHERE x.indrelid = p)
$$;

-- files(): relfilenode of every partition, with its row versions
CREATE FUNCTION rswap.files() RETURNS TABLE (rel text, filenode oid, versions text)
LANGUAGE plpgsql AS $$
DECLARE r record;
BEGIN
    FOR r IN SELECT c.oid, c.relname, c.relkind FROM pg_class c
              WHERE c.relnamespace = 'rswap'::regnamespace AND c.relkind = 'r'
                AND c.relname LIKE 'events%'
              ORDER BY c.relname LOOP
        rel := r.relname;
        filenode := pg_relation_filenode(r.oid);
        versions := NULL;
        EXECUTE format('SELECT string_agg(format(''%%s@%%s'', ctid, xmin), '' '' ORDER BY ctid) FROM %s', r.oid::regclass)
           INTO versions;
        RETURN NEXT;
    END LOOP;
END $$;

-- scan counters of the partitions
CREATE VIEW rswap.scans AS
SELECT relname, seq_scan, coalesce(idx_scan, 0) AS idx_scan, n_tup_ins, n_tup_upd, n_tup_del
  FROM pg_stat_user_tables WHERE schemaname = 'rswap' AND relname LIKE 'events_%';

CREATE TABLE rswap.props_before AS SELECT * FROM rswap.properties('rswap.events_20261128');
CREATE TABLE rswap.files_before AS SELECT * FROM rswap.files();
SELECT * FROM rswap.props_before;
SELECT pg_stat_force_next_flush();
CREATE TABLE rswap.scans_before AS SELECT * FROM rswap.scans;

--
-- the swap: 3 new rows (status and plen from the default and the expression)
--
SELECT partition_table, rows_loaded, rows_replaced, skipped, run_id IS NOT NULL AS has_run_id
  FROM etl_replace_partition('rswap.events', '2026-11-28',
       $$SELECT '2026-11-28'::date AS event_date, g::bigint AS id, 'new ' || g AS payload
           FROM generate_series(10, 12) g$$);

-- scans of the other partitions: none (the replaced one is a new table)
SELECT pg_stat_force_next_flush();
SELECT b.relname, s.seq_scan - b.seq_scan AS seq_scans, s.idx_scan - b.idx_scan AS idx_scans,
       s.n_tup_ins - b.n_tup_ins AS ins, s.n_tup_upd - b.n_tup_upd AS upd, s.n_tup_del - b.n_tup_del AS del
  FROM rswap.scans_before b JOIN rswap.scans s USING (relname)
 WHERE b.relname <> 'events_20261128'
 ORDER BY 1;

-- every property is the same
SELECT b.property, b.value AS before, a.value AS after
  FROM rswap.props_before b
  FULL JOIN rswap.properties('rswap.events_20261128') a USING (property)
 WHERE b.value IS DISTINCT FROM a.value;
SELECT count(*) AS properties_compared FROM rswap.properties('rswap.events_20261128');

-- a new relfilenode for the replaced partition; every other partition
-- keeps its file and its row versions; no partition added or gone
SELECT coalesce(b.rel, a.rel) AS rel,
       CASE WHEN b.rel IS NULL THEN 'added' WHEN a.rel IS NULL THEN 'gone'
            WHEN a.filenode <> b.filenode THEN 'new file'
            WHEN a.versions IS DISTINCT FROM b.versions THEN 'rows rewritten'
            ELSE 'untouched' END AS state
  FROM rswap.files_before b FULL JOIN rswap.files() a USING (rel)
 ORDER BY 1;
-- no table other than the partitions and the test's own (no staging or old table left)
SELECT relname FROM pg_class
 WHERE relnamespace = 'rswap'::regnamespace AND relkind IN ('r', 'p')
 ORDER BY 1;

-- its contents are the source rows, with defaults and generated values
SELECT * FROM rswap.events WHERE event_date = '2026-11-28' ORDER BY id;
SELECT tableoid::regclass, count(*) FROM rswap.events GROUP BY 1 ORDER BY tableoid::regclass::text;
-- it was analyzed (statistics exist for the new table)
SELECT count(*) > 0 AS analyzed FROM pg_stats
 WHERE schemaname = 'rswap' AND tablename = 'events_20261128';
-- the grants work: the reader may read the partition
SET ROLE idem_test_rswap_reader;
SELECT count(*) FROM rswap.events_20261128;
RESET ROLE;
-- the primary key still works through the new partition
DO $$
BEGIN
    INSERT INTO rswap.events (event_date, id, payload) VALUES ('2026-11-28', 10, 'dup');
    RAISE EXCEPTION 'duplicate accepted';
EXCEPTION WHEN unique_violation THEN
    RAISE NOTICE 'primary key enforced';
END $$;

--
-- again: the same name, a new file each time; an empty source empties it
--
SELECT pg_relation_filenode('rswap.events_20261128') AS fn \gset
SELECT partition_table, rows_loaded, rows_replaced, skipped
  FROM etl_replace_partition('rswap.events', '2026-11-28',
       $$SELECT '2026-11-28'::date AS event_date, 1::bigint AS id, 'x' AS payload, 'done' AS status$$);
SELECT pg_relation_filenode('rswap.events_20261128') <> :fn AS new_file;
SELECT * FROM rswap.events WHERE event_date = '2026-11-28' ORDER BY id;
SELECT partition_table, rows_loaded, rows_replaced, skipped
  FROM etl_replace_partition('rswap.events', '2026-11-28',
       $$SELECT '2026-11-28'::date AS event_date, 1::bigint AS id WHERE false$$,
       allow_shrink => true);
SELECT count(*) FROM rswap.events WHERE event_date = '2026-11-28';
SELECT b.property, b.value AS before, a.value AS after
  FROM rswap.props_before b
  FULL JOIN rswap.properties('rswap.events_20261128') a USING (property)
 WHERE b.value IS DISTINCT FROM a.value;
-- the other days still have their original files and rows
SELECT b.rel, a.filenode = b.filenode AS same_file, a.versions = b.versions AS same_rows
  FROM rswap.files_before b JOIN rswap.files() a USING (rel)
 WHERE b.rel IN ('events_20261127', 'events_20261129')
 ORDER BY 1;

--
-- a partition whose columns are in another order than the parent's, and a
-- parent with a dropped column: the new table is shaped like the partition
--
CREATE TABLE rswap.m (a int, dropme text, d date NOT NULL, v text) PARTITION BY LIST (d);
ALTER TABLE rswap.m DROP COLUMN dropme;
CREATE TABLE rswap.m_jan (v text, d date NOT NULL, a int);
ALTER TABLE rswap.m ATTACH PARTITION rswap.m_jan FOR VALUES IN ('2026-01-01');
CREATE TABLE rswap.m_feb PARTITION OF rswap.m FOR VALUES IN ('2026-02-01');
INSERT INTO rswap.m VALUES (1, '2026-01-01', 'old'), (2, '2026-02-01', 'feb');
SELECT partition_table, rows_loaded, rows_replaced, skipped
  FROM etl_replace_partition('rswap.m', '2026-01-01',
       $$SELECT 'new' AS v, 10 AS a, '2026-01-01'::date AS d UNION ALL SELECT 'newer', 11, '2026-01-01'$$);
SELECT * FROM rswap.m ORDER BY a;
SELECT * FROM rswap.m_jan ORDER BY a;
SELECT pg_get_expr(relpartbound, oid) FROM pg_class WHERE oid = 'rswap.m_jan'::regclass;

SET client_min_messages = warning;
DROP SCHEMA rswap CASCADE;
DROP EXTENSION idem_etl;
RESET client_min_messages;
DROP ROLE idem_test_rswap_owner;
DROP ROLE idem_test_rswap_reader;
