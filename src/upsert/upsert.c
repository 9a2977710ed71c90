/*
 * upsert.c
 *		etl_upsert_batch: merge a batch into a table by key, so that applying
 *		it once or many times gives the same table.
 *
 * The steps: stage the source once (stage.c), fingerprinting it on the way;
 * skip when the run_key's latest run had the same fingerprint; check keys;
 * drop the rows that would not change anything; write the rest in key order
 * (merge_batch); delete the missing rows of the slice; record the run.
 */
#include "postgres.h"

#include <float.h>

#include "access/stratnum.h"
#include "access/xact.h"
#include "catalog/pg_class.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "fmgr.h"
#include "tcop/utility.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/rls.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"
#include "utils/typcache.h"

#include "citus/citus_target.h"
#include "citus/citus_upsert.h"
#include "state/audit.h"
#include "upsert/dedup.h"
#include "util/args.h"
#include "state/ledger.h"
#include "state/progress.h"
#include "util/target.h"
#include "util/settings.h"
#include "util/sql.h"
#include "stage/evolve.h"
#include "stage/stage.h"

PG_FUNCTION_INFO_V1(etl_upsert_batch);

typedef struct UpsertArgs
{
	Oid			target;
	char	   *source;
	ArrayType  *key_columns;
	char	   *order_by;
	char	   *newer_column;
	char	   *delete_missing;
	char	   *run_key;
	ArrayType  *update_columns;
	ArrayType  *exclude_columns;
	char	   *expect;
	bool		allow_shrink;
	char	   *on_schema_change;
} UpsertArgs;

typedef struct UpsertCounts
{
	int64		inserted;
	int64		updated;
	int64		unchanged;
	int64		deleted;
} UpsertCounts;

/*
 * A column the source cannot write (generated, or GENERATED ALWAYS AS
 * IDENTITY) named where one that is written is needed: 0A000 saying so,
 * rather than that the source lacks it (it is left out of the stage).
 */
static void
refuse_unwritable(TargetInfo *target, const char *name, const char *argname)
{
	TargetColumn *col = target_column(target, name);

	if (col != NULL && !col->writable)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("column \"%s\" of %s is a generated column", name, argname),
				 errdetail("idem_etl never writes generated columns or GENERATED ALWAYS identity columns."),
				 errhint("Name a column that the source writes.")));
}

/*
 * The columns an update sets (and compares): the written columns that are
 * not key columns, narrowed to update_columns or without exclude_columns
 * (dbt's merge_update_columns / merge_exclude_columns).  New rows are
 * inserted with every source column either way.
 */
static char **
update_set_columns(TargetInfo *target, Stage *stage, TargetKey *key,
				   const UpsertArgs *args, int *n)
{
	char	  **cols = palloc(sizeof(char *) * stage->ncolumns);
	ArrayType  *arr = args->update_columns ? args->update_columns : args->exclude_columns;
	const char *argname = args->update_columns ? "update_columns" : "exclude_columns";
	char	  **names = NULL;
	int			nnames = 0;

	if (args->update_columns && args->exclude_columns)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("update_columns and exclude_columns cannot both be given"),
				 errhint("Name the columns to update, or those to leave alone, not both.")));
	if (arr)
	{
		names = args_names(arr, argname, &nnames);
		for (int i = 0; i < nnames; i++)
		{
			if (target_column(target, names[i]) == NULL)
				ereport(ERROR,
						(errcode(ERRCODE_UNDEFINED_COLUMN),
						 errmsg("column \"%s\" of %s does not exist in relation \"%s\"",
								names[i], argname, target->relname)));
			if (args_name_in(key->names, key->ncolumns, names[i]))
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("column \"%s\" of %s is a key column", names[i], argname),
						 errdetail("Key columns identify rows; they are never updated."),
						 errhint("Leave the key columns out of %s.", argname)));
			if (args->update_columns)
				refuse_unwritable(target, names[i], "update_columns");
			if (args->update_columns && !stage_has_column(stage, names[i]))
				ereport(ERROR,
						(errcode(ERRCODE_UNDEFINED_COLUMN),
						 errmsg("column \"%s\" of update_columns is missing from the source", names[i]),
						 errhint("Add the column to the source query's select list.")));
		}
	}

	*n = 0;
	for (int i = 0; i < stage->ncolumns; i++)
	{
		const char *col = stage->columns[i];

		if (args_name_in(key->names, key->ncolumns, col))
			continue;
		if (args->update_columns && !args_name_in(names, nnames, col))
			continue;
		if (args->exclude_columns && args_name_in(names, nnames, col))
			continue;
		cols[(*n)++] = stage->columns[i];
	}
	return cols;
}

