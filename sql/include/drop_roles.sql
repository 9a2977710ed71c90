\set ECHO none
-- Included by sql/*.sql after "\set roles {ROLE,...}" (pg_regress runs psql -a
-- in the top directory; this file is not echoed, ECHO is back to all at its end).
--
-- Drops each role of the list that exists, in that order, with what it owns
-- in this database.
SELECT format('DROP OWNED BY %I', r), format('DROP ROLE %I', r)
  FROM unnest(:'roles'::text[]) WITH ORDINALITY AS u(r, n)
 WHERE EXISTS (SELECT FROM pg_roles WHERE rolname = r) ORDER BY n \gexec
\set ECHO all
