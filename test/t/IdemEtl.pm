# IdemEtl: the set-up and helpers shared by the TAP tests in test/t.
#
# Loaded with
#     use FindBin;
#     use lib $FindBin::RealBin;
#     use IdemEtl;
# so it is found whatever the directory prove runs in (PGXS runs it from the
# top directory with the files given as test/t/NAME.pl).
package IdemEtl;

use strict;
use warnings;
use Exporter 'import';
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

our @EXPORT = qw(new_node wait_ended no_crash wait_advisory);

# Every wait is bounded by this (poll_query_until polls 10 times a second for
# this many seconds): a broken build fails, it does not hang.  A test that
# needs longer sets it again after loading this module.
$PostgreSQL::Test::Utils::timeout_default = 60;

# The settings of every node made by new_node: idem_etl preloaded, so its
# launcher starts, and a job queue quick enough for tests.
my %job_settings = (
	shared_preload_libraries => 'idem_etl',
	'idem_etl.naptime' => '100ms',
	'idem_etl.max_backoff' => '1s');

# new_node(name, setting => value, ...): a new, started node with
# %job_settings and the given settings (which add to or override them).
sub new_node
{
	my ($name, %settings) = @_;
	my %conf = (%job_settings, %settings);
	my $node = PostgreSQL::Test::Cluster->new($name);
	$node->init;
	$node->append_conf('postgresql.conf',
		join('', map { "$_ = '$conf{$_}'\n" } sort keys %conf));
	$node->start;
	return $node;
}

# wait_ended(node, job id[, database]): bounded wait until the job has ended
# (neither queued nor running); returns its status.
sub wait_ended
{
	my ($node, $id, $db) = @_;
	$db //= 'postgres';
	$node->poll_query_until($db,
		"SELECT status NOT IN ('queued', 'running') FROM idem_etl.jobs WHERE job_id = $id"
	) or diag "job $id in $db did not end in time";
	return $node->safe_psql($db,
		"SELECT status FROM idem_etl.jobs WHERE job_id = $id");
}

# wait_advisory(node, key): bounded wait until a session (a job, say) waits
# for the advisory lock key that the test holds (pg_advisory_lock(key));
# true when it does.  A test makes a job wait there to act while it runs.
sub wait_advisory
{
	my ($node, $key) = @_;
	return $node->poll_query_until('postgres',
		"SELECT count(*) > 0 FROM pg_locks WHERE locktype = 'advisory' AND objid = $key AND NOT granted"
	);
}

# no_crash(node, test name[, log offset]): a test that the server log (from
# the offset on) says no process was terminated by a signal; shows the lines
# that do.
sub no_crash
{
	my ($node, $name, $offset) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	return 1
	  if ok(!$node->log_contains(qr/was terminated by signal/, $offset), $name);
	diag join("\n",
		grep { /terminated by signal/ }
		  split /\n/, slurp_file($node->logfile, $offset));
	return 0;
}

1;
