/*
 * replace.c
 *		etl_replace_partition and etl_replace_partitions: replace one run
 *		value's data as a whole, so that a rerun can never append to it or
 *		half-overwrite it.  Each partition is rebuilt by rebuild.c (which
 *		etl_replace_where, in replace_where.c, uses too); a slice of a
 *		partition goes through replace_where.c.  For a plain table the rows
 *		are deleted and the new ones inserted in the same transaction.
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

#include "citus/citus_replace.h"
#include "state/audit.h"
#include "util/args.h"
#include "util/settings.h"
#include "replace/kept.h"
#include "state/ledger.h"
#include "state/progress.h"
#include "replace/newpart.h"
#include "replace/partmap.h"
#include "util/target.h"
#include "replace/replace_where.h"
#include "replace/rebuild.h"
#include "util/sql.h"
#include "stage/evolve.h"
#include "stage/stage.h"
#include "replace/swap.h"

PG_FUNCTION_INFO_V1(etl_replace_partition);
PG_FUNCTION_INFO_V1(etl_replace_partitions);

#define OPERATION "replace_partition"

/*
 * The arguments both functions share: target (argument 0), then source,
 * partition_column, granularity, keep_replaced, run_key, expect,
 * min_replaced_ratio, allow_shrink and on_schema_change from argument
 * "first" on.
 */
static void
replace_setup(ReplaceArgs *a, FunctionCallInfo fcinfo, int first)
{
	StringInfoData changes;

	memset(a, 0, sizeof(ReplaceArgs));
	a->run_key = args_text(fcinfo, first + 4);
	ledger_check_length("run_key", a->run_key);
	a->expect = args_text(fcinfo, first + 5);
	audit_check_syntax(a->expect);
	a->min_ratio = audit_ratio(fcinfo, first + 6);
	a->allow_shrink = audit_allow_shrink(fcinfo, first + 7);
	citus_replace_check(PG_GETARG_OID(0),
						get_rel_relkind(PG_GETARG_OID(0)) == RELKIND_PARTITIONED_TABLE,
						first == 2 ? "etl_replace_partition" : "etl_replace_partitions");
	swap_serialize(PG_GETARG_OID(0));
	a->target = target_open(PG_GETARG_OID(0), ACL_SELECT | ACL_INSERT | ACL_DELETE, true);
	initStringInfo(&changes);
	a->target = evolve_target(a->target, args_text(fcinfo, first), args_text(fcinfo, first + 8),
							  ACL_SELECT | ACL_INSERT | ACL_DELETE, true, &changes);
	a->schema_changes = changes.len ? changes.data : NULL;
	target_check_row_security(a->target->relid);
	a->granularity = PG_ARGISNULL(first + 2) ? NULL : PG_GETARG_INTERVAL_P(first + 2);
	a->keep = rebuild_keep_interval(fcinfo, first + 3);
	a->pk = partmap_key(a->target, args_text(fcinfo, first + 1));
	a->stage = stage_plan(a->target, args_text(fcinfo, first), a->run_key != NULL);
	if (!stage_has_column(a->stage, a->pk->column->name))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("partition column \"%s\" is missing from the source",
						a->pk->column->name),
				 errdetail("The source must return the complete new rows, partition column included."),
				 errhint("Add \"%s\" to the source query's select list.", a->pk->column->name)));
}

static void
put_result(Tuplestorestate *store, TupleDesc desc, ReplaceResult *r)
{
	Datum		values[5];
	bool		nulls[5] = {false, false, false, false, false};

	values[0] = Int64GetDatum(r->run_id);
	values[1] = ObjectIdGetDatum(r->partition);
	nulls[1] = !OidIsValid(r->partition);
	values[2] = Int64GetDatum(r->loaded);
	values[3] = Int64GetDatum(r->replaced);
	values[4] = BoolGetDatum(r->skipped);
	tuplestore_putvalues(store, desc, values, nulls);
}

/*
 * Plain table, one value: delete the value's rows and insert the new ones.
 */
