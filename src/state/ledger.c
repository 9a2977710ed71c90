/*
 * ledger.c
 *		The run ledger (idem_etl.runs), the locks that serialize runs, and
 *		writes to the extension's state with its owner's rights.
 *
 * Every committed call adds a row.  The table is readable by everybody and
 * writable by nobody but its owner: rows are inserted here with the owner's
 * rights, after the operation itself succeeded, so that no role can forge a
 * run that would make somebody else's load be skipped.  The other state
 * tables (kept partitions, jobs) are written the same way, through
 * ledger_exec_as_owner.
 */
#include "postgres.h"

#include "compat.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/partition.h"
#include "catalog/pg_class.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_type.h"
#include "common/hashfn.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "storage/lock.h"
#include "utils/inval.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "access/genam.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "catalog/indexing.h"
#include "catalog/pg_extension.h"
#include "commands/dbcommands.h"
#include "utils/fmgroids.h"
#include "utils/rel.h"

#include "util/settings.h"
#include "state/ledger.h"
#include "util/sql.h"

/*
 * Advisory locks of idem_etl use their own value in the field that tells
 * pg_advisory_lock(bigint) (1) and pg_advisory_lock(int, int) (2) apart, so
 * they never collide with an application's advisory locks.
 */
#define IDEM_ETL_LOCK_SPACE 0x1DE7

/*
 * The version of idem_etl's objects in this database (pg_extension's
 * extversion), NULL when the extension is not installed.  The shared library
 * is always the newest one installed, while each database keeps the objects
 * of the version it was created with until ALTER EXTENSION idem_etl UPDATE:
 * code that needs objects of a later version asks first, once per call,
 * instead of failing on a missing column or function.
 */
char *
ledger_objects_version(void)
{
	Relation	rel;
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tup;
	char	   *version = NULL;

	rel = table_open(ExtensionRelationId, AccessShareLock);
	ScanKeyInit(&key, Anum_pg_extension_extname, BTEqualStrategyNumber, F_NAMEEQ,
				CStringGetDatum("idem_etl"));
	scan = systable_beginscan(rel, ExtensionNameIndexId, true, NULL, 1, &key);
	tup = systable_getnext(scan);
	if (HeapTupleIsValid(tup))
	{
		bool		isnull;
		Datum		d = heap_getattr(tup, Anum_pg_extension_extversion,
									 RelationGetDescr(rel), &isnull);

		if (!isnull)
			version = text_to_cstring(DatumGetTextPP(d));
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return version;
}

/* "major.minor" as one comparable number; unparsable versions sort first */
static int
version_number(const char *version)
{
	int			major = 0;
	int			minor = 0;

	if (version == NULL || sscanf(version, "%d.%d", &major, &minor) < 1)
		return -1;
	return major * 1000 + minor;
}

/* Whether this database's objects are at least of this version. */
bool
ledger_objects_at_least(const char *version)
{
	return version_number(ledger_objects_version()) >= version_number(version);
}

/*
 * Refuse, with 55000 and what to do, when what (a function, an option)
 * needs objects of a later version than this database has.
 */
void
ledger_require_objects(const char *version, const char *what)
{
	char	   *have = ledger_objects_version();

	if (version_number(have) < version_number(version))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("%s needs version %s of extension \"idem_etl\"", what, version),
				 errdetail("The objects of idem_etl in database \"%s\" are at version %s; the installed library is newer.",
						   get_database_name(MyDatabaseId), have ? have : "(none)"),
				 errhint("Run ALTER EXTENSION idem_etl UPDATE in this database.")));
}

/*
 * Serialize calls for the same (target, operation, key) until the end of the
 * transaction.  Waiting honours lock_timeout and deadlock detection.
 */
void
ledger_lock_key(Oid target, const char *operation, const char *key)
{
	LOCKTAG		tag;
	uint32		h;

	h = hash_bytes((const unsigned char *) key, strlen(key)) ^
		hash_bytes((const unsigned char *) operation, strlen(operation));
	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, target, h, IDEM_ETL_LOCK_SPACE);
	(void) LockAcquire(&tag, ExclusiveLock, false, false);

	/* what the holder before us changed (a new partition) must be seen */
	AcceptInvalidationMessages();
}

/*
 * Run plan (one row at most) under snapshot: the run_id in the first column
 * of its row, 0 when there is none; the row stays in SPI_tuptable.
 */
