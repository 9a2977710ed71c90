/*
 * replace_where.c
 *		etl_replace_where (Delta Lake's replaceWhere): the rows of target
 *		satisfying condition are replaced, atomically, by the rows of source,
 *		each of which must satisfy it too (23514 otherwise).  Also the slices
 *		of etl_replace_partition, a granularity narrower than the partition.
 *
 * A plain table: one statement deletes and inserts.  A partitioned table:
 * every partition holding rows the condition covers, or receiving rows of
 * the source, is rebuilt as a fresh table (the source's rows of that
 * partition plus its rows the condition does not cover, rebuild_partition) and
 * swapped in, the rest left untouched: no dead tuples, the parent locked
 * only for the swaps.  With run_key, skips and corrections are keyed by the
 * condition's text.
 */
#include "postgres.h"

#include "catalog/pg_class.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "nodes/pg_list.h"
#include "tcop/utility.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"

#include "citus/citus_replace.h"
#include "state/audit.h"
#include "util/args.h"
#include "util/settings.h"
#include "state/ledger.h"
#include "replace/partmap.h"
#include "state/progress.h"
#include "util/target.h"
#include "replace/replace_where.h"
#include "replace/rebuild.h"
#include "util/sql.h"
#include "stage/stage.h"
#include "replace/swap.h"

PG_FUNCTION_INFO_V1(etl_replace_where);

/* Every source row satisfies the condition, or 23514 with one of them. */
static void
check_source_inside(ReplaceArgs *a)
{
	const char *alias = quote_identifier(a->target->relname);
	int64		outside;

	sql_exec(psprintf("SELECT pg_catalog.count(*)::pg_catalog.int8, pg_catalog.min(%s::pg_catalog.text)"
					  " FROM %s AS %s WHERE NOT coalesce((%s\n), false)",
					  alias, a->stage->name, alias, a->condition));
	outside = sql_result_int8(1);
	if (outside > 0)
		ereport(ERROR,
				(errcode(ERRCODE_CHECK_VIOLATION),
				 errmsg("%lld row(s) of the source do not satisfy the condition", (long long) outside),
				 errdetail("The condition is %s; one such row is %s.", a->condition,
						   SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2)),
				 errhint("Filter the source with the same condition, or widen the condition.")));
}

/* A plain table: one statement deletes the covered rows, inserts the new. */
static void
where_in_table(ReplaceArgs *a, ReplaceResult *r)
{
	const char *alias = quote_identifier(a->target->relname);
	StringInfoData sql;

	rebuild_lock_writers(a->target->relid);
	if (audit_shrink_possible(a->min_ratio, a->allow_shrink, a->stage->nrows))
		audit_shrink(a->min_ratio, false, a->stage->nrows, a->stage->nrows,
					 sql_exec_int8(psprintf("SELECT pg_catalog.count(*)::pg_catalog.int8 FROM ONLY %s AS %s"
											" WHERE (%s\n)", a->target->qualname, alias, a->condition)),
					 a->target->relname, "the rows of the condition");
	progress_phase("deleting", -1);

	/*
	 * The insert reads the delete's count first: the delete runs first.  It
	 * inserts every staged row (or fails), so the staged rows count it,
	 * unless a BEFORE INSERT trigger of the target's own may skip some: only
	 * then does it return its rows to be counted (PostgreSQL keeps returned
	 * rows in a tuplestore, in memory up to work_mem, then in a file).  Not
	 * read by the main query, it runs to completion after it.
	 */
	initStringInfo(&sql);
	appendStringInfo(&sql, "WITH idem_deleted AS (DELETE FROM ONLY %s AS %s WHERE (%s\n) RETURNING 1),"
					 " idem_count AS (SELECT pg_catalog.count(*)::pg_catalog.int8 AS n FROM idem_deleted),"
					 " idem_inserted AS (INSERT INTO %s (",
					 a->target->qualname, alias, a->condition, a->target->qualname);
	sql_append_columns(&sql, NULL, a->stage->columns, a->stage->ncolumns);
	appendStringInfoString(&sql, ") SELECT ");
	sql_append_columns(&sql, "s", a->stage->columns, a->stage->ncolumns);
	appendStringInfo(&sql, " FROM %s AS s, idem_count", a->stage->name);
	if (a->target->has_triggers_or_rules)
		appendStringInfoString(&sql, " RETURNING 1) SELECT (SELECT n FROM idem_count),"
							   " (SELECT pg_catalog.count(*)::pg_catalog.int8 FROM idem_inserted)");
	else
		appendStringInfoString(&sql, ") SELECT n FROM idem_count");
	sql_exec(sql.data);
	r->replaced = sql_result_int8(1);
	r->loaded = a->target->has_triggers_or_rules ? sql_result_int8(2) : a->stage->staged->nrows;
}

