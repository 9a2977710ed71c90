/*
 * ordering.h
 *		Orderings evaluated in C, as SQL would evaluate them over a staged
 *		batch.
 */
#ifndef IDEM_ORDERING_H
#define IDEM_ORDERING_H

#include "access/tupdesc.h"
#include "nodes/execnodes.h"
#include "utils/sortsupport.h"

/* order_by, evaluated over a row of the stage */
typedef struct OrderBy
{
	int			n;
	ExprState **exprs;
	SortSupportData *ssup;
	int16	   *typlen;
	bool	   *typbyval;
	ExprContext *econtext;
	TupleTableSlot *slot;
	Datum	   *values;			/* of the row being compared */
	bool	   *isnull;
} OrderBy;

/* A key's columns, compared as ORDER BY key compares them. */
typedef struct KeyOrder
{
	int			n;
	const int  *atts;			/* 0-based */
	SortSupportData *ssup;
} KeyOrder;

extern OrderBy *ordering_prepare(TupleDesc desc, const char *order_by, const char *alias);
extern void ordering_eval(OrderBy *ob, TupleDesc desc, Datum *values, bool *isnull);
extern void ordering_copy(OrderBy *ob, Datum *values, bool *isnull);
extern int	ordering_compare(OrderBy *ob, const Datum *values, const bool *isnull);
extern void ordering_end(OrderBy *ob);
extern KeyOrder *ordering_key_prepare(TupleDesc desc, int nkeys, const int *keyatts);
extern int	ordering_key_compare(KeyOrder *ko, const Datum *v1, const bool *n1,
								 const Datum *v2, const bool *n2);
extern bool ordering_key_equal(KeyOrder *ko, Datum *v1, bool *n1, Datum *v2, bool *n2);

#endif							/* IDEM_ORDERING_H */
