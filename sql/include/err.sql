\set ECHO none
-- Included by sql/*.sql after "\set schema NAME" (pg_regress runs psql -a in
-- the top directory; this file is not echoed, ECHO is back to all at its end).
--
-- NAME.err(stmt): run stmt, print its SQLSTATE, message, detail and hint; the
-- name of the extension's load table (which holds a process id) is shown as
-- idem_etl_load_N
CREATE FUNCTION :"schema".err(stmt text) RETURNS SETOF text LANGUAGE plpgsql AS $f$
DECLARE st text; msg text; det text; hnt text;
BEGIN
    EXECUTE stmt;
    RETURN NEXT 'no error';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
                            det = PG_EXCEPTION_DETAIL, hnt = PG_EXCEPTION_HINT;
    msg := regexp_replace(msg, 'idem_etl_load_[0-9]+(_[0-9]+)*', 'idem_etl_load_N', 'g');
    RETURN NEXT 'SQLSTATE ' || st;
    RETURN NEXT 'message: ' || msg;
    IF det <> '' THEN RETURN NEXT 'detail: ' || det; END IF;
    IF hnt <> '' THEN RETURN NEXT 'hint: ' || hnt; END IF;
END
$f$;
\set ECHO all
