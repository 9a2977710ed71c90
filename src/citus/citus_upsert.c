/*
 * citus_upsert.c
 *		etl_upsert_batch's merge and delete on a Citus table, run on the
 *		shards.
 *
 * Citus can neither send an ephemeral named relation (the staged batch) to
 * the workers nor plan the local merge's row identifiers (ctid, xmin and
 * xmax mean nothing across the workers' transactions).  So the batch,
 * staged and checked on the coordinator as for any target, reaches the
 * shards in one of these ways:
 *
 * - inline: a batch of up to idem_etl.citus_inline_rows rows travels as the
 *   parameters of the merge's statements (citus_rows.c), with no table to
 *   create: a table's creation and drop on every shard is most of the cost
 *   of a small call.  For a larger batch, ranges of its keys are compared
 *   with the stored rows where the key allows it (by key ranges, below);
 *   else 1,000 of its rows are sampled on the shards; either chooses among
 *   the other ways;
 * - straight in: no key is stored (between the batch's keys, or of the
 *   sample: a first load, new keys only), so the batch goes into the
 *   target by one INSERT ... SELECT, merged instead should a key be stored
 *   after all;
 * - whole: the batch is copied into a table of its own that Citus places
 *   beside the target's shards: distributed on the same column and
 *   colocated with the target (the rows of a key land on the shard that
 *   holds the key), or a reference table for a reference target;
 * - by difference: when most sampled rows are stored as they are (most
 *   rows of the key ranges that differ are stored), only each row's key
 *   and a 128-bit hash of its image go to the shards (idem_etl.image_hash,
 *   compare.c), which answer with the keys whose row is missing or
 *   differs; only those rows then travel in full;
 * - by key ranges, for a key of one integer column with dense values: the
 *   batch's key ranges are compared with the stored rows by count and hash
 *   sums (citus_ranges.c), so an identical rerun sends no row; the rows of
 *   the ranges that differ then go straight in (none stored), by
 *   difference (most stored) or whole.
 *
 * From a table beside the shards, the merge is an UPDATE ... FROM and a
 * MERGE ... WHEN NOT MATCHED THEN INSERT (or INSERT ... ON CONFLICT), and
 * the delete one DELETE ... NOT EXISTS, each of which Citus pushes down:
 * every shard merges its own keys, and nothing of the target travels to the
 * coordinator.  The tables are dropped before the call returns, in its
 * transaction: a failure or a crash takes them away with the rest (Citus
 * commits the shards' writes with two-phase commit).
 *
 * The call's statements run in Citus's sequential mode (one connection per
 * worker) unless idem_etl.citus_parallel_shards is on: in parallel mode a
 * transaction that creates a table opens a connection per shard, and on the
 * two-CPU machine of the benchmark those connections cost more than they
 * bring (doc/performance.md).
 */
#include "postgres.h"

#include "compat.h"

#include "catalog/namespace.h"
#include "catalog/pg_namespace.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/ruleutils.h"

#include "citus/citus_ranges.h"
#include "citus/citus_upsert.h"
#include "util/settings.h"
#include "util/sql.h"

/* Rows of a large batch whose stored rows are looked up to choose the way */
#define SAMPLE_ROWS 1000

/* The most parameters a statement takes (the protocol's limit) */
#define MAX_PARAMS 65535

/*
 * The settings under which the stage tables are created and dropped, until
 * AtEOXact_GUC(true, <the level returned>):
 * - citus.enable_metadata_sync off: the table lives in this transaction
 *   only, and only the coordinator, which plans every statement that reads
 *   it, needs its metadata.  Citus creates and drops its shards on the
 *   workers either way; the workers' copies of the metadata, which Citus
 *   would otherwise write and remove again, cost twice what the shards do
 *   (with four shards: create_distributed_table 0.7 s against 0.23 s, DROP
 *   0.23 s against 0.09 s, on an assert-enabled build);
 * - client_min_messages warning: Citus's notices are not the caller's
 *   business.
 */
static int
stage_settings(void)
{
	int			nestlevel = NewGUCNestLevel();

	settings_save("citus.enable_metadata_sync", "off");
	settings_save("client_min_messages", "warning");
	return nestlevel;
}

/*
 * Start a batch's way to the shards: the role may create the tables the
 * way needs in the target's schema.  The call's settings, until
 * citus_upsert_end: Citus's sequential mode (see above), and values printed
 * in one style and floats exactly (settings_canonical_output), since Citus
 * sends parameters and copied rows to the workers as text.
 */
