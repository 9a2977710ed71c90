/*
 * kept.c
 *		Replaced partitions kept for a while so that a bad load can be undone:
 *		idem_etl.replaced_partitions, etl_restore_partition, etl_cleanup.
 *
 * A kept version is an ordinary table in the target's schema (so that the
 * target's owner, who is the only one allowed to swap partitions anyway, can
 * put it back), with a row in idem_etl.replaced_partitions saying which
 * target and value it belongs to and until when it is kept.
 */
#include "postgres.h"

#include "compat.h"

#include "access/relation.h"
#include "access/xact.h"
#include "catalog/dependency.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "tcop/utility.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/relcache.h"
#include "storage/lmgr.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "citus/citus_replace.h"
#include "util/settings.h"
#include "replace/kept.h"
#include "state/ledger.h"
#include "replace/newpart.h"
#include "state/progress.h"
#include "util/target.h"
#include "util/sql.h"
#include "replace/swap.h"

kept_due_hook_type kept_due_hook = NULL;

PG_FUNCTION_INFO_V1(etl_restore_partition);
PG_FUNCTION_INFO_V1(etl_cleanup);

/* A name no partition takes: the replaced table's OID is unique. */
char *
kept_table_name(Oid partoid)
{
	return psprintf("idem_etl_kept_%u", partoid);
}

void
kept_record(TargetInfo *target, PartSlot *slot, const char *schema,
			const char *kept_name, int64 run_id, Interval *keep)
{
	Oid			argtypes[10] = {TEXTOID, OIDOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID,
	TEXTOID, OIDOID, INT8OID, INTERVALOID};
	Datum		args[10];
	char	   *kept_qual = psprintf("%s.%s", schema, quote_identifier(kept_name));

	args[0] = CStringGetTextDatum(target->qualname);
	args[1] = ObjectIdGetDatum(target->relid);
	args[2] = CStringGetTextDatum(slot->value);
	args[3] = CStringGetTextDatum(slot->name);
	args[4] = CStringGetTextDatum(slot->bound_sql);
	args[5] = CStringGetTextDatum(slot->check_sql);
	args[6] = CStringGetTextDatum(kept_qual);
	args[7] = ObjectIdGetDatum(slot->partoid);
	args[8] = Int64GetDatum(run_id);
	args[9] = IntervalPGetDatum(keep);
	ledger_exec_as_owner("INSERT INTO idem_etl.replaced_partitions (target, target_oid,"
						 " partition_value, partition_name, bound, check_sql, kept_table,"
						 " kept_oid, run_id, replaced_at, keep_until)"
						 " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9,"
						 " pg_catalog.now(), pg_catalog.now() OPERATOR(pg_catalog.+) $10)",
						 10, argtypes, args, NULL, SPI_OK_INSERT);
	/* the janitor's next visit of this database, at commit */
	if (kept_due_hook)
		kept_due_hook(DatumGetTimestampTz(DirectFunctionCall2(timestamptz_pl_interval,
															  TimestampTzGetDatum(GetCurrentTransactionStartTimestamp()),
															  IntervalPGetDatum(keep))));
}

/*
 * The kept table of a row, by the OID recorded when it was kept, as long as
 * it still has the name recorded then: a table renamed since is no longer
 * idem_etl's to drop, and an OID reused by another table cannot pass.
 */
static bool
kept_table_intact(Oid kept_oid, const char *kept_table)
{
	char	   *relname = get_rel_name(kept_oid);

	return relname != NULL &&
		strcmp(kept_table,
			   quote_qualified_identifier(get_namespace_name(get_rel_namespace(kept_oid)),
										  relname)) == 0;
}

static void
forget_kept(Datum kept_id)
{
	Oid			argtypes[1] = {INT8OID};

	ledger_exec_as_owner("DELETE FROM idem_etl.replaced_partitions"
						 " WHERE kept_id OPERATOR(pg_catalog.=) $1",
						 1, argtypes, &kept_id, NULL, SPI_OK_DELETE);
}

/*
 * Swap the most recently replaced version of the partition holding value
 * back in.  The version it displaces is kept in its place, for as long as the
 * restored one was kept (its keep_replaced; the time it had left may be
 * none), so that a restore can itself be undone.
 */
