/*
 * worker_job.c
 *		A job worker: connects to the job's database as the role that
 *		submitted it, runs the job's statement in a transaction of its own,
 *		and records the outcome.  One attempt per worker; retries are new
 *		workers, started after the backoff.
 */
#include "postgres.h"

#include "access/xact.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "storage/ipc.h"
#include "storage/proc.h"
#include "tcop/tcopprot.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timeout.h"

#include "worker/jobs.h"
#include "worker/worker.h"

void
worker_job_main(Datum arg)
{
	JobStart	job;
	char	   *command;
	MemoryContext workcxt;
	ErrorData  *volatile failure = NULL;

	memcpy(&job, MyBgworkerEntry->bgw_extra, sizeof(JobStart));
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	worker_register_proc(job.dboid, job.roleoid);
	worker_job_running(job.slot, job.job_id);

	/*
	 * Without BGWORKER_BYPASS_ROLELOGINCHECK (17 and later): a role without
	 * LOGIN runs no job on any major, since NOLOGIN is how a DBA disables a
	 * role (the dispatcher fails such jobs before they start).
	 */
	BackgroundWorkerInitializeConnectionByOid(job.dboid, job.roleoid, 0);
	workcxt = AllocSetContextCreate(TopMemoryContext, "idem_etl job", ALLOCSET_DEFAULT_SIZES);

	/* record our pid, committed, so that etl_cancel can reach us */
	worker_begin_tx(NULL);
	command = jobs_start(job.job_id);
	if (command)
		command = MemoryContextStrdup(workcxt, command);
	worker_end_tx();
	if (command == NULL)
	{
		/* cancelled since it was claimed */
		worker_job_finished(job.slot, false);
		proc_exit(0);
	}
	pgstat_report_activity(STATE_RUNNING, command);
	debug_query_string = command;

	/*
	 * The job's statement and the 'succeeded' mark commit together, so a
	 * crash leaves the job running, and it is then retried.
	 */
	worker_begin_tx(NULL);
	PG_TRY();
	{
		int			rc;

		/* a backend arms statement_timeout per statement; so must we */
		if (StatementTimeout > 0)
			enable_timeout_after(STATEMENT_TIMEOUT, StatementTimeout);
		rc = SPI_execute(command, false, 0);
		if (rc < 0)
			elog(ERROR, "SPI_execute failed: %s", SPI_result_code_string(rc));
		disable_timeout(STATEMENT_TIMEOUT, false);
		jobs_succeeded(job.job_id);
		worker_end_tx();
	}
	PG_CATCH();
	{
		disable_timeout(STATEMENT_TIMEOUT, false);
		MemoryContextSwitchTo(workcxt);
		failure = CopyErrorData();
		EmitErrorReport();
		FlushErrorState();
		AbortCurrentTransaction();
	}
	PG_END_TRY();

	if (failure)
	{
		worker_begin_tx(NULL);
		jobs_attempt_failed(job.job_id, failure->sqlerrcode, failure->message);
		worker_end_tx();
	}
	/* a failed attempt may be queued again: the database is looked at */
	worker_job_finished(job.slot, failure != NULL);
	debug_query_string = NULL;
	proc_exit(0);
}
