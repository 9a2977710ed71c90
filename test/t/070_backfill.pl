# 070_backfill: etl_backfill queues one job per run date, with {run_date}
# replaced by the quoted literal of the date and job names
# job_name || ':' || date.  A 30-day backfill of etl_replace_partition,
# submitted twice while pending (same job ids), again while it runs, and
# once more after it finished, leaves 30 partitions each loaded once: 30
# non-skipped runs in the ledger, the later reruns skipped by their run_key
# (the partitions keep their files).  The jobs start oldest first; step
# spaces the dates.
use strict;
use warnings;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use IdemEtl;

$PostgreSQL::Test::Utils::timeout_default = 90;

my $node = new_node('backfill');

$node->safe_psql(
	'postgres', q{
	CREATE EXTENSION idem_etl;
	CREATE TABLE events (d date NOT NULL, id int NOT NULL, v text, PRIMARY KEY (d, id))
	    PARTITION BY RANGE (d);
});

my $cmd = <<'SQL';
SELECT * FROM etl_replace_partition('events', {run_date},
    $$SELECT {run_date}::date AS d, g AS id, 'row ' || g AS v FROM generate_series(1, 10) g$$,
    granularity => '1 day', run_key => {run_date})
SQL
chomp $cmd;
my $backfill =
  "SELECT array_agg(id ORDER BY id) FROM etl_backfill(\$cmd\$$cmd\$cmd\$, '2026-11-01', '2026-11-30', job_name => 'events') AS id";

# All jobs named events:* have ended.
sub wait_backfill
{
	my ($what) = @_;
	ok( $node->poll_query_until(
			'postgres',
			"SELECT count(*) = 0 FROM idem_etl.jobs WHERE job_name LIKE 'events:%' AND status IN ('queued', 'running')"
		),
		"$what: every job has ended");
	is( $node->safe_psql(
			'postgres',
			"SELECT coalesce(string_agg(job_name || ' ' || status || ' ' || coalesce(last_error, ''), '; '), 'none') FROM idem_etl.jobs WHERE job_name LIKE 'events:%' AND status <> 'succeeded'"
		),
		'none',
		"$what: every job succeeded");
}

# --- submitted twice in one transaction: the same 30 jobs
my ($first, $second) = split /\n/, $node->safe_psql('postgres', "BEGIN;\n$backfill;\n$backfill;\nCOMMIT;");
my @ids = $first =~ /(\d+)/g;
is(scalar @ids, 30, 'a 30-day backfill queues 30 jobs');
is($second, $first, 'submitted again while pending, it returns the same 30 job ids');
is( $node->safe_psql(
		'postgres',
		"SELECT count(*), count(DISTINCT job_name), min(job_name), max(job_name) FROM idem_etl.jobs WHERE job_name LIKE 'events:%'"
	),
	'30|30|events:2026-11-01|events:2026-11-30',
	'named job_name:date, one per day');

my $expected = $cmd =~ s/\{run_date\}/'2026-11-07'/gr;
is( $node->safe_psql(
		'postgres',
		"SELECT command FROM idem_etl.jobs WHERE job_name = 'events:2026-11-07'"),
	$expected,
	'{run_date} is replaced everywhere by the quoted literal of the date');

# --- a third time while the jobs run: pending ones are not queued again
my $third = $node->safe_psql('postgres', $backfill);
is(scalar(() = $third =~ /(\d+)/g), 30, 'a third submission returns 30 ids');

wait_backfill('after three submissions');

is( $node->safe_psql(
		'postgres',
		"SELECT count(*) FROM pg_inherits WHERE inhparent = 'events'::regclass"),
	'30',
	'30 partitions');
is( $node->safe_psql(
		'postgres', q{
	SELECT count(*), min(n), max(n), min(d), max(d)
	  FROM (SELECT d, count(*) AS n FROM events GROUP BY d) x}),
	'30|10|10|2026-11-01|2026-11-30',
	'each day has its 10 rows');
is( $node->safe_psql(
		'postgres', q{
	SELECT count(*), count(DISTINCT partition_value)
	  FROM idem_etl.runs
	 WHERE operation = 'replace_partition' AND target_oid = 'events'::regclass AND NOT skipped}),
	'30|30',
	'the ledger has 30 non-skipped runs, one per day: each partition loaded once');
is( $node->safe_psql(
		'postgres', q{
	SELECT bool_and(p.relname = 'events_' || to_char(r.partition_value::date, 'YYYYMMDD'))
	  FROM idem_etl.runs r JOIN pg_class p ON p.oid = r.partition_table::regclass
	 WHERE r.target_oid = 'events'::regclass AND NOT r.skipped}),
	't',
	'each run loaded the partition of its own day');

