/*
 * worker_common.c
 *		What the launcher, the schedulers and the job workers share: how they
 *		are described to the postmaster, and their transactions.
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "commands/dbcommands.h"
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

/*
 * DROP DATABASE refuses while other sessions are connected, and a scheduler
 * stays connected to its database: ask idem_etl's workers there to exit
 * first (DROP DATABASE waits a few seconds for them).  The launcher starts
 * no new scheduler there for a while (PROBE_EVERY naptimes).
 */
void
worker_stop_in_database(const char *dbname)
{
	Oid			dboid = get_database_oid(dbname, true);
	Oid			argtypes[1] = {OIDOID};
	Datum		args[1];
	uint64		n;

	if (!OidIsValid(dboid))
		return;
	args[0] = ObjectIdGetDatum(dboid);
	SPI_connect();
	if (SPI_execute_with_args("SELECT pid FROM pg_catalog.pg_stat_activity"
							  " WHERE datid = $1 AND backend_type IN"
							  " ('idem_etl scheduler', 'idem_etl job')",
							  1, argtypes, args, NULL, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "listing idem_etl's workers failed");
	n = SPI_processed;
	for (uint64 i = 0; i < n; i++)
	{
		bool		isnull;
		pid_t		pid = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[i],
													  SPI_tuptable->tupdesc, 1, &isnull));

		if (!isnull)
			(void) kill(pid, SIGTERM);
	}
	SPI_finish();
}