void
citus_upsert_begin(CitusBatch *cb, CitusTarget *ct, TargetInfo *target,
				   TargetKey *key, StagedRel *staged, char **columns,
				   int ncolumns, int64 nkeys)
{
	Oid			nsp = get_rel_namespace(target->relid);
	char	   *nspname = get_namespace_name(nsp);

	/*
	 * Whatever the size of the batch, so that a load that works with a few
	 * rows does not fail when it grows.
	 */
	if (object_aclcheck(NamespaceRelationId, nsp, GetUserId(), ACL_CREATE) != ACLCHECK_OK)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for schema %s", nspname),
				 errdetail("etl_upsert_batch stages the batch for Citus table \"%s\" in a table of the target's schema, which the call creates and drops.",
						   target->relname),
				 errhint("Grant CREATE on schema %s to the role that loads.",
						 quote_identifier(nspname))));

	memset(cb, 0, sizeof(*cb));
	cb->ct = ct;
	cb->target = target;
	cb->key = key;
	cb->staged = staged;
	cb->columns = columns;
	cb->ncolumns = ncolumns;
	cb->nkeys = nkeys;
	cb->nestlevel = settings_canonical_output();
	cb->parallel = idem_citus_parallel_shards;
	if (!cb->parallel)
		settings_save("citus.multi_shard_modify_mode", "sequential");
	citus_rows_publish(staged);
}

/* A new table's name in the target's schema, quoted and qualified */
static char *
table_name(CitusBatch *cb, const char *what)
{
	static uint32 serial = 0;

	return quote_qualified_identifier(get_namespace_name(get_rel_namespace(cb->target->relid)),
									  psprintf("idem_etl_%s_%d_%u", what, MyProcPid, ++serial));
}

/* Where the batch's columns named names are in it (0-based) */
int *
citus_batch_atts(CitusBatch *cb, char **names, int n)
{
	int		   *atts = palloc(sizeof(int) * n);

	for (int i = 0; i < n; i++)
	{
		atts[i] = -1;
		for (int a = 0; a < cb->ncolumns; a++)
			if (strcmp(cb->columns[a], names[i]) == 0)
				atts[i] = a;
		Assert(atts[i] >= 0);
	}
	return atts;
}

/* "VALUES (...) AS alias(c1, ...)" of the read rows' columns names */
static void
append_values(StringInfo sql, CitusBatch *cb, CitusRows *rows, char **names,
			  int n, const char *alias, CitusParams *params)
{
	citus_rows_append_values(sql, rows, citus_batch_atts(cb, names, n), n, false, params);
	appendStringInfo(sql, " AS %s(", alias);
	sql_append_columns(sql, NULL, names, n);
	appendStringInfoChar(sql, ')');
}

/* A statement and the rows it processed, for sql_try */
typedef struct Counted
{
	const char *sql;
	uint64		rows;
} Counted;

static void
exec_counted(void *arg)
{
	Counted    *c = (Counted *) arg;

	c->rows = sql_exec(c->sql);
}

/* "'{1,2}'::pg_catalog.int2[]": where the columns names are in the batch */
static void
append_attnums(StringInfo sql, CitusBatch *cb, char **names, int n)
{
	int		   *atts = citus_batch_atts(cb, names, n);

	appendStringInfoString(sql, "'{");
	for (int i = 0; i < n; i++)
		appendStringInfo(sql, "%s%d", i ? "," : "", atts[i] + 1);
	appendStringInfoString(sql, "}'::pg_catalog.int2[]");
}

/* "name type [COLLATE c]" of the batch's column att (0-based) */
static void
append_column_definition(StringInfo sql, CitusBatch *cb, int att)
{
	Form_pg_attribute a = TupleDescAttr(cb->staged->desc, att);

	appendStringInfo(sql, "%s %s", quote_identifier(cb->columns[att]),
					 format_type_with_typemod(a->atttypid, a->atttypmod));
	if (OidIsValid(a->attcollation) && a->attcollation != get_typcollation(a->atttypid))
		appendStringInfo(sql, " COLLATE %s", generate_collation_name(a->attcollation));
}

/*
 * "SELECT * FROM idem_etl.citus_batch(...) AS b(...)": the batch's columns
 * names, and with nhash > 0 the hash of the columns hashcols as hash, read
 * from the staged batch on the coordinator (citus_rows.c).
 */
