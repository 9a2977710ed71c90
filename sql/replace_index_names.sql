--
-- replace_index_names: the new partition gets every index of the partition
-- it replaces (those behind PRIMARY KEY, UNIQUE and EXCLUDE constraints as
-- constraints, partial and expression indexes as they were), and the
-- indexes are named after the partition, as CREATE INDEX would name them
-- on a table of its name: a name already taken elsewhere in the schema gets
-- a number, and the partition's name is shortened to keep a name within 63
-- bytes, never inside a UTF-8 character.  (Before, a taken name was left
-- as the loaded table named it, and a long name was cut at its end: two
-- indexes could be cut to the same name, and the replacement failed.)
--
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS idem_etl CASCADE;
CREATE EXTENSION idem_etl;
DROP SCHEMA IF EXISTS rix CASCADE;
RESET client_min_messages;
CREATE SCHEMA rix;

CREATE TABLE rix.ev (d date NOT NULL, id int NOT NULL, code text, "éé" text,
    PRIMARY KEY (d, id), UNIQUE (d, code)) PARTITION BY RANGE (d);
CREATE INDEX ev_payload_idx ON rix.ev ("éé");
CREATE TABLE rix.ev_1 PARTITION OF rix.ev FOR VALUES FROM ('2026-11-01') TO ('2026-11-02');
CREATE INDEX ev_1_partial ON rix.ev_1 (id) WHERE "éé" IS NOT NULL;
CREATE INDEX ev_1_expr ON rix.ev_1 (lower(code));
ALTER TABLE rix.ev_1 ADD CONSTRAINT ev_1_excl EXCLUDE USING btree (id WITH =);

-- a table's indexes: name (the loaded table's numbers masked), bytes,
-- definition without the name, type of the constraint behind it
CREATE FUNCTION rix.indexes(t regclass)
    RETURNS TABLE (name text, bytes int, def text, contype "char") LANGUAGE sql AS $$
    SELECT regexp_replace(c.relname, 'idem_etl_load_[0-9]+_[0-9]+', 'idem_etl_load_N'),
           octet_length(c.relname::text),
           regexp_replace(pg_get_indexdef(i.indexrelid), 'INDEX \S+ ON \S+', 'INDEX ON'), k.contype
      FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
      LEFT JOIN pg_constraint k ON k.conindid = i.indexrelid AND k.conrelid = i.indrelid
     WHERE i.indrelid = t ORDER BY 1 $$;
SELECT * FROM rix.indexes('rix.ev_1');

SELECT partition_table, rows_loaded FROM etl_replace_partition('rix.ev', '2026-11-01',
    $$SELECT '2026-11-01'::date AS d, 1 AS id, 'a' AS code, 'x' AS "éé"$$);
SELECT * FROM rix.indexes('rix.ev_1');

-- ev_1_lower_idx is taken by another table's index: ev_1_lower_idx1
CREATE TABLE rix.other (code text);
ALTER INDEX rix.ev_1_lower_idx RENAME TO ev_1_expr;
CREATE INDEX ev_1_lower_idx ON rix.other (code);
SELECT partition_table, rows_loaded FROM etl_replace_partition('rix.ev', '2026-11-01',
    $$SELECT '2026-11-01'::date AS d, 2 AS id, 'b' AS code, 'y' AS "éé"$$);
SELECT * FROM rix.indexes('rix.ev_1');

-- a partition name of 62 bytes: each index name keeps its whole label
-- ("_pkey", "_d_code_key", "_éé_idx"), and the partition's part is
-- shortened, by whole characters
CREATE TABLE rix."p_éééééééééééééééééééééééééééééé" PARTITION OF rix.ev
    FOR VALUES FROM ('2026-11-02') TO ('2026-11-03');
SELECT octet_length('p_éééééééééééééééééééééééééééééé') AS partition_name_bytes;
SELECT partition_table, rows_loaded FROM etl_replace_partition('rix.ev', '2026-11-02',
    $$SELECT '2026-11-02'::date AS d, 1 AS id, 'a' AS code, 'x' AS "éé"$$);
SELECT * FROM rix.indexes('rix."p_éééééééééééééééééééééééééééééé"');

SET client_min_messages = warning;
DROP SCHEMA rix CASCADE;
