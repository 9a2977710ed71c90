# 050_jobs_databases: jobs run in every database where the extension is
# installed, including one created and given the extension after the server
# started (no restart, no setting: its first etl_submit tells the launcher),
# each in its own database.  With nothing queued, no idem_etl process stays
# connected to any database.  A database that drops the extension, or is
# dropped (even while one of its jobs runs), is left alone.
use strict;
use warnings;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use IdemEtl;

my $node = new_node('jobs_databases');

# the databases idem_etl's processes are connected to now, as 'db1,db2'
sub connected_sql
{
	return "SELECT coalesce(string_agg(DISTINCT datname, ',' ORDER BY datname), '') FROM pg_stat_activity WHERE backend_type LIKE 'idem_etl%' AND datname IS NOT NULL";
}

# the first database: the extension in the default schema
$node->safe_psql('postgres', q{
	CREATE EXTENSION idem_etl;
	CREATE TABLE ran (db text, who text);
});

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

# with nothing queued, nothing stays connected anywhere
ok( $node->poll_query_until('postgres', "SELECT (" . connected_sql() . ") = ''"),
	'with nothing queued, no idem_etl process is connected to any database');

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

# a plain DROP DATABASE of a database where a job is running: the job's
# worker is asked to leave first
$node->safe_psql('db3', q{SELECT etl_submit('SELECT pg_sleep(300)')});
ok( $node->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'idem_etl job' AND datname = 'db3'"),
	'a job runs in db3');
($ret, $out, $err) = $node->psql('postgres', 'DROP DATABASE db3');
is($ret, 0, 'a database with a running job can be dropped without FORCE') or diag $err;
ok( $node->poll_query_until('postgres', "SELECT (" . connected_sql() . ") = ''"),
	'nothing stays connected');
ok( $node->poll_query_until('postgres',
		"SELECT count(*) = 0 FROM idem_etl.worker_status WHERE database NOT IN ('postgres')"),
	'the launcher forgets the dropped databases');

# the remaining database still runs jobs
$id1 = $node->safe_psql('postgres', "SELECT etl_submit($cmd)");
is(wait_ended($node, $id1, 'postgres'), 'succeeded', 'postgres still runs jobs');

no_crash($node, 'no server process crashed');

$node->stop;
done_testing();