static void
replace_in_table(ReplaceArgs *a, const char *value, ReplaceResult *r)
{
	Stage		batch = *a->stage;
	LedgerRun	run;
	const char *col = quote_identifier(a->pk->column->name);
	char	   *bound;
	char	   *example;
	StringInfoData sql;

	/* as its type prints it: the same rows, the same bound and lock */
	value = partmap_normalize(a->pk, value);
	bound = partmap_value_check(a->pk, value);
	memset(r, 0, sizeof(ReplaceResult));
	ledger_lock_table(a->target->relid);
	rebuild_start_run(&run, a, value, bound, a->target->qualname);
	progress_phase("staging", -1);
	stage_load(&batch, a->target, NULL, false, NULL);
	audit_expect(a->expect, batch.name, a->target->relname);
	sql_exec(psprintf("SELECT pg_catalog.count(*)::pg_catalog.int8,"
					  " pg_catalog.min(coalesce(%s::pg_catalog.text, 'NULL'))"
					  " FROM %s WHERE NOT coalesce(%s, false)",
					  col, batch.name, bound));
	example = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2);
	if (example != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_CHECK_VIOLATION),
				 errmsg("%s row(s) of the source do not have %s = %s",
						SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1),
						a->pk->column->name, value),
				 errdetail("One offending value of \"%s\" is %s.", a->pk->column->name, example),
				 errhint("Filter the source on \"%s\".", a->pk->column->name)));
	run.batch_rows = batch.nrows;
	run.fingerprint = stage_batch_fingerprint(&batch, rebuild_options(&batch, bound));
	r->partition = a->target->relid;
	if (rebuild_same_as_prior(a, InvalidOid, value, bound, &run))
	{
		run.skipped = true;
		r->skipped = true;
	}
	else
	{
		rebuild_lock_writers(a->target->relid);
		if (audit_shrink_possible(a->min_ratio, a->allow_shrink, batch.nrows))
			audit_shrink(a->min_ratio, false, batch.nrows, batch.nrows,
						 sql_exec_int8(psprintf("SELECT pg_catalog.count(*)::pg_catalog.int8 FROM %s%s WHERE %s",
												target_only(a->target), a->target->qualname, bound)),
						 a->target->relname, psprintf("the rows of %s", value));
		progress_phase("deleting", -1);
		r->replaced = (int64) sql_exec(psprintf("DELETE FROM %s%s WHERE %s",
												target_only(a->target), a->target->qualname, bound));
		initStringInfo(&sql);
		appendStringInfo(&sql, "INSERT INTO %s (", a->target->qualname);
		sql_append_columns(&sql, NULL, batch.columns, batch.ncolumns);
		appendStringInfoString(&sql, ") SELECT ");
		sql_append_columns(&sql, NULL, batch.columns, batch.ncolumns);
		appendStringInfo(&sql, " FROM %s", batch.name);
		r->loaded = (int64) sql_exec(sql.data);
		run.rows_loaded = r->loaded;
		run.rows_replaced = r->replaced;
	}
	stage_drop(batch.staged);
	r->run_id = ledger_record(&run);
}

/*
 * The staged batch sorted on the partition column, and its runs: one per
 * distinct value, in the order of the partition key's operator class, each
 * with its rows' count and hash sum (stage_runs), in one pass.
 */
static StagedRel *
split_by_value(ReplaceArgs *a, StageRun **runs, int *nruns)
{
	StagedRel  *sorted;
	AttrNumber	att = InvalidAttrNumber;
	FmgrInfo	cmp;
	Oid			cmpproc = get_opfamily_proc(a->pk->opfamily, a->pk->opcintype,
											a->pk->opcintype, BTORDER_PROC);

	if (!OidIsValid(cmpproc))
		elog(ERROR, "comparison function missing from operator family %u", a->pk->opfamily);
	fmgr_info(cmpproc, &cmp);
	sorted = stage_query(psprintf("SELECT * FROM %s ORDER BY %s USING %s",
								  a->stage->name, quote_identifier(a->pk->column->name),
								  partmap_operator(a->pk, BTLessStrategyNumber)),
						 "sorted");
	for (int i = 0; i < sorted->desc->natts; i++)
		if (strcmp(NameStr(TupleDescAttr(sorted->desc, i)->attname), a->pk->column->name) == 0)
			att = i + 1;
	Assert(att != InvalidAttrNumber);
	*runs = stage_runs(sorted, a->stage->fingerprint, att, &cmp, a->pk->column->collation, nruns);
	return sorted;
}

