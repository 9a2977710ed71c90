/*
 * rebuild.c
 *		One partition, or one plain table's rows for a value, rebuilt: the
 *		engine every replacement shares (etl_replace_partition(s) in
 *		replace.c, etl_replace_where and slices in replace_where.c), and
 *		the ledger run each one starts.
 *
 * For a partitioned target the new contents go into a fresh table shaped
 * like the partition, which is indexed, checked and constrained before a
 * short swap (swap.c) puts it in the old one's place; a slice or a
 * condition carries the partition's other rows into it.
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/nbtree.h"
#include "access/table.h"
#include "catalog/pg_class.h"
#include "catalog/pg_constraint.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "tcop/utility.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"

#include "state/audit.h"
#include "util/args.h"
#include "util/settings.h"
#include "replace/kept.h"
#include "state/ledger.h"
#include "state/progress.h"
#include "replace/newpart.h"
#include "replace/partmap.h"
#include "util/target.h"
#include "replace/rebuild.h"
#include "util/sql.h"
#include "stage/stage.h"
#include "replace/swap.h"

/* what the ledger calls a replacement of a partition or of a value's rows */
#define OPERATION "replace_partition"

/* keep_replaced, else idem_etl.keep_replaced; NULL when nothing is kept */
Interval *
rebuild_keep_interval(FunctionCallInfo fcinfo, int n)
{
	Interval   *keep;

	if (!PG_ARGISNULL(n))
		keep = PG_GETARG_INTERVAL_P(n);
	else
	{
		keep = palloc0(sizeof(Interval));
		keep->time = (int64) idem_keep_replaced * USECS_PER_SEC;
	}
	if (keep->time < 0 || keep->day < 0 || keep->month < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("keep_replaced must not be negative")));
	return (keep->time == 0 && keep->day == 0 && keep->month == 0) ? NULL : keep;
}

/* What shapes the result besides the rows: the columns and the bound. */
char *
rebuild_options(Stage *stage, const char *bound)
{
	StringInfoData buf;

	initStringInfo(&buf);
	for (int i = 0; i < stage->ncolumns; i++)
		appendStringInfo(&buf, "col %zu:%s\n", strlen(stage->columns[i]), stage->columns[i]);
	appendStringInfo(&buf, "bound %zu:%s\n", strlen(bound), bound);
	return buf.data;
}

/*
 * With run_key: what the ledger says about this partition (its bound, not
 * the value passed: every value of a month names the same monthly
 * partition; partoid, when it exists, is looked for as a target too).
 * True when the latest run with run_key that replaced it had the same
 * fingerprint and nothing changed the partition since, so this call is a
 * skip.  A different fingerprint is a correction of that run.
 */
bool
rebuild_same_as_prior(ReplaceArgs *a, Oid partoid, const char *value, const char *bound,
					  LedgerRun *run)
{
	LedgerPartPrior prior;

	if (a->run_key == NULL)
		return false;
	prior = ledger_partition_prior(a->target->relid, partoid, a->run_key, bound, value);
	if (prior.applied == 0)
		return false;
	if (strcmp(prior.fingerprint, run->fingerprint) != 0)
	{
		ereport(NOTICE,
				(errmsg("run_key \"%s\" loaded %s into \"%s\" in run %lld with other rows; replacing them as a correction",
						a->run_key, value, a->target->relname, (long long) prior.applied)));
		run->corrects = prior.applied;
		return false;
	}
	if (prior.changed_by != 0)
	{
		ereport(NOTICE,
				(errmsg("loading the partition of %s in \"%s\" again: run %lld (%s) changed it after run %lld loaded the same rows for run_key \"%s\"",
						value, a->target->relname, (long long) prior.changed_by,
						prior.changed_op, (long long) prior.applied, a->run_key)));
		return false;
	}

	/*
	 * The ledger says what idem_etl did, not what became of the partition
	 * since: a retention job may have dropped it, or somebody detached it and
	 * attached an empty one, or truncated it.  Only the partition the run
	 * left in place, with the same file, still holds its rows (runs made
	 * before 0.2 did not record it: there, one that exists).
	 */
	if (a->target->relkind == RELKIND_PARTITIONED_TABLE &&
		(!OidIsValid(partoid) ||
		 (OidIsValid(prior.partition_oid) &&
		  (partoid != prior.partition_oid ||
		   ledger_partition_filenode(partoid) != prior.partition_filenode))))
	{
		ereport(NOTICE,
				(errmsg("loading the partition of %s in \"%s\" again: it is not the one run %lld left for run_key \"%s\"",
						value, a->target->relname, (long long) prior.applied, a->run_key),
				 errdetail(REPLACE_PARTITION_GONE_DETAIL)));
		return false;
	}
	ereport(NOTICE,
			(errmsg("skipping replacement of %s in \"%s\": run %lld already has the same rows for run_key \"%s\"",
					value, a->target->relname, (long long) prior.applied, a->run_key)));
	return true;
}

