/*
 * args.c
 *		The arguments and results of idem_etl's SQL-callable functions.
 */
#include "postgres.h"

#include "compat.h"

#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "catalog/pg_type.h"
#include "utils/array.h"
#include "utils/builtins.h"
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
