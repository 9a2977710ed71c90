/*
 * idem_etl.c
 *		Module entry point: settings, shared memory, hooks and the launcher
 *		registered at load time.
 */
#include "postgres.h"

#include "fmgr.h"
#include "miscadmin.h"
#include "postmaster/postmaster.h"
#include "storage/ipc.h"
#include "storage/shmem.h"
#include "tcop/utility.h"

#include "replace/kept.h"
#include "state/progress.h"
#include "util/settings.h"
#include "worker/worker.h"

PG_MODULE_MAGIC;

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

	settings_define();

	/* kept partitions tell the worker when its janitor is due */
	kept_due_hook = worker_note_housekeeping;

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
