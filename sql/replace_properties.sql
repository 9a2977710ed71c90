--
-- replace_properties: a replaced partition keeps what it had that its
-- readers and replication depend on: persistence (UNLOGGED), per-column
-- statistics targets, storage and compression, extended statistics, the
-- replica identity (FULL, or USING INDEX re-pointed to the new table's
-- index), besides what security_rights shows (row security, policies,
-- triggers) and replace_keep (owner, grants, comment, reloptions).  A
-- partition published by name cannot be carried: refused (0A000) before
-- any work.  A created partition takes the parent's replica identity.
--
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS idem_etl CASCADE;
CREATE EXTENSION idem_etl;
DROP SCHEMA IF EXISTS rprop CASCADE;
DROP PUBLICATION IF EXISTS rprop_pub;
\set roles {idem_test_rprop_other}
\i sql/include/drop_roles.sql
RESET client_min_messages;
CREATE SCHEMA rprop;
\set schema rprop
\i sql/include/err.sql

CREATE TABLE rprop.t (d date NOT NULL, id int NOT NULL, v text, w text, PRIMARY KEY (d, id))
    PARTITION BY RANGE (d);
CREATE TABLE rprop.t_1 PARTITION OF rprop.t FOR VALUES FROM ('2026-11-01') TO ('2026-11-02');
CREATE UNLOGGED TABLE rprop.t_2 PARTITION OF rprop.t FOR VALUES FROM ('2026-11-02') TO ('2026-11-03');
CREATE TABLE rprop.t_3 PARTITION OF rprop.t FOR VALUES FROM ('2026-11-03') TO ('2026-11-04');
ALTER TABLE rprop.t_1 ALTER COLUMN v SET STATISTICS 500;
ALTER TABLE rprop.t_1 ALTER COLUMN w SET STORAGE EXTERNAL;
ALTER TABLE rprop.t_1 ALTER COLUMN w SET COMPRESSION pglz;
CREATE STATISTICS rprop.t_1_vw ON v, w FROM rprop.t_1;
ALTER TABLE rprop.t_1 REPLICA IDENTITY FULL;
CREATE UNIQUE INDEX t_2_id ON rprop.t_2 (id);
ALTER TABLE rprop.t_2 ALTER COLUMN id SET NOT NULL;
ALTER TABLE rprop.t_2 REPLICA IDENTITY USING INDEX t_2_id;

CREATE FUNCTION rprop.props(p regclass) RETURNS TABLE (persistence "char", replica_identity "char",
    replica_index text, v_stattarget int, w_storage "char", w_compression "char", ext_stats text)
LANGUAGE sql AS $$
    SELECT c.relpersistence, c.relreplident,
           (SELECT i.indexrelid::regclass::text FROM pg_index i WHERE i.indrelid = p AND i.indisreplident),
           -- the default is -1 up to 16, NULL from 17 on
           (SELECT coalesce(attstattarget, -1) FROM pg_attribute WHERE attrelid = p AND attname = 'v'),
           (SELECT attstorage FROM pg_attribute WHERE attrelid = p AND attname = 'w'),
           (SELECT attcompression FROM pg_attribute WHERE attrelid = p AND attname = 'w'),
           (SELECT string_agg(stxname, ',') FROM pg_statistic_ext WHERE stxrelid = p)
      FROM pg_class c WHERE c.oid = p
$$;
SELECT 't_1' AS p, * FROM rprop.props('rprop.t_1') UNION ALL SELECT 't_2', * FROM rprop.props('rprop.t_2');
SELECT rows_loaded FROM etl_replace_partition('rprop.t', '2026-11-01', $$SELECT '2026-11-01'::date AS d, 1 AS id, 'a' AS v, 'b' AS w$$);
SELECT rows_loaded FROM etl_replace_partition('rprop.t', '2026-11-02', $$SELECT '2026-11-02'::date AS d, 1 AS id, 'a' AS v, 'b' AS w$$);
-- the same, after the swaps (extended statistics keep their names: they
-- were named after the load table)
SELECT 't_1' AS p, * FROM rprop.props('rprop.t_1') UNION ALL SELECT 't_2', * FROM rprop.props('rprop.t_2');