Datum
etl_restore_partition(PG_FUNCTION_ARGS)
{
	Oid			relid = PG_GETARG_OID(0);
	char	   *value = text_to_cstring(PG_GETARG_TEXT_PP(1));
	TargetInfo *target;
	PartKey    *pk;
	PartSlot   *slot;
	PartSlot	displaced;
	SwapSpec	spec;
	LedgerRun	run;
	Oid			argtypes[3] = {OIDOID, TEXTOID, TEXTOID};
	Datum		args[3];
	char		nulls[3] = {' ', ' ', ' '};
	bool		isnull;
	int64		kept_id;
	char	   *kept_relname;
	Interval   *kept_for;
	Oid			restored;
	TimestampTz started = GetCurrentTimestamp();
	int			nestlevel = settings_canonical_output();

	PreventCommandIfReadOnly("etl_restore_partition()");

	/*
	 * Before any lock, and from the catalog everyone reads: a table that is
	 * not partitioned has nothing to restore, and swap_serialize refuses
	 * whoever does not own a partitioned one.
	 */
	if (get_rel_name(relid) != NULL && get_rel_relkind(relid) != RELKIND_PARTITIONED_TABLE)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("\"%s\" is not partitioned", get_rel_name(relid)),
				 errdetail("Only partitions swapped by etl_replace_partition can be restored.")));
	SPI_connect();
	citus_replace_check(relid, true, "etl_restore_partition");
	swap_serialize(relid);
	target = target_open(relid, 0, false);
	target_check_row_security(relid);
	progress_start("restore_partition", target->qualname, NULL);
	pk = partmap_key(target, NULL);

	/*
	 * The partition that holds the value, locked as replacements lock it;
	 * none when it was dropped since (the parent's lock, which swap_serialize
	 * took, keeps one from being created meanwhile), and then no new bounds
	 * need be inferred: the kept version has its own.
	 */
	if (OidIsValid(partmap_find(target, pk, value)))
		slot = partmap_slot_locked(target, pk, value, NULL);
	else
	{
		slot = palloc0(sizeof(PartSlot));
		slot->value = partmap_normalize(pk, value);
	}

	/*
	 * The partition's latest kept version, found by its bound: every value of
	 * a month names the monthly partition.  When no partition holds the
	 * value, a version kept for that very value will do.
	 */
	args[0] = ObjectIdGetDatum(relid);
	if (OidIsValid(slot->partoid))
	{
		args[1] = CStringGetTextDatum(slot->bound_sql);
		nulls[2] = 'n';
	}
	else
	{
		nulls[1] = 'n';
		args[2] = CStringGetTextDatum(slot->value);
	}
	SPI_execute_with_args("SELECT k.kept_id, c.relname, k.bound, k.check_sql, k.partition_name,"
						  " k.keep_until OPERATOR(pg_catalog.-) k.replaced_at"
						  " FROM idem_etl.replaced_partitions k"
						  " JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) k.kept_oid"
						  " JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace"
						  " WHERE k.target_oid OPERATOR(pg_catalog.=) $1"
						  " AND (k.bound OPERATOR(pg_catalog.=) $2 OR k.partition_value OPERATOR(pg_catalog.=) $3)"
						  " AND k.kept_table OPERATOR(pg_catalog.=)"
						  " pg_catalog.concat(pg_catalog.quote_ident(n.nspname), '.', pg_catalog.quote_ident(c.relname))"
						  " ORDER BY k.bound OPERATOR(pg_catalog.=) $2 DESC, k.kept_id DESC LIMIT 1",
						  3, argtypes, args, nulls, false, 1);
	if (SPI_processed != 1)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("no replaced version of the partition of \"%s\" for %s is kept",
						target->relname, slot->value),
				 errhint("Replaced partitions are kept only with keep_replaced (or idem_etl.keep_replaced), until etl_cleanup drops them.")));
	kept_id = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	kept_relname = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2);
	displaced = *slot;

	/*
	 * A restore swaps rows in and out as a replacement does: refused where a
	 * trigger on INSERT or DELETE would be skipped, with the partition held
	 * against new ones until the swap (see rebuild_partition).
	 */
	if (OidIsValid(displaced.partoid))
		LockRelationOid(displaced.partoid, ShareUpdateExclusiveLock);
	target_refuse_skipped_triggers(target, displaced.partoid);
	slot->bound_sql = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3);
	slot->check_sql = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 4);
	if (!OidIsValid(displaced.partoid))
	{
		slot->name = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 5);
		/* serialized with the replacements of the partition it becomes */
		ledger_lock_partition(relid, slot->bound_sql);
	}
	kept_for = DatumGetIntervalP(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 6, &isnull));

	memset(&spec, 0, sizeof(spec));
	spec.parent = target;
	spec.schema = quote_identifier(get_namespace_name(get_rel_namespace(relid)));
	newpart_add_bound(psprintf("%s.%s", spec.schema, quote_identifier(kept_relname)), slot);
	if (OidIsValid(displaced.partoid))
	{
		spec.old_name = displaced.name;
		spec.keep_name = kept_table_name(displaced.partoid);
	}
	spec.new_name = kept_relname;
	spec.final_name = slot->name;
	spec.bound_sql = slot->bound_sql;
	spec.distributed = citus_replace_column(relid) != NULL;
	swap_partition(&spec);

	args[0] = Int64GetDatum(kept_id);
	forget_kept(args[0]);

	restored = get_relname_relid(slot->name, get_rel_namespace(relid));
	memset(&run, 0, sizeof(run));
	run.operation = "restore_partition";
	run.target = target->qualname;
	run.target_oid = relid;
	run.fingerprint = "";
	run.started_at = started;
	run.partition_value = slot->value;
	run.partition_bound = slot->bound_sql;
	run.partition_table = psprintf("%s.%s", spec.schema, quote_identifier(slot->name));
	run.partition_oid = restored;
	run.rows_loaded = sql_exec_int8(psprintf("SELECT pg_catalog.count(*)::pg_catalog.int8 FROM %s.%s",
											 spec.schema, quote_identifier(slot->name)));
	if (OidIsValid(displaced.partoid))
	{
		run.rows_replaced = sql_exec_int8(psprintf("SELECT pg_catalog.count(*)::pg_catalog.int8 FROM %s.%s",
												   spec.schema, quote_identifier(spec.keep_name)));
		kept_record(target, &displaced, spec.schema, spec.keep_name,
					ledger_record(&run), kept_for);
	}
	else
		(void) ledger_record(&run);

	progress_end();
	SPI_finish();
	AtEOXact_GUC(true, nestlevel);
	PG_RETURN_OID(restored);
}

