# 101_security_jobs: attacks on the job queue's SQL functions (etl_submit,
# etl_wait, etl_cancel, etl_backfill) by an ordinary LOGIN role, "attacker",
# that owns a schema "evil" with planted functions and operators shadowing
# built-ins (see 100_security_worker.pl: each logs current_user and
# session_user, and makes the attacker a superuser when it runs as one).
#
#  4. job-name squatting: a pending job of the attacker named like the
#     victim's is never handed to the victim (nor the other way round): the
#     victim gets a job of its own that runs as the victim; the same for the
#     names etl_backfill gives (job_name:date); a role's own name stays
#     idempotent for it.  etl_wait and etl_cancel of another role's job raise
#     42704 with the same message as for a job that does not exist, and
#     cancel nothing.
#  7. length limits: a job_name of 3000 characters is refused with 22001
#     (etl_submit and etl_backfill) before anything is queued.
#  8. a hostile search_path in the caller's own session
#     (SET search_path = evil, pg_catalog, public): etl_submit (with a
#     job_name, new and pending), etl_wait, etl_cancel, etl_backfill, and
#     the kept-partition functions the janitor shares (etl_replace_partition
#     with keep_replaced, etl_restore_partition, etl_cleanup) never run the
#     planted code as another role (they write the queue with its owner's
#     rights).
#
# Each case checks that the attacker is not a superuser afterwards and that
# its code never ran as another role; at the end, that no server process
# crashed.
use strict;
use warnings;
use Test::More;
use PostgreSQL::Test::Utils;
use FindBin;
use lib $FindBin::RealBin;
use IdemEtl;
use Attack;

my $node = new_node('security_jobs');

use_node($node);


# --- set-up

su( 'postgres', q{
	CREATE EXTENSION idem_etl;
	CREATE ROLE attacker LOGIN;
	CREATE ROLE victim LOGIN;
	CREATE SCHEMA evil AUTHORIZATION attacker;
	CREATE TABLE whoami (tag text, cur name, sess name);
	GRANT INSERT, SELECT ON whoami TO PUBLIC;
});
plant('postgres');

sub whoami_cmd
{
	my ($tag) = @_;
	return "\$c\$INSERT INTO public.whoami SELECT '$tag', current_user, session_user\$c\$";
}

sub job_row
{
	my ($id, $cols) = @_;
	return su('postgres', "SELECT $cols FROM idem_etl.jobs WHERE job_id = $id");
}

# ======================================================================
# 4. job-name squatting
# ======================================================================
my $offset = new_case('postgres');

# the attacker's pending 'nightly', then the victim's
my $squat = as('attacker', 'postgres',
	q{SELECT etl_submit('SELECT 1', job_name => 'nightly', run_after => now() + interval '1 hour')});
my $mine = as('victim', 'postgres',
	'SELECT etl_submit(' . whoami_cmd('nightly') . q{, job_name => 'nightly')});
isnt($mine, $squat, '4: the victim submitting job_name nightly does not get the attacker\'s pending job');
is(job_row($mine, 'submitted_by'), 'victim', '4: it gets a job of its own');
SKIP:
{
	skip 'the victim got the attacker\'s job', 2 if $mine eq $squat;
	is(wait_ended($node, $mine), 'succeeded', '4: which runs');
	is(su('postgres', "SELECT cur || '/' || sess FROM whoami WHERE tag = 'nightly'"),
		'victim/victim', '4: as the victim');
}
is(job_row($squat, q{status || ' ' || submitted_by}), 'queued attacker',
	'4: the attacker\'s job is untouched');

# the other way round: the attacker cannot learn the victim's job id
my $vweekly = as('victim', 'postgres',
	q{SELECT etl_submit('SELECT 1', job_name => 'weekly', run_after => now() + interval '1 hour')});
my $aweekly = as('attacker', 'postgres',
	q{SELECT etl_submit('SELECT 1', job_name => 'weekly', run_after => now() + interval '1 hour')});
isnt($aweekly, $vweekly, '4: the attacker submitting the victim\'s pending name does not get its job id');
is(job_row($aweekly, 'submitted_by'), 'attacker', '4: but a job of its own');
is( as( 'victim', 'postgres',
		q{SELECT etl_submit('SELECT 1', job_name => 'weekly', run_after => now() + interval '1 hour')}),
	$vweekly,
	'4: a role\'s own pending name stays idempotent (victim)');
