# 045_dispatch_state_locked: the dispatcher never waits for one of the
# extension's state tables while it holds another.  A session holds the
# ledger (idem_etl.runs) as DROP EXTENSION does partway through, dropping
# the tables one after another.  The dispatcher that a submitted job calls
# used to lock the queue and replaced_partitions without waiting, then wait
# for the ledger in the janitor's purge: the session's next lock, on
# replaced_partitions, then deadlocked with it (seen once in the
# assert-enabled suite, the DROP EXTENSION of one test after the jobs of
# the one before).  Now it tries the ledger without waiting too, and leaves
# the database for a later visit; the session takes every table, and once
# it lets go the job runs.
use strict;
use warnings;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use IdemEtl;

my $node = new_node('dispatch_state_locked', log_min_messages => 'debug1');
$node->safe_psql('postgres', 'CREATE EXTENSION idem_etl');

my $dropper = $node->background_psql('postgres');
$dropper->query_safe('BEGIN');
$dropper->query_safe('LOCK TABLE idem_etl.runs IN ACCESS EXCLUSIVE MODE');

my $offset = -s $node->logfile;
my $id = $node->safe_psql('postgres', q{SELECT etl_submit('SELECT 1')});
ok( $node->wait_for_log(
		qr/idem_etl dispatcher: the state tables of database \d+ are locked/, $offset),
	'the dispatcher finds the ledger locked and leaves the database for later');

# the session takes the other tables at once: no dispatcher holds them
$dropper->query_safe("SET lock_timeout = '10s'");
$dropper->query_safe(
	'LOCK TABLE idem_etl.replaced_partitions, idem_etl.jobs IN ACCESS EXCLUSIVE MODE');
is( $node->safe_psql(
		'postgres',
		q{SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid)
		   WHERE a.backend_type = 'idem_etl dispatcher' AND NOT l.granted}),
	'0',
	'and no dispatcher waits for a lock');

$dropper->query_safe('ROLLBACK');
$dropper->quit;
is(wait_ended($node, $id), 'succeeded', 'once the session lets go, the job runs');

no_crash($node, 'no process crashed');
done_testing();
