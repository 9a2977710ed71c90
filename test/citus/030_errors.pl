# What etl_upsert_batch refuses on Citus, with its SQLSTATE, before it
# writes anything: a call on a worker, a key without the distribution
# column, tables Citus cannot merge into in place (append-distributed, a
# local table in Citus's metadata), a role that may not create the stage
# table; etl_snapshot on any Citus table (0A000, rather than failing on the
# shards).  And what keeps working: a single-shard distributed table, a
# local table in a Citus database (the usual path, no stage table).
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
	INSERT INTO orders SELECT g, g, 'a' FROM generate_series(1, 100) g;
	CREATE TABLE app (id int, v int);
	SELECT create_distributed_table('app', 'id', 'append');
	CREATE TABLE loc (id int PRIMARY KEY, v int);
	SELECT citus_add_local_table_to_metadata('loc');
	CREATE TABLE one (id int PRIMARY KEY, v int);
	SELECT create_distributed_table('one', NULL);
	CREATE TABLE plain (id int PRIMARY KEY, v int);
});
my $sum = 'SELECT count(*), sum(amount) FROM orders';
my $before = $coord->safe_psql('postgres', $sum);

my ($state, $err) = sqlstate_of($workers[0],
	q{SELECT * FROM etl_upsert_batch('orders', 'SELECT id, amount + 1 AS amount, note FROM orders')});
is($state, '0A000', 'a call on a worker: 0A000');
like($err, qr/must be called on the coordinator/, 'a call on a worker: says where to call');
is($coord->safe_psql('postgres', $sum), $before, 'a call on a worker: nothing written');

($state, $err) = sqlstate_of($coord,
	q{SELECT * FROM etl_upsert_batch('orders', 'SELECT id, amount, note FROM orders', key_columns => 'note')});
is($state, '42P10', 'a key without the distribution column: 42P10');
like($err, qr/do not include its distribution column "id"/, 'names the distribution column');
like($err, qr/HINT:\s+Include "id" in key_columns/, 'and says what to do');

($state, $err) = sqlstate_of($coord, q{SELECT * FROM etl_upsert_batch('app', 'VALUES (1, 1)', key_columns => 'id')});
is($state, '0A000', 'an append-distributed table: 0A000');
like($err, qr/distributed by append/, 'says why');

($state, $err) = sqlstate_of($coord, q{SELECT * FROM etl_upsert_batch('loc', 'VALUES (1, 1)')});
is($state, '0A000', "a local table in Citus's metadata: 0A000");
like($err, qr/citus_add_local_table_to_metadata/, 'says why');

($state, $err) = sqlstate_of($coord, q{
	CREATE TABLE dim (id int, name text, valid_from timestamptz, valid_to timestamptz);
	SELECT create_distributed_table('dim', 'id');
	SELECT * FROM etl_snapshot('dim', $$SELECT 1 AS id, 'a' AS name$$, 'id', valid_at => now())});
is($state, '0A000', 'etl_snapshot on a distributed table: 0A000');
like($err, qr/etl_snapshot does not support Citus table "dim" yet/, 'says so');

# a role with the table's privileges but no CREATE on its schema
$coord->safe_psql('postgres', q{
	CREATE ROLE loader LOGIN;
	CREATE SCHEMA sales;
	CREATE TABLE sales.facts (id int PRIMARY KEY, v int);
	SELECT create_distributed_table('sales.facts', 'id');
	GRANT USAGE ON SCHEMA sales TO loader;
	GRANT SELECT, INSERT, UPDATE ON sales.facts TO loader;
});
($state, $err) = sqlstate_of($coord,
	q{SET ROLE loader; SELECT * FROM etl_upsert_batch('sales.facts', 'VALUES (1, 1)')});
is($state, '42501', 'no CREATE on the target schema: 42501');
like($err, qr/HINT:\s+Grant CREATE on schema sales/, 'says which privilege is missing');
$coord->safe_psql('postgres', 'GRANT CREATE ON SCHEMA sales TO loader');
is($coord->safe_psql('postgres',
		q{SET ROLE loader; SELECT inserted FROM etl_upsert_batch('sales.facts', 'VALUES (1, 1), (2, 2)')}),
	'2', 'with CREATE on the schema, the role loads');

is($coord->safe_psql('postgres',
		q{SELECT inserted, updated, unchanged FROM etl_upsert_batch('one', 'VALUES (1, 1), (2, 2)')}),
	'2|0|0', 'a single-shard distributed table');
is($coord->safe_psql('postgres',
		q{SELECT inserted, updated, unchanged FROM etl_upsert_batch('one', 'VALUES (1, 1), (2, 3)')}),
	'0|1|1', 'a single-shard distributed table: rerun with one change');

# a local table of a Citus database takes the usual path: no stage table
# is created (the coordinator's pg_class gains no row)
my $classes = $coord->safe_psql('postgres', 'SELECT max(oid::int8) FROM pg_class');
is($coord->safe_psql('postgres',
		q{SELECT inserted, updated, unchanged FROM etl_upsert_batch('plain', 'VALUES (1, 1), (2, 2)')}),
	'2|0|0', 'a local table in a Citus database');
is($coord->safe_psql('postgres', "SELECT count(*) FROM pg_class WHERE oid::int8 > $classes"),
	'0', 'a local table: no stage table created');

done_testing();
