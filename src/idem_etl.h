/*
 * idem_etl.h
 *		Declarations shared by every part of idem_etl.
 */
#ifndef IDEM_ETL_H
#define IDEM_ETL_H

#include "fmgr.h"
#include "utils/tuplestore.h"

/* Schema holding the extension's own state (ledger, views). */
#define IDEM_ETL_STATE_SCHEMA "idem_etl"

extern int	idem_keep_replaced;
extern int	idem_lock_timeout;
extern int	idem_lock_retries;
extern char *idem_partition_time_zone;

extern int	idem_canonical_output(void);
extern char *idem_text_arg(FunctionCallInfo fcinfo, int n);
extern bool idem_arg_isnull(FunctionCallInfo fcinfo, int n);
extern Tuplestorestate *idem_srf_store(FunctionCallInfo fcinfo, TupleDesc *desc);
extern Datum idem_return_row(FunctionCallInfo fcinfo, Datum *values, bool *nulls);

#endif							/* IDEM_ETL_H */