/*
 * The statements read the target's system columns (ctid and xmax: which
 * rows the probe found, which the merge inserted), and PostgreSQL grants
 * those with SELECT on the table only: SELECT on some columns is refused
 * here, saying so, rather than by the statement, naming neither.
 */
static void
check_privileges(TargetInfo *target, Stage *stage, char **setcols, int nset,
				 bool deletes)
{
	if (pg_class_aclcheck(target->relid, GetUserId(), ACL_SELECT) != ACLCHECK_OK)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for table %s", target->qualname),
				 errdetail("etl_upsert_batch reads the target's row identifiers (ctid, xmax), which need SELECT on the whole table, not on some of its columns."),
				 errhint("Grant SELECT on the table; INSERT and UPDATE may stay on the batch's columns.")));
	target_check_privileges(target, stage->columns, stage->ncolumns, ACL_INSERT);
	if (nset > 0)
		target_check_privileges(target, setcols, nset, ACL_UPDATE);
	if (deletes)
		target_check_privileges(target, NULL, 0, ACL_DELETE);
}

/* What makes two applies of the same rows differ: columns and options. */
static char *
fingerprint_options(TargetInfo *target, TargetKey *key, Stage *stage,
					const UpsertArgs *args, char **setcols, int nset)
{
	StringInfoData buf;

	initStringInfo(&buf);
	for (int i = 0; i < stage->ncolumns; i++)
	{
		TargetColumn *col = target_column(target, stage->columns[i]);

		appendStringInfo(&buf, "col %zu:%s %u %d\n", strlen(col->name), col->name,
						 col->typid, col->typmod);
	}
	for (int i = 0; i < key->ncolumns; i++)
		appendStringInfo(&buf, "key %zu:%s\n", strlen(key->names[i]), key->names[i]);
	if (args->order_by)
		appendStringInfo(&buf, "order_by %zu:%s\n", strlen(args->order_by), args->order_by);
	if (args->newer_column)
		appendStringInfo(&buf, "newer %zu:%s\n", strlen(args->newer_column), args->newer_column);
	if (args->delete_missing)
		appendStringInfo(&buf, "delete %zu:%s\n", strlen(args->delete_missing), args->delete_missing);
	for (int i = 0; i < nset; i++)
		appendStringInfo(&buf, "set %zu:%s\n", strlen(setcols[i]), setcols[i]);
	if (args->expect)
		appendStringInfo(&buf, "expect %zu:%s\n", strlen(args->expect), args->expect);
	return buf.data;
}

/*
 * How the merge tells inserted rows from updated ones: a row version whose
 * xmax is 0 was inserted, while an updated one carries our lock in xmax.
 * This stays exact when another transaction inserts the same keys meanwhile.
 * On a plain table the INSERT returns xmax.  PostgreSQL 15 refuses xmax in
 * RETURNING on a partitioned table, so there the batch's rows written by
 * this transaction from the merge's command on (no later command of ours
 * writes the target before the count) are looked up again by key
 * afterwards; see count_partitioned_inserts.
 */
static void
append_outcome(StringInfo sql, TargetInfo *target)
{
	if (target->relkind == RELKIND_RELATION)
		appendStringInfoString(sql, " RETURNING t.xmax OPERATOR(pg_catalog.=) '0'::pg_catalog.xid AS idem_etl_inserted)"
							   " SELECT pg_catalog.count(*)::pg_catalog.int8,"
							   " pg_catalog.count(*) FILTER (WHERE idem_etl_inserted)::pg_catalog.int8"
							   " FROM idem_written");
	else
		appendStringInfoString(sql, " RETURNING 1) SELECT pg_catalog.count(*)::pg_catalog.int8, 0::pg_catalog.int8"
							   " FROM idem_written");
}

