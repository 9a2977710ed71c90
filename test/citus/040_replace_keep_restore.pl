# Kept partitions on Citus: a replaced partition kept by keep_replaced stays
# a distributed table colocated with the parent; etl_restore_partition puts
# it back with the privileges of the partition it displaces on every shard;
# etl_cleanup and the janitor drop kept partitions by DROP TABLE, so Citus
# removes their shards and metadata; a rebalance afterwards moves shards
# without a crash and leaves nothing behind.
# (Before: a role granted SELECT got 42501 from a worker after a restore;
# the drop went around ProcessUtility, leaving the shards, their rows and
# pg_dist_partition rows of dropped tables, and a rebalance plan crashed
# the coordinator.)
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use IdemCitus;
use ReplaceCheck;
use PostgreSQL::Test::Utils;
use Test::More;

my ($coord, @workers) = citus_cluster();
make_events($coord, 3, 1000);
$coord->safe_psql('postgres', q{
	CREATE ROLE reader LOGIN;
	GRANT SELECT ON ev TO reader;
});

sub replace
{
	my ($day, $v, $keep) = @_;
	return $coord->safe_psql('postgres', qq{
		SELECT rows_loaded || '/' || rows_replaced FROM etl_replace_partition('ev', '$day',
		  \$\$SELECT '$day'::date AS day, g AS id, '$v' AS v FROM generate_series(1, 100) g\$\$,
		  keep_replaced => '$keep')});
}

sub days
{
	return $coord->safe_psql('postgres',
		q{SELECT string_agg(day || ':' || v || '=' || n, ',' ORDER BY day, v)
		    FROM (SELECT day, v, count(*) n FROM ev GROUP BY day, v) s});
}

# keep, then restore: the kept version is distributed and comes back
is(replace('2024-01-01', 'new', '1 hour'), '100/1000', 'replace day 1, keeping the old one');
$coord->safe_psql('postgres', 'GRANT SELECT ON ev_1 TO reader');
is($coord->safe_psql('postgres', q{
	SELECT count(*) FROM pg_dist_partition p JOIN idem_etl.replaced_partitions k
	  ON p.logicalrelid = k.kept_oid
	 WHERE p.colocationid = (SELECT colocationid FROM pg_dist_partition WHERE logicalrelid = 'ev'::regclass)}),
	'1', 'the kept version is a distributed table colocated with the parent');
is($coord->safe_psql('postgres', q{SELECT etl_restore_partition('ev', '2024-01-01')}), 'ev_1',
	'restore day 1');
is(days(), '2024-01-01:old=1000,2024-01-02:old=1000,2024-01-03:old=1000', 'the old rows are back');
is($coord->safe_psql('postgres', 'SET ROLE reader; SELECT count(*) FROM ev_1'), '1000',
	'the role granted SELECT on the partition it displaced reads the restored one');
is($coord->safe_psql('postgres', q{
	SELECT string_agg(DISTINCT result, ',') FROM run_command_on_placements('ev_1',
	  $$SELECT relacl::text FROM pg_class WHERE oid = '%s'::regclass$$)}),
	'{postgres=arwdDxt/postgres,reader=r/postgres}', 'every shard of the restored partition has the privileges');
is(leftovers($coord, \@workers), '', 'nothing left after the restore');

# etl_cleanup drops what is due, shards and metadata included
is(replace('2024-01-02', 'new', '1 hour'), '100/1000', 'replace day 2, keeping the old one');
$coord->safe_psql('postgres',
	q{UPDATE idem_etl.replaced_partitions SET keep_until = now() - interval '1 second'});
is($coord->safe_psql('postgres', 'SELECT etl_cleanup()'), '2', 'etl_cleanup drops both kept versions');
is($coord->safe_psql('postgres', 'SELECT count(*) FROM idem_etl.replaced_partitions'), '0',
	'none is recorded any more');
is(leftovers($coord, \@workers), '', 'etl_cleanup: no shard, metadata row or table left');
is(citus_tables($coord), 'ev,ev_1,ev_2,ev_3 / ev,ev_1,ev_2,ev_3', 'only the partitions are Citus tables');

# the janitor (the background worker) drops a kept version when it is due
is(replace('2024-01-03', 'new', '1 second'), '100/1000', 'replace day 3, keeping the old one a second');
$coord->poll_query_until('postgres', 'SELECT count(*) = 0 FROM idem_etl.replaced_partitions')
  or die 'the janitor did not drop the kept version';
is(leftovers($coord, \@workers), '', 'janitor: no shard, metadata row or table left');
is(citus_tables($coord), 'ev,ev_1,ev_2,ev_3 / ev,ev_1,ev_2,ev_3', 'janitor: only the partitions are Citus tables');

# a rebalance: its plan, and a shard group moved to the other worker
is($coord->safe_psql('postgres', 'SELECT count(*) >= 0 FROM get_rebalance_table_shards_plan()'), 't',
	'get_rebalance_table_shards_plan runs');
my ($shard, $from) = split /\|/, $coord->safe_psql('postgres', q{
	SELECT shardid, nodeport FROM citus_shards WHERE table_name = 'ev'::regclass ORDER BY shardid LIMIT 1});
my $to = (grep { $_->port != $from } @workers)[0]->port;
$coord->safe_psql('postgres', qq{
	SELECT citus_move_shard_placement($shard, '127.0.0.1', $from, '127.0.0.1', $to,
	  shard_transfer_mode => 'block_writes')});
$coord->safe_psql('postgres', q{SELECT citus_rebalance_start(shard_transfer_mode => 'block_writes')});
$coord->safe_psql('postgres', 'SELECT citus_rebalance_wait()');
unlike(slurp_file($coord->logfile), qr/terminated by signal/,
	'the coordinator did not crash (no server process terminated by a signal)');
is(days(), '2024-01-01:old=1000,2024-01-02:new=100,2024-01-03:new=100', 'the rows after the moves');
is(leftovers($coord, \@workers), '', 'nothing left after the rebalance');
is($coord->safe_psql('postgres', q{
	SELECT count(*) FROM citus_shards s WHERE NOT EXISTS (SELECT FROM pg_dist_partition p WHERE p.logicalrelid = s.table_name)}),
	'0', 'every shard belongs to a table');

done_testing();
