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
           (SELECT attstattarget FROM pg_attribute WHERE attrelid = p AND attname = 'v'),
           (SELECT attstorage FROM pg_attribute WHERE attrelid = p AND attname = 'w'),
           (SELECT attcompression FROM pg_attribute WHERE attrelid = p AND attname = 'w'),
           (SELECT string_agg(stxname, ',') FROM pg_statistic_ext WHERE stxrelid = p)
      FROM pg_class c WHERE c.oid = p
$$;
SELECT 't_1' AS p, * FROM rprop.props('rprop.t_1') UNION ALL SELECT 't_2', * FROM rprop.props('rprop.t_2');
SELECT rows_loaded FROM etl_replace_partition('rprop.t', '2026-11-01', $$SELECT '2026-11-01'::date AS d, 1 AS id, 'a' AS v, 'b' AS w$$);
SELECT rows_loaded FROM etl_replace_partition('rprop.t', '2026-11-02', $$SELECT '2026-11-02'::date AS d, 1 AS id, 'a' AS v, 'b' AS w$$);
-- the same, after the swaps (extended statistics are named after the new table)
SELECT 't_1' AS p, persistence, replica_identity, replica_index, v_stattarget, w_storage, w_compression,
       ext_stats IS NOT NULL AS has_ext_stats FROM rprop.props('rprop.t_1')
UNION ALL SELECT 't_2', persistence, replica_identity, replica_index, v_stattarget, w_storage, w_compression,
       ext_stats IS NOT NULL FROM rprop.props('rprop.t_2');

-- published by name: refused before any work
CREATE PUBLICATION rprop_pub FOR TABLE rprop.t_3;
SELECT pg_relation_filenode('rprop.t_3') AS t3_file \gset
SELECT * FROM rprop.err($$SELECT * FROM etl_replace_partition('rprop.t', '2026-11-03', 'SELECT ''2026-11-03''::date AS d, 1 AS id')$$);
SELECT pg_relation_filenode('rprop.t_3') = :t3_file AS t3_untouched;
DROP PUBLICATION rprop_pub;

-- a created partition takes the parent's replica identity
ALTER TABLE rprop.t REPLICA IDENTITY FULL;
SELECT rows_loaded FROM etl_replace_partition('rprop.t', '2026-11-04', $$SELECT '2026-11-04'::date AS d, 1 AS id$$,
    granularity => '1 day');
SELECT replica_identity FROM rprop.props('rprop.t_20261104');

SET client_min_messages = warning;
DROP SCHEMA rprop CASCADE;
DROP EXTENSION idem_etl;
