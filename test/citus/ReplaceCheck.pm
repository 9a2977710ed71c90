# ReplaceCheck: what the partition replacement tests of test/citus look at
# on a Citus cluster (IdemCitus.pm): a distributed table partitioned by day,
# and what a replacement may leave behind on the coordinator and the
# workers.
package ReplaceCheck;

use strict;
use warnings;
use Exporter 'import';
use IdemCitus;

our @EXPORT = qw(make_events leftovers citus_tables shard_partitions);

# make_events(coord, days, rows): table "ev" (day, id, v), partitioned by
# day, one partition ev_<n> per day from 2024-01-01, each with rows rows
# (v = 'old'), distributed on id; a PRIMARY KEY and an index.
sub make_events
{
	my ($coord, $days, $rows) = @_;
	my $sql = q{
		CREATE TABLE ev (day date NOT NULL, id int NOT NULL, v text,
		  PRIMARY KEY (day, id)) PARTITION BY RANGE (day);
		CREATE INDEX ev_v ON ev (v);
	};
	for my $d (1 .. $days)
	{
		$sql .= sprintf("CREATE TABLE ev_%d PARTITION OF ev FOR VALUES FROM ('2024-01-01'::date + %d) TO ('2024-01-01'::date + %d);\n",
			$d, $d - 1, $d);
	}
	$sql .= qq{
		SELECT create_distributed_table('ev', 'id');
		INSERT INTO ev SELECT '2024-01-01'::date + d - 1, g, 'old'
		  FROM generate_series(1, $days) d, generate_series(1, $rows) g;
	};
	$coord->safe_psql('postgres', $sql);
}

# The Citus tables (pg_dist_partition), and the tables citus_shards lists
# shards of, each sorted and joined by ",".
sub citus_tables
{
	my ($coord) = @_;
	return $coord->safe_psql('postgres', q{
		SELECT (SELECT string_agg(logicalrelid::text, ',' ORDER BY logicalrelid::text)
		          FROM pg_dist_partition)
		  || ' / ' ||
		  (SELECT string_agg(DISTINCT table_name::text, ',') FROM citus_shards)});
}

# Citus hides shards from pg_class on the workers unless
# citus.override_table_visibility is off.

# What no replacement may leave: load tables anywhere, kept tables or
# their shards on the workers when no kept version is recorded, rows in
# the coordinator's shell tables, Citus metadata of tables that are gone,
# and resources waiting in pg_dist_cleanup.  '' when there is none.
sub leftovers
{
	my ($coord, $workers) = @_;
	my @found;
	# a replaced partition not kept is dropped by the janitor after the
	# commit (on Citus)
	$coord->poll_query_until('postgres',
		'SELECT count(*) = 0 FROM idem_etl.replaced_partitions WHERE keep_until <= now()')
	  or die 'the janitor did not drop the replaced partitions';
	$coord->safe_psql('postgres', 'CALL citus_cleanup_orphaned_resources()');
	my $kept = $coord->safe_psql('postgres',
		'SELECT count(*) FROM idem_etl.replaced_partitions');
	my $pattern = $kept ? 'idem_etl_load%' : 'idem_etl_%';
	my $local = $coord->safe_psql('postgres', qq{
		SELECT string_agg(c.relname, ',' ORDER BY c.relname) FROM pg_class c
		 WHERE c.relname LIKE '$pattern' AND c.relnamespace = 'public'::regnamespace});
	push @found, "coordinator: $local" if $local ne '';
	my $rows = $coord->safe_psql('postgres', q{
		SELECT string_agg(c.relname || '=' || pg_relation_size(c.oid), ',' ORDER BY c.relname)
		  FROM pg_class c WHERE c.relkind = 'r' AND c.relnamespace = 'public'::regnamespace
		   AND pg_relation_size(c.oid) > 0 AND c.oid IN (SELECT logicalrelid FROM pg_dist_partition)});
	push @found, "rows in shell tables: $rows" if $rows ne '';
	my $gone = $coord->safe_psql('postgres', q{
		SELECT string_agg(logicalrelid::oid::text, ',') FROM pg_dist_partition
		 WHERE NOT EXISTS (SELECT FROM pg_class WHERE oid = logicalrelid)});
	push @found, "metadata of dropped tables: $gone" if $gone ne '';
	my $cleanup = $coord->safe_psql('postgres', 'SELECT count(*) FROM pg_dist_cleanup');
	push @found, "pg_dist_cleanup: $cleanup" if $cleanup ne '0';
	for my $w (@$workers)
	{
		my $t = $w->safe_psql('postgres', qq{
			SET citus.override_table_visibility TO off;
			SELECT string_agg(relname, ',' ORDER BY relname) FROM pg_class
			 WHERE relname LIKE '$pattern' AND relkind = 'r'});
		push @found, $w->name . ": $t" if $t ne '';
	}
	return join('; ', @found);
}

# On each worker, every partition of a shard of ev (shard numbers cut off)
# with how many shards of ev have it, "ev_1:2,ev_2:2|ev_1:2,ev_2:2": every
# shard has the same partitions, or some were swapped and others not.
sub shard_partitions
{
	my ($workers) = @_;
	return on_workers($workers, q{
		SET citus.override_table_visibility TO off;
		SELECT string_agg(x, ',' ORDER BY x) FROM (
		  SELECT part || ':' || count(*) AS x FROM (
		    SELECT regexp_replace(c.relname, '_[0-9]+$', '') AS part
		      FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
		      JOIN pg_class p ON p.oid = i.inhparent
		     WHERE p.relname ~ '^ev_[0-9]+$') parts GROUP BY part) s});
}

1;
