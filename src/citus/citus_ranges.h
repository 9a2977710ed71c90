/*
 * citus_ranges.h
 *		A large batch with dense integer keys compared with the stored rows
 *		by ranges of its keys: counts and hash sums, nothing sent per row.
 */
#ifndef IDEM_CITUS_RANGES_H
#define IDEM_CITUS_RANGES_H

#include "citus/citus_upsert.h"

/* What the key ranges found */
typedef struct CitusRanges
{
	char	   *differ;			/* a condition over the batch (alias b): its
								 * rows in the ranges that differ; NULL: none */
	int64		stored;			/* rows stored between the batch's keys */
	int64		differ_rows;	/* the batch's rows in the ranges that differ */
	int64		differ_stored;	/* rows stored in those ranges */
} CitusRanges;

extern bool citus_ranges_compare(CitusBatch *cb, char **setcols, int nset,
								 const char *b, CitusRanges *found);

#endif							/* IDEM_CITUS_RANGES_H */
