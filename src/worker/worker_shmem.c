/*
 * worker_shmem.c
 *		Shared memory of the background workers, under one LWLock:
 *
 *		- per database, when its queued jobs and its janitor are next due,
 *		  as written by the backends that queue work (at commit) and by the
 *		  dispatcher after each visit: the launcher reads it to know where
 *		  to go, without polling any database;
 *		- the job slots: at most idem_etl.max_workers jobs run at once, each
 *		  in a slot reserved by the launcher for a database, filled by that
 *		  database's dispatcher with a claimed job, and started by the
 *		  launcher;
 *		- which of idem_etl's processes is connected to which database, so
 *		  that DROP DATABASE can ask them to leave;
 *		- a condition variable broadcast whenever a job ends, for etl_wait.
 *
 * A crash of any backend reinitializes shared memory, which empties it; the
 * launcher then visits every database once to learn its work again, and the
 * jobs left running by the crash are requeued there.
 */
#include "postgres.h"

#include "access/xact.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/condition_variable.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#include "worker/worker.h"
#include "util/settings.h"

#define TRANCHE_NAME "idem_etl"

/* Databases whose work is tracked; beyond that, notes are dropped (WARNING). */
#define MAX_DATABASES 1024

typedef enum SlotState
{
	SLOT_FREE = 0,
	SLOT_RESERVED,				/* by the launcher, for a visit of dboid */
	SLOT_CLAIMED,				/* filled by the dispatcher with a job */
	SLOT_STARTED,				/* the launcher registered its job worker */
	SLOT_UNSTARTED				/* no job worker could be registered */
} SlotState;

typedef struct JobSlot
{
	SlotState	state;
	Oid			dboid;
	Oid			roleoid;
	int64		job_id;
	pid_t		pid;			/* the job worker, once it runs */
} JobSlot;

typedef struct DbState
{
	Oid			dboid;			/* InvalidOid: a free entry */
	TimestampTz next_due;		/* earliest queued job's run_after */
	TimestampTz next_housekeeping;	/* janitor, requeue or unclaim due */
	TimestampTz last_visit;		/* started by the launcher */
	TimestampTz reported;		/* a dispatcher's last report */
	TimestampTz retry_after;	/* after a visit that failed */
	int			queued;			/* as counted at the last visit */
	char		reason[128];	/* why due jobs wait, or "" */

	/*
	 * What was noted since the current visit began.  The visit's report
	 * replaces next_due and next_housekeeping with what its snapshot saw; a
	 * job queued (or requeued) after that snapshot would be lost and wait for
	 * the next unrelated visit, so the report keeps these too.
	 */
	TimestampTz noted_due;
	TimestampTz noted_housekeeping;
} DbState;

typedef struct WorkerShared
{
	LWLock	   *lock;
	Latch	   *launcher_latch;
	ConditionVariable job_ended;
	int			nslots;			/* max_worker_processes at start */
	bool		full_warned;
	DbState		dbs[MAX_DATABASES];
	JobSlot    *jobs;			/* nslots of each */
	WorkerProc *procs;
} WorkerShared;

static WorkerShared *shared = NULL;

Size
worker_shmem_size(void)
{
	Size		size = MAXALIGN(sizeof(WorkerShared));

	size = add_size(size, MAXALIGN(mul_size(sizeof(JobSlot), max_worker_processes)));
	return add_size(size, mul_size(sizeof(WorkerProc), max_worker_processes));
}

/* From the shmem_request hook: the lock's tranche. */
void
worker_shmem_request(void)
{
	RequestNamedLWLockTranche(TRANCHE_NAME, 1);
}

void
worker_shmem_init(void)
{
	bool		found;

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	shared = ShmemInitStruct("idem_etl workers", worker_shmem_size(), &found);
	if (!found)
	{
		char	   *p = (char *) shared + MAXALIGN(sizeof(WorkerShared));

		memset(shared, 0, sizeof(WorkerShared));
		shared->lock = &(GetNamedLWLockTranche(TRANCHE_NAME))->lock;
		ConditionVariableInit(&shared->job_ended);
		shared->nslots = max_worker_processes;
		shared->jobs = (JobSlot *) p;
		p += MAXALIGN(sizeof(JobSlot) * shared->nslots);
		shared->procs = (WorkerProc *) p;
		memset(shared->jobs, 0, sizeof(JobSlot) * shared->nslots);
		memset(shared->procs, 0, sizeof(WorkerProc) * shared->nslots);
	}
	LWLockRelease(AddinShmemInitLock);
}

