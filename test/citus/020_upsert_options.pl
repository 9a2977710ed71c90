# etl_upsert_batch's options on a distributed table (and the partitioned
# and reference cases): key_columns, order_by, newer_column,
# delete_missing, update_columns, exclude_columns, run_key and expect, with
# exact counts, the rows on the shards as on a local table loaded the same
# way, and no stage table left behind; each three ways: the batch as the
# statements' parameters, in a table beside the shards, and that in
# Citus's parallel mode.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use IdemCitus;
use PostgreSQL::Test::Utils;
use Test::More;

my ($coord, @workers) = citus_cluster();

# the way being tested (its name, and the settings that choose it)
my ($mode, $set, $n);

# both(args, source): the call on items and on items_local; its counts
sub both
{
	my ($args, $source) = @_;
	$source //= 'SELECT * FROM batch';
	$n++;
	my %out;
	for my $t ('items', 'items_local')
	{
		$out{$t} = $coord->safe_psql('postgres', $set .
			"SELECT inserted, updated, unchanged, deleted, skipped FROM etl_upsert_batch('$t', \$\$$source\$\$$args)");
	}
	is($out{items}, $out{items_local}, "$mode case $n: the same counts as a local table ($out{items_local})");
	is($coord->safe_psql('postgres', 'SELECT md5(string_agg(i::text, \',\' ORDER BY shop, sku)) FROM items i'),
		$coord->safe_psql('postgres', 'SELECT md5(string_agg(i::text, \',\' ORDER BY shop, sku)) FROM items_local i'),
		"$mode case $n: the same rows as a local table");
	return $out{items};
}

sub batch
{
	$coord->safe_psql('postgres', "TRUNCATE batch; INSERT INTO batch $_[0]");
}

