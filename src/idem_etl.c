/*
 * idem_etl.c
 *		Module entry point and the helper that returns a function's row.
 */
#include "postgres.h"

#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/guc.h"
#include "utils/tuplestore.h"

#include "idem_etl.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

void
_PG_init(void)
{
	if (IsBinaryUpgrade)
		return;

#if PG_VERSION_NUM >= 150000
	MarkGUCPrefixReserved("idem_etl");
#else
	EmitWarningsOnPlaceholders("idem_etl");
#endif
}

/*
 * Return one row from a function declared RETURNS TABLE.  Such functions are
 * set-returning; materialize mode lets us hand back a single tuple without
 * the value-per-call protocol.
 */
Datum
idem_return_row(FunctionCallInfo fcinfo, Datum *values, bool *nulls)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	TupleDesc	tupdesc;
	MemoryContext oldcxt;
	Tuplestorestate *store;

	if (rsinfo == NULL || !IsA(rsinfo, ReturnSetInfo) ||
		(rsinfo->allowedModes & SFRM_Materialize) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("set-valued function called in context that cannot accept a set")));

	oldcxt = MemoryContextSwitchTo(rsinfo->econtext->ecxt_per_query_memory);
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	tupdesc = BlessTupleDesc(CreateTupleDescCopy(tupdesc));
	store = tuplestore_begin_heap(false, false, work_mem);
	tuplestore_putvalues(store, tupdesc, values, nulls);
	rsinfo->returnMode = SFRM_Materialize;
	rsinfo->setResult = store;
	rsinfo->setDesc = tupdesc;
	MemoryContextSwitchTo(oldcxt);

	return (Datum) 0;
}
