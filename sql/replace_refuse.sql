--
-- replace_refuse: point 10 of etl_replace_partition (refused clearly), and
-- the arguments.  0A000 for a partition key of several columns or an
-- expression, hash partitioning, and a partition that is itself
-- partitioned; 23503 naming the constraint when foreign keys of another
-- table point into the partition; 42501 for a caller who does not own the
-- target (ATTACH/DETACH need ownership, other privileges do not suffice);
-- 22023 for a partition_column that is not the partition key.  Nothing
-- changes in any of these cases.
--
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS idem_etl CASCADE;
CREATE EXTENSION idem_etl;
DROP SCHEMA IF EXISTS rrefuse CASCADE;
DROP SCHEMA IF EXISTS rrefuse_owned CASCADE;
\set roles {idem_test_rrefuse_etl,idem_test_rrefuse_owner}
\i sql/include/drop_roles.sql
RESET client_min_messages;

CREATE SCHEMA rrefuse;

\set schema rrefuse
\i sql/include/err.sql

-- state(): every relation of the schema with its file and rows, and the ledger
CREATE FUNCTION rrefuse.state() RETURNS text LANGUAGE plpgsql AS $$
DECLARE r record; s text := ''; x text;
BEGIN
    FOR r IN SELECT c.oid, c.relname, c.relkind FROM pg_class c
              WHERE c.relnamespace = 'rrefuse'::regnamespace ORDER BY c.relname LOOP
        s := s || format('%s/%s/%s', r.relname, r.relkind, pg_relation_filenode(r.oid));
        IF r.relkind = 'r' THEN
            EXECUTE format('SELECT string_agg(format(''%%s@%%s'', x::text, x.xmin), '' '' ORDER BY x::text) FROM %s x',
                           r.oid::regclass) INTO x;
            s := s || ' [' || coalesce(x, '') || ']';
        END IF;
        s := s || E'\n';
    END LOOP;
    RETURN s || 'ledger: ' || (SELECT count(*) FROM idem_etl.runs)
             || ' kept: ' || (SELECT count(*) FROM idem_etl.replaced_partitions);
END $$;

-- a partition key of two columns
CREATE TABLE rrefuse.two (d date NOT NULL, region text NOT NULL, v text) PARTITION BY RANGE (d, region);
CREATE TABLE rrefuse.two_p PARTITION OF rrefuse.two FOR VALUES FROM ('2026-11-28', 'a') TO ('2026-11-28', 'z');
INSERT INTO rrefuse.two VALUES ('2026-11-28', 'eu', 'old');
-- an expression as the key
CREATE TABLE rrefuse.expr (ts timestamp NOT NULL, v text) PARTITION BY LIST ((date_trunc('day', ts)));
CREATE TABLE rrefuse.expr_p PARTITION OF rrefuse.expr FOR VALUES IN ('2026-11-28');
INSERT INTO rrefuse.expr VALUES ('2026-11-28 10:00', 'old');
-- hash partitioning
CREATE TABLE rrefuse.hashed (id int NOT NULL, v text) PARTITION BY HASH (id);
CREATE TABLE rrefuse.hashed_0 PARTITION OF rrefuse.hashed FOR VALUES WITH (MODULUS 2, REMAINDER 0);
CREATE TABLE rrefuse.hashed_1 PARTITION OF rrefuse.hashed FOR VALUES WITH (MODULUS 2, REMAINDER 1);
INSERT INTO rrefuse.hashed VALUES (1, 'old'), (2, 'old');
-- a partition that is itself partitioned
CREATE TABLE rrefuse.sub (d date NOT NULL, region text NOT NULL, v text) PARTITION BY RANGE (d);
CREATE TABLE rrefuse.sub_20261127 PARTITION OF rrefuse.sub FOR VALUES FROM ('2026-11-27') TO ('2026-11-28');
CREATE TABLE rrefuse.sub_20261128 PARTITION OF rrefuse.sub FOR VALUES FROM ('2026-11-28') TO ('2026-11-29')
    PARTITION BY LIST (region);
