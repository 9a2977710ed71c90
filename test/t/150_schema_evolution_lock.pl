# 150_schema_evolution_lock: on_schema_change => 'append_new_columns' takes
# ACCESS EXCLUSIVE on the target for its ALTER TABLE, and waits for it no
# longer than idem_etl.lock_timeout (55P03, nothing changed) instead of
# queueing behind a long reader with everyone else queued behind it.  Once
# the reader is gone, the same call adds the column.
use strict;
use warnings;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use IdemEtl;

my $node = new_node('evolve');
$node->safe_psql('postgres', q{
	CREATE EXTENSION idem_etl;
	CREATE TABLE t (id int PRIMARY KEY, v text);
	INSERT INTO t VALUES (1, 'a');
});

my $reader = $node->background_psql('postgres');
$reader->query_safe('BEGIN; SELECT count(*) FROM t;');

my $call = q{SELECT inserted FROM etl_upsert_batch('t',
	'SELECT 2 AS id, ''b'' AS v, 7 AS extra', on_schema_change => 'append_new_columns')};
my ($rc, $out, $err) = $node->psql('postgres',
	"SET idem_etl.lock_timeout = '200ms';\n\\set VERBOSITY verbose\n$call");
like($err, qr/ERROR:\s+55P03: canceling statement due to lock timeout/,
	'the ALTER TABLE waits no longer than idem_etl.lock_timeout: 55P03');
is($node->safe_psql('postgres',
		q{SELECT count(*) FROM pg_attribute WHERE attrelid = 't'::regclass AND attname = 'extra'}),
	'0', 'nothing was changed');
is($node->safe_psql('postgres', 'SELECT count(*) FROM t'), '1', 'nothing was loaded');

$reader->query_safe('COMMIT');
$reader->quit;
is($node->safe_psql('postgres', $call), '1', 'without the reader, the call loads');
is($node->safe_psql('postgres', 'SELECT extra FROM t WHERE id = 2'), '7',
	'and the column was added');

no_crash($node, 'no process crashed');
done_testing();
