/*
 * partmap.h
 *		Where a value belongs in a partitioned table: the partition that holds
 *		it, or the bounds of the partition to create for it.
 */
#ifndef IDEM_PARTMAP_H
#define IDEM_PARTMAP_H

#include "datatype/timestamp.h"
#include "util/target.h"

typedef struct PartKey
{
	char		strategy;		/* 'r', 'l', or 0 for a plain table */
	TargetColumn *column;		/* the partition column */
	Oid			default_part;	/* InvalidOid when there is none */
	Oid			opfamily;		/* the key's operator family and input type */
	Oid			opcintype;
} PartKey;

typedef struct PartSlot
{
	char	   *value;			/* the value, as its type prints it */
	Oid			partoid;		/* existing partition, or InvalidOid */
	char	   *name;			/* its name, or the name for a new one */
	char	   *bound_sql;		/* FOR VALUES ... */
	char	   *check_sql;		/* the partition constraint, over the column */
} PartSlot;

extern PartKey *partmap_key(TargetInfo *target, const char *partition_column);
extern char *partmap_normalize(PartKey *pk, const char *value);
extern char *partmap_literal(PartKey *pk, const char *text);
extern char *partmap_operator(PartKey *pk, int16 strategy);
extern char *partmap_value_check(PartKey *pk, const char *value);
extern Oid	partmap_find(TargetInfo *target, PartKey *pk, const char *value);
extern PartSlot *partmap_slot(TargetInfo *target, PartKey *pk, const char *value,
							  Interval *granularity);

extern char *partmap_slice_check(TargetInfo *target, PartKey *pk, PartSlot *slot,
								 Interval *granularity, char **range);
extern PartSlot *partmap_slot_locked(TargetInfo *target, PartKey *pk,
									 const char *value, Interval *granularity);

#endif							/* IDEM_PARTMAP_H */
