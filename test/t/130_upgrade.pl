# 130_upgrade: ALTER EXTENSION idem_etl UPDATE from every earlier version.
#
# In one cluster (idem_etl preloaded, so the background worker runs): a
# database is created at the first released version (0.1) and loaded through
# it with the current shared library, which is exactly the case of a server
# whose package was upgraded while its databases still have the old objects:
# ledger rows of upserts and partition replacements with run_key, a queued
# job, a kept partition.  Then ALTER EXTENSION idem_etl UPDATE, and:
#  - its objects equal those of a fresh CREATE EXTENSION (test/upgrade/
#    objects.sql lists them canonically: nothing here names an object, so a
#    new object without its upgrade script fails this test);
#  - the old ledger rows make the same reruns skip;
#  - the queued job runs;
#  - the kept partition restores.
# Another database stays at 0.1 throughout: the library keeps working there.
#
# Every released version is updated from, to the default version, one
# database each (@released below: add a version when it is released).
use strict;
use warnings;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use IdemEtl;

# Versions released before the current one, oldest first.
my @released = ('0.1', '0.2');

my $objects_sql = slurp_file("$FindBin::RealBin/../upgrade/objects.sql");
my $node = new_node('upgrade');

# the default version, from the control file as installed
$node->safe_psql('postgres', 'CREATE DATABASE fresh');
$node->safe_psql('fresh', 'CREATE EXTENSION idem_etl');
my $current = $node->safe_psql('fresh',
	"SELECT extversion FROM pg_extension WHERE extname = 'idem_etl'");
my $fresh_objects = $node->safe_psql('fresh', $objects_sql);
like($fresh_objects, qr/^member table idem_etl\.runs$/m,
	'the listing of a fresh install shows its objects');

# listing difference, for diagnostics
sub listing_diff
{
	my ($got, $want) = @_;
	my %g = map { $_ => 1 } split /\n/, $got;
	my %w = map { $_ => 1 } split /\n/, $want;
	return join("\n",
		(map { "- $_" } grep { !$g{$_} } split /\n/, $want),
		(map { "+ $_" } grep { !$w{$_} } split /\n/, $got));
}

# result of a call as "skipped" or "applied"
sub outcome
{
	my ($db, $sql) = @_;
	my $skipped = $node->safe_psql($db, "SELECT skipped FROM $sql");
	return $skipped eq 't' ? 'skipped' : $skipped eq 'f' ? 'applied' : "?$skipped";
}

my $upsert = q{etl_upsert_batch('u', $$SELECT * FROM (VALUES (1, 'a'), (2, 'b')) s(id, v)$$,
	run_key => 'day1')};
my $replace = q{etl_replace_partition('ps', '2026-11-28',
	$$SELECT '2026-11-28'::date AS d, 1 AS id, 'x' AS v$$, run_key => 'r1')};
my $replace_new = q{etl_replace_partition('ps', '2026-11-29',
	$$SELECT '2026-11-29'::date AS d, 2 AS id, 'y' AS v$$, granularity => '1 day',
	run_key => 'r1')};
my $replace_plain = q{etl_replace_partition('pl', '2026-11-28',
	$$SELECT '2026-11-28'::date AS d, 1 AS id$$, partition_column => 'd',
	run_key => 'r1')};

# Make the queued jobs due now.  The worker sleeps until the next due time
# it was told of, so a job made due by hand is found when the server starts
# (as after the package upgrade that brought the new version).
sub make_due
{
	my ($db) = @_;
	$node->safe_psql($db,
		"UPDATE idem_etl.jobs SET run_after = now() WHERE status = 'queued'");
	$node->restart;
}