static int64
count_partitioned_inserts(TargetInfo *target, TargetKey *key, KeyedBatch *batch,
						  CommandId merge_cid)
{
	StringInfoData sql;
	TransactionId xid = GetCurrentTransactionIdIfAny();

	if (!TransactionIdIsValid(xid))
		return 0;

	/*
	 * One probe of the key index per batch row: a lateral subquery that
	 * cannot be flattened (OFFSET 0), since the planner, expecting the
	 * filters on system columns to leave about one row, would otherwise
	 * rescan the whole batch for each row of the target (5,000 new rows: 0.8
	 * s, 20,000: 13 s).
	 */
	initStringInfo(&sql);
	appendStringInfo(&sql, "SELECT pg_catalog.count(*)::pg_catalog.int8 FROM %s b,"
					 " LATERAL (SELECT FROM %s t WHERE ",
					 batch->name, target->qualname);
	sql_append_key_match(&sql, "t", "b", key->names, key->eqops, key->ncolumns,
						 key->nulls_not_distinct);
	appendStringInfo(&sql, " AND t.xmin OPERATOR(pg_catalog.=) '%u'::pg_catalog.xid"
					 " AND t.cmin::pg_catalog.text::pg_catalog.int8 OPERATOR(pg_catalog.>=) %u"
					 " AND t.xmax OPERATOR(pg_catalog.=) '0'::pg_catalog.xid OFFSET 0) i",
					 xid, merge_cid);
	return sql_exec_int8(sql.data);
}

/*
 * The rows of the batch that change something: the join drops unchanged rows
 * (compared by binary image with idem_etl.same_image, so any column type
 * works) and rows the stored newer_column says are older, before any write:
 * ON CONFLICT ... WHERE would still lock, and WAL-log, every conflicting row.
 * With tid non-NULL, the rows also carry, in a column of that name, the
 * tuple identifier of the stored row the probe found (NULL: none).
 */
static void
append_delta(StringInfo sql, TargetInfo *target, TargetKey *key, Stage *stage,
			 KeyedBatch *batch, const char *keys, char **setcols, int nset,
			 const char *newer_column, const char *newer_ge, const char *tid)
{
	const char *tick = progress_tick_call();

	appendStringInfoString(sql, "SELECT ");
	sql_append_columns(sql, "b", stage->columns, stage->ncolumns);
	if (tid)
		appendStringInfo(sql, ", t.ctid AS %s", tid);

	/*
	 * The batch's rows are counted as they are read, for idem_etl.progress:
	 * the merge is one statement.  The count is a column of the batch's scan,
	 * not a condition, so that the planner's estimates do not change.
	 */
	if (batch->in_key_order && tick == NULL)
		appendStringInfo(sql, " FROM %s b", batch->name);
	else
		appendStringInfo(sql, " FROM (SELECT *%s%s FROM %s%s%s) b",
						 tick ? ", " : "", tick ? tick : "", batch->name,
						 batch->in_key_order ? "" : " ORDER BY ",
						 batch->in_key_order ? "" : keys);
	appendStringInfo(sql, " LEFT JOIN %s%s t ON ", target_only(target), target->qualname);
	sql_append_key_match(sql, "t", "b", key->names, key->eqops, key->ncolumns,
						 key->nulls_not_distinct);
	appendStringInfoString(sql, " WHERE t.ctid IS NULL");
	if (nset > 0)
	{
		appendStringInfoString(sql, " OR (NOT idem_etl.same_image(");
		for (int i = 0; i < nset; i++)
		{
			const char *col = quote_identifier(setcols[i]);

			appendStringInfo(sql, "%st.%s, b.%s", i ? ", " : "", col, col);
		}
		appendStringInfoChar(sql, ')');
		if (newer_column)
		{
			appendStringInfoString(sql, " AND ");
			sql_append_newer_wins(sql, "t", "b", newer_column, newer_ge);
		}
		appendStringInfoChar(sql, ')');
	}
}

/*
 * INSERT INTO target ... SELECT <columns> FROM idem_delta [WHERE where]
 * [ORDER BY <key>], with ON CONFLICT unless plain.  The rows are written in
 * key order: idem_delta yields them so (append_delta), and the ORDER BY
 * tells the planner, unless the planner cannot know it and would sort them
 * again (on disk, for a large batch): when idem_delta is materialized (its
 * rows come out of its tuplestore in the order they went in), or reads a
 * batch staged in key order (in_order).
 */
