# 042_jobs_dead_backoff: a job whose worker died (here terminated, which
# ends the process without the worker recording the failure) is requeued by
# the next visit with the same backoff as a transient error: its run_after
# is at least 1 s (the first attempt's backoff) after the attempt started,
# not the moment of the requeue, and the next attempt does not start before.
# The job waits on an advisory lock the test holds: no sleeps.
use strict;
use warnings;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use IdemEtl;

# the first attempt's backoff is 1 s: make sure the cap does not lower it
my $node = new_node('jobs_dead_backoff', 'idem_etl.max_backoff' => '10s');

$node->safe_psql('postgres', 'CREATE EXTENSION idem_etl');

my $holder = $node->background_psql('postgres');
$holder->query_safe('SELECT pg_advisory_lock(21)');
my $j = $node->safe_psql('postgres',
	q{SELECT etl_submit($$SELECT pg_advisory_xact_lock(21)$$, max_attempts => 3)});
ok(wait_advisory($node, 21),
	'the job waits on the advisory lock');
my $pid = $node->safe_psql('postgres',
	"SELECT worker_pid FROM idem_etl.jobs WHERE job_id = $j");
is($node->safe_psql('postgres', "SELECT pg_terminate_backend($pid)"),
	't', 'its worker is terminated');
ok( $node->poll_query_until(
		'postgres',
		"SELECT status = 'queued' AND last_error LIKE '57P02:%' FROM idem_etl.jobs WHERE job_id = $j"
	),
	'the job is requeued, its worker having died');
is( $node->safe_psql(
		'postgres',
		"SELECT attempts, run_after >= started_at + interval '1 s' FROM idem_etl.jobs WHERE job_id = $j"
	),
	'1|t',
	'after the backoff of a first attempt (1 s), not at once');
ok( $node->poll_query_until(
		'postgres',
		"SELECT attempts = 2 AND status = 'running' FROM idem_etl.jobs WHERE job_id = $j"),
	'the second attempt starts');
is( $node->safe_psql(
		'postgres',
		"SELECT started_at >= run_after FROM idem_etl.jobs WHERE job_id = $j"),
	't',
	'not before its run_after');
$holder->query_safe('SELECT pg_advisory_unlock(21)');
is(wait_ended($node, $j), 'succeeded', 'and it succeeds');

$holder->quit;
$node->stop;
done_testing();