static void
append_batch_select(StringInfo sql, CitusBatch *cb, const char *b, char **names,
					int n, char **hashcols, int nhash, const char *hash)
{
	int		   *atts = citus_batch_atts(cb, names, n);

	appendStringInfoString(sql, "SELECT * FROM idem_etl.citus_batch(");
	append_attnums(sql, cb, names, n);
	appendStringInfoString(sql, ", ");
	append_attnums(sql, cb, hashcols, nhash);
	appendStringInfo(sql, ") AS %s(", b);
	for (int i = 0; i < n; i++)
	{
		if (i)
			appendStringInfoString(sql, ", ");
		append_column_definition(sql, cb, atts[i]);
	}
	if (nhash > 0)
		appendStringInfo(sql, ", %s pg_catalog.uuid", hash);
	appendStringInfoChar(sql, ')');
}

/*
 * A table beside the target's shards with the rows of select, a query run
 * on the coordinator over idem_etl.citus_batch(): created empty with
 * select's columns and placed, then filled by INSERT ... SELECT, which
 * Citus runs on the coordinator, copying each row to its shard (faster
 * than distributing a table that has the rows: 1.7 s against 2.4 s for
 * 1,000,000 rows).  Returns its qualified name.
 */
static char *
stage_table(CitusBatch *cb, const char *what, const char *select)
{
	TargetInfo *target = cb->target;
	char	   *placed;
	StringInfoData sql;
	int			nestlevel;

	placed = table_name(cb, what);
	nestlevel = stage_settings();
	initStringInfo(&sql);
	appendStringInfo(&sql, "CREATE UNLOGGED TABLE %s AS %s WITH NO DATA", placed, select);
	sql_exec(sql.data);
	resetStringInfo(&sql);
	if (cb->ct->kind == CITUS_DISTRIBUTED)
		appendStringInfo(&sql, "SELECT pg_catalog.create_distributed_table(%s::pg_catalog.regclass, %s,"
						 " colocate_with => %s)",
						 quote_literal_cstr(placed),
						 cb->ct->dist_column ? quote_literal_cstr(cb->ct->dist_column) : "NULL::pg_catalog.text",
						 quote_literal_cstr(target->qualname));
	else
		appendStringInfo(&sql, "SELECT pg_catalog.create_reference_table(%s::pg_catalog.regclass)",
						 quote_literal_cstr(placed));
	if (!cb->parallel)
	{
		/*
		 * Citus refuses to create a table in sequential mode once a statement
		 * of the transaction ran a query in parallel (the caller's, before
		 * the call, or the source's): then the call goes on in parallel mode,
		 * as Citus would by default.
		 */
		Counted		place = {sql.data, 0};
		ErrorData  *failure = sql_try(exec_counted, &place);

		if (failure != NULL)
		{
			AtEOXact_GUC(true, nestlevel);
			ereport(DEBUG1,
					(errmsg_internal("placing %s in Citus's sequential mode failed (%s); going on in parallel mode",
									 placed, failure->message)));
			FreeErrorData(failure);
			settings_save("citus.multi_shard_modify_mode", "parallel");
			cb->parallel = true;
			nestlevel = stage_settings();
			sql_exec(sql.data);
		}
	}
	else
		sql_exec(sql.data);
	cb->tables = lappend(cb->tables, placed);
	AtEOXact_GUC(true, nestlevel);

	sql_exec(psprintf("INSERT INTO %s %s", placed, select));
	return placed;
}

/* "NOT idem_etl.same_image(a.c1, b.c1, ...)": the columns differ */
static void
append_differs(StringInfo sql, const char *a, const char *b, char **setcols, int nset)
{
	appendStringInfoString(sql, "NOT idem_etl.same_image(");
	for (int i = 0; i < nset; i++)
	{
		const char *col = quote_identifier(setcols[i]);

		appendStringInfo(sql, "%s%s.%s, %s.%s", i ? ", " : "", a, col, b, col);
	}
	appendStringInfoChar(sql, ')');
}

/* "idem_etl.image_hash(a.c1, a.c2, ...)" */
static void
append_hash(StringInfo sql, const char *a, char **setcols, int nset)
{
	appendStringInfoString(sql, "idem_etl.image_hash(");
	sql_append_columns(sql, a, setcols, nset);
	appendStringInfoChar(sql, ')');
}

/* "SET c1 = b.c1, ..." of an update from b */
static void
append_set(StringInfo sql, const char *b, char **setcols, int nset)
{
	appendStringInfoString(sql, " SET ");
	for (int i = 0; i < nset; i++)
	{
		const char *col = quote_identifier(setcols[i]);

		appendStringInfo(sql, "%s%s = %s.%s", i ? ", " : "", col, b, col);
	}
}