# the first attempts started oldest first
is( $node->safe_psql(
		'postgres', q{
	SELECT bool_and(prev IS NULL OR prev <= started_at)
	  FROM (SELECT started_at, lag(started_at) OVER (ORDER BY job_name) AS prev
	          FROM idem_etl.jobs
	         WHERE job_id IN (SELECT min(job_id) FROM idem_etl.jobs
	                           WHERE job_name LIKE 'events:%' GROUP BY job_name)
	           AND attempts = 1) x}),
	't',
	'the jobs started oldest date first');

# --- once more after everything finished: 30 new jobs, all skipped
my $files = $node->safe_psql('postgres',
	"SELECT string_agg(c.relname || '=' || c.relfilenode, ',' ORDER BY c.relname) FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = 'events'::regclass"
);
my $skipped_sql = q{
	SELECT count(*) FROM idem_etl.runs
	 WHERE operation = 'replace_partition' AND target_oid = 'events'::regclass AND skipped};
my $skipped_before = $node->safe_psql('postgres', $skipped_sql);
my $fourth = $node->safe_psql('postgres', $backfill);
my @new = $fourth =~ /(\d+)/g;
is(scalar @new, 30, 'a backfill submitted after the first one ended queues 30 jobs again');
ok(!grep({ my $n = $_; grep { $_ == $n } @ids } @new), 'new jobs, not the old ones');
wait_backfill('after the fourth submission');
is($node->safe_psql('postgres', $skipped_sql) - $skipped_before,
	30, 'the rerun of every day was skipped by its run_key');
is( $node->safe_psql(
		'postgres', q{
	SELECT count(*)
	  FROM idem_etl.runs
	 WHERE operation = 'replace_partition' AND target_oid = 'events'::regclass AND NOT skipped}),
	'30',
	'still 30 non-skipped runs in the ledger');
is( $node->safe_psql(
		'postgres',
		"SELECT string_agg(c.relname || '=' || c.relfilenode, ',' ORDER BY c.relname) FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = 'events'::regclass"
	),
	$files,
	'the 30 partitions were not rewritten');
is($node->safe_psql('postgres', 'SELECT count(*) FROM events'),
	'300', 'still 300 rows');

# --- step
my $weekly = $node->safe_psql(
	'postgres', q{
	CREATE TEMP TABLE weekly AS
	SELECT id FROM etl_backfill('SELECT {run_date}::date', '2026-11-01', '2026-11-30', '7 days', 'weekly') AS id;
	SELECT string_agg(j.job_name, ',' ORDER BY j.job_id)
	  FROM weekly w JOIN idem_etl.jobs j ON j.job_id = w.id});
is( $weekly,
	'weekly:2026-11-01,weekly:2026-11-08,weekly:2026-11-15,weekly:2026-11-22,weekly:2026-11-29',
	'step => 7 days: one job a week, to_value included when reached');
ok( $node->poll_query_until(
		'postgres',
		"SELECT count(*) = 5 FROM idem_etl.jobs WHERE job_name LIKE 'weekly:%' AND status = 'succeeded'"
	),
	'the weekly jobs ran');

# --- without job_name: 'backfill <md5 of the command>:date'; submitted twice
# in one transaction (so both while pending): the same jobs
is( $node->safe_psql(
		'postgres', q{
	BEGIN;
	CREATE TEMP TABLE unnamed AS
	SELECT id FROM etl_backfill('SELECT {run_date}::date + 1', '2026-12-01', '2026-12-02') AS id;
	CREATE TEMP TABLE unnamed2 AS
	SELECT id FROM etl_backfill('SELECT {run_date}::date + 1', '2026-12-01', '2026-12-02') AS id;
	SELECT string_agg(j.job_name, ',' ORDER BY j.job_id)
	           = 'backfill ' || md5('SELECT {run_date}::date + 1') || ':2026-12-01,'
	          || 'backfill ' || md5('SELECT {run_date}::date + 1') || ':2026-12-02'
	  FROM unnamed u JOIN idem_etl.jobs j ON j.job_id = u.id;
	SELECT (SELECT array_agg(id ORDER BY id) FROM unnamed) = (SELECT array_agg(id ORDER BY id) FROM unnamed2);
	COMMIT;
}),
	"t\nt",
	'the default job name is "backfill <md5 of the command>:date", so the same unnamed backfill is not queued twice'
);

no_crash($node, 'no server process crashed');

$node->stop;
done_testing();
