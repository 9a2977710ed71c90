/*
 * worker_common.c
 *		What the launcher, the schedulers and the job workers share: how they
 *		are described to the postmaster, and their transactions.
 */
#include "postgres.h"

#include "access/xact.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/postmaster.h"
#include "utils/snapmgr.h"

#include "worker.h"

/*
 * Describe one of idem_etl's workers: type is what pg_stat_activity shows
 * as backend_type.  Only the launcher restarts by itself; the others are
 * started again by their parent, which is notified when they stop.
 */
void
worker_describe(BackgroundWorker *bgw, const char *function, const char *type)
{
	memset(bgw, 0, sizeof(BackgroundWorker));
	bgw->bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	bgw->bgw_start_time = BgWorkerStart_RecoveryFinished;
	bgw->bgw_restart_time = BGW_NEVER_RESTART;
	snprintf(bgw->bgw_library_name, BGW_MAXLEN, "idem_etl");
	snprintf(bgw->bgw_function_name, BGW_MAXLEN, "%s", function);
	snprintf(bgw->bgw_name, BGW_MAXLEN, "%s", type);
	snprintf(bgw->bgw_type, BGW_MAXLEN, "%s", type);
	if (MyProcPid != PostmasterPid)
		bgw->bgw_notify_pid = MyProcPid;
}

/*
 * A unit of a worker's work: transaction, SPI and snapshot, shown in
 * pg_stat_activity as activity (when not NULL).
 */
void
worker_begin_tx(const char *activity)
{
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());
	if (activity)
		pgstat_report_activity(STATE_RUNNING, activity);
}

void
worker_end_tx(void)
{
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
	pgstat_report_stat(false);
	pgstat_report_activity(STATE_IDLE, NULL);
}
