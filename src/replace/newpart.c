/*
 * newpart.c
 *		The fresh table that becomes a partition: shaped like the partition it
 *		replaces, loaded, indexed and constrained before any lock on the
 *		parent is taken, so that ATTACH has nothing left to build or scan.
 */
#include "postgres.h"

#include "compat.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/indexing.h"
#include "catalog/dependency.h"
#include "catalog/pg_class.h"
#include "catalog/pg_index.h"
#include "catalog/pg_policy.h"
#include "catalog/pg_publication.h"
#include "catalog/pg_type.h"
#include "commands/comment.h"
#include "commands/tablespace.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"
#include "utils/rel.h"
#include "utils/ruleutils.h"

#include "citus/citus_replace.h"
#include "replace/newpart.h"
#include "util/sql.h"

#define BOUND_CONSTRAINT "idem_etl_bound"

/*
 * CREATE TABLE ... (LIKE the partition, or the parent for a new partition)
 * with columns, defaults, CHECK and NOT NULL constraints, storage,
 * compression, comments and statistics, but no indexes yet: they are built
 * after the load, which is faster than maintaining them row by row.  The
 * partition column may hold NULL until the rows are checked, so that a NULL
 * there is reported like any value outside the bounds.
 */
/*
 * A new table named name_serial, in the parent's schema, shaped like shape
 * (see newpart_create), in shape's tablespace; UNLOGGED when shape is, or
 * when unlogged says so.
 */
static NewPart *
create_like(TargetInfo *parent, Oid shape, bool unlogged)
{
	static uint32 serial = 0;
	NewPart    *np = palloc0(sizeof(NewPart));

	np->schema = pstrdup(quote_identifier(get_namespace_name(get_rel_namespace(parent->relid))));
	np->relname = psprintf("idem_etl_load_%d_%u", MyProcPid, ++serial);
	np->qualname = psprintf("%s.%s", np->schema, quote_identifier(np->relname));
	sql_exec(psprintf("CREATE %sTABLE %s (LIKE %s INCLUDING ALL EXCLUDING INDEXES EXCLUDING IDENTITY)%s%s",
					  unlogged || get_rel_persistence(shape) == RELPERSISTENCE_UNLOGGED ? "UNLOGGED " : "",
					  np->qualname,
					  quote_qualified_identifier(get_namespace_name(get_rel_namespace(shape)),
												 get_rel_name(shape)),
					  OidIsValid(get_rel_tablespace(shape)) ? " TABLESPACE " : "",
					  OidIsValid(get_rel_tablespace(shape)) ?
					  quote_identifier(get_tablespace_name(get_rel_tablespace(shape))) : ""));
	np->relid = get_relname_relid(np->relname, get_rel_namespace(parent->relid));
	return np;
}

/*
 * CREATE TABLE ... (LIKE the partition, or the parent for a new partition)
 * with columns, defaults, CHECK and NOT NULL constraints, storage,
 * compression, comments and statistics, but no indexes yet: they are built
 * after the load, which is faster than maintaining them row by row.  The
 * partition column may hold NULL until the rows are checked, so that a NULL
 * there is reported like any value outside the bounds.  For a parent Citus
 * distributes, this is where the rows are loaded and checked, a local
 * UNLOGGED table that newpart_distribute empties into the distributed one.
 */
NewPart *
newpart_create(TargetInfo *parent, PartKey *pk, PartSlot *slot)
{
	Oid			shape = OidIsValid(slot->partoid) ? slot->partoid : parent->relid;
	char	   *distcol = citus_replace_column(parent->relid);
	NewPart    *np = create_like(parent, shape, distcol != NULL);

	np->distcol = distcol;
	if (pk->column->notnull)
		sql_exec(psprintf("ALTER TABLE %s ALTER COLUMN %s DROP NOT NULL", np->qualname,
						  quote_identifier(pk->column->name)));
	return np;
}

/*
 * For a parent that Citus distributes (np->distcol), after the rows are
 * loaded into np and checked (newpart_bound): the table that becomes the
 * partition, created like np's shape, distributed colocated with the parent
 * while it is empty (so that ATTACH moves no rows, and the coordinator
 * keeps none), then given np's rows by one INSERT ... SELECT that Citus
 * sends to the shards, and the bound CHECK.  np is dropped.  For a local
 * parent, np itself.
 */
