/*
 * bulkload.h
 *		Rows written straight into a table created in this transaction, as
 *		COPY FROM writes them.
 */
#ifndef IDEM_BULKLOAD_H
#define IDEM_BULKLOAD_H

#include "access/tupdesc.h"

typedef struct BulkLoad BulkLoad;

extern BulkLoad *bulkload_begin(Oid into, Oid defaults_from, TupleDesc rowdesc);
extern void bulkload_put(BulkLoad *bl, Datum *values, bool *isnull);
extern void bulkload_end(BulkLoad *bl);

#endif							/* IDEM_BULKLOAD_H */
