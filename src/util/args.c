/*
 * args.c
 *		The arguments and results of idem_etl's SQL-callable functions.
 */
#include "postgres.h"

#include "compat.h"

#include "catalog/pg_type.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "parser/scansup.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/tuplestore.h"

#include "util/args.h"

/*
 * Argument n is NULL, or not passed at all: a database whose objects are
 * still at an older version declares the function with fewer arguments.
 */
bool
args_isnull(FunctionCallInfo fcinfo, int n)
{
	return n >= PG_NARGS() || PG_ARGISNULL(n);
}

/* A text argument as a C string, NULL for SQL NULL (or not passed). */
char *
args_text(FunctionCallInfo fcinfo, int n)
{
	return args_isnull(fcinfo, n) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(n));
}

static void
argument_context(void *arg)
{
	errcontext("argument \"%s\"", (const char *) arg);
}

/*
 * Until args_context_pop, errors raised (by PostgreSQL's parser, planner,
 * input functions, or the query itself) say which argument they come
 * from: a date that does not parse, or a syntax error in a query, would
 * otherwise not name it.
 */
void
args_context_push(ErrorContextCallback *cb, const char *argname)
{
	cb->callback = argument_context;
	cb->arg = (void *) argname;
	cb->previous = error_context_stack;
	error_context_stack = cb;
}

void
args_context_pop(ErrorContextCallback *cb)
{
	error_context_stack = cb->previous;
}

/* Split "a, b" into its names, spaces around them dropped, "x" unquoted. */
static ArrayType *
split_names(const char *list, const char *argname)
{
	ArrayBuildState *names = initArrayResult(TEXTOID, CurrentMemoryContext, false);
	const char *p = list;

	for (;;)
	{
		StringInfoData name;

		initStringInfo(&name);
		while (scanner_isspace(*p))
			p++;
		if (*p == '"')
		{
			for (p++; *p && !(p[0] == '"' && p[1] != '"'); p++)
			{
				if (*p == '"')
					p++;		/* "" is one quote */
				appendStringInfoChar(&name, *p);
			}
			if (*p == '"')
				p++;
		}
		else
			for (; *p && *p != ','; p++)
				appendStringInfoChar(&name, *p);
		while (name.len > 0 && scanner_isspace(name.data[name.len - 1]))
			name.data[--name.len] = '\0';
		while (scanner_isspace(*p))
			p++;
		if (name.len == 0 || (*p != ',' && *p != '\0'))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("%s is not a list of column names: \"%s\"", argname, list),
					 errhint("Pass one name ('customer_id'), names separated by commas ('order_id, line_no'), or a text array.")));
		accumArrayResult(names, CStringGetTextDatum(name.data), false, TEXTOID,
						 CurrentMemoryContext);
		if (*p == '\0')
			break;
		p++;
	}
	return DatumGetArrayTypeP(makeArrayResult(names, CurrentMemoryContext));
}

/*
 * A list of column names, as a text[], NULL for SQL NULL (or not passed).
 * The argument is declared "any" so that users may write it as they do: a
 * text array, or one string holding a name or names separated by commas
 * (an array literal '{a,b}' is read as an array).  Older versions of the
 * objects declare it text[].
 */
ArrayType *
args_name_list(FunctionCallInfo fcinfo, int n, const char *argname)
{
	Oid			type;
	char	   *list;

	if (args_isnull(fcinfo, n))
		return NULL;
	type = get_fn_expr_argtype(fcinfo->flinfo, n);
	if (type == TEXTARRAYOID)
		return PG_GETARG_ARRAYTYPE_P(n);
	if (type == UNKNOWNOID)
		list = pstrdup(DatumGetCString(PG_GETARG_DATUM(n)));
	else if (type == TEXTOID || type == VARCHAROID || type == NAMEOID ||
			 type_is_array(type))
	{
		Oid			output;
		bool		varlena;

		getTypeOutputInfo(type, &output, &varlena);
		list = OidOutputFunctionCall(output, PG_GETARG_DATUM(n));
	}
	else
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("%s must be text or a text array, not %s", argname, format_type_be(type)),
				 errhint("Pass one name ('customer_id'), names separated by commas ('order_id, line_no'), or a text array.")));
	if (list[0] == '{')
		return DatumGetArrayTypeP(OidInputFunctionCall(F_ARRAY_IN, list, TEXTOID, -1));
	return split_names(list, argname);
}

/*
 * The tuplestore a function declared RETURNS TABLE fills with its rows.
 * Such functions are set-returning; materialize mode lets them hand back
 * their rows without the value-per-call protocol.
 */
Tuplestorestate *
args_srf_store(FunctionCallInfo fcinfo, TupleDesc *desc)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	TupleDesc	tupdesc;
	Oid			rettype;
	MemoryContext oldcxt;
	Tuplestorestate *store;

	if (rsinfo == NULL || !IsA(rsinfo, ReturnSetInfo) ||
		(rsinfo->allowedModes & SFRM_Materialize) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("set-valued function called in context that cannot accept a set")));

	oldcxt = MemoryContextSwitchTo(rsinfo->econtext->ecxt_per_query_memory);
	switch (get_call_result_type(fcinfo, &rettype, &tupdesc))
	{
		case TYPEFUNC_COMPOSITE:
			tupdesc = CreateTupleDescCopy(tupdesc);
			break;
		case TYPEFUNC_SCALAR:
			tupdesc = CreateTemplateTupleDesc(1);
			TupleDescInitEntry(tupdesc, (AttrNumber) 1, "result", rettype, -1, 0);
			TupleDescFinalize(tupdesc);
			break;
		default:
			elog(ERROR, "return type must be a row type or a scalar");
	}
	tupdesc = BlessTupleDesc(tupdesc);
	store = tuplestore_begin_heap(false, false, work_mem);
	rsinfo->returnMode = SFRM_Materialize;
	rsinfo->setResult = store;
	rsinfo->setDesc = tupdesc;
	MemoryContextSwitchTo(oldcxt);
	*desc = tupdesc;
	return store;
}

/* Return one row from a function declared RETURNS TABLE. */
Datum
args_return_row(FunctionCallInfo fcinfo, Datum *values, bool *nulls)
{
	TupleDesc	desc;
	Tuplestorestate *store = args_srf_store(fcinfo, &desc);

	tuplestore_putvalues(store, desc, values, nulls);
	return (Datum) 0;
}

/* The names of a text[] argument: one-dimensional, no NULL, no repeats. */
char	  **
args_names(ArrayType *arr, const char *argname, int *n)
{
	Datum	   *elems;
	bool	   *nulls;
	char	  **names;

	if (ARR_NDIM(arr) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("%s must be a one-dimensional array", argname)));
	deconstruct_array(arr, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, n);
	names = palloc(sizeof(char *) * (*n + 1));
	for (int i = 0; i < *n; i++)
	{
		if (nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("%s must not contain NULL", argname)));
		names[i] = TextDatumGetCString(elems[i]);
		for (int j = 0; j < i; j++)
			if (strcmp(names[i], names[j]) == 0)
				ereport(ERROR,
						(errcode(ERRCODE_DUPLICATE_COLUMN),
						 errmsg("column \"%s\" is named more than once in %s", names[i], argname)));
	}
	return names;
}

/* Is name one of the n names? */
bool
args_name_in(char **names, int n, const char *name)
{
	for (int i = 0; i < n; i++)
		if (strcmp(names[i], name) == 0)
			return true;
	return false;
}
