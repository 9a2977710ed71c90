# 044_dispatch_db_lock: a database owner cannot stall job dispatch by
# holding its database's lock.  The owner (with CREATEDB) renames its
# database in a transaction it leaves open, which holds the lock that every
# new connection to that database waits for.  A dispatcher visiting that
# database gives up after its lock_timeout (and the launcher tries it again
# later) instead of waiting: a superuser's job in another database runs.
# Once the owner rolls back, the owner's database is served again.
use strict;
use warnings;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use IdemEtl;

my $node = new_node('dispatch_db_lock');

$node->safe_psql(
	'postgres', q{
	CREATE EXTENSION idem_etl;
	CREATE ROLE owner LOGIN CREATEDB;
	CREATE DATABASE d5 OWNER owner;
});
$node->safe_psql('d5', 'CREATE EXTENSION idem_etl');

# a job in d5, due in a few seconds (the rename must begin before it is due)
my $late = $node->safe_psql('d5',
	q{SELECT etl_submit('SELECT 1', run_after => now() + interval '3 s')});

my $offset = -s $node->logfile;
my $owner = $node->background_psql('postgres',
	connstr => $node->connstr('postgres') . ' user=owner');
$owner->query_safe('BEGIN');
$owner->query_safe('ALTER DATABASE d5 RENAME TO d5_renamed');

# once d5's job is due, a dispatcher tries to connect to d5, and gives up
ok($node->wait_for_log(qr/ERROR:  canceling statement due to lock timeout/, $offset),
	'a dispatcher visiting d5 gives up waiting for the database\'s lock');
my $id = $node->safe_psql('postgres', q{SELECT etl_submit('SELECT 1')});
is($node->safe_psql('postgres', "SELECT etl_wait($id, '30 s')"),
	'succeeded', 'a superuser\'s job in another database runs all the same');

$owner->query_safe('ROLLBACK');
is(wait_ended($node, $late, 'd5'), 'succeeded', 'after the rollback, d5\'s job runs');

$owner->quit;
no_crash($node, 'no server process crashed');
$node->stop;
done_testing();
