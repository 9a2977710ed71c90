# 160_readme: every example in README.md runs, and does what it says
# (issue 30, point 2).
#
# Each fenced block of README.md marked ```sql, ```sh or ```bash is run, in
# the order of the README, against one cluster with idem_etl (and pg_cron,
# where it is installed) preloaded, in the database postgres: a block sees
# what the blocks before it created.  A SQL block runs with psql -X -v
# ON_ERROR_STOP=1 and must succeed; a shell block runs with bash in a scratch
# directory, with libpq's variables pointing at the cluster.  Blocks in plain
# ``` fences (signatures) are not examples and are not run.
#
# An HTML comment right before a block (blank lines between are allowed)
# says more, one directive a line; a line that starts with white space
# continues the directive above it:
#
#   <!-- test
#   skip: REASON        not run (installing software, say); a reason is required
#   setup: SQL          run SQL (the scaffolding a reader has already: tables,
#                       rows); must succeed
#   sh: COMMAND         run COMMAND with bash in the scratch directory; must
#                       succeed (run: is the same)
#   block:              run the block here (it can run twice, with a setup:
#                       between); without it, the block runs before the first
#                       expect: or run:, or after everything else
#   file: NAME          a shell block is saved as NAME instead of being run,
#                       for run: lines to run it
#   fails: SQLSTATE     the SQL block must fail with this SQLSTATE
#   expect: SQL => TEXT psql -q -At of SQL must print TEXT (one line; the
#                       last "=>" of the directive separates them)
#   wait: SQL           poll SQL until it returns true (bounded): for what
#                       the background worker does after the block
#   -->
#
# The directives run in their order.  A failed step fails the block, and the
# steps after it are not run.
#
# Without pg_cron (PostgreSQL 19, and the assert-enabled 18 of the 18-assert
# leg), a stand-in schema cron with cron.schedule and cron.job takes its
# place, so that the scheduled commands are still run: readme_test.fire(job)
# runs a scheduled job's command once, as a firing would.
#
# Besides, every link to a section of a Markdown file, in README.md, must
# lead to a heading that exists.
use strict;
use warnings;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use File::Basename;
use FindBin;
use lib $FindBin::RealBin;
use IdemEtl;

$PostgreSQL::Test::Utils::timeout_default = 120;
my $top = "$FindBin::RealBin/../..";
my $readme = "$top/README.md";