-- a trigger's arguments naming the table, and a quoted trigger name holding
-- its ON clause, are carried as they are (every " ON table " of the
-- definition was rewritten to the load table's name); a kept version's
-- statistics are named after it, the new partition's keep their names
CREATE TABLE rprop.pp (d date NOT NULL, id int NOT NULL, v int) PARTITION BY RANGE (d);
CREATE TABLE rprop.pp_1 PARTITION OF rprop.pp FOR VALUES FROM ('2026-01-01') TO ('2026-01-02');
CREATE FUNCTION rprop.tf() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN RETURN NEW; END$$;
CREATE TRIGGER "x ON rprop.pp_1 y" BEFORE UPDATE ON rprop.pp_1
    FOR EACH ROW WHEN (NEW.v::text <> ' ON rprop.pp_1 ') EXECUTE FUNCTION rprop.tf('x ON rprop.pp_1 y');
CREATE STATISTICS rprop.pp_1_st ON id, v FROM rprop.pp_1;
CREATE STATISTICS rprop.other_name ON d, v FROM rprop.pp_1;
-- a name of 63 bytes: the kept version's name is shortened (an assertion
-- failure, and a heap overrun without assertions)
CREATE STATISTICS rprop.stat_with_a_name_as_long_as_postgresql_allows_sixty_three_bytes ON d, id FROM rprop.pp_1;
SELECT rows_loaded FROM etl_replace_partition('rprop.pp', '2026-01-01',
    $$SELECT '2026-01-01'::date AS d, 1 AS id, 1 AS v$$, keep_replaced => '1 day');
SELECT pg_get_triggerdef(oid) FROM pg_trigger WHERE tgrelid = 'rprop.pp_1'::regclass;
SELECT regexp_replace(stxrelid::regclass::text, 'kept_[0-9]+$', 'kept_N') AS rel,
       regexp_replace(stxname, '^idem_etl_kept_[0-9]+', 'idem_etl_kept_N') AS stxname
  FROM pg_statistic_ext WHERE stxnamespace = 'rprop'::regnamespace AND stxname NOT LIKE 't\_%'
 ORDER BY 1, 2;

-- tablespaces, and the indexes' storage parameters: of the partition and
-- its indexes, or for a new partition the parent's (all went to the
-- database's default tablespace, and the primary key lost its fillfactor)
SET allow_in_place_tablespaces = on;
CREATE TABLESPACE idem_test_rprop_ts LOCATION '';
RESET allow_in_place_tablespaces;
CREATE TABLE rprop.ts (d date NOT NULL, id int, v int, PRIMARY KEY (d, id) WITH (fillfactor = 70))
    PARTITION BY RANGE (d);
CREATE TABLE rprop.ts_1 PARTITION OF rprop.ts FOR VALUES FROM ('2026-01-01') TO ('2026-01-02')
    TABLESPACE idem_test_rprop_ts;
ALTER INDEX rprop.ts_1_pkey SET TABLESPACE idem_test_rprop_ts;
CREATE INDEX ts_1_v ON rprop.ts_1 (v) WITH (fillfactor = 80) TABLESPACE idem_test_rprop_ts WHERE v > 0;
CREATE TABLE rprop.tsq (d date NOT NULL, v int) PARTITION BY RANGE (d) TABLESPACE idem_test_rprop_ts;
SELECT rows_loaded FROM etl_replace_partition('rprop.ts', '2026-01-01',
    $$SELECT '2026-01-01'::date AS d, 1 AS id, 1 AS v$$);
SELECT rows_loaded FROM etl_replace_partition('rprop.tsq', '2026-01-01',
    $$SELECT '2026-01-01'::date AS d, 1 AS v$$, granularity => '1 day');
SELECT c.relname, t.spcname, c.reloptions, pg_get_expr(i.indpred, i.indrelid) AS predicate
  FROM pg_class c LEFT JOIN pg_tablespace t ON t.oid = c.reltablespace
  LEFT JOIN pg_index i ON i.indexrelid = c.oid
 WHERE c.relnamespace = 'rprop'::regnamespace AND c.relname LIKE 'ts%' ORDER BY 1;

