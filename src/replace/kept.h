/*
 * kept.h
 *		Replaced partitions kept for a while so that a bad load can be undone:
 *		idem_etl.replaced_partitions, etl_restore_partition, etl_cleanup.
 */
#ifndef IDEM_KEPT_H
#define IDEM_KEPT_H

#include "datatype/timestamp.h"
#include "replace/partmap.h"
#include "util/target.h"

/*
 * Told a kept partition's keep_until when it is recorded, so that the
 * janitor's next visit of the database can be planned.  The worker sets it
 * (in _PG_init): operations never call into the worker, which sits above
 * them.
 */
typedef void (*kept_due_hook_type) (TimestampTz keep_until);
extern PGDLLIMPORT kept_due_hook_type kept_due_hook;

extern char *kept_table_name(Oid partoid);
extern int	kept_cleanup(void);
extern void kept_record(TargetInfo *target, PartSlot *slot, const char *schema,
						const char *kept_name, int64 run_id, Interval *keep);

#endif							/* IDEM_KEPT_H */
