# 060_jobs_privileges: a job runs as the role that submitted it (current_user
# at submit time), with exactly that role's privileges.
#
# - a role without privileges on a table submits a job writing it: the job
#   fails with 42501 in last_error, at once, and the table is untouched;
# - the job's session is that role (current_user and session_user), not a
#   superuser, and RESET ROLE inside the job gains nothing;
# - SET ROLE before etl_submit makes the job run as that role;
# - a role sees and cancels only its own jobs; members of the submitting
#   role and superusers see all; nobody but the extension writes the queue;
# - a role dropped before its job runs: the job fails with 42704; a role
#   without LOGIN: 28000, on every major (NOLOGIN disables a role; 17's
#   bypass of the login check is not used).
use strict;
use warnings;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use IdemEtl;

my $node = new_node('jobs_privileges');

# run SQL as a given role (its own session)
sub as
{
	my ($role, $sql) = @_;
	return $node->safe_psql('postgres', $sql,
		connstr => $node->connstr('postgres') . " user=$role");
}

# run SQL as a given role, expecting an error; returns stderr (verbose)
sub as_fails
{
	my ($role, $sql) = @_;
	my ($ret, $out, $err) = $node->psql('postgres', "\\set VERBOSITY verbose\n$sql",
		connstr => $node->connstr('postgres') . " user=$role");
	return $ret == 0 ? "no error: $out" : $err;
}

$node->safe_psql(
	'postgres', q{
	CREATE EXTENSION idem_etl;
	CREATE ROLE alice LOGIN;
	CREATE ROLE bob LOGIN;
	CREATE ROLE carol LOGIN IN ROLE alice;   -- carol is a member of alice
	CREATE ROLE dave LOGIN;
	CREATE ROLE etl_group NOLOGIN;
	CREATE TABLE secret (id int PRIMARY KEY, v text);
	INSERT INTO secret VALUES (1, 'classified');
	CREATE TABLE whoami (tag text, cur text, sess text, su text);
	GRANT INSERT ON whoami TO alice;
});

# --- no privilege on the table: 42501, at once, nothing written
my $id = as('alice',
	q{SELECT etl_submit($$INSERT INTO secret VALUES (2, 'alice was here')$$)});
is(as('alice', "SELECT etl_wait($id, '60 s')"),
	'failed', 'a job writing a table its role may not write fails');
is( as(
		'alice',
		"SELECT attempts, last_error LIKE '42501:%', last_error LIKE '%permission denied%', submitted_by::text FROM idem_etl.jobs WHERE job_id = $id"
	),
	'1|t|t|alice',
	'with 42501 in last_error, not retried, submitted_by alice');
is($node->safe_psql('postgres', q{SELECT string_agg(id || v, ',') FROM secret}),
	'1classified', 'the table is untouched');

# --- the job's session is the submitting role
$id = as('alice',
	q{SELECT etl_submit($$INSERT INTO whoami SELECT 'direct', current_user, session_user, current_setting('is_superuser')$$)}
);
is(as('alice', "SELECT etl_wait($id, '60 s')"), 'succeeded', 'alice\'s job runs');
is($node->safe_psql('postgres', "SELECT cur, sess, su FROM whoami WHERE tag = 'direct'"),
	'alice|alice|off', 'as alice (current_user and session_user), not a superuser');

# RESET ROLE inside the job gains nothing
$id = as('alice',
	q{SELECT etl_submit($cmd$DO $$BEGIN RESET ROLE; INSERT INTO secret VALUES (3, 'escalated'); END $$
$cmd$)}
);
is(wait_ended($node, $id), 'failed', 'a job trying RESET ROLE fails');
like($node->safe_psql('postgres', "SELECT last_error FROM idem_etl.jobs WHERE job_id = $id"),
	qr/^42501:/, 'with 42501');
is($node->safe_psql('postgres', 'SELECT count(*) FROM secret'),
	'1', 'the table is still untouched');

# SET ROLE before etl_submit: the job runs as that role
$id = $node->safe_psql('postgres', q{
	SET ROLE alice;
	SELECT etl_submit($$INSERT INTO whoami SELECT 'set role', current_user, session_user, current_setting('is_superuser')$$);
});
is(wait_ended($node, $id), 'succeeded', 'a job submitted by a superuser after SET ROLE alice runs');
is( $node->safe_psql(
		'postgres', qq{
	SELECT w.cur, w.su, j.submitted_by::text
	  FROM whoami w, idem_etl.jobs j WHERE w.tag = 'set role' AND j.job_id = $id}),
	'alice|off|alice',
	'as alice, the current_user at submit time');