static int64
first_run_id(SPIPlanPtr plan, Datum *args, Snapshot snapshot)
{
	bool		isnull;

	if (SPI_execute_snapshot(plan, args, NULL, snapshot, InvalidSnapshot,
							 true, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "ledger lookup failed");
	if (SPI_processed == 0)
		return 0;
	return DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
}

/*
 * The locks that serialize replacements of the partitions of one target (a
 * plain table's replacements take the first exclusively, ledger_lock_table).
 * A call that replaces one partition takes
 * the target's "all partitions" lock in share mode, then the partition's
 * own lock (keyed by its bound); etl_replace_partitions, which may touch
 * thousands of them, takes the "all partitions" lock exclusively instead of
 * one lock per partition: the lock table has room for a few thousand locks
 * in all, shared by every session (max_locks_per_transaction).
 */
static void
lock_all_partitions(Oid target, LOCKMODE mode)
{
	LOCKTAG		tag;

	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, target, 0, IDEM_ETL_LOCK_SPACE + 1);
	(void) LockAcquire(&tag, mode, false, false);
	AcceptInvalidationMessages();
}

void
ledger_lock_partition(Oid target, const char *bound)
{
	lock_all_partitions(target, ShareLock);
	ledger_lock_key(target, "replace_partition", bound);
}

void
ledger_lock_partitions(Oid target)
{
	lock_all_partitions(target, ExclusiveLock);
}

/*
 * Replacements of a plain table's rows run one at a time, whatever values
 * or conditions they name (two may cover the same rows, and a lock taken in
 * share mode by one call and then exclusively by a later call of the same
 * transaction could deadlock with another).  They delete what their
 * snapshot shows: under REPEATABLE READ or SERIALIZABLE, a run on the table
 * committed after the snapshot was taken, whose rows the delete would not
 * see and would leave beside the new ones, is 40001, as PostgreSQL reports
 * a row changed concurrently.
 */
void
ledger_lock_table(Oid target)
{
	Oid			argtypes[1] = {OIDOID};
	Datum		args[1];
	static SPIPlanPtr plan = NULL;
	int64		latest_id;

	lock_all_partitions(target, ExclusiveLock);
	if (!IsolationUsesXactSnapshot())
		return;
	args[0] = ObjectIdGetDatum(target);
	sql_prepare_kept(&plan, "SELECT run_id FROM idem_etl.runs"
					 " WHERE target_oid OPERATOR(pg_catalog.=) $1"
					 " ORDER BY run_id DESC LIMIT 1", 1, argtypes);
	latest_id = first_run_id(plan, args, GetLatestSnapshot());
	if (first_run_id(plan, args, GetTransactionSnapshot()) != latest_id)
		ereport(ERROR,
				(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				 errmsg("could not serialize access due to a concurrent run on \"%s\"",
						get_rel_name(target)),
				 errdetail("Run %lld on the table committed after this transaction's snapshot was taken.",
						   (long long) latest_id),
				 errhint("Retry the transaction.")));
}

static LedgerPrior
lookup_prior(SPIPlanPtr plan, Datum *args, const char *nulls, Snapshot snapshot)
{
	LedgerPrior prior = {0, NULL, 0};
	int			rc;
	bool		isnull;

	rc = SPI_execute_snapshot(plan, args, nulls, snapshot, InvalidSnapshot,
							  true, false, 1);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "ledger lookup failed: %s", SPI_result_code_string(rc));
	if (SPI_processed == 0)
		return prior;
	prior.run_id = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0],
											   SPI_tuptable->tupdesc, 1, &isnull));
	prior.fingerprint = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2);
	prior.rows = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0],
											 SPI_tuptable->tupdesc, 3, &isnull));
	return prior;
}

/*
 * The latest run for (target, operation, run_key) that applied its batch
 * (skips are left out: a skip has the fingerprint of the run it skipped, and
 * a correction corrects the run that wrote the rows), as committed now: the
 * caller holds the run-key lock, so no other such run is in progress.  Under
 * REPEATABLE READ or SERIALIZABLE a run committed after our snapshot cannot
 * be seen by the rest of the transaction, so the only safe answer is a
 * serialization failure, which the caller retries.
 */
