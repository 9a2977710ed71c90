# IdemCitus: a Citus cluster for the tests in test/citus: a coordinator and
# two workers, each a throwaway PostgreSQL::Test::Cluster node listening on
# 127.0.0.1, with citus and idem_etl preloaded (in that order: Citus refuses
# to start after another library) and both extensions created in the
# database "postgres".  Run by test/citus/run (`make test-citus`), which
# skips the suite when Citus is not installed for the PostgreSQL under test.
#
#     use FindBin;
#     use lib $FindBin::RealBin;
#     use IdemCitus;
#     my ($coord, @workers) = citus_cluster();
package IdemCitus;

use strict;
use warnings;
use Exporter 'import';
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

our @EXPORT = qw(citus_cluster citus_node sqlstate_of on_workers stage_tables_left);

# Every wait is bounded (poll_query_until polls for this many seconds).
$PostgreSQL::Test::Utils::timeout_default = 60;

# citus_node(name, setting => value, ...): a started node with Citus and
# idem_etl preloaded, listening on 127.0.0.1 as well as on its socket.
sub citus_node
{
	my ($name, %settings) = @_;
	my %conf = (
		shared_preload_libraries => 'citus,idem_etl',
		listen_addresses => '127.0.0.1',
		max_worker_processes => '24',
		max_prepared_transactions => '100',
		'citus.shard_count' => '4',
		'idem_etl.naptime' => '100ms',
		# the tests look for shards in pg_class (Citus hides them otherwise)
		'citus.show_shards_for_app_name_prefixes' => '*',
		%settings);
	my $node = PostgreSQL::Test::Cluster->new($name);
	$node->init;
	$node->append_conf('postgresql.conf',
		join('', map { "$_ = '$conf{$_}'\n" } sort keys %conf));
	$node->start;
	$node->safe_psql('postgres', 'CREATE EXTENSION citus');
	return $node;
}

# citus_cluster(): the coordinator and two workers; idem_etl is created on
# the coordinator once the workers are in, and Citus creates it on them.
sub citus_cluster
{
	my %settings = @_;
	my $coord = citus_node('coordinator', %settings);
	my @workers = map { citus_node("worker$_", %settings) } (1, 2);
	$coord->safe_psql('postgres',
		"SELECT pg_catalog.citus_set_coordinator_host('127.0.0.1', " . $coord->port . ')');
	for my $w (@workers)
	{
		$coord->safe_psql('postgres',
			"SELECT pg_catalog.citus_add_node('127.0.0.1', " . $w->port . ')');
	}
	$coord->safe_psql('postgres', 'CREATE EXTENSION idem_etl');
	for my $w (@workers)
	{
		is($w->safe_psql('postgres',
				"SELECT count(*) FROM pg_extension WHERE extname = 'idem_etl'"),
			'1', $w->name . ': idem_etl created by Citus');
	}
	return ($coord, @workers);
}

# sqlstate_of(node, sql): the SQLSTATE the statement fails with ('' when
# it succeeds), and its message lines, for tests of errors.
sub sqlstate_of
{
	my ($node, $sql) = @_;
	my ($stdout, $stderr);
	$node->psql('postgres', $sql,
		stdout => \$stdout, stderr => \$stderr,
		extra_params => [ '-v', 'VERBOSITY=verbose' ]);
	my ($state) = $stderr =~ /ERROR:\s+([0-9A-Z]{5}):/;
	return wantarray ? ($state // '', $stderr) : ($state // '');
}

# on_workers(workers, sql): the result of sql on each worker, joined by "|"
# (e.g. the sum of a count over the shards a worker holds).
sub on_workers
{
	my ($workers, $sql) = @_;
	return join('|', map { $_->safe_psql('postgres', $sql) } @$workers);
}

# stage_tables_left(coordinator, workers): the tables etl_upsert_batch
# creates for a Citus target (and their shards) still there, on the
# coordinator (catalog and Citus metadata) and on each worker, joined by
# "|": "0|0|0" when every call dropped its own.
sub stage_tables_left
{
	my ($coord, $workers) = @_;
	my $like = q{'^idem_etl_(batch|keys|changed)_'};
	return join('|',
		$coord->safe_psql('postgres', qq{
			SELECT (SELECT count(*) FROM pg_dist_partition WHERE logicalrelid::regclass::text ~ '(^|\.)idem_etl_(batch|keys|changed)_')
			     + (SELECT count(*) FROM pg_dist_shard WHERE logicalrelid::regclass::text ~ '(^|\.)idem_etl_(batch|keys|changed)_')
			     + (SELECT count(*) FROM pg_class WHERE relname ~ $like)
			     + (SELECT count(*) FROM pg_dist_cleanup)}),
		map { $_->safe_psql('postgres', "SELECT count(*) FROM pg_class WHERE relname ~ $like") } @$workers);
}

1;
