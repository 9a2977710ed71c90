/*
 * audit.c
 *		Write-audit-publish: a load that would publish obviously wrong data
 *		fails before anything is visible.
 *
 * expect is a boolean expression over aggregates of the staged batch,
 * written as in a HAVING clause ("count(*) >= 1000 AND count(*) FILTER
 * (WHERE amount < 0) = 0"); it is evaluated over the staged rows, before
 * any write; false or NULL raises IE001 showing the expression and the
 * value of each of its top-level function calls.  min_replaced_ratio
 * refuses to replace a partition, or a value's rows, with fewer than that
 * fraction of the rows it holds (IE002), the classic empty extract.
 */
#include "postgres.h"

#include <math.h>

#include "fmgr.h"
#include "lib/stringinfo.h"
#include "nodes/nodeFuncs.h"
#include "nodes/parsenodes.h"
#include "parser/scanner.h"
#include "utils/builtins.h"

#include "state/audit.h"
#include "util/args.h"
#include "util/settings.h"
#include "util/sql.h"

void
audit_check_syntax(const char *expect)
{
	if (expect)
		sql_check_expression(expect, "expect");
}

typedef struct CallSpans
{
	List	   *starts;			/* locations of FuncCall nodes */
} CallSpans;

static bool
collect_calls(Node *node, void *context)
{
	CallSpans  *spans = (CallSpans *) context;

	if (node == NULL)
		return false;
	/* a subquery's calls are over its own rows: not shown, not walked into */
	if (IsA(node, SubLink))
		return collect_calls(((SubLink *) node)->testexpr, context);

	/*
	 * Calls written as calls: the grammar makes calls of some SQL syntax too
	 * (AT TIME ZONE, IS NORMALIZED, OVERLAPS), located at a keyword.
	 */
	if (IsA(node, FuncCall) && ((FuncCall *) node)->location >= 0
		&& ((FuncCall *) node)->funcformat == COERCE_EXPLICIT_CALL)
		spans->starts = lappend_int(spans->starts, ((FuncCall *) node)->location);
	return raw_expression_tree_walker(node, collect_calls, context);
}

/*
 * The token code of a keyword.  The codes are generated into parser/gram.h,
 * which is not installed from 16 on and differs between majors, so they are
 * looked up in the scanner's own table.
 */
static int
keyword_token(const char *keyword)
{
	int			kwnum = ScanKeywordLookup(keyword, &ScanKeywords);

	Assert(kwnum >= 0);
	return ScanKeywordTokens[kwnum];
}

/*
 * Whether a token that starts with a letter is a string constant (E'..',
 * B'..', X'..', N'..', U&'..') rather than a name: decided by its text,
 * since the scanner's token codes for them are not installed either.
 */
static bool
is_prefixed_string(const char *tok)
{
	if (tok[0] != '\0' && strchr("eEbBxXnN", tok[0]) && tok[1] == '\'')
		return true;
	return (tok[0] == 'u' || tok[0] == 'U') && tok[1] == '&' && tok[2] == '\'';
}

/*
 * The end (exclusive) of the function call that starts at start: a name,
 * maybe qualified, its parenthesized arguments, and WITHIN GROUP (...) and
 * FILTER (...) after them if there; read with PostgreSQL's own scanner,
 * so that quotes of every kind and comments are skipped as the parser
 * skips them.  NULL when no such call starts there.
 */
static const char *
call_end(const char *start)
{
	core_yy_extra_type extra;
	core_yyscan_t scanner = scanner_init(start, &extra, &ScanKeywords, ScanKeywordTokens);
	int			group_tok = keyword_token("group");
	int			within_tok = keyword_token("within");
	int			filter_tok = keyword_token("filter");
	core_YYSTYPE lval;
	int			loc;
	int			tok;
	int			depth = 0;
	bool		named = false;
	bool		in_args = false;
	int			expect_next = 0;	/* GROUP after WITHIN, '(' after it or
									 * FILTER */
	const char *end = NULL;

	while ((tok = core_yylex(&lval, &loc, scanner)) != 0)
	{
		if (depth > 0)
		{
			if (tok == '(')
				depth++;
			else if (tok == ')' && --depth == 0)
				end = start + loc + 1;
			continue;
		}
		if (!in_args)
		{
			/* the name: identifiers or keywords, with dots between */
			if (tok == '(' && named)
			{
				in_args = true;
				depth = 1;
			}
			else if (tok == '.' && named)
				named = false;
			else if (!named && (start[loc] == '"' || start[loc] == '_' ||
								isalpha((unsigned char) start[loc]) ||
								IS_HIGHBIT_SET(start[loc])) &&
					 !is_prefixed_string(start + loc))
				named = true;
			else
				break;
			continue;
		}
		/* after the arguments, or a clause: WITHIN GROUP (...), FILTER (...) */
		if (expect_next != 0)
		{
			if (tok != expect_next)
				break;
			if (tok == '(')
				depth = 1;
			expect_next = tok == group_tok ? '(' : 0;
		}
		else if (tok == within_tok)
			expect_next = group_tok;
		else if (tok == filter_tok)
			expect_next = '(';
		else
			break;
	}
	scanner_finish(scanner);
	return end;
}

static int
cmp_int(const ListCell *a, const ListCell *b)
{
	return lfirst_int(a) - lfirst_int(b);
}

/*
 * The text of each top-level function call of expect (an aggregate and its
 * FILTER, typically): what the failure message shows the value of.
 */