LedgerPrior
ledger_prior_run(Oid target, const char *operation, const char *run_key,
				 const char *partition_value)
{
	Oid			argtypes[4] = {OIDOID, TEXTOID, TEXTOID, TEXTOID};
	Datum		args[4];
	char		nulls[4] = {' ', ' ', ' ', ' '};
	SPIPlanPtr	plan;
	LedgerPrior latest;

	args[0] = ObjectIdGetDatum(target);
	args[1] = CStringGetTextDatum(operation);
	args[2] = CStringGetTextDatum(run_key);
	if (partition_value)
		args[3] = CStringGetTextDatum(partition_value);
	else
		nulls[3] = 'n';
	plan = sql_prepare("SELECT run_id, fingerprint,"
					   " coalesce(rows_loaded, inserted OPERATOR(pg_catalog.+) updated"
					   " OPERATOR(pg_catalog.+) unchanged)"
					   " FROM idem_etl.runs"
					   " WHERE target_oid OPERATOR(pg_catalog.=) $1"
					   " AND operation OPERATOR(pg_catalog.=) $2"
					   " AND run_key OPERATOR(pg_catalog.=) $3"
					   " AND (partition_value OPERATOR(pg_catalog.=) $4"
					   " OR (partition_value IS NULL AND $4 IS NULL))"
					   " AND NOT skipped"
					   " ORDER BY run_id DESC LIMIT 1", 4, argtypes);

	latest = lookup_prior(plan, args, nulls, GetLatestSnapshot());
	if (IsolationUsesXactSnapshot())
	{
		LedgerPrior visible = lookup_prior(plan, args, nulls, GetTransactionSnapshot());

		if (visible.run_id != latest.run_id)
			ereport(ERROR,
					(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
					 errmsg("could not serialize access due to a concurrent run with run_key \"%s\"",
							run_key),
					 errdetail("Run %lld for the same target committed after this transaction's snapshot was taken.",
							   (long long) latest.run_id),
					 errhint("Retry the transaction.")));
	}
	SPI_freeplan(plan);
	return latest;
}

/*
 * For a batch load with a run_key (run: its operation, target, run_key and
 * the batch's fingerprint): true when the latest run under the run_key
 * applied this same batch, so that the call is skipped (run->skipped, and
 * *unchanged the rows that run left as the batch's result); else false, and
 * run->corrects names that run when it applied another batch.  Each case is
 * a NOTICE; what names the call in it ("upsert into").
 */
bool
ledger_skip_batch(LedgerRun *run, const char *relname, const char *what,
				  int64 *unchanged)
{
	LedgerPrior prior = ledger_prior_run(run->target_oid, run->operation,
										 run->run_key, NULL);

	if (prior.run_id == 0)
		return false;
	if (strcmp(prior.fingerprint, run->fingerprint) == 0)
	{
		ereport(NOTICE,
				(errmsg("skipping %s \"%s\": run %lld already has this batch for run_key \"%s\"",
						what, relname, (long long) prior.run_id, run->run_key)));
		run->skipped = true;
		*unchanged = prior.rows;
		return true;
	}
	ereport(NOTICE,
			(errmsg("run_key \"%s\" was applied to \"%s\" by run %lld with a different batch; applying this one as a correction",
					run->run_key, relname, (long long) prior.run_id)));
	run->corrects = prior.run_id;
	return false;
}

/*
 * Run a one-row lookup in the ledger (first column a run_id) as committed
 * now; under REPEATABLE READ or SERIALIZABLE, a serialization failure when
 * the transaction's snapshot would see another answer (see above).
 */
static SPITupleTable *
lookup_latest(SPIPlanPtr *cache, const char *sql, int nargs, Oid *argtypes, Datum *args,
			  const char *run_key)
{
	SPIPlanPtr	plan = sql_prepare_kept(cache, sql, nargs, argtypes);
	int64		latest_id = first_run_id(plan, args, GetLatestSnapshot());
	SPITupleTable *latest = SPI_tuptable;
	uint64		nlatest = SPI_processed;

	if (IsolationUsesXactSnapshot())
	{
		int64		visible_id = first_run_id(plan, args, GetTransactionSnapshot());

		if (visible_id != latest_id)
			ereport(ERROR,
					(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
					 errmsg("could not serialize access due to a concurrent run with run_key \"%s\"",
							run_key),
					 errdetail("Run %lld for the same target committed after this transaction's snapshot was taken.",
							   (long long) latest_id),
					 errhint("Retry the transaction.")));
	}
	return nlatest > 0 ? latest : NULL;
}

/*
 * The prior of ledger_partition_prior and ledger_where_prior: the latest
 * applied run, as the lookup tt found it (NULL: none), and then the first
 * later run that changed what it loaded, looked up by change_sql with $1
 * the target (args[0]), $2 the applied run (args[1] is set here), $3 as
 * the caller set it and $4 the other tables through which idem_etl's own
 * writes reach the target's rows (args[3], see related_targets).
 */