/*
 * A partitioned table: the partitions to rebuild are those holding covered
 * rows and those the source's rows fall in, each found from one value of
 * its own, in the order of those values.
 */
static void
where_in_partitions(ReplaceArgs *a, const char *fingerprint, ReplaceResult *total)
{
	const char *alias = quote_identifier(a->target->relname);
	const char *col = quote_identifier(a->pk->column->name);
	List	   *done = NIL;
	uint64		n;
	uint64		nstaged = 0;
	SPITupleTable *values;
	SPITupleTable *staged = NULL;

	if (OidIsValid(a->pk->default_part) &&
		sql_exec_int8(psprintf("SELECT pg_catalog.count(*)::pg_catalog.int8 FROM"
							   " (SELECT FROM %s AS %s WHERE (%s\n) LIMIT 1) x",
							   rebuild_default_part_name(a->pk), alias, a->condition)) > 0)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("the condition covers rows of the default partition of \"%s\"", a->target->relname),
				 errdetail("etl_replace_where rebuilds the partitions it touches, and a default partition holds values of many of them."),
				 errhint("Move those rows into partitions of their own first.")));

	rebuild_refuse_null_values(a);

	/*
	 * A partition is found from a value; of a LIST partition that holds NULL,
	 * a covered row that has one, if any.  Citus cannot read the staged batch
	 * in a query of its table: the batch's values are then read on their own,
	 * after the table's (of each shard of each partition, by tableoid).
	 */
	if (citus_replace_column(a->target->relid) == NULL)
		sql_exec(psprintf("SELECT v::pg_catalog.text FROM ("
						  " (SELECT DISTINCT ON (tableoid) %s AS v FROM %s AS %s WHERE (%s\n)"
						  " ORDER BY tableoid, %s IS NULL)"
						  " UNION SELECT %s FROM %s) x ORDER BY v",
						  col, a->target->qualname, alias, a->condition, col, col, a->stage->name));
	else
	{
		sql_exec(psprintf("SELECT DISTINCT %s::pg_catalog.text FROM %s", col, a->stage->name));
		nstaged = SPI_processed;
		staged = SPI_tuptable;
		sql_exec(psprintf("SELECT DISTINCT ON (tableoid) %s::pg_catalog.text FROM %s AS %s WHERE (%s\n)"
						  " ORDER BY tableoid, %s IS NULL",
						  col, a->target->qualname, alias, a->condition, col));
	}
	n = SPI_processed;
	values = SPI_tuptable;
	for (uint64 i = 0; i < n + nstaged; i++)
	{
		char	   *value = i < n ? SPI_getvalue(values->vals[i], values->tupdesc, 1) :
			SPI_getvalue(staged->vals[i - n], staged->tupdesc, 1);
		PartSlot   *slot;
		ReplaceResult r;

		CHECK_FOR_INTERRUPTS();
		if (value == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("cannot find the partition of rows of \"%s\" whose partition column \"%s\" is NULL",
							a->target->relname, a->pk->column->name),
					 errdetail("etl_replace_where finds each partition it rebuilds from a value of the rows the condition covers, and of this one it covers only NULLs."),
					 errhint("Narrow the condition to rows with a value in \"%s\", and delete the others with DELETE.",
							 a->pk->column->name)));
		if (list_member_oid(done, partmap_find(a->target, a->pk, value)))
			continue;
		slot = partmap_slot_locked(a->target, a->pk, value, NULL);
		rebuild_partition(a, slot, NULL, fingerprint, 0, &r);
		done = lappend_oid(done, r.partition);
		total->loaded += r.loaded;
		total->replaced += r.replaced;
	}
}

/*
 * Replace the rows of a->condition by the source's (staged here), with
 * run_key's skip or correction; records the run (*run) and returns its id.
 */
