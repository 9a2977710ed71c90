# 030_jobs_retry: transient errors are retried with exponential backoff, each
# attempt in its own transaction, and the job succeeds exactly once.
#
# - a serialization failure (40001) raised on the first two tries: the third
#   succeeds, attempts = 3, the work is done once, and the two waits between
#   tries were 1 s and 2 s;
# - a job failing with 40001 on every try gives up after max_attempts, with
#   the waits capped by idem_etl.max_backoff and last_error "40001: ...";
# - a statement_timeout (57014, here the role's setting, which the job's
#   session applies) on the first try: retried, succeeds on the second;
# - a lock held by another session past a lock_timeout set in the command
#   (55P03) is retried until the lock is released, then succeeds once.
#
# Tries are counted with sequences: nextval is not rolled back with the
# failed attempt.
use strict;
use warnings;
use Time::HiRes qw(time);
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use IdemEtl;

my $node = new_node('jobs_retry',
	'idem_etl.max_backoff' => '2s');

$node->safe_psql(
	'postgres', q{
	CREATE EXTENSION idem_etl;

	-- raises 40001 on the first two tries, then does its work
	CREATE SEQUENCE serial_tries;
	CREATE TABLE serial_done (try bigint, at timestamptz);
	CREATE FUNCTION flaky() RETURNS void LANGUAGE plpgsql AS $$
	DECLARE try bigint := nextval('serial_tries');
	BEGIN
	    IF try < 3 THEN
	        RAISE EXCEPTION 'could not serialize access (try %)', try
	              USING ERRCODE = 'serialization_failure';
	    END IF;
	    INSERT INTO serial_done VALUES (try, clock_timestamp());
	END $$;

	-- raises 40001 on every try
	CREATE SEQUENCE hopeless_tries;
	CREATE FUNCTION hopeless() RETURNS void LANGUAGE plpgsql AS $$
	BEGIN
	    PERFORM nextval('hopeless_tries');
	    RAISE EXCEPTION 'could not serialize access' USING ERRCODE = '40001';
	END $$;

	-- sleeps past the role's statement_timeout on the first try only
	CREATE ROLE slowpoke LOGIN;
	ALTER ROLE slowpoke SET statement_timeout = '300ms';
	CREATE SEQUENCE slow_tries;
	CREATE TABLE slow_done (try bigint, timeout text);
	GRANT USAGE ON SEQUENCE slow_tries TO slowpoke;
	GRANT INSERT ON slow_done TO slowpoke;
	CREATE FUNCTION slow() RETURNS void LANGUAGE plpgsql AS $$
	DECLARE try bigint := nextval('slow_tries');
	BEGIN
	    IF try < 2 THEN
	        PERFORM pg_sleep(5);
	    END IF;
	    INSERT INTO slow_done VALUES (try, current_setting('statement_timeout'));
	END $$;

	-- the target of the lock test
	CREATE SEQUENCE lock_tries;
	CREATE TABLE locked_t (id int PRIMARY KEY, v text);
});

# --- 40001 on the first two tries
my $t0 = time();
my $id = $node->safe_psql('postgres', q{SELECT etl_submit('SELECT flaky()')});
is(wait_ended($node, $id), 'succeeded',
	'a job raising 40001 on its first two tries succeeds');
my $elapsed = time() - $t0;
is( $node->safe_psql(
		'postgres',
		"SELECT attempts, max_attempts FROM idem_etl.jobs WHERE job_id = $id"),
	'3|5',
	'three attempts counted');
like($node->safe_psql('postgres', "SELECT last_error FROM idem_etl.jobs WHERE job_id = $id"),
	qr/^40001: could not serialize access \(try 2\)/,
	'last_error keeps the latest failed attempt after the success');
is($node->safe_psql('postgres', 'SELECT last_value FROM serial_tries'),
	'3', 'the command ran three times');
is($node->safe_psql('postgres', 'SELECT try FROM serial_done'),
	'3', 'the work was done once, by the third try');
is( $node->safe_psql(
		'postgres',
		"SELECT finished_at - submitted_at >= interval '2.9 s' FROM idem_etl.jobs WHERE job_id = $id"
	),
	't',
	'the retries waited 1 s, then 2 s (exponential backoff)');
cmp_ok($elapsed, '>=', 2.9, 'as seen from outside too');

# --- 40001 every time: gives up after max_attempts, waits capped at max_backoff
$t0 = time();
$id = $node->safe_psql('postgres',
	q{SELECT etl_submit('SELECT hopeless()', max_attempts => 5)});
is(wait_ended($node, $id), 'failed', 'a job that never stops failing fails');
$elapsed = time() - $t0;
is( $node->safe_psql(
		'postgres', qq{
	SELECT attempts, last_error LIKE '40001:%', last_error LIKE '%could not serialize access%'
	  FROM idem_etl.jobs WHERE job_id = $id}),
	'5|t|t',
	'after max_attempts = 5 attempts, with last_error "40001: ..."');
