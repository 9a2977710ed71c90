# 171_pipeline_sequence: issue 35, point 5, with the worker.  A sequence
# pipeline whose command adds each new range of keys into a rollup (an
# increment: a range counted twice or skipped shows in the totals) runs
# every second while pgbench inserters write the source for 60 seconds,
# with transactions of one and of several rows, and some rolled back (keys
# drawn and never used).  At the end the rollup equals a full recount, and
# the ranges follow one another with no gap and no overlap.
use strict;
use warnings;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use IdemEtl;
use PostgreSQL::Test::Utils;

$PostgreSQL::Test::Utils::timeout_default = 180;
my $seconds = 60;

my $node = new_node('pipeline_sequence', 'idem_etl.max_workers' => '3');
$node->safe_psql(
	'postgres', q{
	CREATE EXTENSION idem_etl;
	CREATE TABLE events (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	                     account int NOT NULL, amount int NOT NULL);
	CREATE TABLE rollup (account int PRIMARY KEY, n bigint NOT NULL, total bigint NOT NULL);
	SELECT etl_pipeline_create_sequence('rollup',
	    $$INSERT INTO rollup AS r
	      SELECT account, count(*), sum(amount) FROM events
	       WHERE id BETWEEN {from_id} AND {to_id} GROUP BY account
	      ON CONFLICT (account) DO UPDATE SET n = r.n + EXCLUDED.n, total = r.total + EXCLUDED.total$$,
	    'events', max_batch_size => 2000, every => '1 second');
});

my %scripts = (
	'171_one\@5' => q{
\set a random(1, 50)
\set m random(1, 1000)
INSERT INTO events (account, amount) VALUES (:a, :m);
},
	'171_several\@3' => q{
\set a random(1, 50)
\set m random(1, 1000)
BEGIN;
INSERT INTO events (account, amount) VALUES (:a, :m);
INSERT INTO events (account, amount) SELECT :a, g FROM generate_series(1, 5) g;
COMMIT;
},
	'171_rollback\@1' => q{
\set a random(1, 50)
BEGIN;
INSERT INTO events (account, amount) VALUES (:a, 1), (:a, 2);
ROLLBACK;
});
$node->pgbench(
	"--no-vacuum --client=4 --time=$seconds",
	0,
	[qr{processed: [1-9]}],
	[qr{^$}],
	"pgbench inserts for $seconds seconds",
	\%scripts);

# the pipeline catches up with the last key drawn
ok( $node->poll_query_until(
		'postgres', q{
	SELECT s.last_id >= q.last_value
	  FROM idem_etl.pipelines_status s, events_id_seq q WHERE s.name = 'rollup'}),
	'the pipeline reaches the last key drawn');
is( $node->safe_psql(
		'postgres', q{
	SELECT count(*) FROM (
	  SELECT account, count(*) AS n, sum(amount) AS total FROM events GROUP BY account
	  EXCEPT SELECT account, n, total FROM rollup) d}),
	'0',
	'the rollup equals a full recount: no row skipped or counted twice');
is( $node->safe_psql('postgres', 'SELECT sum(n) = (SELECT count(*) FROM events) FROM rollup'),
	't', 'as many rows counted as there are');
is( $node->safe_psql(
		'postgres', q{
	SELECT bool_and(status = 'succeeded') AND bool_and(from_id = COALESCE(prev + 1, 1))
	       AND bool_and(to_id - from_id < 2000)
	  FROM (SELECT status, from_id, to_id, lag(to_id) OVER (ORDER BY from_id) AS prev
	          FROM idem_etl.pipeline_periods) r}),
	't',
	'the ranges follow one another, none over max_batch_size');
my $ranges = $node->safe_psql('postgres', 'SELECT count(*) FROM idem_etl.pipeline_periods');
cmp_ok($ranges, '>', 10, "ran as the rows came ($ranges ranges)");
no_crash($node, 'no process crashed');

$node->stop;
done_testing();