is( as( 'attacker', 'postgres',
		q{SELECT etl_submit('SELECT 1', job_name => 'weekly', run_after => now() + interval '1 hour')}),
	$aweekly,
	'4: (attacker)');

# etl_backfill: the attacker squats the name of the victim's first date
my $bsquat = as('attacker', 'postgres',
	q{SELECT etl_submit('SELECT 1', job_name => 'nightly:2026-11-01', run_after => now() + interval '1 hour')});
my @bf = split /\n/, as('victim', 'postgres', q{
	SELECT * FROM etl_backfill($c$INSERT INTO public.whoami SELECT {run_date}, current_user, session_user$c$,
	                           '2026-11-01', '2026-11-02', job_name => 'nightly')});
is(scalar @bf, 2, '4: the victim\'s backfill returns two jobs');
ok(!grep({ $_ eq $bsquat } @bf), '4: none of them the attacker\'s squatting job')
  or diag "backfill @bf, attacker's $bsquat";
is(join(',', map { job_row($_, 'submitted_by') } @bf), 'victim,victim', '4: both the victim\'s');
is( join(',', map { $_ eq $bsquat ? 'attacker\'s' : wait_ended($node, $_) } @bf),
	'succeeded,succeeded', '4: both run');
is( su( 'postgres',
		q{SELECT string_agg(tag || ':' || cur, ',' ORDER BY tag COLLATE "C") FROM whoami WHERE tag LIKE '2026-%'}),
	'2026-11-01:victim,2026-11-02:victim',
	'4: each date loaded, as the victim');
is(job_row($bsquat, q{status || ' ' || submitted_by}), 'queued attacker',
	'4: the attacker\'s job is untouched');

# etl_wait and etl_cancel of the victim's job: as if it did not exist
my $missing = su('postgres', 'SELECT max(job_id) + 1000000 FROM idem_etl.jobs');

