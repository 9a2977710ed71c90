/*
 * compat.h
 *		Every difference between the PostgreSQL majors idem_etl supports,
 *		in one place: the rest of src/ is written against the newest API,
 *		and each shim below names the upstream change that made it needed.
 *		No other file tests PG_VERSION_NUM.
 *
 * Supported: 15, 17, 18 and 19 (tested); 16 compiles by these shims, read
 * from the upstream commits, but no build of it can be had here to test.
 */
#ifndef IDEM_COMPAT_H
#define IDEM_COMPAT_H

#include "postgres.h"

#include "access/htup_details.h"
#include "access/tupdesc.h"
#include "catalog/pg_attribute.h"
#include "catalog/pg_class.h"
#include "catalog/pg_database.h"
#include "catalog/pg_publication.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "nodes/bitmapset.h"
#include "nodes/execnodes.h"
#include "nodes/parsenodes.h"
#include "utils/acl.h"
#include "utils/rel.h"
#include "utils/relcache.h"
#include "utils/syscache.h"

#if PG_VERSION_NUM < 150000 || PG_VERSION_NUM >= 200000
#error "idem_etl supports PostgreSQL 15 to 19"
#endif

/*
 * object_aclcheck replaced the per-catalog aclcheck functions (16, commit
 * c727f511bd): on 15, schemas' (the one idem_etl needs) by its old name.
 */
#if PG_VERSION_NUM < 160000
#include "catalog/pg_namespace.h"
static inline AclResult
object_aclcheck(Oid classid, Oid objectid, Oid roleid, AclMode mode)
{
	Assert(classid == NamespaceRelationId);
	return pg_namespace_aclcheck(objectid, roleid, mode);
}
#endif

/*
 * The varlena macros (VARDATA_ANY, VARSIZE_ANY_EXHDR, ...) were split off
 * from postgres.h into varatt.h (16), which postgres.h stopped including
 * (18).
 */
#if PG_VERSION_NUM >= 160000
#include "varatt.h"
#endif

/*
 * get_database_name moved from commands/dbcommands.h to utils/lsyscache.h
 * (19).
 */
#if PG_VERSION_NUM >= 190000
#include "utils/lsyscache.h"
#else
#include "commands/dbcommands.h"
#endif

/*
 * BackendId became ProcNumber, 0-based, in 17 (upstream: "Redefine backend
 * ID to be an index into the proc array"); storage/backendid.h is gone.
 * compat_my_proc_index() is this backend's 0-based slot among the
 * MaxBackends regular backends, or -1.  (MAX_BACKENDS moved from
 * postmaster/postmaster.h to storage/procnumber.h in 18.)
 */
#if PG_VERSION_NUM >= 170000
#include "storage/procnumber.h"
#define compat_my_proc_index() \
	(MyProcNumber == INVALID_PROC_NUMBER ? -1 : (int) MyProcNumber)
#else
#include "storage/backendid.h"
#define compat_my_proc_index() \
	(MyBackendId == InvalidBackendId ? -1 : (int) MyBackendId - 1)
#endif

/*
 * pgstat_fetch_stat_local_beentry(i) was renamed
 * pgstat_get_local_beentry_by_index(i) in 16 (its index stayed 1-based).
 */
#if PG_VERSION_NUM < 160000
#define pgstat_get_local_beentry_by_index(i) pgstat_fetch_stat_local_beentry(i)
#endif

/*
 * Relation's rd_firstRelfilenodeSubid is rd_firstRelfilelocatorSubid from
 * 16 (upstream: "Change internal RelFileNode references to RelFileNumber
 * or RelFileLocator").
 */
#if PG_VERSION_NUM >= 160000
#define compat_first_relfile_subid(rel) ((rel)->rd_firstRelfilelocatorSubid)
#else
#define compat_first_relfile_subid(rel) ((rel)->rd_firstRelfilenodeSubid)
#endif

