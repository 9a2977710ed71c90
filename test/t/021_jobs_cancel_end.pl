# 021_jobs_cancel_end: a cancel and a job's end that cross.
#
# - A job whose command catches the cancel (query_canceled) and carries on
#   does not commit its work: its 'succeeded' mark finds the job cancelled,
#   so the job's transaction is rolled back and the status (cancelled) and
#   the work (none) agree.
# - etl_cancel of a job that commits its end while the cancel waits for it
#   (here: a deferred trigger of the job waits on an advisory lock that the
#   test holds) returns false, the job stays succeeded: the cancel did not
#   apply.
#
# Every wait is on a lock the test holds, observed in pg_locks: no sleeps.
use strict;
use warnings;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use IdemEtl;

my $node = new_node('jobs_cancel_end');

$node->safe_psql(
	'postgres', q{
	CREATE EXTENSION idem_etl;
	CREATE TABLE jl (note text);
	CREATE FUNCTION load_with_log() RETURNS void LANGUAGE plpgsql AS $$
	BEGIN
	    BEGIN
	        PERFORM pg_advisory_xact_lock(11);
	    EXCEPTION WHEN query_canceled THEN
	        INSERT INTO jl VALUES ('step1 cancelled, carrying on');
	    END;
	    INSERT INTO jl VALUES ('step2');
	END $$;

	CREATE TABLE work (n int);
	CREATE FUNCTION slow_commit() RETURNS trigger LANGUAGE plpgsql AS $$
	BEGIN PERFORM pg_advisory_xact_lock(12); RETURN NULL; END $$;
	CREATE CONSTRAINT TRIGGER slow AFTER INSERT ON work
	    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION slow_commit();
	CREATE TABLE cancel_result (r boolean);
});

my $holder = $node->background_psql('postgres');

# --- a job that catches the cancel: nothing of it commits
$holder->query_safe('SELECT pg_advisory_lock(11)');
my $j = $node->safe_psql('postgres', 'SELECT etl_submit($$SELECT load_with_log()$$)');
ok(wait_advisory($node, 11), 'the job waits on the advisory lock');
my $pid = $node->safe_psql('postgres',
	"SELECT worker_pid FROM idem_etl.jobs WHERE job_id = $j");
is($node->safe_psql('postgres', "SELECT etl_cancel($j)"),
	't', 'etl_cancel of the running job returns true');
ok( $node->poll_query_until(
		'postgres', "SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = $pid"),
	'the job\'s worker has ended');
is( $node->safe_psql(
		'postgres', "SELECT status, attempts FROM idem_etl.jobs WHERE job_id = $j"),
	'cancelled|1',
	'the job is cancelled, and not retried');
is($node->safe_psql('postgres', 'SELECT count(*) FROM jl'),
	'0', 'the work of a job that caught the cancel is rolled back');
ok( $node->log_contains(qr/job $j was cancelled while it ran/),
	'the worker says why its work was rolled back');
$holder->query_safe('SELECT pg_advisory_unlock(11)');

# --- the job commits its end while the cancel waits for it: false
$holder->query_safe('SELECT pg_advisory_lock(12)');
$j = $node->safe_psql('postgres', 'SELECT etl_submit($$INSERT INTO work VALUES (1)$$)');
ok(wait_advisory($node, 12), 'the job waits in its deferred trigger, marked succeeded but not committed');
my $canceller = $node->background_psql('postgres');
$canceller->query_until(qr/sent/,
	"\\echo sent\nINSERT INTO cancel_result SELECT etl_cancel($j);\n");
ok( $node->poll_query_until(
		'postgres', q{
	SELECT count(*) = 1 FROM pg_stat_activity
	 WHERE query LIKE 'INSERT INTO cancel_result%' AND wait_event_type = 'Lock'}),
	'etl_cancel waits for the job\'s row');
$holder->query_safe('SELECT pg_advisory_unlock(12)');
ok($node->poll_query_until('postgres', 'SELECT count(*) = 1 FROM cancel_result'),
	'etl_cancel returned');
is($node->safe_psql('postgres', 'SELECT r FROM cancel_result'),
	'f', 'etl_cancel of a job that ended meanwhile returns false');
is($node->safe_psql('postgres', "SELECT status FROM idem_etl.jobs WHERE job_id = $j"),
	'succeeded', 'the job stays succeeded');
is($node->safe_psql('postgres', 'SELECT count(*) FROM work'), '1', 'with its work');

$canceller->quit;
$holder->quit;
no_crash($node, 'no server process crashed');
$node->stop;
done_testing();
