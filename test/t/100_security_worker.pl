# 100_security_worker: attacks on the background workers by an ordinary
# LOGIN role, "attacker", that owns a schema "evil" and plants functions
# there: operators shadowing the built-ins the workers' bookkeeping uses
# (=, <, <=, +, -, ^, || on bigint, integer, text, name, oid, timestamptz,
# interval), count(*), now() and a few others.  Each planted function logs
# current_user and session_user (to evil.log, writable by everybody, and to
# the server log, which survives a rollback) and, when it runs as a
# superuser, makes the attacker a superuser.
#
# Every case checks that the attacker is not a superuser afterwards, that
# the planted code never ran as another role, the expected outcome, and
# that no server process crashed:
#
#  1. role settings: ALTER ROLE attacker SET search_path = evil, pg_catalog;
#     the job worker's bookkeeping (reading the command, marking the job
#     succeeded or failed, the retry backoff) does not run the planted code;
#     the jobs still end as they should (succeeded, failed, retried).
#  2. database settings: a database owned by the attacker with
#     ALTER DATABASE ... SET search_path = evil, pg_catalog; the dispatcher
#     (the bootstrap superuser) and the job workers of every role there do
#     not run the planted code, also the janitor; jobs still run.
#  3. inside a job: SET search_path, set_config('search_path'), SET LOCAL,
#     SET ROLE, set_config('role') with search_path, RESET ROLE,
#     CREATE TEMP TABLE jobs: the job succeeds and the bookkeeping after it
#     is unaffected; SET SESSION AUTHORIZATION fails with 42501; a later
#     job of another role runs correctly.
#  5. the janitor: a view on a kept partition keeps the janitor from
#     dropping it: a WARNING names the kept table, no dispatcher exits with
#     an error (in a loop) and other roles' jobs still run.
#  6. DROP DATABASE: a non-superuser owner can drop its own database after
#     its jobs ran; DROP DATABASE of a database the caller may not drop
#     fails with 42501 and signals none of its workers (a running job is
#     not interrupted), also when the caller may read all statistics
#     (pg_read_all_stats).
#  7. ALTER DATABASE ... SET role or session_authorization by the
#     attacker, owner of the database: the dispatcher keeps its identity,
#     and a victim's job there runs.
use strict;
use warnings;
use Time::HiRes qw(usleep);
use Test::More;
use PostgreSQL::Test::Utils;
use FindBin;
use lib $FindBin::RealBin;
use IdemEtl;
use Attack;

my $node = new_node('security_worker');

use_node($node);

# the launcher runs (dispatchers and job workers come and go with the work)
sub wait_launcher
{
	return $node->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'idem_etl launcher'");
}

# --- set-up: roles, and the planted code in postgres

su( 'postgres', q{
	CREATE EXTENSION idem_etl;
	CREATE ROLE attacker LOGIN;
	CREATE ROLE victim LOGIN;
	CREATE ROLE other;                 -- a role the attacker is a member of
	GRANT other TO attacker;
	CREATE SCHEMA evil AUTHORIZATION attacker;
	CREATE TABLE whoami (tag text, cur name, sess name);
	GRANT INSERT, SELECT ON whoami TO PUBLIC;
});
plant('postgres');

my $whoami = q{INSERT INTO public.whoami SELECT %s, current_user, session_user};

sub whoami_cmd
{
	my ($tag) = @_;
	return sprintf($whoami, "'$tag'");
}

# ======================================================================
# 1. role settings
# ======================================================================
my $offset = new_case('postgres');
as('attacker', 'postgres', 'ALTER ROLE attacker SET search_path = evil, pg_catalog');

# positive control: the role setting makes the planted operators win
as('attacker', 'postgres', 'SELECT 1::bigint = 2::bigint, now(), 1 + 1');
ok( su( 'postgres',
		"SELECT count(*) > 0 FROM evil.log WHERE cur = 'attacker' AND fn = '=(bigint, bigint)'"),
	'1: control: in the attacker\'s own sessions its operators shadow the built-ins');