static void
append_insert(StringInfo sql, TargetInfo *target, Stage *stage, const char *keys,
			  char **setcols, int nset, const char *newer_column,
			  const char *newer_ge, const char *where, bool plain,
			  bool in_order)
{
	appendStringInfo(sql, "INSERT INTO %s AS t (", target->qualname);
	sql_append_columns(sql, NULL, stage->columns, stage->ncolumns);
	appendStringInfoString(sql, ") SELECT ");
	sql_append_columns(sql, NULL, stage->columns, stage->ncolumns);
	appendStringInfoString(sql, " FROM idem_delta");
	if (where)
		appendStringInfo(sql, " WHERE %s", where);
	if (!in_order)
		appendStringInfo(sql, " ORDER BY %s", keys);
	if (plain)
		return;
	appendStringInfo(sql, " ON CONFLICT (%s) ", keys);
	if (nset == 0)
		appendStringInfoString(sql, "DO NOTHING");
	else
	{
		appendStringInfoString(sql, "DO UPDATE SET ");
		for (int i = 0; i < nset; i++)
		{
			const char *col = quote_identifier(setcols[i]);

			appendStringInfo(sql, "%s%s = EXCLUDED.%s", i ? ", " : "", col, col);
		}
		if (newer_column)
		{
			appendStringInfoString(sql, " WHERE ");
			sql_append_newer_wins(sql, "t", "EXCLUDED", newer_column, newer_ge);
		}
	}
}

/*
 * UPDATE target SET <setcols> FROM idem_delta: the stored rows the probe
 * found, each through its tuple identifier (column tid of idem_delta), in
 * the order idem_delta yields them (a nested loop over it).
 */
static void
append_update(StringInfo sql, TargetInfo *target, char **setcols, int nset,
			  const char *newer_column, const char *newer_ge, const char *tid)
{
	appendStringInfo(sql, "UPDATE %s%s AS t SET ", target_only(target), target->qualname);
	for (int i = 0; i < nset; i++)
	{
		const char *col = quote_identifier(setcols[i]);

		appendStringInfo(sql, "%s%s = d.%s", i ? ", " : "", col, col);
	}

	/*
	 * The rows found absent are left out before the join rather than by it:
	 * each rescan of the TID scan asks the kernel for the table's size.
	 */
	appendStringInfo(sql, " FROM idem_delta d WHERE d.%s IS NOT NULL AND t.ctid OPERATOR(pg_catalog.=) d.%s",
					 tid, tid);
	if (newer_column)
	{
		appendStringInfoString(sql, " AND ");
		sql_append_newer_wins(sql, "t", "d", newer_column, newer_ge);
	}
}

/*
 * The target's row count as the planner estimates it (pg_class.reltuples);
 * a partitioned target, whose partitions hold the rows, counts as
 * unbounded.
 */
static double
target_rows(TargetInfo *target)
{
	HeapTuple	tup;
	double		rows;

	if (target->relkind != RELKIND_RELATION)
		return DBL_MAX;
	tup = SearchSysCache1(RELOID, ObjectIdGetDatum(target->relid));
	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for relation %u", target->relid);
	rows = ((Form_pg_class) GETSTRUCT(tup))->reltuples;
	ReleaseSysCache(tup);
	return rows < 0 ? DBL_MAX : rows;
}

/*
 * Whether the plain INSERT of the absent rows failed as it may: on a key
 * another transaction inserted since the probe, found by one of the unique
 * indexes on the key columns.  A violation of another unique index, or of
 * a table a trigger writes, is the batch's error, raised at once: the
 * batch is not written a second time only to fail again.
 */
static bool
lost_key_race(TargetInfo *target, TargetKey *key, ErrorData *failure)
{
	Oid			nsp = get_rel_namespace(target->relid);
	Oid			index;

	if (failure->sqlerrcode != ERRCODE_UNIQUE_VIOLATION ||
		failure->schema_name == NULL || failure->table_name == NULL ||
		failure->constraint_name == NULL ||
		strcmp(failure->table_name, get_rel_name(target->relid)) != 0 ||
		strcmp(failure->schema_name, get_namespace_name(nsp)) != 0)
		return false;
	index = get_relname_relid(failure->constraint_name, nsp);
	for (int i = 0; i < key->narbiters; i++)
		if (key->arbiters[i] == index)
			return true;
	return false;
}

typedef struct MergeRun
{
	const char *sql;
	bool		cached;			/* through a plan kept for the session */
	int64		written;
	int64		inserted;
	int64		missed;			/* stored rows found but not updated */
} MergeRun;

/*
 * Batches of up to this many keys merge through a plan kept for the session
 * (sql_exec_cached): for them, parsing and planning the statement costs
 * more than running it.  The kept plan was made for a batch of that order
 * of size (a nested loop over the key index); larger batches are planned
 * for their own size.
 */
#define MERGE_CACHED_KEYS 1000

/*
 * Batches of fewer keys than this merge in one INSERT ... ON CONFLICT
 * (merge_batch): the larger statement that updates stored rows by tuple
 * identifier, and the savepoint that a plain INSERT of absent rows needs,
 * cost more to start than they save.  Measured on 1M rows, nearly every
 * row changed: 1-row calls 0.26 ms in one statement against 0.31 ms, 100
 * rows 0.92 against 0.91 ms, 1,000 rows 6.0 against 5.4 ms.  With 1,000
 * keys of which half are new, the plain INSERT takes 4.2 ms against 5.1 ms
 * with ON CONFLICT (MERGE: 3.3 ms).
 */
