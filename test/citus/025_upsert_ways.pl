# The ways a batch reaches the shards (citus_upsert.c), each chosen where
# it should be and giving what a local table gives:
# - a small batch as the statements' parameters: no table is created;
# - a large batch of new keys only straight into the target (and merged
#   after all when a key is stored);
# - a large batch mostly stored already: keys and hashes first, then only
#   the rows that differ;
# - a large batch with dense integer keys (int, and bigint on a reference
#   table): ranges of keys compared by count and hash sums first, then only
#   the rows of the ranges that differ, whichever way they need (an
#   identical rerun sends no row and writes nothing on any shard);
# - a large batch mostly new: the whole batch in a table beside the shards;
# with newer_column, a key-only table, column names that clash with the
# statements' aliases, a transaction that already ran a parallel query,
# an empty batch, and idem_etl.citus_batch() outside a call or as another
# role.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use IdemCitus;
use PostgreSQL::Test::Utils;
use Test::More;

my ($coord, @workers) = citus_cluster();

# A distributed table and its local twin, with column names that are the
# aliases the statements use (b, t, s, c, o, and the hash and row ones).
$coord->safe_psql('postgres', q{
	CREATE TABLE m (id int PRIMARY KEY, b text, t int, s numeric, c timestamptz,
	                o text, idem_etl_hash text, idem_etl_row int);
	SELECT create_distributed_table('m', 'id');
	CREATE TABLE m_local (LIKE m INCLUDING ALL);
	CREATE TABLE src (LIKE m);
	INSERT INTO src SELECT g, 'b' || g, g % 10, g / 7.0, '2024-01-01'::timestamptz + g * interval '1 minute',
	                       'o', 'h', g FROM generate_series(1, 2000) g;
	CREATE TABLE keyonly (a int, b int, PRIMARY KEY (a, b));
	SELECT create_distributed_table('keyonly', 'a');
	CREATE TABLE keyonly_local (LIKE keyonly INCLUDING ALL);
});

# call(target, source, args): the call's counts, and its DEBUG lines about
# the way it took
sub call
{
	my ($target, $source, $args) = @_;
	$args //= '';
	my ($out, $err);
	$coord->psql('postgres',
		"SET client_min_messages = debug1; SELECT inserted, updated, unchanged, deleted FROM etl_upsert_batch('$target', \$\$$source\$\$$args)",
		stdout => \$out, stderr => \$err, on_error_die => 1);
	my @ways = $err =~ /DEBUG:  (\d+ of (?:the|a sample of) \d+ (?:rows|key ranges) of the batch for "\w+" are (?:not )?stored as they are(?:, \d+ keys stored|, \d+ rows stored between its keys)?|the batch for "\w+" could not go straight in)/g;
	return ($out, join('; ', @ways));
}

# both(source, args, name[, table]): the same call on table (m by default)
# and its local twin: counts and rows must match; returns the table's
# counts and its way
sub both
{
	my ($source, $args, $name, $t) = @_;
	$t //= 'm';
	my ($out, $way) = call($t, $source, $args);
	my ($local) = call("${t}_local", $source, $args);
	is($out, $local, "$name: the counts of a local table ($local)");
	is($coord->safe_psql('postgres', "SELECT md5(string_agg(x::text, ',' ORDER BY id)) FROM $t x"),
		$coord->safe_psql('postgres', "SELECT md5(string_agg(x::text, ',' ORDER BY id)) FROM ${t}_local x"),
		"$name: the rows of a local table");
	return ($out, $way);
}

sub shard_ids
{
	return $coord->safe_psql('postgres', 'SELECT last_value FROM pg_catalog.pg_dist_shardid_seq');
}

# The row versions of every placement of m (ctid, xmin, xmax)
sub row_versions
{
	return $coord->safe_psql('postgres', q{
		SELECT string_agg(result, ' ' ORDER BY shardid)
		  FROM run_command_on_placements('m',
		    $$SELECT md5(string_agg(ctid::text || xmin::text || xmax::text, ',' ORDER BY ctid)) FROM %s$$)});
}