is($node->safe_psql('postgres', 'SELECT last_value FROM hopeless_tries'),
	'5', 'the command ran five times, no more');
# waits 1 + 2 + 2 + 2 = 7 s with max_backoff = 2s; uncapped 1 + 2 + 4 + 8 = 15 s
cmp_ok($elapsed, '>=', 6.5, 'the four waits took at least 1 + 2 + 2 + 2 s');
cmp_ok($elapsed, '<', 13, 'and were capped by idem_etl.max_backoff (uncapped: 15 s)');

$id = $node->safe_psql('postgres',
	q{SELECT etl_submit('SELECT hopeless()', max_attempts => 1)});
is(wait_ended($node, $id), 'failed', 'with max_attempts = 1');
is( $node->safe_psql(
		'postgres', "SELECT attempts FROM idem_etl.jobs WHERE job_id = $id"),
	'1',
	'a transient error is not retried');

# --- a statement_timeout (57014) is transient too
$id = $node->safe_psql('postgres', q{
	SET ROLE slowpoke;
	SELECT etl_submit('SELECT slow()');
});
is(wait_ended($node, $id), 'succeeded',
	'a job cancelled by its role\'s statement_timeout on the first try succeeds');
is( $node->safe_psql(
		'postgres',
		"SELECT attempts, last_error LIKE '57014:%' FROM idem_etl.jobs WHERE job_id = $id"),
	'2|t',
	'on the second attempt, after a 57014');
is($node->safe_psql('postgres', 'SELECT string_agg(try::text, \',\') FROM slow_done'),
	'2', 'the work was done once');
note 'statement_timeout in the job\'s session: '
  . $node->safe_psql('postgres', 'SELECT timeout FROM slow_done');

# --- a lock held by another session past the command's lock_timeout (55P03)
my $holder = $node->background_psql('postgres');
$holder->query_safe('BEGIN');
$holder->query_safe('LOCK TABLE locked_t IN ACCESS EXCLUSIVE MODE');

$id = $node->safe_psql(
	'postgres', q{
	SELECT etl_submit($cmd$DO $$
	    BEGIN
	        PERFORM nextval('lock_tries');
	        SET LOCAL lock_timeout = '200ms';
	        INSERT INTO locked_t VALUES (1, 'loaded');
	    END $$
	$cmd$, max_attempts => 20)});

ok( $node->poll_query_until(
		'postgres', qq{
	SELECT (SELECT last_value FROM lock_tries) >= 3
	   AND (SELECT last_error LIKE '55P03:%' FROM idem_etl.jobs WHERE job_id = $id)}
	),
	'while the lock is held, the job fails with 55P03 and is tried again (a third try started)');
is( $node->safe_psql(
		'postgres', "SELECT status IN ('queued', 'running') FROM idem_etl.jobs WHERE job_id = $id"),
	't',
	'the job is still pending');

$holder->query_safe('COMMIT');
$holder->quit;

is(wait_ended($node, $id), 'succeeded', 'once the lock is released, the job succeeds');
my $tries = $node->safe_psql('postgres', 'SELECT last_value FROM lock_tries');
cmp_ok($tries, '>=', 3, 'after at least three tries');
is( $node->safe_psql(
		'postgres', "SELECT attempts FROM idem_etl.jobs WHERE job_id = $id"),
	$tries,
	'attempts counts every try');
is($node->safe_psql('postgres', 'SELECT id, v FROM locked_t'),
	'1|loaded', 'the row was written once');

# --- late attempts: the backoff's exponent is capped before the interval
# is built (2^(attempts - 1) seconds overflowed an interval from attempt 45
# on: "timestamp out of range" after the catch, the worker died and the
# job was requeued without backoff)
my $log_offset = -s $node->logfile;
my $late = $node->safe_psql('postgres', q{
	SELECT etl_submit($c$DO $b$ BEGIN RAISE EXCEPTION 'always busy' USING ERRCODE = '40001'; END $b$ $c$,
	                  max_attempts => 100, run_after => clock_timestamp() + interval '2 seconds')});
# as the queue's owner: this job has had 60 attempts already, 62 allowed
$node->safe_psql('postgres',
	"UPDATE idem_etl.jobs SET attempts = 60, max_attempts = 62 WHERE job_id = $late");
is(wait_ended($node, $late), 'failed', 'a job in its 61st and 62nd attempts fails in the end');
is($node->safe_psql('postgres', "SELECT attempts || ' ' || left(last_error, 5) FROM idem_etl.jobs WHERE job_id = $late"),
	'62 40001', 'after 62 attempts, with its own error each time (not a dead worker\'s 57P02)');
ok(!$node->log_contains(qr/out of range/, $log_offset), 'no overflow in the backoff');
ok(!$node->log_contains(qr/idem_etl job[^"]*" \(PID \d+\) exited with exit code 1/, $log_offset),
	'no job worker died');

no_crash($node, 'no server process crashed');

$node->stop;
done_testing();
