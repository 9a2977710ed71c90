/*
 * worker_dispatcher.c
 *		A visit of one database, started by the launcher when the database
 *		has due work: requeue the jobs of workers that died, give back the
 *		jobs whose worker could not be started, run the janitor, claim due
 *		jobs into the job slots the launcher reserved, write back when the
 *		database is next due, and exit.
 *
 * It connects as the bootstrap superuser and pins every setting the
 * database's owner could have set (worker_pin_session): its statements are
 * idem_etl's own, with a superuser's rights.
 *
 * One dispatcher serves every database in turn, so it never waits for a
 * lock that a user can hold: the rows it updates are taken FOR UPDATE SKIP
 * LOCKED (and the skipped ones left for a later visit), the kept tables it
 * drops with a conditional lock, and lock_timeout bounds any other wait.
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
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "worker/jobs.h"
#include "replace/kept.h"
#include "state/ledger.h"
#include "util/sql.h"
#include "worker/worker.h"
#include "util/settings.h"

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
	if (!((Form_pg_authid) GETSTRUCT(tup))->rolcanlogin)
		problem = psprintf("28000: role \"%s\" is not permitted to log in, and jobs run as the role that submitted them",
						   NameStr(((Form_pg_authid) GETSTRUCT(tup))->rolname));
	ReleaseSysCache(tup);
	return problem;
}

/* The janitor: each step in a subtransaction, a failure is a WARNING. */
static void
janitor_kept(void *arg)
{
	(void) kept_cleanup();
}

static void
janitor_purge(void *arg)
{
	(void) jobs_purge_finished();
}

static void
janitor_ledger(void *arg)
{
	(void) ledger_purge();
}

static void
janitor(void)
{
	void		(*steps[]) (void *) = {janitor_kept, janitor_purge, janitor_ledger};

	for (size_t i = 0; i < lengthof(steps); i++)
	{
		ErrorData  *failure = sql_try(steps[i], NULL);

		if (failure)
			ereport(WARNING,
					(errcode(failure->sqlerrcode),
					 errmsg("idem_etl's janitor failed: %s", failure->message),
					 errdetail("The jobs of this database are dispatched all the same.")));
	}
}

typedef struct Claimed
{
	int64		job_id;
	Oid			roleoid;
} Claimed;

void
worker_dispatcher_main(Datum arg)
{
	DispatchStart ds;
	MemoryContext outside;
	List	   *claimed = NIL;
	ListCell   *lc;
	int			queued = 0;
	TimestampTz next_due = DT_NOEND;
	TimestampTz next_housekeeping = DT_NOEND;
	TimestampTz soon;
	int			skipped = 0;

	memcpy(&ds, MyBgworkerEntry->bgw_extra, sizeof(DispatchStart));
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	worker_register_proc(ds.dboid, InvalidOid);

	/*
	 * Connecting takes a lock on the database, which its owner can hold for
	 * as long as it likes (ALTER DATABASE ... RENAME in a transaction left
	 * open): bounded too.  An error here ends the dispatcher, and the
	 * launcher tries the database again later.
	 */
	SetConfigOption("lock_timeout", DISPATCHER_LOCK_TIMEOUT, PGC_SUSET, PGC_S_OVERRIDE);
	BackgroundWorkerInitializeConnectionByOid(ds.dboid, InvalidOid, 0);
	worker_pin_session();
	pgstat_report_appname("idem_etl dispatcher");

	/* the claims outlive the transaction (and SPI's memory): kept here */
	outside = CurrentMemoryContext;
	worker_begin_tx("idem_etl: visiting the database");
	if (!OidIsValid(get_extension_oid("idem_etl", true)))
	{
		/* nothing to do here until a backend notes work again */
		worker_end_tx();
		worker_report_no_extension(ds.dboid);
		proc_exit(0);
	}
	if (!jobs_lock_state())
	{
		/* DROP EXTENSION (or ALTER) holds the state tables: soon again */
		ereport(DEBUG1,
				(errmsg_internal("idem_etl dispatcher: the state tables of database %u are locked, visiting again in a naptime",
								 ds.dboid)));
		soon = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), idem_naptime);

		worker_end_tx();
		worker_report_visit(ds.dboid, 0, soon, soon);
		proc_exit(0);
	}

	foreach(lc, worker_unstarted_jobs(ds.dboid))
		jobs_unclaim(*(int64 *) lfirst(lc));
	{
		int			requeued = jobs_requeue_dead(worker_live_jobs(ds.dboid), &skipped);

		if (requeued > 0)
			ereport(LOG,
					(errmsg("idem_etl requeued %d job(s) whose worker ended before finishing",
							requeued)));
	}
	janitor();

	while (list_length(claimed) < ds.nclaim)
	{
		Claimed    *c = MemoryContextAlloc(outside, sizeof(Claimed));
		char	   *problem;

		CHECK_FOR_INTERRUPTS();
		if (!jobs_claim_next(&c->job_id, &c->roleoid))
			break;
		if ((problem = role_problem(c->roleoid)) != NULL)
			jobs_fail(c->job_id, problem);
		else
		{
			MemoryContext oldcxt = MemoryContextSwitchTo(outside);

			claimed = lappend(claimed, c);
			MemoryContextSwitchTo(oldcxt);
		}
	}
	jobs_next_due(&queued, &next_due, &next_housekeeping);
	worker_end_tx();

	/*
	 * Rows that other transactions had locked were skipped, not waited for:
	 * the dead workers' jobs among them are looked at again soon.  And what
	 * this visit left due (a row it skipped, a kept table in use) is not
	 * looked at again before a naptime, so that a lock held for long does not
	 * make the launcher start dispatcher after dispatcher.
	 */
	soon = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), idem_naptime);
	if (skipped > 0 || next_housekeeping < soon)
		next_housekeeping = soon;

	/* claims are committed: now the launcher may start their workers */
	foreach(lc, claimed)
		worker_fill_slot(ds.dboid, ((Claimed *) lfirst(lc))->job_id,
						 ((Claimed *) lfirst(lc))->roleoid);
	worker_report_visit(ds.dboid, queued, next_due, next_housekeeping);
	proc_exit(0);
}