# a small batch: parameters, no table (no shard id taken)
my $ids = shard_ids();
my ($out, $way) = both('SELECT * FROM src WHERE id <= 500', '', 'small batch');
is($out, '500|0|0|0', 'small batch: inserted');
is($way, '', 'small batch: no sample, no stage table');
is(shard_ids(), $ids, 'small batch: no shard created');
my $before = row_versions();
($out) = both('SELECT * FROM src WHERE id <= 500', '', 'small batch rerun');
is($out, '0|0|500|0', 'small batch rerun: unchanged');
is(row_versions(), $before, 'small batch rerun: nothing written or locked on any shard');

# a large batch, mostly new, with dense integer keys (ids 1 to 2000: 1000
# ranges of two): the key ranges tell the stored ones (1 to 500) from the
# rest, and only the rows of the other ranges go, whole, into a table
($out, $way) = both('SELECT * FROM src', '', 'mostly new');
is($out, '1500|0|500|0', 'mostly new: counts');
is($way, '250 of the 1000 key ranges of the batch for "m" are stored as they are, 500 rows stored between its keys',
	'mostly new: by key ranges, then the other ranges\' rows whole');
isnt(shard_ids(), $ids, 'mostly new: a stage table was created');

# identical rerun: every range stored as it is; nothing sent per row, no
# table, nothing written
$before = row_versions();
$ids = shard_ids();
($out, $way) = both('SELECT * FROM src', '', 'identical rerun');
is($out, '0|0|2000|0', 'identical rerun: unchanged');
is($way, '1000 of the 1000 key ranges of the batch for "m" are stored as they are, 2000 rows stored between its keys',
	'identical rerun: by key ranges, all stored as they are');
is(shard_ids(), $ids, 'identical rerun: no table beside the shards');
is(row_versions(), $before, 'identical rerun: nothing written or locked on any shard');

# a row changed: its range differs, and only that range's rows go on by
# difference
($out, $way) = both(q{SELECT id, CASE WHEN id = 2 THEN b || 'x' ELSE b END AS b, t, s, c, o,
                             idem_etl_hash, idem_etl_row FROM src}, '', 'ranges, one changed');
is($out, '0|1|1999|0', 'ranges, one changed: counts');
is($way, '999 of the 1000 key ranges of the batch for "m" are stored as they are, 2000 rows stored between its keys; '
	  . '1 of the 2000 rows of the batch for "m" are not stored as they are',
	'ranges, one changed: one range by difference, one row differs');
($out) = both('SELECT * FROM src', '', 'ranges, back');
is($out, '0|1|1999|0', 'ranges, back: the row changed back');
# a stored row beside the batch's keys (4, not in the batch) makes its
# range differ too, and is left as it is
($out, $way) = both('SELECT * FROM src WHERE id <> 4', '', 'ranges, a stored row beside');
is($out, '0|0|1999|0', 'ranges, a stored row beside: nothing written');
is($way, '999 of the 1000 key ranges of the batch for "m" are stored as they are, 2000 rows stored between its keys; '
	  . '0 of the 1999 rows of the batch for "m" are not stored as they are',
	'ranges, a stored row beside: its range differs');
# delete_missing when every range is stored as it is: the slice's other
# keys (1991 to 2000, outside the batch's ranges) are deleted
($out, $way) = both('SELECT * FROM src WHERE id <= 1990', ", delete_missing => 'id > 1980'",
	'ranges and delete_missing');
is($out, '0|0|1990|10', 'ranges and delete_missing: the missing rows removed');
like($way, qr/^995 of the 995 key ranges/, 'ranges and delete_missing: every range stored as it is');
($out) = both('SELECT * FROM src', '', 'the deleted rows back');
is($out, '10|0|1990|0', 'the deleted rows back: inserted');

# 1% changed, 10 new: only those travel
($out, $way) = both(q{SELECT id, b, CASE WHEN id % 100 = 0 THEN t + 1 ELSE t END AS t, s, c, o,
                             idem_etl_hash, idem_etl_row FROM src
                      UNION ALL SELECT id + 5000, b, t, s, c, o, idem_etl_hash, idem_etl_row FROM src WHERE id <= 10},
	'', '1% changed');
