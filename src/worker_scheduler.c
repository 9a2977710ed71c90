/*
 * worker_scheduler.c
 *		The scheduler of one database: every naptime it requeues the jobs of
 *		dead workers, runs the janitor, and starts a job worker for each due
 *		job while idem_etl.max_workers allows.  It exits when the database
 *		does not have the extension (any more).
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/pg_authid.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#include "jobs.h"
#include "kept.h"
#include "sql_build.h"
#include "worker.h"

static bool
extension_present(void)
{
	return OidIsValid(get_extension_oid("idem_etl", true));
}

/* The job workers this scheduler started, each holding a slot. */
typedef struct RunningJob
{
	int			slot;
	BackgroundWorkerHandle *handle;
} RunningJob;

static List *running = NIL;

static void
release_slots(int code, Datum arg)
{
	ListCell   *lc;

	foreach(lc, running)
		worker_slot_release(((RunningJob *) lfirst(lc))->slot);
	running = NIL;
}

/* Free the slots of job workers that have stopped. */
static void
reap(void)
{
	ListCell   *lc;

	foreach(lc, running)
	{
		RunningJob *rj = lfirst(lc);
		pid_t		pid;

		if (GetBackgroundWorkerPid(rj->handle, &pid) == BGWH_STOPPED)
		{
			worker_slot_release(rj->slot);
			running = foreach_delete_current(running, lc);
			pfree(rj->handle);
			pfree(rj);
		}
	}
}

/* Pids of the job workers this scheduler started that are running. */
static List *
live_pids(void)
{
	List	   *pids = NIL;
	ListCell   *lc;

	foreach(lc, running)
	{
		pid_t		pid;

		if (GetBackgroundWorkerPid(((RunningJob *) lfirst(lc))->handle, &pid) == BGWH_STARTED)
			pids = lappend_int(pids, (int) pid);
	}
	return pids;
}

/*
 * Requeue jobs of dead workers, drop expired replaced partitions, delete old
 * finished jobs.  False when the extension is gone.
 */
static bool
housekeeping(void)
{
	bool		present;

	worker_begin_tx("idem_etl: housekeeping");
	present = extension_present();
	if (present && jobs_lock_state())
	{
		int			requeued = jobs_requeue_dead(live_pids());

		if (requeued > 0)
			ereport(LOG,
					(errmsg("idem_etl requeued %d job(s) whose worker ended before finishing",
							requeued)));
		(void) kept_cleanup();
		(void) jobs_purge_finished();
	}
	worker_end_tx();
	return present;
}

/*
 * Start the job's worker; its slot is then released by reap().  Returns
 * BGWH_POSTMASTER_DIED when no worker could be registered at all.
 */
static BgwHandleStatus
start_job_worker(JobStart *job, int slot, pid_t *pid)
{
	BackgroundWorker bgw;
	RunningJob *rj;
	MemoryContext oldcxt;

	worker_describe(&bgw, "idem_job_main", "idem_etl job");
	snprintf(bgw.bgw_name, BGW_MAXLEN, "idem_etl job " INT64_FORMAT, job->job_id);
	memcpy(bgw.bgw_extra, job, sizeof(JobStart));

	oldcxt = MemoryContextSwitchTo(TopMemoryContext);
	rj = palloc(sizeof(RunningJob));
	rj->slot = slot;
	if (!RegisterDynamicBackgroundWorker(&bgw, &rj->handle))
	{
		MemoryContextSwitchTo(oldcxt);
		pfree(rj);
		return BGWH_POSTMASTER_DIED;
	}
	running = lappend(running, rj);
	MemoryContextSwitchTo(oldcxt);
	return WaitForBackgroundWorkerStartup(rj->handle, pid);
}

/*
 * Why a job worker could not connect as the role, or NULL.  A role dropped
 * after submitting fails its jobs with a clear error instead of a worker
 * dying at connection time again and again.
 */
static char *
role_problem(Oid roleoid)
{
	HeapTuple	tup = SearchSysCache1(AUTHOID, ObjectIdGetDatum(roleoid));
	char	   *problem = NULL;

	if (!HeapTupleIsValid(tup))
		return psprintf("42704: role with OID %u, which submitted the job, does not exist any more",
						roleoid);
#if PG_VERSION_NUM < 160000
	if (!((Form_pg_authid) GETSTRUCT(tup))->rolcanlogin)
		problem = psprintf("28000: role \"%s\" is not permitted to log in, and jobs run as the role that submitted them",
						   NameStr(((Form_pg_authid) GETSTRUCT(tup))->rolname));
#endif
	ReleaseSysCache(tup);
	return problem;
}

/* Start workers for due jobs while slots are free. */
static void
dispatch(void)
{
	reap();
	for (;;)
	{
		JobStart	job;
		int			slot;
		pid_t		pid;
		bool		claimed;
		char	   *problem;

		CHECK_FOR_INTERRUPTS();
		slot = worker_slot_reserve();
		if (slot < 0)
			return;
		job.dboid = MyDatabaseId;

		worker_begin_tx("idem_etl: claiming a job");
		claimed = jobs_lock_state() && jobs_claim_next(&job.job_id, &job.roleoid);
		if (claimed && (problem = role_problem(job.roleoid)) != NULL)
		{
			jobs_fail(job.job_id, problem);
			worker_end_tx();
			worker_slot_release(slot);
			continue;
		}
		worker_end_tx();
		if (!claimed)
		{
			worker_slot_release(slot);
			return;
		}

		switch (start_job_worker(&job, slot, &pid))
		{
			case BGWH_STARTED:
				break;
			case BGWH_POSTMASTER_DIED:
				/* no background worker slot: the job waits, unharmed */
				ereport(LOG,
						(errmsg("idem_etl could not start a job worker"),
						 errhint("Raise max_worker_processes.")));
				worker_slot_release(slot);
				worker_begin_tx("idem_etl: job worker did not start");
				jobs_unclaim(job.job_id);
				worker_end_tx();
				return;
			default:

				/*
				 * Already gone: a job that ran marked itself; one still
				 * marked running is requeued by the next housekeeping.
				 */
				reap();
				return;
		}
		worker_begin_tx("idem_etl: job worker started");
		jobs_set_pid(job.job_id, pid);
		worker_end_tx();
	}
}

/*
 * The loop allocates in a context reset every round (transactions switch
 * away from it and back to TopMemoryContext, see worker_end_tx); the
 * running job workers' entries live in TopMemoryContext and are freed by
 * reap().
 */
void
idem_scheduler_main(Datum arg)
{
	MemoryContext loopcxt;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	worker_register_proc(DatumGetObjectId(arg));
	BackgroundWorkerInitializeConnectionByOid(DatumGetObjectId(arg), InvalidOid, 0);
	worker_pin_session();
	pgstat_report_appname("idem_etl scheduler");
	on_shmem_exit(release_slots, (Datum) 0);
	loopcxt = AllocSetContextCreate(TopMemoryContext, "idem_etl scheduler loop",
									ALLOCSET_DEFAULT_SIZES);

	for (;;)
	{
		MemoryContextReset(loopcxt);
		MemoryContextSwitchTo(loopcxt);
		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}
		if (!housekeeping())
			proc_exit(0);
		dispatch();
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 idem_naptime, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
}
