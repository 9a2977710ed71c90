# 040_jobs_crash: a job whose backend dies in the middle of its work is
# retried after recovery, and the final data equal a single clean run.
#
# The job loads a table with etl_upsert_batch (idempotent), appends a row to
# a log table (not idempotent, but in the same transaction), then waits while
# a gate is armed.  In that wait it is killed three ways:
#   - pg_terminate_backend (57P01, transient),
#   - kill -9 of its backend (the postmaster restarts every process),
#   - an immediate stop of the server, then a start,
#   - a fast (clean) shutdown, then a start.
# Each time the gate is disarmed once the job's next attempt is on its way,
# and the target must then equal a reference table loaded by one clean call,
# with one log row and one ledger run.  A job queued when the launcher itself
# is killed runs after the restart.
use strict;
use warnings;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use IdemEtl;
use Time::HiRes qw(time usleep);

my $node = new_node('jobs_crash',
	restart_after_crash => 'on');

$node->safe_psql(
	'postgres', q{
	CREATE EXTENSION idem_etl;
	CREATE TABLE gate (armed boolean NOT NULL);
	INSERT INTO gate VALUES (false);
	CREATE TABLE loads (target text, at timestamptz DEFAULT clock_timestamp());

	-- the state before the load: half the keys, stale values
	CREATE TABLE t_ref (id int PRIMARY KEY, v int, note text);
	INSERT INTO t_ref SELECT g, 0, 'stale' FROM generate_series(1, 500) g;
	CREATE TABLE t_term (LIKE t_ref INCLUDING ALL);
	CREATE TABLE t_kill (LIKE t_ref INCLUDING ALL);
	CREATE TABLE t_stop (LIKE t_ref INCLUDING ALL);
	CREATE TABLE t_fast (LIKE t_ref INCLUDING ALL);
	INSERT INTO t_term TABLE t_ref;
	INSERT INTO t_kill TABLE t_ref;
	INSERT INTO t_stop TABLE t_ref;
	INSERT INTO t_fast TABLE t_ref;

	CREATE FUNCTION load(target regclass) RETURNS void LANGUAGE plpgsql AS $$
	BEGIN
	    PERFORM etl_upsert_batch(target,
	        $s$SELECT g AS id, g * 10 AS v, 'loaded' AS note FROM generate_series(1, 1000) g$s$);
	    INSERT INTO loads (target) VALUES (target::text);
	    -- the job dies in here, its work done but not committed
	    WHILE (SELECT armed FROM gate) LOOP
	        PERFORM pg_sleep(0.05);
	    END LOOP;
	END $$;

	-- the reference: one clean run
	SELECT load('t_ref');
});

# Same rows as the reference, one log row and one ledger run for the target.
sub check_single_run
{
	my ($target, $what) = @_;
	is( $node->safe_psql(
			'postgres', qq{
		SELECT (SELECT count(*) FROM (TABLE $target EXCEPT TABLE t_ref) d),
		       (SELECT count(*) FROM (TABLE t_ref EXCEPT TABLE $target) d),
		       (SELECT count(*) FROM $target),
		       (SELECT count(*) FROM loads WHERE target = '$target'),
		       (SELECT count(*) FROM idem_etl.runs WHERE target_oid = '$target'::regclass)}
		),
		'0|0|1000|1|1',
		"$what: the data equal a single clean run (same rows, one log row, one ledger run)"
	);
}

# Arm the gate, submit the load of $target, wait until its backend is in
# the gate (work done, not committed); returns (job id, backend pid).
sub start_gated_job
{
	my ($target) = @_;
	$node->safe_psql('postgres', 'UPDATE gate SET armed = true');
	my $id = $node->safe_psql('postgres',
		"SELECT etl_submit(\$\$SELECT load('$target')\$\$)");
	ok( $node->poll_query_until(
			'postgres', qq{
		SELECT count(*) = 1 FROM pg_stat_activity
		 WHERE backend_type = 'idem_etl job' AND wait_event = 'PgSleep'}
		),
		"the load of $target is in the middle of its work");
	is( $node->safe_psql(
			'postgres',
			"SELECT status, attempts FROM idem_etl.jobs WHERE job_id = $id"),
		'running|1',
		"its job is running, first attempt");
	my $pid = $node->safe_psql('postgres',
		"SELECT pid FROM pg_stat_activity WHERE backend_type = 'idem_etl job' AND wait_event = 'PgSleep'"
	);
	return ($id, $pid);
}

