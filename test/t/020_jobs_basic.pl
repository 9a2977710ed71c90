# 020_jobs_basic: the job queue's basic life cycle.
#
# With shared_preload_libraries = 'idem_etl' a launcher starts (the only
# process of idem_etl while nothing is queued), a dispatcher
# runs in the database where the extension is installed, and a job submitted
# with etl_submit runs in a background worker: etl_wait returns 'succeeded'
# and idem_etl.jobs records it.  A permanent error fails the job at once
# (attempts = 1, last_error with its SQLSTATE).  A job_name makes submission
# idempotent while the job is pending; etl_cancel cancels a queued job and a
# running one (by cancelling its backend, and the cancel is not retried);
# run_after delays a job; etl_wait returns the status at its timeout.
use strict;
use warnings;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use IdemEtl;
use Time::HiRes qw(time);

my $node = new_node('jobs_basic');

ok( $node->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'idem_etl launcher'"
	),
	'the launcher runs');

$node->safe_psql('postgres', q{
	CREATE EXTENSION idem_etl;
	CREATE TABLE t (id int PRIMARY KEY, who text);
});

ok( $node->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type LIKE 'idem_etl%'"
	),
	'with nothing queued, the launcher is the only process of idem_etl');

# --- a job runs, etl_wait returns 'succeeded'
my $id = $node->safe_psql('postgres',
	q{SELECT etl_submit($$INSERT INTO t VALUES (1, current_user)$$)});
like($id, qr/^\d+$/, 'etl_submit returns a job id');
is($node->safe_psql('postgres', "SELECT etl_wait($id, '60 s')"),
	'succeeded', 'etl_wait returns succeeded');
is($node->safe_psql('postgres', 'SELECT id, who = current_user FROM t'),
	'1|t', 'the job wrote its row once, as the submitting role');
is( $node->safe_psql(
		'postgres', qq{
	SELECT status, attempts, max_attempts, last_error IS NULL,
	       command = 'INSERT INTO t VALUES (1, current_user)',
	       job_name IS NULL, submitted_by::text = current_user::text,
	       submitted_at <= started_at, run_after <= started_at,
	       started_at <= finished_at
	  FROM idem_etl.jobs WHERE job_id = $id}),
	'succeeded|1|5|t|t|t|t|t|t|t',
	'idem_etl.jobs records the finished job');
is($node->safe_psql('postgres', "SELECT etl_wait($id, '1 s')"),
	'succeeded', 'etl_wait on an ended job returns its status at once');

# --- a permanent error fails at once
$id = $node->safe_psql('postgres', q{SELECT etl_submit('SELECT 1/0')});
is($node->safe_psql('postgres', "SELECT etl_wait($id, '60 s')"),
	'failed', 'a division by zero fails the job');
is( $node->safe_psql(
		'postgres', qq{
	SELECT attempts, last_error LIKE '22012:%', last_error LIKE '%division by zero%',
	       finished_at IS NOT NULL
	  FROM idem_etl.jobs WHERE job_id = $id}),
	'1|t|t|t',
	'a permanent error is not retried: attempts = 1, last_error "22012: ..."');

# --- exactly one statement per job
my ($ret, $out, $err) = $node->psql('postgres',
	"\\set VERBOSITY verbose\nSELECT etl_submit('INSERT INTO t VALUES (9, ''x''); DROP TABLE t')");
like($err, qr/ERROR:\s+42601:/, 'etl_submit refuses several statements with 42601');
is($node->safe_psql('postgres', "SELECT count(*) FROM idem_etl.jobs WHERE command LIKE '%DROP TABLE t%'"),
	'0', 'and queues nothing');

# --- a failing command leaves nothing behind
$id = $node->safe_psql('postgres',
	q{SELECT etl_submit($$INSERT INTO t VALUES (2, 'x'), (1, 'duplicate')$$)});
is(wait_ended($node, $id), 'failed', 'a unique violation fails the job');
is( $node->safe_psql(
		'postgres',
		"SELECT attempts, last_error LIKE '23505:%' FROM idem_etl.jobs WHERE job_id = $id"
	),
	'1|t',
	'23505 is permanent');
is($node->safe_psql('postgres', 'SELECT count(*) FROM t'),
	'1', 'the failed job rolled back its own writes');

# --- run_after delays the job
$id = $node->safe_psql('postgres',
	q{SELECT etl_submit($$INSERT INTO t VALUES (3, 'later')$$, run_after => now() + interval '2 s')});
is( $node->safe_psql(
		'postgres', "SELECT status FROM idem_etl.jobs WHERE job_id = $id"),
	'queued',
	'a job with a future run_after is queued');
is($node->safe_psql('postgres', "SELECT etl_wait($id, '60 s')"),
	'succeeded', 'it runs once run_after has come');
is( $node->safe_psql(
		'postgres',
		"SELECT started_at >= run_after FROM idem_etl.jobs WHERE job_id = $id"),
	't',
	'not before run_after');

# --- idempotent submission by job_name, etl_wait timeout, etl_cancel of a queued job
my $named = $node->safe_psql('postgres',
	q{SELECT etl_submit($$INSERT INTO t VALUES (4, 'nightly')$$, 'nightly', run_after => now() + interval '1 hour')}
);
is( $node->safe_psql(
		'postgres',
		q{SELECT etl_submit($$INSERT INTO t VALUES (4, 'nightly')$$, 'nightly', run_after => now() + interval '1 hour')}
	),
	$named,
	'a second submission under the same job_name returns the pending job');
