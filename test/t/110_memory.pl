# 110_memory: nothing grows without bound.
#
# - 2,000 calls of each function in one backend, each call its own
#   transaction (psql's autocommit), after a warm-up of 200: the backend's
#   private memory (RssAnon of /proc/<pid>/status) grows by less than 2 MB.
#   etl_upsert_batch, etl_replace_partition (partitioned), etl_restore_partition,
#   and etl_submit + etl_wait + etl_cancel.
# - 1,000 jobs run by the background worker: the launcher, the one process
#   that stays (dispatchers and job workers exit after each visit or job),
#   grows by less than 2 MB.
# The growth is printed (note lines) whether or not it passes.
use strict;
use warnings;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use IdemEtl;

$PostgreSQL::Test::Utils::timeout_default = 240;
my $node = new_node('memory', 'idem_etl.max_workers' => '2');
my $limit_kb = 2048;

$node->safe_psql(
	'postgres', q{
	CREATE EXTENSION idem_etl;
	CREATE FUNCTION rss_anon_kb(pid int) RETURNS int LANGUAGE sql AS $$
	    SELECT (regexp_match(pg_read_file('/proc/' || pid || '/status'), 'RssAnon:\s+(\d+)'))[1]::int
	$$;
	CREATE TABLE u (id int PRIMARY KEY, v text);
	CREATE TABLE p (d date NOT NULL, id int NOT NULL, v text, PRIMARY KEY (d, id)) PARTITION BY RANGE (d);
	SELECT format('CREATE TABLE %I PARTITION OF p FOR VALUES FROM (%L) TO (%L)',
	              'p_' || to_char(d, 'YYYYMMDD'), d::date, d::date + 1)
	  FROM generate_series('2026-11-01'::date, '2026-11-09', '1 day') d \gexec
	CREATE TABLE r (d date NOT NULL, id int NOT NULL, v text, PRIMARY KEY (d, id)) PARTITION BY RANGE (d);
	CREATE TABLE r_1 PARTITION OF r FOR VALUES FROM ('2026-11-01') TO ('2026-11-02');
	SELECT rows_loaded FROM etl_replace_partition('r', '2026-11-01',
	    $$SELECT '2026-11-01'::date AS d, 1 AS id, 'a' AS v$$, keep_replaced => '1 day');
});

# growth(call): RssAnon after 2,000 calls minus after 200, in one backend
sub growth
{
	my ($call) = @_;
	my $loop = sub {
		my ($n) = @_;
		return qq{SELECT format(\$f\$$call\$f\$, i) FROM generate_series(1, $n) i \\gexec\n};
	};
	my $out = $node->safe_psql('postgres',
		  "\\o /dev/null\n"
		  . $loop->(200)
		  . "\\o\nSELECT rss_anon_kb(pg_backend_pid()) AS before \\gset\n\\o /dev/null\n"
		  . $loop->(2000)
		  . "\\o\nSELECT rss_anon_kb(pg_backend_pid()) - :before;\n");
	return $out;
}

my %calls = (
	'etl_upsert_batch' =>
	  q{SELECT * FROM etl_upsert_batch('u', 'SELECT %1$s %% 100 AS id, ''v%1$s'' AS v')},
	# nothing kept: 2,000 kept versions would be 2,000 new tables, which the
	# backend's catalog caches rightly remember
	'etl_replace_partition' =>
	  q{SELECT * FROM etl_replace_partition('p', '2026-11-0' || (%1$s %% 9 + 1), 'SELECT ''2026-11-0' || (%1$s %% 9 + 1) || '''::date AS d, %1$s AS id, ''v'' AS v', keep_replaced => '0')},
	'etl_restore_partition' =>
	  q{SELECT etl_restore_partition('r', '2026-11-01') /* %1$s */},
	'etl_submit, etl_wait, etl_cancel' =>
	  q{SELECT etl_wait(j, '0 s'), etl_cancel(j) FROM etl_submit('SELECT %1$s', run_after => now() + interval '1 day') j},
);
for my $name (sort keys %calls)
{
	my $kb = growth($calls{$name});
	note "$name: 2,000 calls grew the backend by $kb kB";
	cmp_ok($kb, '<', $limit_kb, "$name: 2,000 calls grow the backend by less than 2 MB ($kb kB)");
}

# --- the launcher over 1,000 jobs
sub worker_rss
{
	return $node->safe_psql('postgres', q{
		SELECT string_agg(backend_type || '=' || rss_anon_kb(pid), ',' ORDER BY backend_type)
		  FROM pg_stat_activity WHERE backend_type = 'idem_etl launcher'});
}
sub run_jobs
{
	my ($n) = @_;
	$node->safe_psql('postgres', "SELECT etl_submit('SELECT ' || i) FROM generate_series(1, $n) i");
	$node->poll_query_until('postgres',
		q{SELECT count(*) = 0 FROM idem_etl.jobs WHERE status IN ('queued', 'running')})
	  or diag 'jobs did not finish in time';
}
run_jobs(100);    # warm-up
my %before = map { split /=/ } split /,/, worker_rss();
run_jobs(1000);
my %after = map { split /=/ } split /,/, worker_rss();
is($node->safe_psql('postgres', q{SELECT count(*) FROM idem_etl.jobs WHERE status = 'succeeded'}),
	'1100', 'every job succeeded');
for my $type (sort keys %before)
{
	my $kb = $after{$type} - $before{$type};
	note "$type: 1,000 jobs grew it by $kb kB";
	cmp_ok($kb, '<', $limit_kb, "$type: 1,000 jobs grow it by less than 2 MB ($kb kB)");
}

no_crash($node, 'no process crashed');
done_testing();