#define TWO_STATEMENT_KEYS 100

static void
run_merge(void *arg)
{
	MergeRun   *m = (MergeRun *) arg;

	if (m->cached)
		sql_exec_cached(m->sql);
	else
		sql_exec(m->sql);
	m->written = sql_result_int8(1);
	m->inserted = sql_result_int8(2);
	m->missed = SPI_tuptable->tupdesc->natts > 2 ? sql_result_int8(3) : 0;
}

/*
 * Write the rows that change something (append_delta), in key order, so
 * that overlapping concurrent batches lock in the same order and cannot
 * deadlock.  The writes' own WHERE repeats the newer_column rule for rows
 * that changed concurrently.
 *
 * On a plain table, in a batch of TWO_STATEMENT_KEYS keys or more, the rows
 * the probe found stored and the rows it found absent are written by two
 * statements of one query, in that order:
 *
 * - Stored rows are updated through the tuple identifier the probe found
 *   (append_update): no second descent of the key index and no separate
 *   row lock, which INSERT ... ON CONFLICT costs per row (a quarter of a
 *   100-row call).  This is only done where UPDATE and ON CONFLICT DO
 *   UPDATE do the same thing to a stored row: a table without triggers of
 *   its own (ON CONFLICT fires BEFORE INSERT triggers for updated rows too)
 *   or rules (ON CONFLICT refuses a table with rules; an UPDATE would be
 *   rewritten), and without row security applying to the caller (ON
 *   CONFLICT checks the INSERT policies too); and only while the probe is not merge-joined,
 *   which would make the updates come in the table's physical order rather
 *   than key order.  Elsewhere they go through INSERT ... ON CONFLICT.
 *   A row that another transaction updated or deleted since the probe read
 *   it is not updated (the identifier no longer names its current version);
 *   the rows so missed are written by the whole merge run again, which
 *   finds them afresh, with ON CONFLICT.
 * - Absent rows are written by a plain INSERT: a speculative insertion
 *   probes the index once more, takes a speculative-insertion lock and
 *   WAL-logs a confirmation, per row (a fifth of a 1,000-key merge).  A key
 *   inserted by another transaction since the probe makes it fail with a
 *   unique violation: then the whole merge is rolled back to a savepoint
 *   and done again with ON CONFLICT for every row.
 *
 * Smaller batches are written by one INSERT ... ON CONFLICT, as are
 * partitioned targets (their inserts are counted by xmin, see
 * count_partitioned_inserts, which a subtransaction would change).  Batches
 * of up to MERGE_CACHED_KEYS keys merge through kept plans.
 */