CREATE TABLE rrefuse.sub_20261128_eu PARTITION OF rrefuse.sub_20261128 FOR VALUES IN ('eu');
INSERT INTO rrefuse.sub VALUES ('2026-11-27', 'eu', 'old'), ('2026-11-28', 'eu', 'old');
-- a target referenced by a foreign key
CREATE TABLE rrefuse.orders (d date NOT NULL, id int NOT NULL, v text, PRIMARY KEY (d, id)) PARTITION BY RANGE (d);
CREATE TABLE rrefuse.orders_20261127 PARTITION OF rrefuse.orders FOR VALUES FROM ('2026-11-27') TO ('2026-11-28');
CREATE TABLE rrefuse.orders_20261128 PARTITION OF rrefuse.orders FOR VALUES FROM ('2026-11-28') TO ('2026-11-29');
INSERT INTO rrefuse.orders VALUES ('2026-11-27', 1, 'old'), ('2026-11-28', 1, 'old'), ('2026-11-28', 2, 'old');
CREATE TABLE rrefuse.lines (line int PRIMARY KEY, d date, order_id int,
    CONSTRAINT lines_order_fkey FOREIGN KEY (d, order_id) REFERENCES rrefuse.orders);
INSERT INTO rrefuse.lines VALUES (1, '2026-11-28', 1);
-- an ordinary one
CREATE TABLE rrefuse.ok (d date NOT NULL, v text) PARTITION BY LIST (d);
CREATE TABLE rrefuse.ok_20261128 PARTITION OF rrefuse.ok FOR VALUES IN ('2026-11-28');
INSERT INTO rrefuse.ok VALUES ('2026-11-28', 'old');
CREATE VIEW rrefuse.a_view AS SELECT * FROM rrefuse.ok;
-- partitioned by a number
CREATE TABLE rrefuse.batches (batch int NOT NULL, v text) PARTITION BY RANGE (batch);
CREATE TABLE rrefuse.batches_1 PARTITION OF rrefuse.batches FOR VALUES FROM (1) TO (2);

SELECT rrefuse.state() AS before \gset

--
-- unsupported partitioning: 0A000
--
SELECT * FROM rrefuse.err($$SELECT * FROM etl_replace_partition('rrefuse.two', '2026-11-28',
    'SELECT ''2026-11-28''::date AS d, ''eu'' AS region, ''new'' AS v')$$);
SELECT * FROM rrefuse.err($$SELECT * FROM etl_replace_partition('rrefuse.expr', '2026-11-28',
    'SELECT ''2026-11-28 11:00''::timestamp AS ts, ''new'' AS v')$$);
SELECT * FROM rrefuse.err($$SELECT * FROM etl_replace_partition('rrefuse.hashed', '1',
    'SELECT 1 AS id, ''new'' AS v')$$);
SELECT * FROM rrefuse.err($$SELECT * FROM etl_replace_partitions('rrefuse.hashed',
    'SELECT 1 AS id, ''new'' AS v')$$);
SELECT * FROM rrefuse.err($$SELECT * FROM etl_replace_partition('rrefuse.sub', '2026-11-28',
    'SELECT ''2026-11-28''::date AS d, ''eu'' AS region, ''new'' AS v')$$);
SELECT * FROM rrefuse.err($$SELECT * FROM etl_replace_partitions('rrefuse.sub',
    'SELECT ''2026-11-28''::date AS d, ''eu'' AS region, ''new'' AS v')$$);
SELECT rrefuse.state() = :'before' AS unchanged;
-- the other partitions of a table with a sub-partitioned one are fine
SELECT partition_table, rows_loaded, rows_replaced
  FROM etl_replace_partition('rrefuse.sub', '2026-11-27',
       'SELECT ''2026-11-27''::date AS d, ''eu'' AS region, ''new'' AS v');
SELECT * FROM rrefuse.sub ORDER BY d;
SELECT rrefuse.state() AS before \gset