int64
replace_where_run(ReplaceArgs *a, char *run_key, LedgerRun *run, ReplaceResult *total)
{
	LedgerPartPrior prior;
	char	   *bound;
	StringInfoData opts;

	progress_phase("staging", -1);
	stage_load(a->stage, a->target, NULL, false, NULL);
	audit_expect(a->expect, a->stage->name, a->target->relname);
	check_source_inside(a);

	/*
	 * Calls for one condition run one after the other; on a plain table every
	 * replacement does (ledger_lock_table: a DELETE that waited for another
	 * call's cannot see the rows that call inserted).  A partitioned table's
	 * are serialized by swap_serialize.
	 */
	if (a->pk == NULL)
		ledger_lock_table(a->target->relid);
	bound = psprintf("WHERE %s", a->condition);
	ledger_lock_key(a->target->relid, "replace_where", bound);
	initStringInfo(&opts);
	for (int i = 0; i < a->stage->ncolumns; i++)
		appendStringInfo(&opts, "col %zu:%s\n", strlen(a->stage->columns[i]), a->stage->columns[i]);
	appendStringInfo(&opts, "where %zu:%s\n", strlen(a->condition), a->condition);

	a->run_key = run_key;
	rebuild_start_run(run, a, a->condition, bound, a->target->qualname);
	run->operation = "replace_where";
	run->batch_rows = a->stage->nrows;
	run->fingerprint = stage_batch_fingerprint(a->stage, opts.data);
	if (run_key)
	{
		/*
		 * As for a partition (rebuild_same_as_prior in replace.c): a
		 * correction is a run with other rows; the same rows are loaded
		 * again, without being a correction, when the rows or their
		 * partitions changed since.
		 */
		prior = ledger_where_prior(a->target->relid, run_key, bound);
		if (prior.applied != 0 && strcmp(prior.fingerprint, run->fingerprint) != 0)
		{
			ereport(NOTICE,
					(errmsg("run_key \"%s\" replaced the rows of \"%s\" where %s in run %lld with other rows; replacing them as a correction",
							run_key, a->target->relname, a->condition, (long long) prior.applied)));
			run->corrects = prior.applied;
		}
		else if (prior.applied != 0)
		{
			if (prior.changed_by != 0)
				ereport(NOTICE,
						(errmsg("replacing the rows of \"%s\" where %s again: run %lld (%s) changed the table after run %lld loaded the same rows for run_key \"%s\"",
								a->target->relname, a->condition, (long long) prior.changed_by,
								prior.changed_op, (long long) prior.applied, run_key)));
			else if (prior.partition_gone)
				ereport(NOTICE,
						(errmsg("replacing the rows of \"%s\" where %s again: a partition run %lld rebuilt for run_key \"%s\" is no longer there",
								a->target->relname, a->condition, (long long) prior.applied, run_key),
						 errdetail(REPLACE_PARTITION_GONE_DETAIL)));
			else
			{
				ereport(NOTICE,
						(errmsg("skipping replacement of the rows of \"%s\" where %s: run %lld already has the same rows for run_key \"%s\"",
								a->target->relname, a->condition, (long long) prior.applied, run_key)));
				run->skipped = true;
			}
		}
	}
	if (!run->skipped)
	{
		/* the partitions' own runs are changes, not runs of this run_key */
		a->run_key = NULL;
		if (a->pk)
			where_in_partitions(a, run->fingerprint, total);
		else
			where_in_table(a, total);
		run->rows_loaded = total->loaded;
		run->rows_replaced = total->replaced;
	}
	stage_drop(a->stage->staged);
	return ledger_record(run);
}

Datum
etl_replace_where(PG_FUNCTION_ARGS)
{
	ReplaceArgs a;
	ReplaceResult total;
	LedgerRun	run;
	char	   *run_key;
	int64		run_id;
	Datum		values[4];
	bool		nulls[4] = {false, false, false, false};
	int			nestlevel;

	PreventCommandIfReadOnly("etl_replace_where()");
	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(2))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("target, condition and source must not be NULL")));
	nestlevel = settings_canonical_output();
	SPI_connect();
	memset(&a, 0, sizeof(a));
	memset(&total, 0, sizeof(total));
	run_key = args_text(fcinfo, 4);
	ledger_check_length("run_key", run_key);
	a.condition = args_text(fcinfo, 1);
	sql_check_expression(a.condition, "condition");
	a.expect = args_text(fcinfo, 5);
	audit_check_syntax(a.expect);
	a.min_ratio = audit_ratio(fcinfo, 6);
	a.allow_shrink = audit_allow_shrink(fcinfo, 7);
	citus_replace_check(PG_GETARG_OID(0),
						get_rel_relkind(PG_GETARG_OID(0)) == RELKIND_PARTITIONED_TABLE,
						"etl_replace_where");
	swap_serialize(PG_GETARG_OID(0));
	a.target = target_open(PG_GETARG_OID(0), ACL_SELECT | ACL_INSERT | ACL_DELETE, true);
	target_check_row_security(a.target->relid);
	a.keep = rebuild_keep_interval(fcinfo, 3);
	if (a.target->relkind == RELKIND_PARTITIONED_TABLE)
		a.pk = partmap_key(a.target, NULL);
	a.stage = stage_plan(a.target, args_text(fcinfo, 2), run_key != NULL);
	if (a.pk && !stage_has_column(a.stage, a.pk->column->name))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("partition column \"%s\" is missing from the source", a.pk->column->name),
				 errhint("Add \"%s\" to the source query's select list.", a.pk->column->name)));
	progress_start("replace_where", a.target->qualname, run_key);

	run_id = replace_where_run(&a, run_key, &run, &total);
	values[0] = Int64GetDatum(run_id);
	values[1] = Int64GetDatum(total.loaded);
	values[2] = Int64GetDatum(total.replaced);
	values[3] = BoolGetDatum(run.skipped);
	progress_end();
	SPI_finish();
	AtEOXact_GUC(true, nestlevel);
	return args_return_row(fcinfo, values, nulls);
}
