# A crash of the coordinator's backend in the middle of a swap: the
# replacement is there on every shard or on none, never on some.  The swap
# is held at its DETACH on one worker by a session holding a lock on a
# shard of the parent there (the other worker may have run its part), and
# the backend is killed (SIGKILL: the coordinator restarts).  Then the
# replacement runs again and is there on every shard.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use IdemCitus;
use ReplaceCheck;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

my ($coord, @workers) = citus_cluster();
make_events($coord, 2, 2000);
# the test cluster stops at a crash (restart_after_crash off): restart here
$coord->safe_psql('postgres', 'ALTER SYSTEM SET restart_after_crash = on');
$coord->safe_psql('postgres', 'ALTER SYSTEM SET idem_etl.keep_replaced = 0');
$coord->reload;
my $partitions = shard_partitions(\@workers);
is($partitions, 'ev_1:2,ev_2:2|ev_1:2,ev_2:2', 'each worker: two shards of ev, each with both days');

# the values on every placement of ev_1 ("old" everywhere before)
sub placements
{
	return $coord->safe_psql('postgres', q{
		SELECT string_agg(DISTINCT result, ',') FROM run_command_on_placements('ev_1',
		  $$SELECT string_agg(DISTINCT v, '+') FROM %s$$)});
}
my $replace = q{SELECT rows_loaded FROM etl_replace_partition('ev', '2024-01-01',
	$$SELECT '2024-01-01'::date AS day, g AS id, 'new' AS v FROM generate_series(1, 1500) g$$)};

# hold the DETACH on worker2: a lock on one of its shards of ev
my $w2 = $workers[1];
my $shard = $coord->safe_psql('postgres', 'SELECT shard_name FROM citus_shards'
	  . " WHERE table_name = 'ev'::regclass AND nodeport = " . $w2->port . ' ORDER BY shardid LIMIT 1');
my $blocker = $w2->background_psql('postgres');
$blocker->query_safe("BEGIN; SET LOCAL citus.enable_manual_changes_to_shards TO on;"
	  . " LOCK TABLE $shard IN ACCESS SHARE MODE");

my $swap = $coord->background_psql('postgres', on_error_stop => 0);
my $pid = $swap->query_safe('SELECT pg_backend_pid()');
$swap->query_until(qr/started/, "\\echo started\n$replace;\n");
$w2->poll_query_until('postgres',
	"SELECT count(*) > 0 FROM pg_locks WHERE NOT granted AND relation = '$shard'::regclass")
  or die 'the swap did not reach the DETACH on worker2';
note "swap held at the DETACH of $shard on worker2; killing backend $pid";

kill 'KILL', $pid;

# Bounded polls (100 ms apart, 2 minutes at most): the postmaster has
# reinitialized, then the coordinator accepts connections again.
sub wait_for
{
	my ($what, $done) = @_;
	for (1 .. 1200)
	{
		return if eval { $done->() };
		usleep(100_000);
	}
	die "timed out waiting for $what";
}
wait_for('the crash restart', sub { slurp_file($coord->logfile) =~ /terminated by signal 9.*reinitializing/s });
wait_for('the coordinator', sub { $coord->safe_psql('postgres', 'SELECT NOT pg_is_in_recovery()') eq 't' });
pass('the coordinator backend was killed and the coordinator is back');
$blocker->quit;
eval { $swap->quit };	# its psql ended with its connection

# workers: the backends of the killed transaction are gone once they got
# the lock and found their connection closed
for my $w (@workers)
{
	$w->poll_query_until('postgres', q{
		SELECT count(*) = 0 FROM pg_stat_activity
		 WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()
		   AND state <> 'idle'})
	  or die $w->name . ': backends still busy';
}
$coord->safe_psql('postgres', 'SELECT recover_prepared_transactions()');
is(on_workers(\@workers, 'SELECT count(*) FROM pg_prepared_xacts'), '0|0', 'no prepared transaction left');
is(shard_partitions(\@workers), $partitions, 'before: every shard has its partitions as before');
is(placements(), 'old', 'before: every placement of ev_1 has the old rows');
is($coord->safe_psql('postgres', q{SELECT string_agg(v || '=' || n, ',') FROM
	(SELECT v, count(*) n FROM ev WHERE day = '2024-01-01' GROUP BY v) s}), 'old=2000',
	'before: the day reads as before');
is(leftovers($coord, \@workers), '', 'no load table, shard or metadata of the killed swap');

# again, to the end
is($coord->safe_psql('postgres', $replace), '1500', 'the replacement again');
is(shard_partitions(\@workers), $partitions, 'after: every shard has its partitions');
is(placements(), 'new', 'after: every placement of ev_1 has the new rows');
is(leftovers($coord, \@workers), '', 'after: nothing left');

done_testing();
