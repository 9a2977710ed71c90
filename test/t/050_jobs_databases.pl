# 050_jobs_databases: the launcher finds by itself every database where the
# extension is installed, including one created and given the extension
# after the server started (no restart, no setting), and runs each
# database's jobs there.  A database without the extension gets no
# scheduler; one that drops the extension is left alone (so it can then be
# dropped).
use strict;
use warnings;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use IdemEtl;

my $node = new_node('jobs_databases');

# the databases where a scheduler runs now, as 'db1,db2'
sub schedulers_sql
{
	return "SELECT coalesce(string_agg(datname, ',' ORDER BY datname), '') FROM pg_stat_activity WHERE backend_type = 'idem_etl scheduler'";
}

# the first database: the extension in the default schema
$node->safe_psql('postgres', q{
	CREATE EXTENSION idem_etl;
	CREATE TABLE ran (db text, who text);
});
ok( $node->poll_query_until(
		'postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'idem_etl scheduler' AND datname = 'postgres'"
	),
	'a scheduler runs in postgres');

# databases created after the start: db2 gets the extension (in its own
# schema), db3 does not
$node->safe_psql('postgres', 'CREATE DATABASE db2');
$node->safe_psql('postgres', 'CREATE DATABASE db3');
$node->safe_psql('db2', q{
	CREATE SCHEMA etl;
	CREATE EXTENSION idem_etl SCHEMA etl;
	CREATE TABLE ran (db text, who text);
});
$node->safe_psql('db3', 'CREATE TABLE ran (db text, who text)');

ok( $node->poll_query_until(
		'postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'idem_etl scheduler' AND datname = 'db2'"
	),
	'a database given the extension after the start is picked up without a restart');

my $cmd = q{$$INSERT INTO ran SELECT current_database(), current_user$$};
my $id1 = $node->safe_psql('postgres', "SELECT etl_submit($cmd)");
my $id2 = $node->safe_psql('db2', "SELECT etl.etl_submit($cmd)");
is(wait_ended($node, $id1, 'postgres'), 'succeeded', 'the job in postgres ran');
is(wait_ended($node, $id2, 'db2'), 'succeeded', 'the job in db2 ran');
is($node->safe_psql('postgres', 'SELECT db FROM ran'),
	'postgres', 'in its own database');
is($node->safe_psql('db2', 'SELECT db FROM ran'),
	'db2', 'each in its own database');
is($node->safe_psql('db2', "SELECT etl.etl_wait($id2, '1 s')"),
	'succeeded', 'etl_wait works with the extension in another schema');

# several jobs in both databases at once
my @p = map { $node->safe_psql('postgres', "SELECT etl_submit($cmd)") } 1 .. 3;
my @d = map { $node->safe_psql('db2', "SELECT etl.etl_submit($cmd)") } 1 .. 3;
is(join(',', map { wait_ended($node, $_, 'postgres') } @p),
	'succeeded,succeeded,succeeded', 'three more jobs ran in postgres');
is(join(',', map { wait_ended($node, $_, 'db2') } @d),
	'succeeded,succeeded,succeeded', 'and three in db2');
is($node->safe_psql('postgres', 'SELECT count(*) FROM ran'), '4', 'four rows in postgres');
is($node->safe_psql('db2', 'SELECT count(*) FROM ran'), '4', 'four rows in db2');

# (the launcher may look into db3 now and then, but nothing stays there)
ok( $node->poll_query_until('postgres', "SELECT (" . schedulers_sql() . ") = 'db2,postgres'"),
	'no scheduler stays in db3, which lacks the extension');

# db3 installs the extension later as well
$node->safe_psql('db3', 'CREATE EXTENSION idem_etl');
my $id3 = $node->safe_psql('db3', "SELECT etl_submit($cmd)");
is(wait_ended($node, $id3, 'db3'), 'succeeded', 'a third database installing the extension gets its job run');
is($node->safe_psql('db3', 'SELECT db FROM ran'), 'db3', 'in db3');

# a database that drops the extension is left alone
$node->safe_psql('db2', 'DROP EXTENSION idem_etl');
ok( $node->poll_query_until(
		'postgres',
		"SELECT count(*) = 0 FROM pg_stat_activity WHERE backend_type LIKE 'idem_etl%' AND datname = 'db2'"
	),
	'after DROP EXTENSION, no idem_etl process stays connected to db2');
my ($ret, $out, $err) = $node->psql('postgres', 'DROP DATABASE db2');
is($ret, 0, 'so db2 can be dropped') or diag $err;
ok( $node->poll_query_until('postgres', "SELECT (" . schedulers_sql() . ") = 'db3,postgres'"),
	'the other databases keep their schedulers');

# a plain DROP DATABASE of a database whose scheduler is running: the
# scheduler is asked to leave first
ok( $node->poll_query_until(
		'postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'idem_etl scheduler' AND datname = 'db3'"
	),
	'db3 has its scheduler');
($ret, $out, $err) = $node->psql('postgres', 'DROP DATABASE db3');
is($ret, 0, 'a database with a running scheduler can be dropped without FORCE') or diag $err;
ok( $node->poll_query_until('postgres', "SELECT (" . schedulers_sql() . ") = 'postgres'"),
	'the remaining database keeps its scheduler');

# the remaining database still runs jobs
$id1 = $node->safe_psql('postgres', "SELECT etl_submit($cmd)");
is(wait_ended($node, $id1, 'postgres'), 'succeeded', 'postgres still runs jobs');

no_crash($node, 'no server process crashed');

$node->stop;
done_testing();
