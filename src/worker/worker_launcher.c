/*
 * worker_launcher.c
 *		The launcher: the one background worker that stays, started with the
 *		server when idem_etl is preloaded.  It connects to no database.  It
 *		sleeps until a database has due work (shared memory says which and
 *		when, see worker_shmem.c), then starts a dispatcher there (one at a
 *		time), and a job worker for each job the dispatcher claimed.  An idle
 *		cluster costs this one process, whatever the number of databases.
 *
 * At start (also after a crash, which empties shared memory) it visits
 * every database once, one after the other, to learn its work again.
 */
#include "postgres.h"

#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/pg_database.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "tcop/tcopprot.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#include "worker/worker.h"
#include "util/settings.h"

/* After a visit that failed (DROP DATABASE under way, say), wait this long. */
#define RETRY_NAPTIMES 10

/* Warnings about missing background worker slots, at most this often. */
#define WARN_EVERY_MS (60 * 1000)

static BackgroundWorkerHandle *dispatcher = NULL;
static Oid	dispatcher_db = InvalidOid;
static TimestampTz dispatcher_started = 0;
static BackgroundWorkerHandle **job_handles = NULL; /* per job slot */
static TimestampTz last_warning = 0;

void
worker_register_launcher(void)
{
	BackgroundWorker bgw;

	worker_describe(&bgw, "worker_launcher_main", "idem_etl launcher");
	bgw.bgw_restart_time = 5;
	RegisterBackgroundWorker(&bgw);
}

/* The connectable databases, in the caller's memory context. */
static List *
list_databases(void)
{
	List	   *oids = NIL;
	MemoryContext cxt = CurrentMemoryContext;
	Relation	rel;
	TableScanDesc scan;
	HeapTuple	tup;

	StartTransactionCommand();
	rel = table_open(DatabaseRelationId, AccessShareLock);
	scan = table_beginscan_catalog(rel, 0, NULL);
	while ((tup = heap_getnext(scan, ForwardScanDirection)) != NULL)
	{
		Form_pg_database db = (Form_pg_database) GETSTRUCT(tup);

		if (db->datallowconn && !db->datistemplate)
		{
			MemoryContext oldcxt = MemoryContextSwitchTo(cxt);

			oids = lappend_oid(oids, db->oid);
			MemoryContextSwitchTo(oldcxt);
		}
	}
	table_endscan(scan);
	table_close(rel, AccessShareLock);
	CommitTransactionCommand();
	MemoryContextSwitchTo(cxt);
	return oids;
}

/*
 * No background worker slot was free: the work waits, visibly (the reason
 * in idem_etl.worker_status), and a WARNING says which setting to raise, at
 * most once a minute.
 */
static void
no_worker_slot(Oid dboid, const char *what)
{
	char		reason[128];
	TimestampTz now = GetCurrentTimestamp();

	snprintf(reason, sizeof(reason),
			 "no free background worker slot (max_worker_processes = %d)",
			 max_worker_processes);
	worker_set_reason(dboid, reason);
	if (TimestampDifferenceExceeds(last_warning, now, WARN_EVERY_MS))
	{
		ereport(WARNING,
				(errmsg("idem_etl could not start a %s: no free background worker slot", what),
				 errdetail("max_worker_processes is %d, and every slot is taken; queued jobs wait.",
						   max_worker_processes),
				 errhint("Raise max_worker_processes (it needs a restart), or lower idem_etl.max_workers.")));
		last_warning = now;
	}
}

static bool
start_worker(BackgroundWorker *bgw, BackgroundWorkerHandle **handle)
{
	MemoryContext oldcxt = MemoryContextSwitchTo(TopMemoryContext);
	bool		ok = RegisterDynamicBackgroundWorker(bgw, handle);

	MemoryContextSwitchTo(oldcxt);
	return ok;
}

static bool
stopped(BackgroundWorkerHandle *handle)
{
	pid_t		pid;

	return GetBackgroundWorkerPid(handle, &pid) == BGWH_STOPPED;
}

/* Job workers that stopped give their slot back. */
static void
reap_jobs(void)
{
	for (int i = 0; i < max_worker_processes; i++)
		if (job_handles[i] && stopped(job_handles[i]))
		{
			worker_job_gone(i);
			pfree(job_handles[i]);
			job_handles[i] = NULL;
		}
}

/*
 * The dispatcher has stopped.  One that did not report (it could not
 * connect: the database is being dropped, say) makes the launcher forget a
 * database that is gone, and come back later to one that is not.
 */