my ($ok1, $fail1, $transient1) = map { as('attacker', 'postgres', $_) } (
	q{SELECT public.etl_submit('SELECT 1')},
	q{SELECT public.etl_submit('SELECT 1/0', max_attempts => 2)},
	q{SELECT public.etl_submit($c$DO $d$BEGIN RAISE EXCEPTION 'try again' USING ERRCODE = '40001'; END $d$$c$,
	                           max_attempts => 2)});
is(wait_ended($node, $ok1), 'succeeded', '1: with a hostile search_path role setting, a job still succeeds');
is(wait_ended($node, $fail1), 'failed', '1: a failing job fails');
is(su('postgres', "SELECT attempts || ' ' || split_part(last_error, ':', 1) FROM idem_etl.jobs WHERE job_id = $fail1"),
	'1 22012', '1: at once, with 22012');
is(wait_ended($node, $transient1), 'failed', '1: a transient failure is retried, then fails');
is( su( 'postgres',
		"SELECT attempts || ' ' || split_part(last_error, ':', 1) FROM idem_etl.jobs WHERE job_id = $transient1"),
	'2 40001',
	'1: after max_attempts (2), with 40001 (the backoff ran)');
is(su('postgres', "SELECT string_agg(DISTINCT submitted_by::text, ',') FROM idem_etl.jobs WHERE job_id IN ($ok1, $fail1, $transient1)"),
	'attacker', '1: the jobs are the attacker\'s');
attacker_not_superuser('1 (role settings)');
never_ran_as_other('1 (role settings)', 'postgres', $offset);
as('attacker', 'postgres', 'ALTER ROLE attacker RESET search_path');

# ======================================================================
# 2. database settings, in a database the attacker owns
# ======================================================================
su('postgres', 'CREATE DATABASE attdb OWNER attacker');
as('attacker', 'attdb', 'CREATE SCHEMA evil');
plant('attdb');
$offset = new_case('postgres', 'attdb');
as('attacker', 'attdb', 'ALTER DATABASE attdb SET search_path = evil, pg_catalog');
su('attdb', q{
	CREATE EXTENSION idem_etl SCHEMA public;
	CREATE TABLE public.whoami (tag text, cur name, sess name);
	GRANT INSERT, SELECT ON public.whoami TO PUBLIC;
});
# the attacker's table, for the janitor: one partition replaced and kept
# for a second (loaded with a harmless search_path: the attack here is on
# the workers, not on the caller)
as('attacker', 'attdb', q{
	CREATE TABLE evil.parted (d date NOT NULL, v int) PARTITION BY RANGE (d);
	CREATE TABLE evil.parted_20261128 PARTITION OF evil.parted
	    FOR VALUES FROM ('2026-11-28') TO ('2026-11-29');
	INSERT INTO evil.parted VALUES ('2026-11-28', 1);
});
# every idem_etl process connects again, after the setting
$node->restart;
ok(wait_launcher(), '2: the launcher runs again');
as('attacker', 'attdb', 'SELECT 1::bigint = 2::bigint');
ok(su('attdb', "SELECT count(*) > 0 FROM evil.log WHERE cur = 'attacker'"),
	'2: control: the database setting makes the planted operators win');
as('attacker', 'attdb', q{
	SET search_path = public, pg_catalog;
	SELECT rows_loaded FROM etl_replace_partition('evil.parted', '2026-11-28',
	    $$SELECT '2026-11-28'::date AS d, 2 AS v$$, keep_replaced => '1 second');
});

my %jobs2 = (
	attacker => as('attacker', 'attdb', q{SELECT public.etl_submit('SELECT 1')}),
	victim => as('victim', 'attdb', sprintf(q{SELECT etl_submit(%s)}, '$c$' . whoami_cmd('victim in attdb') . '$c$')),
	postgres => su('attdb', sprintf(q{SELECT etl_submit(%s)}, '$c$' . whoami_cmd('superuser in attdb') . '$c$')),
	failing => as('attacker', 'attdb', q{SELECT public.etl_submit('SELECT 1/0', max_attempts => 2)}),
	transient => as('attacker', 'attdb',
		q{SELECT public.etl_submit($c$DO $d$BEGIN RAISE EXCEPTION 'again' USING ERRCODE = '40001'; END $d$$c$,
		                           max_attempts => 2)}));