is($out, '10|20|1980|0', '1% changed: counts');
like($way, qr/; 30 of the 2010 rows of the batch for "m" are not stored as they are$/,
	'1% changed: only the 30 rows that differ travel');
# keys spread over more than twice as many values as the batch has rows
# (1 to 5010 for 2010 rows): by difference, not by ranges, which would
# read every stored row between them
($out, $way) = both('SELECT * FROM m_local', '', 'sparse keys');
is($out, '0|0|2010|0', 'sparse keys: unchanged');
like($way, qr/keys stored; 0 of the 2010 rows of the batch for "m" are not stored as they are$/,
	'sparse keys: by difference');
# two rows in three changed, in key order: a sample that read the same
# place in every run of three rows (as every third row is read here) could
# see none of them; it reads at varying places, sees about two thirds, and
# the batch goes whole
($out, $way) = both(q{SELECT id, CASE WHEN id % 3 <> 1 THEN b || 'y' ELSE b END AS b, t, s, c, o,
                             idem_etl_hash, idem_etl_row
                        FROM (SELECT * FROM m_local WHERE id <= 2000 ORDER BY id) x
                      UNION ALL SELECT * FROM m_local WHERE id > 5000}, '', 'two in three changed');
my ($same) = $way =~ /^(\d+) of a sample of 670 rows of the batch for "m" are stored as they are, 670 keys stored$/;
ok(defined $same && $same > 150 && $same < 300, "two in three changed: the sample sees about two thirds changed ($way)");

# a reference table with a bigint key, negative values too: by key ranges
# as a distributed one (-1000 to 1999: 1000 ranges of three)
$coord->safe_psql('postgres', q{
	CREATE TABLE rb (id bigint PRIMARY KEY, v text, w numeric);
	SELECT create_reference_table('rb');
	CREATE TABLE rb_local (LIKE rb INCLUDING ALL);
});
my $rb = q{SELECT g AS id, CASE WHEN g = %d THEN 'x' ELSE 'v' || g END AS v, g / 3.0 AS w
             FROM generate_series(-1000, 1999) g};
($out, $way) = both(sprintf($rb, 0), '', 'reference, first', 'rb');
is($out, '3000|0|0|0', 'reference, first: inserted');
is($way, '0 of the 1000 key ranges of the batch for "rb" are stored as they are, 0 rows stored between its keys',
	'reference, first: nothing stored between the keys');
($out, $way) = both(sprintf($rb, 0), '', 'reference, rerun', 'rb');
is($out, '0|0|3000|0', 'reference, rerun: unchanged');
is($way, '1000 of the 1000 key ranges of the batch for "rb" are stored as they are, 3000 rows stored between its keys',
	'reference, rerun: every range stored as it is');
($out, $way) = both(sprintf($rb, -7), '', 'reference, one changed', 'rb');
is($out, '0|2|2998|0', 'reference, one changed: -7 changed, 0 back');
like($way, qr/^998 of the 1000 key ranges .*; 2 of the 3000 rows of the batch for "rb" are not stored as they are$/,
	'reference, one changed: two ranges by difference');

# a NULL where a value was, and a value where NULL was: both differ
($out) = both(q{SELECT id, CASE WHEN id = 1 THEN NULL ELSE b END AS b, t, s, c,
                       CASE WHEN id = 2 THEN NULL WHEN id = 3 THEN 'p' ELSE o END AS o,
                       idem_etl_hash, idem_etl_row FROM m_local}, '', 'NULLs');
is($out, '0|3|2007|0', 'NULLs: the three rows changed');
# the same value with another scale (1.0 against 1.00) differs by image
($out) = both(q{SELECT id, b, t, CASE WHEN id = 7 THEN 1.00 ELSE s END AS s, c, o, idem_etl_hash, idem_etl_row FROM m_local},
	'', 'scale');
