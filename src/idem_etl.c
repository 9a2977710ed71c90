/*
 * idem_etl.c
 *		Module entry point and the helper that returns a function's row.
 */
#include "postgres.h"

#include <limits.h>

#include "compat.h"

#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "postmaster/postmaster.h"
#include "storage/ipc.h"
#include "storage/shmem.h"
#include "tcop/utility.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/tuplestore.h"

#include "state/audit.h"
#include "idem_etl.h"
#include "state/ledger.h"
#include "state/progress.h"
#include "worker/worker.h"

PG_MODULE_MAGIC;

/* Settings (see README, "Settings") */
int			idem_keep_replaced = 0;		/* seconds */
int			idem_lock_timeout = 5000;	/* milliseconds */
int			idem_lock_retries = 5;
char	   *idem_partition_time_zone = NULL;
int			idem_max_workers = 2;
int			idem_naptime = 1000;
int			idem_max_backoff = 300;
int			idem_job_retention = 7 * 24 * 3600;
int			idem_run_retention = 90 * 24 * 3600;
bool		idem_preloaded = false;

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;
static ProcessUtility_hook_type prev_ProcessUtility = NULL;

/*
 * Only DROP DATABASE concerns idem_etl: its workers must leave first (as far
 * as the caller may make them, see worker_stop_for_dropdb).
 */
static void
idem_ProcessUtility(PlannedStmt *pstmt, const char *queryString,
					bool readOnlyTree,
					ProcessUtilityContext context, ParamListInfo params,
					QueryEnvironment *queryEnv, DestReceiver *dest,
					QueryCompletion *qc)
{
	if (IsA(pstmt->utilityStmt, DropdbStmt))
		worker_stop_for_dropdb((DropdbStmt *) pstmt->utilityStmt,
							   context == PROCESS_UTILITY_TOPLEVEL);
	if (prev_ProcessUtility)
		prev_ProcessUtility(pstmt, queryString, readOnlyTree, context, params,
							queryEnv, dest, qc);
	else
		standard_ProcessUtility(pstmt, queryString, readOnlyTree, context, params,
								queryEnv, dest, qc);
}

static void
idem_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(worker_shmem_size());
	RequestAddinShmemSpace(progress_shmem_size());
	worker_shmem_request();
}

static void
idem_shmem_startup(void)
{
	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();
	worker_shmem_init();
	progress_shmem_init();
}

void		_PG_init(void);

void
_PG_init(void)
{
	if (IsBinaryUpgrade)
		return;

	DefineCustomIntVariable("idem_etl.keep_replaced",
							"How long a replaced partition is kept, detached, so that it can be restored.",
							"Used when etl_replace_partition is called with keep_replaced NULL; 0 drops the replaced data at commit.",
							&idem_keep_replaced, 0, 0, INT_MAX,
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

	MarkGUCPrefixReserved("idem_etl");

	/* The workers need the library loaded at server start. */
	if (!process_shared_preload_libraries_in_progress)
		return;
	idem_preloaded = true;
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = idem_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = idem_shmem_startup;
	prev_ProcessUtility = ProcessUtility_hook;
	ProcessUtility_hook = idem_ProcessUtility;
	worker_register_launcher();
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
idem_canonical_output(void)
{
	int			nestlevel = NewGUCNestLevel();

	(void) set_config_option("datestyle", "ISO", PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	(void) set_config_option("intervalstyle", "postgres", PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	(void) set_config_option("extra_float_digits", "1", PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	return nestlevel;
}

/*
 * Argument n is NULL, or not passed at all: a database whose objects are
 * still at an older version declares the function with fewer arguments.
 */
bool
idem_arg_isnull(FunctionCallInfo fcinfo, int n)
{
	return n >= PG_NARGS() || PG_ARGISNULL(n);
}

/* A text argument as a C string, NULL for SQL NULL (or not passed). */
char *
idem_text_arg(FunctionCallInfo fcinfo, int n)
{
	return idem_arg_isnull(fcinfo, n) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(n));
}

/*
 * The tuplestore a function declared RETURNS TABLE fills with its rows.
 * Such functions are set-returning; materialize mode lets them hand back
 * their rows without the value-per-call protocol.
 */
Tuplestorestate *
idem_srf_store(FunctionCallInfo fcinfo, TupleDesc *desc)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	TupleDesc	tupdesc;
	Oid			rettype;
	MemoryContext oldcxt;
	Tuplestorestate *store;

	if (rsinfo == NULL || !IsA(rsinfo, ReturnSetInfo) ||
		(rsinfo->allowedModes & SFRM_Materialize) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("set-valued function called in context that cannot accept a set")));

	oldcxt = MemoryContextSwitchTo(rsinfo->econtext->ecxt_per_query_memory);
	switch (get_call_result_type(fcinfo, &rettype, &tupdesc))
	{
		case TYPEFUNC_COMPOSITE:
			tupdesc = CreateTupleDescCopy(tupdesc);
			break;
		case TYPEFUNC_SCALAR:
			tupdesc = CreateTemplateTupleDesc(1);
			TupleDescInitEntry(tupdesc, (AttrNumber) 1, "result", rettype, -1, 0);
			TupleDescFinalize(tupdesc);
			break;
		default:
			elog(ERROR, "return type must be a row type or a scalar");
	}
	tupdesc = BlessTupleDesc(tupdesc);
	store = tuplestore_begin_heap(false, false, work_mem);
	rsinfo->returnMode = SFRM_Materialize;
	rsinfo->setResult = store;
	rsinfo->setDesc = tupdesc;
	MemoryContextSwitchTo(oldcxt);
	*desc = tupdesc;
	return store;
}

/* Return one row from a function declared RETURNS TABLE. */
Datum
idem_return_row(FunctionCallInfo fcinfo, Datum *values, bool *nulls)
{
	TupleDesc	desc;
	Tuplestorestate *store = idem_srf_store(fcinfo, &desc);

	tuplestore_putvalues(store, desc, values, nulls);
	return (Datum) 0;
}