static void
wake_launcher(void)
{
	if (shared->launcher_latch)
		SetLatch(shared->launcher_latch);
}

/* The entry of dboid, added when add; NULL when absent or no room.  Locked. */
static DbState *
db_entry(Oid dboid, bool add)
{
	DbState    *free_entry = NULL;

	for (int i = 0; i < MAX_DATABASES; i++)
	{
		if (shared->dbs[i].dboid == dboid)
			return &shared->dbs[i];
		if (free_entry == NULL && shared->dbs[i].dboid == InvalidOid)
			free_entry = &shared->dbs[i];
	}
	if (!add)
		return NULL;
	if (free_entry == NULL)
	{
		if (!shared->full_warned)
			ereport(WARNING,
					(errmsg("idem_etl tracks the work of at most %d databases", MAX_DATABASES),
					 errdetail("Jobs of database %u are run only after a server restart.", dboid)));
		shared->full_warned = true;
		return NULL;
	}
	memset(free_entry, 0, sizeof(DbState));
	free_entry->dboid = dboid;
	free_entry->next_due = DT_NOEND;
	free_entry->next_housekeeping = DT_NOEND;
	free_entry->noted_due = DT_NOEND;
	free_entry->noted_housekeeping = DT_NOEND;
	return free_entry;
}

/* Work is due in db by these times (DT_NOEND: none).  Locked. */
static void
db_note_due(DbState *db, TimestampTz due, TimestampTz housekeeping)
{
	db->next_due = Min(db->next_due, due);
	db->next_housekeeping = Min(db->next_housekeeping, housekeeping);
	db->noted_due = Min(db->noted_due, due);
	db->noted_housekeeping = Min(db->noted_housekeeping, housekeeping);
}

/* Visit dboid soon: a job may need requeueing or giving back.  Locked. */
static void
visit_soon(Oid dboid)
{
	DbState    *db = db_entry(dboid, false);

	if (db)
		db_note_due(db, DT_NOEND, GetCurrentTimestamp());
}

/* --- notes from backends, applied when their transaction commits --- */

static TimestampTz pending_due = DT_NOEND;
static TimestampTz pending_housekeeping = DT_NOEND;
static bool pending_wake_waiters = false;
static bool callback_registered = false;

static void
apply_notes(XactEvent event, void *arg)
{
	if (event == XACT_EVENT_COMMIT && shared != NULL &&
		(pending_due != DT_NOEND || pending_housekeeping != DT_NOEND))
	{
		DbState    *db;

		LWLockAcquire(shared->lock, LW_EXCLUSIVE);
		db = db_entry(MyDatabaseId, true);
		if (db)
			db_note_due(db, pending_due, pending_housekeeping);
		LWLockRelease(shared->lock);
		wake_launcher();
	}
	if (event == XACT_EVENT_COMMIT && shared != NULL && pending_wake_waiters)
		ConditionVariableBroadcast(&shared->job_ended);
	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_ABORT ||
		event == XACT_EVENT_PARALLEL_COMMIT || event == XACT_EVENT_PARALLEL_ABORT)
	{
		pending_due = DT_NOEND;
		pending_housekeeping = DT_NOEND;
		pending_wake_waiters = false;
	}
}

static void
register_callback(void)
{
	if (!callback_registered)
		RegisterXactCallback(apply_notes, NULL);
	callback_registered = true;
}

/*
 * This transaction queued a job due at due (etl_submit, etl_backfill): at
 * commit the launcher learns that this database has work, and when.
 */
void
worker_note_due(TimestampTz due)
{
	register_callback();
	pending_due = Min(pending_due, due);
}

/* ... or housekeeping due at due (a kept partition's keep_until). */
void
worker_note_housekeeping(TimestampTz due)
{
	register_callback();
	pending_housekeeping = Min(pending_housekeeping, due);
}

/* ... or ended a job (etl_cancel): wake etl_wait at commit. */
void
worker_note_job_ended(void)
{
	register_callback();
	pending_wake_waiters = true;
}

