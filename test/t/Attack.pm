# Attack: the harness shared by the security attack tests (100, 101).
#
# The attacker is the ordinary login role "attacker" owning schema evil in
# each database; plant() puts there a logging version of the operators and
# functions idem_etl uses, each recording current_user (and making the
# attacker superuser when it runs as one).  The test's own sessions must not
# run the attacker's code themselves: client options override the role and
# database settings the attacker controls (pg_catalog is searched first
# when not listed); background workers do not see this, and the attacker's
# sessions clear it, so its own settings apply to them.
#
#     my $node = new_node('name');
#     Attack::use_node($node);
package Attack;

use strict;
use warnings;
use Exporter 'import';
use PostgreSQL::Test::Utils;
use Time::HiRes qw(usleep);
use Test::More;
use IdemEtl;

our @EXPORT = qw(use_node cs su as try_as sqlstate plant attacker_not_superuser
  never_ran_as_other new_case);

my $node;
my $SAFE = '-c search_path=public';

sub use_node
{
	($node) = @_;
	$ENV{PGOPTIONS} = $SAFE;
	return $node;
}

sub cs
{
	my ($db, $role) = @_;
	return $node->connstr($db) . " user=$role";
}

# superuser, immune to the attacker's settings
sub su
{
	my ($db, $sql) = @_;
	return $node->safe_psql($db, $sql);
}

# as a role; the attacker with its own (role and database) settings
sub as
{
	my ($role, $db, $sql) = @_;
	local $ENV{PGOPTIONS} = $role eq 'attacker' ? '' : $SAFE;
	return $node->safe_psql($db, $sql, connstr => cs($db, $role));
}

# as a role, expecting maybe an error: (exit code, stdout, stderr verbose)
sub try_as
{
	my ($role, $db, $sql) = @_;
	local $ENV{PGOPTIONS} = $role eq 'attacker' ? '' : $SAFE;
	return $node->psql($db, "\\set VERBOSITY verbose\n$sql",
		connstr => cs($db, $role));
}

sub sqlstate
{
	my ($err) = @_;
	return $err =~ /ERROR:\s+([0-9A-Z]{5}):/ ? $1 : 'no error';
}

# --- the attacker's planted code

my @ops = (
	[ '=',  'bigint',      'bigint',           'boolean' ],
	[ '=',  'integer',     'integer',          'boolean' ],
	[ '=',  'text',        'text',             'boolean' ],
	[ '=',  'name',        'name',             'boolean' ],
	[ '=',  'oid',         'oid',              'boolean' ],
	[ '<>', 'text',        'text',             'boolean' ],
	[ '<',  'integer',     'integer',          'boolean' ],
	[ '<=', 'integer',     'integer',          'boolean' ],
	[ '<',  'timestamptz', 'timestamptz',      'boolean' ],
	[ '<=', 'timestamptz', 'timestamptz',      'boolean' ],
	[ '>=', 'timestamptz', 'timestamptz',      'boolean' ],
	[ '>',  'timestamptz', 'timestamptz',      'boolean' ],
	[ '+',  'integer',     'integer',          'integer' ],
	[ '-',  'integer',     'integer',          'integer' ],
	[ '+',  'timestamptz', 'interval',         'timestamptz' ],
	[ '-',  'timestamptz', 'interval',         'timestamptz' ],
	[ '^', 'double precision', 'double precision', 'double precision' ],
	[ '||', 'text',        'text',             'text' ]);