NewPart *
newpart_distribute(NewPart *np, TargetInfo *parent, PartSlot *slot)
{
	NewPart    *dist;
	Relation	rel;
	StringInfoData cols;

	if (np->distcol == NULL)
		return np;
	dist = create_like(parent, OidIsValid(slot->partoid) ? slot->partoid : parent->relid, false);
	dist->distcol = np->distcol;
	citus_replace_distribute(dist->qualname, parent->qualname, dist->distcol);

	/* the columns that take a value: not generated, not dropped */
	initStringInfo(&cols);
	rel = table_open(np->relid, AccessShareLock);
	for (int i = 0; i < RelationGetDescr(rel)->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(RelationGetDescr(rel), i);

		if (!att->attisdropped && !att->attgenerated)
			appendStringInfo(&cols, "%s%s", cols.len ? ", " : "",
							 quote_identifier(NameStr(att->attname)));
	}
	table_close(rel, AccessShareLock);
	sql_exec(psprintf("INSERT INTO %s (%s) SELECT %s FROM %s", dist->qualname, cols.data,
					  cols.data, np->qualname));
	sql_exec(psprintf("DROP TABLE %s", np->qualname));
	newpart_add_bound(dist->qualname, slot);
	return dist;
}

typedef struct BoundArg
{
	const char *qualname;
	PartSlot   *slot;
} BoundArg;

static void
add_bound(void *arg)
{
	BoundArg   *b = (BoundArg *) arg;

	newpart_add_bound(b->qualname, b->slot);
}

/*
 * Add the bound CHECK (newpart_add_bound), which every row must satisfy.
 * When one does not (NULL in the partition column included), count them and
 * show one: that query runs only then, the CHECK's own scan is the check.
 */
void
newpart_bound(NewPart *np, TargetInfo *parent, PartKey *pk, PartSlot *slot)
{
	BoundArg	b = {np->qualname, slot};
	ErrorData  *failure = sql_try(add_bound, &b);
	const char *col = quote_identifier(pk->column->name);
	bool		isnull;

	if (failure == NULL)
		return;
	if (failure->sqlerrcode != ERRCODE_CHECK_VIOLATION)
		ReThrowError(failure);
	sql_exec(psprintf("SELECT pg_catalog.count(*)::pg_catalog.int8,"
					  " pg_catalog.min(coalesce(%s::pg_catalog.text, 'NULL'))"
					  " FROM %s WHERE NOT coalesce((%s), false)",
					  col, np->qualname, slot->check_sql));
	ereport(ERROR,
			(errcode(ERRCODE_CHECK_VIOLATION),
			 errmsg("%lld row(s) of the source do not belong in partition \"%s\" of \"%s\"",
					(long long) DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0],
															SPI_tuptable->tupdesc, 1, &isnull)),
					slot->name, parent->relname),
			 errdetail("The partition for %s holds %s %s; one offending value of \"%s\" is %s.",
					   slot->value, pk->column->name, slot->bound_sql,
					   pk->column->name,
					   SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2)),
			 errhint("Filter the source on \"%s\", or use etl_replace_partitions to replace every partition the source touches.",
					 pk->column->name)));
}

/*
 * Copy every index of the partition being replaced (or, for a new
 * partition, of the parent) onto the new table.  Indexes behind PRIMARY KEY,
 * UNIQUE and EXCLUDE constraints are made as constraints: ATTACH only adopts
 * a child index for a constraint index if the child's is one too, and would
 * otherwise build a new index under the lock.
 */
