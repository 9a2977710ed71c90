# 140_pg_upgrade: a cluster of an older major with idem_etl in use is
# upgraded with pg_upgrade to the major under test, and idem_etl's state
# keeps working there:
#   - an upsert and a partition replacement recorded with run_keys are
#     skipped when rerun identically (the ledger and its fingerprints
#     survived);
#   - the replaced partition kept before the upgrade restores;
#   - a job queued before the upgrade runs after it, as its submitter.
#
# The old cluster runs the older major's installation named by
# IDEM_UPGRADE_FROM (a directory with bin/ and, installed into it, idem_etl:
# test/assert/run sets it, for the 18-assert leg, to 15 built with
# assertions, into which it installs idem_etl).  Elsewhere the test skips.  The old cluster
# runs with idem_etl.max_workers = 0, so the job stays queued until the new
# cluster's worker takes it.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use IdemEtl;

my $from = $ENV{IDEM_UPGRADE_FROM} // '';
plan skip_all => 'IDEM_UPGRADE_FROM names no older PostgreSQL installation'
  unless $from ne '' && -x "$from/bin/pg_upgrade";

my $old = PostgreSQL::Test::Cluster->new('old', install_path => $from);
plan skip_all => "idem_etl is not installed into $from"
  unless -e $old->config_data('--pkglibdir') . '/idem_etl.so';
my $new = PostgreSQL::Test::Cluster->new('new');
plan skip_all => 'the installation in IDEM_UPGRADE_FROM is not older than the one under test'
  unless $old->pg_version < $new->pg_version;

$old->init;
$old->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'idem_etl'
idem_etl.max_workers = 0
});
$old->start;
$old->safe_psql('postgres', q{
	CREATE EXTENSION idem_etl;
	CREATE ROLE etl LOGIN;
	GRANT CREATE ON SCHEMA public TO etl;
	SET ROLE etl;
	CREATE TABLE customers (id int PRIMARY KEY, name text);
	CREATE TABLE events (d date NOT NULL, id int NOT NULL, v text, PRIMARY KEY (d, id))
	    PARTITION BY RANGE (d);
	CREATE TABLE events_20261128 PARTITION OF events FOR VALUES FROM ('2026-11-28') TO ('2026-11-29');
	INSERT INTO events VALUES ('2026-11-28', 1, 'first version');
	CREATE TABLE job_log (note text);
	SELECT inserted FROM etl_upsert_batch('customers',
	    $$SELECT * FROM (VALUES (1, 'ann'), (2, 'bob')) v(id, name)$$, run_key => 'customers 1');
	SELECT rows_loaded FROM etl_replace_partition('events', '2026-11-28',
	    $$SELECT '2026-11-28'::date AS d, 2 AS id, 'second version' AS v$$,
	    keep_replaced => '30 days', run_key => 'events 2026-11-28');
	SELECT etl_submit($$INSERT INTO job_log SELECT current_user$$, job_name => 'after upgrade');
});
is($old->safe_psql('postgres', 'SELECT status FROM idem_etl.jobs'),
	'queued', 'before the upgrade: the job is queued');
$old->stop;

# 18's initdb turns data checksums on by default; pg_upgrade needs both
# clusters alike
$new->init($new->pg_version >= 18 ? (extra => ['--no-data-checksums']) : ());
$new->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'idem_etl'
idem_etl.naptime = '100ms'
});

# pg_upgrade writes its logs and scripts into the current directory
my $work = PostgreSQL::Test::Utils::tempdir;
chdir $work;
my $upgraded = PostgreSQL::Test::Utils::run_log(
	[
		'pg_upgrade', '--no-sync',
		'-d', $old->data_dir, '-D', $new->data_dir,
		'-b', $old->config_data('--bindir'), '-B', $new->config_data('--bindir'),
		'-s', $new->host, '-p', $old->port, '-P', $new->port
	]);
ok($upgraded, 'pg_upgrade from ' . $old->pg_version . ' to ' . $new->pg_version);
unless ($upgraded)
{
	# pg_upgrade names its logs; show the ends of them
	for my $log (glob($new->data_dir . '/pg_upgrade_output.d/*/log/*.log'))
	{
		my @lines = split /\n/, slurp_file($log);
		diag("$log:\n" . join("\n", @lines[ -(@lines < 40 ? @lines : 40) .. -1 ]));
	}
	BAIL_OUT('pg_upgrade failed');
}
$new->start;

is($new->safe_psql('postgres', q{
	SET ROLE etl;
	SELECT skipped FROM etl_upsert_batch('customers',
	    $$SELECT * FROM (VALUES (1, 'ann'), (2, 'bob')) v(id, name)$$, run_key => 'customers 1');
}), 't', 'after the upgrade: the identical upsert is skipped by its run_key');
is($new->safe_psql('postgres', q{
	SET ROLE etl;
	SELECT skipped FROM etl_replace_partition('events', '2026-11-28',
	    $$SELECT '2026-11-28'::date AS d, 2 AS id, 'second version' AS v$$,
	    keep_replaced => '30 days', run_key => 'events 2026-11-28');
}), 't', 'the identical partition replacement is skipped by its run_key');
is($new->safe_psql('postgres', q{
	SET ROLE etl;
	SELECT etl_restore_partition('events', '2026-11-28') IS NOT NULL;
	SELECT string_agg(v, ',' ORDER BY id) FROM events;
}), "t\nfirst version", 'the partition kept before the upgrade restores');

my $job = $new->safe_psql('postgres', 'SELECT job_id FROM idem_etl.jobs');
is(wait_ended($new, $job), 'succeeded', 'the job queued before the upgrade runs after it');
is($new->safe_psql('postgres', q{SELECT string_agg(note, ',') FROM job_log}),
	'etl', 'as the role that submitted it');

$new->stop;
done_testing();