is( $node->safe_psql(
		'postgres',
		q{SELECT etl_submit('SELECT 1', 'nightly')}),
	$named,
	'even with another command: one pending job per name');
is( $node->safe_psql(
		'postgres',
		"SELECT count(*), min(job_id) FROM idem_etl.jobs WHERE job_name = 'nightly'"),
	"1|$named",
	'only one job of that name was queued');
is($node->safe_psql('postgres', "SELECT etl_wait($named, '300 ms')"),
	'queued', 'etl_wait returns the status at its timeout');
# etl_wait sleeps, it does not spin: CPU time of the waiting backend
sub cpu_ticks
{
	my ($pid) = @_;
	my $stat = slurp_file("/proc/$pid/stat");
	$stat =~ s/^.*\)\s+//s;    # after "pid (comm) "
	my @f = split /\s+/, $stat;
	return $f[11] + $f[12];      # utime + stime (fields 14 and 15)
}
SKIP:
{
	skip 'no /proc', 1 unless -r "/proc/$$/stat";
	my $waiter = $node->background_psql('postgres');
	my $pid = $waiter->query_safe('SELECT pg_backend_pid()');
	my $before = cpu_ticks($pid);
	my $t0 = time();
	my $status = $waiter->query_safe("SELECT etl_wait($named, '2 s')");
	my $waited = time() - $t0;
	my $used = cpu_ticks($pid) - $before;
	$waiter->quit;
	note "etl_wait: $waited s, $used CPU ticks";
	ok($status eq 'queued' && $waited >= 1.9 && $used < 50,
		"etl_wait waits without spinning ($used ticks of CPU in $waited s)");
}

is($node->safe_psql('postgres', "SELECT etl_cancel($named)"),
	't', 'etl_cancel of a queued job returns true');
is( $node->safe_psql(
		'postgres', "SELECT status FROM idem_etl.jobs WHERE job_id = $named"),
	'cancelled',
	'the job is cancelled');
is($node->safe_psql('postgres', "SELECT etl_wait($named, '10 s')"),
	'cancelled', 'etl_wait returns cancelled');

# once the named job has ended, the name can be submitted again
my $named2 = $node->safe_psql('postgres',
	q{SELECT etl_submit($$INSERT INTO t VALUES (5, 'nightly again')$$, 'nightly')});
isnt($named2, $named, 'after the job ended, the same name queues a new job');
is($node->safe_psql('postgres', "SELECT etl_wait($named2, '60 s')"),
	'succeeded', 'and it runs');
my $named3 = $node->safe_psql('postgres',
	q{SELECT etl_submit('SELECT 1', 'nightly')});
ok($named3 ne $named2 && $named3 ne $named,
	'a succeeded job does not block its name either');
is($node->safe_psql('postgres', "SELECT etl_wait($named3, '60 s')"),
	'succeeded', 'that one runs too');
is($node->safe_psql('postgres', 'SELECT count(*) FROM t WHERE id = 4'),
	'0', 'the cancelled job never ran');

# etl_cancel of a finished job changes nothing
is($node->safe_psql('postgres', "SELECT etl_cancel($named2)"),
	'f', 'etl_cancel of a finished job returns false');
is( $node->safe_psql(
		'postgres', "SELECT status FROM idem_etl.jobs WHERE job_id = $named2"),
	'succeeded',
	'and leaves it succeeded');

# --- etl_cancel of a running job cancels its backend; the cancel is not retried
my $sleeper = $node->safe_psql('postgres',
	q{SELECT etl_submit($$SELECT pg_sleep(120)$$, 'sleeper')});
ok( $node->poll_query_until(
		'postgres', qq{
	SELECT (SELECT status FROM idem_etl.jobs WHERE job_id = $sleeper) = 'running'
	   AND EXISTS (SELECT FROM pg_stat_activity
	                WHERE backend_type = 'idem_etl job' AND wait_event = 'PgSleep')}
	),
	'the sleeping job runs in an "idem_etl job" backend');
is($node->safe_psql('postgres', "SELECT etl_cancel($sleeper)"),
	't', 'etl_cancel of a running job returns true');
is($node->safe_psql('postgres', "SELECT etl_wait($sleeper, '60 s')"),
	'cancelled', 'the running job ends cancelled');
ok( $node->poll_query_until(
		'postgres',
		"SELECT count(*) = 0 FROM pg_stat_activity WHERE backend_type = 'idem_etl job'"
	),
	'its backend is gone');

# a later job runs to its end, and the cancelled one stayed cancelled
$id = $node->safe_psql('postgres',
	q{SELECT etl_submit($$INSERT INTO t VALUES (6, 'after cancel')$$)});
is($node->safe_psql('postgres', "SELECT etl_wait($id, '60 s')"),
	'succeeded', 'the next job runs');
is( $node->safe_psql(
		'postgres',
		"SELECT status, attempts FROM idem_etl.jobs WHERE job_id = $sleeper"),
	'cancelled|1',
	'the cancelled running job was not retried (its 57014 is not transient)');

no_crash($node, 'no server process crashed');

$node->stop;
done_testing();
