/*
 * args.h
 *		The arguments and results of idem_etl's SQL-callable functions.
 */
#ifndef IDEM_ARGS_H
#define IDEM_ARGS_H

#include "fmgr.h"
#include "utils/array.h"
#include "utils/tuplestore.h"

extern bool args_isnull(FunctionCallInfo fcinfo, int n);
extern char *args_text(FunctionCallInfo fcinfo, int n);
extern void args_context_push(ErrorContextCallback *cb, const char *argname);
extern void args_context_pop(ErrorContextCallback *cb);
extern ArrayType *args_name_list(FunctionCallInfo fcinfo, int n, const char *argname);
extern Tuplestorestate *args_srf_store(FunctionCallInfo fcinfo, TupleDesc *desc);
extern char **args_names(ArrayType *arr, const char *argname, int *n);
extern bool args_name_in(char **names, int n, const char *name);
extern Datum args_return_row(FunctionCallInfo fcinfo, Datum *values, bool *nulls);

#endif							/* IDEM_ARGS_H */
