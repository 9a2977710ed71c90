-- idem_etl benchmark: what the timed procedures of every workload share
-- (bench_timed in setup.sql, part_timed in part-setup.sql, wl_timed in
-- wl-common.sql, mx_timed in matrix-setup.sql).  Run once per benchmark by
-- bench-in-cluster, before any workload's own setup.
\set ON_ERROR_STOP 1
SET client_min_messages = warning;

-- Runs the statements of a list in order, %REP% replaced by the repetition
-- number, and returns the row of the last SELECT among them as JSON (the
-- result row of an etl_* call), NULL when there is none.  A function, so it
-- cannot COMMIT: the caller, a procedure, takes the time and commits around
-- it (the call costs microseconds, nothing beside the statements it times).
CREATE OR REPLACE FUNCTION bench_exec(p_stmts text[], p_rep int) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    s   text;
    r   record;
    res text;
BEGIN
    FOREACH s IN ARRAY p_stmts LOOP
        s := replace(s, '%REP%', p_rep::text);
        IF s ~* '^\s*select' THEN
            EXECUTE s INTO r;
            res := row_to_json(r)::text;
        ELSE
            EXECUTE s;
        END IF;
    END LOOP;
    RETURN res;
END
$$;