--
-- a partition in another schema than its parent's (ALTER TABLE ... SET
-- SCHEMA moves only the parent): 0A000 before anything is done.  It was
-- looked up in the parent's schema: "relation does not exist", or a table
-- of the same name there, another partition, was detached and dropped
-- before the ATTACH failed.
--
CREATE SCHEMA rrefuse_parts;
CREATE TABLE rrefuse.ms (d date NOT NULL, id int NOT NULL) PARTITION BY RANGE (d);
CREATE TABLE rrefuse_parts.ms_x PARTITION OF rrefuse.ms FOR VALUES FROM ('2026-11-01') TO ('2026-11-02');
CREATE TABLE rrefuse.ms_x PARTITION OF rrefuse.ms FOR VALUES FROM ('2026-11-02') TO ('2026-11-03');
INSERT INTO rrefuse.ms VALUES ('2026-11-01', 1), ('2026-11-02', 2);
SELECT rrefuse.state() AS before \gset
SELECT * FROM rrefuse.err($$SELECT * FROM etl_replace_partition('rrefuse.ms', '2026-11-01',
    'SELECT ''2026-11-01''::date AS d, 3 AS id')$$);
SELECT * FROM rrefuse.err($$SELECT * FROM etl_replace_partitions('rrefuse.ms',
    'SELECT ''2026-11-01''::date AS d, 3 AS id')$$);
SELECT rrefuse.state() = :'before' AS unchanged;
SELECT * FROM rrefuse.ms ORDER BY d;
-- its neighbour in the parent's schema is replaced as usual
SELECT partition_table, rows_loaded, rows_replaced
  FROM etl_replace_partition('rrefuse.ms', '2026-11-02', 'SELECT ''2026-11-02''::date AS d, 4 AS id');
DROP TABLE rrefuse.ms;
DROP SCHEMA rrefuse_parts;
SELECT rrefuse.state() AS before \gset

--
-- foreign keys pointing into the partition: 23503 naming the constraint
--
SELECT * FROM rrefuse.err($$SELECT * FROM etl_replace_partition('rrefuse.orders', '2026-11-28',
    'SELECT ''2026-11-28''::date AS d, 1 AS id, ''new'' AS v')$$);
SELECT rrefuse.state() = :'before' AS unchanged;
-- a partition no referencing row points into can be replaced
SELECT partition_table, rows_loaded, rows_replaced
  FROM etl_replace_partition('rrefuse.orders', '2026-11-27',
       'SELECT ''2026-11-27''::date AS d, 5 AS id, ''new'' AS v');
-- and the foreign key still holds afterwards
SELECT * FROM rrefuse.err($$INSERT INTO rrefuse.lines VALUES (2, '2026-11-27', 1)$$);
INSERT INTO rrefuse.lines VALUES (3, '2026-11-27', 5);
-- once no row points into it any more, the other one can be replaced too
DELETE FROM rrefuse.lines WHERE d = '2026-11-28';
SELECT partition_table, rows_loaded, rows_replaced
  FROM etl_replace_partition('rrefuse.orders', '2026-11-28',
       'SELECT ''2026-11-28''::date AS d, 1 AS id, ''new'' AS v');
SELECT rrefuse.state() AS before \gset

--
-- partition_column: must be the partition key of a partitioned target
--
SELECT * FROM rrefuse.err($$SELECT * FROM etl_replace_partition('rrefuse.ok', '2026-11-28',
    'SELECT ''2026-11-28''::date AS d, ''new'' AS v', partition_column => 'v')$$);
SELECT * FROM rrefuse.err($$SELECT * FROM etl_replace_partition('rrefuse.ok', '2026-11-28',
    'SELECT ''2026-11-28''::date AS d, ''new'' AS v', partition_column => 'nope')$$);
SELECT rrefuse.state() = :'before' AS unchanged;
SELECT partition_table, rows_loaded, rows_replaced
  FROM etl_replace_partition('rrefuse.ok', '2026-11-28',
       'SELECT ''2026-11-28''::date AS d, ''named key'' AS v', partition_column => 'd');
SELECT rrefuse.state() AS before \gset

