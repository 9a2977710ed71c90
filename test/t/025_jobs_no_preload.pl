# 025_jobs_no_preload: without shared_preload_libraries = 'idem_etl' there is
# no launcher and nothing could ever run a job, so etl_submit and
# etl_backfill refuse with 55000 and a hint to preload the library, and
# queue nothing; the synchronous functions keep working, and so do
# pipelines, run by etl_pipeline_run (issue 35: from pg_cron on a managed
# service), with no job queued for them.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use IdemEtl;

my $node = PostgreSQL::Test::Cluster->new('no_preload');
$node->init;
$node->start;

$node->safe_psql('postgres', q{
	CREATE EXTENSION idem_etl;
	CREATE TABLE t (id int PRIMARY KEY, v text);
});

is( $node->safe_psql(
		'postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type LIKE 'idem_etl%'"),
	'0',
	'no idem_etl background process without the preload');

my ($ret, $out, $err) = $node->psql('postgres',
	"\\set VERBOSITY verbose\nSELECT etl_submit('SELECT 1')");
isnt($ret, 0, 'etl_submit fails without the preload');
like($err, qr/ERROR:\s+55000:/, 'with SQLSTATE 55000');
like($err, qr/HINT:.*shared_preload_libraries/,
	'and a hint to add idem_etl to shared_preload_libraries');

($ret, $out, $err) = $node->psql('postgres',
	"\\set VERBOSITY verbose\nSELECT etl_submit('SELECT 1', 'named', 3, now() + interval '1 hour')");
like($err, qr/ERROR:\s+55000:/, 'etl_submit with every argument: 55000 too');

($ret, $out, $err) = $node->psql('postgres',
	"\\set VERBOSITY verbose\nSELECT * FROM etl_backfill('SELECT {run_date}::date', '2026-11-01', '2026-11-03')"
);
isnt($ret, 0, 'etl_backfill fails without the preload');
like($err, qr/ERROR:\s+55000:/, 'with SQLSTATE 55000');
like($err, qr/HINT:.*shared_preload_libraries/, 'and the same hint');

is($node->safe_psql('postgres', 'SELECT count(*) FROM idem_etl.jobs'),
	'0', 'nothing was queued');

# the synchronous functions keep working
is( $node->safe_psql(
		'postgres',
		q{SELECT inserted, updated, skipped FROM etl_upsert_batch('t', $$SELECT 1 AS id, 'one' AS v$$)}
	),
	'1|0|f',
	'etl_upsert_batch works without the preload');
is($node->safe_psql('postgres', 'SELECT id, v FROM t'),
	'1|one', 'and wrote its row');

# pipelines: created and run in the session, nothing queued
$node->safe_psql('postgres', q{
	CREATE TABLE days (run_date date);
	SELECT etl_pipeline_create('days', $$INSERT INTO days VALUES ({run_date})$$, '1 day', current_date - 3);
});
is($node->safe_psql('postgres', q{SELECT count(*) FROM etl_pipeline_run('days')}),
	'3', 'etl_pipeline_run runs the due periods without the preload');
is($node->safe_psql('postgres', q{SELECT count(*) FROM etl_pipeline_run('days')}),
	'0', 'and a second call (the next pg_cron firing) runs nothing');
is( $node->safe_psql(
		'postgres', q{SELECT count(*), count(DISTINCT run_date) FROM days}),
	'3|3', 'each day once');
is( $node->safe_psql(
		'postgres', q{SELECT (SELECT count(*) FROM idem_etl.jobs), job_id IS NULL FROM idem_etl.pipelines_status}),
	'0|t', 'no job was queued for the pipeline');

no_crash($node, 'no server process crashed');

$node->stop;
done_testing();
