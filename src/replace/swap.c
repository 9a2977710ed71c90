/*
 * swap.c
 *		The short step: detach the old partition, attach the new one, waiting
 *		for locks a bounded time and retrying.
 *
 * DETACH takes ACCESS EXCLUSIVE on the parent.  Queued behind a long-running
 * reader, that request would block every other reader of the table for as
 * long as it waits.  So each try waits at most idem_etl.lock_timeout, and a
 * try that times out is rolled back to its subtransaction and repeated, up
 * to idem_etl.lock_retries more times; then 55P03 and nothing has changed.
 *
 * Two swaps of one table must not deadlock, each waiting for the other's
 * weaker lock on the parent to upgrade its own: swap_serialize() takes SHARE
 * UPDATE EXCLUSIVE on the parent before anything else.  That mode conflicts
 * with itself but not with readers or writers, so replacements of one table
 * run one at a time while everyone else goes on.
 */
#include "postgres.h"

#include "compat.h"

#include "access/genam.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/dependency.h"
#include "catalog/pg_class.h"
#include "catalog/pg_statistic_ext.h"
#include "commands/defrem.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"

#include "util/settings.h"
#include "replace/newpart.h"
#include "state/progress.h"
#include "util/sql.h"
#include "replace/swap.h"

/*
 * Rename the indexes of table (in namespace nspid, schema quoted) whose
 * names start with from (the table's former name, as CREATE INDEX and ADD
 * CONSTRAINT named them), so that a swapped-in partition's indexes are named
 * after it: "<from>_<label>" becomes what CREATE INDEX would name it on a
 * table named to (ChooseRelationName: to shortened to keep the label within
 * 63 bytes, never inside a character, and a number added to the label if
 * the name is taken).  This runs under the parent's lock, so it reads the
 * catalogs rather than planning a query (a third of a millisecond in a new
 * session).
 */
static void
rename_indexes(Oid nspid, const char *schema, const char *table, const char *from,
			   const char *to)
{
	Oid			relid = get_relname_relid(table, nspid);
	Relation	rel;
	List	   *indexes;
	ListCell   *lc;
	size_t		fromlen = strlen(from);

	if (!OidIsValid(relid))
		elog(ERROR, "relation \"%s\" not found", table);
	rel = table_open(relid, AccessExclusiveLock);	/* held since its rename */
	indexes = RelationGetIndexList(rel);
	table_close(rel, NoLock);
	foreach(lc, indexes)
	{
		Oid			indexoid = lfirst_oid(lc);
		char	   *name = get_rel_name(indexoid);

		if (name == NULL || strncmp(name, from, fromlen) != 0 ||
			name[fromlen] != '_' || name[fromlen + 1] == '\0')
			continue;
		sql_exec(psprintf("ALTER INDEX %s.%s RENAME TO %s", schema, quote_identifier(name),
						  quote_identifier(ChooseRelationName(to, NULL, name + fromlen + 1, nspid,
															  OidIsValid(get_index_constraint(indexoid))))));
	}
}

/*
 * The names of relid's extended statistics objects, in the order of their
 * OIDs, which is the order in which CREATE TABLE ... LIKE copies them.
 */
static List *
statistics_names(Oid relid)
{
	Relation	catalog = table_open(StatisticExtRelationId, AccessShareLock);
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tup;
	List	   *oids = NIL;
	List	   *names = NIL;
	ListCell   *lc;

	ScanKeyInit(&key, Anum_pg_statistic_ext_stxrelid, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(relid));
	scan = systable_beginscan(catalog, StatisticExtRelidIndexId, true, NULL, 1, &key);
	while (HeapTupleIsValid(tup = systable_getnext(scan)))
		oids = lappend_oid(oids, ((Form_pg_statistic_ext) GETSTRUCT(tup))->oid);
	systable_endscan(scan);
	list_sort(oids, list_oid_cmp);
	foreach(lc, oids)
	{
		tup = SearchSysCache1(STATEXTOID, ObjectIdGetDatum(lfirst_oid(lc)));
		if (!HeapTupleIsValid(tup))
			elog(ERROR, "cache lookup failed for statistics object %u", lfirst_oid(lc));
		names = lappend(names, pstrdup(NameStr(((Form_pg_statistic_ext) GETSTRUCT(tup))->stxname)));
		ReleaseSysCache(tup);
	}
	table_close(catalog, AccessShareLock);
	return names;
}

/*
 * Name the extended statistics of table (named from before) after it, as
 * rename_indexes names its indexes: "<from>_<label>" becomes "<table>_<label>"
 * and any other name "<table>_<name>", shortened to 63 bytes and numbered if
 * taken; or, given as many names as it has (those of the partition it
 * replaces, whose own are gone or renamed), those.
 */
static void
rename_statistics(Oid nspid, const char *schema, const char *table, const char *from,
				  List *given)
{
	List	   *names = statistics_names(get_relname_relid(table, nspid));
	size_t		fromlen = strlen(from);

	for (int i = 0; i < list_length(names); i++)
	{
		char	   *name = list_nth(names, i);
		const char *label = name;
		char	   *to;

		if (list_length(given) == list_length(names))
			to = list_nth(given, i);
		else
		{
			if (strncmp(name, from, fromlen) == 0 && name[fromlen] == '_' &&
				name[fromlen + 1] != '\0')
				label = name + fromlen + 1;
			/* makeObjectName shortens the table's part, not the label */
			label = pnstrdup(label, pg_mbcliplen(label, strlen(label), NAMEDATALEN / 2 - 8));
			to = makeObjectName(table, NULL, label);
			for (int n = 1; SearchSysCacheExists2(STATEXTNAMENSP, CStringGetDatum(to),
												  ObjectIdGetDatum(nspid)); n++)
				to = makeObjectName(table, NULL, psprintf("%s%d", label, n));
		}
		if (strcmp(name, to) != 0)
			sql_exec(psprintf("ALTER STATISTICS %s.%s RENAME TO %s", schema,
							  quote_identifier(name), quote_identifier(to)));
	}
}

