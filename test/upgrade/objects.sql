-- A canonical text listing of the objects of extension idem_etl in the
-- current database: one line per fact, sorted, no OIDs.  Two databases
-- whose listings are equal have the same extension objects.  Used by
-- test/t/130_upgrade.pl to check that ALTER EXTENSION idem_etl UPDATE gives
-- exactly what a fresh CREATE EXTENSION gives; generic, so that it needs no
-- change when objects are added (any object of any kind that is a member of
-- the extension, with what hangs off its tables).
--
--   psql -XAtq -v ON_ERROR_STOP=1 -f test/upgrade/objects.sql DBNAME
--
-- Listed: the extension (version, schema, relocatable, config tables, its
-- comment); every member object by its identity, owner and ACL; functions by
-- pg_get_functiondef; tables, views, sequences: kind, options, row security,
-- columns in order (type, NOT NULL, default, identity, generated, collation,
-- storage, statistics target, ACL), constraints, indexes, policies,
-- triggers, rules, view definitions, sequence parameters; types: enum labels,
-- domain constraints; comments on all of these; initial privileges
-- (pg_init_privs, what pg_dump relies on for extension members).
-- An ACL as sorted "grantee:privilege[*] by grantor" items.
CREATE FUNCTION pg_temp.acl_text(pg_catalog.aclitem[]) RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT pg_catalog.string_agg(i, ' ' ORDER BY i COLLATE "C")
      FROM pg_catalog.aclexplode($1) x,
           LATERAL pg_catalog.format('%s:%s%s by %s',
               CASE WHEN x.grantee = 0 THEN 'PUBLIC' ELSE pg_catalog.pg_get_userbyid(x.grantee) END,
               x.privilege_type, CASE WHEN x.is_grantable THEN '*' ELSE '' END,
               pg_catalog.pg_get_userbyid(x.grantor)) i
$$;

