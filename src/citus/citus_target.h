/*
 * citus_target.h
 *		Whether a target is a Citus table, and which kind: distributed (by
 *		hash on a column, or in one shard), or a reference table.
 */
#ifndef IDEM_CITUS_TARGET_H
#define IDEM_CITUS_TARGET_H

#include "util/target.h"

typedef enum CitusTableKind
{
	CITUS_DISTRIBUTED,			/* hash-distributed on dist_column, or a
								 * single-shard table (dist_column NULL) */
	CITUS_REFERENCE				/* one shard, a copy on every node */
} CitusTableKind;

typedef struct CitusTarget
{
	CitusTableKind kind;
	char	   *dist_column;	/* CITUS_DISTRIBUTED only; NULL when
								 * single-shard */
} CitusTarget;

extern bool citus_dist_partition_row(Oid relid);
extern CitusTarget *citus_target_lookup(TargetInfo *target, const char *operation);
extern void citus_target_refuse(TargetInfo *target, const char *operation);
extern void citus_target_check_key(CitusTarget *ct, TargetInfo *target,
								   ArrayType *key_columns);

#endif							/* IDEM_CITUS_TARGET_H */