/* The runs' values as an array of the partition column's type. */
static Datum
run_values(ReplaceArgs *a, StageRun *runs, int nruns, const bool *take, Oid *arraytype)
{
	Oid			elemtype = a->pk->column->typid;
	int16		typlen;
	bool		typbyval;
	char		typalign;
	Datum	   *elems = palloc(sizeof(Datum) * (nruns + 1));
	int			n = 0;

	*arraytype = get_array_type(elemtype);
	if (!OidIsValid(*arraytype))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("partition_column \"%s\" has type %s, which has no array type",
						a->pk->column->name, format_type_be(elemtype))));
	get_typlenbyvalalign(elemtype, &typlen, &typbyval, &typalign);
	for (int i = 0; i < nruns; i++)
		if (take[i])
			elems[n++] = runs[i].value;
	return PointerGetDatum(construct_array(elems, n, elemtype, typlen, typbyval, typalign));
}

/*
 * Plain table, every value of the batch: one pass over the batch computes
 * each value's rows and fingerprint; one DELETE removes the stored rows of
 * every value that is not skipped, one INSERT adds their new rows.  One
 * lock for the whole target, not one per value.
 */
static void
replace_table_values(ReplaceArgs *a, Tuplestorestate *store, TupleDesc desc)
{
	StageRun   *runs;
	int			nruns;
	StagedRel  *sorted = split_by_value(a, &runs, &nruns);
	LedgerRun  *ledger = palloc0(sizeof(LedgerRun) * (nruns + 1));
	ReplaceResult *results = palloc0(sizeof(ReplaceResult) * (nruns + 1));
	bool	   *take = palloc0(sizeof(bool) * (nruns + 1));
	int			ntake = 0;

	ledger_lock_table(a->target->relid);
	for (int i = 0; i < nruns; i++)
	{
		char	   *value = partmap_normalize(a->pk, runs[i].text);
		char	   *bound = partmap_value_check(a->pk, value);

		rebuild_start_run(&ledger[i], a, value, bound, a->target->qualname);
		ledger[i].batch_rows = runs[i].nrows;
		ledger[i].fingerprint = stage_fingerprint(a->stage, runs[i].sum, runs[i].nrows,
												  rebuild_options(a->stage, bound));
		results[i].partition = a->target->relid;
		take[i] = !rebuild_same_as_prior(a, InvalidOid, value, bound, &ledger[i]);
		ledger[i].skipped = results[i].skipped = !take[i];
		if (take[i])
		{
			results[i].loaded = ledger[i].rows_loaded = runs[i].nrows;
			ntake++;
		}
	}

	if (ntake > 0)
	{
		Oid			argtypes[1];
		Datum		args[1];
		const char *v = target_alias(a->target, "idem_v");
		const char *t = target_alias(a->target, "idem_t");
		StagedRel  *rows = sorted;
		StringInfoData sql;
		uint64		n;
		SPITupleTable *tt;
		int		   *taken = palloc(sizeof(int) * (ntake + 1));

		/* one DELETE for every value taken, counting each value's rows */
		rebuild_lock_writers(a->target->relid);
		progress_phase("deleting", -1);
		args[0] = run_values(a, runs, nruns, take, &argtypes[0]);
		initStringInfo(&sql);
		appendStringInfo(&sql, "WITH %s AS (SELECT %s.value, %s.n FROM pg_catalog.unnest($1)"
						 " WITH ORDINALITY AS %s(value, n)),"
						 " idem_deleted AS (DELETE FROM %s%s AS %s USING %s"
						 " WHERE %s.%s %s %s.value RETURNING %s.n)"
						 " SELECT n, pg_catalog.count(*)::pg_catalog.int8 FROM idem_deleted GROUP BY n",
						 v, v, v, v, target_only(a->target), a->target->qualname, t, v,
						 t, quote_identifier(a->pk->column->name),
						 partmap_operator(a->pk, BTEqualStrategyNumber), v, v);
		if (SPI_execute_with_args(sql.data, 1, argtypes, args, NULL, false, 0) != SPI_OK_SELECT)
			elog(ERROR, "deleting the batch's values failed");
		n = SPI_processed;
		tt = SPI_tuptable;
		for (int i = 0, k = 0; i < nruns; i++)
			if (take[i])
				taken[k++] = i;
		for (uint64 j = 0; j < n; j++)
		{
			bool		isnull;
			int64		ord = DatumGetInt64(SPI_getbinval(tt->vals[j], tt->tupdesc, 1, &isnull));
			int64		count = DatumGetInt64(SPI_getbinval(tt->vals[j], tt->tupdesc, 2, &isnull));
			int			i;

			/* ordinal ord is the ord-th value taken */
			if (ord < 1 || ord > ntake)
				elog(ERROR, "unexpected ordinal %lld", (long long) ord);
			i = taken[ord - 1];
			results[i].replaced = ledger[i].rows_replaced = count;
		}
		for (int k = 0; k < ntake; k++)
			audit_shrink(a->min_ratio, a->allow_shrink, runs[taken[k]].nrows,
						 runs[taken[k]].nrows, results[taken[k]].replaced, a->target->relname,
						 psprintf("the rows of %s", ledger[taken[k]].partition_value));

		/* one INSERT of the rows of every value taken */
		if (ntake < nruns)
			rows = stage_select_runs(sorted, runs, nruns, take, "taken");
		resetStringInfo(&sql);
		appendStringInfo(&sql, "INSERT INTO %s (", a->target->qualname);
		sql_append_columns(&sql, NULL, a->stage->columns, a->stage->ncolumns);
		appendStringInfoString(&sql, ") SELECT ");
		sql_append_columns(&sql, NULL, a->stage->columns, a->stage->ncolumns);
		appendStringInfo(&sql, " FROM %s", rows->name);
		(void) sql_exec(sql.data);
		if (rows != sorted)
			stage_drop(rows);
	}
	stage_drop(sorted);

	for (int i = 0; i < nruns; i++)
	{
		results[i].run_id = ledger_record(&ledger[i]);
		put_result(store, desc, &results[i]);
	}
}