# Every case three ways (citus_upsert.c): the batch as the statements'
# parameters (these batches are small), in a table beside the shards
# (whole or, when most of it is stored already, by difference), and that
# in Citus's parallel mode.
for my $way (
	[ 'inline', '' ],
	[ 'table', 'SET idem_etl.citus_inline_rows = 0; ' ],
	[ 'parallel', 'SET idem_etl.citus_inline_rows = 0; SET idem_etl.citus_parallel_shards = on; ' ])
{
	($mode, $set) = @$way;

	# Each case runs on a distributed table and on a local twin with the same
	# rows: the counts and the final rows must match.
	$coord->safe_psql('postgres', q{
		DROP TABLE IF EXISTS items, items_local, batch, rates, rates_local, ev;
		CREATE TABLE items (shop int, sku text, price numeric, qty int, seen timestamptz,
		                    note text, PRIMARY KEY (shop, sku));
		CREATE TABLE items_local (LIKE items INCLUDING ALL);
		SELECT create_distributed_table('items', 'shop');
		INSERT INTO items SELECT g % 7, 's' || g, g, g % 3, '2024-01-01'::timestamptz + g * interval '1 hour', 'x'
		  FROM generate_series(1, 500) g;
		INSERT INTO items_local SELECT * FROM items;
		CREATE TABLE batch (LIKE items);
	});

	$n = 0;

	# key_columns named, 10 changed and 5 new
	batch(q{SELECT shop, sku, CASE WHEN shop = 1 AND qty = 0 THEN price + 1 ELSE price END, qty, seen, note
	          FROM items UNION ALL SELECT 100, 'new' || g, g, 0, now(), 'n' FROM generate_series(1, 5) g});
	is(both(", key_columns => 'shop, sku'"), '5|24|476|0|f', 'key_columns: counts');
	is(both(", key_columns => array['shop', 'sku']"), '0|0|505|0|f', 'identical rerun: nothing written');

	# order_by: duplicates in the batch, the highest qty wins
	batch(q{SELECT shop, sku, price, qty + d, seen, note FROM items, generate_series(0, 2) d WHERE shop = 2});
	is(both(", order_by => 'qty DESC'"), '0|72|0|0|f', 'order_by: the winners');
	is(both(", order_by => 'qty DESC'"), '0|0|72|0|f', 'order_by: rerun unchanged');

	# newer_column: older rows never overwrite
	batch(q{SELECT shop, sku, price * 2, qty, seen + CASE WHEN qty = 1 THEN interval '1 day' ELSE interval '-1 day' END, note
	          FROM items WHERE shop = 3});
	is(both(", newer_column => 'seen'"), '0|24|48|0|f', 'newer_column: only the newer rows');
	is(both(", newer_column => 'seen'"), '0|0|72|0|f', 'newer_column: rerun');

	# update_columns and exclude_columns
	batch(q{SELECT shop, sku, price + 100, qty + 1, seen, 'changed' FROM items WHERE shop = 4});
	is(both(", update_columns => 'price'"), '0|71|0|0|f', 'update_columns: price only');
	is(both(", exclude_columns => array['note']"), '0|71|0|0|f', 'exclude_columns: all but note');
	is(both(", exclude_columns => array['note']"), '0|0|71|0|f', 'exclude_columns: rerun');
	is($coord->safe_psql('postgres', q{SELECT count(*) FROM items WHERE shop = 4 AND note = 'changed'}),
		'0', 'exclude_columns: note left alone');

	# delete_missing: the slice shop = 5 becomes the batch
	batch(q{SELECT shop, sku, price, qty, seen, note FROM items WHERE shop = 5 AND qty > 0
	        UNION ALL SELECT 5, 'fresh', 1, 1, now(), 'f'});
	is(both(", delete_missing => 'shop = 5'"), '1|0|47|24|f', 'delete_missing: counts');
	is(both(", delete_missing => 'shop = 5'"), '0|0|48|0|f', 'delete_missing: rerun');

	# run_key: a second apply of the same batch is skipped; expect audits it
	batch(q{SELECT shop, sku, price + 1, qty, seen, note FROM items WHERE shop = 6});
	is(both(", run_key => 'day-1', expect => 'count(*) > 0'"), '0|71|0|0|f', 'run_key: applied');
	is(both(", run_key => 'day-1', expect => 'count(*) > 0'"), '0|0|71|0|t', 'run_key: skipped');
	my ($state) = sqlstate_of($coord, $set .
		q{SELECT * FROM etl_upsert_batch('items', 'SELECT * FROM batch', expect => 'count(*) > 1000')});
	is($state, 'IE001', 'expect: a failed expectation writes nothing (IE001)');

	# a NULLS NOT DISTINCT key on a reference table, with delete_missing
	$coord->safe_psql('postgres', q{
		CREATE TABLE rates (cur text, day date, rate numeric, UNIQUE NULLS NOT DISTINCT (cur, day));
		SELECT create_reference_table('rates');
		CREATE TABLE rates_local (LIKE rates INCLUDING ALL);
	});
	my $rates = q{VALUES ('EUR', NULL::date, 1.0), ('USD', date '2024-01-01', 1.1), ('CHF', date '2024-01-01', 0.9)};
	for my $t ('rates', 'rates_local')
	{
		is($coord->safe_psql('postgres', $set .
				"SELECT inserted, updated, unchanged, deleted FROM etl_upsert_batch('$t', \$\$$rates\$\$, key_columns => 'cur, day')"),
			'3|0|0|0', "$t: NULLS NOT DISTINCT key inserted");
		is($coord->safe_psql('postgres', $set .
				"SELECT inserted, updated, unchanged, deleted FROM etl_upsert_batch('$t', \$\$VALUES ('EUR', NULL::date, 1.5), ('USD', date '2024-01-01', 1.1)\$\$, key_columns => 'cur, day', delete_missing => 'true')"),
			'0|1|1|1', "$t: the NULL key updated, CHF deleted");
	}

	# a distributed partitioned table: inserts counted without xmax
	$coord->safe_psql('postgres', q{
		CREATE TABLE ev (id int, day date, v int, PRIMARY KEY (id, day)) PARTITION BY RANGE (day);
		CREATE TABLE ev_1 PARTITION OF ev FOR VALUES FROM ('2024-01-01') TO ('2024-02-01');
		SELECT create_distributed_table('ev', 'id');
		INSERT INTO ev SELECT g, date '2024-01-01' + g % 30, g FROM generate_series(1, 100) g;
	});
	is($coord->safe_psql('postgres', $set . q{SELECT inserted, updated, unchanged, deleted FROM etl_upsert_batch('ev',
			$$SELECT id, day, CASE WHEN id <= 10 THEN -v ELSE v END AS v FROM ev WHERE id <= 95 UNION ALL SELECT 1000, date '2024-01-31', 0$$,
			delete_missing => 'id > 95')}),
		'1|10|85|5', 'partitioned distributed table: counts');
	is($coord->safe_psql('postgres', q{SELECT count(*), sum(v) FROM ev}), '96|4450',
		'partitioned distributed table: the rows');
	is($coord->safe_psql('postgres', $set . q{SELECT inserted, updated, unchanged, deleted FROM etl_upsert_batch('ev',
			$$SELECT * FROM ev$$, delete_missing => 'id > 95')}),
		'0|0|96|0', 'partitioned distributed table: identical rerun');

	is(stage_tables_left($coord, \@workers), '0|0|0',
		"$mode: no stage table, shard or cleanup record left on the coordinator or the workers");
}

done_testing();