/* " WHERE [<b newer> AND] <differs>" of ON CONFLICT DO UPDATE */
static void
append_conflict_update(StringInfo sql, char **setcols, int nset,
					   const char *newer_column, const char *ge)
{
	if (nset == 0)
	{
		appendStringInfoString(sql, "DO NOTHING");
		return;
	}
	appendStringInfoString(sql, "DO UPDATE");
	append_set(sql, "EXCLUDED", setcols, nset);
	appendStringInfoString(sql, " WHERE ");
	if (newer_column)
	{
		sql_append_newer_wins(sql, "t", "EXCLUDED", newer_column, ge);
		appendStringInfoString(sql, " AND ");
	}
	append_differs(sql, "t", "EXCLUDED", setcols, nset);
}

/*
 * The UPDATE of the stored rows whose columns differ (binary image) from
 * their batch row in from (a table or a VALUES list, as b), and, with
 * newer_column, are not newer than it.
 */
static void
append_update(StringInfo sql, CitusBatch *cb, const char *from, const char *b,
			  char **setcols, int nset, const char *newer_column, const char *ge)
{
	TargetKey  *key = cb->key;

	appendStringInfo(sql, "UPDATE %s AS t", cb->target->qualname);
	append_set(sql, b, setcols, nset);
	appendStringInfo(sql, " FROM %s WHERE ", from);
	sql_append_key_match(sql, "t", b, key->names, key->eqops, key->ncolumns,
						 key->nulls_not_distinct);
	appendStringInfoString(sql, " AND ");
	append_differs(sql, "t", b, setcols, nset);
	if (newer_column)
	{
		appendStringInfoString(sql, " AND ");
		sql_append_newer_wins(sql, "t", b, newer_column, ge);
	}
}

/*
 * Merge the batch from a table beside the shards, in two statements that
 * Citus pushes down to every shard, each counted by its row count alone (so
 * no row travels back to the coordinator):
 * - UPDATE ... FROM the table (append_update);
 * - the batch rows whose key is not stored: on a hash-distributed table a
 *   MERGE ... WHEN NOT MATCHED THEN INSERT, whose plain inserts cost half
 *   what ON CONFLICT's speculative ones do (1,000,000 rows: 1.0 to 1.2 s
 *   against 1.9 s); when another transaction inserts one of the keys meanwhile
 *   (23505), or where Citus takes no MERGE (reference and single-shard
 *   tables) or the key's NULLs match, INSERT ... SELECT ... WHERE NOT EXISTS
 *   ... ON CONFLICT, which counts such a key as inserted (the inexactness
 *   the counts of a local target have under concurrent writes of the same
 *   keys).
 * Unchanged rows are dropped by the joins on the shards, so an identical
 * rerun writes and locks nothing.  Counting by RETURNING (xmax 0 on the
 * shard) would bring a boolean per written row to the coordinator: 2.8 s
 * of a 5.0 s first apply of 1,000,000 rows in 32 shards; and PostgreSQL
 * 15 refuses system columns in RETURNING on a partitioned table.
 */
static CitusMerged
merge_from_table(CitusBatch *cb, const char *table, char **setcols, int nset,
				 const char *newer_column, const char *ge)
{
	TargetInfo *target = cb->target;
	TargetKey  *key = cb->key;
	StringInfoData sql;
	const char *b = target_alias(target, "b");
	const char *o = target_alias(target, "o");
	CitusMerged merged = {0, 0};
	bool		inserted = false;

	initStringInfo(&sql);
	if (nset > 0)
	{
		append_update(&sql, cb, psprintf("%s %s", table, b), b, setcols, nset,
					  newer_column, ge);
		merged.written = (int64) sql_exec(sql.data);
		resetStringInfo(&sql);
	}

	if (cb->ct->kind == CITUS_DISTRIBUTED && cb->ct->dist_column != NULL &&
		!key->nulls_not_distinct)
	{
		Counted		merge;
		ErrorData  *failure;

		appendStringInfo(&sql, "MERGE INTO %s AS t USING %s %s ON ", target->qualname, table, b);
		sql_append_key_match(&sql, "t", b, key->names, key->eqops, key->ncolumns, false);
		appendStringInfoString(&sql, " WHEN NOT MATCHED THEN INSERT (");
		sql_append_columns(&sql, NULL, cb->columns, cb->ncolumns);
		appendStringInfoString(&sql, ") VALUES (");
		sql_append_columns(&sql, b, cb->columns, cb->ncolumns);
		appendStringInfoChar(&sql, ')');
		merge.sql = sql.data;
		failure = sql_try(exec_counted, &merge);
		if (failure == NULL)
		{
			merged.inserted = (int64) merge.rows;
			inserted = true;
		}
		else if (failure->sqlerrcode == ERRCODE_UNIQUE_VIOLATION)
			FreeErrorData(failure);
		else
			ReThrowError(failure);
		resetStringInfo(&sql);
	}

	if (!inserted)
	{
		appendStringInfo(&sql, "INSERT INTO %s AS t (", target->qualname);
		sql_append_columns(&sql, NULL, cb->columns, cb->ncolumns);
		appendStringInfoString(&sql, ") SELECT ");
		sql_append_columns(&sql, b, cb->columns, cb->ncolumns);
		appendStringInfo(&sql, " FROM %s %s WHERE NOT EXISTS (SELECT 1 FROM %s %s WHERE ",
						 table, b, target->qualname, o);
		sql_append_key_match(&sql, o, b, key->names, key->eqops, key->ncolumns,
							 key->nulls_not_distinct);
		appendStringInfoString(&sql, ") ON CONFLICT (");
		sql_append_columns(&sql, NULL, key->names, key->ncolumns);
		appendStringInfoString(&sql, ") ");
		append_conflict_update(&sql, setcols, nset, newer_column, ge);
		merged.inserted = (int64) sql_exec(sql.data);
	}
	merged.written += merged.inserted;
	return merged;
}