/*
 * Partitioned table, every partition the batch has rows for: one pass over
 * the batch sorted on the partition column finds each value's rows; the
 * values are mapped to partitions (existing ones, or the bounds of new
 * ones), and each partition's rows are read once, in partition order.
 * Replacements of one partitioned table are serialized by swap_serialize,
 * and etl_replace_partitions takes one lock for all of them instead of one
 * per partition.
 */
static void
replace_partitions(ReplaceArgs *a, Tuplestorestate *store, TupleDesc desc)
{
	StageRun   *runs;
	int			nruns;
	StagedRel  *sorted = split_by_value(a, &runs, &nruns);
	int		   *group_of = palloc0(sizeof(int) * (nruns + 1));
	PartSlot  **slots = palloc0(sizeof(PartSlot *) * (nruns + 1));
	uint64	   *sums = palloc0(sizeof(uint64) * 2 * (nruns + 1));
	int64	   *rows = palloc0(sizeof(int64) * (nruns + 1));
	int			nslots = 0;
	StageGroups *g;

	ledger_lock_partitions(a->target->relid);
	for (int i = 0; i < nruns; i++)
	{
		Oid			partoid = partmap_find(a->target, a->pk, runs[i].text);
		int			s = -1;

		/* most values belong to the partition of the value before them */
		if (nslots > 0 && OidIsValid(partoid) && slots[nslots - 1]->partoid == partoid)
			s = nslots - 1;
		else
		{
			PartSlot   *slot = partmap_slot(a->target, a->pk, runs[i].text, a->granularity);
			char	   *range = NULL;

			if (partmap_slice_check(a->target, a->pk, slot, a->granularity, &range) != NULL)
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("partition \"%s\" of \"%s\" is wider than granularity",
								slot->name, a->target->relname),
						 errdetail("etl_replace_partitions replaces whole partitions, and granularity makes slices of this one, such as %s.",
								   range),
						 errhint("Replace the slice with etl_replace_partition, or leave granularity NULL to replace the whole partition.")));

			for (int j = nslots - 1; j >= 0 && s < 0; j--)
				if (strcmp(slots[j]->bound_sql, slot->bound_sql) == 0)
					s = j;
			if (s < 0)
			{
				s = nslots++;
				slots[s] = slot;
			}
		}
		group_of[i] = s;
		sums[2 * s] += runs[i].sum[0];
		sums[2 * s + 1] += runs[i].sum[1];
		rows[s] += runs[i].nrows;
	}

	g = stage_groups(sorted, runs, nruns, group_of, nslots);
	for (int s = 0; s < nslots; s++)
	{
		ReplaceResult r;

		rebuild_partition(a, slots[s], g,
						  stage_fingerprint(a->stage, &sums[2 * s], rows[s],
											rebuild_options(a->stage, slots[s]->bound_sql)),
						  rows[s], &r);
		put_result(store, desc, &r);
	}
	stage_groups_end(g);
	stage_drop(sorted);
}

