# 090_sighup: idem_etl.max_workers bounds the job workers running at once,
# and a reload (SIGHUP) changes it without a restart.
#
# With max_workers = 1, three jobs of one second each run one after the
# other: sampled pg_stat_activity never shows two job backends at work, and
# the time spans the jobs recorded do not overlap.  After ALTER SYSTEM SET
# idem_etl.max_workers = 3 and pg_reload_conf(), three jobs waiting on a gate
# are all seen running at once, and their spans overlap.
use strict;
use warnings;
use Time::HiRes qw(time);
use List::Util qw(max);
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use IdemEtl;

my $node = new_node('sighup',
	'idem_etl.max_workers' => '1',
	restart_after_crash => 'on');

$node->safe_psql(
	'postgres', q{
	CREATE EXTENSION idem_etl;
	CREATE TABLE spans (tag text, started timestamptz, ended timestamptz);
	CREATE TABLE gate (open boolean NOT NULL);
	INSERT INTO gate VALUES (false);
	-- sleeps, then records when it ran
	CREATE FUNCTION work(tag text, secs float8) RETURNS void LANGUAGE plpgsql AS $$
	DECLARE s timestamptz := clock_timestamp();
	BEGIN
	    PERFORM pg_sleep(secs);
	    INSERT INTO spans VALUES (tag, s, clock_timestamp());
	END $$;
	-- waits until the gate opens, then records when it ran
	CREATE FUNCTION gated(tag text) RETURNS void LANGUAGE plpgsql AS $$
	DECLARE s timestamptz := clock_timestamp();
	BEGIN
	    WHILE NOT (SELECT open FROM gate) LOOP
	        PERFORM pg_sleep(0.05);
	    END LOOP;
	    INSERT INTO spans VALUES (tag, s, clock_timestamp());
	END $$;
});

is( $node->safe_psql(
		'postgres',
		"SELECT setting, context FROM pg_settings WHERE name = 'idem_etl.max_workers'"),
	'1|sighup',
	'idem_etl.max_workers is 1 and can be changed with a reload');

# job backends at work (in pg_sleep), all job backends, jobs running
my $sample_sql = q{
	SELECT count(*) FILTER (WHERE wait_event = 'PgSleep'), count(*),
	       (SELECT count(*) FROM idem_etl.jobs WHERE status = 'running')
	  FROM pg_stat_activity WHERE backend_type = 'idem_etl job'};

# pairs of spans with the given tag prefix that overlap in time
sub overlaps
{
	my ($prefix) = @_;
	return $node->safe_psql(
		'postgres', qq{
	SELECT count(*) FROM spans a JOIN spans b
	    ON a.tag < b.tag AND a.started < b.ended AND b.started < a.ended
	 WHERE a.tag LIKE '$prefix%' AND b.tag LIKE '$prefix%'});
}

# --- max_workers = 1: one at a time
my @ids = map {
	$node->safe_psql('postgres', "SELECT etl_submit(\$\$SELECT work('one-$_', 1)\$\$)")
} 1 .. 3;
my $list = join(',', @ids);
my ($max_busy, $max_backends, $max_running, $samples) = (0, 0, 0, 0);
my $deadline = time() + 60;
while (time() < $deadline)
{
	my ($busy, $backends, $running) = split /\|/,
	  $node->safe_psql('postgres', $sample_sql);
	$max_busy = max($max_busy, $busy);
	$max_backends = max($max_backends, $backends);
	$max_running = max($max_running, $running);
	$samples++;
	last
	  if $node->safe_psql('postgres',
		"SELECT count(*) FROM idem_etl.jobs WHERE job_id IN ($list) AND status IN ('queued', 'running')"
	  ) eq '0';
}
is( $node->safe_psql(
		'postgres',
		"SELECT string_agg(status, ',') FROM idem_etl.jobs WHERE job_id IN ($list)"),
	'succeeded,succeeded,succeeded',
	'the three jobs ran');
note "$samples samples: at most $max_busy job backends at work, $max_backends job backends, $max_running jobs running";
# (no minimum number of samples: under load a psql call takes a good part of
# a job's second; max_busy = 1 shows that samples landed while jobs worked)
is($max_busy, 1, 'never more than one job backend at work at once');
cmp_ok($max_running, '<=', 1, 'never more than one job running at once');
is(overlaps('one-'), '0', 'the jobs ran one after the other (no overlapping spans)');

# --- SIGHUP: max_workers = 3
my $launcher = $node->safe_psql('postgres',
	"SELECT pid FROM pg_stat_activity WHERE backend_type = 'idem_etl launcher'");
$node->safe_psql('postgres',
	'ALTER SYSTEM SET idem_etl.max_workers = 3; SELECT pg_reload_conf();');
ok( $node->poll_query_until('postgres', 'SHOW idem_etl.max_workers', '3'),
	'the reload sets idem_etl.max_workers = 3');

@ids = map {
	$node->safe_psql('postgres', "SELECT etl_submit(\$\$SELECT gated('three-$_')\$\$)")
} 1 .. 3;
$list = join(',', @ids);
ok( $node->poll_query_until(
		'postgres', qq{
	SELECT count(*) = 3 FROM pg_stat_activity
	 WHERE backend_type = 'idem_etl job' AND wait_event = 'PgSleep'}
	),
	'three job backends at work at once');
is( $node->safe_psql(
		'postgres',
		"SELECT count(*) FROM idem_etl.jobs WHERE job_id IN ($list) AND status = 'running'"),
	'3',
	'three jobs running');
is( $node->safe_psql(
		'postgres',
		"SELECT pid FROM pg_stat_activity WHERE backend_type = 'idem_etl launcher'"),
	$launcher,
	'the launcher survived the reload (same pid)');
no_crash($node, 'no process crashed on the reload');
$node->safe_psql('postgres', 'UPDATE gate SET open = true');
ok( $node->poll_query_until(
		'postgres',
		"SELECT count(*) = 3 FROM idem_etl.jobs WHERE job_id IN ($list) AND status = 'succeeded'"),
	'the three gated jobs succeed once the gate opens');
is(overlaps('three-'), '3', 'their spans all overlap');

$node->stop;
done_testing();
