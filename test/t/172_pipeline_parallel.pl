# 172_pipeline_parallel: issue 35, points 1 and 2, with the worker.  A
# pipeline with max_parallel 3 and six due periods: the worker runs three
# of them at once (each period's command waits on a gate, an advisory lock
# that the test holds, until three wait there), never more, and each
# period once; with max_parallel 1 (the default) the periods of another
# pipeline run one at a time, in order.
use strict;
use warnings;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use IdemEtl;
use PostgreSQL::Test::Utils;

$PostgreSQL::Test::Utils::timeout_default = 120;

my $node = new_node('pipeline_parallel', 'idem_etl.max_workers' => '5');
$node->safe_psql(
	'postgres', q{
	ALTER DATABASE postgres SET TimeZone = 'UTC';
	CREATE EXTENSION idem_etl;
	CREATE TABLE runs (name text, run_date date, pid int,
	                   started timestamptz DEFAULT clock_timestamp(), ended timestamptz);
	CREATE FUNCTION gated(name text, d date) RETURNS void LANGUAGE plpgsql AS $$
	BEGIN
	    INSERT INTO runs (name, run_date, pid) VALUES (name, d, pg_backend_pid());
	    PERFORM pg_advisory_xact_lock_shared(4242);
	    UPDATE runs r SET ended = clock_timestamp() WHERE r.name = gated.name AND r.run_date = d;
	END $$;
});

my $gate = $node->background_psql('postgres');
$gate->query_safe('SELECT pg_advisory_lock(4242)');

$node->safe_psql('postgres',
	q{SELECT etl_pipeline_create('par', $$SELECT gated('par', {run_date})$$, '1 day',
	                             current_date - 6, max_parallel => 3)});
ok( $node->poll_query_until(
		'postgres',
		"SELECT count(*) = 3 FROM pg_locks WHERE locktype = 'advisory' AND objid = 4242 AND NOT granted"),
	'three periods run at once, each waiting at the gate');
$gate->query_safe('SELECT pg_advisory_unlock(4242)');
ok( $node->poll_query_until(
		'postgres',
		"SELECT watermark = current_date::timestamptz AND periods_behind = 0 FROM idem_etl.pipelines_status WHERE name = 'par'"
	),
	'the six periods ran');
is( $node->safe_psql(
		'postgres', q{
	SELECT count(*) || ' runs, ' || count(DISTINCT run_date) || ' days, '
	       || (SELECT count(*) FROM idem_etl.pipeline_periods pp JOIN idem_etl.pipelines p USING (pipeline_id)
	            WHERE p.name = 'par' AND pp.status = 'succeeded' AND pp.attempts = 1) || ' succeeded at once'
	  FROM runs WHERE name = 'par'}),
	'6 runs, 6 days, 6 succeeded at once',
	'each period ran once');
is( $node->safe_psql(
		'postgres', q{
	SELECT max(c) FROM (
	  SELECT (SELECT count(*) FROM runs o WHERE o.name = 'par'
	           AND o.started <= r.started AND o.ended > r.started) AS c
	    FROM runs r WHERE r.name = 'par') s}),
	'3',
	'at most three at once, and three at once')
  or diag $node->safe_psql('postgres', "SELECT * FROM runs ORDER BY started");
is( $node->safe_psql(
		'postgres', "SELECT count(*) FROM idem_etl.jobs WHERE attempts > 1 OR last_error IS NOT NULL"),
	'0',
	'no run failed (the runs ending together once deadlocked on the pipeline\'s row)');

# max_parallel 1: one at a time, in order
$node->safe_psql('postgres',
	q{SELECT etl_pipeline_create('one', $$SELECT gated('one', {run_date})$$, '1 day', current_date - 4)});
ok( $node->poll_query_until(
		'postgres',
		"SELECT watermark = current_date::timestamptz FROM idem_etl.pipelines_status WHERE name = 'one'"),
	'max_parallel 1: the four periods ran');
is( $node->safe_psql(
		'postgres', q{
	SELECT bool_and(prev_end IS NULL OR prev_end <= started) AND bool_and(prev_date IS NULL OR prev_date < run_date)
	  FROM (SELECT started, run_date, lag(ended) OVER (ORDER BY started) AS prev_end,
	               lag(run_date) OVER (ORDER BY started) AS prev_date FROM runs WHERE name = 'one') s}),
	't',
	'max_parallel 1: one at a time, in order');
no_crash($node, 'no process crashed');

$gate->quit;
$node->stop;
done_testing();