# --- the blocks and their directives
sub parse_blocks
{
	my ($path) = @_;
	my @lines = split /\n/, slurp_file($path), -1;
	my (@blocks, $comment, $in_comment, $fence, @body, $start);
	for (my $i = 0; $i < @lines; $i++)
	{
		my $l = $lines[$i];
		if (defined $fence)
		{
			if ($l =~ /^```\s*$/)
			{
				push @blocks, { lang => $fence, line => $start, text => join("\n", @body) . "\n",
					directives => $comment // [] } if $fence =~ /^(sql|sh|bash)$/;
				undef $fence;
				undef $comment;
			}
			else { push @body, $l; }
			next;
		}
		if ($in_comment)
		{
			if ($l =~ /^\s*-->\s*$/) { $in_comment = 0; next; }
			if ($l =~ /^\s+\S/ && @$comment) { $comment->[-1][1] .= "\n$l"; }
			elsif ($l =~ /^(\w+):\s?(.*)$/) { push @$comment, [ $1, $2 ]; }
			elsif ($l =~ /\S/) { die "README.md line " . ($i + 1) . ": not a directive: $l\n"; }
			next;
		}
		if ($l =~ /^<!-- test\s*$/) { $comment = []; $in_comment = 1; next; }
		if ($l =~ /^```(\S*)/) { $fence = $1; @body = (); $start = $i + 1; next; }
		# a directive comment applies to the next block only, across blank lines
		undef $comment if $l =~ /\S/;
	}
	return @blocks;
}

# GitHub's anchors of a Markdown file's headings
sub anchors
{
	my ($path) = @_;
	my (%seen, %anchors, $fenced);
	for my $l (split /\n/, slurp_file($path))
	{
		$fenced = !$fenced if $l =~ /^```/;
		next if $fenced || $l !~ /^#+\s+(.*)$/;
		(my $a = lc $1) =~ s/[^\w\- ]//g;
		$a =~ s/ /-/g;
		my $n = $seen{$a}++;
		$anchors{ $n ? "$a-$n" : $a } = 1;
	}
	return \%anchors;
}

my @blocks = parse_blocks($readme);
cmp_ok(scalar @blocks, '>=', 10, 'README.md has its examples (' . scalar(@blocks) . ' blocks)');

# --- links to sections
{
	(my $text = slurp_file($readme)) =~ s/^```.*?^```//msg;
	my @bad;
	while ($text =~ /\]\(([^)\s]+)\)/g)
	{
		my $link = $1;
		next if $link =~ m{^[a-z]+://};
		my ($file, $anchor) = split /#/, $link, 2;
		my $path = $file eq '' ? $readme : "$top/$file";
		if (!-e $path) { push @bad, "$link (no such file)"; next; }
		push @bad, "$link (no such heading)"
		  if defined $anchor && $path =~ /\.md$/ && !anchors($path)->{$anchor};
	}
	is(join(', ', @bad), '', 'every link of README.md leads somewhere');
}

# --- the cluster
my $cron = -e PostgreSQL::Test::Cluster->new('probe')->config_data('--pkglibdir') . '/pg_cron.so';
my $node = PostgreSQL::Test::Cluster->new('readme');
$node->init;
$node->append_conf('postgresql.conf', join("\n",
	"shared_preload_libraries = '" . ($cron ? 'pg_cron,' : '') . "idem_etl'",
	"idem_etl.naptime = '100ms'", "idem_etl.max_backoff = '1s'",
	$cron ? ("cron.database_name = 'postgres'", "cron.host = '" . $node->host . "'") : ()) . "\n");
$node->start;
# With pg_cron, the jobs the examples schedule are made inactive as they are
# scheduled: a test running at 02:15 must not see them fire by themselves.
$node->safe_psql('postgres', $cron ? q{
	CREATE EXTENSION pg_cron;
	CREATE FUNCTION public.readme_test_inactive() RETURNS trigger LANGUAGE plpgsql
	AS $$BEGIN NEW.active := false; RETURN NEW; END$$;
	DO $$BEGIN
	    IF EXISTS (SELECT FROM pg_attribute WHERE attrelid = 'cron.job'::regclass AND attname = 'active') THEN
	        CREATE TRIGGER readme_test_inactive BEFORE INSERT ON cron.job
	        FOR EACH ROW EXECUTE FUNCTION public.readme_test_inactive();
	    END IF;
	END$$;
} : q{
	CREATE SCHEMA cron;
	CREATE TABLE cron.job (jobid bigserial PRIMARY KEY, schedule text NOT NULL,
	                       command text NOT NULL, jobname text UNIQUE);
	CREATE FUNCTION cron.schedule(job_name text, schedule text, command text) RETURNS bigint
	LANGUAGE sql AS $$
	    INSERT INTO cron.job (jobname, schedule, command) VALUES (job_name, schedule, command)
	    ON CONFLICT (jobname) DO UPDATE SET schedule = excluded.schedule, command = excluded.command
	    RETURNING jobid $$;
});
$node->safe_psql('postgres', q{
	CREATE SCHEMA readme_test;
	CREATE FUNCTION readme_test.fire(job_to_fire text) RETURNS void LANGUAGE plpgsql AS $$
	DECLARE c text;
	BEGIN
	    SELECT command INTO STRICT c FROM cron.job WHERE jobname = job_to_fire;
	    EXECUTE c;
	END $$;
});
diag($cron ? 'pg_cron is installed: the cron examples use it'
	: 'no pg_cron here: the cron examples use a stand-in cron.schedule');

my $scratch = PostgreSQL::Test::Utils::tempdir;
$ENV{PGHOST} = $node->host;
$ENV{PGPORT} = $node->port;
$ENV{PGDATABASE} = 'postgres';
$ENV{PGUSER} = (getpwuid($<))[0];
delete $ENV{PGOPTIONS};

sub run_in_scratch
{
	my ($cmd, $stdin) = @_;
	my ($out, $err) = ('', '');
	my $ok = IPC::Run::run([ 'bash', '-c', "cd '$scratch' && $cmd" ],
		'<', \($stdin // ''), '>', \$out, '2>', \$err);
	return ($ok, $out, $err);
}

sub psql_run
{
	my ($sql, @opts) = @_;
	my ($out, $err) = ('', '');
	my $ok = IPC::Run::run([ 'psql', '-X', '-v', 'ON_ERROR_STOP=1', @opts, '-f', '-' ],
		'<', \$sql, '>', \$out, '2>', \$err);
	return ($ok, $out, $err);
}

# Run a block: a SQL block through psql, a shell block with bash, or saved
# as a file (file:).  Returns (ok, why).
sub run_block
{
	my ($b, $d) = @_;
	if ($b->{lang} eq 'sql')
	{
		my ($r, $out, $err) = psql_run($b->{text}, '-v', 'VERBOSITY=verbose');
		if ($d->{fails})
		{
			my $state = $d->{fails}[0];
			return (0, "did not fail with $state: $err")
			  if $r || $err !~ /ERROR:  \Q$state\E:/;
			return (1, '');
		}
		return $r ? (1, '') : (0, "failed: $err");
	}
	if ($d->{file})
	{
		open my $fh, '>', "$scratch/$d->{file}[0]" or die $!;
		print $fh $b->{text};
		close $fh;
		return (1, '');
	}
	my ($r, $out, $err) = run_in_scratch('bash -eu', $b->{text});
	return $r ? (1, '') : (0, "failed: $err$out");
}

for my $b (@blocks)
{
	my $name = "README.md line $b->{line} ($b->{lang})";
	my @steps = @{ $b->{directives} };
	my %d;
	push @{ $d{ $_->[0] } }, $_->[1] for @steps;
	for my $k (keys %d)
	{
		die "$name: unknown directive $k\n"
		  unless $k =~ /^(skip|setup|sh|file|block|run|fails|expect|wait)$/;
	}
	if ($d{skip})
	{
		SKIP: { skip "$name: $d{skip}[0]", 1; }
		next;
	}
	# the block runs where "block:" says, else before the first expect: or run:
	if (!$d{block})
	{
		my $at = 0;
		$at++ while $at < @steps && $steps[$at][0] !~ /^(expect|run|wait)$/;
		splice @steps, $at, 0, [ 'block', '' ];
	}
	my ($ok, $why) = (1, '');
	for my $step (@steps)
	{
		my ($k, $v) = @$step;
		if ($k eq 'setup')
		{
			my ($r, $out, $err) = psql_run($v, '-q');
			($ok, $why) = (0, "setup failed: $v: $err") unless $r;
		}
		elsif ($k eq 'sh' || $k eq 'run')
		{
			my ($r, $out, $err) = run_in_scratch($v);
			($ok, $why) = (0, "$k failed: $v: $err$out") unless $r;
		}
		elsif ($k eq 'block')
		{
			($ok, $why) = run_block($b, \%d);
			pass("$name runs") if $ok;
		}
		elsif ($k eq 'wait')
		{
			($ok, $why) = (0, "wait: $v: still not true after the timeout")
			  unless $node->poll_query_until('postgres', $v);
		}
		elsif ($k eq 'expect')
		{
			my ($sql, $want) = $v =~ /^(.*)=>[ \t]*(.*?)\s*$/s
			  or die "$name: expect: SQL => TEXT\n";
			my ($r, $out, $err) = psql_run($sql, '-q', '-At', '-v', 'VERBOSITY=verbose');
			chomp $out;
			$sql =~ s/\s+/ /g;
			is($r ? $out : "ERROR $err", $want, "$name: $sql");
		}
		last unless $ok;
	}
	if (!$ok)
	{
		fail($name);
		diag("$name $why");
	}
}

no_crash($node, 'no server process crashed');
$node->stop;
done_testing();