static void
merge_batch(TargetInfo *target, TargetKey *key, Stage *stage, KeyedBatch *batch,
			char **setcols, int nset, const char *newer_column,
			UpsertCounts *counts)
{
	StringInfoData sql;
	StringInfoData keys;
	MergeRun	m = {NULL, false, 0, 0, 0};
	int			nestlevel;
	CommandId	merge_cid;
	char	   *newer_ge = newer_column ?
		target_newer_ge(target_column(target, newer_column)) : NULL;
	bool		probe_merge_joined;
	bool		two_statements;
	bool		by_tid;
	bool		done = false;

	initStringInfo(&keys);
	sql_append_columns(&keys, NULL, key->names, key->ncolumns);

	/*
	 * Probe the key index once per batch row, as ON CONFLICT itself does,
	 * rather than hash the whole target: batches are usually much smaller
	 * than their targets.  A batch of half its target or more may instead be
	 * merge-joined with the target's key index read in key order, if the
	 * planner prefers, unless its plan is kept (the next batch may be as
	 * small as its target is large).  That holds for a batch already in key
	 * order too, which the merge join sorts again (the planner cannot know):
	 * 1M rows with 10% duplicates into 1M, 4.8 s probing, 4.4 s sorting and
	 * merging.  Never a hash join: its output, in batches beyond work_mem, is
	 * not in key order, which the writes rely on.  The settings revert when
	 * this level ends.
	 */
	m.cached = batch->nkeys <= MERGE_CACHED_KEYS;
	probe_merge_joined = !m.cached && batch->nkeys >= target_rows(target) / 2;
	nestlevel = NewGUCNestLevel();
	settings_save("enable_hashjoin", "off");
	if (!probe_merge_joined)
		settings_save("enable_mergejoin", "off");
	two_statements = target->relkind == RELKIND_RELATION &&
		batch->nkeys >= TWO_STATEMENT_KEYS;
	by_tid = two_statements && nset > 0 && !probe_merge_joined &&
		!target->has_triggers_or_rules &&
		check_enable_rls(target->relid, InvalidOid, true) != RLS_ENABLED;

	if (two_statements)
	{
		ErrorData  *failure;
		const char *tid = target_alias(target, "idem_tid");
		const char *inserted = "d.absent";
		const char *returned = "";

		initStringInfo(&sql);
		appendStringInfoString(&sql, "WITH idem_delta AS MATERIALIZED (");
		append_delta(&sql, target, key, stage, batch, keys.data, setcols, nset,
					 newer_column, newer_ge, tid);
		appendStringInfoString(&sql, "), idem_stored AS (");
		if (by_tid)
		{
			append_update(&sql, target, setcols, nset, newer_column, newer_ge, tid);
			appendStringInfoString(&sql, " RETURNING false AS idem_etl_inserted");
		}
		else
		{
			append_insert(&sql, target, stage, keys.data, setcols, nset, newer_column,
						  newer_ge, psprintf("%s IS NOT NULL", tid), false, true);
			appendStringInfoString(&sql, " RETURNING t.xmax OPERATOR(pg_catalog.=) '0'::pg_catalog.xid AS idem_etl_inserted");
		}
		appendStringInfoString(&sql, "), idem_new AS (");
		append_insert(&sql, target, stage, keys.data, setcols, nset, newer_column,
					  newer_ge, psprintf("%s IS NULL", tid), true, true);

		/*
		 * Every row of the plain INSERT is an inserted one (or the statement
		 * fails), so the absent rows of idem_delta count the inserts, in the
		 * scan that counts the stored ones.  The INSERT then returns nothing,
		 * which PostgreSQL would otherwise keep in a tuplestore for the count
		 * (up to work_mem, the rest in a temporary file: 3.4 MB of the peak
		 * memory of a 5,000,000-row first apply).  Not read by the main
		 * query, it runs to completion after it (ExecPostprocessPlan), so
		 * still after idem_stored.  A BEFORE INSERT trigger of the target's
		 * own may skip rows: then the rows it returns are counted.
		 */
		if (target->has_triggers_or_rules)
		{
			appendStringInfoString(&sql, " RETURNING 1");
			inserted = "i.n";
			returned = ", (SELECT pg_catalog.count(*)::pg_catalog.int8 AS n FROM idem_new) i";
		}
		appendStringInfo(&sql, ")"
						 " SELECT s.n OPERATOR(pg_catalog.+) %s, s.ins OPERATOR(pg_catalog.+) %s,"
						 " d.stored OPERATOR(pg_catalog.-) s.n"
						 " FROM (SELECT pg_catalog.count(*)::pg_catalog.int8 AS n,"
						 " pg_catalog.count(*) FILTER (WHERE idem_etl_inserted)::pg_catalog.int8 AS ins"
						 " FROM idem_stored) s,"
						 " (SELECT pg_catalog.count(*) FILTER (WHERE %s IS NOT NULL)::pg_catalog.int8 AS stored,"
						 " pg_catalog.count(*) FILTER (WHERE %s IS NULL)::pg_catalog.int8 AS absent"
						 " FROM idem_delta) d%s",
						 inserted, inserted, tid, tid, returned);
		m.sql = sql.data;
		failure = sql_try(run_merge, &m);
		if (failure == NULL)
			done = true;
		else if (!lost_key_race(target, key, failure))
			ReThrowError(failure);
		else
			FreeErrorData(failure);
	}
	if (!done || (by_tid && m.missed > 0))
	{
		MergeRun	rest = {NULL, m.cached, 0, 0, 0};

		initStringInfo(&sql);
		appendStringInfoString(&sql, "WITH idem_delta AS (");
		append_delta(&sql, target, key, stage, batch, keys.data, setcols, nset,
					 newer_column, newer_ge, NULL);
		appendStringInfoString(&sql, "), idem_written AS (");
		append_insert(&sql, target, stage, keys.data, setcols, nset, newer_column,
					  newer_ge, NULL, false, batch->in_key_order);
		append_outcome(&sql, target);
		merge_cid = GetCurrentCommandId(false);
		rest.sql = sql.data;
		run_merge(&rest);
		if (target->relkind != RELKIND_RELATION && rest.written > 0)
			rest.inserted = count_partitioned_inserts(target, key, batch, merge_cid);
		/* after a rollback to the savepoint, this is the whole merge */
		m.written = (done ? m.written : 0) + rest.written;
		m.inserted = (done ? m.inserted : 0) + rest.inserted;
	}
	AtEOXact_GUC(true, nestlevel);

	counts->inserted = m.inserted;
	counts->updated = m.written - m.inserted;
	counts->unchanged = batch->nkeys - m.written;
}