/* What the ledger records as met: expect, and the ratio when it applied. */
static char *
expectation_text(ReplaceArgs *a)
{
	if (a->min_ratio > 0 && !a->allow_shrink)
		return psprintf("%s%smin_replaced_ratio %g", a->expect ? a->expect : "",
						a->expect ? "; " : "", a->min_ratio);
	return a->expect;
}

void
rebuild_start_run(LedgerRun *run, ReplaceArgs *a, const char *value, const char *bound,
				  const char *table)
{
	memset(run, 0, sizeof(LedgerRun));
	run->operation = OPERATION;
	run->target = a->target->qualname;
	run->target_oid = a->target->relid;
	run->run_key = a->run_key;
	run->started_at = GetCurrentTimestamp();
	run->expectation = expectation_text(a);
	run->partition_value = value;
	run->partition_table = table;
	run->partition_bound = bound;
	run->schema_changes = a->schema_changes;
}

/* Whether a foreign key of another table references relid. */
static bool
is_referenced(Oid relid)
{
	Relation	constraints = table_open(ConstraintRelationId, AccessShareLock);
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tup;
	bool		found = false;

	/* pg_constraint has no index on confrelid: its statement would not either */
	ScanKeyInit(&key, Anum_pg_constraint_confrelid, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(relid));
	scan = systable_beginscan(constraints, InvalidOid, false, NULL, 1, &key);
	while (!found && HeapTupleIsValid(tup = systable_getnext(scan)))
	{
		Form_pg_constraint con = (Form_pg_constraint) GETSTRUCT(tup);

		found = con->contype == CONSTRAINT_FOREIGN && !OidIsValid(con->conparentid);
	}
	systable_endscan(scan);
	table_close(constraints, AccessShareLock);
	return found;
}

/*
 * Rows of other tables that reference the partition through a foreign key
 * would be left dangling: refuse before anything changes, naming the
 * constraint (DETACH would refuse too, but only under the parent's lock).
 */