static LedgerPartPrior
prior_and_change(SPITupleTable *tt, SPIPlanPtr *change_cache, const char *change_sql,
				 Oid *argtypes, Datum *args, const char *run_key)
{
	LedgerPartPrior prior = {0, NULL, 0, NULL, InvalidOid, InvalidOid, false};
	bool		isnull;

	if (tt == NULL)
		return prior;
	prior.applied = DatumGetInt64(SPI_getbinval(tt->vals[0], tt->tupdesc, 1, &isnull));
	prior.fingerprint = SPI_getvalue(tt->vals[0], tt->tupdesc, 2);
	if (tt->tupdesc->natts >= 4)
	{
		Datum		d = SPI_getbinval(tt->vals[0], tt->tupdesc, 3, &isnull);

		prior.partition_oid = isnull ? InvalidOid : DatumGetObjectId(d);
		d = SPI_getbinval(tt->vals[0], tt->tupdesc, 4, &isnull);
		prior.partition_filenode = isnull ? InvalidOid : DatumGetObjectId(d);
	}

	argtypes[1] = INT8OID;
	args[1] = Int64GetDatum(prior.applied);
	tt = lookup_latest(change_cache, change_sql, 4, argtypes, args, run_key);
	if (tt != NULL)
	{
		prior.changed_by = DatumGetInt64(SPI_getbinval(tt->vals[0], tt->tupdesc, 1, &isnull));
		prior.changed_op = SPI_getvalue(tt->vals[0], tt->tupdesc, 2);
	}
	return prior;
}

/*
 * The statements of ledger_partition_prior, by the column that names the
 * partition: partition_bound, or on objects still at 0.1 partition_value
 * (which have no partition_oid nor partition_filenode either).
 */
#define PARTITION_APPLIED_SQL(col, part) \
	"SELECT run_id, fingerprint, " part " FROM idem_etl.runs" \
	" WHERE target_oid OPERATOR(pg_catalog.=) $1" \
	" AND operation OPERATOR(pg_catalog.=) 'replace_partition'" \
	" AND run_key OPERATOR(pg_catalog.=) $2" \
	" AND " col " OPERATOR(pg_catalog.=) $3" \
	" AND NOT skipped ORDER BY run_id DESC LIMIT 1"
#define PARTITION_CHANGED_SQL(col) \
	"SELECT run_id, operation FROM idem_etl.runs" \
	" WHERE (target_oid OPERATOR(pg_catalog.=) $1 OR target_oid OPERATOR(pg_catalog.=) ANY ($4))" \
	" AND run_id OPERATOR(pg_catalog.>) $2 AND NOT skipped" \
	" AND ((target_oid OPERATOR(pg_catalog.=) $1 AND " col " OPERATOR(pg_catalog.=) $3" \
	" AND (operation OPERATOR(pg_catalog.=) 'replace_partition'" \
	" OR operation OPERATOR(pg_catalog.=) 'restore_partition'))" \
	" OR (operation OPERATOR(pg_catalog.=) ANY ('{upsert,snapshot}'::pg_catalog.text[])" \
	" AND (inserted OPERATOR(pg_catalog.+) updated OPERATOR(pg_catalog.+) deleted)" \
	" OPERATOR(pg_catalog.>) 0)" \
	" OR (target_oid OPERATOR(pg_catalog.=) $1 AND operation OPERATOR(pg_catalog.=) 'replace_where'" \
	" AND (SELECT c.relkind FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) $1)" \
	" OPERATOR(pg_catalog.<>) 'p')" \
	" OR (target_oid OPERATOR(pg_catalog.=) ANY ($4) AND operation OPERATOR(pg_catalog.<>) ALL ('{upsert,snapshot}'::pg_catalog.text[])))" \
	" ORDER BY run_id LIMIT 1"

/*
 * The tables other than target through which idem_etl's loads write rows
 * that target holds (any of them, with the whole table: descendants, or a
 * partition partoid), as an oid[]: target's ancestors, whose loads route
 * rows into it, and the given partition, or every table below target.
 * Those tables' runs are recorded under their own OIDs (a partition's
 * current one: a replacement of it gives it a new one, and is a change
 * itself).
 */
static Datum
related_targets(Oid target, Oid partoid, bool descendants)
{
	List	   *oids = get_partition_ancestors(target);
	Datum	   *elems;
	int			n = 0;
	ListCell   *lc;

	if (OidIsValid(partoid))
		oids = lappend_oid(oids, partoid);
	if (descendants && get_rel_relkind(target) == RELKIND_PARTITIONED_TABLE)
		oids = list_concat(oids, list_delete_first(find_all_inheritors(target, NoLock, NULL)));
	elems = palloc(sizeof(Datum) * (list_length(oids) + 1));
	foreach(lc, oids)
		elems[n++] = ObjectIdGetDatum(lfirst_oid(lc));
	return PointerGetDatum(construct_array(elems, n, OIDOID, sizeof(Oid), true, TYPALIGN_INT));
}

