/*
 * citus_upsert.h
 *		etl_upsert_batch's merge and delete on a Citus table, run on the
 *		shards: the batch as parameters (small batches), or in a table beside
 *		the target (colocated with it, or a reference table), only the rows
 *		not stored already when most are; one pushed-down statement for each
 *		step.
 */
#ifndef IDEM_CITUS_UPSERT_H
#define IDEM_CITUS_UPSERT_H

#include "citus/citus_rows.h"
#include "citus/citus_target.h"
#include "stage/stage.h"
#include "util/target.h"

/* A batch on its way to a Citus table; see citus_upsert.c */
typedef struct CitusBatch
{
	CitusTarget *ct;
	TargetInfo *target;
	TargetKey  *key;
	StagedRel  *staged;			/* the batch, checked: one row per key */
	char	  **columns;		/* its columns, in its order */
	int			ncolumns;
	int64		nkeys;

	/* Where the batch's keys are for the delete, after the merge: */
	CitusRows	rows;			/* inline: every row (nrows > 0) */
	char	   *keys_table;		/* else: a table beside the target's shards */
	List	   *tables;			/* the tables the call created, to drop */
	int			nestlevel;		/* the call's settings (citus_upsert_begin) */
	bool		parallel;		/* in Citus's parallel mode */
} CitusBatch;

/* What the merge wrote */
typedef struct CitusMerged
{
	int64		written;		/* rows inserted or updated */
	int64		inserted;
} CitusMerged;

extern void citus_upsert_begin(CitusBatch *cb, CitusTarget *ct, TargetInfo *target,
							   TargetKey *key, StagedRel *staged, char **columns,
							   int ncolumns, int64 nkeys);
extern int *citus_batch_atts(CitusBatch *cb, char **names, int n);
extern CitusMerged citus_upsert_merge(CitusBatch *cb, char **setcols, int nset,
									  const char *newer_column);
extern int64 citus_upsert_delete(CitusBatch *cb, const char *condition);
extern void citus_upsert_end(CitusBatch *cb);

#endif							/* IDEM_CITUS_UPSERT_H */