sub load_old
{
	my ($db, $version) = @_;
	$node->safe_psql('postgres', "CREATE DATABASE $db");
	# one kept partition, the one made below (0.3 keeps every replaced
	# partition for a day by default)
	$node->safe_psql('postgres', "ALTER DATABASE $db SET idem_etl.keep_replaced = 0");
	$node->safe_psql($db, qq{
		CREATE EXTENSION idem_etl VERSION '$version';
		CREATE TABLE u (id int PRIMARY KEY, v text);
		CREATE TABLE ps (d date NOT NULL, id int, v text) PARTITION BY RANGE (d);
		CREATE TABLE ps_20261128 PARTITION OF ps
			FOR VALUES FROM ('2026-11-28') TO ('2026-11-29');
		CREATE TABLE pk (d date NOT NULL, id int) PARTITION BY LIST (d);
		CREATE TABLE pk_a PARTITION OF pk FOR VALUES IN ('2026-11-28');
		CREATE TABLE pl (d date NOT NULL, id int);
		CREATE TABLE jt (id int);
	});
	is($node->safe_psql($db,
			"SELECT extversion FROM pg_extension WHERE extname = 'idem_etl'"),
		$version, "$db: created at $version");

	# ledger rows, through the old objects and the current library
	is(outcome($db, $upsert), 'applied', "$db: upsert with run_key at $version");
	is(outcome($db, $upsert), 'skipped', "$db: its rerun is skipped at $version");
	is(outcome($db, $replace), 'applied', "$db: replace with run_key at $version");
	is(outcome($db, $replace), 'skipped', "$db: its rerun is skipped at $version");
	is(outcome($db, $replace_new), 'applied',
		"$db: replace creating a partition at $version");
	is(outcome($db, $replace_plain), 'applied',
		"$db: replace in a plain table at $version");

	# a kept partition: the second load keeps the first one's rows
	$node->safe_psql($db, q{
		SELECT * FROM etl_replace_partition('pk', '2026-11-28',
			$$SELECT '2026-11-28'::date AS d, 1 AS id$$);
		SELECT * FROM etl_replace_partition('pk', '2026-11-28',
			$$SELECT '2026-11-28'::date AS d, 2 AS id$$, keep_replaced => '1 day');
	});
	is($node->safe_psql($db, 'SELECT count(*) FROM idem_etl.replaced_partitions'),
		'1', "$db: a kept partition at $version");

	# a queued job, due in a day (the worker would run it at once otherwise)
	$node->safe_psql($db, q{
		SELECT etl_submit('INSERT INTO jt VALUES (1)', job_name => 'nightly',
			run_after => now() + interval '1 day');
	});
	is($node->safe_psql($db, "SELECT status FROM idem_etl.jobs"),
		'queued', "$db: a queued job at $version");
}