# After the attempt died: the job is pending again (or already on its second
# attempt); open the gate and let it finish.
sub finish_after_death
{
	my ($id, $target, $what) = @_;
	ok( $node->poll_query_until(
			'postgres',
			"SELECT status IN ('queued', 'running') AND attempts >= 1 FROM idem_etl.jobs WHERE job_id = $id"
		),
		"$what: the job is pending again");
	$node->safe_psql('postgres', 'UPDATE gate SET armed = false');
	is(wait_ended($node, $id), 'succeeded', "$what: the job is retried and succeeds");
	is( $node->safe_psql(
			'postgres', "SELECT attempts FROM idem_etl.jobs WHERE job_id = $id"),
		'2',
		"$what: two attempts counted");
	check_single_run($target, $what);
}

# Bounded wait until the server accepts queries again after a crash.
# (poll_query_until is not used here: its psql may exit before reading its
# input while the server refuses connections, and the write then dies.)
sub wait_for_server
{
	my $deadline = time() + $PostgreSQL::Test::Utils::timeout_default;
	while (time() < $deadline)
	{
		my $ok = eval { $node->safe_psql('postgres', 'SELECT 1') eq '1' };
		return 1 if $ok;
		usleep(100_000);
	}
	return 0;
}

sub wait_launcher
{
	my ($what) = @_;
	ok( $node->poll_query_until(
			'postgres', q{
		SELECT count(*) = 1 FROM pg_stat_activity
		 WHERE backend_type = 'idem_etl launcher'}
		),
		"$what: the launcher runs");
}

wait_launcher('at start');

# --- pg_terminate_backend: 57P01
my ($id, $pid) = start_gated_job('t_term');
is($node->safe_psql('postgres', "SELECT pg_terminate_backend($pid)"),
	't', 'pg_terminate_backend of the job backend');
finish_after_death($id, 't_term', 'terminated backend');

# --- kill -9 of the job's backend
($id, $pid) = start_gated_job('t_kill');
my $log_offset = -s $node->logfile;
ok(kill('KILL', $pid), "kill -9 of the job backend (pid $pid)");
ok($node->wait_for_log(qr/\(PID $pid\) was terminated by signal 9/, $log_offset),
	'the postmaster saw it die and restarts every process');
ok(wait_for_server(), 'the server accepts queries again after the crash');
wait_launcher('after kill -9');
finish_after_death($id, 't_kill', 'kill -9');

# --- immediate stop of the server in the middle of a job
($id, $pid) = start_gated_job('t_stop');
$node->stop('immediate');
$node->start;
wait_launcher('after an immediate stop');
finish_after_death($id, 't_stop', 'immediate stop');

# --- a clean (fast) shutdown in the middle of a job: SIGTERM stops every
# idem_etl process, and the interrupted job runs again after the start
($id, $pid) = start_gated_job('t_fast');
$log_offset = -s $node->logfile;
$node->stop('fast');
no_crash($node, 'a fast shutdown stops the idem_etl processes without a crash', $log_offset);
$node->start;
wait_launcher('after a fast shutdown');
finish_after_death($id, 't_fast', 'fast shutdown');

# --- a queued job survives a crash of the launcher
$id = $node->safe_psql('postgres',
	q{SELECT etl_submit($$INSERT INTO loads VALUES ('after launcher crash')$$, run_after => now() + interval '1 s')}
);
$log_offset = -s $node->logfile;
my $launcher = $node->safe_psql('postgres',
	"SELECT pid FROM pg_stat_activity WHERE backend_type = 'idem_etl launcher'");
ok(kill('KILL', $launcher), "kill -9 of the launcher (pid $launcher)");
$node->wait_for_log(qr/\(PID $launcher\) was terminated by signal 9/, $log_offset);
ok(wait_for_server(), 'the server accepts queries again');
wait_launcher('after the launcher was killed');
is(wait_ended($node, $id), 'succeeded', 'the job queued before the crash ran');
is( $node->safe_psql(
		'postgres', "SELECT count(*) FROM loads WHERE target = 'after launcher crash'"),
	'1',
	'once');

# nothing ran twice in the end
is( $node->safe_psql(
		'postgres', "SELECT string_agg(target, ',' ORDER BY target) FROM loads"),
	'after launcher crash,t_fast,t_kill,t_ref,t_stop,t_term',
	'one log row per load');

ok(!$node->log_contains(qr/was terminated by signal (?!9:)/),
	'no process crashed but those killed on purpose');

$node->stop;
done_testing();
