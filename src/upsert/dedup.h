/*
 * dedup.h
 *		Key checks of a staged batch: NULL keys, and rows sharing a key.
 */
#ifndef IDEM_DEDUP_H
#define IDEM_DEDUP_H

#include "util/target.h"
#include "stage/stage.h"

/* The batch to merge: the stage itself, or a deduplicated copy of it. */
typedef struct KeyedBatch
{
	char	   *name;			/* relation to read the batch from */
	StagedRel  *copy;			/* a staged copy of its own, to drop; NULL
								 * when it is the stage itself */
	int64		nkeys;			/* distinct keys = rows to merge */
	bool		in_key_order;	/* read in key order (as staged) */
} KeyedBatch;

extern KeyedBatch dedup_batch(TargetInfo *target, TargetKey *key, Stage *stage,
							  const char *order_by);

#endif							/* IDEM_DEDUP_H */
