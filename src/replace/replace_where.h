/*
 * replace_where.h
 *		etl_replace_where, and the slices of a partition that
 *		etl_replace_partition replaces the same way.
 */
#ifndef IDEM_REPLACE_WHERE_H
#define IDEM_REPLACE_WHERE_H

#include "replace/rebuild.h"

extern int64 replace_where_run(ReplaceArgs *a, char *run_key, LedgerRun *run,
							   ReplaceResult *total);

#endif							/* IDEM_REPLACE_WHERE_H */
