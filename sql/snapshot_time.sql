--
-- snapshot_time: versions are dated by the data (updated_at) or by the
-- run's timestamp (valid_at), never by the clock: a rerun of a date gives
-- the same history, whatever TimeZone the session has.  valid_at needs
-- timestamptz validity columns; with updated_at the validity columns take
-- its type, so a naive timestamp never goes through a time zone.
--
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS idem_etl CASCADE;
CREATE EXTENSION idem_etl;
DROP SCHEMA IF EXISTS snapt CASCADE;
RESET client_min_messages;
CREATE SCHEMA snapt;
SET DateStyle = ISO;
\set schema snapt
\i sql/include/err.sql

CREATE TABLE snapt.dim (id int, v text, valid_from timestamptz, valid_to timestamptz);
CREATE TABLE snapt.src (id int, v text);
INSERT INTO snapt.src VALUES (1, 'a'), (2, 'b');

-- the run of 2026-03-29 00:00 UTC, applied under Tokyo's time zone ...
SET TimeZone = 'Asia/Tokyo';
SELECT inserted FROM etl_snapshot('snapt.dim', 'SELECT * FROM snapt.src', '{id}',
                                  valid_at => '2026-03-29 00:00:00+00');
UPDATE snapt.src SET v = 'b2' WHERE id = 2;
-- ... the next under Los Angeles', with the time written in local time
SET TimeZone = 'America/Los_Angeles';
SELECT inserted, closed FROM etl_snapshot('snapt.dim', 'SELECT * FROM snapt.src', '{id}',
                                          valid_at => '2026-03-29 17:00:00');
SET TimeZone = 'UTC';
SELECT id, v, valid_from, valid_to FROM snapt.dim ORDER BY id, valid_from;
-- a rerun of both dates, under yet another time zone: the same history (the
-- first date's rows are found among the stored versions)
SET TimeZone = 'Europe/Berlin';
CREATE TABLE snapt.before AS SELECT ctid AS row_ctid FROM snapt.dim;
UPDATE snapt.src SET v = 'b' WHERE id = 2;
SELECT inserted, closed, unchanged, late FROM etl_snapshot('snapt.dim', 'SELECT * FROM snapt.src', '{id}',
                                                           valid_at => '2026-03-29 01:00:00+01');
UPDATE snapt.src SET v = 'b2' WHERE id = 2;
SELECT inserted, closed, unchanged, late FROM etl_snapshot('snapt.dim', 'SELECT * FROM snapt.src', '{id}',
                                                           valid_at => '2026-03-30 02:00:00+02');
SELECT count(*) AS moved FROM snapt.dim d FULL JOIN snapt.before b ON b.row_ctid = d.ctid
 WHERE b.row_ctid IS NULL OR d.ctid IS NULL;

-- a naive timestamp column: versions dated by updated_at, as they are
CREATE TABLE snapt.naive (id int, v text, changed timestamp, valid_from timestamp, valid_to timestamp);
SET TimeZone = 'Asia/Kolkata';
SELECT inserted FROM etl_snapshot('snapt.naive', $q$SELECT 1 AS id, 'a' AS v, '2026-01-01 10:00'::timestamp AS changed$q$,
                                  '{id}', updated_at => 'changed');
SET TimeZone = 'America/New_York';
SELECT inserted, unchanged FROM etl_snapshot('snapt.naive', $q$SELECT 1 AS id, 'a' AS v, '2026-01-01 10:00'::timestamp AS changed$q$,
                                             '{id}', updated_at => 'changed');
SELECT id, v, valid_from, valid_to FROM snapt.naive;
-- valid_at into naive timestamps would move with TimeZone: refused
SELECT * FROM snapt.err($$SELECT * FROM etl_snapshot('snapt.naive', 'SELECT 1 AS id', '{id}', valid_at => '2026-01-02')$$);
-- updated_at of another type than the validity columns: refused
SELECT * FROM snapt.err($$SELECT * FROM etl_snapshot('snapt.naive', 'SELECT 1 AS id', '{id}', updated_at => 'v')$$);
-- neither updated_at nor valid_at: refused, never now()
SELECT * FROM snapt.err($$SELECT * FROM etl_snapshot('snapt.dim', 'SELECT * FROM snapt.src', '{id}')$$);
SELECT * FROM snapt.err($$SELECT * FROM etl_snapshot('snapt.dim', 'SELECT * FROM snapt.src', '{id}', valid_at => 'infinity')$$);

DROP SCHEMA snapt CASCADE;
