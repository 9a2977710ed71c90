# 031_jobs_notices: where a job's messages go, and a skip in one line
# (issue 30, point 8).
#
# A job worker has no client, and the server log takes WARNING and above by
# default: the NOTICEs a job raised used to be lost.  Its row keeps them now:
# idem_etl.jobs.notices holds the NOTICE, INFO and WARNING messages of its
# latest attempt, one a line, the last 20, whether it succeeded or failed;
# the server log gets what log_min_messages lets through, as before (the
# WARNING, not the NOTICE).  A rerun skipped by its run_key says so in one
# line, naming the run it matched and the run_key, in a session and in a job.
use strict;
use warnings;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use IdemEtl;

my $node = new_node('jobs_notices');
$node->safe_psql('postgres', q{
	CREATE EXTENSION idem_etl;
	CREATE TABLE t (id int PRIMARY KEY, v text);
});

# a skip prints one line
my $load = q{SELECT skipped FROM etl_upsert_batch('t', 'SELECT 1 AS id, ''a'' AS v', run_key => 'k')};
is($node->safe_psql('postgres', $load), 'f', 'the first load is applied');
my ($ret, $out, $err) = $node->psql('postgres', $load);
is($out, 't', 'the rerun is skipped');
is($err, 'psql:<stdin>:1: NOTICE:  skipping upsert into "t": run 1 already has this batch for run_key "k"',
	'and says so in one line, with the run it matched and the run_key');
($ret, $out, $err) = $node->psql('postgres', "SET client_min_messages = warning; $load");
is($err, '', 'client_min_messages = warning quiets it');

my $offset = -s $node->logfile;
my $j1 = $node->safe_psql('postgres', q{SELECT etl_submit($j$DO $b$BEGIN
	RAISE NOTICE 'hello from the job'; RAISE WARNING 'careful'; END$b$$j$)});
is(wait_ended($node, $j1), 'succeeded', 'a job raising a NOTICE and a WARNING succeeds');
is($node->safe_psql('postgres', "SELECT notices FROM idem_etl.jobs WHERE job_id = $j1"),
	"NOTICE:  hello from the job\nWARNING:  careful", 'its row keeps both');
ok($node->log_contains(qr/WARNING:  careful/, $offset), 'the WARNING is in the server log, as before');
ok(!$node->log_contains(qr/NOTICE:  hello from the job/, $offset), 'the NOTICE is not (log_min_messages = warning)');

my $j2 = $node->safe_psql('postgres', "SELECT etl_submit(\$\$$load\$\$)");
is(wait_ended($node, $j2), 'succeeded', 'a job whose load is skipped succeeds');
is($node->safe_psql('postgres', "SELECT notices FROM idem_etl.jobs WHERE job_id = $j2"),
	'NOTICE:  skipping upsert into "t": run 1 already has this batch for run_key "k"',
	'its row says why, in one line');

my $j3 = $node->safe_psql('postgres', q{SELECT etl_submit($j$DO $b$BEGIN
	RAISE NOTICE 'before the error'; RAISE EXCEPTION 'boom'; END$b$$j$)});
is(wait_ended($node, $j3), 'failed', 'a failing job fails');
is($node->safe_psql('postgres', "SELECT last_error || ' | ' || notices FROM idem_etl.jobs WHERE job_id = $j3"),
	'P0001: boom | NOTICE:  before the error', 'its row keeps the error and the notices before it');

my $j4 = $node->safe_psql('postgres', q{SELECT etl_submit($j$DO $b$BEGIN
	FOR i IN 1..25 LOOP RAISE NOTICE 'n%', i; END LOOP; END$b$$j$)});
is(wait_ended($node, $j4), 'succeeded', 'a job raising 25 NOTICEs succeeds');
is($node->safe_psql('postgres', "SELECT notices FROM idem_etl.jobs WHERE job_id = $j4"),
	join("\n", '(5 earlier messages not kept)', map { "NOTICE:  n$_" } 6 .. 25),
	'its row keeps the last 20');

my $j5 = $node->safe_psql('postgres', q{SELECT etl_submit('SELECT 1')});
is(wait_ended($node, $j5), 'succeeded', 'a quiet job succeeds');
is($node->safe_psql('postgres', "SELECT notices IS NULL FROM idem_etl.jobs WHERE job_id = $j5"),
	't', 'with no notices');

no_crash($node, 'no server process crashed');
$node->stop;
done_testing();