/*
 * Ownership checks: pg_class_ownercheck and pg_database_ownercheck became
 * object_ownercheck(classid, objectid, roleid) in 16 (upstream: "Refactor
 * ownercheck functions").
 */
#if PG_VERSION_NUM < 160000
static inline bool
object_ownercheck(Oid classid, Oid objectid, Oid roleid)
{
	if (classid == DatabaseRelationId)
		return pg_database_ownercheck(objectid, roleid);
	Assert(classid == RelationRelationId);
	return pg_class_ownercheck(objectid, roleid);
}
#endif

/*
 * RelationGetPrimaryKeyIndex takes deferrable_ok from 18 (it may then
 * return a deferrable primary key, for logical replication); false keeps
 * the earlier majors' answer, where a deferrable primary key is not the
 * relation's pk index.
 */
#if PG_VERSION_NUM >= 180000
#define compat_primary_key_index(rel) RelationGetPrimaryKeyIndex((rel), false)
#else
#define compat_primary_key_index(rel) RelationGetPrimaryKeyIndex(rel)
#endif

/*
 * The range table of one relation that rows are inserted into (bulkload.c),
 * as COPY FROM sets it up: permissions moved from the RTE to
 * RTEPermissionInfo in 16 (upstream: "Rework query relation permission
 * checking"), and ExecInitRangeTable takes the unpruned relids in 18
 * (upstream: "Don't lock partitions pruned by initial pruning"; COPY FROM
 * passes bms_make_singleton(1) the same way).
 */
static inline void
compat_init_insert_range_table(EState *estate, RangeTblEntry *rte, Bitmapset *inserted)
{
#if PG_VERSION_NUM >= 160000
	RTEPermissionInfo *perm = makeNode(RTEPermissionInfo);

	perm->relid = rte->relid;
	perm->requiredPerms = ACL_INSERT;
	perm->insertedCols = inserted;
	rte->perminfoindex = 1;
#if PG_VERSION_NUM >= 180000
	ExecInitRangeTable(estate, list_make1(rte), list_make1(perm), bms_make_singleton(1));
#else
	ExecInitRangeTable(estate, list_make1(rte), list_make1(perm));
#endif
#else
	rte->requiredPerms = ACL_INSERT;
	rte->insertedCols = inserted;
	ExecInitRangeTable(estate, list_make1(rte));
#endif
}

/*
 * Whether a column has a statistics target of its own.  17 moved
 * attstattarget out of the fixed part of pg_attribute (so out of a
 * relation's TupleDesc) and made it NULL by default instead of -1
 * (upstream: "Make attstattarget nullable").
 */
static inline bool
compat_has_stattarget(Relation rel, Form_pg_attribute att)
{
#if PG_VERSION_NUM >= 170000
	HeapTuple	tup = SearchSysCache2(ATTNUM, ObjectIdGetDatum(RelationGetRelid(rel)),
									  Int16GetDatum(att->attnum));
	bool		isnull = true;

	if (HeapTupleIsValid(tup))
	{
		(void) SysCacheGetAttr(ATTNUM, tup, Anum_pg_attribute_attstattarget, &isnull);
		ReleaseSysCache(tup);
	}
	return !isnull;
#else
	(void) rel;
	return att->attstattarget >= 0;
#endif
}

/*
 * Whether a relation is named in a publication.  19 split
 * GetRelationPublications into the publications that include it and those
 * that name it to leave it out (FOR ALL TABLES EXCEPT); either way the name
 * is on that relation, and a new table that replaces it would not have it.
 */
static inline bool
compat_in_publication_by_name(Oid relid)
{
#if PG_VERSION_NUM >= 190000
	return GetRelationIncludedPublications(relid) != NIL ||
		GetRelationExcludedPublications(relid) != NIL;
#else
	return GetRelationPublications(relid) != NIL;
#endif
}