/* Delete the slice's rows whose key is not in the batch. */
static int64
delete_missing_rows(TargetInfo *target, TargetKey *key, KeyedBatch *batch,
					const char *condition)
{
	StringInfoData sql;
	const char *b = target_alias(target, "b");

	/*
	 * condition sees the target's columns, and the target by its name; the
	 * batch's alias is neither, so it hides nothing the condition names.
	 *
	 * NULLS NOT DISTINCT: a batch row without NULL in its key matches by
	 * equality alone, which can be hashed; only the few rows with one need
	 * the match that takes NULLs as equal, which cannot: they are set apart
	 * first (a scan of the whole batch per stored row took 20 s for 10,000
	 * rows).
	 */
	initStringInfo(&sql);
	if (key->nulls_not_distinct)
	{
		appendStringInfo(&sql, "WITH idem_etl_null_keys AS MATERIALIZED (SELECT * FROM %s %s WHERE false",
						 batch->name, b);
		for (int i = 0; i < key->ncolumns; i++)
			appendStringInfo(&sql, " OR %s.%s IS NULL", b, quote_identifier(key->names[i]));
		appendStringInfoString(&sql, ") ");
	}
	appendStringInfo(&sql, "DELETE FROM %s%s WHERE (%s\n) AND NOT EXISTS (SELECT 1 FROM %s %s WHERE ",
					 target_only(target), target->qualname, condition, batch->name, b);
	sql_append_key_match(&sql, quote_identifier(target->relname), b,
						 key->names, key->eqops, key->ncolumns, false);
	appendStringInfoChar(&sql, ')');
	if (key->nulls_not_distinct)
	{
		appendStringInfo(&sql, " AND NOT EXISTS (SELECT 1 FROM idem_etl_null_keys %s WHERE ", b);
		sql_append_key_match(&sql, quote_identifier(target->relname), b,
							 key->names, key->eqops, key->ncolumns, true);
		appendStringInfoChar(&sql, ')');
	}
	return (int64) sql_exec(sql.data);
}

static void
require_source_column(TargetInfo *target, Stage *stage, const char *name,
					  const char *role)
{
	if (!stage_has_column(stage, name))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("%s \"%s\" is missing from the source", role, name),
				 errdetail("The source query must return every key column, and newer_column, of relation \"%s\" by name.",
						   target->relname),
				 errhint("Add the column to the source query's select list.")));
}

