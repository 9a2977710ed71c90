/*
 * copies.h
 *		Exact copies of a batch's rows, recognised while it is staged.
 */
#ifndef IDEM_COPIES_H
#define IDEM_COPIES_H

#include "access/tupdesc.h"

typedef struct RowCopies RowCopies;

extern RowCopies *copies_begin(TupleDesc desc);
extern bool copies_seen(RowCopies *c, const uint64 *hash, Datum *values, bool *isnull);
extern void copies_end(RowCopies *c);

#endif							/* IDEM_COPIES_H */
