# Readers of the other days during a replacement of one day: every read
# returns the right row (of the replaced day, old or new, never both), none
# fails; how long they wait for the swap is printed, not asserted (it
# depends on the machine).  (Before: the new partition was distributed at
# ATTACH, its rows copied to the workers while the parent was locked;
# readers waited 1.5-1.7 s for a 1M-row day.)
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use IdemCitus;
use ReplaceCheck;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(gettimeofday tv_interval);

my $rows = 100000;
my ($coord, @workers) = citus_cluster();
make_events($coord, 3, $rows);
$coord->safe_psql('postgres', 'ALTER SYSTEM SET idem_etl.keep_replaced = 0');
$coord->reload;

my $reader = $coord->background_psql('postgres');
my $watch = $coord->background_psql('postgres');
# point reads, as a dashboard's: a row of another day (always "old"), and
# two rows of the replaced day, ids 10 and 60000 (old and old before, new
# and none after: the new day has ids 1 to 50000)
my $other = "SELECT v FROM ev WHERE day = '2024-01-02' AND id = ";
my $replaced = q{SELECT coalesce((SELECT v FROM ev WHERE day = '2024-01-01' AND id = 10), '-') || ','
	|| coalesce((SELECT v FROM ev WHERE day = '2024-01-01' AND id = 60000), '-')};

# one read, timed in ms
sub read_ms
{
	my ($sql, $result) = @_;
	my $t0 = [gettimeofday];
	$$result = $reader->query_safe($sql);
	return 1000 * tv_interval($t0);
}

sub median
{
	my @s = sort { $a <=> $b } @_;
	return $s[$#s / 2];
}

my ($r, @idle);
push @idle, read_ms($other . (1 + $_ * 997 % $rows), \$r) for 1 .. 50;
is($r, 'old', 'the other day before the replacement');

my $swap = $coord->background_psql('postgres');
my $swappid = $swap->query_safe('SELECT pg_backend_pid()');
$swap->query_until(qr/started/, "\\echo started\nSELECT rows_loaded FROM etl_replace_partition('ev', '2024-01-01',"
	  . " \$\$SELECT '2024-01-01'::date AS day, g AS id, 'new' AS v FROM generate_series(1, $rows / 2) g\$\$);\n");

my (@during, %seen, @wrong);
my $t0 = [gettimeofday];
while (1)
{
	push @during, read_ms($other . (1 + scalar(@during) * 997 % $rows), \$r);
	push @wrong, "other day: $r" if $r ne 'old';
	read_ms($replaced, \$r);
	$seen{$r}++;
	push @wrong, "replaced day: $r" if $r ne 'old,old' && $r ne 'new,-';
	last if $watch->query_safe("SELECT state FROM pg_stat_activity WHERE pid = $swappid") eq 'idle';
	die 'the replacement did not end in 5 minutes' if tv_interval($t0) > 300;
}
$swap->quit;
is(join('; ', @wrong), '', 'every read during the replacement had the right rows');
is($reader->query_safe(q{SELECT string_agg(v || '=' || n, ',') FROM
	(SELECT v, count(*) n FROM ev WHERE day = '2024-01-01' GROUP BY v) s}), 'new=' . ($rows / 2),
	'the replaced day has the new rows');
is($reader->query_safe(q{SELECT count(*) FROM ev WHERE day = '2024-01-02' AND v = 'old'}), $rows,
	'the other day is untouched');
is(leftovers($coord, \@workers), '', 'nothing left');
diag sprintf('readers of another day: %d reads during the replacement (%.0f ms), median %.1f ms, max %.1f ms;'
	  . ' idle median %.1f ms; the replaced day read as %s',
	scalar(@during), 1000 * tv_interval($t0), median(@during),
	(sort { $b <=> $a } @during)[0], median(@idle),
	join(', ', map { "$_ ($seen{$_}x)" } sort keys %seen));
$reader->quit;
$watch->quit;

done_testing();