/*
 * The same merge with the rows as parameters.  First the batch's keys that
 * are stored: ON CONFLICT DO UPDATE locks the stored row even when its
 * WHERE then says there is nothing to change, so an INSERT of the whole
 * batch would lock (and so write) every stored row of an identical rerun.
 * Then the UPDATE from a VALUES list of the stored keys' rows, and an
 * INSERT ... VALUES of the others, whose rows Citus routes each to its
 * shard, with the same ON CONFLICT for a key another transaction inserts
 * meanwhile.
 */
static CitusMerged
merge_inline(CitusBatch *cb, char **setcols, int nset, const char *newer_column,
			 const char *ge)
{
	TargetInfo *target = cb->target;
	TargetKey  *key = cb->key;
	StringInfoData sql;
	StringInfoData from;
	const char *b = target_alias(target, "b");
	const char *n = target_alias(target, "idem_etl_row");
	CitusMerged merged = {0, 0};
	CitusParams params = {0};
	CitusRows	stored = cb->rows;
	CitusRows	absent = cb->rows;
	bool	   *is_stored = palloc0(sizeof(bool) * cb->rows.nrows);

	initStringInfo(&sql);
	appendStringInfo(&sql, "SELECT %s.%s FROM %s AS t JOIN ", b, n, target->qualname);
	citus_rows_append_values(&sql, &cb->rows, citus_batch_atts(cb, key->names, key->ncolumns),
							 key->ncolumns, true, &params);
	appendStringInfo(&sql, " AS %s(%s, ", b, n);
	sql_append_columns(&sql, NULL, key->names, key->ncolumns);
	appendStringInfoString(&sql, ") ON ");
	sql_append_key_match(&sql, "t", b, key->names, key->eqops, key->ncolumns,
						 key->nulls_not_distinct);
	(void) citus_rows_exec(sql.data, &params);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		bool		isnull;
		int32		row = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[i],
													  SPI_tuptable->tupdesc, 1, &isnull));

		if (isnull || row < 0 || row >= cb->rows.nrows)
			elog(ERROR, "the shards answered with no row %d of the batch", row);
		is_stored[row] = true;
	}
	stored.rows = palloc(sizeof(HeapTuple) * Max(cb->rows.nrows, 1));
	absent.rows = palloc(sizeof(HeapTuple) * Max(cb->rows.nrows, 1));
	stored.nrows = absent.nrows = 0;
	for (int r = 0; r < cb->rows.nrows; r++)
	{
		if (is_stored[r])
			stored.rows[stored.nrows++] = cb->rows.rows[r];
		else
			absent.rows[absent.nrows++] = cb->rows.rows[r];
	}

	if (nset > 0 && stored.nrows > 0)
	{
		memset(&params, 0, sizeof(params));
		resetStringInfo(&sql);
		initStringInfo(&from);
		append_values(&from, cb, &stored, cb->columns, cb->ncolumns, b, &params);
		append_update(&sql, cb, from.data, b, setcols, nset, newer_column, ge);
		merged.written = (int64) citus_rows_exec(sql.data, &params);
	}

	if (absent.nrows > 0)
	{
		memset(&params, 0, sizeof(params));
		resetStringInfo(&sql);
		appendStringInfo(&sql, "INSERT INTO %s AS t (", target->qualname);
		sql_append_columns(&sql, NULL, cb->columns, cb->ncolumns);
		appendStringInfoString(&sql, ") ");
		/* "(VALUES ...)" less its parentheses */
		initStringInfo(&from);
		citus_rows_append_values(&from, &absent, citus_batch_atts(cb, cb->columns, cb->ncolumns),
								 cb->ncolumns, false, &params);
		appendBinaryStringInfo(&sql, from.data + 1, from.len - 2);
		appendStringInfoString(&sql, " ON CONFLICT (");
		sql_append_columns(&sql, NULL, key->names, key->ncolumns);
		appendStringInfoString(&sql, ") ");
		append_conflict_update(&sql, setcols, nset, newer_column, ge);
		merged.inserted = (int64) citus_rows_exec(sql.data, &params);
		merged.written += merged.inserted;
	}
	pfree(stored.rows);
	pfree(absent.rows);
	return merged;
}