foreach my $version (@released)
{
	(my $db = "from_$version") =~ s/\./_/g;
	load_old($db, $version);

	my $old_objects = $node->safe_psql($db, $objects_sql);
	isnt($old_objects, $fresh_objects,
		"$db: the listing tells $version from $current apart");

	my $runs = $node->safe_psql($db, 'SELECT count(*) FROM idem_etl.runs');
	$node->safe_psql($db, 'ALTER EXTENSION idem_etl UPDATE');
	is($node->safe_psql($db,
			"SELECT extversion FROM pg_extension WHERE extname = 'idem_etl'"),
		$current, "$db: updated to $current");

	# the objects equal a fresh install's
	my $objects = $node->safe_psql($db, $objects_sql);
	is($objects, $fresh_objects, "$db: objects after the update equal a fresh install")
	  or diag "differences (- fresh only, + updated only):\n"
	  . listing_diff($objects, $fresh_objects);

	# the data are kept
	is($node->safe_psql($db, 'SELECT count(*) FROM idem_etl.runs'),
		$runs, "$db: the ledger keeps its rows");
	is($node->safe_psql($db, q{
			SELECT count(*) FILTER (WHERE partition_bound IS NOT NULL)
			  FROM idem_etl.runs WHERE target_oid = 'ps'::regclass}),
		'3', "$db: old replace runs of a partitioned table have their bound");

	# the same reruns skip
	is(outcome($db, $upsert), 'skipped', "$db: the upsert rerun is skipped after the update");
	is(outcome($db, $replace), 'skipped', "$db: the replace rerun is skipped after the update");
	is(outcome($db, $replace_new), 'skipped',
		"$db: the rerun into the created partition is skipped after the update");
	# a plain table's runs of 0.1 have no bound (README, Upgrading): the
	# first rerun loads again, the next one is skipped; 0.2 recorded it
	if ($version eq '0.1')
	{
		is(outcome($db, $replace_plain), 'applied',
			"$db: the plain-table rerun loads once more after the update");
	}
	is(outcome($db, $replace_plain), 'skipped', "$db: the plain-table rerun is skipped");

	# the kept partition restores
	$node->safe_psql($db, q{SELECT etl_restore_partition('pk', '2026-11-28')});
	is($node->safe_psql($db, 'SELECT id FROM pk'), '1',
		"$db: the kept partition restores after the update");

	# the queued job runs; job names are per role now
	my $job = $node->safe_psql($db, 'SELECT job_id FROM idem_etl.jobs');
	make_due($db);
	is(wait_ended($node, $job, $db), 'succeeded', "$db: the queued job runs after the update");
	is($node->safe_psql($db, 'SELECT count(*) FROM jt'), '1', "$db: and did its work once");
	$node->safe_psql($db, q{
		CREATE ROLE upgrade_other;
		GRANT INSERT ON jt TO upgrade_other;
		SELECT etl_submit('INSERT INTO jt VALUES (2)', job_name => 'nightly',
			run_after => now() + interval '1 day');
		SET ROLE upgrade_other;
		SELECT etl_submit('INSERT INTO jt VALUES (3)', job_name => 'nightly',
			run_after => now() + interval '1 day');
	});
	is($node->safe_psql($db,
			"SELECT count(*) FROM idem_etl.jobs WHERE status = 'queued' AND job_name = 'nightly'"),
		'2', "$db: two roles may each have a pending job of the same name after the update");
	$node->safe_psql($db, q{
		DELETE FROM idem_etl.jobs WHERE status = 'queued';
		DROP OWNED BY upgrade_other; DROP ROLE upgrade_other;
	});
}

# A database left at 0.1 keeps working with the current library.
load_old('stays_0_1', '0.1');
my $job = $node->safe_psql('stays_0_1', 'SELECT job_id FROM idem_etl.jobs');
make_due('stays_0_1');
is(wait_ended($node, $job, 'stays_0_1'), 'succeeded',
	'stays_0_1: the worker runs jobs of a database at 0.1');
$node->safe_psql('stays_0_1', q{SELECT etl_restore_partition('pk', '2026-11-28')});
is($node->safe_psql('stays_0_1', 'SELECT id FROM pk'), '1',
	'stays_0_1: restore works at 0.1');

# What needs the later objects is refused there with 55000, saying what to
# do: etl_replace_where with a run_key (its reruns are found by the bound
# column that 0.1's ledger lacks), declared by hand over the current library
# since 0.1 has no such function.
$node->safe_psql('stays_0_1', q{
	CREATE FUNCTION rw(regclass, text, text, interval, text, text, float8, boolean)
	RETURNS TABLE (run_id bigint, rows_loaded bigint, rows_replaced bigint, skipped boolean)
	AS '$libdir/idem_etl', 'etl_replace_where' LANGUAGE C;
});
my (undef, undef, $err) = $node->psql('stays_0_1', qq{\\set VERBOSITY verbose
	SELECT * FROM rw('pl', \$\$d = '2026-11-28'\$\$,
		\$\$SELECT '2026-11-28'::date AS d, 1 AS id\$\$, NULL, 'k', NULL, NULL, false)});
like($err,
	qr/ERROR:\s+55000: etl_replace_where needs version 0\.2 of extension "idem_etl".*HINT:\s+Run ALTER EXTENSION idem_etl UPDATE in this database\./s,
	'stays_0_1: etl_replace_where with a run_key: 55000, update the extension');

no_crash($node, 'no process crashed');
done_testing();