$id = $node->safe_psql('postgres', q{
	SET ROLE alice;
	SELECT etl_submit($$INSERT INTO secret VALUES (4, 'via set role')$$);
});
is(wait_ended($node, $id), 'failed', 'with alice\'s privileges only');
is($node->safe_psql('postgres', 'SELECT count(*) FROM secret'),
	'1', 'secret untouched');

# --- visibility and cancel: a role sees and cancels only its own jobs
my $ja = as('alice',
	q{SELECT etl_submit('SELECT 1', 'alice later', run_after => now() + interval '1 hour')});
my $jb = as('bob',
	q{SELECT etl_submit('SELECT 1', 'bob later', run_after => now() + interval '1 hour')});
is(as('bob', "SELECT count(*) FROM idem_etl.jobs WHERE job_id = $ja"),
	'0', 'bob does not see alice\'s job');
is(as('bob', 'SELECT string_agg(job_id::text, \',\') FROM idem_etl.jobs'),
	$jb, 'bob sees only his own job');
is(as('alice', "SELECT count(*) FROM idem_etl.jobs WHERE job_id = $jb"),
	'0', 'alice does not see bob\'s job');
is(as('carol', "SELECT count(*) FROM idem_etl.jobs WHERE job_id = $ja"),
	'1', 'carol, a member of alice, sees alice\'s job');
is(as('carol', "SELECT count(*) FROM idem_etl.jobs WHERE job_id = $jb"),
	'0', 'but not bob\'s');
is($node->safe_psql('postgres', "SELECT count(*) FROM idem_etl.jobs WHERE job_id IN ($ja, $jb)"),
	'2', 'a superuser sees both');
is(as('bob', 'SELECT count(*) FROM idem_etl.jobs WHERE job_name = \'alice later\''),
	'0', 'bob cannot find it by name either');

# bob cannot cancel alice's job, nor learn that it exists: 42704, as for a
# job that does not exist
like(as_fails('bob', "SELECT etl_cancel($ja)"),
	qr/job $ja does not exist or is not visible to role "bob"/,
	'etl_cancel of another role\'s job: as if it did not exist');
is($node->safe_psql('postgres', "SELECT status FROM idem_etl.jobs WHERE job_id = $ja"),
	'queued', 'alice\'s job is still queued');
my $jb2 = as('bob',
	q{SELECT etl_submit('SELECT 1', 'bob later', run_after => now() + interval '1 hour')});
is($jb2, $jb, 'bob\'s own job name is idempotent for him');

# nobody writes the queue directly
like(as_fails('alice', "UPDATE idem_etl.jobs SET command = 'DELETE FROM secret' WHERE job_id = $ja"),
	qr/ERROR:\s+42501:/, 'alice cannot change her queued job\'s command');
like(as_fails('alice', "INSERT INTO idem_etl.jobs (command) VALUES ('DELETE FROM secret')"),
	qr/ERROR:\s+42501:/, 'nor insert a job by hand');
like(as_fails('bob', "DELETE FROM idem_etl.jobs"),
	qr/ERROR:\s+42501:/, 'nor delete jobs');
is( $node->safe_psql(
		'postgres', "SELECT command FROM idem_etl.jobs WHERE job_id = $ja"),
	'SELECT 1',
	'the queued command is unchanged');

is(as('alice', "SELECT etl_cancel($ja)"), 't', 'alice cancels her own job');
is(as('bob', "SELECT etl_cancel($jb)"), 't', 'bob cancels his own job');
is( $node->safe_psql(
		'postgres',
		"SELECT string_agg(status, ',' ORDER BY job_id) FROM idem_etl.jobs WHERE job_id IN ($ja, $jb)"
	),
	'cancelled,cancelled',
	'both cancelled');

# --- a role dropped before its job runs: the job fails
$id = as('dave',
	q{SELECT etl_submit('SELECT 1', max_attempts => 2, run_after => now() + interval '3 s')});
$node->safe_psql('postgres', 'DROP ROLE dave');
is(wait_ended($node, $id), 'failed', 'the job of a role dropped before it ran fails');
like($node->safe_psql('postgres', "SELECT last_error FROM idem_etl.jobs WHERE job_id = $id"),
	qr/^42704:/, 'with 42704 (undefined object) in last_error');

# --- a NOLOGIN role's job fails with 28000 (and is not retried), on every
# major
$id = $node->safe_psql('postgres', q{
	SET ROLE etl_group;
	SELECT etl_submit('SELECT 1');
});
is(wait_ended($node, $id), 'failed', 'the job of a role without LOGIN fails');
is( $node->safe_psql(
		'postgres',
		"SELECT attempts, last_error LIKE '28000:%', submitted_by::text FROM idem_etl.jobs WHERE job_id = $id"
	),
	'1|t|etl_group',
	'with 28000, at once');

no_crash($node, 'no server process crashed');

$node->stop;
done_testing();