/* A kept table in use (locked by someone) is tried again this much later. */
#define KEPT_BUSY_RETRY_MS (10 * idem_naptime)

/*
 * How long a drop waits for the locks of what belongs to the kept table
 * (its indexes, constraints, statistics): who holds one is using the table.
 */
#define KEPT_DEPENDENT_LOCK_WAIT "10ms"

typedef struct DropKept
{
	Oid			relid;
	bool		busy;			/* out: somebody holds a lock on it */
} DropKept;

/*
 * Drop one kept table, found by OID, by DROP TABLE with its quoted and
 * qualified name, run through SPI: so it goes through ProcessUtility, where
 * Citus drops a distributed table's shards and metadata (a drop by
 * performDeletion left both behind, and the rows on the workers).  The name
 * is that of the OID, under its lock, which no rename can change.  Its
 * lock is taken without waiting: a session that reads the kept table (its
 * owner, or a role it was granted to) would otherwise hold up the janitor,
 * and with it the dispatch of every database's jobs, for as long as it
 * likes.  A table in use is left for a later pass (busy).  So is a table
 * one of whose indexes somebody holds (COMMENT ON INDEX in a transaction
 * left open held up etl_cleanup() for as long as it liked).  What else the
 * drop locks (constraints, statistics, the TOAST table) it waits for only
 * briefly: a lock timeout, which kept_cleanup takes as busy too.
 */
static void
drop_kept(void *arg)
{
	DropKept   *drop = (DropKept *) arg;
	Relation	rel;
	List	   *indexes;
	ListCell   *lc;
	int			nestlevel;

	if (!ConditionalLockRelationOid(drop->relid, AccessExclusiveLock))
	{
		drop->busy = true;
		return;
	}
	if (!SearchSysCacheExists1(RELOID, ObjectIdGetDatum(drop->relid)))
		return;
	rel = relation_open(drop->relid, NoLock);
	indexes = RelationGetIndexList(rel);
	relation_close(rel, NoLock);
	foreach(lc, indexes)
	{
		if (ConditionalLockRelationOid(lfirst_oid(lc), AccessExclusiveLock))
			continue;
		/* nothing was done: let the users of the table go on */
		for (ListCell *held = list_head(indexes); held != lc; held = lnext(indexes, held))
			UnlockRelationOid(lfirst_oid(held), AccessExclusiveLock);
		UnlockRelationOid(drop->relid, AccessExclusiveLock);
		drop->busy = true;
		return;
	}
	nestlevel = sql_pin_search_path();
	settings_save("lock_timeout", KEPT_DEPENDENT_LOCK_WAIT);
	sql_exec(psprintf("DROP TABLE %s",
					  quote_qualified_identifier(get_namespace_name(get_rel_namespace(drop->relid)),
												 get_rel_name(drop->relid))));
	AtEOXact_GUC(true, nestlevel);
}

