/*
 * sql.c
 *		Building the SQL that idem_etl runs, and running it through SPI as
 *		exactly one statement.
 *
 * Some arguments (the source query, order_by, delete_missing) are SQL text
 * that ends up inside statements the extension builds.  Each is parsed on its
 * own first and must be exactly the kind of thing it claims to be, so that it
 * cannot close a parenthesis, end a statement or add a clause; the statement
 * built around it is then checked again to be a single one before it runs.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/pg_operator.h"
#include "common/hashfn.h"
#include "nodes/parsenodes.h"
#include "parser/parser.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/syscache.h"

#include "util/settings.h"
#include "util/sql.h"

/*
 * A syntax error's position refers to the argument's text, not to the
 * caller's statement: report it as an internal query, as SPI does.
 */
static void
parse_error_callback(void *arg)
{
	const char *sql = (const char *) arg;
	int			pos = geterrposition();

	if (pos > 0)
	{
		errposition(0);
		internalerrposition(pos);
		internalerrquery(sql);
	}
}

List *
sql_parse(const char *sql)
{
	ErrorContextCallback errcallback;
	List	   *stmts;

	errcallback.callback = parse_error_callback;
	errcallback.arg = (void *) sql;
	errcallback.previous = error_context_stack;
	error_context_stack = &errcallback;
	stmts = raw_parser(sql, RAW_PARSE_DEFAULT);
	error_context_stack = errcallback.previous;
	return stmts;
}

/*
 * Parse "prefix fragment" and return the SelectStmt it makes, or NULL when it
 * is not one single SELECT.  The newline ends a trailing "--" comment.
 */
static SelectStmt *
parse_wrapped(const char *prefix, const char *fragment)
{
	List	   *stmts;
	Node	   *stmt;

	stmts = sql_parse(psprintf("%s%s\n", prefix, fragment));
	if (list_length(stmts) != 1)
		return NULL;
	stmt = linitial_node(RawStmt, stmts)->stmt;
	if (!IsA(stmt, SelectStmt))
		return NULL;
	return (SelectStmt *) stmt;
}

static void
not_single(const char *argname, const char *what, const char *hint)
{
	ereport(ERROR,
			(errcode(ERRCODE_SYNTAX_ERROR),
			 errmsg("%s must be %s", argname, what),
			 errdetail("It is embedded in statements that idem_etl builds, so it may not contain a semicolon or clauses of its own."),
			 errhint("%s", hint)));
}

/* No FOR UPDATE/SHARE and no INSERT, UPDATE or DELETE in a WITH clause. */
static bool
select_is_read_only(SelectStmt *s)
{
	ListCell   *lc;

	if (s == NULL)
		return true;
	if (s->lockingClause != NIL)
		return false;
	if (s->withClause)
		foreach(lc, s->withClause->ctes)
	{
		Node	   *q = lfirst_node(CommonTableExpr, lc)->ctequery;

		if (!IsA(q, SelectStmt) || !select_is_read_only((SelectStmt *) q))
			return false;
	}
	return select_is_read_only(s->larg) && select_is_read_only(s->rarg);
}

/*
 * The source argument: exactly one query (SELECT, VALUES, TABLE, WITH ...).
 * Returns its text without a trailing semicolon, ready to be a subquery.
 */
char *
sql_single_query(const char *sql, const char *argname)
{
	List	   *stmts = sql_parse(sql);
	RawStmt    *raw;

	if (list_length(stmts) != 1 ||
		!IsA(linitial_node(RawStmt, stmts)->stmt, SelectStmt) ||
		((SelectStmt *) linitial_node(RawStmt, stmts)->stmt)->intoClause != NULL)
		not_single(argname, "exactly one query",
				   "Pass a single SELECT, VALUES, TABLE or WITH query, without a semicolon between statements.");

	raw = linitial_node(RawStmt, stmts);
	if (!select_is_read_only((SelectStmt *) raw->stmt))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("%s must be a read-only query", argname),
				 errdetail("It may not lock rows (FOR UPDATE, FOR SHARE) nor modify data in a WITH clause: it runs in the calling statement's snapshot, as a read-only query."),
				 errhint("Do the writes in a statement of their own before the call.")));
	if (raw->stmt_len == 0)
		return pstrdup(sql + raw->stmt_location);
	return pnstrdup(sql + raw->stmt_location, raw->stmt_len);
}