/* What a sample of the batch found on the shards */
typedef enum BatchWay
{
	WAY_NEW,					/* no sampled key is stored */
	WAY_WHOLE,					/* at most half the sampled rows are stored as
								 * they are */
	WAY_DIFFERENCE				/* most are */
} BatchWay;

/*
 * How a large batch whose key ranges cannot be compared should travel: one
 * row in every nkeys / SAMPLE_ROWS is looked up on the shards.  Sending keys and hashes first pays when most
 * rows then need not travel, and costs a third more when most must
 * (doc/performance.md).  Whole for a sample wider than work_mem.
 */
static BatchWay
sample_batch(CitusBatch *cb, char **setcols, int nset)
{
	TargetKey  *key = cb->key;
	CitusRows	sample;
	CitusParams params = {0};
	StringInfoData sql;
	const char *s = target_alias(cb->target, "s");
	int64		every = (cb->nkeys + SAMPLE_ROWS - 1) / SAMPLE_ROWS;
	int64		keys;
	int64		same;
	int			nrows;

	if ((int64) cb->ncolumns * SAMPLE_ROWS > MAX_PARAMS ||
		!citus_rows_read(cb->staged, every, SAMPLE_ROWS, (Size) work_mem * 1024, &sample))
		return WAY_WHOLE;
	initStringInfo(&sql);
	appendStringInfoString(&sql, "SELECT pg_catalog.count(*)::pg_catalog.int8, pg_catalog.count(*) FILTER (WHERE ");
	if (nset > 0)
		append_differs(&sql, "t", s, setcols, nset);
	else
		appendStringInfoString(&sql, "false");
	appendStringInfo(&sql, ")::pg_catalog.int8 FROM %s AS t JOIN ", cb->target->qualname);
	append_values(&sql, cb, &sample, cb->columns, cb->ncolumns, s, &params);
	appendStringInfoString(&sql, " ON ");
	sql_append_key_match(&sql, "t", s, key->names, key->eqops, key->ncolumns,
						 key->nulls_not_distinct);
	(void) citus_rows_exec(sql.data, &params);
	keys = sql_result_int8(1);
	same = keys - sql_result_int8(2);
	nrows = sample.nrows;
	citus_rows_free(&sample);
	ereport(DEBUG1,
			(errmsg_internal("%lld of a sample of %d rows of the batch for \"%s\" are stored as they are, %lld keys stored",
							 (long long) same, nrows, cb->target->relname, (long long) keys)));
	if (keys == 0)
		return WAY_NEW;
	return same * 2 > nrows ? WAY_DIFFERENCE : WAY_WHOLE;
}

/*
 * When no sampled key is stored (a first load, new keys only): the batch
 * straight into the target by INSERT ... SELECT, which Citus copies to the
 * target's shards, with no table beside them and no merge.  In a
 * subtransaction: if a key is stored after all, nothing of it is left and
 * the caller merges (false).  Citus reports the shards' errors in a COPY
 * without their SQLSTATE, so any error but a cancel sends the batch to the
 * merge: one that is not about a stored key comes again from the merge.
 */
static bool
insert_new(CitusBatch *cb, CitusMerged *merged)
{
	StringInfoData sql;
	Counted		insert;
	ErrorData  *failure;

	initStringInfo(&sql);
	appendStringInfo(&sql, "INSERT INTO %s (", cb->target->qualname);
	sql_append_columns(&sql, NULL, cb->columns, cb->ncolumns);
	appendStringInfoString(&sql, ") ");
	append_batch_select(&sql, cb, target_alias(cb->target, "b"), cb->columns, cb->ncolumns,
						NULL, 0, NULL);
	insert.sql = sql.data;
	failure = sql_try(exec_counted, &insert);
	if (failure == NULL)
	{
		merged->inserted = merged->written = (int64) insert.rows;
		return true;
	}
	ereport(DEBUG1,
			(errmsg_internal("the batch for \"%s\" could not go straight in (%s); merging",
							 cb->target->relname, failure->message)));
	FreeErrorData(failure);
	return false;
}

