# 055_jobs_queued_during_visit: a job queued while a dispatcher is visiting
# its database runs, even though the visit's snapshot did not see it.
#
# The dispatcher claims the queued jobs, counts what is left, commits, and
# reports when the database is next due.  A job committed after that count
# used to be forgotten: its note (due now) was overwritten by the report (no
# job left), and it waited for the next unrelated visit (with the default
# job_retention, a week).  The 090 test hit it by chance.
#
# The window is held open deterministically: the dispatcher's commit waits
# for a synchronous standby that does not exist (synchronous_standby_names
# set, the test's own sessions commit with synchronous_commit = local), and
# the second job is queued while it waits (wait_event SyncRep).  Resetting
# synchronous_standby_names releases it.
use strict;
use warnings;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use IdemEtl;

# a commit waits for synchronous standbys only where WAL senders may run
my $node = new_node(
	'queued_during_visit',
	'idem_etl.max_workers' => '4',
	wal_level => 'replica',
	max_wal_senders => '2');
$node->safe_psql('postgres', 'CREATE EXTENSION idem_etl; CREATE TABLE probe (i int)');

my $local = 'SET synchronous_commit = local;';
$node->safe_psql('postgres',
	"ALTER SYSTEM SET synchronous_standby_names = 'nobody'; SELECT pg_reload_conf()");
# The checkpointer applies the setting after the reload: until then commits
# do not wait.  A probe session's commit (of a write) either waits (then it is cancelled,
# which commits it locally) or ends (then it is tried again).
my $waits = 0;
for (1 .. 50)
{
	my $probe = $node->background_psql('postgres', on_error_stop => 0);
	$probe->query_until(qr/go/,
		"SET application_name = 'probe';\n\\echo go\nINSERT INTO probe VALUES (1);\n");
	$node->poll_query_until(
		'postgres', q{
	SELECT wait_event IS NOT DISTINCT FROM 'SyncRep'
	       OR (state = 'idle' AND query LIKE 'INSERT INTO probe%')
	  FROM pg_stat_activity WHERE application_name = 'probe'});
	$waits = $node->safe_psql(
		'postgres', q{
	SELECT pg_cancel_backend(pid) FROM pg_stat_activity
	 WHERE application_name = 'probe' AND wait_event = 'SyncRep'}) eq 't';
	$probe->quit;
	last if $waits;
}
ok($waits, 'commits wait for a standby that does not exist');

my $first = $node->safe_psql('postgres', "$local SELECT etl_submit('SELECT 1')");
ok( $node->poll_query_until(
		'postgres', q{
	SELECT count(*) = 1 FROM pg_stat_activity
	 WHERE backend_type = 'idem_etl dispatcher' AND wait_event = 'SyncRep'}
	),
	'the dispatcher has claimed the first job and waits in its commit');

my $second = $node->safe_psql('postgres', "$local SELECT etl_submit('SELECT 2')");
is( $node->safe_psql(
		'postgres', "SELECT status FROM idem_etl.jobs WHERE job_id = $second"),
	'queued',
	'the second job is queued while the visit is not over');

$node->safe_psql('postgres',
	'ALTER SYSTEM RESET synchronous_standby_names; SELECT pg_reload_conf()');
is(wait_ended($node, $first), 'succeeded', 'the first job ran');
is(wait_ended($node, $second), 'succeeded',
	'the job queued during the visit ran too (its note was not overwritten)');

no_crash($node, 'no process crashed');
$node->stop;
done_testing();