/* Try a kept version again after delay_ms. */
static void
postpone_kept(Datum kept_id, int delay_ms)
{
	Oid			argtypes[2] = {INT8OID, INTERVALOID};
	Datum		args[2];
	Interval   *delay = palloc0(sizeof(Interval));

	delay->time = (TimeOffset) delay_ms * 1000;
	args[0] = kept_id;
	args[1] = IntervalPGetDatum(delay);
	ledger_exec_as_owner("UPDATE idem_etl.replaced_partitions"
						 " SET keep_until = pg_catalog.now() OPERATOR(pg_catalog.+) $2"
						 " WHERE kept_id OPERATOR(pg_catalog.=) $1",
						 2, argtypes, args, NULL, SPI_OK_UPDATE);
}

/*
 * Drop the kept versions whose time has passed, as far as the caller may:
 * the caller must own the kept table (the scheduler's janitor runs as
 * superuser).  Rows whose table is gone are forgotten.  Each drop is a
 * subtransaction of its own: one that fails (another role's view on the
 * kept table) is a WARNING naming the table, is retried ten minutes later,
 * and does not stop the others, nor the scheduler.  Nothing here waits for
 * a lock somebody else holds: a kept table in use is tried again
 * KEPT_BUSY_RETRY_MS later, and a row another transaction has locked (an
 * etl_cleanup or a restore in progress) is skipped.
 */
int
kept_cleanup(void)
{
	uint64		n;
	SPITupleTable *tuptable;
	int32		dropped = 0;

	ledger_exec_as_owner("SELECT kept_id, kept_table, kept_oid, target"
						 " FROM idem_etl.replaced_partitions"
						 " WHERE keep_until OPERATOR(pg_catalog.<=) pg_catalog.now()"
						 " ORDER BY kept_id FOR UPDATE SKIP LOCKED",
						 0, NULL, NULL, NULL, SPI_OK_SELECT);
	n = SPI_processed;
	tuptable = SPI_tuptable;
	for (uint64 i = 0; i < n; i++)
	{
		bool		isnull;
		Datum		kept_id = SPI_getbinval(tuptable->vals[i], tuptable->tupdesc, 1, &isnull);
		char	   *kept_table = SPI_getvalue(tuptable->vals[i], tuptable->tupdesc, 2);
		Oid			kept_oid = DatumGetObjectId(SPI_getbinval(tuptable->vals[i],
															  tuptable->tupdesc, 3, &isnull));
		ErrorData  *failure;
		DropKept	drop = {kept_oid, false};

		if (!kept_table_intact(kept_oid, kept_table))
		{
			forget_kept(kept_id);
			continue;
		}
		if (!object_ownercheck(RelationRelationId, kept_oid, GetUserId()))
			continue;
		failure = sql_try(drop_kept, &drop);
		if (failure != NULL && failure->sqlerrcode == ERRCODE_LOCK_NOT_AVAILABLE)
		{
			FreeErrorData(failure);
			failure = NULL;
			drop.busy = true;
		}
		if (failure == NULL && drop.busy)
		{
			postpone_kept(kept_id, KEPT_BUSY_RETRY_MS);
			continue;
		}
		if (failure == NULL)
		{
			forget_kept(kept_id);
			dropped++;
			continue;
		}
		ereport(WARNING,
				(errcode(failure->sqlerrcode),
				 errmsg("could not drop kept partition %s of %s", kept_table,
						SPI_getvalue(tuptable->vals[i], tuptable->tupdesc, 4)),
				 errdetail("%s", failure->message),
				 errhint("Remove what depends on the kept table; idem_etl tries again in ten minutes.")));
		postpone_kept(kept_id, 10 * 60 * 1000);
	}
	return dropped;
}

Datum
etl_cleanup(PG_FUNCTION_ARGS)
{
	int32		dropped;

	PreventCommandIfReadOnly("etl_cleanup()");
	SPI_connect();
	(void) ledger_purge();
	dropped = kept_cleanup();
	SPI_finish();
	PG_RETURN_INT32(dropped);
}