is($out, '0|1|2009|0', 'scale: 1.00 is a change, as on a local table');

# newer_column by difference: older rows never overwrite, newer ones do
($out, $way) = both(q{SELECT id, b || 'x' AS b, t, s,
                             c + CASE WHEN id % 200 = 0 THEN interval '1 day' WHEN id % 200 = 1 THEN interval '-1 day' ELSE interval '0' END AS c,
                             o, idem_etl_hash, idem_etl_row
                        FROM m_local WHERE id % 200 IN (0, 1)
                      UNION ALL SELECT * FROM m_local WHERE id % 200 NOT IN (0, 1)},
	", newer_column => 'c'", 'newer_column');
is($out, '0|10|2000|0', 'newer_column: only the newer rows');
like($way, qr/; 10 of the 2010 rows/, 'newer_column: by difference, the older rows left out');

# update_columns: a change elsewhere is not one
($out, $way) = both(q{SELECT id, b, t, s, c, 'other' AS o, idem_etl_hash, idem_etl_row FROM m_local},
	", update_columns => 't'", 'update_columns');
is($out, '0|0|2010|0', 'update_columns: o is not compared');

# delete_missing by difference: the keys table holds every key
($out) = both(q{SELECT * FROM m_local WHERE id <= 1990}, ", delete_missing => 'id > 1000'", 'delete_missing');
is($out, '0|0|1990|20', 'delete_missing: the missing rows removed');
# an empty batch removes the slice, with allow_shrink
($out) = both(q{SELECT * FROM m_local WHERE false}, ", delete_missing => 'id > 1900', allow_shrink => true",
	'empty batch');
is($out, '0|0|0|90', 'empty batch: the slice removed');

# a table of key columns only: nothing to compare but presence
for my $t ('keyonly', 'keyonly_local')
{
	is($coord->safe_psql('postgres',
			"SELECT inserted, updated, unchanged FROM etl_upsert_batch('$t', \$\$SELECT g % 50 AS a, g AS b FROM generate_series(1, 3000) g\$\$)"),
		'3000|0|0', "$t: key-only first apply");
	my ($o, $w) = call($t, 'SELECT g % 50 AS a, g AS b FROM generate_series(1, 3010) g');
	is($o, '10|0|3000|0', "$t: key-only rerun with 10 new");
	like($w, qr/10 of the 3010 rows/, "$t: key-only by difference") if $t eq 'keyonly';
}
is($coord->safe_psql('postgres', 'SELECT count(*), sum(b) FROM keyonly'), '3010|4531555',
	'key-only: the rows');

# a transaction that already ran a parallel query: Citus refuses its
# sequential mode there, and the call goes on in parallel mode
is($coord->safe_psql('postgres', q{
	BEGIN;
	SELECT count(*) FROM m \g /dev/null
	SELECT inserted, updated, unchanged FROM etl_upsert_batch('m', $$SELECT id, b, t + 1 AS t, s, c, o, idem_etl_hash, idem_etl_row FROM m$$);
	COMMIT;}),
	'0|1900|0', 'after a parallel query in the transaction: the call goes on in parallel mode');

# new keys only: straight into the target, no table beside the shards;
# with dense integer keys the key ranges find none stored, with sparse
# ones (every third value) a sample finds none of its keys stored
$coord->safe_psql('postgres', q{
	CREATE TABLE n (id int PRIMARY KEY, v text);
	SELECT create_distributed_table('n', 'id');
	CREATE TABLE n_local (LIKE n INCLUDING ALL);
});
$ids = shard_ids();
($out, $way) = both(q{SELECT g AS id, 'v' || g AS v FROM generate_series(1, 3000) g}, '', 'new keys', 'n');
is($out, '3000|0|0|0', 'new keys: inserted');
is($way, '0 of the 1000 key ranges of the batch for "n" are stored as they are, 0 rows stored between its keys',
	'new keys: no key stored between the batch\'s keys');
is(shard_ids(), $ids, 'new keys: straight into the target, no stage table');
($out, $way) = both(q{SELECT g * 3 AS id, 'v' || g * 3 AS v FROM generate_series(1001, 4000) g}, '',
	'new sparse keys', 'n');