/*
 * etl_wait's sleep: woken when any job ends, or after timeout_ms.  Without
 * the preload (no shared memory, and no job ever runs) it sleeps on the
 * latch.  Call worker_job_ended_prepare before looking at the job, so that
 * an end between the look and the sleep is not missed.
 */
void
worker_job_ended_prepare(void)
{
	if (shared)
		ConditionVariablePrepareToSleep(&shared->job_ended);
}

void
worker_job_ended_wait(long timeout_ms)
{
	if (shared)
		(void) ConditionVariableTimedSleep(&shared->job_ended, timeout_ms, PG_WAIT_EXTENSION);
	else
	{
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 timeout_ms, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
}

void
worker_job_ended_cancel(void)
{
	if (shared)
		ConditionVariableCancelSleep();
}

/* --- the launcher --- */

void
worker_launcher_attach(void)
{
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	shared->launcher_latch = MyLatch;
	/* a previous launcher's reservations: its dispatcher is gone or goes */
	for (int i = 0; i < shared->nslots; i++)
		if (shared->jobs[i].state == SLOT_RESERVED)
			shared->jobs[i].state = SLOT_FREE;
	LWLockRelease(shared->lock);
}

/* Visit dboid soon: at start, to learn its work (no-op when it is known). */
void
worker_add_database(Oid dboid, TimestampTz housekeeping)
{
	DbState    *db;

	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	db = db_entry(dboid, true);
	if (db)
		db_note_due(db, DT_NOEND, housekeeping);
	LWLockRelease(shared->lock);
}

void
worker_forget_database(Oid dboid)
{
	DbState    *db;

	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	db = db_entry(dboid, false);
	if (db)
		db->dboid = InvalidOid;
	for (int i = 0; i < shared->nslots; i++)
		if (shared->jobs[i].state == SLOT_RESERVED && shared->jobs[i].dboid == dboid)
			shared->jobs[i].state = SLOT_FREE;
	LWLockRelease(shared->lock);
}

List *
worker_known_databases(void)
{
	List	   *oids = NIL;

	LWLockAcquire(shared->lock, LW_SHARED);
	for (int i = 0; i < MAX_DATABASES; i++)
		if (shared->dbs[i].dboid != InvalidOid)
			oids = lappend_oid(oids, shared->dbs[i].dboid);
	LWLockRelease(shared->lock);
	return oids;
}

static int
slots_in_use(void)
{
	int			used = 0;

	for (int i = 0; i < shared->nslots; i++)
		if (shared->jobs[i].state != SLOT_FREE)
			used++;
	return used;
}

/*
 * The database to visit now, or InvalidOid; with the number of job slots
 * reserved for it in *nclaim, and in *wake when to look again at the
 * latest.  A database is due when its janitor is, or when a queued job is
 * and a job slot is free.  Among due databases, the one visited least
 * recently goes first, so that one database's long queue cannot hold back
 * the others' jobs for more than a job's duration; free slots are shared
 * among the databases with due jobs.
 */
Oid
worker_next_visit(TimestampTz now, int *nclaim, TimestampTz *wake)
{
	DbState    *best = NULL;
	int			free_slots;
	int			due_jobs = 0;
	Oid			dboid = InvalidOid;

	*nclaim = 0;
	*wake = DT_NOEND;
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	free_slots = Max(0, Min(idem_max_workers, shared->nslots) - slots_in_use());
	for (int i = 0; i < MAX_DATABASES; i++)
	{
		DbState    *db = &shared->dbs[i];
		bool		jobs_due;
		bool		due;

		if (db->dboid == InvalidOid)
			continue;
		if (db->retry_after > now)
		{
			*wake = Min(*wake, db->retry_after);
			continue;
		}
		jobs_due = db->next_due <= now;
		due = db->next_housekeeping <= now || (jobs_due && free_slots > 0);
		if (jobs_due)
			due_jobs++;
		if (!jobs_due)
			*wake = Min(*wake, db->next_due);
		if (db->next_housekeeping > now)
			*wake = Min(*wake, db->next_housekeeping);
		if (due && (best == NULL || db->last_visit < best->last_visit))
			best = db;
	}
	if (best)
	{
		dboid = best->dboid;
		best->last_visit = now;
		best->noted_due = DT_NOEND;
		best->noted_housekeeping = DT_NOEND;
		if (best->next_due <= now && free_slots > 0)
			*nclaim = Max(1, free_slots / Max(1, due_jobs));
		for (int i = 0, n = 0; i < shared->nslots && n < *nclaim; i++)
			if (shared->jobs[i].state == SLOT_FREE)
			{
				shared->jobs[i].state = SLOT_RESERVED;
				shared->jobs[i].dboid = dboid;
				n++;
			}
	}
	LWLockRelease(shared->lock);
	return dboid;
}

/* Did a dispatcher of dboid report since since? */
bool
worker_visit_reported(Oid dboid, TimestampTz since)
{
	DbState    *db;
	bool		reported;

	LWLockAcquire(shared->lock, LW_SHARED);
	db = db_entry(dboid, false);
	reported = db == NULL || db->reported >= since;
	LWLockRelease(shared->lock);
	return reported;
}

/* A visit did not happen or did not finish: look again after retry_after. */
void
worker_visit_failed(Oid dboid, TimestampTz retry_after)
{
	DbState    *db;

	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	db = db_entry(dboid, false);
	if (db)
		db->retry_after = retry_after;
	LWLockRelease(shared->lock);
	worker_release_reserved(dboid);
}

void
worker_release_reserved(Oid dboid)
{
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < shared->nslots; i++)
		if (shared->jobs[i].state == SLOT_RESERVED && shared->jobs[i].dboid == dboid)
			shared->jobs[i].state = SLOT_FREE;
	LWLockRelease(shared->lock);
}

