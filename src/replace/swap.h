/*
 * swap.h
 *		The short step: detach the old partition, attach the new one, waiting
 *		for locks a bounded time and retrying.
 */
#ifndef IDEM_SWAP_H
#define IDEM_SWAP_H

#include "util/target.h"

typedef struct SwapSpec
{
	TargetInfo *parent;
	const char *schema;			/* quoted schema of parent and partitions */
	const char *old_name;		/* partition to detach, or NULL */
	const char *keep_name;		/* rename the detached one to this, or NULL to
								 * drop it */
	const char *new_name;		/* the loaded table */
	const char *final_name;		/* the name it takes as partition */
	const char *bound_sql;		/* FOR VALUES ... */
	bool		distributed;	/* Citus distributes the parent: see
								 * swap_partition */
} SwapSpec;

extern void swap_serialize(Oid relid);
extern void swap_partition(const SwapSpec *spec);

#endif							/* IDEM_SWAP_H */