sub normalized
{
	my ($err, $id) = @_;
	my @lines = grep { !/^\s*LOCATION:/ } split /\n/, $err;
	s/^psql:[^:]*:\d+:\s*// for @lines;
	my $text = join("\n", @lines);
	$text =~ s/\b$id\b/<id>/g;
	return $text;
}
for my $call ("etl_wait(%s, '1 s')", 'etl_cancel(%s)')
{
	my $fn = $call =~ s/\(.*//r;
	my (undef, undef, $other) = try_as('attacker', 'postgres', sprintf("SELECT $call", $vweekly));
	my (undef, undef, $none) = try_as('attacker', 'postgres', sprintf("SELECT $call", $missing));
	is(sqlstate($none), '42704', "4: $fn of a job that does not exist: 42704");
	is(sqlstate($other), '42704', "4: $fn of the victim's job: 42704");
	is(normalized($other, $vweekly), normalized($none, $missing),
		"4: $fn: the same message for both");
}
is(job_row($vweekly, 'status'), 'queued', '4: the victim\'s job is not cancelled');
is(as('victim', 'postgres', "SELECT etl_cancel($vweekly)"), 't', '4: its owner can cancel it');
as('attacker', 'postgres', "SELECT etl_cancel($_)") for ($squat, $aweekly, $bsquat);
attacker_not_superuser('4 (job names)');
never_ran_as_other('4 (job names)', 'postgres', $offset);

# ======================================================================
# 7. length limits
# ======================================================================
$offset = new_case('postgres');
my $count = su('postgres', 'SELECT count(*) FROM idem_etl.jobs');
my %long = (
	'repeat(x, 3000)' => q{repeat('x', 3000)},
	'3000 incompressible characters' =>
	  q{(SELECT left(string_agg(md5(i::text), ''), 3000) FROM generate_series(1, 100) i)});
for my $what (sort keys %long)
{
	my (undef, undef, $err) = try_as('attacker', 'postgres',
		"SELECT etl_submit('SELECT 1', job_name => $long{$what})");
	is(sqlstate($err), '22001', "7: etl_submit with a job_name of $what: 22001");
	(undef, undef, $err) = try_as('attacker', 'postgres',
		"SELECT etl_backfill('SELECT {run_date}', '2026-11-01', '2026-11-02', job_name => $long{$what})");
	is(sqlstate($err), '22001', "7: etl_backfill with a job_name of $what: 22001");
}
is(su('postgres', 'SELECT count(*) FROM idem_etl.jobs'), $count, '7: nothing was queued');
attacker_not_superuser('7 (length limits)');
no_crash($node, '7 (length limits): no server process crashed', $offset);

# ======================================================================
# 8. a hostile search_path in the caller's own session
# ======================================================================
as('attacker', 'postgres', q{
	CREATE TABLE evil.parted (d date NOT NULL, v int) PARTITION BY RANGE (d);
	CREATE TABLE evil.parted_20261128 PARTITION OF evil.parted
	    FOR VALUES FROM ('2026-11-28') TO ('2026-11-29');
	INSERT INTO evil.parted VALUES ('2026-11-28', 1);
});
$offset = new_case('postgres');
my $hostile = "SET search_path = evil, pg_catalog, public;\n";

as('attacker', 'postgres', $hostile . 'SELECT 1::bigint = 2::bigint');
ok(su('postgres', "SELECT count(*) > 0 FROM evil.log WHERE cur = 'attacker'"),
	'8: control: in that session the planted operators win');

my %got;
my @calls = (
	[ 'etl_submit, a new job_name',
		q{SELECT etl_submit('SELECT 1', job_name => 'hostile', run_after => pg_catalog.now() + interval '1 hour')},
		'pending' ],
	[ 'etl_submit, the pending job_name',
		q{SELECT etl_submit('SELECT 1', job_name => 'hostile', run_after => pg_catalog.now() + interval '1 hour')},
		'again' ],
	[ 'etl_submit, no job_name', q{SELECT etl_submit('SELECT 2')}, 'quick' ],
	[ 'etl_wait', q{SELECT etl_wait(%quick%, '30 s')}, 'waited' ],
	[ 'etl_cancel', q{SELECT etl_cancel(%pending%)}, 'cancelled' ],
	[ 'etl_cancel of an ended job', q{SELECT etl_cancel(%quick%)}, 'cancel_ended' ],
	[ 'etl_backfill',
		q{SELECT count(*) FROM etl_backfill('SELECT {run_date}::date', '2026-11-01', '2026-11-03', job_name => 'hbf')},
		'backfill' ],
	[ 'etl_replace_partition, keep_replaced',
		q{SELECT rows_loaded FROM etl_replace_partition('evil.parted', '2026-11-28',
		      $$SELECT '2026-11-28'::date AS d, 2 AS v$$, keep_replaced => '1 hour')},
		'replaced' ],
	[ 'etl_restore_partition', q{SELECT etl_restore_partition('evil.parted', '2026-11-28')}, 'restored' ],
	[ 'etl_cleanup', q{SELECT etl_cleanup()}, 'cleanup' ]);
for my $call (@calls)
{
	my ($what, $sql, $key) = @$call;
	$sql =~ s/%(\w+)%/$got{$1}/g;
	su('postgres', 'ALTER ROLE attacker NOSUPERUSER; TRUNCATE evil.log');
	my ($ret, $out, $err) = try_as('attacker', 'postgres', $hostile . $sql);
	$got{$key} = $out;
	is(sqlstate($err), 'no error', "8: $what: works") or diag $err;
	is( su( 'postgres', q{
		SELECT coalesce(string_agg(DISTINCT fn || ' as ' || cur, '; '), '') FROM evil.log WHERE cur <> 'attacker'}),
		'',
		"8: $what: the attacker's code never ran as another role");
	is(su('postgres', "SELECT rolsuper FROM pg_roles WHERE rolname = 'attacker'"),
		'f', "8: $what: the attacker is not a superuser");
}
is($got{again}, $got{pending}, '8: the pending job_name was found');
is($got{waited}, 'succeeded', '8: etl_wait saw the job succeed');
is($got{cancelled}, 't', '8: etl_cancel cancelled the pending job');
is($got{cancel_ended}, 'f', '8: etl_cancel of an ended job is false');
is($got{backfill}, '3', '8: etl_backfill queued three jobs');
is(job_row($got{pending}, 'status'), 'cancelled', '8: the job is cancelled');
$node->poll_query_until('postgres',
	q{SELECT bool_and(status NOT IN ('queued', 'running')) FROM idem_etl.jobs WHERE job_name LIKE 'hbf:%'});
is( su( 'postgres',
		q{SELECT string_agg(status, ',' ORDER BY job_id) FROM idem_etl.jobs WHERE job_name LIKE 'hbf:%'}),
	'succeeded,succeeded,succeeded',
	'8: the backfill jobs ran');
attacker_not_superuser('8 (hostile search_path)');
never_ran_as_other('8 (hostile search_path)', 'postgres', $offset);

no_crash($node, 'no server process crashed');

$node->stop;
done_testing();
