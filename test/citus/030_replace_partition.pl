# Partition replacement on a distributed partitioned table: the new
# partition is distributed colocated with the parent before it is loaded
# (nothing left on the coordinator, nothing copied at ATTACH), privileges
# reach the shards, etl_replace_partitions and etl_replace_where work, and
# what cannot work is refused with 0A000 before anything changes.
# (Before: the coordinator kept an invisible copy of every replaced day, a
# role granted SELECT got 42501 from a worker, etl_replace_where and plain
# distributed tables failed with XX000 "could not find named tuplestore",
# and calls on a worker failed at DETACH.)
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use IdemCitus;
use ReplaceCheck;
use PostgreSQL::Test::Utils;
use Test::More;

my ($coord, @workers) = citus_cluster();
make_events($coord, 2, 1000);
$coord->safe_psql('postgres', q{
	CREATE ROLE reader LOGIN;
	GRANT SELECT ON ev, ev_1, ev_2 TO reader;
	GRANT UPDATE (v) ON ev_1 TO reader;
	CREATE TABLE plain (day date, id int PRIMARY KEY, v text);
	SELECT create_distributed_table('plain', 'id');
});
my $colocation = $coord->safe_psql('postgres',
	q{SELECT colocationid FROM pg_dist_partition WHERE logicalrelid = 'ev'::regclass});

sub days
{
	return $coord->safe_psql('postgres',
		q{SELECT string_agg(day || ':' || v || '=' || n, ',' ORDER BY day, v)
		    FROM (SELECT day, v, count(*) n FROM ev GROUP BY day, v) s});
}

# etl_replace_partition: the rows, the partition distributed and colocated
is($coord->safe_psql('postgres', q{
	SELECT rows_loaded, rows_replaced FROM etl_replace_partition('ev', '2024-01-01',
	  $$SELECT '2024-01-01'::date AS day, g AS id, 'new' AS v FROM generate_series(1, 500) g$$)}),
	'500|1000', 'replace_partition: counts');
is(days(), '2024-01-01:new=500,2024-01-02:old=1000', 'replace_partition: the rows');
is($coord->safe_psql('postgres', q{
	SELECT partmethod || colocationid FROM pg_dist_partition WHERE logicalrelid = 'ev_1'::regclass}),
	"h$colocation", 'the new partition is distributed by hash, colocated with the parent');
is(on_workers(\@workers, q{SET citus.override_table_visibility TO off;
	SELECT count(*) FROM pg_class WHERE relname ~ '^ev_1_[0-9]+$' AND relkind = 'r'}),
	'2|2', 'each worker has its two shards of the new partition');
is(leftovers($coord, \@workers), '', 'nothing left: no rows on the coordinator, no load table, no metadata');
is($coord->safe_psql('postgres', q{
	SELECT string_agg(indexrelid::regclass::text, ',' ORDER BY 1) FROM pg_index WHERE indrelid = 'ev_1'::regclass}),
	'ev_1_pkey1,ev_1_v_idx1',
	'the new indexes are named after the partition before the swap (the kept version holds the plain names)');

# privileges reach the shards: the role reads the partition on the workers
is($coord->safe_psql('postgres', 'SET ROLE reader; SELECT count(*) FROM ev_1'), '500',
	'a role granted SELECT on the partition reads it after the swap');
is($coord->safe_psql('postgres', q{
	SELECT string_agg(DISTINCT result, ',') FROM run_command_on_placements('ev_1',
	  $$SELECT (SELECT relacl::text FROM pg_class WHERE oid = '%1$s'::regclass) || ' '
	    || (SELECT attacl::text FROM pg_attribute WHERE attrelid = '%1$s'::regclass AND attname = 'v')$$)}),
	'{postgres=arwdDxt/postgres,reader=r/postgres} {reader=w/postgres}',
	'every shard of the new partition has the table and column privileges');

# etl_replace_partitions: one existing partition, one new one
is($coord->safe_psql('postgres', q{
	SELECT string_agg(partition_table::text || ':' || rows_loaded || '/' || rows_replaced, ',' ORDER BY 1)
	  FROM etl_replace_partitions('ev',
	  $$SELECT '2024-01-02'::date + (g % 2) AS day, g AS id, 'many' AS v FROM generate_series(1, 100) g$$)}),
	'ev_2:50/1000,ev_20240103:50/0', 'replace_partitions: an existing and a new partition');