/*
 * The number of columns of query when it is a bare VALUES list (ORDER BY,
 * LIMIT allowed), else -1.  query is one statement (sql_single_query).
 */
int
sql_values_width(const char *query)
{
	List	   *stmts = sql_parse(query);
	SelectStmt *s = (SelectStmt *) linitial_node(RawStmt, stmts)->stmt;

	if (!IsA(s, SelectStmt) || s->valuesLists == NIL || s->withClause)
		return -1;
	return list_length(linitial(s->valuesLists));
}

void
sql_check_sort_list(const char *fragment, const char *argname)
{
	SelectStmt *s = parse_wrapped("SELECT 1 ORDER BY ", fragment);
	ListCell   *lc;
	int			i = 0;

	if (s == NULL || s->sortClause == NIL || s->limitCount || s->limitOffset ||
		s->lockingClause || s->withClause || s->intoClause ||
		s->fromClause || s->whereClause || s->op != SETOP_NONE)
		not_single(argname, "a list of sort expressions",
				   "Pass an ORDER BY list such as 'updated_at DESC, id'.");

	/*
	 * An integer is a column position in a query's ORDER BY and a constant in
	 * a window's; the list is used in both, so it is neither.
	 */
	foreach(lc, s->sortClause)
	{
		Node	   *item = lfirst_node(SortBy, lc)->node;

		i++;
		if (IsA(item, A_Const) &&
			!((A_Const *) item)->isnull && IsA(&((A_Const *) item)->val, Integer))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_COLUMN_REFERENCE),
					 errmsg("item %d of %s is a column position", i, argname),
					 errdetail("A column position would mean a different column in each statement idem_etl builds."),
					 errhint("Name the column instead.")));
	}
}

void
sql_check_expression(const char *fragment, const char *argname)
{
	SelectStmt *s = parse_wrapped("SELECT 1 WHERE ", fragment);

	if (s == NULL || s->whereClause == NULL || s->sortClause || s->groupClause ||
		s->havingClause || s->windowClause || s->limitCount ||
		s->limitOffset || s->lockingClause || s->withClause ||
		s->intoClause || s->fromClause || s->op != SETOP_NONE)
		not_single(argname, "a boolean expression",
				   "Pass a condition over the target's columns such as 'sale_date = ''2026-11-28'''.");
}

