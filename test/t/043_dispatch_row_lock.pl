# 043_dispatch_row_lock: a role cannot stall job dispatch by locking a row
# of the queue.  An ordinary role cancels its own running job in a
# transaction it leaves open (so its session holds the job's row lock), and
# terminates the job's worker: the job is running with no worker, and its
# row is locked.  The dispatcher, which serves every database, skips that
# row instead of waiting for it: a superuser's jobs in this database and in
# another one still run.  Once the role's transaction rolls back, a later
# visit requeues the job (57P02), and it succeeds.
use strict;
use warnings;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use IdemEtl;

my $node = new_node('dispatch_row_lock');

$node->safe_psql(
	'postgres', q{
	CREATE EXTENSION idem_etl;
	CREATE ROLE etl LOGIN;
	CREATE DATABASE d2;
});
$node->safe_psql('d2', 'CREATE EXTENSION idem_etl');

my $holder = $node->background_psql('postgres');
$holder->query_safe('SELECT pg_advisory_lock(41)');
my $j = $node->safe_psql(
	'postgres',
	q{SELECT etl_submit($$SELECT pg_advisory_xact_lock(41)$$, max_attempts => 3)},
	connstr => $node->connstr('postgres') . ' user=etl');
ok(wait_advisory($node, 41),
	'the role\'s job runs, waiting on an advisory lock');
my $pid = $node->safe_psql('postgres',
	"SELECT worker_pid FROM idem_etl.jobs WHERE job_id = $j");

# the role locks its job's row and kills its worker
my $attacker = $node->background_psql('postgres',
	connstr => $node->connstr('postgres') . ' user=etl');
$attacker->query_safe('BEGIN');
is($attacker->query_safe("SELECT etl_cancel($j)"), 't', 'the role cancels its job, and keeps its transaction open');
is($attacker->query_safe("SELECT pg_terminate_backend($pid)"), 't', 'and terminates the job\'s worker');
ok( $node->poll_query_until(
		'postgres', "SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = $pid"),
	'the worker is gone, its job is running without one');

# dispatch goes on, here and in another database
foreach my $db ('d2', 'postgres')
{
	my $id = $node->safe_psql($db, q{SELECT etl_submit('SELECT 1')});
	is( $node->safe_psql($db, "SELECT etl_wait($id, '30 s')"),
		'succeeded',
		"a superuser's job in $db runs while the row is locked");
}
is( $node->safe_psql(
		'postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'idem_etl dispatcher' AND wait_event_type = 'Lock'"
	),
	'0',
	'no dispatcher waits for a lock');
is( $node->safe_psql(
		'postgres', "SELECT status, attempts FROM idem_etl.jobs WHERE job_id = $j"),
	'running|1',
	'the locked job was skipped, not requeued');

# the role rolls back: a later visit requeues the job, which then succeeds
$attacker->query_safe('ROLLBACK');
ok( $node->poll_query_until(
		'postgres',
		"SELECT attempts = 2 OR (status = 'queued' AND last_error LIKE '57P02:%') FROM idem_etl.jobs WHERE job_id = $j"
	),
	'after the rollback, the dead worker\'s job is requeued');
$holder->query_safe('SELECT pg_advisory_unlock(41)');
is(wait_ended($node, $j), 'succeeded', 'and it succeeds');
is( $node->safe_psql(
		'postgres', "SELECT attempts, last_error FROM idem_etl.jobs WHERE job_id = $j"),
	'2|57P02: the backend running the job ended before it finished',
	'at its second attempt');

$attacker->quit;
$holder->quit;
no_crash($node, 'no server process crashed');
$node->stop;
done_testing();
