# 070_backfill: etl_backfill queues one job per run date, with {run_date}
# replaced by the quoted literal of the date and job names
# job_name || ':' || date.  A 30-day backfill of etl_replace_partition,
# submitted twice while pending (same job ids), again while it runs, and
# once more after it finished, leaves 30 partitions each loaded once: 30
# non-skipped runs in the ledger, the later reruns skipped by their run_key
# (the partitions keep their files).  The jobs start oldest first; step
# spaces the dates, each from_value + n * step (months from the 31st do not
# drift).  Refused before anything is queued: an infinite bound (22023), a
# step with a time part (22023), more than 10000 dates (54000).
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

# --- months: from_value + n * step, so months from the 31st do not drift
is( $node->safe_psql(
		'postgres', q{
	CREATE TEMP TABLE monthly AS
	SELECT id FROM etl_backfill('SELECT {run_date}::date', '2026-01-31', '2026-05-31', '1 month', 'monthly') AS id;
	SELECT string_agg(j.job_name, ',' ORDER BY j.job_id)
	  FROM monthly m JOIN idem_etl.jobs j ON j.job_id = m.id}),
	'monthly:2026-01-31,monthly:2026-02-28,monthly:2026-03-31,monthly:2026-04-30,monthly:2026-05-31',
	'step => 1 month from the 31st: the 31st or the month\'s last day');

# --- refused before anything is queued, each with its SQLSTATE; a statement
# timeout ends the call if it would run on (as it did with infinity)
sub backfill_fails
{
	my ($args) = @_;
	my ($ret, $out, $err) = $node->psql('postgres',
		"SET statement_timeout = '5s';\n\\set VERBOSITY verbose\nSELECT count(*) FROM etl_backfill('SELECT {run_date}::date', $args, job_name => 'refused')"
	);
	return $ret == 0 ? "no error: $out" : $err;
}
like(backfill_fails(q{'2026-01-01', 'infinity'}),
	qr/ERROR:  22023: to_value must be a finite date/,
	'to_value infinity: 22023, not a call that never ends');
like(backfill_fails(q{'-infinity', '2026-01-01'}),
	qr/ERROR:  22023: from_value must be a finite date/,
	'from_value -infinity: 22023');
like(backfill_fails(q{'2026-01-01', '2026-01-02', '1 hour'}),
	qr/ERROR:  22023: step must be a whole number of days or months/,
	'a step under a day (the same date 24 times): 22023');
like(backfill_fails(q{'2026-01-01', '2026-01-09', '1 day 12 hours'}),
	qr/ERROR:  22023: step must be a whole number of days or months/,
	'a step with a time part (uneven dates): 22023');
like(backfill_fails(q{'2000-01-01', '2030-01-01'}),
	qr/ERROR:  54000: a backfill may queue at most 10000 jobs/,
	'more than 10000 dates: 54000');
is( $node->safe_psql(
		'postgres',
		"SELECT count(*) FROM idem_etl.jobs WHERE job_name LIKE 'refused:%'"),
	'0', 'the refused backfills queued nothing');
is( $node->safe_psql(
		'postgres',
		"SELECT count(*) FROM etl_backfill('SELECT 1', '2000-01-01', '2027-05-18', job_name => 'at_the_limit')"
	),
	'10000',
	'10000 dates are allowed');
$node->safe_psql('postgres',
	"SELECT etl_cancel(job_id) FROM idem_etl.jobs WHERE job_name LIKE 'at_the_limit:%' AND status IN ('queued', 'running')"
);

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
