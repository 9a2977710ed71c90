# etl_upsert_batch on a distributed (hash) table and on a reference table:
# exact counts, and an identical rerun that writes nothing on any shard.
# (Before Citus support, both failed: XX000 "could not find attribute -1 in
# subquery targetlist" and "unrecognized RTE kind: 7".)
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use IdemCitus;
use PostgreSQL::Test::Utils;
use Test::More;

my ($coord, @workers) = citus_cluster();

$coord->safe_psql('postgres', q{
	CREATE TABLE orders (id int PRIMARY KEY, amount numeric, note text);
	SELECT create_distributed_table('orders', 'id');
	CREATE TABLE currencies (code text PRIMARY KEY, name text);
	SELECT create_reference_table('currencies');
	CREATE TABLE src_orders AS SELECT g AS id, g * 1.5 AS amount, 'n' || g AS note
	  FROM generate_series(1, 1000) g;
});

sub upsert
{
	my ($target, $source) = @_;
	return $coord->safe_psql('postgres',
		"SELECT inserted, updated, unchanged, deleted FROM etl_upsert_batch('$target', \$\$$source\$\$)");
}

# The row versions of every placement of every shard of a table (ctid,
# xmin, xmax): unchanged when nothing wrote, nor locked, a row there.
sub row_versions
{
	my ($table) = @_;
	return $coord->safe_psql('postgres', qq{
		SELECT string_agg(nodeport || '/' || shardid || ':' || result, ' ' ORDER BY nodeport, shardid)
		  FROM run_command_on_placements('$table',
		    \$\$SELECT md5(string_agg(ctid::text || xmin::text || xmax::text, ',' ORDER BY ctid)) FROM %s\$\$)});
}

is(upsert('orders', 'SELECT * FROM src_orders'), '1000|0|0|0',
	'distributed: first apply inserts every row');
is($coord->safe_psql('postgres', 'SELECT count(*), sum(amount) FROM orders'),
	'1000|750750.0', 'distributed: the rows are there');
my $before = row_versions('orders');
is(upsert('orders', 'SELECT * FROM src_orders'), '0|0|1000|0',
	'distributed: identical rerun: every row unchanged');
is(row_versions('orders'), $before, 'distributed: the rerun wrote nothing on any shard');
is(upsert('orders',
		q{SELECT id, CASE WHEN id <= 10 THEN amount + 1 ELSE amount END AS amount, note
		  FROM src_orders UNION ALL SELECT 1001, 1, 'new'}),
	'1|10|990|0', 'distributed: 10 changed, 1 new');
is($coord->safe_psql('postgres', 'SELECT count(*), sum(amount) FROM orders'),
	'1001|750761.0', 'distributed: the changes are there');

is(upsert('currencies', q{VALUES ('EUR', 'Euro'), ('USD', 'Dollar')}), '2|0|0|0',
	'reference: first apply');
$before = row_versions('currencies');
is(upsert('currencies', q{VALUES ('EUR', 'Euro'), ('USD', 'Dollar')}), '0|0|2|0',
	'reference: identical rerun');
is(row_versions('currencies'), $before, 'reference: the rerun wrote nothing on any node');
is(upsert('currencies', q{VALUES ('EUR', 'Euro'), ('USD', 'US dollar'), ('CHF', 'Franc')}),
	'1|1|1|0', 'reference: one changed, one new');
is(on_workers(\@workers, q{SELECT string_agg(code || '=' || name, ',' ORDER BY code) FROM currencies}),
	'CHF=Franc,EUR=Euro,USD=US dollar|CHF=Franc,EUR=Euro,USD=US dollar',
	'reference: every node has the rows');

done_testing();
