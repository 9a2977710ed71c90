/*
 * collapse.h
 *		Rows of a batch that cannot win their key, recognised while it is
 *		staged.
 */
#ifndef IDEM_COLLAPSE_H
#define IDEM_COLLAPSE_H

#include "access/tupdesc.h"

typedef struct Collapse Collapse;

/* Stages one row (values, isnull as the stage's descriptor lays them out). */
typedef void (*CollapseStageRow) (void *arg, Datum *values, bool *isnull);

extern Collapse *collapse_begin(TupleDesc desc, int nkeys, const int *keyatts,
								const char *order_by, const char *alias,
								CollapseStageRow stage_row, void *arg);
extern bool collapse_row(Collapse *c, uint64 keyhash, Datum *values, bool *isnull);
extern void collapse_end(Collapse *c);

#endif							/* IDEM_COLLAPSE_H */
