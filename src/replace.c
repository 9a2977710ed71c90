/*
 * replace.c
 *		etl_replace_partition and etl_replace_partitions: replace one run
 *		value's data as a whole, so that a rerun can never append to it or
 *		half-overwrite it.
 *
 * For a partitioned target the new contents go into a fresh table shaped
 * like the partition, which is indexed, checked and constrained before a
 * short swap (swap.c) puts it in the old one's place.  For a plain table
 * with partition_column, the value's rows are deleted and the new ones
 * inserted in the same transaction.
 */
#include "postgres.h"

#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"

#include "idem_etl.h"
#include "kept.h"
#include "ledger.h"
#include "newpart.h"
#include "partmap.h"
#include "relinfo.h"
#include "sql_build.h"
#include "stage.h"
#include "swap.h"

PG_FUNCTION_INFO_V1(etl_replace_partition);
PG_FUNCTION_INFO_V1(etl_replace_partitions);

#define OPERATION "replace_partition"

typedef struct ReplaceArgs
{
	TargetInfo *target;
	PartKey    *pk;
	Stage	   *stage;			/* the source, planned */
	Interval   *granularity;
	Interval   *keep;			/* NULL: drop replaced data at commit */
	char	   *run_key;
} ReplaceArgs;

typedef struct ReplaceResult
{
	int64		run_id;
	Oid			partition;
	int64		loaded;
	int64		replaced;
	bool		skipped;
} ReplaceResult;

/* keep_replaced, else idem_etl.keep_replaced; NULL when nothing is kept */
static Interval *
keep_interval(FunctionCallInfo fcinfo, int n)
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

/*
 * The arguments both functions share: target (argument 0), then source,
 * partition_column, granularity, keep_replaced and run_key from argument
 * "first" on.
 */
static void
replace_setup(ReplaceArgs *a, FunctionCallInfo fcinfo, int first)
{
	a->run_key = idem_text_arg(fcinfo, first + 4);
	ledger_check_length("run_key", a->run_key);
	swap_serialize(PG_GETARG_OID(0));
	a->target = target_open(PG_GETARG_OID(0), ACL_SELECT | ACL_INSERT | ACL_DELETE);
	target_check_row_security(a->target->relid);
	a->granularity = PG_ARGISNULL(first + 2) ? NULL : PG_GETARG_INTERVAL_P(first + 2);
	a->keep = keep_interval(fcinfo, first + 3);
	a->pk = partmap_key(a->target, idem_text_arg(fcinfo, first + 1));
	a->stage = stage_plan(a->target, idem_text_arg(fcinfo, first));
	if (!stage_has_column(a->stage, a->pk->column->name))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("partition column \"%s\" is missing from the source",
						a->pk->column->name),
				 errdetail("The source must return the complete new rows, partition column included."),
				 errhint("Add \"%s\" to the source query's select list.", a->pk->column->name)));
}

/* What shapes the result besides the rows: the columns and the bound. */
static char *
replace_options(Stage *stage, const char *bound)
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
 * partition).  True when the latest run with run_key that replaced it had
 * the same fingerprint and nothing changed the partition since, so this call
 * is a skip.  A different fingerprint is a correction of that run.
 */
static bool
same_as_prior(ReplaceArgs *a, const char *value, const char *bound, LedgerRun *run)
{
	LedgerPartPrior prior;

	if (a->run_key == NULL)
		return false;
	prior = ledger_partition_prior(a->target->relid, a->run_key, bound, value);
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
	ereport(NOTICE,
			(errmsg("skipping replacement of %s in \"%s\": run %lld already has the same rows for run_key \"%s\"",
					value, a->target->relname, (long long) prior.applied, a->run_key),
			 errdetail("Nothing was rewritten."),
			 errhint("Change the source, or use another run_key, to load it again.")));
	return true;
}