/*
 * A replacement with run_key may be skipped only when the partition still
 * holds what an earlier run with that run_key loaded into it.  The
 * partition is identified by its bound, not by the value passed (all the
 * values of a month name the same monthly partition): the latest run with
 * run_key that replaced the partition with that bound, and the first run
 * after it that changed the partition: another replacement or a restore of
 * it, an upsert or a snapshot into the target that wrote rows (which
 * partitions those wrote is not recorded, so any such run counts), or, on a plain table,
 * an etl_replace_where (its condition cannot be compared with a value; on
 * a partitioned table it records a replacement of each partition it
 * rebuilt); and any load that wrote through the partition partoid itself
 * or through an ancestor of target.
 */
LedgerPartPrior
ledger_partition_prior(Oid target, Oid partoid, const char *run_key,
					   const char *bound, const char *value)
{
	Oid			argtypes[4] = {OIDOID, TEXTOID, TEXTOID, OIDARRAYOID};
	Datum		args[4];
	static SPIPlanPtr applied_plan = NULL;
	static SPIPlanPtr changed_plan = NULL;

	args[0] = ObjectIdGetDatum(target);
	args[1] = CStringGetTextDatum(run_key);
	args[3] = related_targets(target, partoid, false);
	if (ledger_objects_at_least("0.2"))
	{
		args[2] = CStringGetTextDatum(bound);
		return prior_and_change(lookup_latest(&applied_plan,
											  PARTITION_APPLIED_SQL("partition_bound",
																	"partition_oid, partition_filenode"),
											  3, argtypes, args, run_key),
								&changed_plan, PARTITION_CHANGED_SQL("partition_bound"),
								argtypes, args, run_key);
	}
	/* objects still at 0.1: looked up by run value, as 0.1 did (not cached) */
	args[2] = CStringGetTextDatum(value);
	return prior_and_change(lookup_latest(NULL, PARTITION_APPLIED_SQL("partition_value",
																	  "NULL::pg_catalog.oid, NULL::pg_catalog.oid"),
										  3, argtypes, args, run_key),
							NULL, PARTITION_CHANGED_SQL("partition_value"),
							argtypes, args, run_key);
}

/*
 * etl_replace_where with run_key: the latest run with run_key that replaced
 * the rows of this condition on target, and the first later run that wrote
 * into target at all (a replacement of any partition, a restore, another
 * etl_replace_where, an upsert or snapshot that wrote rows, also through a partition of
 * target or an ancestor of it): which rows those touched is not recorded in
 * a way a condition can be compared with, so any counts.
 */
LedgerPartPrior
ledger_where_prior(Oid target, const char *run_key, const char *bound)
{
	Oid			argtypes[4] = {OIDOID, TEXTOID, TEXTOID, OIDARRAYOID};
	Datum		args[4];
	SPITupleTable *tt;
	LedgerPartPrior prior;

	ledger_require_objects("0.2", "etl_replace_where");
	args[0] = ObjectIdGetDatum(target);
	args[1] = CStringGetTextDatum(run_key);
	args[2] = CStringGetTextDatum(bound);
	args[3] = related_targets(target, InvalidOid, true);
	tt = lookup_latest(NULL, "SELECT run_id, fingerprint FROM idem_etl.runs"
					   " WHERE target_oid OPERATOR(pg_catalog.=) $1"
					   " AND operation OPERATOR(pg_catalog.=) 'replace_where'"
					   " AND run_key OPERATOR(pg_catalog.=) $2"
					   " AND partition_bound OPERATOR(pg_catalog.=) $3"
					   " AND NOT skipped ORDER BY run_id DESC LIMIT 1",
					   3, argtypes, args, run_key);
	prior = prior_and_change(tt, NULL, "SELECT run_id, operation FROM idem_etl.runs"
							 " WHERE (target_oid OPERATOR(pg_catalog.=) $1"
							 " OR target_oid OPERATOR(pg_catalog.=) ANY ($4))"
							 " AND run_id OPERATOR(pg_catalog.>) $2 AND NOT skipped"
							 " AND (operation OPERATOR(pg_catalog.=)"
							 " ANY ('{replace_partition,restore_partition,replace_where}'::pg_catalog.text[])"
							 " OR (operation OPERATOR(pg_catalog.=) ANY ('{upsert,snapshot}'::pg_catalog.text[])"
							 " AND (inserted OPERATOR(pg_catalog.+) updated OPERATOR(pg_catalog.+) deleted)"
							 " OPERATOR(pg_catalog.>) 0))"
							 " ORDER BY run_id LIMIT 1",
							 argtypes, args, run_key);

	/*
	 * On a partitioned target the run recorded, in its transaction, a
	 * replacement of each partition it rebuilt: each must still be there,
	 * with the same file, and still a partition of target (see
	 * rebuild_same_as_prior in rebuild.c).
	 */
	if (prior.applied != 0 && get_rel_relkind(target) == RELKIND_PARTITIONED_TABLE)
	{
		Oid			runs_types[2] = {OIDOID, INT8OID};

		args[1] = Int64GetDatum(prior.applied);
		if (SPI_execute_with_args("SELECT FROM idem_etl.runs w, idem_etl.runs r"
								  " WHERE w.run_id OPERATOR(pg_catalog.=) $2"
								  " AND r.xmin OPERATOR(pg_catalog.=) w.xmin"
								  " AND r.run_id OPERATOR(pg_catalog.<) w.run_id"
								  " AND r.target_oid OPERATOR(pg_catalog.=) $1"
								  " AND r.operation OPERATOR(pg_catalog.=) 'replace_partition'"
								  " AND NOT EXISTS (SELECT FROM pg_catalog.pg_class c"
								  " WHERE c.oid OPERATOR(pg_catalog.=) r.partition_oid"
								  " AND c.relfilenode OPERATOR(pg_catalog.=) r.partition_filenode"
		/* and still in target's tree: not detached since */
								  " AND c.oid OPERATOR(pg_catalog.=) ANY (ARRAY("
								  " SELECT t.relid FROM pg_catalog.pg_partition_tree($1::pg_catalog.regclass) t)))"
								  " LIMIT 1", 2, runs_types, args, NULL, true, 1) != SPI_OK_SELECT)
			elog(ERROR, "could not look up the partitions of run %lld", (long long) prior.applied);
		prior.partition_gone = SPI_processed > 0;
	}
	return prior;
}

