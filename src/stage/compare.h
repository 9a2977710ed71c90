/*
 * compare.h
 *		Binary images compared: the change test, and rows of a batch.
 */
#ifndef IDEM_COMPARE_H
#define IDEM_COMPARE_H

#include "access/tupdesc.h"

extern bool compare_rows_same_image(TupleDesc desc, int n, const int *atts,
									Datum *v1, bool *n1, Datum *v2, bool *n2);

#endif							/* IDEM_COMPARE_H */
