/*
 * worker_launcher.c
 *		The launcher: one background worker for the cluster, started with the
 *		server when idem_etl is preloaded.  It connects to no database; every
 *		naptime it lists the databases and keeps a scheduler running in each
 *		that has the extension.
 *
 * Whether a database has the extension can only be seen from inside it, so
 * the launcher starts a scheduler there, which exits at once when the
 * extension is missing; PROBE_EVERY naptimes after a scheduler stopped, its
 * database is looked at again, so that one that installs the extension
 * later is picked up without a restart (and one being dropped is left
 * alone meanwhile).
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

#include "worker.h"

#define PROBE_EVERY 10

typedef struct SchedulerEntry
{
	Oid			dboid;
	BackgroundWorkerHandle *handle;
	TimestampTz stopped_at;		/* when first seen stopped, or 0 */
	bool		seen;			/* still in pg_database */
} SchedulerEntry;

static List *schedulers = NIL;

void
worker_register_launcher(void)
{
	BackgroundWorker bgw;

	worker_describe(&bgw, "idem_launcher_main", "idem_etl launcher");
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

static void
start_scheduler(SchedulerEntry *entry)
{
	BackgroundWorker bgw;
	MemoryContext oldcxt = MemoryContextSwitchTo(TopMemoryContext);

	if (entry->handle)
		pfree(entry->handle);	/* of a scheduler that has stopped */
	worker_describe(&bgw, "idem_scheduler_main", "idem_etl scheduler");
	snprintf(bgw.bgw_name, BGW_MAXLEN, "idem_etl scheduler for database %u", entry->dboid);
	bgw.bgw_main_arg = ObjectIdGetDatum(entry->dboid);
	if (!RegisterDynamicBackgroundWorker(&bgw, &entry->handle))
	{
		entry->handle = NULL;
		ereport(LOG,
				(errmsg("idem_etl launcher could not start a scheduler for database %u", entry->dboid),
				 errhint("Raise max_worker_processes.")));
	}
	entry->stopped_at = 0;
	MemoryContextSwitchTo(oldcxt);
}

static bool
scheduler_running(SchedulerEntry *entry)
{
	pid_t		pid;

	return entry->handle != NULL &&
		GetBackgroundWorkerPid(entry->handle, &pid) != BGWH_STOPPED;
}

/* Start a scheduler in each database that has none running and is due. */
static void
visit_databases(void)
{
	List	   *oids = list_databases();
	ListCell   *lc;
	ListCell   *lc2;
	TimestampTz now = GetCurrentTimestamp();

	foreach(lc, schedulers)
		((SchedulerEntry *) lfirst(lc))->seen = false;
	foreach(lc, oids)
	{
		Oid			dboid = lfirst_oid(lc);
		SchedulerEntry *entry = NULL;

		foreach(lc2, schedulers)
			if (((SchedulerEntry *) lfirst(lc2))->dboid == dboid)
				entry = lfirst(lc2);
		if (entry == NULL)
		{
			MemoryContext oldcxt = MemoryContextSwitchTo(TopMemoryContext);

			entry = palloc0(sizeof(SchedulerEntry));
			entry->dboid = dboid;
			schedulers = lappend(schedulers, entry);
			MemoryContextSwitchTo(oldcxt);
			start_scheduler(entry);
		}
		else if (scheduler_running(entry))
			entry->stopped_at = 0;
		else if (entry->stopped_at == 0)
			entry->stopped_at = now;
		else if (TimestampDifferenceExceeds(entry->stopped_at, now, idem_naptime * PROBE_EVERY))
			start_scheduler(entry);
		entry->seen = true;
	}
	foreach(lc, schedulers)
	{
		SchedulerEntry *entry = lfirst(lc);

		if (!entry->seen)
		{
			schedulers = foreach_delete_current(schedulers, lc);
			if (entry->handle)
				pfree(entry->handle);
			pfree(entry);
		}
	}
}

/*
 * The loop allocates in a context reset every round; what must outlive a
 * round (the scheduler entries and their handles) lives in TopMemoryContext
 * and is freed when it is dropped or replaced.
 */
void
idem_launcher_main(Datum arg)
{
	MemoryContext loopcxt;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnection(NULL, NULL, 0);
	pgstat_report_appname("idem_etl launcher");
	loopcxt = AllocSetContextCreate(TopMemoryContext, "idem_etl launcher loop",
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
		visit_databases();
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 idem_naptime, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
}