/*
 * A TupleDesc built entry by entry must be finished with
 * TupleDescFinalize() from 19, which computes what tuple deforming reads
 * (without it, 19 reads garbage and crashes); before 19 there is nothing
 * to finish.
 */
#if PG_VERSION_NUM < 190000
#define TupleDescFinalize(desc) ((void) (desc))
#endif

/*
 * The permissions a query needs moved from its RangeTblEntrys to a list of
 * RTEPermissionInfo (16, upstream "Rework query relation permission
 * checking"), and ExecCheckRTPerms became ExecCheckPermissions.
 * compat_query_readable: the query's relations pass the executor's own
 * checks (and its hook).  compat_query_unreadable_rel: the first relation
 * it reads that the role checked (set in *checked: the caller, or a view's
 * owner) may read neither as a table nor by any column, else InvalidOid.
 */
#if PG_VERSION_NUM >= 160000
#define compat_query_readable(q) \
	ExecCheckPermissions((q)->rtable, (q)->rteperminfos, false)
#define COMPAT_PERMS_LIST(q) ((q)->rteperminfos)
typedef RTEPermissionInfo CompatPerms;
#define COMPAT_PERMS_APPLIES(p) true
#else
#define compat_query_readable(q) ExecCheckRTPerms((q)->rtable, false)
#define COMPAT_PERMS_LIST(q) ((q)->rtable)
typedef RangeTblEntry CompatPerms;
#define COMPAT_PERMS_APPLIES(p) ((p)->rtekind == RTE_RELATION)
#endif

static inline Oid
compat_query_unreadable_rel(Query *q, Oid *checked)
{
	ListCell   *lc;

	foreach(lc, COMPAT_PERMS_LIST(q))
	{
		CompatPerms *p = (CompatPerms *) lfirst(lc);
		Oid			userid;

		if (!COMPAT_PERMS_APPLIES(p) || (p->requiredPerms & ACL_SELECT) == 0)
			continue;
		userid = OidIsValid(p->checkAsUser) ? p->checkAsUser : GetUserId();
		if (pg_class_aclcheck(p->relid, userid, ACL_SELECT) != ACLCHECK_OK &&
			pg_attribute_aclcheck_all(p->relid, userid, ACL_SELECT, ACLMASK_ANY) != ACLCHECK_OK)
		{
			*checked = userid;
			return p->relid;
		}
	}
	return InvalidOid;
}


/*
 * get_extension_schema was static in commands/extension.c until 16, which
 * exported it (upstream: "Allow extensions to reference another extension's
 * schema via @extschema:name@"); before, the same lookup by hand.
 */
#if PG_VERSION_NUM >= 160000
#include "commands/extension.h"
#else
#include "access/genam.h"
#include "access/table.h"
#include "catalog/pg_extension.h"
#include "utils/fmgroids.h"
static inline Oid
get_extension_schema(Oid ext_oid)
{
	Relation	rel = table_open(ExtensionRelationId, AccessShareLock);
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tuple;
	Oid			result = InvalidOid;

	ScanKeyInit(&key, Anum_pg_extension_oid, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(ext_oid));
	scan = systable_beginscan(rel, ExtensionOidIndexId, true, NULL, 1, &key);
	tuple = systable_getnext(scan);
	if (HeapTupleIsValid(tuple))
		result = ((Form_pg_extension) GETSTRUCT(tuple))->extnamespace;
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return result;
}
#endif

/*
 * Temporal keys: PRIMARY KEY and UNIQUE (..., range WITHOUT OVERLAPS), from
 * 18 (upstream: "Add temporal PRIMARY KEY and UNIQUE constraints").
 * etl_snapshot_ddl prints one as a statement where the server takes it,
 * else as a comment.
 */
#define COMPAT_HAS_WITHOUT_OVERLAPS (PG_VERSION_NUM >= 180000)

#endif							/* IDEM_COMPAT_H */
