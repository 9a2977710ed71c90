/*
 * settings.c
 *		idem_etl's settings (the idem_etl.* GUCs, see README, "Settings"),
 *		and the session settings under which values print canonically.
 */
#include "postgres.h"

#include <limits.h>

#include "compat.h"

#include "miscadmin.h"
#include "postmaster/postmaster.h"
#include "utils/guc.h"

#include "util/settings.h"

int			idem_keep_replaced = 86400; /* seconds */
int			idem_lock_timeout = 5000;	/* milliseconds */
int			idem_lock_retries = 5;
char	   *idem_partition_time_zone = NULL;
int			idem_max_workers = 2;
int			idem_naptime = 1000;
int			idem_max_backoff = 300;
int			idem_job_retention = 7 * 24 * 3600;
int			idem_run_retention = 90 * 24 * 3600;
double		idem_min_replaced_ratio = 0;
bool		idem_allow_shrink = false;
bool		idem_track_progress = true;
int			idem_citus_inline_rows = 1000;
bool		idem_citus_parallel_shards = false;

/* True in every process of a server that preloaded the library. */
bool		idem_preloaded = false;

/* Defines every idem_etl.* setting; called once, from _PG_init. */
void
settings_define(void)
{
	DefineCustomIntVariable("idem_etl.keep_replaced",
							"How long a replaced partition is kept, detached, so that it can be restored.",
							"Used when etl_replace_partition is called with keep_replaced NULL; 0 drops the replaced data at commit.",
							&idem_keep_replaced, 86400, 0, INT_MAX,
							PGC_USERSET, GUC_UNIT_S, NULL, NULL, NULL);
	DefineCustomIntVariable("idem_etl.lock_timeout",
							"How long one try of a partition swap waits for its locks.",
							NULL,
							&idem_lock_timeout, 5000, 1, INT_MAX,
							PGC_USERSET, GUC_UNIT_MS, NULL, NULL, NULL);
	DefineCustomIntVariable("idem_etl.lock_retries",
							"How many more times a partition swap tries after its first try timed out.",
							NULL,
							&idem_lock_retries, 5, 0, 1000,
							PGC_USERSET, 0, NULL, NULL, NULL);
	DefineCustomStringVariable("idem_etl.partition_time_zone",
							   "Time zone in which timestamptz partition bounds are aligned and partition values without an offset are read.",
							   NULL,
							   &idem_partition_time_zone, "UTC",
							   PGC_USERSET, 0, NULL, NULL, NULL);

	DefineCustomRealVariable("idem_etl.min_replaced_ratio",
							 "Smallest fraction of a partition's rows that a replacement may load.",
							 "A replacement that would leave fewer rows is refused (IE002) unless the call passes allow_shrink; 0 turns the check off.",
							 &idem_min_replaced_ratio, 0, 0, 1,
							 PGC_USERSET, 0, NULL, NULL, NULL);
	DefineCustomBoolVariable("idem_etl.allow_shrink",
							 "Whether a replacement or a delete_missing may remove rows without the call passing allow_shrink.",
							 "Off: replacing rows with none, or fewer than min_replaced_ratio of them, is refused (IE002) unless the call passes allow_shrink => true.",
							 &idem_allow_shrink, false,
							 PGC_USERSET, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("idem_etl.max_workers",
							"Most job workers running at once, across the cluster.",
							NULL,
							&idem_max_workers, 2, 0, MAX_BACKENDS,
							PGC_SIGHUP, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("idem_etl.naptime",
							"How often the launcher and the schedulers look for work.",
							NULL,
							&idem_naptime, 1000, 10, 3600 * 1000,
							PGC_SIGHUP, GUC_UNIT_MS, NULL, NULL, NULL);
	DefineCustomIntVariable("idem_etl.max_backoff",
							"Longest wait before a job's next attempt after a transient error.",
							NULL,
							&idem_max_backoff, 300, 1, INT_MAX,
							PGC_SIGHUP, GUC_UNIT_S, NULL, NULL, NULL);
	DefineCustomIntVariable("idem_etl.job_retention",
							"How long finished jobs stay in idem_etl.jobs.",
							NULL,
							&idem_job_retention, 7 * 24 * 3600, 0, INT_MAX,
							PGC_SIGHUP, GUC_UNIT_S, NULL, NULL, NULL);

	DefineCustomBoolVariable("idem_etl.track_progress",
							 "Report the phase and rows of running calls in idem_etl.progress.",
							 NULL,
							 &idem_track_progress, true,
							 PGC_USERSET, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("idem_etl.run_retention",
							"How long runs stay in the ledger, idem_etl.runs.",
							"Older runs are deleted by the janitor and etl_cleanup, except those a future skip or correction depends on; 0 keeps every run.",
							&idem_run_retention, 90 * 24 * 3600, 0, INT_MAX,
							PGC_SIGHUP, GUC_UNIT_S, NULL, NULL, NULL);

	DefineCustomIntVariable("idem_etl.citus_inline_rows",
							"Largest batch that etl_upsert_batch sends to a Citus table as the parameters of its statements.",
							"Larger batches are sampled on the shards and go straight into the target, or through a table placed beside its shards, created and dropped by the call; 0 never sends a batch as parameters.",
							&idem_citus_inline_rows, 1000, 0, 65535,
							PGC_USERSET, 0, NULL, NULL, NULL);
	DefineCustomBoolVariable("idem_etl.citus_parallel_shards",
							 "Run etl_upsert_batch's statements on a Citus table with a connection per shard.",
							 "Off: Citus's sequential mode, one connection per worker, which costs less for batches of up to millions of rows on workers of few cores.",
							 &idem_citus_parallel_shards, false,
							 PGC_USERSET, 0, NULL, NULL, NULL);

	MarkGUCPrefixReserved("idem_etl");
}

/*
 * Set the setting name to value until the GUC nest level the caller opened
 * (NewGUCNestLevel) ends: AtEOXact_GUC(true, level) restores it, and so
 * does an error.  As SET in a function with a SET clause would.
 */
void
settings_save(const char *name, const char *value)
{
	(void) set_config_option(name, value, PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
}

/*
 * Print dates, timestamps, intervals and floats in one style, whatever the
 * session's, until AtEOXact_GUC(true, <the level returned>): run values are
 * keys of the ledger and of partition bounds, and must not depend on
 * DateStyle, nor lose digits (extra_float_digits 0 or less rounds
 * 0.30000000000000004 to 0.3, another value).  Only the output style
 * changes, not how input is read; the source query runs with it too (a
 * cast to text in it prints in these styles: README, How a partition is
 * replaced).
 */
int
settings_canonical_output(void)
{
	int			nestlevel = NewGUCNestLevel();

	settings_save("datestyle", "ISO");
	settings_save("intervalstyle", "postgres");
	settings_save("extra_float_digits", "1");
	return nestlevel;
}
