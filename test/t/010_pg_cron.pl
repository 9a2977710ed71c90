# etl_replace_partition, point 12: used from pg_cron.
#
# A cluster with pg_cron and idem_etl preloaded schedules two loads every
# minute: one replacing 2026-11-28 of events without a run_key, one
# replacing 2026-11-29 of another table under a run_key.  (Two jobs on one
# table fire at the same moment; replace_serialize.spec covers that.)  After each has fired at least twice, the
# partitions hold exactly one run's rows (no duplicates, same digest as the
# source), the other partitions are untouched, and the ledger shows every
# run: the plain job applied each time (rows_replaced = the previous run's
# rows), the keyed job applied once and skipped after.
#
# pg_cron 1.4 (Debian 12) schedules by the minute, so this takes up to about
# two minutes; the wait is bounded.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('cron');
# pg_cron is packaged for 15, 17 and 18, not for 19 (none anywhere yet)
plan skip_all => 'pg_cron is not installed for PostgreSQL ' . $node->pg_version
  unless -e $node->config_data('--pkglibdir') . '/pg_cron.so';
$node->init;
# pg_cron connects to the server like a client: through the test cluster's
# Unix socket directory
my $socket_dir = $node->host;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'pg_cron,idem_etl'
cron.database_name = 'postgres'
cron.host = '$socket_dir'
});
$node->start;

$node->safe_psql('postgres', q{
    CREATE EXTENSION pg_cron;
    CREATE EXTENSION idem_etl;

    CREATE TABLE events (event_date date NOT NULL, id bigint NOT NULL, payload text,
                         PRIMARY KEY (event_date, id)) PARTITION BY RANGE (event_date);
    CREATE TABLE events_20261127 PARTITION OF events FOR VALUES FROM ('2026-11-27') TO ('2026-11-28');
    CREATE TABLE events_20261128 PARTITION OF events FOR VALUES FROM ('2026-11-28') TO ('2026-11-29');
    CREATE TABLE events_20261129 PARTITION OF events FOR VALUES FROM ('2026-11-29') TO ('2026-11-30');
    INSERT INTO events SELECT '2026-11-27', g, 'other day' FROM generate_series(1, 100) g;
    INSERT INTO events SELECT '2026-11-28', g, 'before the first run' FROM generate_series(1, 250) g;

    CREATE TABLE keyed (LIKE events) PARTITION BY RANGE (event_date);
    CREATE TABLE keyed_20261129 PARTITION OF keyed FOR VALUES FROM ('2026-11-29') TO ('2026-11-30');

    CREATE TABLE events_src AS
    SELECT d::date AS event_date, g::bigint AS id, md5(d::date || ':' || g) AS payload
      FROM generate_series('2026-11-28'::date, '2026-11-29', '1 day') d, generate_series(1, 1000) g;
});

my $other_day_before = $node->safe_psql('postgres',
    q{SELECT pg_relation_filenode('events_20261127') || ' ' || md5(string_agg(e::text, ',' ORDER BY id))
        FROM events_20261127 e});

$node->safe_psql('postgres', q{
    SELECT cron.schedule('replace 2026-11-28', '* * * * *',
        $$SELECT * FROM etl_replace_partition('public.events', '2026-11-28',
              'SELECT * FROM public.events_src WHERE event_date = ''2026-11-28''')$$);
    SELECT cron.schedule('replace 2026-11-29 keyed', '* * * * *',
        $$SELECT * FROM etl_replace_partition('public.keyed', '2026-11-29',
              'SELECT * FROM public.events_src WHERE event_date = ''2026-11-29''',
              run_key => 'nightly 2026-11-29')$$);
});

# wait until each job has succeeded twice (bounded: 200 s); stop at a failure
my $fired = q{
    SELECT count(*) FILTER (WHERE j.jobname = 'replace 2026-11-28') >= 2
       AND count(*) FILTER (WHERE j.jobname = 'replace 2026-11-29 keyed') >= 2
      FROM cron.job_run_details d JOIN cron.job j USING (jobid)
     WHERE d.status = 'succeeded'};
my $failures = q{
    SELECT string_agg(j.jobname || ': ' || coalesce(d.return_message, ''), '; ')
      FROM cron.job_run_details d JOIN cron.job j USING (jobid)
     WHERE d.status = 'failed'};