--
-- arguments
--
-- not a table
SELECT * FROM rrefuse.err($$SELECT * FROM etl_replace_partition('rrefuse.a_view', '2026-11-28',
    'SELECT ''2026-11-28''::date AS d, ''new'' AS v', partition_column => 'd')$$);
-- NULL arguments
SELECT * FROM rrefuse.err($$SELECT * FROM etl_replace_partition(NULL, '2026-11-28', 'SELECT 1')$$);
SELECT * FROM rrefuse.err($$SELECT * FROM etl_replace_partition('rrefuse.ok', NULL,
    'SELECT ''2026-11-28''::date AS d, ''new'' AS v')$$);
SELECT * FROM rrefuse.err($$SELECT * FROM etl_replace_partition('rrefuse.ok', '2026-11-28', NULL)$$);
-- a source of two statements, or not a query: 42601, the second never runs
SELECT * FROM rrefuse.err($$SELECT * FROM etl_replace_partition('rrefuse.ok', '2026-11-28',
    'SELECT ''2026-11-28''::date AS d, ''new'' AS v; DROP TABLE rrefuse.lines')$$);
SELECT * FROM rrefuse.err($$SELECT * FROM etl_replace_partition('rrefuse.ok', '2026-11-28',
    'DELETE FROM rrefuse.lines RETURNING d, ''x'' AS v')$$);
-- a granularity that is not a positive width
SELECT * FROM rrefuse.err($$SELECT * FROM etl_replace_partition('rrefuse.orders', '2026-12-24',
    'SELECT ''2026-12-24''::date AS d, 1 AS id', granularity => '0 days')$$);
SELECT * FROM rrefuse.err($$SELECT * FROM etl_replace_partition('rrefuse.orders', '2026-12-24',
    'SELECT ''2026-12-24''::date AS d, 1 AS id', granularity => '-1 day')$$);
-- a granularity for a key that is not a date or timestamp: 22023
SELECT * FROM rrefuse.err($$SELECT * FROM etl_replace_partition('rrefuse.batches', '1',
    'SELECT 1 AS batch, ''x'' AS v', granularity => '1 day')$$);
SELECT * FROM rrefuse.err($$SELECT * FROM etl_replace_partitions('rrefuse.batches',
    'SELECT 1 AS batch, ''x'' AS v', granularity => '1 day')$$);
-- a target that no longer exists, by OID (as a regclass argument kept from
-- before a DROP would be): 42P01, for every function
SELECT * FROM rrefuse.err($$SELECT * FROM etl_replace_partition(4000000000::oid::regclass, '2026-11-28', 'SELECT 1')$$);
SELECT * FROM rrefuse.err($$SELECT * FROM etl_replace_where(4000000000::oid::regclass, 'true', 'SELECT 1')$$);
SELECT * FROM rrefuse.err($$SELECT * FROM etl_upsert_batch(4000000000::oid::regclass, 'SELECT 1')$$);
-- etl_replace_where's NULL arguments: 22004
SELECT * FROM rrefuse.err($$SELECT * FROM etl_replace_where(NULL, 'true', 'SELECT 1')$$);
SELECT * FROM rrefuse.err($$SELECT * FROM etl_replace_where('rrefuse.ok', NULL, 'SELECT 1')$$);
SELECT * FROM rrefuse.err($$SELECT * FROM etl_replace_where('rrefuse.ok', 'true', NULL)$$);
-- a negative keep_replaced
SELECT * FROM rrefuse.err($$SELECT * FROM etl_replace_partition('rrefuse.ok', '2026-11-28',
    'SELECT ''2026-11-28''::date AS d, ''new'' AS v', keep_replaced => '-1 day')$$);
SELECT rrefuse.state() = :'before' AS unchanged;
SELECT count(*) AS lines FROM rrefuse.lines;

