--
-- replace_names: issue 10, point 9.  A created partition's name longer than
-- 63 bytes keeps its whole value suffix and shortens the parent's part,
-- never inside a UTF-8 character; two long parents sharing a prefix never
-- collide.
--
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS idem_etl CASCADE;
CREATE EXTENSION idem_etl;
DROP SCHEMA IF EXISTS rname CASCADE;
RESET client_min_messages;
CREATE SCHEMA rname;

-- 60 bytes of parent name, the last characters two bytes each
CREATE TABLE rname."events_of_the_warehouse_in_the_north_region_ééééééééé" (d date NOT NULL) PARTITION BY RANGE (d);
CREATE TABLE rname."events_of_the_warehouse_in_the_north_region_éééééééééx" (d date NOT NULL) PARTITION BY RANGE (d);
SELECT partition_table FROM etl_replace_partition('rname."events_of_the_warehouse_in_the_north_region_ééééééééé"',
    '2026-11-28', $$SELECT '2026-11-28'::date AS d$$, granularity => '1 day');
SELECT partition_table FROM etl_replace_partition('rname."events_of_the_warehouse_in_the_north_region_éééééééééx"',
    '2026-11-28', $$SELECT '2026-11-28'::date AS d$$, granularity => '1 day');
SELECT partition_table FROM etl_replace_partition('rname."events_of_the_warehouse_in_the_north_region_ééééééééé"',
    '2026-11-29', $$SELECT '2026-11-29'::date AS d$$, granularity => '1 day');
SELECT c.relname, octet_length(c.relname::text) AS bytes, p.relname AS parent
  FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid JOIN pg_class p ON p.oid = i.inhparent
 WHERE p.relnamespace = 'rname'::regnamespace ORDER BY 1;

SET client_min_messages = warning;
DROP SCHEMA rname CASCADE;
