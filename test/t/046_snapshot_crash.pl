# 046_snapshot_crash: etl_snapshot killed at any point leaves the history
# as it was before the call or as one clean call leaves it, never half.
#
# The server is stopped immediately (a crash) at four points of a snapshot
# that closes versions, opens new ones and invalidates missing keys:
#   - while the source runs (staging),
#   - while the versions are inserted (a trigger waits on the 500th row,
#     after the current versions were closed),
#   - after the call, its transaction still open,
#   - after the commit.
# After each restart the history equals the one before (the first three) or
# a reference made by one clean call (the last), and a key never has two
# current versions.  Then the same call, queued with etl_submit, runs in the
# background worker with the same result.
use strict;
use warnings;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use IdemEtl;

my $node = new_node('snapshot_crash');

$node->safe_psql(
	'postgres', q{
	CREATE EXTENSION idem_etl;
	CREATE TABLE hist (id int, v text, valid_from timestamptz, valid_to timestamptz);
	CREATE UNIQUE INDEX ON hist (id) WHERE valid_to IS NULL;
	CREATE TABLE src (id int, v text);
	INSERT INTO src SELECT g, 'v' || g FROM generate_series(1, 1000) g;
	SELECT etl_snapshot('hist', 'SELECT * FROM src', '{id}', valid_at => '2026-01-01 00:00+00');
	-- the next extract: 300 changed, 100 gone, 200 new
	UPDATE src SET v = v || 'x' WHERE id <= 300;
	DELETE FROM src WHERE id > 900;
	INSERT INTO src SELECT g, 'new' || g FROM generate_series(1001, 1200) g;

	-- the reference: one clean call on a copy
	CREATE TABLE ref (LIKE hist);
	INSERT INTO ref TABLE hist;
	SELECT etl_snapshot('ref', 'SELECT * FROM src', '{id}', valid_at => '2026-01-02 00:00+00',
	                    hard_deletes => 'invalidate');

	-- the gates: a source row, and the 500th version inserted
	CREATE FUNCTION gate() RETURNS boolean LANGUAGE plpgsql AS $$
	BEGIN PERFORM pg_advisory_lock_shared(4711); PERFORM pg_advisory_unlock_shared(4711); RETURN true; END $$;
	CREATE TABLE inserted_count (n int);
	INSERT INTO inserted_count VALUES (0);
	CREATE FUNCTION count_gate() RETURNS trigger LANGUAGE plpgsql AS $$
	BEGIN
	    UPDATE inserted_count SET n = n + 1;
	    IF (SELECT n FROM inserted_count) = 500 THEN PERFORM gate(); END IF;
	    RETURN NEW;
	END $$;
	CREATE TABLE before AS SELECT * FROM hist;
});

my $snapshot = q{SELECT * FROM etl_snapshot('hist', 'SELECT * FROM src WHERE gate()', '{id}',
	valid_at => '2026-01-02 00:00+00', hard_deletes => 'invalidate')};

# history equal to table $other; one current version per key
sub same_as
{
	my ($other, $name) = @_;
	my $diff = $node->safe_psql(
		'postgres', qq{
		SELECT count(*) FROM ((TABLE hist EXCEPT ALL TABLE $other)
		                      UNION ALL (TABLE $other EXCEPT ALL TABLE hist)) d});
	my $twice = $node->safe_psql('postgres',
		'SELECT count(*) FROM (SELECT id FROM hist WHERE valid_to IS NULL GROUP BY id HAVING count(*) > 1) t');
	is("$diff/$twice", '0/0', $name);
}

# crash while the call waits at a gate ($prepare: what arms it)
sub crash_at_gate
{
	my ($prepare, $name) = @_;
	$node->safe_psql('postgres', $prepare) if $prepare;
	my $holder = $node->background_psql('postgres');
	$holder->query_safe('SELECT pg_advisory_lock(4711)');
	my $runner = $node->background_psql('postgres');
	$runner->query_until(qr/started/, "\\echo started\n$snapshot;\n");
	ok(wait_advisory($node, 4711), "$name: the snapshot waits at its gate");
	$node->stop('immediate');
	eval { $holder->quit; };
	eval { $runner->quit; };
	$node->start;
	same_as('before', "$name: after the crash the history is as before");
}

crash_at_gate(undef, 'crash while staging');
crash_at_gate(q{UPDATE inserted_count SET n = 0;
	CREATE TRIGGER count_gate BEFORE INSERT ON hist FOR EACH ROW EXECUTE FUNCTION count_gate()},
	'crash while inserting versions');
$node->safe_psql('postgres', 'DROP TRIGGER count_gate ON hist');

# the call done, its transaction open
{
	my $runner = $node->background_psql('postgres');
	$runner->query_safe('BEGIN');
	$runner->query_safe($snapshot);
	$node->stop('immediate');
	eval { $runner->quit; };
	$node->start;
	same_as('before', 'crash before the commit: the history is as before');
}

# committed, then a crash: the history is the reference
$node->safe_psql('postgres', $snapshot);
$node->stop('immediate');
$node->start;
same_as('ref', 'crash after the commit: the history is one clean call\'s');

# a rerun after recovery writes nothing
is( $node->safe_psql(
		'postgres',
		"SELECT inserted || '/' || closed || '/' || deleted FROM ($snapshot) r"),
	'0/0/0',
	'a rerun after recovery writes nothing');

# the same call through the job queue, on the history as before
$node->safe_psql('postgres', 'TRUNCATE hist; INSERT INTO hist TABLE before');
my $job = $node->safe_psql('postgres',
	"SELECT etl_submit(\$q\$$snapshot\$q\$)");
is(wait_ended($node, $job), 'succeeded', 'etl_snapshot runs as a job');
same_as('ref', 'the job leaves the clean call\'s history');

done_testing();