/* A claimed job whose worker is to be started, if any. */
bool
worker_next_claimed(JobStart *job)
{
	bool		found = false;

	LWLockAcquire(shared->lock, LW_SHARED);
	for (int i = 0; i < shared->nslots && !found; i++)
		if (shared->jobs[i].state == SLOT_CLAIMED)
		{
			job->slot = i;
			job->dboid = shared->jobs[i].dboid;
			job->roleoid = shared->jobs[i].roleoid;
			job->job_id = shared->jobs[i].job_id;
			found = true;
		}
	LWLockRelease(shared->lock);
	return found;
}

/*
 * The launcher registered the job worker of slot, or could not: then the
 * job goes back to the queue at the database's next visit.
 */
void
worker_job_started(int slot, bool started)
{
	JobSlot    *js = &shared->jobs[slot];

	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	if (started)
	{
		/* unless the worker has already run and freed the slot */
		if (js->state == SLOT_CLAIMED)
			js->state = SLOT_STARTED;
	}
	else
	{
		js->state = SLOT_UNSTARTED;
		visit_soon(js->dboid);
	}
	LWLockRelease(shared->lock);
}

/*
 * The launcher saw the job worker of slot stop.  A worker that ran frees its
 * slot itself (worker_job_running); one still STARTED never got that far
 * (it failed to connect, say): its job is requeued at the next visit.
 */
void
worker_job_gone(int slot)
{
	JobSlot    *js = &shared->jobs[slot];

	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	if (js->state == SLOT_STARTED && js->pid == 0)
	{
		js->state = SLOT_FREE;
		visit_soon(js->dboid);
	}
	LWLockRelease(shared->lock);
}

void
worker_set_reason(Oid dboid, const char *reason)
{
	DbState    *db;

	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	db = db_entry(dboid, false);
	if (db)
		strlcpy(db->reason, reason, sizeof(db->reason));
	LWLockRelease(shared->lock);
}

/* --- a dispatcher --- */

static List *
jobs_in_state(Oid dboid, SlotState state, bool free_them)
{
	List	   *ids = NIL;

	LWLockAcquire(shared->lock, free_them ? LW_EXCLUSIVE : LW_SHARED);
	for (int i = 0; i < shared->nslots; i++)
	{
		JobSlot    *js = &shared->jobs[i];

		if (js->dboid != dboid)
			continue;
		if (js->state == state ||
			(state == SLOT_STARTED && js->state == SLOT_CLAIMED))
		{
			ids = lappend(ids, memcpy(palloc(sizeof(int64)), &js->job_id, sizeof(int64)));
			if (free_them)
				js->state = SLOT_FREE;
		}
	}
	LWLockRelease(shared->lock);
	return ids;
}

/* Jobs of dboid that a job worker runs or is about to run (int64 *). */
List *
worker_live_jobs(Oid dboid)
{
	return jobs_in_state(dboid, SLOT_STARTED, false);
}