is($out, '3000|0|0|0', 'new sparse keys: inserted');
is($way, '0 of a sample of 1000 rows of the batch for "n" are stored as they are, 0 keys stored',
	'new sparse keys: no sampled key stored');
is(shard_ids(), $ids, 'new sparse keys: straight into the target, no stage table');
# a stored key the sample missed (18003: of these keys, the sample reads
# 18018, 18027, 18030, ...)
$coord->safe_psql('postgres', q{INSERT INTO n VALUES (18003, 'v18003'); INSERT INTO n_local VALUES (18003, 'v18003')});
($out, $way) = both(q{SELECT g * 3 AS id, 'v' || g * 3 AS v FROM generate_series(6001, 9000) g}, '',
	'a stored key after all', 'n');
is($out, '2999|0|1|0', 'a stored key after all: merged');
like($way, qr/0 keys stored; the batch for "n" could not go straight in$/,
	'a stored key after all: the insert gave way to the merge');
# delete_missing after new keys: the keys go beside the shards for it
($out) = both(q{SELECT g * 3 AS id, 'v' || g * 3 AS v FROM generate_series(9001, 11000) g},
	", delete_missing => 'id > 24000'", 'new keys and delete_missing', 'n');
is($out, '2000|0|0|1000', 'new keys and delete_missing: the missing rows removed');

is(stage_tables_left($coord, \@workers), '0|0|0',
	'no stage table, shard or cleanup record left on the coordinator or the workers');

# idem_etl.citus_batch(): internal, outside a call nothing to return, and
# in one its columns must be named with the batch's types
my ($state) = sqlstate_of($coord,
	q{SELECT * FROM idem_etl.citus_batch('{1}', '{}') AS b(id int)});
is($state, '55000', 'citus_batch outside a call: 55000');
($state) = sqlstate_of($coord, q{SELECT * FROM etl_upsert_batch('m', 'SELECT * FROM m',
	delete_missing => $$id IN (SELECT x FROM idem_etl.citus_batch('{1}', '{}') AS b(x bigint))$$)});
is($state, '42804', 'citus_batch with a wrong column type: 42804');
($state) = sqlstate_of($coord, q{SELECT * FROM etl_upsert_batch('m', 'SELECT * FROM m',
	delete_missing => $$id IN (SELECT x FROM idem_etl.citus_batch('{1}', '{}') AS b(x int, y int))$$)});
is($state, '42804', 'citus_batch with a column too many: 42804');
($state) = sqlstate_of($coord, q{SELECT * FROM etl_upsert_batch('m', 'SELECT * FROM m',
	delete_missing => $$id IN (SELECT x FROM idem_etl.citus_batch('{99}', '{}') AS b(x int))$$)});
is($state, '22023', 'citus_batch asked for a column the batch has not: 22023');
$coord->safe_psql('postgres', q{
	CREATE ROLE other;
	CREATE FUNCTION peek_ids() RETURNS SETOF int LANGUAGE sql SECURITY DEFINER
	  AS $$SELECT id FROM idem_etl.citus_batch('{1}', '{}') AS b(id int)$$;
	ALTER FUNCTION peek_ids() OWNER TO other;
});
($state) = sqlstate_of($coord, q{SELECT * FROM etl_upsert_batch('m', 'SELECT * FROM m',
	delete_missing => $$id IN (SELECT peek_ids())$$)});
is($state, '42501', 'citus_batch in a function running as another role: 42501');

# image_hash is the same on every node for the same values
is(on_workers(\@workers, q{SELECT idem_etl.image_hash(1, 'x'::text, NULL::int, 1.50::numeric, '2024-01-01'::timestamptz)::text}),
	join('|', ($coord->safe_psql('postgres',
		q{SELECT idem_etl.image_hash(1, 'x'::text, NULL::int, 1.50::numeric, '2024-01-01'::timestamptz)::text})) x 2),
	'image_hash: the same on the coordinator and the workers');

done_testing();