/*
 * etl_replace_partition on a partitioned table: the partition holding value
 * or, when granularity is narrower than that partition (a day of a monthly
 * partition), only the slice [value's granule, + granularity) of it, its
 * other rows kept (as etl_replace_where does).  Replacing a LIST partition
 * that holds other values too says so.
 */
static void
replace_value(ReplaceArgs *a, const char *value, ReplaceResult *r)
{
	PartSlot   *slot = partmap_slot_locked(a->target, a->pk, value, a->granularity);
	char	   *range = NULL;
	char	   *slice = partmap_slice_check(a->target, a->pk, slot, a->granularity, &range);

	if (slice == NULL)
	{
		if (a->granularity == NULL && a->pk->strategy == PARTITION_STRATEGY_LIST &&
			OidIsValid(slot->partoid) && strchr(slot->bound_sql, ',') != NULL)
			ereport(NOTICE,
					(errmsg("replacing partition \"%s\" of \"%s\", which holds %s",
							slot->name, a->target->relname, slot->bound_sql),
					 errdetail("Its rows of the other values are replaced by the source's too."),
					 errhint("To replace the rows of %s only, use etl_replace_where.", value)));
		rebuild_partition(a, slot, NULL, NULL, 0, r);
	}
	else
	{
		LedgerRun	run;
		ReplaceResult total;

		ereport(NOTICE,
				(errmsg("replacing the slice %s of partition \"%s\" of \"%s\"",
						range, slot->name, a->target->relname),
				 errdetail("granularity is narrower than the partition: its rows outside the slice are kept.")));
		memset(&total, 0, sizeof(total));
		a->condition = slice;
		memset(r, 0, sizeof(ReplaceResult));
		r->run_id = replace_where_run(a, a->run_key, &run, &total);
		r->loaded = total.loaded;
		r->replaced = total.replaced;
		r->skipped = run.skipped;
		r->partition = get_relname_relid(slot->name, get_rel_namespace(a->target->relid));
	}
}

Datum
etl_replace_partition(PG_FUNCTION_ARGS)
{
	ReplaceArgs a;
	ReplaceResult r;
	char	   *value;
	TupleDesc	desc;
	Tuplestorestate *store;
	int			nestlevel;

	PreventCommandIfReadOnly("etl_replace_partition()");
	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(2))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("target, partition_value and source must not be NULL")));
	store = args_srf_store(fcinfo, &desc);
	nestlevel = settings_canonical_output();
	SPI_connect();
	replace_setup(&a, fcinfo, 2);
	progress_start("replace_partition", a.target->qualname, a.run_key);
	value = partmap_normalize(a.pk, args_text(fcinfo, 1));

	if (a.pk->strategy == 0)
		replace_in_table(&a, value, &r);
	else
		replace_value(&a, value, &r);
	put_result(store, desc, &r);
	progress_end();
	SPI_finish();
	AtEOXact_GUC(true, nestlevel);
	return (Datum) 0;
}

/*
 * Dynamic overwrite: every partition the source has rows for is replaced
 * with those rows, the others are left alone, all in the caller's
 * transaction.  The source is staged once and read in one pass; partitions
 * (values of a plain table) are done in the order of their values.
 */
Datum
etl_replace_partitions(PG_FUNCTION_ARGS)
{
	ReplaceArgs a;
	TupleDesc	desc;
	Tuplestorestate *store;
	int			nestlevel;

	PreventCommandIfReadOnly("etl_replace_partitions()");
	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("target and source must not be NULL")));
	store = args_srf_store(fcinfo, &desc);
	nestlevel = settings_canonical_output();
	SPI_connect();
	replace_setup(&a, fcinfo, 1);
	progress_start("replace_partitions", a.target->qualname, a.run_key);

	progress_phase("staging", -1);
	stage_load(a.stage, a.target, NULL, false, NULL);
	audit_expect(a.expect, a.stage->name, a.target->relname);
	rebuild_refuse_null_values(&a);

	if (a.pk->strategy == 0)
		replace_table_values(&a, store, desc);
	else
		replace_partitions(&a, store, desc);
	stage_drop(a.stage->staged);
	progress_end();
	SPI_finish();
	AtEOXact_GUC(true, nestlevel);
	return (Datum) 0;
}