/* Jobs of dboid whose worker could not be started, their slots freed. */
List *
worker_unstarted_jobs(Oid dboid)
{
	return jobs_in_state(dboid, SLOT_UNSTARTED, true);
}

/* Put a claimed job into one of the slots reserved for dboid. */
void
worker_fill_slot(Oid dboid, int64 job_id, Oid roleoid)
{
	bool		filled = false;

	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < shared->nslots && !filled; i++)
	{
		JobSlot    *js = &shared->jobs[i];

		if (js->state == SLOT_RESERVED && js->dboid == dboid)
		{
			js->state = SLOT_CLAIMED;
			js->job_id = job_id;
			js->roleoid = roleoid;
			js->pid = 0;
			filled = true;
		}
	}
	LWLockRelease(shared->lock);
	if (!filled)
		elog(ERROR, "idem_etl: no job slot reserved for database %u", dboid);
}

/*
 * The visit is over: when the database is next due, and how many jobs wait.
 * The slots reserved for it and not filled are freed.  With forget (no
 * idem_etl there), the database is forgotten, so that idem_etl.worker_status
 * does not list it, unless work was noted there since the visit began
 * (CREATE EXTENSION and etl_submit committed meanwhile): then it is visited
 * again.  A backend that notes work later adds it back.
 */
static void
report_visit(Oid dboid, int queued, TimestampTz next_due,
			 TimestampTz next_housekeeping, bool forget)
{
	DbState    *db;

	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	db = db_entry(dboid, !forget);
	if (db && forget && db->noted_due == DT_NOEND && db->noted_housekeeping == DT_NOEND)
		db->dboid = InvalidOid;
	else if (db)
	{
		db->queued = queued;
		db->next_due = Min(next_due, db->noted_due);
		db->next_housekeeping = Min(next_housekeeping, db->noted_housekeeping);
		db->reported = GetCurrentTimestamp();
		db->retry_after = 0;
		db->reason[0] = '\0';
	}
	for (int i = 0; i < shared->nslots; i++)
		if (shared->jobs[i].state == SLOT_RESERVED && shared->jobs[i].dboid == dboid)
			shared->jobs[i].state = SLOT_FREE;
	LWLockRelease(shared->lock);
	wake_launcher();
}

void
worker_report_visit(Oid dboid, int queued, TimestampTz next_due,
					TimestampTz next_housekeeping)
{
	report_visit(dboid, queued, next_due, next_housekeeping, false);
}

/* The dispatcher found no idem_etl in dboid. */
void
worker_report_no_extension(Oid dboid)
{
	report_visit(dboid, 0, DT_NOEND, DT_NOEND, true);
}

/* --- a job worker --- */

static int	my_slot = -1;
static bool my_job_finished = false;

/*
 * Free the slot when the job worker exits, however it exits; a job whose
 * outcome was not recorded is requeued at its database's next visit.
 * Waiters and the launcher are woken: a slot is free, and a job ended.
 */
static void
job_worker_exit(int code, Datum arg)
{
	JobSlot    *js = &shared->jobs[my_slot];

	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	if (js->pid == MyProcPid)
	{
		if (!my_job_finished)
			visit_soon(js->dboid);
		js->state = SLOT_FREE;
		js->pid = 0;
	}
	LWLockRelease(shared->lock);
	ConditionVariableBroadcast(&shared->job_ended);
	wake_launcher();
}

void
worker_job_running(int slot, int64 job_id)
{
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	if (shared->jobs[slot].job_id == job_id &&
		(shared->jobs[slot].state == SLOT_STARTED ||
		 shared->jobs[slot].state == SLOT_CLAIMED))
	{
		shared->jobs[slot].pid = MyProcPid;
		my_slot = slot;
	}
	LWLockRelease(shared->lock);
	if (my_slot >= 0)
		before_shmem_exit(job_worker_exit, (Datum) 0);
}

/*
 * The job's outcome is committed.  It is purged after retention; a failed
 * attempt may have been queued again, so its database is visited now.
 */
void
worker_job_finished(int slot, bool failed)
{
	DbState    *db;
	TimestampTz now = GetCurrentTimestamp();

	my_job_finished = true;
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	db = db_entry(shared->jobs[slot].dboid, false);
	if (db)
		db_note_due(db, DT_NOEND,
					failed ? now :
					TimestampTzPlusMilliseconds(now, (int64) idem_job_retention * 1000));
	LWLockRelease(shared->lock);
}