static void
check_referencing_rows(ReplaceArgs *a, PartSlot *slot, const char *schema)
{
	Oid			argtypes[1] = {OIDOID};
	Datum		args[1];
	uint64		n;
	SPITupleTable *tuptable;
	static SPIPlanPtr plan = NULL;

	/* most targets are referenced by no foreign key: no statement then */
	if (!is_referenced(a->target->relid))
		return;
	args[0] = ObjectIdGetDatum(a->target->relid);
	sql_prepare_kept(&plan, "SELECT c.conname, c.conrelid::pg_catalog.regclass::pg_catalog.text,"
					 " pg_catalog.string_agg(pg_catalog.format('p.%I OPERATOR(%I.%s) r.%I',"
					 " pa.attname, opn.nspname, op.oprname, ra.attname), ' AND ' ORDER BY k.n)"
					 " FROM pg_catalog.pg_constraint c,"
					 " ROWS FROM (pg_catalog.unnest(c.conkey), pg_catalog.unnest(c.confkey),"
					 " pg_catalog.unnest(c.conpfeqop)) WITH ORDINALITY k(r, p, o, n),"
					 " pg_catalog.pg_attribute ra, pg_catalog.pg_attribute pa,"
					 " pg_catalog.pg_operator op, pg_catalog.pg_namespace opn"
					 " WHERE c.confrelid OPERATOR(pg_catalog.=) $1"
					 " AND c.contype OPERATOR(pg_catalog.=) 'f'"
					 " AND c.conparentid OPERATOR(pg_catalog.=) 0"
					 " AND ra.attrelid OPERATOR(pg_catalog.=) c.conrelid"
					 " AND ra.attnum OPERATOR(pg_catalog.=) k.r"
					 " AND pa.attrelid OPERATOR(pg_catalog.=) c.confrelid"
					 " AND pa.attnum OPERATOR(pg_catalog.=) k.p"
					 " AND op.oid OPERATOR(pg_catalog.=) k.o"
					 " AND opn.oid OPERATOR(pg_catalog.=) op.oprnamespace"
					 " GROUP BY c.oid, c.conname, c.conrelid ORDER BY c.conname",
					 1, argtypes);
	if (SPI_execute_plan(plan, args, NULL, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "listing foreign keys that reference the target failed");
	n = SPI_processed;
	tuptable = SPI_tuptable;
	for (uint64 i = 0; i < n; i++)
	{
		char	   *conname = SPI_getvalue(tuptable->vals[i], tuptable->tupdesc, 1);
		char	   *conrel = SPI_getvalue(tuptable->vals[i], tuptable->tupdesc, 2);

		if (sql_exec_int8(psprintf("SELECT pg_catalog.count(*)::pg_catalog.int8 FROM (SELECT 1 FROM %s r"
								   " JOIN %s.%s p ON %s LIMIT 1) x",
								   conrel, schema, quote_identifier(slot->name),
								   SPI_getvalue(tuptable->vals[i], tuptable->tupdesc, 3))) > 0)
			ereport(ERROR,
					(errcode(ERRCODE_FOREIGN_KEY_VIOLATION),
					 errmsg("rows of \"%s\" reference partition \"%s\" of \"%s\" through foreign key \"%s\"",
							conrel, slot->name, a->target->relname, conname),
					 errdetail("Replacing the partition would leave them without the rows they reference."),
					 errhint("Delete or repoint those rows first, or load with etl_upsert_batch instead.")));
	}
}

/* The default partition's qualified name. */
const char *
rebuild_default_part_name(PartKey *pk)
{
	return quote_qualified_identifier(get_namespace_name(get_rel_namespace(pk->default_part)),
									  get_rel_name(pk->default_part));
}

/*
 * etl_replace_where: copy the rows of relation from (its qualified name; a
 * DEFAULT partition may be partitioned itself, so not ONLY: a leaf
 * partition has no children) that the condition does not cover, and that
 * match where when given, into
 * the new table np, every column but generated ones (those are computed
 * again; identity values are kept as they are).  The rows are read under
 * the target's name, so that the condition may name it.  Returns the
 * number of rows carried.
 */
static int64
carry_rows(ReplaceArgs *a, const char *from, const char *where, NewPart *np)
{
	StringInfoData cols;
	const char *alias = quote_identifier(a->target->relname);

	initStringInfo(&cols);
	for (int i = 0; i < a->target->ncolumns; i++)
		if (!a->target->columns[i].generated)
			appendStringInfo(&cols, "%s%s", cols.len ? ", " : "",
							 quote_identifier(a->target->columns[i].name));
	return (int64) sql_exec(psprintf("INSERT INTO %s (%s) SELECT %s FROM %s AS %s"
									 " WHERE (%s) AND NOT coalesce((%s\n), false)",
									 np->qualname, cols.data, cols.data, from, alias,
									 where ? where : "true", a->condition));
}

/*
 * Take an EXCLUSIVE lock on relid, whose rows are about to be copied or
 * deleted: its writers wait from here to the end of the transaction
 * (readers do not), and the next statement's snapshot, taken after this
 * wait, sees what the writers before committed.  Without it, a row another
 * transaction was inserting was neither copied nor deleted, and stayed
 * beside the new rows; and as that transaction's run was recorded with a
 * lower run_id than this one's though it committed later, a rerun with the
 * run_key was skipped.  A partitioned DEFAULT partition's own partitions
 * are locked too: a writer addressing one of them directly takes no lock
 * on its parent, and a row it committed between the copy and the delete
 * that follows would be lost.
 */
void
rebuild_lock_writers(Oid relid)
{
	if (!ConditionalLockRelationOid(relid, ExclusiveLock))
	{
		progress_phase("waiting for lock", -1);
		LockRelationOid(relid, ExclusiveLock);
		progress_phase("staging", -1);
	}
	if (get_rel_relkind(relid) == RELKIND_PARTITIONED_TABLE)
	{
		progress_phase("waiting for lock", -1);
		(void) find_all_inheritors(relid, ExclusiveLock, NULL);
		progress_phase("staging", -1);
	}
}

/* A run_key rerun matched the run that left the partition as it is. */
static void
record_skip(LedgerRun *run, PartSlot *slot, ReplaceResult *r)
{
	run->skipped = true;
	run->partition_oid = slot->partoid;
	r->partition = slot->partoid;
	r->skipped = true;
	r->run_id = ledger_record(run);
}

/*
 * Replace one partition, whose lock the caller holds.  Its new rows come
 * from the source (g == NULL), or are the next group of a staged batch
 * split by partition (etl_replace_partitions), whose fingerprint and
 * number of rows the caller computed in its one pass over the batch.
 */
void
rebuild_partition(ReplaceArgs *a, PartSlot *slot, StageGroups *g, const char *fingerprint,
				  int64 nrows, ReplaceResult *r)
{
	NewPart    *np;
	Stage		loaded = *a->stage;
	LedgerRun	run;
	SwapSpec	spec;
	bool		keep = a->keep != NULL && OidIsValid(slot->partoid);
	StringInfoData sql;
	int64		carried = 0;
	char	   *what;
	bool		drop_later;

	memset(r, 0, sizeof(ReplaceResult));
	rebuild_start_run(&run, a, slot->value, slot->bound_sql,
					  quote_qualified_identifier(get_namespace_name(get_rel_namespace(a->target->relid)),
												 slot->name));
	if (OidIsValid(slot->partoid))
	{
		/*
		 * Nobody may change the partition's triggers, policies or other
		 * properties between the checks and the copies below and the swap
		 * (CREATE TRIGGER, CREATE POLICY, COMMENT and ALTER TABLE conflict
		 * with this mode; readers and writers do not).  The parent is held
		 * the same way (swap_serialize).
		 */
		LockRelationOid(slot->partoid, ShareUpdateExclusiveLock);
		target_check_row_security(slot->partoid);
		newpart_check_carryable(a->target, slot->partoid);
	}
	if (g != NULL)
	{
		run.batch_rows = nrows;
		run.fingerprint = fingerprint;
		if (rebuild_same_as_prior(a, slot->partoid, slot->value, slot->bound_sql, &run))
		{
			(void) stage_next_group(g, a->target, InvalidOid);
			record_skip(&run, slot, r);
			return;
		}
		np = newpart_create(a->target, a->pk, slot);
		loaded.nrows = stage_next_group(g, a->target, np->relid);
	}
	else if (a->condition)
	{
		/*
		 * The rows outside the condition are copied below, from the
		 * partition, which the copy replaces, or, for a new partition, from
		 * the default partition, whose rows of the new bounds are then
		 * deleted: a row written to either after the copy's snapshot would be
		 * lost.
		 */
		if (OidIsValid(slot->partoid))
			rebuild_lock_writers(slot->partoid);
		else if (OidIsValid(a->pk->default_part))
			rebuild_lock_writers(a->pk->default_part);
		/* etl_replace_where: the source's rows of this partition ... */
		np = newpart_create(a->target, a->pk, slot);
		initStringInfo(&sql);
		appendStringInfoString(&sql, "SELECT ");
		sql_append_columns(&sql, NULL, loaded.columns, loaded.ncolumns);
		appendStringInfo(&sql, " FROM %s WHERE %s", a->stage->name, slot->check_sql);
		loaded.nrows = stage_query_into(sql.data, a->target, np->relid);
		/* ... and its rows the condition does not cover, carried over */
		if (OidIsValid(slot->partoid))
			carried = carry_rows(a, psprintf("%s.%s", np->schema, quote_identifier(slot->name)),
								 NULL, np);
		else if (OidIsValid(a->pk->default_part))
			carried = carry_rows(a, rebuild_default_part_name(a->pk), slot->check_sql, np);
		run.batch_rows = loaded.nrows;
		run.fingerprint = fingerprint;
	}
	else
	{
		/*
		 * A rerun of a run_key the ledger has applied here (a lookback, a
		 * retry) is told by the source's fingerprint alone, its rows hashed
		 * and not kept: an unchanged one is skipped without writing its rows
		 * to a new table (and to the WAL) first.  Otherwise the source runs
		 * again, in the same snapshot, to load it.  With expect, whose checks
		 * read the loaded rows, the rows are loaded first as for a new run.
		 */
		bool		told = false;

		progress_phase("staging", -1);
		if (a->expect == NULL && a->run_key != NULL &&
			ledger_partition_prior(a->target->relid, slot->partoid, a->run_key,
								   slot->bound_sql, slot->value).applied != 0)
		{
			stage_fingerprint_source(&loaded, a->target);
			run.batch_rows = loaded.nrows;
			run.fingerprint = stage_batch_fingerprint(&loaded, rebuild_options(&loaded, slot->bound_sql));
			if (rebuild_same_as_prior(a, slot->partoid, slot->value, slot->bound_sql, &run))
			{
				record_skip(&run, slot, r);
				return;
			}
			told = true;
		}
		np = newpart_create(a->target, a->pk, slot);
		stage_load_into(&loaded, a->target, np->relid);
		audit_expect(a->expect, np->qualname, a->target->relname);
		run.batch_rows = loaded.nrows;
		run.fingerprint = stage_batch_fingerprint(&loaded, rebuild_options(&loaded, slot->bound_sql));
		if (!told && rebuild_same_as_prior(a, slot->partoid, slot->value, slot->bound_sql, &run))
		{
			sql_exec(psprintf("DROP TABLE %s", np->qualname));
			record_skip(&run, slot, r);
			return;
		}
	}

	/* not before: a skip changes nothing, and fires nothing either */
	target_refuse_skipped_triggers(a->target, slot->partoid);
	newpart_bound(np, a->target, a->pk, slot);
	/* on Citus, the rows checked go to a table distributed with the parent */
	np = newpart_distribute(np, a->target, slot);
	if (OidIsValid(slot->partoid))
		check_referencing_rows(a, slot, np->schema);
	progress_phase("building indexes", -1);
	newpart_finish(np, a->target, a->pk, slot);

	r->loaded = loaded.nrows;
	if (OidIsValid(slot->partoid))
		r->replaced = sql_exec_int8(psprintf("SELECT pg_catalog.count(*)::pg_catalog.int8 FROM %s.%s",
											 np->schema, quote_identifier(slot->name))) - carried;
	else if (OidIsValid(a->pk->default_part))
		r->replaced = (int64) sql_exec(psprintf("DELETE FROM %s WHERE %s",
												rebuild_default_part_name(a->pk), slot->check_sql)) - carried;

	/*
	 * The rows a default partition held are deleted above, and restored by
	 * the error.  etl_replace_where's batch is all the partitions' rows.
	 */
	what = OidIsValid(slot->partoid) ? psprintf("partition \"%s\"", slot->name) :
		psprintf("the rows of %s", slot->value);
	audit_shrink(a->min_ratio, a->allow_shrink, a->condition ? a->stage->nrows : r->loaded,
				 r->loaded, r->replaced, a->target->relname, what);

	/*
	 * On Citus, DROP TABLE of the replaced partition drops its shards one by
	 * one, under the parent's lock: with the janitor running, it is kept
	 * until now instead, and the janitor drops it after the commit, the
	 * parent no longer locked.
	 */
	drop_later = !keep && OidIsValid(slot->partoid) && np->distcol != NULL && idem_preloaded;

	memset(&spec, 0, sizeof(spec));
	spec.parent = a->target;
	spec.schema = np->schema;
	if (OidIsValid(slot->partoid))
	{
		spec.old_name = slot->name;
		spec.keep_name = keep || drop_later ? kept_table_name(slot->partoid) : NULL;
	}
	spec.new_name = np->relname;
	spec.final_name = slot->name;
	spec.bound_sql = slot->bound_sql;
	spec.distributed = np->distcol != NULL;
	swap_partition(&spec);

	run.rows_loaded = r->loaded;
	run.rows_replaced = r->replaced;
	run.partition_oid = np->relid;
	r->run_id = ledger_record(&run);
	if (keep)
		kept_record(a->target, slot, np->schema, spec.keep_name, r->run_id, a->keep);
	else if (drop_later)
		kept_record(a->target, slot, np->schema, spec.keep_name, r->run_id,
					palloc0(sizeof(Interval)));
	r->partition = np->relid;
}

/*
 * A staged source whose rows are sorted into partitions by their value
 * (etl_replace_partitions, etl_replace_where) must have one in every row:
 * 23514 otherwise, before anything changes.
 */
void
rebuild_refuse_null_values(ReplaceArgs *a)
{
	int64		nulls;

	nulls = sql_exec_int8(psprintf("SELECT pg_catalog.count(*)::pg_catalog.int8 FROM %s WHERE %s IS NULL",
								   a->stage->name, quote_identifier(a->pk->column->name)));
	if (nulls > 0)
		ereport(ERROR,
				(errcode(ERRCODE_CHECK_VIOLATION),
				 errmsg("%lld row(s) of the source have no value in partition column \"%s\"",
						(long long) nulls, a->pk->column->name),
				 errdetail("One offending value is NULL."),
				 errhint("Filter out or fill in those rows in the source query.")));
}