static Oid
ledger_owner(void)
{
	Oid			relid = get_relname_relid("runs", get_namespace_oid(IDEM_ETL_STATE_SCHEMA, false));
	HeapTuple	tup = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	Oid			owner;

	if (!HeapTupleIsValid(tup))
		elog(ERROR, "idem_etl.runs does not exist");
	owner = ((Form_pg_class) GETSTRUCT(tup))->relowner;
	ReleaseSysCache(tup);
	return owner;
}

/*
 * Run one statement on the extension's state with the rights of the ledger's
 * owner; SPI_tuptable holds its result.  Callers are the extension's own
 * functions, after their checks: this is what keeps the state tables out of
 * reach of direct writes.
 *
 * The statement is fixed text that qualifies every name; search_path is
 * pinned as well, and the security context is restricted, so that nothing
 * the caller set in its session (search_path, role or database settings,
 * temporary objects) can run with the owner's rights.
 */
static void
exec_as_owner(SPIPlanPtr *cache, const char *sql, int nargs, Oid *argtypes,
			  Datum *args, const char *nulls, int expected)
{
	Oid			save_userid;
	int			save_sec_context;
	int			nestlevel;
	SPIPlanPtr	plan;
	int			rc;

	GetUserIdAndSecContext(&save_userid, &save_sec_context);
	SetUserIdAndSecContext(ledger_owner(),
						   save_sec_context | SECURITY_LOCAL_USERID_CHANGE |
						   SECURITY_RESTRICTED_OPERATION);
	nestlevel = sql_pin_search_path();
	plan = sql_prepare_kept(cache, sql, nargs, argtypes);
	rc = SPI_execute_plan(plan, args, nulls, false, 0);
	if (rc != expected)
		elog(ERROR, "writing idem_etl's state failed: %s", SPI_result_code_string(rc));
	if (cache == NULL)
		SPI_freeplan(plan);
	AtEOXact_GUC(true, nestlevel);
	SetUserIdAndSecContext(save_userid, save_sec_context);
}

void
ledger_exec_as_owner(const char *sql, int nargs, Oid *argtypes, Datum *args,
					 const char *nulls, int expected)
{
	exec_as_owner(NULL, sql, nargs, argtypes, args, nulls, expected);
}

/*
 * The same, for a statement run over and over (a pipeline's bookkeeping,
 * once per period): parsed and planned once per session, its plan kept in
 * *cache.
 */
void
ledger_exec_as_owner_kept(SPIPlanPtr *cache, const char *sql, int nargs, Oid *argtypes,
						  Datum *args, const char *nulls, int expected)
{
	exec_as_owner(cache, sql, nargs, argtypes, args, nulls, expected);
}

/*
 * Values that go into the state tables' indexes (run_key, job_name) must
 * fit in an index entry; refuse longer ones before any work, with 22001.
 */
