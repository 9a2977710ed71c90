/*
 * citus_upsert.h
 *		etl_upsert_batch's merge and delete on a Citus table, run on the
 *		shards: the batch in a table beside the target (colocated with it,
 *		or a reference table), then one pushed-down statement for each.
 */
#ifndef IDEM_CITUS_UPSERT_H
#define IDEM_CITUS_UPSERT_H

#include "citus/citus_target.h"
#include "util/target.h"

/* What the merge wrote */
typedef struct CitusMerged
{
	int64		written;		/* rows inserted or updated */
	int64		inserted;
} CitusMerged;

extern char *citus_upsert_stage(CitusTarget *ct, TargetInfo *target,
								char **columns, int ncolumns, const char *batch);
extern CitusMerged citus_upsert_merge(TargetInfo *target, TargetKey *key,
									  const char *staged, char **columns,
									  int ncolumns, char **setcols, int nset,
									  const char *newer_column);
extern int64 citus_upsert_delete(TargetInfo *target, TargetKey *key,
								 const char *staged, const char *condition);
extern void citus_upsert_drop(const char *staged);

#endif							/* IDEM_CITUS_UPSERT_H */