static void
reap_dispatcher(void)
{
	if (dispatcher == NULL || !stopped(dispatcher))
		return;
	if (!worker_visit_reported(dispatcher_db, dispatcher_started))
	{
		if (!list_member_oid(list_databases(), dispatcher_db))
			worker_forget_database(dispatcher_db);
		else
		{
			worker_visit_failed(dispatcher_db,
								TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
															(int64) idem_naptime * RETRY_NAPTIMES));
			worker_set_reason(dispatcher_db,
							  "the last visit of the database failed (see the server log); trying again");
		}
	}
	worker_release_reserved(dispatcher_db);
	pfree(dispatcher);
	dispatcher = NULL;
}

/* Start the job worker of every claimed slot. */
static void
start_jobs(void)
{
	JobStart	job;

	while (worker_next_claimed(&job))
	{
		BackgroundWorker bgw;

		worker_describe(&bgw, "worker_job_main", "idem_etl job");
		snprintf(bgw.bgw_name, BGW_MAXLEN, "idem_etl job " INT64_FORMAT, job.job_id);
		memcpy(bgw.bgw_extra, &job, sizeof(JobStart));
		if (start_worker(&bgw, &job_handles[job.slot]))
		{
			worker_job_started(job.slot, true);
			last_warning = 0;	/* a new stall is reported at once */
		}
		else
		{
			job_handles[job.slot] = NULL;
			worker_job_started(job.slot, false);
			no_worker_slot(job.dboid, "job worker");
			return;
		}
	}
}

/* Start a dispatcher where work is due; returns when to look again. */
static TimestampTz
dispatch(TimestampTz now)
{
	DispatchStart ds;
	TimestampTz wake;
	BackgroundWorker bgw;

	if (dispatcher != NULL)
		return DT_NOEND;		/* its end wakes us */
	ds.dboid = worker_next_visit(now, &ds.nclaim, &wake);
	if (!OidIsValid(ds.dboid))
		return wake;
	worker_describe(&bgw, "worker_dispatcher_main", "idem_etl dispatcher");
	snprintf(bgw.bgw_name, BGW_MAXLEN, "idem_etl dispatcher for database %u", ds.dboid);
	memcpy(bgw.bgw_extra, &ds, sizeof(DispatchStart));
	if (!start_worker(&bgw, &dispatcher))
	{
		dispatcher = NULL;
		worker_visit_failed(ds.dboid, TimestampTzPlusMilliseconds(now, idem_naptime));
		no_worker_slot(ds.dboid, "dispatcher");
		return TimestampTzPlusMilliseconds(now, idem_naptime);
	}
	dispatcher_db = ds.dboid;
	dispatcher_started = now;
	return DT_NOEND;
}

/*
 * The loop allocates in a context reset every round; the workers' handles
 * live in TopMemoryContext and are freed when the workers are reaped.
 */
void
worker_launcher_main(Datum arg)
{
	MemoryContext loopcxt;
	ListCell   *lc;
	TimestampTz now;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnection(NULL, NULL, 0);
	pgstat_report_appname("idem_etl launcher");
	worker_launcher_attach();
	job_handles = MemoryContextAllocZero(TopMemoryContext,
										 sizeof(BackgroundWorkerHandle *) * max_worker_processes);
	loopcxt = AllocSetContextCreate(TopMemoryContext, "idem_etl launcher loop",
									ALLOCSET_DEFAULT_SIZES);

	/* learn every database's work again: one visit each */
	MemoryContextSwitchTo(loopcxt);
	now = GetCurrentTimestamp();
	foreach(lc, list_databases())
		worker_add_database(lfirst_oid(lc), now);

	for (;;)
	{
		TimestampTz wake;
		long		timeout;

		MemoryContextReset(loopcxt);
		MemoryContextSwitchTo(loopcxt);
		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}
		reap_jobs();
		reap_dispatcher();

		/*
		 * Claimed jobs start once their dispatcher has exited: with one free
		 * background worker slot left, the job worker needs the dispatcher's.
		 */
		if (dispatcher == NULL)
			start_jobs();
		now = GetCurrentTimestamp();
		wake = dispatch(now);

		/*
		 * Sleep until the next due time, or until a backend notes work, a
		 * worker starts or stops (both set our latch); at most a naptime when
		 * waiting for a worker, a minute otherwise.
		 */
		if (wake == DT_NOEND)
			timeout = dispatcher ? idem_naptime : 60 * 1000L;
		else
			timeout = Max(1, TimestampDifferenceMilliseconds(GetCurrentTimestamp(), wake));
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 Min(timeout, 60 * 1000L), PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
}
