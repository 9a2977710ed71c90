# 170_pipeline_catchup: issue 35, points 2 and 3, with the worker.
#
#  - a pipeline whose start is 30 days in the past is caught up by the
#    worker alone: 30 periods, each once, oldest first, one job each;
#  - the server stopped over several periods: at start the overdue job runs
#    and the missed periods run, each once, in order (time is real here:
#    periods of 2 seconds, the server down for 7);
#  - an immediate stop in the middle of a period: only that period runs
#    again (the earlier ones committed with their rows), and the data equal
#    one clean run;
#  - a period that fails is retried by the worker after its backoff
#    (idem_etl.max_backoff = 1s here), and the periods after it wait
#    (on_failure 'block') and then run, in order.
use strict;
use warnings;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use IdemEtl;
use PostgreSQL::Test::Utils;
use Time::HiRes qw(time);

$PostgreSQL::Test::Utils::timeout_default = 120;

my $node = new_node('pipeline_catchup', restart_after_crash => 'on');

$node->safe_psql(
	'postgres', q{
	ALTER DATABASE postgres SET TimeZone = 'UTC';
	CREATE EXTENSION idem_etl;
	CREATE TABLE log (seq bigserial, name text, run_date text, at timestamptz DEFAULT clock_timestamp());
	CREATE FUNCTION gated_load(d date) RETURNS void LANGUAGE plpgsql AS $$
	BEGIN
	    INSERT INTO log (name, run_date) VALUES ('gated', d);
	    -- the third day waits for the test's lock: its work done, not committed
	    IF d = current_date - 2 THEN
	        PERFORM pg_advisory_xact_lock_shared(4242);
	    END IF;
	END $$;
});

# Each period of $name ran once, in order: as many log rows as distinct run
# dates, in the order of the dates, and as many succeeded periods.
sub check_once_in_order
{
	my ($name, $what) = @_;
	is( $node->safe_psql(
			'postgres', qq{
		SELECT count(*) = count(DISTINCT run_date)
		   AND bool_and(ordered)
		   AND count(*) = (SELECT count(*) FROM idem_etl.pipeline_periods pp
		                     JOIN idem_etl.pipelines p USING (pipeline_id)
		                    WHERE p.name = '$name' AND pp.status = 'succeeded')
		  FROM (SELECT run_date, run_date >= lag(run_date, 1, '') OVER (ORDER BY seq) AS ordered
		          FROM log WHERE name = '$name') s}),
		't',
		"$what: each period once, in order");
}

# --- 30 days in the past: the worker catches up alone
$node->safe_psql('postgres',
	q{SELECT etl_pipeline_create('month', $$INSERT INTO log (name, run_date) VALUES ('month', {run_date})$$,
	                             '1 day', current_date - 30)});
ok( $node->poll_query_until(
		'postgres',
		"SELECT watermark = current_date::timestamptz AND periods_behind = 0 FROM idem_etl.pipelines_status WHERE name = 'month'"
	),
	'30 days in the past: the worker catches up to today');
is($node->safe_psql('postgres', "SELECT count(*) FROM log WHERE name = 'month'"),
	'30', '30 periods ran');
check_once_in_order('month', '30 days');
is( $node->safe_psql(
		'postgres',
		"SELECT count(DISTINCT pp.job_id) FROM idem_etl.pipeline_periods pp JOIN idem_etl.pipelines p USING (pipeline_id) WHERE p.name = 'month'"
	),
	'30',
	'one job per period (one transaction each)');
my @warnings = slurp_file($node->logfile) =~ /WARNING:  pipeline "month" is \d+ periods behind/g;
is(scalar @warnings, 1, 'one WARNING while it was behind, not one per job');
is( $node->safe_psql(
		'postgres',
		"SELECT state, next_due = current_date + 1 FROM idem_etl.pipelines_status WHERE name = 'month'"),
	'ok|t',
	'then it waits for tomorrow, its job queued for then');
is( $node->safe_psql(
		'postgres',
		"SELECT j.status, j.run_after = current_date + 1 FROM idem_etl.jobs j JOIN idem_etl.pipelines p USING (job_id) WHERE p.name = 'month'"),
	'queued|t',
	'one queued job, due tomorrow: no polling in between');

# --- the server down over several periods
$node->safe_psql('postgres',
	q{SELECT etl_pipeline_create('tick', $$INSERT INTO log (name, run_date) VALUES ('tick', {period_start})$$,
	                             '2 seconds', date_trunc('second', clock_timestamp()) + interval '1 second')});
$node->stop('fast');
my $down = time();
sleep 1 while time() - $down < 7;    # the outage: periods pass
$node->start;
my $started = $node->safe_psql('postgres', 'SELECT now()');
ok( $node->poll_query_until(
		'postgres', qq{
	SELECT count(*) >= 3 FROM idem_etl.pipeline_periods pp JOIN idem_etl.pipelines p USING (pipeline_id)
	 WHERE p.name = 'tick' AND pp.status = 'succeeded' AND pp.period_end <= '$started'}
	),
	'after the outage the missed periods run');
