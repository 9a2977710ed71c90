# 080_janitor: the janitor, run by a dispatcher when a kept partition or a finished job is due, with nobody
# calling anything:
#   - drops replaced partitions once their keep_replaced has passed
#     (idem_etl.replaced_partitions empties, the kept table is gone), also
#     those of a table owned by an ordinary role, and keeps those whose time
#     has not come;
#   - deletes finished jobs older than idem_etl.job_retention, and only those.
# (Requeueing the jobs of dead workers is shown by 040_jobs_crash.)
use strict;
use warnings;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use IdemEtl;

my $node = new_node('janitor',
	'idem_etl.job_retention' => '3s');

$node->safe_psql(
	'postgres', q{
	CREATE EXTENSION idem_etl;
	CREATE ROLE etl LOGIN;
	GRANT CREATE ON SCHEMA public TO etl;

	CREATE TABLE events (d date NOT NULL, id int NOT NULL, v text, PRIMARY KEY (d, id))
	    PARTITION BY RANGE (d);
	CREATE TABLE events_20261127 PARTITION OF events FOR VALUES FROM ('2026-11-27') TO ('2026-11-28');
	CREATE TABLE events_20261128 PARTITION OF events FOR VALUES FROM ('2026-11-28') TO ('2026-11-29');
	INSERT INTO events VALUES ('2026-11-27', 1, 'old 27'), ('2026-11-28', 1, 'old 28');

	-- a table owned by an ordinary role, replaced by that role
	CREATE TABLE owned (d date NOT NULL, id int NOT NULL, v text, PRIMARY KEY (d, id))
	    PARTITION BY RANGE (d);
	CREATE TABLE owned_20261128 PARTITION OF owned FOR VALUES FROM ('2026-11-28') TO ('2026-11-29');
	INSERT INTO owned VALUES ('2026-11-28', 1, 'old');
	ALTER TABLE owned OWNER TO etl;
	ALTER TABLE owned_20261128 OWNER TO etl;
});

# --- replaced partitions: one kept for 1 second, one for an hour.  Listed
# in the replacing transaction: once it commits, the janitor may drop the
# short ones at any moment (on a loaded machine, before a later statement
# could look).
my $listing = $node->safe_psql(
	'postgres', q{
	BEGIN;
	SELECT FROM etl_replace_partition('events', '2026-11-28',
	    $$SELECT '2026-11-28'::date AS d, 2 AS id, 'new 28' AS v$$, keep_replaced => '1 second');
	SELECT FROM etl_replace_partition('events', '2026-11-27',
	    $$SELECT '2026-11-27'::date AS d, 2 AS id, 'new 27' AS v$$, keep_replaced => '1 hour');
	SET ROLE etl;
	SELECT FROM etl_replace_partition('owned', '2026-11-28',
	    $$SELECT '2026-11-28'::date AS d, 2 AS id, 'new' AS v$$, keep_replaced => '1 second');
	RESET ROLE;
	SELECT target_oid::regclass::text || ':' || partition_value, kept_table::text,
	       to_regclass(kept_table::text) IS NOT NULL
	  FROM idem_etl.replaced_partitions;
	COMMIT;
});
my (%kept, %exists);
for (grep { /\|/ } split /\n/, $listing)
{
	my ($what, $table, $there) = split /\|/;
	$kept{$what} = $table;
	$exists{$what} = $there;
}
is(scalar keys %kept, 3, 'three replaced partitions are kept');
my @which = qw(events:2026-11-28 events:2026-11-27 owned:2026-11-28);
my ($short, $long, $owned) = @kept{@which};
ok(defined $short && defined $long && defined $owned, 'one per replace')
  or diag explain \%kept;
is(join('|', map { $exists{$_} // '?' } @which), 't|t|t', 'the kept tables exist');

ok( $node->poll_query_until(
		'postgres',
		'SELECT count(*) = 1 FROM idem_etl.replaced_partitions'),
	'the janitor drops the versions whose keep_replaced has passed, with nobody calling etl_cleanup');
is( $node->safe_psql(
		'postgres',
		"SELECT target_oid::regclass::text || ':' || partition_value FROM idem_etl.replaced_partitions"),
	'events:2026-11-27',
	'idem_etl.replaced_partitions keeps only the one kept for an hour');
is( $node->safe_psql(
		'postgres',
		"SELECT to_regclass('$short') IS NULL, to_regclass('$owned') IS NULL, to_regclass('$long') IS NOT NULL"
	),
	't|t|t',
	'the expired kept tables are gone (also the one owned by an ordinary role), the other stays');
is( $node->safe_psql(
		'postgres',
		"SELECT string_agg(v, ',' ORDER BY d, id) FROM events"),
	'new 27,new 28',
	'the target is untouched');
is($node->safe_psql('postgres', 'SELECT v FROM owned'),
	'new', 'the other target too');

# --- finished jobs older than idem_etl.job_retention are deleted
my $done = $node->safe_psql('postgres', q{SELECT etl_submit('SELECT 1')});
my $failed = $node->safe_psql('postgres', q{SELECT etl_submit('SELECT 1/0')});
my $cancelled = $node->safe_psql('postgres',
	q{SELECT etl_submit('SELECT 1', run_after => now() + interval '1 hour')});
my $queued = $node->safe_psql('postgres',
	q{SELECT etl_submit('SELECT 2', run_after => now() + interval '1 hour')});
my $running = $node->safe_psql('postgres', q{SELECT etl_submit('SELECT pg_sleep(60)')});
$node->safe_psql('postgres', "SELECT etl_cancel($cancelled)");
is( $node->safe_psql(
		'postgres',
		"SELECT etl_wait($done, '60 s'), etl_wait($failed, '60 s'), etl_wait($cancelled, '1 s')"),
	'succeeded|failed|cancelled',
	'three jobs ended');
ok( $node->poll_query_until(
		'postgres',
		"SELECT status = 'running' FROM idem_etl.jobs WHERE job_id = $running"),
	'one job is running');
ok( $node->poll_query_until(
		'postgres',
		"SELECT count(*) = 0 FROM idem_etl.jobs WHERE job_id IN ($done, $failed, $cancelled)"),
	'finished jobs are deleted after idem_etl.job_retention (3 s)');
is( $node->safe_psql(
		'postgres',
		"SELECT string_agg(job_id || ' ' || status, ',' ORDER BY job_id) FROM idem_etl.jobs WHERE job_id IN ($queued, $running)"
	),
	"$queued queued,$running running",
	'pending jobs are kept, however old');
is($node->safe_psql('postgres', "SELECT etl_cancel($running)"), 't', 'cancel the sleeper');

no_crash($node, 'no server process crashed');

$node->stop;
done_testing();