is($coord->safe_psql('postgres', q{
	SELECT count(DISTINCT colocationid) FROM pg_dist_partition
	 WHERE logicalrelid IN ('ev'::regclass, 'ev_2'::regclass, 'ev_20240103'::regclass)}),
	'1', 'replace_partitions: both partitions colocated with the parent');

# etl_replace_where: the rows of a condition, in one partition
is($coord->safe_psql('postgres', q{
	SELECT rows_loaded, rows_replaced FROM etl_replace_where('ev', $$day = '2024-01-01' AND id <= 100$$,
	  $$SELECT '2024-01-01'::date AS day, g AS id, 'where' AS v FROM generate_series(1, 10) g$$)}),
	'10|100', 'replace_where: counts');
is(days(), '2024-01-01:new=400,2024-01-01:where=10,2024-01-02:many=50,2024-01-03:many=50',
	'replace_where: the rows outside the condition are kept');
is(leftovers($coord, \@workers), '', 'nothing left after replace_partitions and replace_where');
is($coord->safe_psql('postgres', q{
	SELECT (SELECT count(*) FROM idem_etl.replaced_partitions) || ' kept, '
	  || count(*) FILTER (WHERE logicalrelid::text LIKE 'idem_etl_kept%') || ' kept distributed, '
	  || count(DISTINCT colocationid) || ' colocation'
	  FROM pg_dist_partition WHERE logicalrelid::text NOT IN ('plain', 'pl', 'pl_1')}),
	'3 kept, 3 kept distributed, 1 colocation',
	'the kept versions (idem_etl.keep_replaced) stay distributed, colocated with the parent');

# run_key: an identical rerun is skipped, on the shards as everywhere
my $keyed = q{SELECT rows_loaded || '/' || skipped FROM etl_replace_partition('ev', '2024-01-03',
	$$SELECT '2024-01-03'::date AS day, g AS id, 'many' AS v FROM generate_series(1, 100, 2) g$$,
	run_key => 'day3')};
is($coord->safe_psql('postgres', $keyed), '50/false', 'run_key: first run');
is($coord->safe_psql('postgres', $keyed), '0/true', 'run_key: the same rows again are skipped');
is(leftovers($coord, \@workers), '', 'nothing left after the skip');

# refused before anything changes
my ($state, $err) = sqlstate_of($coord, q{
	SELECT * FROM etl_replace_partition('plain', '2024-01-01', $$SELECT '2024-01-01'::date AS day, 1 AS id, 'x' AS v$$)});
is($state, '0A000', 'a plain distributed table: 0A000');
like($err, qr/which is not partitioned.*HINT:  Partition the table/s, 'with a hint');
is(sqlstate_of($coord, q{
	SELECT * FROM etl_replace_where('plain', 'id = 1', $$SELECT '2024-01-01'::date AS day, 1 AS id, 'x' AS v$$)}),
	'0A000', 'etl_replace_where on a plain distributed table: 0A000');
($state, $err) = sqlstate_of($workers[0], q{
	SELECT * FROM etl_replace_partition('ev', '2024-01-01', $$SELECT '2024-01-01'::date AS day, 1 AS id, 'x' AS v$$)});
is($state, '0A000', 'on a worker: 0A000');
like($err, qr/must be called on the coordinator/, 'on a worker: says where to call it');
is(sqlstate_of($workers[0], q{SELECT etl_restore_partition('ev', '2024-01-01')}), '0A000',
	'etl_restore_partition on a worker: 0A000');
is(sqlstate_of($workers[1], q{
	SELECT * FROM etl_replace_where('ev', 'id = 1', $$SELECT '2024-01-01'::date AS day, 1 AS id, 'x' AS v$$)}),
	'0A000', 'etl_replace_where on a worker: 0A000');
$coord->safe_psql('postgres', q{
	CREATE TABLE pl (day date NOT NULL, id int, v text) PARTITION BY RANGE (day);
	CREATE TABLE pl_1 PARTITION OF pl FOR VALUES FROM ('2024-01-01') TO ('2024-01-02');
	SELECT citus_add_local_table_to_metadata('pl');
});
($state, $err) = sqlstate_of($coord, q{
	SELECT * FROM etl_replace_partition('pl', '2024-01-01', $$SELECT '2024-01-01'::date AS day, 1 AS id, 'x' AS v$$)});
is($state, '0A000', 'a partitioned Citus table not distributed by hash (a Citus local table): 0A000');
like($err, qr/distributed by hash only/, 'says which Citus tables are supported');
is(days(), '2024-01-01:new=400,2024-01-01:where=10,2024-01-02:many=50,2024-01-03:many=50',
	'the refused calls changed nothing');

done_testing();