$node->safe_psql('postgres', "SELECT etl_pipeline_pause('tick')");
check_once_in_order('tick', 'after the outage');
is( $node->safe_psql(
		'postgres', qq{
	SELECT count(*) FROM idem_etl.pipeline_periods pp JOIN idem_etl.pipelines p USING (pipeline_id)
	 WHERE p.name = 'tick' AND pp.status <> 'succeeded'}),
	'0',
	'none left out');
is( $node->safe_psql(
		'postgres', qq{
	SELECT min(period_start) = (SELECT start FROM idem_etl.pipelines WHERE name = 'tick')
	   AND bool_and(period_end = lead_start OR lead_start IS NULL)
	  FROM (SELECT period_start, period_end, lead(period_start) OVER (ORDER BY period_start) AS lead_start
	          FROM idem_etl.pipeline_periods pp JOIN idem_etl.pipelines p USING (pipeline_id)
	         WHERE p.name = 'tick') s}),
	't',
	'from the start, without a gap');

# --- an immediate stop in the middle of a period
my $holder = $node->background_psql('postgres');
$holder->query_safe('SELECT pg_advisory_lock(4242)');
$node->safe_psql('postgres',
	q{SELECT etl_pipeline_create('gated', $$SELECT gated_load({run_date})$$, '1 day', current_date - 4)});
ok(wait_advisory($node, 4242), 'the third period is in the middle of its work');
is( $node->safe_psql(
		'postgres', q{
	SELECT count(*) FROM idem_etl.pipeline_periods pp JOIN idem_etl.pipelines p USING (pipeline_id)
	 WHERE p.name = 'gated' AND pp.status = 'succeeded'}),
	'2',
	'two periods committed before it');
my $before = $node->safe_psql('postgres',
	"SELECT string_agg(finished_at::text, ',' ORDER BY period_start) FROM idem_etl.pipeline_periods pp JOIN idem_etl.pipelines p USING (pipeline_id) WHERE p.name = 'gated'"
);
$node->stop('immediate');
eval { $holder->quit };
$node->start;
ok( $node->poll_query_until(
		'postgres',
		"SELECT watermark = current_date::timestamptz FROM idem_etl.pipelines_status WHERE name = 'gated'"),
	'after the restart the pipeline catches up');
is( $node->safe_psql(
		'postgres',
		"SELECT count(*), count(DISTINCT run_date) FROM log WHERE name = 'gated'"),
	'4|4',
	'the data equal one clean run: each day once (the interrupted insert rolled back)');
check_once_in_order('gated', 'after the immediate stop');
is( $node->safe_psql(
		'postgres',
		"SELECT string_agg(finished_at::text, ',' ORDER BY period_start) FROM idem_etl.pipeline_periods pp JOIN idem_etl.pipelines p USING (pipeline_id) WHERE p.name = 'gated' AND period_start < current_date - 2"
	),
	$before,
	'the periods committed before the stop did not run again');
is( $node->safe_psql(
		'postgres',
		"SELECT j.attempts FROM idem_etl.pipeline_periods pp JOIN idem_etl.pipelines p USING (pipeline_id) JOIN idem_etl.jobs j ON j.job_id = pp.job_id WHERE p.name = 'gated' AND pp.period_start = current_date - 2"
	),
	'2',
	'the interrupted period ran again, in its job\'s second attempt');

# --- a failing period retried by the worker, its successors waiting
$node->safe_psql(
	'postgres', q{
	CREATE FUNCTION flaky_load(d date) RETURNS void LANGUAGE plpgsql AS $$
	BEGIN
	    INSERT INTO log (name, run_date) VALUES ('flaky', d);
	    -- the first attempt of the day 3 days ago fails (its period has no
	    -- row yet), the retry succeeds
	    IF d = current_date - 3 AND NOT EXISTS (
	           SELECT FROM idem_etl.pipeline_periods pp JOIN idem_etl.pipelines p USING (pipeline_id)
	            WHERE p.name = 'flaky' AND pp.period_start = d) THEN
	        RAISE EXCEPTION 'upstream not ready' USING ERRCODE = 'data_exception';
	    END IF;
	END $$;
});
$node->safe_psql('postgres',
	q{SELECT etl_pipeline_create('flaky', $$SELECT flaky_load({run_date})$$, '1 day', current_date - 4)});
ok( $node->poll_query_until(
		'postgres',
		"SELECT watermark = current_date::timestamptz FROM idem_etl.pipelines_status WHERE name = 'flaky'"),
	'the failing period is retried by the worker and the pipeline catches up');
is( $node->safe_psql(
		'postgres', q{
	SELECT string_agg((current_date - period_start::date) || ':' || attempts, ' ' ORDER BY period_start)
	  FROM idem_etl.pipeline_periods pp JOIN idem_etl.pipelines p USING (pipeline_id) WHERE p.name = 'flaky'}),
	'4:1 3:2 2:1 1:1',
	'the failed day took two attempts, the others one');
is( $node->safe_psql(
		'postgres',
		"SELECT string_agg(current_date - run_date::date || '', ' ' ORDER BY seq) FROM log WHERE name = 'flaky'"),
	'4 3 2 1',
	'its successors ran after it succeeded, in order; the failed attempt left nothing');

$node->stop;
done_testing();