/*
 * Called first by every operation that will swap partitions of relid,
 * before it takes any other lock on it.  ATTACH and DETACH are for the
 * table's owner, so others are refused before they lock anything.  (A plain
 * table's replacements are serialized by ledger_lock_table instead, holding
 * no more than ACCESS SHARE on it while they wait: see target_open.)
 */
void
swap_serialize(Oid relid)
{
	char	   *relname = get_rel_name(relid);

	if (relname == NULL || get_rel_relkind(relid) != RELKIND_PARTITIONED_TABLE)
		return;
	if (!object_ownercheck(RelationRelationId, relid, GetUserId()))
		aclcheck_error(ACLCHECK_NOT_OWNER, OBJECT_TABLE,
					   quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)), relname));
	LockRelationOid(relid, ShareUpdateExclusiveLock);
	if (!SearchSysCacheExists1(RELOID, ObjectIdGetDatum(relid)))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("relation \"%s\" does not exist", relname),
				 errdetail("It was dropped while this call waited for its lock.")));
}

/*
 * Everything that needs the parent's lock, as one try, waiting at most
 * idem_etl.lock_timeout for each lock.
 */
static void
swap_once(void *arg)
{
	const SwapSpec *s = (const SwapSpec *) arg;
	const char *final_qual = psprintf("%s.%s", s->schema, quote_identifier(s->final_name));
	Oid			nspid = get_rel_namespace(s->parent->relid);
	int			nestlevel = sql_pin_search_path();
	List	   *old_statistics = NIL;

	settings_save("lock_timeout", psprintf("%d", idem_lock_timeout));
	if (s->old_name)
	{
		const char *old_qual = psprintf("%s.%s", s->schema, quote_identifier(s->old_name));

		/* DETACH takes ACCESS EXCLUSIVE on the parent: the wait is here */
		progress_phase("waiting for lock", -1);
		sql_exec(psprintf("ALTER TABLE %s DETACH PARTITION %s", s->parent->qualname, old_qual));
		old_statistics = statistics_names(get_relname_relid(s->old_name, nspid));
		/* now that no GRANT or REVOKE on it can come in between */
		newpart_copy_privileges(get_relname_relid(s->old_name, nspid),
								get_relname_relid(s->new_name, nspid), s->distributed);
		if (s->keep_name)
		{
			sql_exec(psprintf("ALTER TABLE %s RENAME TO %s", old_qual,
							  quote_identifier(s->keep_name)));
			/* on Citus, a kept version's indexes keep their names */
			if (!s->distributed)
				rename_indexes(nspid, s->schema, s->keep_name, s->old_name, s->keep_name);
			rename_statistics(nspid, s->schema, s->keep_name, s->old_name, NIL);
		}
		else
			sql_exec(psprintf("DROP TABLE %s", old_qual));
	}
	progress_phase("swapping", -1);
	sql_exec(psprintf("ALTER TABLE %s.%s RENAME TO %s", s->schema,
					  quote_identifier(s->new_name), quote_identifier(s->final_name)));
	rename_indexes(nspid, s->schema, s->final_name, s->new_name, s->final_name);
	/* copied from the old partition by LIKE, in its order: its names */
	rename_statistics(nspid, s->schema, s->final_name, s->new_name, old_statistics);
	sql_exec(psprintf("ALTER TABLE %s ATTACH PARTITION %s %s", s->parent->qualname,
					  final_qual, s->bound_sql));
	sql_exec(psprintf("ALTER TABLE %s DROP CONSTRAINT idem_etl_bound", final_qual));
	AtEOXact_GUC(true, nestlevel);
}

/*
 * On Citus, each rename is a statement Citus runs on every shard, which
 * readers of the parent would wait for: the new table's indexes are named
 * after the partition before any lock on the parent is taken (where the
 * partition's own indexes hold the names, with a number added, as CREATE
 * INDEX does), and a kept version's indexes keep theirs.  Then swap_once
 * has no index to rename.
 */
void
swap_partition(const SwapSpec *s)
{
	if (s->distributed)
	{
		int			nestlevel = sql_pin_search_path();

		rename_indexes(get_rel_namespace(s->parent->relid), s->schema, s->new_name,
					   s->new_name, s->final_name);
		AtEOXact_GUC(true, nestlevel);
	}
	for (int attempt = 0;; attempt++)
	{
		ErrorData  *failure = sql_try(swap_once, (void *) s);

		if (failure == NULL)
			return;
		if (failure->sqlerrcode != ERRCODE_LOCK_NOT_AVAILABLE)
			ReThrowError(failure);
		if (attempt >= idem_lock_retries)
			ereport(ERROR,
					(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
					 errmsg("could not swap partition \"%s\" of \"%s\": its locks were not granted in %d tries",
							s->final_name, s->parent->relname, attempt + 1),
					 errdetail("Each try waited idem_etl.lock_timeout (%d ms): %s",
							   idem_lock_timeout, failure->message),
					 errhint("Another session holds a lock on the table; retry later, or raise idem_etl.lock_timeout or idem_etl.lock_retries.")));
		ereport(DEBUG1,
				(errmsg("partition swap of \"%s\" timed out waiting for a lock, try %d of %d",
						s->parent->relname, attempt + 1, idem_lock_retries + 1)));
	}
}