void
ledger_check_length(const char *argname, const char *value)
{
	size_t		len = value ? strlen(value) : 0;

	if (len > IDEM_MAX_KEY_BYTES)
		ereport(ERROR,
				(errcode(ERRCODE_STRING_DATA_RIGHT_TRUNCATION),
				 errmsg("%s is too long", argname),
				 errdetail("It is %zu bytes long; at most %d bytes are allowed.",
						   len, IDEM_MAX_KEY_BYTES),
				 errhint("Use a shorter %s, for instance a hash of the long one.", argname)));
}

/*
 * Bounded ledger: delete the runs older than idem_etl.run_retention, except
 * those a future skip or correction depends on: the latest applied run of
 * every (target, operation, run_key, partition bound); and, for the check
 * that a partition was not changed since, the latest applied replacement or
 * restore of every partition and the latest upsert or snapshot that wrote rows into
 * every target (whether a later change exists is all that check asks).
 * Only for targets that still exist: a dropped table's runs decide nothing,
 * unless a new table gets its OID, after the OID counter wrapped around,
 * and its first load would be skipped by them.  Runs with the owner's
 * rights; the retention is a server setting, so no caller can shorten it.
 * Returns the number of runs deleted.
 */
int64
ledger_purge(void)
{
	/* objects still at 0.1 have no partition_bound: keep every run there */
	if (idem_run_retention <= 0 || !ledger_objects_at_least("0.2"))
		return 0;
	ledger_exec_as_owner(psprintf("WITH keep AS ("
								  " SELECT DISTINCT ON (target_oid, operation, run_key, partition_bound) run_id"
								  " FROM idem_etl.runs WHERE run_key IS NOT NULL AND NOT skipped"
								  " ORDER BY target_oid, operation, run_key, partition_bound, run_id DESC)"
								  ", keep_part AS ("
								  " SELECT DISTINCT ON (target_oid, partition_bound) run_id"
								  " FROM idem_etl.runs WHERE NOT skipped AND operation OPERATOR(pg_catalog.=)"
								  " ANY ('{replace_partition,restore_partition}'::pg_catalog.text[])"
								  " ORDER BY target_oid, partition_bound, run_id DESC)"
								  ", keep_upsert AS ("
								  " SELECT DISTINCT ON (target_oid) run_id FROM idem_etl.runs"
								  " WHERE operation OPERATOR(pg_catalog.=) ANY ('{upsert,snapshot}'::pg_catalog.text[])"
								  " AND (inserted OPERATOR(pg_catalog.+) updated OPERATOR(pg_catalog.+) deleted)"
								  " OPERATOR(pg_catalog.>) 0"
								  " ORDER BY target_oid, run_id DESC)"
								  ", keep_target AS ("
								  " SELECT DISTINCT ON (target_oid) run_id FROM idem_etl.runs"
								  " WHERE NOT skipped AND operation OPERATOR(pg_catalog.=)"
								  " ANY ('{replace_partition,restore_partition,replace_where}'::pg_catalog.text[])"
								  " ORDER BY target_oid, run_id DESC)"
								  " DELETE FROM idem_etl.runs r WHERE r.run_id OPERATOR(pg_catalog.=) ANY (ARRAY("
								  " SELECT x.run_id FROM idem_etl.runs x"
								  " WHERE x.finished_at OPERATOR(pg_catalog.<) (pg_catalog.now()"
								  " OPERATOR(pg_catalog.-) pg_catalog.make_interval(secs => %d))"
	/* a dropped target's runs decide nothing (its OID may be reused) */
								  " AND (NOT EXISTS (SELECT FROM pg_catalog.pg_class c"
								  " WHERE c.oid OPERATOR(pg_catalog.=) x.target_oid)"
								  " OR NOT (x.run_id OPERATOR(pg_catalog.=) ANY (ARRAY("
								  " SELECT run_id FROM keep UNION ALL SELECT run_id FROM keep_part"
								  " UNION ALL SELECT run_id FROM keep_upsert"
								  " UNION ALL SELECT run_id FROM keep_target))))"
	/* the dispatcher runs this: never wait for a row lock */
								  " FOR UPDATE SKIP LOCKED))",
								  idem_run_retention),
						 0, NULL, NULL, NULL, SPI_OK_DELETE);
	return (int64) SPI_processed;
}

/*
 * The file of relation relid now (pg_class.relfilenode): TRUNCATE, VACUUM
 * FULL, CLUSTER and rewriting ALTER TABLEs give it a new one.
 */
Oid
ledger_partition_filenode(Oid relid)
{
	HeapTuple	tup = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	Oid			filenode;

	if (!HeapTupleIsValid(tup))
		return InvalidOid;
	filenode = ((Form_pg_class) GETSTRUCT(tup))->relfilenode;
	ReleaseSysCache(tup);
	return filenode;
}