Datum
etl_upsert_batch(PG_FUNCTION_ARGS)
{
	UpsertArgs	args;
	UpsertCounts counts = {0, 0, 0, 0};
	LedgerRun	run;
	TargetInfo *target;
	CitusTarget *ct;
	TargetKey  *key;
	Stage	   *stage;
	CitusBatch	cb;
	KeyedBatch	batch;
	char	  **setcols;
	int			nset;
	Datum		values[6];
	bool		nulls[6] = {false, false, false, false, false, false};
	StringInfoData changes;

	PreventCommandIfReadOnly("etl_upsert_batch()");
	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("target and source must not be NULL")));
	args.target = PG_GETARG_OID(0);
	args.source = args_text(fcinfo, 1);
	args.key_columns = args_name_list(fcinfo, 2, "key_columns");
	args.order_by = args_text(fcinfo, 3);
	args.newer_column = args_text(fcinfo, 4);
	args.delete_missing = args_text(fcinfo, 5);
	args.run_key = args_text(fcinfo, 6);
	args.update_columns = args_name_list(fcinfo, 7, "update_columns");
	args.exclude_columns = args_name_list(fcinfo, 8, "exclude_columns");
	args.expect = args_text(fcinfo, 9);
	args.allow_shrink = audit_allow_shrink(fcinfo, 10);
	args.on_schema_change = args_text(fcinfo, 11);
	ledger_check_length("run_key", args.run_key);

	memset(&run, 0, sizeof(run));
	run.started_at = GetCurrentTimestamp();
	run.operation = "upsert";
	run.run_key = args.run_key;

	SPI_connect();

	target = target_open(args.target, ACL_SELECT | ACL_INSERT, false);
	ct = citus_target_lookup(target, "etl_upsert_batch");
	initStringInfo(&changes);
	target = evolve_target(target, args.source, args.on_schema_change,
						   ACL_SELECT | ACL_INSERT, false, &changes);
	run.schema_changes = changes.len ? changes.data : NULL;
	progress_start("upsert", target->qualname, args.run_key);
	run.target = target->qualname;
	run.target_oid = target->relid;
	if (ct)
		citus_target_check_key(ct, target, args.key_columns);
	key = target_key(target, args.key_columns);
	if (args.order_by)
		sql_check_sort_list(args.order_by, "order_by");
	if (args.delete_missing)
		sql_check_expression(args.delete_missing, "delete_missing");
	audit_check_syntax(args.expect);
	if (args.newer_column && target_column(target, args.newer_column) == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("newer_column \"%s\" of relation \"%s\" does not exist",
						args.newer_column, target->relname),
				 errhint("Name the column as it is in the catalog, without quotes.")));

	stage = stage_plan(target, args.source, args.run_key != NULL);
	for (int i = 0; i < key->ncolumns; i++)
		require_source_column(target, stage, key->names[i], "key column");
	if (args.newer_column)
	{
		refuse_unwritable(target, args.newer_column, "newer_column");
		require_source_column(target, stage, args.newer_column, "newer_column");
	}
	setcols = update_set_columns(target, stage, key, &args, &nset);
	check_privileges(target, stage, setcols, nset, args.delete_missing != NULL);

	if (args.run_key)
		ledger_lock_key(target->relid, run.operation, args.run_key);
	progress_phase("staging", -1);
	/* expect audits the batch as the source produced it, copies included */
	stage_load(stage, target, key, args.expect == NULL, args.order_by);
	if (stage->ncollapsed > 0)
		ereport(DEBUG1,
				(errmsg_internal("staged %lld of the %lld rows of the batch for \"%s\"; the others could not win their key",
								 (long long) (stage->nrows - stage->ncollapsed),
								 (long long) stage->nrows, target->relname)));
	run.batch_rows = stage->nrows;
	/* audit before anything is written, a skip included */
	audit_expect(args.expect, stage->name, target->relname);
	run.expectation = args.expect;
	run.fingerprint = stage_batch_fingerprint(stage, fingerprint_options(target, key, stage, &args,
																		 setcols, nset));

	if (!args.run_key ||
		!ledger_skip_batch(&run, target->relname, "upsert into", &counts.unchanged))
	{
		progress_phase("checking keys", stage->nrows);
		batch = dedup_batch(target, key, stage, args.order_by);
		progress_phase("merging", batch.nkeys);
		if (ct)
		{
			/* on the shards (citus_upsert.c) */
			CitusMerged merged;

			citus_upsert_begin(&cb, ct, target, key, batch.copy ? batch.copy : stage->staged,
							   stage->columns, stage->ncolumns, batch.nkeys);
			merged = citus_upsert_merge(&cb, setcols, nset, args.newer_column);
			counts.inserted = merged.inserted;
			counts.updated = merged.written - merged.inserted;
			counts.unchanged = batch.nkeys - merged.written;
		}
		else
			merge_batch(target, key, stage, &batch, setcols, nset, args.newer_column, &counts);
		if (args.delete_missing)
		{
			progress_phase("deleting", -1);
			counts.deleted = ct ?
				citus_upsert_delete(&cb, args.delete_missing) :
				delete_missing_rows(target, key, &batch, args.delete_missing);
			/* the error undoes the delete, which counts what it removes */
			audit_empty(args.allow_shrink, stage->nrows, counts.deleted,
						target->relname, "the slice delete_missing covers");
		}
		if (ct)
			citus_upsert_end(&cb);
		if (batch.copy)
			stage_drop(batch.copy);
	}
	stage_end(stage);

	run.inserted = counts.inserted;
	run.updated = counts.updated;
	run.unchanged = counts.unchanged;
	run.deleted = counts.deleted;
	values[0] = Int64GetDatum(ledger_record(&run));
	values[1] = Int64GetDatum(counts.inserted);
	values[2] = Int64GetDatum(counts.updated);
	values[3] = Int64GetDatum(counts.unchanged);
	values[4] = Int64GetDatum(counts.deleted);
	values[5] = BoolGetDatum(run.skipped);

	progress_end();
	SPI_finish();
	return args_return_row(fcinfo, values, nulls);
}