-- published by name: refused before any work
-- (wal_level's warning is worded differently in each major, and gone in 19)
SET client_min_messages = error;
CREATE PUBLICATION rprop_pub FOR TABLE rprop.t_3;
RESET client_min_messages;
SELECT pg_relation_filenode('rprop.t_3') AS t3_file \gset
SELECT * FROM rprop.err($$SELECT * FROM etl_replace_partition('rprop.t', '2026-11-03', 'SELECT ''2026-11-03''::date AS d, 1 AS id')$$);
SELECT pg_relation_filenode('rprop.t_3') = :t3_file AS t3_untouched;
DROP PUBLICATION rprop_pub;

-- a created partition takes the parent's replica identity
ALTER TABLE rprop.t REPLICA IDENTITY FULL;
SELECT rows_loaded FROM etl_replace_partition('rprop.t', '2026-11-04', $$SELECT '2026-11-04'::date AS d, 1 AS id$$,
    granularity => '1 day');
SELECT replica_identity FROM rprop.props('rprop.t_20261104');

-- Each property alone on an otherwise plain partition is carried: what the
-- old partition has is read from its catalog entries first, and the
-- statement that carries properties runs only when there is something
-- (issue 11: planning it cost a few ms in a new session).  setup names the
-- partition p; check returns what the new partition has.
CREATE ROLE idem_test_rprop_other;
CREATE FUNCTION rprop.carried(setup text, check_sql text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE r text;
BEGIN
    DROP TABLE IF EXISTS rprop.one;
    CREATE TABLE rprop.one (d date, id int, v text) PARTITION BY RANGE (d);
    CREATE TABLE rprop.one_p PARTITION OF rprop.one FOR VALUES FROM ('2026-11-01') TO ('2026-11-02');
    EXECUTE replace(setup, ' p ', ' rprop.one_p ');
    PERFORM etl_replace_partition('rprop.one', '2026-11-01', $s$SELECT '2026-11-01'::date AS d, 1 AS id, 'x' AS v$s$);
    EXECUTE replace(check_sql, '$p', '''rprop.one_p''::regclass') INTO r;
    RETURN r;
END $$;
SELECT what, rprop.carried(setup, check_sql) AS carried
  FROM (VALUES
    ('row security', 'ALTER TABLE p ENABLE ROW LEVEL SECURITY',
     'SELECT relrowsecurity::text FROM pg_class WHERE oid = $p'),
    ('forced row security', 'ALTER TABLE p FORCE ROW LEVEL SECURITY',
     'SELECT relforcerowsecurity::text FROM pg_class WHERE oid = $p'),
    ('a policy, row security off', 'CREATE POLICY pol ON p USING (id > 0)',
     'SELECT string_agg(polname, '','') FROM pg_policy WHERE polrelid = $p'),
    ('a trigger of its own', 'CREATE TRIGGER trg BEFORE UPDATE ON p FOR EACH ROW EXECUTE FUNCTION suppress_redundant_updates_trigger()',
     'SELECT string_agg(tgname, '','') FROM pg_trigger WHERE tgrelid = $p AND NOT tgisinternal'),
    ('a storage parameter', 'ALTER TABLE p SET (fillfactor = 70)',
     'SELECT array_to_string(reloptions, '','') FROM pg_class WHERE oid = $p'),
    ('a TOAST storage parameter', 'ALTER TABLE p SET (toast.autovacuum_enabled = false)',
     'SELECT array_to_string(t.reloptions, '','') FROM pg_class c JOIN pg_class t ON t.oid = c.reltoastrelid WHERE c.oid = $p'),
    ('a comment', 'COMMENT ON TABLE p IS ''the day''',
     'SELECT obj_description($p, ''pg_class'')'),
    ('a table grant', 'GRANT SELECT ON p TO idem_test_rprop_other',
     'SELECT has_table_privilege(''idem_test_rprop_other'', $p, ''SELECT'')::text'),
    ('a column grant', 'GRANT SELECT (v) ON p TO idem_test_rprop_other',
     'SELECT has_column_privilege(''idem_test_rprop_other'', $p, ''v'', ''SELECT'')::text'),
    ('a statistics target', 'ALTER TABLE p ALTER COLUMN v SET STATISTICS 300',
     'SELECT attstattarget::text FROM pg_attribute WHERE attrelid = $p AND attname = ''v'''),
    ('replica identity NOTHING', 'ALTER TABLE p REPLICA IDENTITY NOTHING',
     'SELECT relreplident::text FROM pg_class WHERE oid = $p'),
    ('another owner', 'ALTER TABLE p OWNER TO idem_test_rprop_other',
     'SELECT pg_get_userbyid(relowner)::text FROM pg_class WHERE oid = $p'),
    ('nothing', 'SELECT count(*) FROM p WHERE true',
     'SELECT concat_ws('','', relrowsecurity, relreplident, reloptions, relacl) FROM pg_class WHERE oid = $p')
  ) AS c(what, setup, check_sql);
DROP TABLE rprop.one;

SET client_min_messages = warning;
DROP SCHEMA rprop CASCADE;
DROP TABLESPACE idem_test_rprop_ts;
DROP EXTENSION idem_etl;
\set roles {idem_test_rprop_other}
\i sql/include/drop_roles.sql