static void
build_indexes(NewPart *np, Oid shape)
{
	Relation	rel = table_open(shape, AccessShareLock);
	List	   *indexes = RelationGetIndexList(rel);	/* in OID order */
	ListCell   *lc;
	char	   *prefix;
	const char *shapename = quote_qualified_identifier(get_namespace_name(RelationGetNamespace(rel)),
													   RelationGetRelationName(rel));

	table_close(rel, NoLock);

	/*
	 * Read from the catalogs rather than by a query: planning one cost a
	 * third of a millisecond in each new session.
	 */
	foreach(lc, indexes)
	{
		Oid			indexoid = lfirst_oid(lc);
		HeapTuple	tup = SearchSysCache1(INDEXRELID, ObjectIdGetDatum(indexoid));
		bool		unique;
		Oid			constraint = get_index_constraint(indexoid);
		char	   *def;

		if (!HeapTupleIsValid(tup))
			elog(ERROR, "cache lookup failed for index %u", indexoid);
		unique = ((Form_pg_index) GETSTRUCT(tup))->indisunique;
		ReleaseSysCache(tup);

		CHECK_FOR_INTERRUPTS();

		/*
		 * The definitions as ALTER TABLE rebuilds them, with the index's
		 * storage parameters and tablespace: "ALTER TABLE table ADD
		 * CONSTRAINT name ...", "CREATE [UNIQUE] INDEX name ON table USING
		 * ...".  What follows the name, or USING, is kept, for the new table;
		 * the names are given after the swap (swap.c).
		 */
		if (OidIsValid(constraint))
		{
			def = pg_get_constraintdef_command(constraint);
			prefix = psprintf("ALTER TABLE %s ADD CONSTRAINT %s ", shapename,
							  quote_identifier(get_constraint_name(constraint)));
			if (strncmp(def, prefix, strlen(prefix)) != 0)
				elog(ERROR, "unexpected constraint definition: %s", def);
			sql_exec(psprintf("ALTER TABLE %s ADD %s", np->qualname, def + strlen(prefix)));
			continue;
		}
		def = pg_get_indexdef_string(indexoid);
		prefix = psprintf("CREATE %sINDEX %s ON %s USING ", unique ? "UNIQUE " : "",
						  quote_identifier(get_rel_name(indexoid)), shapename);
		if (strncmp(def, prefix, strlen(prefix)) != 0)
			elog(ERROR, "unexpected index definition: %s", def);
		sql_exec(psprintf("CREATE %sINDEX ON %s USING %s", unique ? "UNIQUE " : "",
						  np->qualname, def + strlen(prefix)));
	}
}

/*
 * Foreign keys of the parent, added (and so validated) here: ATTACH then
 * adopts them instead of creating and validating its own under the lock.
 */
