/*
 * newpart.h
 *		The fresh table that becomes a partition: shaped like the partition it
 *		replaces, loaded, indexed and constrained before any lock on the
 *		parent is taken.
 */
#ifndef IDEM_NEWPART_H
#define IDEM_NEWPART_H

#include "replace/partmap.h"
#include "util/target.h"
#include "stage/stage.h"

typedef struct NewPart
{
	char	   *relname;		/* unquoted, in the parent's schema */
	char	   *qualname;		/* quoted schema.name */
	char	   *schema;			/* quoted schema */
	Oid			relid;
	char	   *distcol;		/* the parent's Citus distribution column, or
								 * NULL */
} NewPart;

extern NewPart *newpart_create(TargetInfo *parent, PartKey *pk, PartSlot *slot);
extern NewPart *newpart_distribute(NewPart *np, TargetInfo *parent, PartSlot *slot);
extern void newpart_bound(NewPart *np, TargetInfo *parent, PartKey *pk, PartSlot *slot);
extern void newpart_finish(NewPart *np, TargetInfo *parent, PartKey *pk, PartSlot *slot);
extern void newpart_check_carryable(TargetInfo *parent, Oid partoid);
extern void newpart_add_bound(const char *qualname, PartSlot *slot);
extern void newpart_copy_privileges(Oid from, Oid to, bool distributed);

#endif							/* IDEM_NEWPART_H */