is( join(',', map { wait_ended($node, $jobs2{$_}, 'attdb') } qw(attacker victim postgres failing transient)),
	'succeeded,succeeded,succeeded,failed,failed',
	'2: jobs of the attacker, a victim and the superuser run there; failing ones fail');
is(su('attdb', q{SELECT string_agg(tag || ':' || cur, ',' ORDER BY tag COLLATE "C") FROM public.whoami}),
	'superuser in attdb:postgres,victim in attdb:victim', '2: each as its own role');
is(su('attdb', "SELECT attempts FROM idem_etl.jobs WHERE job_id = $jobs2{transient}"),
	'2', '2: the transient failure was retried');
ok( $node->poll_query_until('attdb',
		'SELECT count(*) = 0 FROM idem_etl.replaced_partitions'),
	'2: the janitor dropped the expired kept partition');
attacker_not_superuser('2 (database settings)');
never_ran_as_other('2 (database settings)', 'attdb', $offset);
# its processes would go on calling the planted code: the database goes
su('postgres', 'DROP DATABASE attdb');

# ======================================================================
# 3. inside a job
# ======================================================================
$offset = new_case('postgres');
my @inside = (
	[ 'SET search_path = evil, pg_catalog', 'succeeded' ],
	[ q{SELECT set_config('search_path', 'evil, pg_catalog', false)}, 'succeeded' ],
	[ 'SET LOCAL search_path = evil, pg_catalog', 'succeeded' ],
	[ 'SET ROLE other', 'succeeded' ],
	[ q{SELECT set_config('role', 'other', false), set_config('search_path', 'evil, pg_catalog', false)},
		'succeeded' ],
	[ 'RESET ROLE', 'succeeded' ],
	[ 'SET SESSION AUTHORIZATION postgres', 'failed' ],
	[ 'CREATE TEMP TABLE jobs (job_id bigint, command text, status text, attempts int)', 'succeeded' ],
	[ q{DO $d$BEGIN SET search_path = evil, pg_catalog; RAISE EXCEPTION 'again' USING ERRCODE = '40001'; END $d$},
		'failed' ]);
# one job at a time, the attacker an ordinary role again before each, so
# that each outcome is that job's own
for my $case (@inside)
{
	my ($cmd, $expected) = @$case;
	my $q = '$c$' . $cmd . '$c$';
	su('postgres', 'ALTER ROLE attacker NOSUPERUSER');
	my $id = as('attacker', 'postgres', "SELECT etl_submit($q, max_attempts => 2)");
	is(wait_ended($node, $id), $expected, "3: a job running \"$cmd\": $expected");
	is(su('postgres', "SELECT rolsuper FROM pg_roles WHERE rolname = 'attacker'"),
		'f', "3: after \"$cmd\" the attacker is not a superuser");
	next unless $cmd =~ /SESSION AUTHORIZATION/;
	is( su( 'postgres',
			"SELECT attempts || ' ' || split_part(last_error, ':', 1) FROM idem_etl.jobs WHERE job_id = $id"),
		'1 42501',
		'3: SET SESSION AUTHORIZATION fails at once with 42501');
}
my $later = as('victim', 'postgres', sprintf('SELECT etl_submit(%s)', '$c$' . whoami_cmd('after inside') . '$c$'));
is(wait_ended($node, $later), 'succeeded', '3: a later job of another role succeeds');
is(su('postgres', "SELECT cur || '/' || sess FROM whoami WHERE tag = 'after inside'"),
	'victim/victim', '3: as that role');
attacker_not_superuser('3 (inside a job)');
never_ran_as_other('3 (inside a job)', 'postgres', $offset);