SPIPlanPtr
sql_prepare(const char *sql, int nargs, Oid *argtypes)
{
	SPIPlanPtr	plan = SPI_prepare(sql, nargs, argtypes);

	if (plan == NULL)
		elog(ERROR, "SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
	if (list_length(SPI_plan_get_plan_sources(plan)) != 1)
		elog(ERROR, "idem_etl built a statement that is not exactly one statement");
	return plan;
}

/*
 * The plan of a statement of fixed text (a catalog lookup, one of the
 * ledger's statements), prepared on its first use in the session and kept
 * in *cache: the catalog lookups of a partition replacement took longer to
 * parse and plan (about 2 ms a call) than to run, and etl_replace_partitions
 * looks up and records a ledger run per partition, thousands in a call.
 * Every name in them is schema-qualified, so the plans do not depend on
 * search_path; the plan cache replans them when a catalog they read
 * changes.  With cache NULL the plan is not kept, and lives in SPI's
 * memory.  Never freed by the caller.
 */
SPIPlanPtr
sql_prepare_kept(SPIPlanPtr *cache, const char *sql, int nargs, Oid *argtypes)
{
	SPIPlanPtr	plan;

	if (cache == NULL)
		return sql_prepare(sql, nargs, argtypes);
	if (*cache != NULL)
		return *cache;
	plan = sql_prepare(sql, nargs, argtypes);
	if (SPI_keepplan(plan) != 0)
		elog(ERROR, "could not keep the plan of a statement");
	*cache = plan;
	return plan;
}

/*
 * Statements idem_etl runs over and over with the same text (the merge of a
 * small batch names the same target, columns and staged relations at each
 * call) are parsed and planned once per session, as PL/pgSQL does with its
 * statements.  The plan cache replans a kept plan when a relation it uses
 * changes, or search_path, the role (for row security) or row_security;
 * privileges are checked at every execution.  Staged relations are
 * ephemeral and not tracked by the plan cache, but their columns are the
 * target's, named in the text, with the target's types: a change to them
 * is a change to the target.  Plans are kept by exact text, at most
 * PLAN_CACHE_SIZE of them; when that is full, all are dropped and the cache
 * starts again, so that a session of many different targets holds a
 * bounded amount of memory.  Not while one of them runs, though (a trigger
 * on the target may call idem_etl again): then the new statement's plan is
 * used once and freed.
 */
#define PLAN_CACHE_SIZE 32

typedef struct KeptStatement
{
	uint32		hash;
	char	   *sql;
	SPIPlanPtr	plan;
} KeptStatement;

static KeptStatement plan_cache[PLAN_CACHE_SIZE];
static int	plan_cache_used = 0;
static int	plan_cache_running = 0; /* kept plans executing, nested */

/*
 * pg_noinline: inlined into sql_exec_cached, its locals would live across
 * that function's PG_TRY (setjmp), which -Wclobbered rightly distrusts.
 */
static pg_noinline SPIPlanPtr
cached_plan(const char *sql, bool *kept)
{
	size_t		len = strlen(sql);
	uint32		h = hash_bytes((const unsigned char *) sql, (int) len);
	KeptStatement *entry;
	SPIPlanPtr	plan;

	*kept = true;
	for (int i = 0; i < plan_cache_used; i++)
	{
		entry = &plan_cache[i];
		if (entry->hash == h && strcmp(entry->sql, sql) == 0)
			return entry->plan;
	}
	if (plan_cache_used == PLAN_CACHE_SIZE && plan_cache_running > 0)
	{
		*kept = false;
		return sql_prepare(sql, 0, NULL);
	}
	if (plan_cache_used == PLAN_CACHE_SIZE)
	{
		for (int i = 0; i < plan_cache_used; i++)
		{
			SPI_freeplan(plan_cache[i].plan);
			pfree(plan_cache[i].sql);
		}
		plan_cache_used = 0;
	}
	plan = sql_prepare(sql, 0, NULL);
	if (SPI_keepplan(plan) != 0)
		elog(ERROR, "could not keep the plan of a statement");
	entry = &plan_cache[plan_cache_used++];
	entry->hash = h;
	entry->sql = MemoryContextStrdup(TopMemoryContext, sql);
	entry->plan = plan;
	return plan;
}

/* sql_exec through a plan kept for the session (cached_plan). */
uint64
sql_exec_cached(const char *sql)
{
	bool		kept;
	SPIPlanPtr	plan = cached_plan(sql, &kept);
	volatile int rc = 0;

	plan_cache_running++;
	PG_TRY();
	{
		rc = SPI_execute_plan(plan, NULL, NULL, false, 0);
	}
	PG_FINALLY();
	{
		plan_cache_running--;
	}
	PG_END_TRY();
	if (rc < 0)
		elog(ERROR, "SPI_execute_plan failed: %s", SPI_result_code_string(rc));
	if (!kept)
		SPI_freeplan(plan);
	return SPI_processed;
}

uint64
sql_exec(const char *sql)
{
	SPIPlanPtr	plan = sql_prepare(sql, 0, NULL);
	int			rc = SPI_execute_plan(plan, NULL, NULL, false, 0);

	if (rc < 0)
		elog(ERROR, "SPI_execute_plan failed: %s", SPI_result_code_string(rc));
	SPI_freeplan(plan);
	return SPI_processed;
}

/*
 * Run plan, a query, sending its rows to dest (which may stop it early by
 * returning false), then free the plan; what names the work in an error.
 */
void
sql_exec_into(SPIPlanPtr plan, DestReceiver *dest, const char *what)
{
	SPIExecuteOptions options;
	int			rc;

	memset(&options, 0, sizeof(options));
	options.dest = dest;
	rc = SPI_execute_plan_extended(plan, &options);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "%s failed: %s", what, SPI_result_code_string(rc));
	SPI_freeplan(plan);
}

/* Column col (from 1) of the first row of the last result, NULL as 0. */
int64
sql_result_int8(int col)
{
	bool		isnull;
	Datum		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, col, &isnull);

	return isnull ? 0 : DatumGetInt64(d);
}