/* Add a run to the ledger and return its run_id. */
int64
ledger_record(const LedgerRun *run)
{
	Oid			argtypes[22] = {TEXTOID, TEXTOID, OIDOID, TEXTOID, TEXTOID,
		INT8OID, INT8OID, INT8OID, INT8OID, INT8OID, BOOLOID, INT8OID,
		TIMESTAMPTZOID, NAMEOID, TEXTOID, TEXTOID, INT8OID, INT8OID, TEXTOID, TEXTOID,
	OIDOID, OIDOID};
	Datum		args[22];
	char		nulls[22];
	bool		isnull;
	int64		run_id;
	static SPIPlanPtr record_plan = NULL;

	memset(nulls, ' ', sizeof(nulls));
	args[0] = CStringGetTextDatum(run->operation);
	args[1] = CStringGetTextDatum(run->target);
	args[2] = ObjectIdGetDatum(run->target_oid);
	if (run->run_key)
		args[3] = CStringGetTextDatum(run->run_key);
	else
		nulls[3] = 'n';
	args[4] = CStringGetTextDatum(run->fingerprint);
	args[5] = Int64GetDatum(run->batch_rows);
	args[6] = Int64GetDatum(run->inserted);
	args[7] = Int64GetDatum(run->updated);
	args[8] = Int64GetDatum(run->unchanged);
	args[9] = Int64GetDatum(run->deleted);
	args[10] = BoolGetDatum(run->skipped);
	if (run->corrects)
		args[11] = Int64GetDatum(run->corrects);
	else
		nulls[11] = 'n';
	args[12] = TimestampTzGetDatum(run->started_at);
	args[13] = DirectFunctionCall1(namein, CStringGetDatum(GetUserNameFromId(GetUserId(), false)));
	if (run->partition_value)
	{
		args[14] = CStringGetTextDatum(run->partition_value);
		args[15] = CStringGetTextDatum(run->partition_table);
		args[16] = Int64GetDatum(run->rows_loaded);
		args[17] = Int64GetDatum(run->rows_replaced);
	}
	else
		memset(nulls + 14, 'n', 4);
	if (run->partition_bound)
		args[18] = CStringGetTextDatum(run->partition_bound);
	else
		nulls[18] = 'n';
	if (run->expectation)
		args[19] = CStringGetTextDatum(run->expectation);
	else
		nulls[19] = 'n';
	if (OidIsValid(run->partition_oid))
	{
		args[20] = ObjectIdGetDatum(run->partition_oid);
		args[21] = ObjectIdGetDatum(ledger_partition_filenode(run->partition_oid));
	}
	else
		memset(nulls + 20, 'n', 2);

	/* objects still at 0.1: no partition_bound nor expectation (not cached) */
	if (!ledger_objects_at_least("0.2"))
		ledger_exec_as_owner("INSERT INTO idem_etl.runs (operation, target, target_oid, run_key,"
							 " fingerprint, batch_rows, inserted, updated, unchanged, deleted,"
							 " skipped, corrects, started_at, finished_at, run_by,"
							 " partition_value, partition_table, rows_loaded, rows_replaced)"
							 " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13,"
							 " pg_catalog.clock_timestamp(), $14, $15, $16, $17, $18) RETURNING run_id",
							 18, argtypes, args, nulls, SPI_OK_INSERT_RETURNING);
	else
		exec_as_owner(&record_plan, "INSERT INTO idem_etl.runs (operation, target, target_oid, run_key,"
					  " fingerprint, batch_rows, inserted, updated, unchanged, deleted,"
					  " skipped, corrects, started_at, finished_at, run_by,"
					  " partition_value, partition_table, rows_loaded, rows_replaced,"
					  " partition_bound, expectation, partition_oid, partition_filenode)"
					  " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13,"
					  " pg_catalog.clock_timestamp(), $14, $15, $16, $17, $18, $19, $20,"
					  " $21, $22) RETURNING run_id",
					  22, argtypes, args, nulls, SPI_OK_INSERT_RETURNING);
	run_id = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0],
										 SPI_tuptable->tupdesc, 1, &isnull));

	/*
	 * Only a call of the 0.3 objects can change the schema (the argument is
	 * theirs), which have this column; rare enough for a statement of its
	 * own.
	 */
	if (run->schema_changes)
	{
		Oid			types[2] = {INT8OID, TEXTOID};
		Datum		values[2] = {Int64GetDatum(run_id), CStringGetTextDatum(run->schema_changes)};

		ledger_exec_as_owner("UPDATE idem_etl.runs SET schema_changes = $2"
							 " WHERE run_id OPERATOR(pg_catalog.=) $1",
							 2, types, values, NULL, SPI_OK_UPDATE);
	}
	return run_id;
}