# ======================================================================
# 5. the janitor: a kept partition it cannot drop
# ======================================================================
su('postgres', 'CREATE DATABASE jandb');
su('jandb', q{
	CREATE EXTENSION idem_etl;
	CREATE SCHEMA evil AUTHORIZATION attacker;
	CREATE TABLE whoami (tag text, cur name, sess name);
	GRANT INSERT, SELECT ON whoami TO PUBLIC;
});
plant('jandb');
$offset = new_case('postgres', 'jandb');
ok(wait_launcher(), '5: the launcher runs');
my $before5 = as('victim', 'jandb', sprintf('SELECT etl_submit(%s)', '$c$' . whoami_cmd('before') . '$c$'));
is(wait_ended($node, $before5, 'jandb'), 'succeeded', '5: jobs run in jandb');
# the replace and the view in one transaction: the janitor cannot drop the
# kept table in between
my $kept = as('attacker', 'jandb', q{
	CREATE TABLE evil.parted (d date NOT NULL, v int) PARTITION BY RANGE (d);
	CREATE TABLE evil.parted_20261128 PARTITION OF evil.parted
	    FOR VALUES FROM ('2026-11-28') TO ('2026-11-29');
	INSERT INTO evil.parted VALUES ('2026-11-28', 1);
	BEGIN;
	SELECT FROM etl_replace_partition('evil.parted', '2026-11-28',
	    $$SELECT '2026-11-28'::date AS d, 2 AS v$$, keep_replaced => '1 second');
	DO $$BEGIN
	    EXECUTE format('CREATE VIEW evil.keep_alive AS SELECT * FROM %s',
	                   (SELECT kept_table FROM idem_etl.replaced_partitions));
	END $$;
	COMMIT;
	SELECT kept_table FROM idem_etl.replaced_partitions;
});
$kept =~ s/^\s+|\s+$//g;
ok($kept ne '', "5: the attacker's partition is kept as $kept, and a view depends on it");
(my $kept_name = $kept) =~ s/^.*\.//;
$kept_name =~ s/"//g;
ok( $node->poll_query_until('jandb', q{SELECT coalesce(bool_and(replaced_at + interval '1 second' < now()), true) FROM idem_etl.replaced_partitions}),
	'5: its keep_replaced has passed');

# bounded poll of the server log for the janitor's warning
my $warned = 0;
for (1 .. 200)
{
	last if $warned = $node->log_contains(qr/WARNING:.*\Q$kept_name\E/, $offset);
	usleep(100_000);
}
ok($warned, "5: the janitor warns, naming the kept table $kept_name");
my @after5 = (
	as('victim', 'jandb', sprintf('SELECT etl_submit(%s)', '$c$' . whoami_cmd('after') . '$c$')),
	su('jandb', sprintf('SELECT etl_submit(%s)', '$c$' . whoami_cmd('after su') . '$c$')));
{
	local $PostgreSQL::Test::Utils::timeout_default = 20;
	$node->poll_query_until('jandb',
		"SELECT bool_and(status NOT IN ('queued', 'running')) FROM idem_etl.jobs WHERE job_id IN ("
		  . join(',', @after5) . ')');
}
is( su( 'jandb',
		"SELECT string_agg(status, ',' ORDER BY job_id) FROM idem_etl.jobs WHERE job_id IN (" . join(',', @after5) . ')'),
	'succeeded,succeeded',
	'5: jobs of other roles submitted afterwards still run');
push @after5, as('victim', 'jandb', sprintf('SELECT etl_submit(%s)', '$c$' . whoami_cmd('after 2') . '$c$'));
{
	local $PostgreSQL::Test::Utils::timeout_default = 5;
	is(wait_ended($node, $after5[-1], 'jandb'), 'succeeded', '5: and later ones too');
}
is(su('jandb', q{SELECT string_agg(tag || ':' || cur, ',' ORDER BY tag COLLATE "C") FROM whoami WHERE tag LIKE 'after%'}),
	'after:victim,after 2:victim,after su:postgres', '5: each as its role');
ok( !$node->log_contains(
		qr/background worker "idem_etl (dispatcher|scheduler)[^"]*" \(PID \d+\) exited with exit code 1/, $offset),
	'5: no dispatcher exited with an error (none exits in a loop)');
attacker_not_superuser('5 (janitor)');
never_ran_as_other('5 (janitor)', 'jandb', $offset);

# ======================================================================
# 6. DROP DATABASE and its hook
# ======================================================================
$offset = new_case('postgres');

# 6a. the attacker drops its own database, where a job of its ran
su('postgres', 'CREATE DATABASE dropme OWNER attacker');
su('dropme', 'CREATE EXTENSION idem_etl');
my $j6 = as('attacker', 'dropme', q{SELECT etl_submit('SELECT 1')});
is(wait_ended($node, $j6, 'dropme'), 'succeeded', '6: a job of the attacker ran there');
my ($ret, $out, $err) = try_as('attacker', 'postgres', 'DROP DATABASE dropme');
is(sqlstate($err), 'no error', '6: its non-superuser owner drops it (DROP DATABASE)');
is(su('postgres', "SELECT count(*) FROM pg_database WHERE datname = 'dropme'"), '0', '6: dropme is gone');