/*
 * The keys of the batch whose row is not stored as it is, by difference:
 * a table beside the shards with each row's key (and newer_column) and the
 * hash of the columns to set; the shards' answer, the keys whose stored row
 * is missing or hashes otherwise (and, with newer_column, is not newer), in
 * a local table.  Only of the rows for which condition (over alias b)
 * holds, when not NULL.  Returns that table's name, and its number of rows.
 */
static char *
changed_keys(CitusBatch *cb, char **setcols, int nset, const char *newer_column,
			 const char *ge, const char *condition, int64 *nchanged)
{
	TargetInfo *target = cb->target;
	TargetKey  *key = cb->key;
	StringInfoData sql;
	const char *b = target_alias(target, "b");
	const char *h = target_alias(target, "idem_etl_hash");
	const char *t = target_alias(target, "t");
	bool		newer_extra = newer_column != NULL;
	char	  **names;
	char	   *keys;
	char	   *changed;

	for (int i = 0; i < key->ncolumns && newer_extra; i++)
		newer_extra = strcmp(key->names[i], newer_column) != 0;

	names = palloc(sizeof(char *) * (key->ncolumns + 1));
	memcpy(names, key->names, sizeof(char *) * key->ncolumns);
	if (newer_extra)
		names[key->ncolumns] = (char *) newer_column;
	initStringInfo(&sql);
	append_batch_select(&sql, cb, b, names, key->ncolumns + (newer_extra ? 1 : 0),
						setcols, nset, h);
	if (condition)
		appendStringInfo(&sql, " WHERE %s", condition);
	keys = stage_table(cb, "keys", sql.data);
	/* the delete needs all the keys */
	if (condition == NULL)
		cb->keys_table = keys;

	changed = table_name(cb, "changed");
	resetStringInfo(&sql);
	appendStringInfo(&sql, "CREATE UNLOGGED TABLE %s AS SELECT ", changed);
	sql_append_columns(&sql, b, key->names, key->ncolumns);
	appendStringInfo(&sql, " FROM %s %s WHERE NOT EXISTS (SELECT 1 FROM %s %s WHERE ",
					 keys, b, target->qualname, t);
	sql_append_key_match(&sql, t, b, key->names, key->eqops, key->ncolumns,
						 key->nulls_not_distinct);
	if (nset > 0 || newer_column)
	{
		appendStringInfoString(&sql, " AND (");
		if (nset > 0)
		{
			append_hash(&sql, t, setcols, nset);
			appendStringInfo(&sql, " OPERATOR(pg_catalog.=) %s.%s", b, h);
		}
		else
			appendStringInfoString(&sql, "false");
		if (newer_column)
		{
			appendStringInfoString(&sql, " OR NOT ");
			sql_append_newer_wins(&sql, t, b, newer_column, ge);
		}
		appendStringInfoChar(&sql, ')');
	}
	appendStringInfoChar(&sql, ')');
	*nchanged = (int64) sql_exec(sql.data);
	cb->tables = lappend(cb->tables, changed);
	return changed;
}

/*
 * Merge the batch into the target on its shards (see the file's comment);
 * the caller drops what it created with citus_upsert_end.
 */
