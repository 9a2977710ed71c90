/*
 * rebuild.h
 *		One partition (or a plain table's rows for a value) rebuilt: what
 *		replace.c (etl_replace_partition, etl_replace_partitions) and
 *		replace_where.c (etl_replace_where, and the slices of
 *		etl_replace_partition) share.
 */
#ifndef IDEM_REBUILD_H
#define IDEM_REBUILD_H

#include "datatype/timestamp.h"
#include "fmgr.h"
#include "state/ledger.h"
#include "replace/partmap.h"
#include "util/target.h"
#include "stage/stage.h"

typedef struct ReplaceArgs
{
	TargetInfo *target;
	PartKey    *pk;				/* NULL: a plain table (etl_replace_where) */
	Stage	   *stage;			/* the source, planned */
	Interval   *granularity;
	Interval   *keep;			/* NULL: drop replaced data at commit */
	char	   *run_key;
	char	   *expect;			/* audit of the new rows, or NULL */
	double		min_ratio;		/* refuse to shrink below, 0: off */
	bool		allow_shrink;
	char	   *condition;		/* etl_replace_where: the rows replaced */
	char	   *schema_changes; /* what on_schema_change did, or NULL */
} ReplaceArgs;

typedef struct ReplaceResult
{
	int64		run_id;
	Oid			partition;
	int64		loaded;
	int64		replaced;
	bool		skipped;
} ReplaceResult;

/*
 * Why a run_key rerun loads a partition again that the run it matches left
 * in place (rebuild_same_as_prior, and etl_replace_where's partitions).
 */
#define REPLACE_PARTITION_GONE_DETAIL \
	"The partition was dropped, detached, replaced by another table, or rewritten (TRUNCATE, VACUUM FULL, CLUSTER) since."

extern Interval *rebuild_keep_interval(FunctionCallInfo fcinfo, int n);
extern char *rebuild_options(Stage *stage, const char *bound);
extern bool rebuild_same_as_prior(ReplaceArgs *a, Oid partoid, const char *value,
								  const char *bound, LedgerRun *run);
extern void rebuild_start_run(LedgerRun *run, ReplaceArgs *a, const char *value,
							  const char *bound, const char *table);
extern const char *rebuild_default_part_name(PartKey *pk);
extern void rebuild_refuse_null_values(ReplaceArgs *a);
extern void rebuild_lock_writers(Oid relid);
extern void rebuild_partition(ReplaceArgs *a, PartSlot *slot, StageGroups *g,
							  const char *fingerprint, int64 nrows, ReplaceResult *r);

#endif							/* IDEM_REBUILD_H */