# 6b. a database the attacker may not drop
su('postgres', 'CREATE DATABASE victimdb OWNER victim');
su('victimdb', 'CREATE EXTENSION idem_etl');
my $v1 = as('victim', 'victimdb', q{SELECT etl_submit('SELECT 1')});
is(wait_ended($node, $v1, 'victimdb'), 'succeeded', '6: a job of the victim ran there');

for my $with_stats (0, 1)
{
	my $how = $with_stats ? 'with pg_read_all_stats' : 'a plain role';
	su('postgres', 'GRANT pg_read_all_stats TO attacker') if $with_stats;
	my $log6 = -s $node->logfile;
	# a job running during the attack
	my $sleeper = as('victim', 'victimdb', q{SELECT etl_submit('SELECT pg_sleep(2)', max_attempts => 3)});
	ok( $node->poll_query_until('victimdb',
			"SELECT status = 'running' AND worker_pid IS NOT NULL FROM idem_etl.jobs WHERE job_id = $sleeper"),
		"6 ($how): a victim's job is running");
	($ret, $out, $err) = try_as('attacker', 'postgres', 'DROP DATABASE victimdb');
	is(sqlstate($err), '42501', "6 ($how): DROP DATABASE victimdb by the attacker fails with 42501")
	  or last;
	($ret, $out, $err) = try_as('attacker', 'postgres', "BEGIN;\nDROP DATABASE victimdb;");
	isnt(sqlstate($err), 'no error', "6 ($how): also inside a transaction block");
	is(wait_ended($node, $sleeper, 'victimdb'), 'succeeded', "6 ($how): the running job succeeds");
	is(su('victimdb', "SELECT attempts FROM idem_etl.jobs WHERE job_id = $sleeper"),
		'1', "6 ($how): in its first attempt (its worker was not signalled)");
	my $v2 = as('victim', 'victimdb', q{SELECT etl_submit('SELECT 2')});
	is(wait_ended($node, $v2, 'victimdb'), 'succeeded', "6 ($how): victimdb still runs jobs");
	ok(!$node->log_contains(qr/terminating background worker "idem_etl/, $log6),
		"6 ($how): no idem_etl worker was terminated");
	is(su('postgres', "SELECT count(*) FROM pg_database WHERE datname = 'victimdb'"), '1',
		"6 ($how): victimdb exists");
}
attacker_not_superuser('6 (DROP DATABASE)');
no_crash($node, '6 (DROP DATABASE): no server process crashed', $offset);

# ======================================================================
# 7. role and session_authorization set for a database
# ======================================================================
# Its owner may set them for every session there.  The dispatcher, which
# connects as the bootstrap superuser, keeps its own identity: it became
# the attacker, failed on the queue's table every visit, and no job of that
# database ever ran.
$offset = new_case('postgres');
my $super = su('postgres', 'SELECT current_user');
su('postgres', 'CREATE DATABASE roledb OWNER attacker');
su('roledb', 'CREATE EXTENSION idem_etl SCHEMA public');
for my $setting (q{role = 'attacker'}, q{session_authorization = 'attacker'})
{
	as('attacker', 'roledb', "ALTER DATABASE roledb SET $setting");
	$node->restart;
	ok(wait_launcher(), "7 ($setting): the launcher runs again");
	my $job = as('victim', 'roledb', q{SELECT etl_submit('SELECT 1')});
	# read as the superuser, whatever the database sets
	local $ENV{PGOPTIONS} = "-c session_authorization=$super -c role=none";
	is(wait_ended($node, $job, 'roledb'), 'succeeded', "7 ($setting): a victim's job runs there");
	as('attacker', 'roledb', 'ALTER DATABASE roledb RESET ALL');
}
attacker_not_superuser('7 (role settings of a database)');
no_crash($node, '7 (role settings of a database): no server process crashed', $offset);
su('postgres', 'DROP DATABASE roledb');

no_crash($node, 'no server process crashed');

$node->stop;
done_testing();