static void
start_run(LedgerRun *run, ReplaceArgs *a, const char *value, const char *bound,
		  const char *table)
{
	memset(run, 0, sizeof(LedgerRun));
	run->operation = OPERATION;
	run->target = a->target->qualname;
	run->target_oid = a->target->relid;
	run->run_key = a->run_key;
	run->started_at = GetCurrentTimestamp();
	run->partition_value = value;
	run->partition_table = table;
	run->partition_bound = bound;
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

	args[0] = ObjectIdGetDatum(a->target->relid);
	SPI_execute_with_args("SELECT c.conname, c.conrelid::pg_catalog.regclass::pg_catalog.text,"
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
						  1, argtypes, args, NULL, false, 0);
	n = SPI_processed;
	tuptable = SPI_tuptable;
	for (uint64 i = 0; i < n; i++)
	{
		char	   *conname = SPI_getvalue(tuptable->vals[i], tuptable->tupdesc, 1);
		char	   *conrel = SPI_getvalue(tuptable->vals[i], tuptable->tupdesc, 2);

		if (sqlb_exec_int8(psprintf("SELECT pg_catalog.count(*)::pg_catalog.int8 FROM (SELECT 1 FROM %s r"
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

/*
 * Replace one partition, whose lock the caller holds (partmap_slot_locked).
 * Its new rows come from the source (from == NULL) or from the rows of a
 * staged batch that fall in it.
 */
static void
replace_slot(ReplaceArgs *a, PartSlot *slot, const char *from, ReplaceResult *r)
{
	NewPart    *np;
	Stage		loaded = *a->stage;
	LedgerRun	run;
	SwapSpec	spec;
	bool		keep = a->keep != NULL && OidIsValid(slot->partoid);

	memset(r, 0, sizeof(ReplaceResult));
	start_run(&run, a, slot->value, slot->bound_sql,
			  quote_qualified_identifier(get_namespace_name(get_rel_namespace(a->target->relid)),
										 slot->name));
	if (OidIsValid(slot->partoid))
		target_check_row_security(slot->partoid);
	np = newpart_create(a->target, a->pk, slot);
	if (from == NULL)
		stage_fill(&loaded, np->qualname);
	else
	{
		StringInfoData sql;

		initStringInfo(&sql);
		appendStringInfo(&sql, "INSERT INTO %s (", np->qualname);
		sqlb_append_columns(&sql, NULL, loaded.columns, loaded.ncolumns);
		appendStringInfoString(&sql, ") SELECT ");
		sqlb_append_columns(&sql, NULL, loaded.columns, loaded.ncolumns);
		appendStringInfo(&sql, " FROM %s WHERE %s", from, slot->check_sql);
		loaded.nrows = (int64) sqlb_exec(sql.data);
		loaded.name = np->qualname;
		loaded.staged = NULL;
	}
	run.batch_rows = loaded.nrows;
	run.fingerprint = stage_scan(&loaded, NULL, replace_options(&loaded, slot->bound_sql));

	if (same_as_prior(a, slot->value, slot->bound_sql, &run))
	{
		sqlb_exec(psprintf("DROP TABLE %s", np->qualname));
		run.skipped = true;
		r->partition = slot->partoid;
		r->skipped = true;
		r->run_id = ledger_record(&run);
		return;
	}

	newpart_bound(np, a->target, a->pk, slot);
	if (OidIsValid(slot->partoid))
		check_referencing_rows(a, slot, np->schema);
	newpart_finish(np, a->target, a->pk, slot);

	r->loaded = loaded.nrows;
	if (OidIsValid(slot->partoid))
		r->replaced = sqlb_exec_int8(psprintf("SELECT pg_catalog.count(*)::pg_catalog.int8 FROM %s.%s",
											  np->schema, quote_identifier(slot->name)));
	else if (OidIsValid(a->pk->default_part))
		r->replaced = (int64) sqlb_exec(psprintf("DELETE FROM %s WHERE %s",
												 quote_qualified_identifier(get_namespace_name(get_rel_namespace(a->pk->default_part)),
																			get_rel_name(a->pk->default_part)),
												 slot->check_sql));

	memset(&spec, 0, sizeof(spec));
	spec.parent = a->target;
	spec.schema = np->schema;
	if (OidIsValid(slot->partoid))
	{
		spec.old_name = slot->name;
		spec.keep_name = keep ? kept_table_name(slot->partoid) : NULL;
	}
	spec.new_name = np->relname;
	spec.final_name = slot->name;
	spec.bound_sql = slot->bound_sql;
	swap_partition(&spec);

	run.rows_loaded = r->loaded;
	run.rows_replaced = r->replaced;
	r->run_id = ledger_record(&run);
	if (keep)
		kept_record(a->target, slot, np->schema, spec.keep_name, r->run_id, a->keep);
	r->partition = get_relname_relid(slot->name, get_rel_namespace(a->target->relid));
}

/*
 * Plain table: delete the value's rows and insert the new ones.  The rows
 * come from the source (from == NULL) or from a staged batch.
 */
static void
replace_in_table(ReplaceArgs *a, const char *value, const char *from, ReplaceResult *r)
{
	Stage		batch = *a->stage;
	LedgerRun	run;
	const char *col = quote_identifier(a->pk->column->name);
	char	   *bound = partmap_value_check(a->pk, value);
	StringInfoData sql;

	memset(r, 0, sizeof(ReplaceResult));
	ledger_lock_key(a->target->relid, OPERATION, bound);
	start_run(&run, a, value, bound, a->target->qualname);
	if (from == NULL)
	{
		char	   *example;

		stage_load(&batch, a->target);
		sqlb_exec(psprintf("SELECT pg_catalog.count(*)::pg_catalog.int8,"
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
	}
	else
	{
		batch.staged = stage_query(psprintf("SELECT * FROM %s WHERE %s", from, bound), "value");
		batch.name = batch.staged->name;
		batch.nrows = batch.staged->nrows;
	}
	run.batch_rows = batch.nrows;
	run.fingerprint = stage_scan(&batch, NULL, replace_options(&batch, bound));
	r->partition = a->target->relid;
	if (same_as_prior(a, value, bound, &run))
	{
		run.skipped = true;
		r->skipped = true;
	}
	else
	{
		r->replaced = (int64) sqlb_exec(psprintf("DELETE FROM %s%s WHERE %s",
												 target_only(a->target), a->target->qualname, bound));
		initStringInfo(&sql);
		appendStringInfo(&sql, "INSERT INTO %s (", a->target->qualname);
		sqlb_append_columns(&sql, NULL, batch.columns, batch.ncolumns);
		appendStringInfoString(&sql, ") SELECT ");
		sqlb_append_columns(&sql, NULL, batch.columns, batch.ncolumns);
		appendStringInfo(&sql, " FROM %s", batch.name);
		r->loaded = (int64) sqlb_exec(sql.data);
		run.rows_loaded = r->loaded;
		run.rows_replaced = r->replaced;
	}
	stage_drop(batch.staged);
	r->run_id = ledger_record(&run);
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

Datum
etl_replace_partition(PG_FUNCTION_ARGS)
{
	ReplaceArgs a;
	ReplaceResult r;
	char	   *value;
	TupleDesc	desc;
	Tuplestorestate *store;
	int			nestlevel;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(2))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("target, partition_value and source must not be NULL")));
	store = idem_srf_store(fcinfo, &desc);
	nestlevel = idem_canonical_output();
	SPI_connect();
	replace_setup(&a, fcinfo, 2);
	value = partmap_normalize(a.pk, idem_text_arg(fcinfo, 1));

	if (a.pk->strategy == 0)
		replace_in_table(&a, value, NULL, &r);
	else
		replace_slot(&a, partmap_slot_locked(a.target, a.pk, value, a.granularity), NULL, &r);
	put_result(store, desc, &r);
	SPI_finish();
	AtEOXact_GUC(true, nestlevel);
	return (Datum) 0;
}

/*
 * Dynamic overwrite: every partition the source has rows for is replaced
 * with those rows, the others are left alone, all in the caller's
 * transaction.  The source is staged once; partitions are done in the order
 * of their values, so concurrent calls take their locks in the same order.
 */
Datum
etl_replace_partitions(PG_FUNCTION_ARGS)
{
	ReplaceArgs a;
	ReplaceResult r;
	TupleDesc	desc;
	Tuplestorestate *store;
	const char *col;
	uint64		nvalues;
	SPITupleTable *values;
	List	   *done = NIL;
	int64		nulls;
	int			nestlevel;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("target and source must not be NULL")));
	store = idem_srf_store(fcinfo, &desc);
	nestlevel = idem_canonical_output();
	SPI_connect();
	replace_setup(&a, fcinfo, 1);
	col = quote_identifier(a.pk->column->name);

	stage_load(a.stage, a.target);
	nulls = sqlb_exec_int8(psprintf("SELECT pg_catalog.count(*)::pg_catalog.int8 FROM %s WHERE %s IS NULL",
									a.stage->name, col));
	if (nulls > 0)
		ereport(ERROR,
				(errcode(ERRCODE_CHECK_VIOLATION),
				 errmsg("%lld row(s) of the source have no value in partition column \"%s\"",
						(long long) nulls, a.pk->column->name),
				 errdetail("One offending value is NULL."),
				 errhint("Filter out or fill in those rows in the source query.")));

	sqlb_exec(psprintf("SELECT DISTINCT %s::pg_catalog.text, %s FROM %s ORDER BY 2",
					   col, col, a.stage->name));
	nvalues = SPI_processed;
	values = SPI_tuptable;
	for (uint64 i = 0; i < nvalues; i++)
	{
		char	   *value = SPI_getvalue(values->vals[i], values->tupdesc, 1);
		PartSlot   *slot;

		if (a.pk->strategy == 0)
		{
			replace_in_table(&a, value, a.stage->name, &r);
			put_result(store, desc, &r);
			continue;
		}
		/* values come in order: most belong to a partition just replaced */
		if (list_member_oid(done, partmap_find(a.target, a.pk, value)))
			continue;
		slot = partmap_slot_locked(a.target, a.pk, value, a.granularity);
		replace_slot(&a, slot, a.stage->name, &r);
		if (OidIsValid(r.partition))
			done = lappend_oid(done, r.partition);
		put_result(store, desc, &r);
	}
	stage_drop(a.stage->staged);
	SPI_finish();
	AtEOXact_GUC(true, nestlevel);
	return (Datum) 0;
}