--
-- ownership: every privilege on the target is not enough (42501); the
-- owner, an ordinary role, can do everything.  From 17 on ALL includes
-- MAINTAIN, which does not let a role swap partitions either: DETACH and
-- ATTACH PARTITION require ownership on every major.
--
CREATE ROLE idem_test_rrefuse_etl;
GRANT USAGE, CREATE ON SCHEMA rrefuse TO idem_test_rrefuse_etl;
GRANT ALL ON rrefuse.ok, rrefuse.ok_20261128 TO idem_test_rrefuse_etl;
SET ROLE idem_test_rrefuse_etl;
SELECT * FROM rrefuse.err($$SELECT * FROM etl_replace_partition('rrefuse.ok', '2026-11-28',
    'SELECT ''2026-11-28''::date AS d, ''not mine'' AS v')$$);
SELECT * FROM rrefuse.err($$SELECT * FROM etl_replace_partitions('rrefuse.ok',
    'SELECT ''2026-11-28''::date AS d, ''not mine'' AS v')$$);
SELECT * FROM rrefuse.err($$SELECT * FROM etl_replace_partition('rrefuse.ok', '2026-11-29',
    'SELECT ''2026-11-29''::date AS d, ''not mine'' AS v')$$);
RESET ROLE;
SELECT rrefuse.state() = :'before' AS unchanged;

CREATE ROLE idem_test_rrefuse_owner;
CREATE SCHEMA rrefuse_owned AUTHORIZATION idem_test_rrefuse_owner;
GRANT USAGE ON SCHEMA rrefuse TO idem_test_rrefuse_owner;
SET ROLE idem_test_rrefuse_owner;
CREATE TABLE rrefuse_owned.t (d date NOT NULL, v text) PARTITION BY RANGE (d);
CREATE TABLE rrefuse_owned.t_20261128 PARTITION OF rrefuse_owned.t FOR VALUES FROM ('2026-11-28') TO ('2026-11-29');
INSERT INTO rrefuse_owned.t VALUES ('2026-11-28', 'old');
SELECT partition_table, rows_loaded, rows_replaced
  FROM etl_replace_partition('rrefuse_owned.t', '2026-11-28', 'SELECT ''2026-11-28''::date AS d, ''mine'' AS v',
                             keep_replaced => '1 day', run_key => 'owner');
SELECT partition_table, rows_loaded, rows_replaced
  FROM etl_replace_partition('rrefuse_owned.t', '2026-11-29', 'SELECT ''2026-11-29''::date AS d, ''new day'' AS v');
SELECT etl_restore_partition('rrefuse_owned.t', '2026-11-28');
SELECT * FROM rrefuse_owned.t ORDER BY d;
SELECT operation, partition_value, run_by FROM idem_etl.runs WHERE target = 'rrefuse_owned.t' ORDER BY run_id;
-- it cannot restore or replace a table it does not own
SELECT * FROM rrefuse.err($$SELECT etl_restore_partition('rrefuse.ok', '2026-11-28')$$);
RESET ROLE;
-- the ETL role cannot restore the owner's partition either
GRANT USAGE ON SCHEMA rrefuse_owned TO idem_test_rrefuse_etl;
SET ROLE idem_test_rrefuse_etl;
SELECT * FROM rrefuse.err($$SELECT etl_restore_partition('rrefuse_owned.t', '2026-11-28')$$);
RESET ROLE;
SELECT * FROM rrefuse_owned.t ORDER BY d;
-- a member of the owning role can act as the owner (the README's ETL-role setup)
GRANT idem_test_rrefuse_owner TO idem_test_rrefuse_etl;
SET ROLE idem_test_rrefuse_etl;
SELECT partition_table, rows_loaded, rows_replaced
  FROM etl_replace_partition('rrefuse_owned.t', '2026-11-28', 'SELECT ''2026-11-28''::date AS d, ''by member'' AS v');
RESET ROLE;
SELECT * FROM rrefuse_owned.t ORDER BY d;

SET client_min_messages = warning;
DROP SCHEMA rrefuse CASCADE;
DROP SCHEMA rrefuse_owned CASCADE;
DROP EXTENSION idem_etl;
RESET client_min_messages;
DROP ROLE idem_test_rrefuse_etl;
DROP ROLE idem_test_rrefuse_owner;
