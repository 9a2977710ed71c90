/*
 * compare.h
 *		Binary images compared: the change test, rows of a batch, and the
 *		image hash of the Citus upsert.
 */
#ifndef IDEM_COMPARE_H
#define IDEM_COMPARE_H

#include "access/tupdesc.h"

/* A row's 128-bit image hash, as idem_etl.image_hash computes it */
typedef struct ImageHash
{
	uint64		h[2];
	int			only;			/* -1: both halves; 0 or 1: only that one */
} ImageHash;

extern void compare_image_hash_init(ImageHash *ih);
extern void compare_image_hash_add(ImageHash *ih, int position, Datum value,
								   bool isnull, int16 typlen, bool typbyval);
extern Datum compare_image_hash_result(ImageHash *ih);

extern bool compare_rows_same_image(TupleDesc desc, int n, const int *atts,
									Datum *v1, bool *n1, Datum *v2, bool *n2);

#endif							/* IDEM_COMPARE_H */