my $deadline = time() + 200;
my ($done, $failed) = ('f', '');
while (time() < $deadline)
{
    $done = $node->safe_psql('postgres', $fired);
    $failed = $node->safe_psql('postgres', $failures);
    last if $done eq 't' || $failed ne '';
    sleep 1;
}
is($failed, '', 'no scheduled run failed');
is($done, 't', 'both jobs fired at least twice within 200 s');

# no more runs; wait for any run still going to end
$node->safe_psql('postgres', q{
    SELECT cron.unschedule('replace 2026-11-28');
    SELECT cron.unschedule('replace 2026-11-29 keyed');
});
ok($node->poll_query_until('postgres',
        q{SELECT count(*) = 0 FROM cron.job_run_details WHERE status IN ('starting', 'connecting', 'sending', 'running')}),
    'no run left in progress');

# each day holds exactly one run's rows
for my $target_day (['events', '2026-11-28'], ['keyed', '2026-11-29'])
{
    my ($target, $day) = @$target_day;
    my ($count, $digest) = split /\|/, $node->safe_psql('postgres', qq{
        SELECT count(*), md5(string_agg(e::text, ',' ORDER BY id))
          FROM $target e WHERE event_date = '$day'});
    my ($src_count, $src_digest) = split /\|/, $node->safe_psql('postgres', qq{
        SELECT count(*), md5(string_agg(s::text, ',' ORDER BY id))
          FROM events_src s WHERE event_date = '$day'});
    is($count, 1000, "$target $day holds 1000 rows");
    is($count, $src_count, "$target $day holds as many rows as one run loads");
    is($digest, $src_digest, "$target $day holds exactly the rows of one run");
}
is($node->safe_psql('postgres', q{SELECT count(*) FROM events WHERE payload = 'before the first run'}),
    '0', 'the rows from before the first run were replaced');
is($node->safe_psql('postgres',
        q{SELECT pg_relation_filenode('events_20261127') || ' ' || md5(string_agg(e::text, ',' ORDER BY id))
            FROM events_20261127 e}),
    $other_day_before, 'the other day was not touched');
is($node->safe_psql('postgres',
        q{SELECT string_agg(c.relname, ',' ORDER BY c.relname) FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
           WHERE i.inhparent = 'events'::regclass}),
    'events_20261127,events_20261128,events_20261129', 'the same partitions, by name');

# the ledger: every run of the plain job applied, the first replacing the
# 250 old rows and every later one the 1000 rows of the run before
my $plain = $node->safe_psql('postgres', q{
    SELECT count(*), bool_and(NOT skipped), bool_and(rows_loaded = 1000),
           (array_agg(rows_replaced ORDER BY run_id))[1],
           bool_and(rows_replaced = 1000) FILTER (WHERE run_id > (SELECT min(run_id) FROM idem_etl.runs r2
                                                                   WHERE r2.run_key IS NULL))
      FROM idem_etl.runs r
     WHERE operation = 'replace_partition' AND run_key IS NULL});
my ($runs, $all_applied, $all_loaded, $first_replaced, $later_replaced) = split /\|/, $plain;
cmp_ok($runs, '>=', 2, 'the ledger shows at least two runs of the plain job');
is($all_applied, 't', 'every run of the plain job was applied');
is($all_loaded, 't', 'every run of the plain job loaded 1000 rows');
is($first_replaced, '250', 'the first run replaced the 250 old rows');
is($later_replaced, 't', 'every later run replaced the 1000 rows of the run before');

# the keyed job: applied once, then skipped
my $keyed = $node->safe_psql('postgres', q{
    SELECT count(*), (array_agg(skipped ORDER BY run_id))[1],
           bool_and(skipped) FILTER (WHERE run_id > (SELECT min(run_id) FROM idem_etl.runs r2
                                                      WHERE r2.run_key = r.run_key))
      FROM idem_etl.runs r WHERE run_key = 'nightly 2026-11-29'});
my ($keyed_runs, $first_skipped, $later_skipped) = split /\|/, $keyed;
cmp_ok($keyed_runs, '>=', 2, 'the ledger shows at least two runs of the keyed job');
is($first_skipped, 'f', 'the first keyed run was applied');
is($later_skipped, 't', 'every later keyed run was skipped');

# every run's ledger row matches a succeeded pg_cron run
cmp_ok($node->safe_psql('postgres',
        q{SELECT count(*) FROM cron.job_run_details WHERE status = 'succeeded'}),
    '==', $runs + $keyed_runs, 'one ledger row per succeeded scheduled run');

$node->stop;
done_testing();