CitusMerged
citus_upsert_merge(CitusBatch *cb, char **setcols, int nset, const char *newer_column)
{
	TargetInfo *target = cb->target;
	TargetKey  *key = cb->key;
	char	   *ge = newer_column ?
		target_newer_ge(target_column(target, newer_column)) : NULL;
	const char *b = target_alias(target, "b");
	const char *c = target_alias(target, "c");
	CitusMerged none = {0, 0};
	StringInfoData sql;
	CitusRanges ranges = {0};
	char	   *changed;
	int64		nchanged;
	BatchWay	way;

	if (cb->nkeys == 0)
		return none;
	if (cb->nkeys <= idem_citus_inline_rows &&
		cb->nkeys * cb->ncolumns <= MAX_PARAMS &&
		citus_rows_read(cb->staged, 1, idem_citus_inline_rows, (Size) work_mem * 1024,
						&cb->rows))
		return merge_inline(cb, setcols, nset, newer_column, ge);

	/*
	 * Where the key ranges can be compared, they tell exactly what a sample
	 * guesses: no key stored, all stored as they are (done), or which ranges'
	 * rows must go on, and whether most of those are stored.
	 */
	if (citus_ranges_compare(cb, setcols, nset, b, &ranges))
	{
		if (ranges.differ == NULL)
			return none;
		if (ranges.stored == 0)
			way = WAY_NEW;
		else
			way = ranges.differ_stored * 2 > ranges.differ_rows ? WAY_DIFFERENCE : WAY_WHOLE;
	}
	else
		way = sample_batch(cb, setcols, nset);

	initStringInfo(&sql);
	if (way == WAY_NEW)
	{
		CitusMerged inserted = {0, 0};

		if (insert_new(cb, &inserted))
			return inserted;
		way = WAY_WHOLE;
	}
	if (way == WAY_WHOLE)
	{
		char	   *table;

		append_batch_select(&sql, cb, b, cb->columns, cb->ncolumns, NULL, 0, NULL);
		if (ranges.differ)
			appendStringInfo(&sql, " WHERE %s", ranges.differ);
		table = stage_table(cb, "batch", sql.data);
		/* the delete needs all the keys */
		if (ranges.differ == NULL)
			cb->keys_table = table;
		return merge_from_table(cb, table, setcols, nset, newer_column, ge);
	}

	changed = changed_keys(cb, setcols, nset, newer_column, ge, ranges.differ, &nchanged);
	ereport(DEBUG1,
			(errmsg_internal("%lld of the %lld rows of the batch for \"%s\" are not stored as they are",
							 (long long) nchanged, (long long) cb->nkeys, target->relname)));
	if (nchanged == 0)
		return none;
	append_batch_select(&sql, cb, b, cb->columns, cb->ncolumns, NULL, 0, NULL);
	appendStringInfo(&sql, " WHERE EXISTS (SELECT 1 FROM %s %s WHERE ", changed, c);
	sql_append_key_match(&sql, c, b, key->names, key->eqops, key->ncolumns,
						 key->nulls_not_distinct);
	appendStringInfoChar(&sql, ')');
	return merge_from_table(cb, stage_table(cb, "batch", sql.data), setcols, nset,
							newer_column, ge);
}

/*
 * Delete the rows of the slice (condition, over the target's columns)
 * whose key is not in the batch: one DELETE that each shard runs against
 * its own part of the batch's keys.
 */
int64
citus_upsert_delete(CitusBatch *cb, const char *condition)
{
	TargetInfo *target = cb->target;
	TargetKey  *key = cb->key;
	StringInfoData sql;
	const char *b = target_alias(target, "b");
	CitusParams params = {0};

	initStringInfo(&sql);
	appendStringInfo(&sql, "DELETE FROM %s WHERE (%s\n)", target->qualname, condition);
	if (cb->nkeys == 0)
		return (int64) sql_exec(sql.data);
	appendStringInfoString(&sql, " AND NOT EXISTS (SELECT 1 FROM ");
	if (cb->keys_table == NULL && cb->rows.rows == NULL)
	{
		/* the batch went straight into the target (insert_new) */
		StringInfoData keys;

		initStringInfo(&keys);
		append_batch_select(&keys, cb, b, key->names, key->ncolumns, NULL, 0, NULL);
		cb->keys_table = stage_table(cb, "keys", keys.data);
	}
	if (cb->keys_table)
		appendStringInfo(&sql, "%s %s", cb->keys_table, b);
	else
		append_values(&sql, cb, &cb->rows, key->names, key->ncolumns, b, &params);
	appendStringInfoString(&sql, " WHERE ");
	sql_append_key_match(&sql, quote_identifier(target->relname), b,
						 key->names, key->eqops, key->ncolumns, key->nulls_not_distinct);
	appendStringInfoChar(&sql, ')');
	return (int64) citus_rows_exec(sql.data, &params);
}

/*
 * Drop the tables the call created (Citus drops their shards, in this
 * transaction) and restore the settings.
 */
void
citus_upsert_end(CitusBatch *cb)
{
	ListCell   *lc;
	int			nestlevel = stage_settings();

	foreach(lc, cb->tables)
		sql_exec(psprintf("DROP TABLE %s", (char *) lfirst(lc)));
	AtEOXact_GUC(true, nestlevel);
	if (cb->rows.rows)
		citus_rows_free(&cb->rows);
	citus_rows_unpublish(cb->staged);
	AtEOXact_GUC(true, cb->nestlevel);
}