/* --- DROP DATABASE --- */

static void
forget_proc(int code, Datum arg)
{
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < shared->nslots; i++)
		if (shared->procs[i].pid == MyProcPid)
			shared->procs[i].pid = 0;
	LWLockRelease(shared->lock);
}

/*
 * Record that this process (a dispatcher or job worker) is about to connect
 * to dboid, until it exits.  Called before connecting, so that a DROP
 * DATABASE that starts meanwhile finds it.  Every background worker has a
 * place: there are max_worker_processes of them.
 */
void
worker_register_proc(Oid dboid, Oid roleoid)
{
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < shared->nslots; i++)
		if (shared->procs[i].pid == 0)
		{
			shared->procs[i].pid = MyProcPid;
			shared->procs[i].dboid = dboid;
			shared->procs[i].roleoid = roleoid;
			break;
		}
	LWLockRelease(shared->lock);
	before_shmem_exit(forget_proc, (Datum) 0);
}

/*
 * idem_etl's processes connected to dboid (or about to connect): a list of
 * WorkerProc copies, each with its role (InvalidOid for a dispatcher).
 */
List *
worker_database_procs(Oid dboid)
{
	List	   *procs = NIL;

	LWLockAcquire(shared->lock, LW_SHARED);
	for (int i = 0; i < shared->nslots; i++)
		if (shared->procs[i].pid != 0 && shared->procs[i].dboid == dboid)
		{
			WorkerProc *proc = palloc(sizeof(WorkerProc));

			*proc = shared->procs[i];
			procs = lappend(procs, proc);
		}
	LWLockRelease(shared->lock);
	return procs;
}

/*
 * Ask idem_etl's processes connected to dboid to exit, those of procs
 * (from worker_database_procs) that are still there.
 */
void
worker_signal_database(Oid dboid, List *procs)
{
	ListCell   *lc;

	LWLockAcquire(shared->lock, LW_SHARED);
	foreach(lc, procs)
	{
		WorkerProc *proc = lfirst(lc);

		for (int i = 0; i < shared->nslots; i++)
			if (shared->procs[i].pid == proc->pid && shared->procs[i].dboid == dboid)
				(void) kill(shared->procs[i].pid, SIGTERM);
	}
	LWLockRelease(shared->lock);
}

/* --- idem_etl.worker_status --- */

/*
 * Each database's status now.  The reason due jobs wait is the one the
 * launcher recorded when it could not start a process or visit (cleared by
 * the next visit's report), else "max_workers reached" when as many job
 * workers as idem_etl.max_workers run or are about to, counted now: a
 * reason kept from an earlier moment would outlive the jobs it was about
 * (a worker ends, and until the next visit reports, only one of two runs).
 */
List *
worker_status_list(void)
{
	List	   *list = NIL;
	int			busy = 0;
	int			limit;

	if (shared == NULL)
		return NIL;
	LWLockAcquire(shared->lock, LW_SHARED);
	limit = Min(idem_max_workers, shared->nslots);
	for (int j = 0; j < shared->nslots; j++)
		if (shared->jobs[j].state == SLOT_STARTED || shared->jobs[j].state == SLOT_CLAIMED)
			busy++;
	for (int i = 0; i < MAX_DATABASES; i++)
	{
		DbState    *db = &shared->dbs[i];
		DbStatus   *st;

		if (db->dboid == InvalidOid)
			continue;
		st = palloc0(sizeof(DbStatus));
		st->dboid = db->dboid;
		st->queued = db->queued;
		st->next_due = db->next_due;
		st->next_housekeeping = db->next_housekeeping;
		strlcpy(st->reason, db->reason, sizeof(st->reason));
		if (st->reason[0] == '\0' && busy >= limit)
			snprintf(st->reason, sizeof(st->reason),
					 "max_workers reached (idem_etl.max_workers = %d)", idem_max_workers);
		for (int j = 0; j < shared->nslots; j++)
			if (shared->jobs[j].dboid == db->dboid &&
				(shared->jobs[j].state == SLOT_STARTED || shared->jobs[j].state == SLOT_CLAIMED))
				st->running++;
		list = lappend(list, st);
	}
	LWLockRelease(shared->lock);
	return list;
}
