# 151_worker_status: idem_etl.worker_status tells the truth (issue 30,
# point 6).
#
# - A database without the extension is not listed: the launcher visits
#   every database once at start, and forgets those where the dispatcher
#   finds no idem_etl.
# - "max_workers reached" is said while, and only while, idem_etl.max_workers
#   job workers run.  With max_workers = 2, two jobs are held busy on
#   advisory locks and a third, in another database d5, waits: the reason is
#   max_workers.  Then the owner of d5 holds d5's lock (a RENAME in an open
#   transaction) so that visits of d5 fail, and one of the two jobs ends:
#   one of two workers is busy, and the reason must say that the visit
#   failed, not max_workers (the old code kept the reason computed when both
#   were busy until a visit reported, which never came).
# Every wait is bounded; no sleep is used to synchronize.
use strict;
use warnings;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use IdemEtl;

my $node = new_node('worker_status', 'idem_etl.max_workers' => '2');
$node->safe_psql('postgres', q{
	CREATE EXTENSION idem_etl;
	CREATE ROLE owner LOGIN CREATEDB;
	CREATE DATABASE d5 OWNER owner;
	CREATE DATABASE noext;
});
$node->safe_psql('d5', 'CREATE EXTENSION idem_etl');

# the launcher visits every database at start: noext too
$node->restart;
ok( $node->poll_query_until('postgres',
		q{SELECT count(*) = 0 FROM idem_etl.worker_status
		   WHERE database = 'noext' AND next_housekeeping IS NOT NULL}),
	'the launcher has visited noext');
is($node->safe_psql('postgres',
		q{SELECT count(*) FROM idem_etl.worker_status WHERE database = 'noext'}),
	'0', 'a database without the extension is not listed');
is($node->safe_psql('postgres',
		q{SELECT string_agg(database, ',' ORDER BY database) FROM idem_etl.worker_status}),
	'd5,postgres', 'the databases with the extension are');

# both workers busy, a third job due in d5
my $holder = $node->background_psql('postgres');
$holder->query_safe('SELECT pg_advisory_lock(1), pg_advisory_lock(2)');
my $j1 = $node->safe_psql('postgres', q{SELECT etl_submit('SELECT pg_advisory_xact_lock(1)')});
my $j2 = $node->safe_psql('postgres', q{SELECT etl_submit('SELECT pg_advisory_xact_lock(2)')});
ok(wait_advisory($node, 1) && wait_advisory($node, 2), 'two jobs run, held on advisory locks');
my $j3 = $node->safe_psql('d5', q{SELECT etl_submit('SELECT 3')});
my $status = q{SELECT running || ' ' || coalesce(waiting_reason, '-') FROM idem_etl.worker_status WHERE database = };
ok( $node->poll_query_until('postgres', $status . q{'d5'},
		'0 max_workers reached (idem_etl.max_workers = 2)'),
	'with two of two workers busy, d5\'s job waits for max_workers');
is($node->safe_psql('postgres', $status . q{'postgres'}),
	'2 -', 'postgres runs two jobs and waits for nothing');

# d5 cannot be visited: its owner holds its lock
my $owner = $node->background_psql('postgres',
	connstr => $node->connstr('postgres') . ' user=owner');
$owner->query_safe('BEGIN');
$owner->query_safe('ALTER DATABASE d5 RENAME TO d5_renamed');

# one job ends: one of two workers is busy; a visit of d5 fails, and the
# launcher has taken note of it once a second one failed too
$holder->query_safe('SELECT pg_advisory_unlock(2)');
is(wait_ended($node, $j2), 'succeeded', 'one job ended');
my $offset = -s $node->logfile;
$offset = $node->wait_for_log(qr/ERROR:  canceling statement due to lock timeout/, $offset);
$node->wait_for_log(qr/ERROR:  canceling statement due to lock timeout/, $offset);
is($node->safe_psql('postgres', $status . q{'postgres'}), '1 -', 'one worker is busy');
is($node->safe_psql('postgres', $status . q{'d5'}),
	'0 the last visit of the database failed (see the server log); trying again',
	'd5\'s job waits because its visits fail, not for max_workers');

# d5 served again
$owner->query_safe('ROLLBACK');
is(wait_ended($node, $j3, 'd5'), 'succeeded', 'after the rollback, d5\'s job runs');
ok($node->poll_query_until('postgres', $status . q{'d5'}, '0 -'),
	'and d5 waits for nothing');

$holder->query_safe('SELECT pg_advisory_unlock(1)');
is(wait_ended($node, $j1), 'succeeded', 'the first job ends');
$holder->quit;
$owner->quit;
no_crash($node, 'no server process crashed');
$node->stop;
done_testing();