WITH ext AS (
    SELECT * FROM pg_catalog.pg_extension WHERE extname = 'idem_etl'
),
member AS (
    SELECT d.classid, d.objid
      FROM pg_catalog.pg_depend d, ext
     WHERE d.refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass
       AND d.refobjid = ext.oid AND d.deptype = 'e'
),
rel AS (        -- member relations and the sequences of their identity columns
                -- (TOAST tables are left out: their names contain OIDs)
    SELECT objid AS oid FROM member WHERE classid = 'pg_catalog.pg_class'::pg_catalog.regclass
    UNION
    SELECT d.objid FROM pg_catalog.pg_depend d, member m, pg_catalog.pg_class s
     WHERE m.classid = 'pg_catalog.pg_class'::pg_catalog.regclass
       AND s.oid = d.objid AND s.relkind = 'S'
       AND d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass
       AND d.refclassid = 'pg_catalog.pg_class'::pg_catalog.regclass
       AND d.refobjid = m.objid AND d.deptype IN ('a', 'i')
),
obj AS (        -- every object described below, for comments
    SELECT classid, objid, 0 AS subid FROM member
    UNION SELECT 'pg_catalog.pg_class'::pg_catalog.regclass, oid, 0 FROM rel
    UNION SELECT 'pg_catalog.pg_class'::pg_catalog.regclass, i.indexrelid, 0
            FROM pg_catalog.pg_index i WHERE i.indrelid IN (SELECT oid FROM rel)
    UNION SELECT 'pg_catalog.pg_constraint'::pg_catalog.regclass, c.oid, 0
            FROM pg_catalog.pg_constraint c
           WHERE c.conrelid IN (SELECT oid FROM rel)
              OR c.contypid IN (SELECT objid FROM member WHERE classid = 'pg_catalog.pg_type'::pg_catalog.regclass)
    UNION SELECT 'pg_catalog.pg_policy'::pg_catalog.regclass, p.oid, 0
            FROM pg_catalog.pg_policy p WHERE p.polrelid IN (SELECT oid FROM rel)
    UNION SELECT 'pg_catalog.pg_trigger'::pg_catalog.regclass, t.oid, 0
            FROM pg_catalog.pg_trigger t WHERE t.tgrelid IN (SELECT oid FROM rel)
    UNION SELECT 'pg_catalog.pg_rewrite'::pg_catalog.regclass, r.oid, 0
            FROM pg_catalog.pg_rewrite r WHERE r.ev_class IN (SELECT oid FROM rel)
),
ident AS (
    SELECT o.classid, o.objid, (pg_catalog.pg_identify_object(o.classid, o.objid, 0)).*
      FROM obj o
),
lines AS (
    -- the extension itself
    SELECT pg_catalog.format('extension version=%s schema=%s relocatable=%s config=%s',
               e.extversion, e.extnamespace::pg_catalog.regnamespace, e.extrelocatable,
               (SELECT pg_catalog.string_agg(pg_catalog.format('%s[%s]', c::pg_catalog.regclass,
                                             coalesce(e.extcondition[i], '')), ',' ORDER BY c::pg_catalog.regclass::pg_catalog.text)
                  FROM pg_catalog.unnest(e.extconfig) WITH ORDINALITY u(c, i))) AS line
      FROM ext e
    UNION ALL
    SELECT pg_catalog.format('extension comment: %s',
               pg_catalog.obj_description(e.oid, 'pg_extension'))
      FROM ext e
    -- every member: identity and owner
    UNION ALL
    SELECT pg_catalog.format('member %s %s', i.type, i.identity)
      FROM member m, LATERAL pg_catalog.pg_identify_object(m.classid, m.objid, 0) i
    -- schemas
    UNION ALL
    SELECT pg_catalog.format('schema %I owner=%s acl=%s', n.nspname,
               pg_catalog.pg_get_userbyid(n.nspowner), a.txt)
      FROM member m JOIN pg_catalog.pg_namespace n ON n.oid = m.objid
      CROSS JOIN LATERAL (SELECT pg_temp.acl_text(n.nspacl) AS txt) a
     WHERE m.classid = 'pg_catalog.pg_namespace'::pg_catalog.regclass
    -- functions and procedures: the whole definition
    UNION ALL
    SELECT pg_catalog.format('function %s owner=%s acl=%s%s%s', p.oid::pg_catalog.regprocedure,
               pg_catalog.pg_get_userbyid(p.proowner), a.txt, E'\n',
               CASE WHEN p.prokind = 'a' THEN 'aggregate'
                    ELSE pg_catalog.pg_get_functiondef(p.oid) END)
      FROM member m JOIN pg_catalog.pg_proc p ON p.oid = m.objid
      CROSS JOIN LATERAL (SELECT pg_temp.acl_text(p.proacl) AS txt) a
     WHERE m.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass
    -- relations
    UNION ALL
    SELECT pg_catalog.format('relation %s kind=%s persistence=%s owner=%s acl=%s options=%s rls=%s force_rls=%s replident=%s partitioned=%s',
               c.oid::pg_catalog.regclass, c.relkind, c.relpersistence,
               pg_catalog.pg_get_userbyid(c.relowner), a.txt, c.reloptions,
               c.relrowsecurity, c.relforcerowsecurity, c.relreplident,
               CASE WHEN c.relkind = 'p' THEN pg_catalog.pg_get_partkeydef(c.oid) END)
      FROM rel r JOIN pg_catalog.pg_class c ON c.oid = r.oid
      CROSS JOIN LATERAL (SELECT pg_temp.acl_text(c.relacl) AS txt) a
    UNION ALL
    SELECT pg_catalog.format('column %s #%s %I %s notnull=%s default=%s identity=%s generated=%s collation=%s storage=%s stats=%s acl=%s',
               c.oid::pg_catalog.regclass,
               pg_catalog.row_number() OVER (PARTITION BY c.oid ORDER BY t.attnum),
               t.attname, pg_catalog.format_type(t.atttypid, t.atttypmod), t.attnotnull,
               pg_catalog.pg_get_expr(d.adbin, d.adrelid), t.attidentity, t.attgenerated,
               CASE WHEN t.attcollation <> 0 THEN t.attcollation::pg_catalog.regcollation::pg_catalog.text END,
               t.attstorage, t.attstattarget, a.txt)
      FROM rel r JOIN pg_catalog.pg_class c ON c.oid = r.oid
      JOIN pg_catalog.pg_attribute t ON t.attrelid = c.oid AND t.attnum > 0 AND NOT t.attisdropped
      LEFT JOIN pg_catalog.pg_attrdef d ON d.adrelid = t.attrelid AND d.adnum = t.attnum
      CROSS JOIN LATERAL (SELECT pg_temp.acl_text(t.attacl) AS txt) a
    UNION ALL
    SELECT pg_catalog.format('column comment %s.%I: %s', c.oid::pg_catalog.regclass, t.attname,
               pg_catalog.col_description(c.oid, t.attnum))
      FROM rel r JOIN pg_catalog.pg_class c ON c.oid = r.oid
      JOIN pg_catalog.pg_attribute t ON t.attrelid = c.oid AND t.attnum > 0 AND NOT t.attisdropped
     WHERE pg_catalog.col_description(c.oid, t.attnum) IS NOT NULL
    UNION ALL
    SELECT pg_catalog.format('index %s', pg_catalog.pg_get_indexdef(i.indexrelid))
      FROM pg_catalog.pg_index i WHERE i.indrelid IN (SELECT oid FROM rel)
    UNION ALL
    SELECT pg_catalog.format('constraint %s %I %s deferrable=%s deferred=%s validated=%s',
               coalesce(c.conrelid::pg_catalog.regclass::pg_catalog.text,
                        c.contypid::pg_catalog.regtype::pg_catalog.text),
               c.conname, pg_catalog.pg_get_constraintdef(c.oid),
               c.condeferrable, c.condeferred, c.convalidated)
      FROM pg_catalog.pg_constraint c
     WHERE c.conrelid IN (SELECT oid FROM rel)
        OR c.contypid IN (SELECT objid FROM member WHERE classid = 'pg_catalog.pg_type'::pg_catalog.regclass)
    UNION ALL
    SELECT pg_catalog.format('policy %I on %s cmd=%s permissive=%s roles=%s using=%s check=%s',
               p.polname, p.polrelid::pg_catalog.regclass, p.polcmd, p.polpermissive,
               (SELECT pg_catalog.string_agg(n, ',' ORDER BY n COLLATE "C")
                  FROM pg_catalog.unnest(p.polroles) r,
                       LATERAL (SELECT CASE WHEN r = 0 THEN 'PUBLIC' ELSE pg_catalog.pg_get_userbyid(r)::text END) x(n)),
               pg_catalog.pg_get_expr(p.polqual, p.polrelid),
               pg_catalog.pg_get_expr(p.polwithcheck, p.polrelid))
      FROM pg_catalog.pg_policy p WHERE p.polrelid IN (SELECT oid FROM rel)
    UNION ALL
    SELECT pg_catalog.format('trigger %s enabled=%s', pg_catalog.pg_get_triggerdef(t.oid), t.tgenabled)
      FROM pg_catalog.pg_trigger t WHERE t.tgrelid IN (SELECT oid FROM rel) AND NOT t.tgisinternal
    UNION ALL
    SELECT pg_catalog.format('rule %s', pg_catalog.pg_get_ruledef(r.oid))
      FROM pg_catalog.pg_rewrite r
      JOIN pg_catalog.pg_class c ON c.oid = r.ev_class
     WHERE r.ev_class IN (SELECT oid FROM rel) AND NOT (c.relkind IN ('v', 'm') AND r.rulename = '_RETURN')
    UNION ALL
    SELECT pg_catalog.format('view %s%s%s', c.oid::pg_catalog.regclass, E'\n',
               pg_catalog.pg_get_viewdef(c.oid, true))
      FROM rel r JOIN pg_catalog.pg_class c ON c.oid = r.oid WHERE c.relkind IN ('v', 'm')
    UNION ALL
    SELECT pg_catalog.format('sequence %s type=%s start=%s increment=%s min=%s max=%s cache=%s cycle=%s',
               s.seqrelid::pg_catalog.regclass, s.seqtypid::pg_catalog.regtype, s.seqstart,
               s.seqincrement, s.seqmin, s.seqmax, s.seqcache, s.seqcycle)
      FROM pg_catalog.pg_sequence s WHERE s.seqrelid IN (SELECT oid FROM rel)
    -- types
    UNION ALL
    SELECT pg_catalog.format('type %s typtype=%s owner=%s acl=%s base=%s notnull=%s default=%s labels=%s',
               t.oid::pg_catalog.regtype, t.typtype, pg_catalog.pg_get_userbyid(t.typowner), a.txt,
               CASE WHEN t.typbasetype <> 0 THEN pg_catalog.format_type(t.typbasetype, t.typtypmod) END,
               t.typnotnull, t.typdefault,
               (SELECT pg_catalog.string_agg(e.enumlabel, ',' ORDER BY e.enumsortorder)
                  FROM pg_catalog.pg_enum e WHERE e.enumtypid = t.oid))
      FROM member m JOIN pg_catalog.pg_type t ON t.oid = m.objid
      CROSS JOIN LATERAL (SELECT pg_temp.acl_text(t.typacl) AS txt) a
     WHERE m.classid = 'pg_catalog.pg_type'::pg_catalog.regclass
    -- comments on every object above
    UNION ALL
    SELECT pg_catalog.format('comment on %s %s: %s', i.type, i.identity, d.description)
      FROM ident i
      JOIN pg_catalog.pg_description d
        ON d.classoid = i.classid AND d.objoid = i.objid AND d.objsubid = 0
    -- initial privileges: what pg_dump takes as the extension's own grants
    UNION ALL
    SELECT pg_catalog.format('init_privs %s %s %s: %s', p.privtype,
               (pg_catalog.pg_identify_object(p.classoid, p.objoid, 0)).type,
               (pg_catalog.pg_identify_object(p.classoid, p.objoid, p.objsubid)).identity, a.txt)
      FROM pg_catalog.pg_init_privs p
      JOIN obj o ON o.classid = p.classoid AND o.objid = p.objoid
      CROSS JOIN LATERAL (SELECT pg_temp.acl_text(p.initprivs) AS txt) a
)
SELECT line FROM lines ORDER BY line COLLATE "C";