# Run as the attacker in a database where the superuser made
# "CREATE SCHEMA evil AUTHORIZATION attacker".  Every planted function is
# a plain (SECURITY INVOKER) function: it runs with its caller's rights.
sub plant
{
	my ($db) = @_;
	my $sql = q{
	CREATE TABLE evil.log (fn text, cur name, sess name,
	                       at timestamptz DEFAULT pg_catalog.clock_timestamp());
	GRANT USAGE ON SCHEMA evil TO PUBLIC;
	GRANT SELECT, INSERT ON evil.log TO PUBLIC;
	CREATE FUNCTION evil.pwn(fn text) RETURNS void LANGUAGE plpgsql AS $f$
	BEGIN
	    RAISE LOG 'idem_etl security test: attacker code % ran as current_user=% session_user=%',
	        fn, current_user, session_user;
	    INSERT INTO evil.log (fn, cur, sess) VALUES (fn, current_user, session_user);
	    IF (SELECT r.rolsuper FROM pg_catalog.pg_roles r
	         WHERE r.rolname OPERATOR(pg_catalog.=) current_user) THEN
	        ALTER ROLE attacker SUPERUSER;
	    END IF;
	END $f$;
	};
	my $i = 0;
	for my $op (@ops)
	{
		my ($o, $l, $r, $ret) = @$op;
		$i++;
		$sql .= qq{
	CREATE FUNCTION evil.op$i($l, $r) RETURNS $ret LANGUAGE plpgsql AS \$f\$
	BEGIN PERFORM evil.pwn('$o($l, $r)'); RETURN \$1 OPERATOR(pg_catalog.$o) \$2; END \$f\$;
	CREATE OPERATOR evil.$o (leftarg = $l, rightarg = $r, function = evil.op$i);
};
	}
	$sql .= q{
	CREATE FUNCTION evil.count_sfunc(bigint) RETURNS bigint LANGUAGE plpgsql AS $f$
	BEGIN PERFORM evil.pwn('count(*) sfunc'); RETURN $1 OPERATOR(pg_catalog.+) 1; END $f$;
	CREATE FUNCTION evil.count_final(bigint) RETURNS bigint LANGUAGE plpgsql AS $f$
	BEGIN PERFORM evil.pwn('count(*) final'); RETURN $1; END $f$;
	CREATE AGGREGATE evil.count(*) (sfunc = evil.count_sfunc, stype = bigint,
	                                initcond = '0', finalfunc = evil.count_final);
	CREATE FUNCTION evil.now() RETURNS timestamptz LANGUAGE plpgsql AS $f$
	BEGIN PERFORM evil.pwn('now()'); RETURN pg_catalog.now(); END $f$;
	CREATE FUNCTION evil.quote_ident(text) RETURNS text LANGUAGE plpgsql AS $f$
	BEGIN PERFORM evil.pwn('quote_ident(text)'); RETURN pg_catalog.quote_ident($1); END $f$;
	CREATE FUNCTION evil.to_regclass(text) RETURNS regclass LANGUAGE plpgsql AS $f$
	BEGIN PERFORM evil.pwn('to_regclass(text)'); RETURN pg_catalog.to_regclass($1); END $f$;
	CREATE FUNCTION evil.pg_cancel_backend(integer) RETURNS boolean LANGUAGE plpgsql AS $f$
	BEGIN PERFORM evil.pwn('pg_cancel_backend(integer)'); RETURN pg_catalog.pg_cancel_backend($1); END $f$;
	CREATE FUNCTION evil.make_interval(years int DEFAULT 0, months int DEFAULT 0,
	        weeks int DEFAULT 0, days int DEFAULT 0, hours int DEFAULT 0,
	        mins int DEFAULT 0, secs double precision DEFAULT 0) RETURNS interval
	    LANGUAGE plpgsql AS $f$
	BEGIN PERFORM evil.pwn('make_interval');
	      RETURN pg_catalog.make_interval(years, months, weeks, days, hours, mins, secs); END $f$;
	};
	as('attacker', $db, $sql);
}

# --- the checks every case makes

sub attacker_not_superuser
{
	my ($case) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	is(su('postgres', "SELECT rolsuper FROM pg_roles WHERE rolname = 'attacker'"),
		'f', "$case: the attacker is not a superuser");
}

# the planted code never ran as another role: evil.log of the database and
# the server log from the offset on
sub never_ran_as_other
{
	my ($case, $db, $offset) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	is( su( $db, q{
		SELECT coalesce(string_agg(DISTINCT fn || ' as ' || cur || ' (session ' || sess || ')', '; '), '')
		  FROM evil.log WHERE cur <> 'attacker'}),
		'',
		"$case: the attacker's code never ran as another role (evil.log in $db)");
	my @lines =
	  grep { /attacker code .* ran as current_user=(\S+)/ && $1 ne 'attacker' }
	  split /\n/, slurp_file($node->logfile, $offset);
	ok(!@lines, "$case: nor per the server log")
	  or diag join("\n", @lines[ 0 .. ($#lines < 4 ? $#lines : 4) ]);
	no_crash($node, "$case: no server process crashed", $offset);
}

# a new case: the attacker is an ordinary role again, evil.log empty
sub new_case
{
	my (@dbs) = @_;
	su('postgres', 'ALTER ROLE attacker NOSUPERUSER');
	su($_, 'TRUNCATE evil.log') for @dbs;
	return -s $node->logfile;
}

1;
