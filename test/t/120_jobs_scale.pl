# 120_jobs_scale: the job queue scales with the cluster.
#
# - 20 databases with the extension, max_worker_processes = 8: with nothing
#   queued, exactly one idem_etl process (the launcher); a job submitted in
#   every database runs, each in its own database.
# - Work is learnt from etl_submit, not by polling: with idem_etl.naptime at
#   one hour, jobs (also one with a run_after a second ahead) still start.
# - Round robin: a database with a long queue does not hold back another
#   database's job for more than the jobs already running.
# - No free background worker slot: the job waits, a WARNING names
#   max_worker_processes, and idem_etl.worker_status shows why.
use strict;
use warnings;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use IdemEtl;

$PostgreSQL::Test::Utils::timeout_default = 120;

my $node = new_node('jobs_scale',
	max_worker_processes => '8',
	'idem_etl.max_workers' => '2',
	'idem_etl.naptime' => '1h');

my @dbs = map { "db$_" } 1 .. 20;
for my $db (@dbs)
{
	$node->safe_psql('postgres', "CREATE DATABASE $db");
	$node->safe_psql($db, q{
		CREATE EXTENSION idem_etl;
		CREATE TABLE ran (db text, at timestamptz DEFAULT clock_timestamp());
	});
}
$node->safe_psql('postgres', 'CREATE EXTENSION idem_etl');

my $processes = q{SELECT count(*) FROM pg_stat_activity WHERE backend_type LIKE 'idem_etl%'};
ok($node->poll_query_until('postgres', "SELECT ($processes) = 1"),
	'20 databases with the extension, nothing queued: one idem_etl process');

# a job in every database
my %ids = map {
	$_ => $node->safe_psql($_, q{SELECT etl_submit('INSERT INTO ran (db) SELECT current_database()')})
} @dbs;
my @ended = map { wait_ended($node, $ids{$_}, $_) } @dbs;
is(join(',', grep { $_ ne 'succeeded' } @ended), '', 'every database\'s job succeeded');
is(join(',', map { $node->safe_psql($_, 'SELECT string_agg(db, \',\') FROM ran') } @dbs),
	join(',', @dbs), 'each ran once, in its own database');
ok($node->poll_query_until('postgres', "SELECT ($processes) = 1"),
	'and then the launcher is alone again');

# run_after a second ahead, naptime an hour: started by its due time
my $later = $node->safe_psql('db1',
	q{SELECT etl_submit('SELECT 1', run_after => clock_timestamp() + interval '1 second')});
is(wait_ended($node, $later, 'db1'), 'succeeded', 'a job due a second later runs, naptime or not');
is($node->safe_psql('db1', "SELECT started_at >= run_after FROM idem_etl.jobs WHERE job_id = $later"),
	't', 'not before its run_after');

# --- round robin: db2 queues 40 jobs, then db3 one; db3's starts before
# more than max_workers of db2's have started after it was submitted
$node->safe_psql('db2', q{SELECT etl_submit('SELECT pg_sleep(0.05)') FROM generate_series(1, 40)});
my $fair = $node->safe_psql('db3', q{SELECT etl_submit('SELECT 1')});
is(wait_ended($node, $fair, 'db3'), 'succeeded', 'the other database\'s job ran');
my ($submitted, $started) = split /\|/, $node->safe_psql('db3',
	"SELECT submitted_at, started_at FROM idem_etl.jobs WHERE job_id = $fair");
my $overtaken = $node->safe_psql('db2', qq{
	SELECT count(*) FROM idem_etl.jobs
	 WHERE started_at > '$submitted' AND started_at < '$started'});
cmp_ok($overtaken, '<=', 2,
	"db2's queue of 40 held db3's job back by at most the jobs that were running ($overtaken started in between)");
ok($node->poll_query_until('db2',
		q{SELECT count(*) = 40 FROM idem_etl.jobs WHERE status = 'succeeded' AND command = 'SELECT pg_sleep(0.05)'}),
	'and db2\'s 40 jobs all ran');

no_crash($node, 'no process crashed');
$node->stop;

# --- no free background worker slot: of three, the launchers of idem_etl
# and of logical replication take two, a long job the third; the next job
# waits, visibly
my $small = new_node('jobs_no_slot',
	max_worker_processes => '3',
	'idem_etl.naptime' => '100ms');
$small->safe_psql('postgres', 'CREATE EXTENSION idem_etl');
my $long = $small->safe_psql('postgres', q{SELECT etl_submit('SELECT pg_sleep(600)')});
ok($small->poll_query_until('postgres',
		q{SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'idem_etl job'}),
	'a long job takes the last background worker slot');
my $offset = -s $small->logfile;
my $waiting = $small->safe_psql('postgres', q{SELECT etl_submit('SELECT 1')});
ok($small->poll_query_until('postgres',
		q{SELECT waiting_reason = 'no free background worker slot (max_worker_processes = 3)'
		    FROM idem_etl.worker_status WHERE database = 'postgres'}),
	'idem_etl.worker_status says why the job waits');
ok($small->wait_for_log(qr/WARNING:  idem_etl could not start a .*: no free background worker slot/, $offset),
	'a WARNING says so');
ok($small->log_contains(qr/HINT:  Raise max_worker_processes/, $offset),
	'and names the setting to raise');
is($small->safe_psql('postgres', "SELECT status FROM idem_etl.jobs WHERE job_id = $waiting"),
	'queued', 'the job waits, queued');
$small->safe_psql('postgres', "SELECT etl_cancel($long)");
is(wait_ended($small, $waiting), 'succeeded', 'once the slot is free, it runs');
no_crash($small, 'no process crashed');

done_testing();
