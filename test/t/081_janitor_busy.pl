# 081_janitor_busy: a kept partition that somebody reads when its time has
# passed does not hold up the janitor, nor job dispatch.  The owner of a
# replaced partition reads its kept version in a transaction left open: the
# janitor does not wait for the table's lock, it tries again later
# (keep_until is moved on), and a superuser's job in another database runs
# meanwhile.  Once the reader commits, a later pass drops the kept table.
use strict;
use warnings;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use IdemEtl;

my $node = new_node('janitor_busy');

$node->safe_psql(
	'postgres', q{
	CREATE EXTENSION idem_etl;
	CREATE ROLE etl LOGIN;
	GRANT CREATE ON SCHEMA public TO etl;
	CREATE DATABASE d2;
});
$node->safe_psql('d2', 'CREATE EXTENSION idem_etl');
my $as_etl = $node->connstr('postgres') . ' user=etl';
$node->safe_psql(
	'postgres', q{
	CREATE TABLE r (d date NOT NULL, id int NOT NULL, v int) PARTITION BY RANGE (d);
	CREATE TABLE r_20261101 PARTITION OF r FOR VALUES FROM ('2026-11-01') TO ('2026-11-02');
	INSERT INTO r VALUES ('2026-11-01', 1, 1);
	SELECT rows_loaded FROM etl_replace_partition('r', '2026-11-01',
	    $$SELECT '2026-11-01'::date AS d, 2 AS id, 2 AS v$$, keep_replaced => '1 second');
}, connstr => $as_etl);
my $kept = $node->safe_psql('postgres', 'SELECT kept_table FROM idem_etl.replaced_partitions');
like($kept, qr/^public\.idem_etl_kept_\d+$/, 'the replaced partition is kept');

# its owner reads it, in a transaction left open past keep_until
my $reader = $node->background_psql('postgres', connstr => $as_etl);
$reader->query_safe('BEGIN');
is($reader->query_safe("SELECT count(*) FROM $kept"), '1', 'its owner reads the kept table, and stays in the transaction');

ok( $node->poll_query_until(
		'postgres',
		"SELECT keep_until >= replaced_at + interval '2 s' FROM idem_etl.replaced_partitions"),
	'the janitor found the kept table in use and moved keep_until on, without waiting');
is( $node->safe_psql(
		'postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'idem_etl dispatcher' AND wait_event_type = 'Lock'"
	),
	'0',
	'no dispatcher waits for a lock');
my $id = $node->safe_psql('d2', q{SELECT etl_submit('SELECT 1')});
is($node->safe_psql('d2', "SELECT etl_wait($id, '30 s')"),
	'succeeded', 'a superuser\'s job in another database runs meanwhile');
is($node->safe_psql('postgres', "SELECT to_regclass('$kept') IS NOT NULL"),
	't', 'the kept table is still there');

$reader->query_safe('COMMIT');
ok( $node->poll_query_until(
		'postgres',
		"SELECT count(*) = 0 FROM idem_etl.replaced_partitions"),
	'once the reader has committed, a later pass drops it');
is($node->safe_psql('postgres', "SELECT to_regclass('$kept') IS NULL"),
	't', 'the kept table is gone');
ok(!$node->log_contains(qr/could not drop kept partition/),
	'a kept table in use is not a failure: no WARNING');

$reader->quit;
no_crash($node, 'no server process crashed');
$node->stop;
done_testing();
