# 102_security_dropdb: DROP DATABASE by a database's non-superuser owner
# stops idem_etl's workers there only as PostgreSQL's own rules allow
# (pg_terminate_backend's, which DROP DATABASE ... WITH (FORCE) applies),
# and only when the drop can succeed.  Each time, the job's worker is
# checked to be the same process, the job in its first attempt, and no
# idem_etl job worker terminated.
#
# A superuser's job runs in the owner's database:
#   a. DROP DATABASE WITH (FORCE) by the owner: 42501 (PostgreSQL refuses to
#      terminate a superuser's backend), the job is not touched;
#   b. plain DROP DATABASE by the owner: 55006 (the superuser's job worker
#      is connected, like a session of the superuser), not touched.
# The owner's own job runs there:
#   c. DROP DATABASE inside a transaction block: 25001, not touched;
#   d. while another role's session is connected: 55006, not touched;
#   e. of the database the owner is connected to: 55006, not touched;
#   f. with nothing else connected: the owner's worker is asked to leave and
#      the database is dropped.
use strict;
use warnings;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use IdemEtl;

my $node = new_node('security_dropdb');

$node->safe_psql(
	'postgres', q{
	CREATE EXTENSION idem_etl;
	CREATE ROLE owner LOGIN;
	CREATE ROLE other LOGIN;
	CREATE DATABASE d4 OWNER owner;
});
$node->safe_psql('d4', 'CREATE EXTENSION idem_etl');

sub as_owner
{
	my ($db, $sql) = @_;
	my ($ret, $out, $err) = $node->psql($db, "\\set VERBOSITY verbose\n$sql",
		connstr => $node->connstr($db) . ' user=owner');
	return $err =~ /ERROR:\s+([0-9A-Z]{5}):/ ? $1 : 'no error';
}

# A job in d4 that runs until the role go_<key> exists (a shared catalog, so
# that the test needs no session in d4, which would make every DROP
# DATABASE fail), submitted by role; returns its id and its worker's pid.
sub running_job
{
	my ($role, $key) = @_;
	my $id = $node->safe_psql('d4', qq{
		SELECT etl_submit(\$job\$DO \$do\$ BEGIN
		    FOR i IN 1 .. 12000 LOOP
		        EXIT WHEN EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'go_$key');
		        PERFORM pg_catalog.pg_sleep(0.01);
		    END LOOP;
		END \$do\$ \$job\$, max_attempts => 3)},
		connstr => $node->connstr('d4') . " user=$role");
	$node->poll_query_until('d4', qq{
		SELECT j.status = 'running' AND a.wait_event = 'PgSleep'
		  FROM idem_etl.jobs j JOIN pg_stat_activity a ON a.pid = j.worker_pid
		 WHERE j.job_id = $id}) or diag "job $id did not start";
	return ($id, $node->safe_psql('d4', "SELECT worker_pid FROM idem_etl.jobs WHERE job_id = $id"));
}

sub untouched
{
	my ($id, $pid, $what) = @_;
	is( $node->safe_psql(
			'd4', qq{
		SELECT status, attempts, worker_pid,
		       EXISTS (SELECT FROM pg_stat_activity WHERE pid = $pid)
		  FROM idem_etl.jobs WHERE job_id = $id}),
		"running|1|$pid|t",
		"$what: the job's worker goes on, the job in its first attempt");
}

my $offset = -s $node->logfile;

# --- a superuser's job
my ($s, $spid) = running_job('postgres', 61);
is(as_owner('postgres', 'DROP DATABASE d4 WITH (FORCE)'),
	'42501', 'a. DROP DATABASE WITH (FORCE) by the owner: 42501, as PostgreSQL says');
untouched($s, $spid, 'a. the superuser\'s job');
is(as_owner('postgres', 'DROP DATABASE d4'),
	'55006', 'b. plain DROP DATABASE by the owner: 55006');
untouched($s, $spid, 'b. the superuser\'s job');
$node->safe_psql('postgres', 'CREATE ROLE go_61');
is(wait_ended($node, $s, 'd4'), 'succeeded', 'the superuser\'s job succeeds');

# --- the owner's own job
my ($o, $opid) = running_job('owner', 62);
is(as_owner('postgres', "BEGIN;\nDROP DATABASE d4;"),
	'25001', 'c. DROP DATABASE inside a transaction block: 25001');
untouched($o, $opid, 'c. the owner\'s job');

my $other = $node->background_psql('d4',
	connstr => $node->connstr('d4') . ' user=other');
$other->query_safe('SELECT 1');
is(as_owner('postgres', 'DROP DATABASE d4'),
	'55006', 'd. DROP DATABASE while another role is connected: 55006');
untouched($o, $opid, 'd. the owner\'s job');
$other->quit;
ok( $node->poll_query_until(
		'postgres', "SELECT count(*) = 0 FROM pg_stat_activity WHERE usename = 'other'"),
	'the other session has left');

is(as_owner('d4', 'DROP DATABASE d4'),
	'55006', 'e. DROP DATABASE of the database the owner is connected to: 55006');
untouched($o, $opid, 'e. the owner\'s job');

ok(!$node->log_contains(qr/terminating background worker "idem_etl job"/, $offset),
	'a. to e.: no idem_etl job worker was terminated');

is(as_owner('postgres', 'DROP DATABASE d4'),
	'no error', 'f. with only its own job running, the owner drops the database');
is($node->safe_psql('postgres', "SELECT count(*) FROM pg_database WHERE datname = 'd4'"),
	'0', 'f. d4 is gone');

no_crash($node, 'no server process crashed');
$node->stop;
done_testing();
