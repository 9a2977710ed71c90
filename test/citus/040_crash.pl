# A crash (kill -9) of the coordinator's backend in the middle of a
# distributed upsert (the batch sent inline, then in a table beside the
# shards): the shards that had merged their part and the shard
# still waiting keep the old rows, every one (one distributed transaction);
# no stage table, shard or prepared transaction is left; a rerun applies
# the whole batch with exact counts.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use IdemCitus;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes;

# the coordinator's postmaster restarts after the crash, as in production
my ($coord, @workers) = citus_cluster(restart_after_crash => 'on');

# Twice: the batch as the statements' parameters, then in a table beside
# the shards.
for my $way ([ 'inline', '' ], [ 'table', 'SET idem_etl.citus_inline_rows = 0;' ])
{
	my ($mode, $set) = @$way;
	note "the batch $mode";

	$coord->safe_psql('postgres', q{
		DROP TABLE IF EXISTS orders;
		CREATE TABLE orders (id int PRIMARY KEY, amount numeric, note text);
		SELECT create_distributed_table('orders', 'id');
		INSERT INTO orders SELECT g, g, 'old' FROM generate_series(1, 1000) g;
	});

	# A session holds row 7 locked: the shard holding it waits in the merge,
	# while the other shards merge their part.
	my $blocker = $coord->background_psql('postgres');
	$blocker->query_safe(q{BEGIN; UPDATE orders SET note = 'locked' WHERE id = 7});

	my $loader = $coord->background_psql('postgres', on_error_stop => 0);
	my $pid = $loader->query_safe('SELECT pg_backend_pid()');
	$loader->query_until(qr/started/, "\\echo started\n" . $set
		  . q{ SELECT * FROM etl_upsert_batch('orders', $$SELECT id, amount, 'new' AS note FROM orders$$);
});
	ok( $coord->poll_query_until('postgres', q{
			SELECT count(*) > 0 FROM pg_stat_activity
			 WHERE query LIKE '%etl_upsert_batch%' AND wait_event IS NOT NULL
			   AND pid <> pg_backend_pid()})
		  && $coord->poll_query_until('postgres', q{
			SELECT sum(result::int) > 0 FROM run_command_on_workers(
			  $$SELECT count(*) FROM pg_locks WHERE locktype = 'transactionid' AND NOT granted$$)}),
		'the merge waits for row 7 on its shard');

	kill 'KILL', $pid;
	# The postmaster restarts after the crash, ending every session; poll
	# (bounded) until it accepts connections again.
	my $up = 0;
	for (1 .. 10 * $PostgreSQL::Test::Utils::timeout_default)
	{
		last if $up = eval { $coord->safe_psql('postgres', 'SELECT 1') eq '1' };
		Time::HiRes::usleep(100_000);
	}
	ok($up, 'the coordinator restarted after the crash');
	ok($coord->log_contains(qr/server process \(PID $pid\) was terminated by signal 9/),
		'the loading backend was killed mid-merge');
	eval { $loader->quit };
	eval { $blocker->quit };

	is($coord->safe_psql('postgres', q{SELECT note, count(*) FROM orders GROUP BY note}),
		'old|1000', 'after the crash: every row as before, on every shard');
	ok(poll_workers('SELECT count(*) = 0 FROM pg_prepared_xacts'),
		'no prepared transaction left on the workers');
	is(on_workers(\@workers, q{SELECT count(*) > 0 FROM pg_class WHERE relname LIKE 'orders\\_%'}),
		't|t', "the workers' pg_class shows shards (the next test can see them)");
	ok(poll_workers(q{SELECT count(*) = 0 FROM pg_class WHERE relname ~ '^idem_etl_(batch|keys|changed)_'}),
		'no stage table or shard on the workers');
	is(stage_tables_left($coord, \@workers), '0|0|0',
		'no stage table, shard or cleanup record left on the coordinator or the workers');

	is($coord->safe_psql('postgres',
			$set . q{SELECT inserted, updated, unchanged FROM etl_upsert_batch('orders', $$SELECT id, amount, 'new' AS note FROM orders$$)}),
		'0|1000|0', 'the rerun applies the whole batch');
	is($coord->safe_psql('postgres', q{SELECT note, count(*) FROM orders GROUP BY note}),
		'new|1000', 'every row new');
}

# poll_workers(sql): bounded wait until sql is true on every worker
sub poll_workers
{
	my ($sql) = @_;
	for my $w (@workers)
	{
		return 0 unless $w->poll_query_until('postgres', $sql);
	}
	return 1;
}

done_testing();
