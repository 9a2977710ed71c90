/*
 * citus_ranges.h
 *		A large batch stored as it is, told on the shards by ranges of its
 *		keys: counts and hash sums, nothing sent per row.
 */
#ifndef IDEM_CITUS_RANGES_H
#define IDEM_CITUS_RANGES_H

#include "citus/citus_upsert.h"

extern bool citus_ranges_compare(CitusBatch *cb, char **setcols, int nset,
								 const char *b, char **differ);

#endif							/* IDEM_CITUS_RANGES_H */