static void
add_foreign_keys(NewPart *np, TargetInfo *parent)
{
	Oid			argtypes[1] = {OIDOID};
	Datum		args[1];
	static SPIPlanPtr plan = NULL;
	uint64		n;
	SPITupleTable *tuptable;

	/* most parents have none: then the statement is not even planned */
	{
		Relation	rel = table_open(parent->relid, NoLock);
		bool		none = RelationGetFKeyList(rel) == NIL;

		table_close(rel, NoLock);
		if (none)
			return;
	}
	args[0] = ObjectIdGetDatum(parent->relid);
	sql_prepare_kept(&plan, "SELECT conname, pg_catalog.pg_get_constraintdef(oid)"
					 " FROM pg_catalog.pg_constraint"
					 " WHERE conrelid OPERATOR(pg_catalog.=) $1"
					 " AND contype OPERATOR(pg_catalog.=) 'f' ORDER BY oid", 1, argtypes);
	if (SPI_execute_plan(plan, args, NULL, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "listing foreign keys failed");
	n = SPI_processed;
	tuptable = SPI_tuptable;
	for (uint64 i = 0; i < n; i++)
		sql_exec(psprintf("ALTER TABLE %s ADD CONSTRAINT %s %s", np->qualname,
						  quote_identifier(SPI_getvalue(tuptable->vals[i], tuptable->tupdesc, 1)),
						  SPI_getvalue(tuptable->vals[i], tuptable->tupdesc, 2)));
}

/*
 * A validated CHECK equal to the partition bound, so ATTACH does not scan
 * the table to prove it; dropped again right after ATTACH.
 */
void
newpart_add_bound(const char *qualname, PartSlot *slot)
{
	sql_exec(psprintf("ALTER TABLE %s ADD CONSTRAINT %s CHECK (%s)",
					  qualname, BOUND_CONSTRAINT, slot->check_sql));
}

/*
 * What the old partition had that LIKE does not copy, as statements to run
 * on the new table ($2), in order: row security and its policies (a reader
 * restricted by a policy on the partition stays restricted), the
 * partition's own triggers (those cloned from the parent come back with
 * ATTACH) and whether each is enabled, storage parameters of the table and
 * its TOAST table, the comment, per-column statistics targets, the
 * replica identity (USING INDEX re-pointed to the new table's index of the
 * same definition), and last the owner.  Privileges are copied at the swap
 * (newpart_copy_privileges).  Persistence (UNLOGGED), storage, compression
 * and extended statistics come with CREATE TABLE ... LIKE.  A trigger comes
 * as pg_get_triggerdef prints it, naming the old table (retarget_trigger).
 */
static const char *const carry_sql =
"SELECT s FROM ("
" SELECT 1 AS n, pg_catalog.format('ALTER TABLE %s ENABLE ROW LEVEL SECURITY', $2) AS s"
"  FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) $1 AND c.relrowsecurity"
" UNION ALL SELECT 2, pg_catalog.format('ALTER TABLE %s FORCE ROW LEVEL SECURITY', $2)"
"  FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) $1 AND c.relforcerowsecurity"
" UNION ALL SELECT 3, pg_catalog.format('CREATE POLICY %I ON %s AS %s FOR %s TO %s%s%s', p.polname, $2,"
"  CASE WHEN p.polpermissive THEN 'PERMISSIVE' ELSE 'RESTRICTIVE' END,"
"  CASE WHEN p.polcmd OPERATOR(pg_catalog.=) 'r' THEN 'SELECT'"
"  WHEN p.polcmd OPERATOR(pg_catalog.=) 'a' THEN 'INSERT'"
"  WHEN p.polcmd OPERATOR(pg_catalog.=) 'w' THEN 'UPDATE'"
"  WHEN p.polcmd OPERATOR(pg_catalog.=) 'd' THEN 'DELETE' ELSE 'ALL' END,"
"  (SELECT pg_catalog.string_agg(CASE WHEN r.r OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC'"
"   ELSE pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(r.r)) END, ', ')"
"   FROM pg_catalog.unnest(p.polroles) r(r)),"
"  CASE WHEN p.polqual IS NULL THEN '' ELSE"
"  pg_catalog.concat(' USING (', pg_catalog.pg_get_expr(p.polqual, p.polrelid), ')') END,"
"  CASE WHEN p.polwithcheck IS NULL THEN '' ELSE"
"  pg_catalog.concat(' WITH CHECK (', pg_catalog.pg_get_expr(p.polwithcheck, p.polrelid), ')') END)"
"  FROM pg_catalog.pg_policy p WHERE p.polrelid OPERATOR(pg_catalog.=) $1"
" UNION ALL SELECT 4, pg_catalog.pg_get_triggerdef(t.oid)"
"  FROM pg_catalog.pg_trigger t WHERE t.tgrelid OPERATOR(pg_catalog.=) $1"
"  AND NOT t.tgisinternal AND t.tgparentid OPERATOR(pg_catalog.=) 0"
" UNION ALL SELECT 5, pg_catalog.format('ALTER TABLE %s %s TRIGGER %I', $2,"
"  CASE WHEN t.tgenabled OPERATOR(pg_catalog.=) 'D' THEN 'DISABLE'"
"  WHEN t.tgenabled OPERATOR(pg_catalog.=) 'R' THEN 'ENABLE REPLICA' ELSE 'ENABLE ALWAYS' END, t.tgname)"
"  FROM pg_catalog.pg_trigger t WHERE t.tgrelid OPERATOR(pg_catalog.=) $1"
"  AND NOT t.tgisinternal AND t.tgparentid OPERATOR(pg_catalog.=) 0"
"  AND t.tgenabled OPERATOR(pg_catalog.<>) 'O'"
" UNION ALL SELECT 6, pg_catalog.format('ALTER TABLE %s SET (%s)', $2,"
"  pg_catalog.string_agg(pg_catalog.format('%s%I = %L', o.prefix,"
"  pg_catalog.split_part(o.opt, '=', 1),"
"  pg_catalog.substr(o.opt, pg_catalog.strpos(o.opt, '=') OPERATOR(pg_catalog.+) 1)), ', '))"
"  FROM (SELECT '' AS prefix, pg_catalog.unnest(reloptions) AS opt"
"  FROM pg_catalog.pg_class WHERE oid OPERATOR(pg_catalog.=) $1"
"  UNION ALL SELECT 'toast.', pg_catalog.unnest(t.reloptions)"
"  FROM pg_catalog.pg_class c JOIN pg_catalog.pg_class t"
"  ON t.oid OPERATOR(pg_catalog.=) c.reltoastrelid"
"  WHERE c.oid OPERATOR(pg_catalog.=) $1) o"
"  HAVING pg_catalog.count(*) OPERATOR(pg_catalog.>) 0"
" UNION ALL SELECT 7, pg_catalog.format('COMMENT ON TABLE %s IS %L', $2, d)"
"  FROM pg_catalog.obj_description($1, 'pg_class') d WHERE d IS NOT NULL"
" UNION ALL SELECT 10, pg_catalog.format('ALTER TABLE %s ALTER COLUMN %I SET STATISTICS %s', $2,"
"  t.attname, t.attstattarget)"
"  FROM pg_catalog.pg_attribute t WHERE t.attrelid OPERATOR(pg_catalog.=) $1"
"  AND t.attnum OPERATOR(pg_catalog.>) 0 AND NOT t.attisdropped"
"  AND t.attstattarget OPERATOR(pg_catalog.>=) 0"
" UNION ALL SELECT 11, pg_catalog.format('ALTER TABLE %s REPLICA IDENTITY %s', $2,"
"  CASE WHEN c.relreplident OPERATOR(pg_catalog.=) 'f' THEN 'FULL' ELSE 'NOTHING' END)"
"  FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) $1"
"  AND c.relreplident OPERATOR(pg_catalog.=) ANY ('{f,n}'::pg_catalog.\"char\"[])"
/* USING INDEX: the new table's index built from the old one's definition */
" UNION ALL SELECT 12, pg_catalog.format('ALTER TABLE %s REPLICA IDENTITY USING INDEX %I', $2,"
"  (SELECT ni.relname FROM pg_catalog.pg_index nx"
"   JOIN pg_catalog.pg_class ni ON ni.oid OPERATOR(pg_catalog.=) nx.indexrelid"
"   WHERE nx.indrelid OPERATOR(pg_catalog.=) $2::pg_catalog.regclass AND nx.indisunique"
"   AND pg_catalog.substring(pg_catalog.pg_get_indexdef(nx.indexrelid), ' USING .*$')"
"   OPERATOR(pg_catalog.=) pg_catalog.substring(pg_catalog.pg_get_indexdef(oi.indexrelid), ' USING .*$')"
"   ORDER BY nx.indexrelid LIMIT 1))"
"  FROM pg_catalog.pg_index oi WHERE oi.indrelid OPERATOR(pg_catalog.=) $1 AND oi.indisreplident"
" UNION ALL SELECT 20, pg_catalog.format('ALTER TABLE %s OWNER TO %I', $2,"
"  pg_catalog.pg_get_userbyid(c.relowner))"
"  FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) $1"
"  AND c.relowner OPERATOR(pg_catalog.<>) (SELECT relowner FROM pg_catalog.pg_class"
"  WHERE oid OPERATOR(pg_catalog.=) $2::pg_catalog.regclass)"
") carried ORDER BY n";

/*
 * Whether the old partition has anything carry_sql would carry, from its
 * catalog entries: most partitions have none of it, and planning carry_sql
 * takes a few ms in a new session, which is where a scheduled load runs.
 * It errs towards carrying (any storage parameter, a replica identity
 * other than the default); carry_sql decides the rest.
 * Keep in step with carry_sql.
 */
static bool
anything_to_carry(Oid old, Oid newrel)
{
	HeapTuple	tup = SearchSysCache1(RELOID, ObjectIdGetDatum(old));
	Form_pg_class form;
	Oid			owner;
	Oid			toast;
	Relation	rel;
	Relation	policies;
	ScanKeyData key;
	SysScanDesc scan;
	bool		carry;

	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for relation %u", old);
	form = (Form_pg_class) GETSTRUCT(tup);
	owner = form->relowner;
	toast = form->reltoastrelid;
	carry = form->relrowsecurity || form->relforcerowsecurity ||
		form->relreplident != REPLICA_IDENTITY_DEFAULT ||
		!heap_attisnull(tup, Anum_pg_class_reloptions, NULL);
	ReleaseSysCache(tup);

	tup = SearchSysCache1(RELOID, ObjectIdGetDatum(newrel));
	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for relation %u", newrel);
	carry |= ((Form_pg_class) GETSTRUCT(tup))->relowner != owner;
	ReleaseSysCache(tup);
	if (!carry && OidIsValid(toast))
	{
		tup = SearchSysCache1(RELOID, ObjectIdGetDatum(toast));
		if (!HeapTupleIsValid(tup))
			elog(ERROR, "cache lookup failed for relation %u", toast);
		carry = !heap_attisnull(tup, Anum_pg_class_reloptions, NULL);
		ReleaseSysCache(tup);
	}
	if (!carry)
		carry = GetComment(old, RelationRelationId, 0) != NULL;

	/* its own triggers; statistics targets */
	rel = table_open(old, NoLock);
	for (int i = 0; !carry && rel->trigdesc && i < rel->trigdesc->numtriggers; i++)
		carry = !rel->trigdesc->triggers[i].tgisinternal && !rel->trigdesc->triggers[i].tgisclone;
	for (int i = 0; !carry && i < RelationGetDescr(rel)->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(RelationGetDescr(rel), i);

		if (att->attisdropped)
			continue;
		carry = compat_has_stattarget(rel, att);
	}
	table_close(rel, NoLock);

	/* policies, which exist whether row security is enabled or not */
	if (!carry)
	{
		policies = table_open(PolicyRelationId, AccessShareLock);
		ScanKeyInit(&key, Anum_pg_policy_polrelid, BTEqualStrategyNumber, F_OIDEQ,
					ObjectIdGetDatum(old));
		scan = systable_beginscan(policies, PolicyPolrelidPolnameIndexId, true, NULL, 1, &key);
		carry = HeapTupleIsValid(systable_getnext(scan));
		systable_endscan(scan);
		table_close(policies, AccessShareLock);
	}
	return carry;
}

/*
 * pg_get_triggerdef's text of a trigger of table "from", made to create it
 * on table "to" (both qualified and quoted as the text has them: the
 * search_path is pinned).  Only its ON clause changes: it comes after the
 * trigger's name and the columns of UPDATE OF, which are double-quoted when
 * they hold a space, and before WHEN and the arguments, which are left as
 * they are even where they name the table.
 */
static char *
retarget_trigger(const char *def, const char *from, const char *to)
{
	char	   *on_from = psprintf(" ON %s ", from);
	size_t		len = strlen(on_from);
	bool		quoted = false;

	for (const char *p = def; *p; p++)
	{
		if (*p == '"')
			quoted = !quoted;
		else if (!quoted && strncmp(p, on_from, len) == 0)
			return psprintf("%.*s ON %s %s", (int) (p - def), def, to, p + len);
	}
	elog(ERROR, "trigger definition does not name table %s: %s", from, def);
	return NULL;				/* keep compiler quiet */
}

/*
 * Set the ACL in column aclcol of catalog tuple tup of catalog rel, that of
 * table "to" (attnum 0) or of its column attnum, to acl (isnull: the owner's
 * defaults), with the dependencies on the roles it names, as GRANT keeps
 * them.  Nothing is written when it is the same.
 */
static void
set_acl(Relation rel, HeapTuple tup, int aclcol, Datum acl, bool isnull,
		Oid to, AttrNumber attnum, Oid owner)
{
	bool		oldnull;
	Datum		oldacl = heap_getattr(tup, aclcol, RelationGetDescr(rel), &oldnull);
	Datum	   *values = palloc0(sizeof(Datum) * RelationGetDescr(rel)->natts);
	bool	   *nulls = palloc0(sizeof(bool) * RelationGetDescr(rel)->natts);
	bool	   *replace = palloc0(sizeof(bool) * RelationGetDescr(rel)->natts);
	Oid		   *oldmembers = NULL;
	Oid		   *newmembers = NULL;
	int			noldmembers = 0;
	int			nnewmembers = 0;
	HeapTuple	newtup;

	if (oldnull == isnull && (isnull || datumIsEqual(oldacl, acl, false, -1)))
		return;
	if (!oldnull)
		noldmembers = aclmembers(DatumGetAclP(oldacl), &oldmembers);
	if (!isnull)
		nnewmembers = aclmembers(DatumGetAclP(acl), &newmembers);
	values[aclcol - 1] = acl;
	nulls[aclcol - 1] = isnull;
	replace[aclcol - 1] = true;
	newtup = heap_modify_tuple(tup, RelationGetDescr(rel), values, nulls, replace);
	CatalogTupleUpdate(rel, &newtup->t_self, newtup);
	updateAclDependencies(RelationRelationId, to, attnum, owner,
						  noldmembers, oldmembers, nnewmembers, newmembers);
}

/*
 * Give table "to" the owner of table "from" and exactly its privileges, on
 * the table and on each column (by name), as their catalog entries hold
 * them, grantors included.  CREATE TABLE gave "to" the creating role's
 * default privileges in the schema (ALTER DEFAULT PRIVILEGES), which "from"
 * may not have, or may have had revoked since: granting "from"'s privileges
 * on top would give them back.  A kept version being restored has the
 * owner and privileges of the day it was replaced; the partition it
 * displaces has those of now.  Called under the swap's lock, after DETACH
 * updated "from"'s catalog entries: a GRANT or REVOKE on "from" takes no
 * lock, but one that committed before is seen here, and one that comes
 * later finds the entry updated by this transaction and fails.
 */
void
newpart_copy_privileges(Oid from, Oid to, bool distributed)
{
	Relation	classrel;
	Relation	attrel;
	HeapTuple	fromtup;
	HeapTuple	totup;
	Oid			owner;
	Datum		acl;
	bool		isnull;
	int			natts;

	fromtup = SearchSysCache1(RELOID, ObjectIdGetDatum(from));
	if (!HeapTupleIsValid(fromtup))
		elog(ERROR, "cache lookup failed for relation %u", from);
	owner = ((Form_pg_class) GETSTRUCT(fromtup))->relowner;
	ReleaseSysCache(fromtup);
	totup = SearchSysCache1(RELOID, ObjectIdGetDatum(to));
	if (!HeapTupleIsValid(totup))
		elog(ERROR, "cache lookup failed for relation %u", to);
	if (((Form_pg_class) GETSTRUCT(totup))->relowner != owner)
	{
		ReleaseSysCache(totup);
		/* with ALTER TABLE's checks: the caller must be able to give it */
		sql_exec(psprintf("ALTER TABLE %s OWNER TO %s",
						  quote_qualified_identifier(get_namespace_name(get_rel_namespace(to)),
													 get_rel_name(to)),
						  quote_identifier(GetUserNameFromId(owner, false))));
		CommandCounterIncrement();
	}
	else
		ReleaseSysCache(totup);

	/* a table Citus distributes gets them by GRANT, which reaches its shards */
	if (distributed)
	{
		citus_replace_copy_privileges(from, to,
									  quote_qualified_identifier(get_namespace_name(get_rel_namespace(to)),
																 get_rel_name(to)));
		CommandCounterIncrement();
		return;
	}

	classrel = table_open(RelationRelationId, RowExclusiveLock);
	attrel = table_open(AttributeRelationId, RowExclusiveLock);
	fromtup = SearchSysCache1(RELOID, ObjectIdGetDatum(from));
	totup = SearchSysCacheCopy1(RELOID, ObjectIdGetDatum(to));
	if (!HeapTupleIsValid(fromtup) || !HeapTupleIsValid(totup))
		elog(ERROR, "cache lookup failed for relation %u or %u", from, to);
	natts = ((Form_pg_class) GETSTRUCT(totup))->relnatts;
	acl = SysCacheGetAttr(RELOID, fromtup, Anum_pg_class_relacl, &isnull);
	set_acl(classrel, totup, Anum_pg_class_relacl, acl, isnull, to, 0, owner);
	ReleaseSysCache(fromtup);

	for (AttrNumber attnum = 1; attnum <= natts; attnum++)
	{
		HeapTuple	toatt = SearchSysCacheCopy2(ATTNUM, ObjectIdGetDatum(to),
												Int16GetDatum(attnum));
		HeapTuple	fromatt;

		if (!HeapTupleIsValid(toatt))
			elog(ERROR, "cache lookup failed for attribute %d of relation %u", attnum, to);
		if (((Form_pg_attribute) GETSTRUCT(toatt))->attisdropped)
			continue;
		fromatt = SearchSysCacheAttName(from, NameStr(((Form_pg_attribute) GETSTRUCT(toatt))->attname));
		isnull = true;
		acl = (Datum) 0;
		if (HeapTupleIsValid(fromatt))
			acl = SysCacheGetAttr(ATTNAME, fromatt, Anum_pg_attribute_attacl, &isnull);
		set_acl(attrel, toatt, Anum_pg_attribute_attacl, acl, isnull, to, attnum, owner);
		if (HeapTupleIsValid(fromatt))
			ReleaseSysCache(fromatt);
	}
	table_close(attrel, RowExclusiveLock);
	table_close(classrel, RowExclusiveLock);
	CommandCounterIncrement();
}

static void
carry_properties(NewPart *np, Oid old)
{
	Oid			argtypes[2] = {OIDOID, TEXTOID};
	Datum		args[2];
	static SPIPlanPtr plan = NULL;
	uint64		n;
	SPITupleTable *tuptable;
	const char *oldname;

	if (!anything_to_carry(old, np->relid))
		return;
	oldname = quote_qualified_identifier(get_namespace_name(get_rel_namespace(old)),
										 get_rel_name(old));
	args[0] = ObjectIdGetDatum(old);
	args[1] = CStringGetTextDatum(np->qualname);
	sql_prepare_kept(&plan, carry_sql, 2, argtypes);
	if (SPI_execute_plan(plan, args, NULL, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "reading the partition's properties failed");
	n = SPI_processed;
	tuptable = SPI_tuptable;
	for (uint64 i = 0; i < n; i++)
	{
		char	   *stmt = SPI_getvalue(tuptable->vals[i], tuptable->tupdesc, 1);

		/* no other statement of carry_sql starts so */
		if (strncmp(stmt, "CREATE TRIGGER ", 15) == 0 ||
			strncmp(stmt, "CREATE CONSTRAINT TRIGGER ", 26) == 0)
			stmt = retarget_trigger(stmt, oldname, np->qualname);
		sql_exec(stmt);
	}
}

/*
 * Everything after the load and newpart_bound, before the swap.  The bound
 * proves the partition column NOT NULL, so setting that (again, directly or
 * for a primary key) needs no scan.
 */
/*
 * A new partition takes the parent's REPLICA IDENTITY FULL or NOTHING,
 * which PostgreSQL does not propagate to partitions (as pg_partman's
 * template does); USING INDEX needs an index of the partition's own.
 */
static void
parent_replica_identity(NewPart *np, TargetInfo *parent)
{
	HeapTuple	tup = SearchSysCache1(RELOID, ObjectIdGetDatum(parent->relid));
	char		ident;

	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for relation %u", parent->relid);
	ident = ((Form_pg_class) GETSTRUCT(tup))->relreplident;
	ReleaseSysCache(tup);

	if (ident == REPLICA_IDENTITY_FULL || ident == REPLICA_IDENTITY_NOTHING)
		sql_exec(psprintf("ALTER TABLE %s REPLICA IDENTITY %s", np->qualname,
						  ident == REPLICA_IDENTITY_FULL ? "FULL" : "NOTHING"));
}

/*
 * What a replacement cannot carry over to the new table is refused before
 * any work (0A000, naming it): membership of the partition itself in a
 * publication (ALTER PUBLICATION is its owner's), and a replica identity
 * index whose definition no index of the partition's shape reproduces
 * (checked when it is carried).
 */
void
newpart_check_carryable(TargetInfo *parent, Oid partoid)
{
	Oid			argtypes[1] = {OIDOID};
	Datum		args[1] = {ObjectIdGetDatum(partoid)};
	static SPIPlanPtr plan = NULL;

	/* most partitions are in no publication by name: no statement then */
	if (!compat_in_publication_by_name(partoid))
		return;
	sql_prepare_kept(&plan, "SELECT p.pubname FROM pg_catalog.pg_publication_rel r"
					 " JOIN pg_catalog.pg_publication p ON p.oid OPERATOR(pg_catalog.=) r.prpubid"
					 " WHERE r.prrelid OPERATOR(pg_catalog.=) $1 ORDER BY 1 LIMIT 1",
					 1, argtypes);
	if (SPI_execute_plan(plan, args, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "reading publications failed");
	if (SPI_processed > 0)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("partition \"%s\" of \"%s\" is in publication \"%s\" by name",
						get_rel_name(partoid), parent->relname,
						SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1)),
				 errdetail("A replaced partition is a new table, which the publication does not name."),
				 errhint("Publish the partitioned table instead (publish_via_partition_root), or remove the partition from the publication.")));
}

void
newpart_finish(NewPart *np, TargetInfo *parent, PartKey *pk, PartSlot *slot)
{
	/*
	 * Definitions are deparsed and run again here: with search_path pinned,
	 * the deparsed text names everything outside pg_catalog with its schema.
	 */
	int			nestlevel = sql_pin_search_path();

	if (pk->column->notnull)
		sql_exec(psprintf("ALTER TABLE %s ALTER COLUMN %s SET NOT NULL", np->qualname,
						  quote_identifier(pk->column->name)));
	build_indexes(np, OidIsValid(slot->partoid) ? slot->partoid : parent->relid);
	add_foreign_keys(np, parent);
	sql_exec(psprintf("ANALYZE %s", np->qualname));
	if (OidIsValid(slot->partoid))
		carry_properties(np, slot->partoid);
	else
		parent_replica_identity(np, parent);
	AtEOXact_GUC(true, nestlevel);
}