static List *
top_level_calls(const char *expect)
{
	const char *prefix = "SELECT 1 WHERE ";
	List	   *stmts = sql_parse(psprintf("%s%s\n", prefix, expect));
	SelectStmt *s = (SelectStmt *) linitial_node(RawStmt, stmts)->stmt;
	CallSpans	spans = {NIL};
	List	   *calls = NIL;
	ListCell   *lc;
	const char *done = expect;

	(void) collect_calls(s->whereClause, &spans);
	list_sort(spans.starts, cmp_int);
	foreach(lc, spans.starts)
	{
		const char *start = expect + (lfirst_int(lc) - strlen(prefix));
		const char *end;

		if (start < done)
			continue;			/* inside the previous call */
		end = call_end(start);
		if (end == NULL)
			continue;
		calls = lappend(calls, pnstrdup(start, end - start));
		done = end;
	}
	return calls;
}

/*
 * Evaluate expect over relation (the staged batch, or the table it was
 * loaded into); raise IE001 unless it is true.
 */
void
audit_expect(const char *expect, const char *relation, const char *target)
{
	List	   *calls;
	StringInfoData sql;
	StringInfoData values;
	ListCell   *lc;
	bool		isnull;
	Datum		ok;

	if (expect == NULL)
		return;
	calls = top_level_calls(expect);
	initStringInfo(&sql);
	appendStringInfo(&sql, "SELECT (%s\n)::pg_catalog.bool", expect);
	foreach(lc, calls)
		appendStringInfo(&sql, ", (%s\n)::pg_catalog.text", (char *) lfirst(lc));

	/*
	 * HAVING makes it one group, empty batch included, and refuses bare
	 * columns
	 */
	appendStringInfo(&sql, " FROM %s AS batch HAVING true", relation);
	sql_exec(sql.data);
	ok = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	if (!isnull && DatumGetBool(ok))
		return;

	initStringInfo(&values);
	foreach(lc, calls)
	{
		char	   *v = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc,
									 foreach_current_index(lc) + 2);

		appendStringInfo(&values, "%s%s = %s", foreach_current_index(lc) ? ", " : "",
						 (char *) lfirst(lc), v ? v : "NULL");
	}
	ereport(ERROR,
			(errcode(ERRCODE_IDEM_EXPECTATION_FAILED),
			 errmsg("the batch for \"%s\" does not meet its expectation", target),
			 values.len > 0 ?
			 errdetail("The expectation %s is %s with %s.", expect,
					   isnull ? "NULL" : "false", values.data) :
			 errdetail("The expectation %s is %s.", expect, isnull ? "NULL" : "false"),
			 errhint("Nothing was written. Fix the extract, or the expectation if the data are right.")));
}

/* The ratio argument, else idem_etl.min_replaced_ratio; 22023 outside 0..1. */
double
audit_ratio(FunctionCallInfo fcinfo, int ratio_arg)
{
	double		ratio = args_isnull(fcinfo, ratio_arg) ? idem_min_replaced_ratio :
		PG_GETARG_FLOAT8(ratio_arg);

	if (!(ratio >= 0 && ratio <= 1))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("min_replaced_ratio must be between 0 and 1"),
				 errdetail("It is %g.", ratio)));
	return ratio;
}

/* The allow_shrink argument, else idem_etl.allow_shrink. */
bool
audit_allow_shrink(FunctionCallInfo fcinfo, int n)
{
	if (n >= PG_NARGS() || args_isnull(fcinfo, n))
		return idem_allow_shrink;
	return PG_GETARG_BOOL(n);
}

/*
 * Whether audit_empty or audit_shrink could refuse a batch of batch_rows:
 * the caller counts the rows held only then (a count is a scan of what is
 * replaced).
 */
bool
audit_shrink_possible(double ratio, bool allow_shrink, int64 batch_rows)
{
	return !allow_shrink && (ratio > 0 || batch_rows == 0);
}

/*
 * Refuse an empty batch that would remove held rows, unless allow_shrink:
 * IE002, whatever min_replaced_ratio (the classic empty extract).  A batch
 * with rows may leave some partitions of its condition empty.
 */
void
audit_empty(bool allow_shrink, int64 batch_rows, int64 held,
			const char *target, const char *what)
{
	if (!allow_shrink && batch_rows == 0 && held > 0)
		ereport(ERROR,
				(errcode(ERRCODE_IDEM_WOULD_SHRINK),
				 errmsg("the batch for \"%s\" is empty and would remove %s (%lld rows)",
						target, what, (long long) held),
				 errdetail("An empty batch is refused where it would remove rows, unless the call allows it."),
				 errhint("Nothing was written. Check the extract; pass allow_shrink => true (or set idem_etl.allow_shrink) if the rows are to be removed.")));
}

/*
 * Refuse to replace what holds held rows with loaded rows, unless
 * allow_shrink: IE002 when the batch (batch_rows, all of the call's rows)
 * is empty (audit_empty), or when loaded are fewer than ratio of held.
 */
void
audit_shrink(double ratio, bool allow_shrink, int64 batch_rows, int64 loaded,
			 int64 held, const char *target, const char *what)
{
	audit_empty(allow_shrink, batch_rows, held, target, what);
	if (allow_shrink || ratio <= 0 || (double) loaded >= ratio * (double) held)
		return;
	ereport(ERROR,
			(errcode(ERRCODE_IDEM_WOULD_SHRINK),
			 errmsg("replacing %s of \"%s\" would shrink it from %lld to %lld rows",
					what, target, (long long) held, (long long) loaded),
			 errdetail("min_replaced_ratio is %g: at least %.0f rows are expected.",
					   ratio, ceil(ratio * (double) held)),
			 errhint("Nothing was written. Check the extract; pass allow_shrink => true if the smaller data are right.")));
}