/* Run a query returning one bigint (NULL reads as 0). */
int64
sql_exec_int8(const char *sql)
{
	sql_exec(sql);
	if (SPI_processed != 1)
		elog(ERROR, "expected one row, got " UINT64_FORMAT, SPI_processed);
	return sql_result_int8(1);
}

void
sql_append_columns(StringInfo buf, const char *alias, char **names, int n)
{
	for (int i = 0; i < n; i++)
	{
		if (i > 0)
			appendStringInfoString(buf, ", ");
		if (alias)
			appendStringInfo(buf, "%s.", alias);
		appendStringInfoString(buf, quote_identifier(names[i]));
	}
}

/*
 * "OPERATOR(schema.name)" for operator opno: generated SQL names every
 * operator with its schema, so that no search_path, whoever set it, can put
 * another function in its place.
 */
char *
sql_operator(Oid opno)
{
	HeapTuple	tup = SearchSysCache1(OPEROID, ObjectIdGetDatum(opno));
	Form_pg_operator op;
	char	   *result;

	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for operator %u", opno);
	op = (Form_pg_operator) GETSTRUCT(tup);
	result = psprintf("OPERATOR(%s.%s)",
					  quote_identifier(get_namespace_name(op->oprnamespace)),
					  NameStr(op->oprname));
	ReleaseSysCache(tup);
	return result;
}

/*
 * Key match over quoted column names, each compared with its key's own
 * equality operator (eqops[i], already "OPERATOR(schema.=)").  With
 * nulls_match (a NULLS NOT DISTINCT key) NULL keys must match each other;
 * spelled as "= OR both NULL" rather than IS NOT DISTINCT FROM, which would
 * look its operator up by name, and so that the key's index can be used.
 */
void
sql_append_key_match(StringInfo buf, const char *left, const char *right,
					 char **names, char **eqops, int n, bool nulls_match)
{
	for (int i = 0; i < n; i++)
	{
		const char *col = quote_identifier(names[i]);

		if (i > 0)
			appendStringInfoString(buf, " AND ");
		if (nulls_match)
			appendStringInfo(buf, "(%s.%s %s %s.%s OR (%s.%s IS NULL AND %s.%s IS NULL))",
							 left, col, eqops[i], right, col, left, col, right, col);
		else
			appendStringInfo(buf, "%s.%s %s %s.%s", left, col, eqops[i], right, col);
	}
}

/*
 * "incoming may overwrite stored" for newer_column: newer or equal, and NULL
 * never wins.  ge is the column type's >= (target_newer_ge).
 */
void
sql_append_newer_wins(StringInfo buf, const char *stored, const char *incoming,
					  const char *column, const char *ge)
{
	const char *col = quote_identifier(column);

	appendStringInfo(buf, "(%s.%s IS NULL OR coalesce(%s.%s %s %s.%s, false))",
					 stored, col, incoming, col, ge, stored, col);
}

/*
 * Pin search_path to pg_catalog, pg_temp until AtEOXact_GUC(true, <the level
 * returned>).  Every statement idem_etl builds qualifies its names anyway;
 * this is the second wall, for statements that run with rights other than
 * the caller's and for the workers' sessions.
 */
int
sql_pin_search_path(void)
{
	int			nestlevel = NewGUCNestLevel();

	settings_save("search_path", "pg_catalog, pg_temp");
	return nestlevel;
}

/*
 * Run fn(arg) in a subtransaction.  Returns NULL when it succeeded, else
 * the error it raised, with everything it did rolled back: for the few
 * errors idem_etl recovers from (a lock wait that timed out, a constraint
 * whose failure gets a better message).  A cancel (pg_cancel_backend,
 * statement_timeout) is never one of them: it is raised again, so that
 * the caller's statement ends as the user asked.
 */
ErrorData *
sql_try(void (*fn) (void *), void *arg)
{
	MemoryContext oldcxt = CurrentMemoryContext;
	ResourceOwner oldowner = CurrentResourceOwner;
	ErrorData  *volatile failure = NULL;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(oldcxt);
	PG_TRY();
	{
		fn(arg);
		ReleaseCurrentSubTransaction();
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(oldcxt);
		failure = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
	}
	PG_END_TRY();
	MemoryContextSwitchTo(oldcxt);
	CurrentResourceOwner = oldowner;
	if (failure != NULL && failure->sqlerrcode == ERRCODE_QUERY_CANCELED)
		ReThrowError(failure);
	return failure;
}
