/*
 * worker.h
 *		The background workers: a launcher for the cluster, a dispatcher
 *		that visits one database while it has due work, and a worker per job.
 *
 * The launcher is the only process that stays.  It learns which databases
 * have work from shared memory (worker_shmem.c): etl_submit, etl_cancel and
 * the replacements that keep partitions record there, at commit, that their
 * database has work and when it is due.  For a database with due work it
 * starts a dispatcher (worker_dispatcher.c), which connects, claims due jobs
 * into job slots, runs the janitor when due, writes back when the database
 * is next due, and exits; the launcher then starts a job worker
 * (worker_job.c) for each claimed slot.
 */
#ifndef IDEM_WORKER_H
#define IDEM_WORKER_H

#include "postgres.h"

#include "datatype/timestamp.h"
#include "nodes/parsenodes.h"
#include "postmaster/bgworker.h"

/*
 * The longest the dispatcher waits for any lock.  It is a safety net: the
 * dispatcher skips locked rows and tables instead of waiting for them, and
 * this bounds what is left (a lock nobody expected, the database's own lock
 * while it connects), after which the visit, or the janitor's step, fails
 * and is tried again later.  The dispatcher serves every database in turn:
 * no wait of it may be unbounded.
 */
#define DISPATCHER_LOCK_TIMEOUT "1s"

/* What the launcher passes a dispatcher in bgw_extra. */
typedef struct DispatchStart
{
	Oid			dboid;
	int			nclaim;			/* job slots reserved for it */
} DispatchStart;

/* What the launcher passes a job worker in bgw_extra. */
typedef struct JobStart
{
	Oid			dboid;
	Oid			roleoid;
	int64		job_id;
	int			slot;
} JobStart;

/* A dispatcher or job worker, in shared memory from before it connects. */
typedef struct WorkerProc
{
	pid_t		pid;			/* 0: free entry */
	Oid			dboid;
	Oid			roleoid;		/* a job worker's role; InvalidOid: a
								 * dispatcher */
} WorkerProc;

/* One database's due work, as the launcher sees it (worker_status). */
typedef struct DbStatus
{
	Oid			dboid;
	int			queued;
	int			running;
	TimestampTz next_due;		/* DT_NOEND: nothing queued */
	TimestampTz next_housekeeping;
	char		reason[128];
} DbStatus;

/* worker_shmem.c: the shared state */
extern Size worker_shmem_size(void);
extern void worker_shmem_request(void);
extern void worker_shmem_init(void);
extern void worker_register_proc(Oid dboid, Oid roleoid);
extern List *worker_database_procs(Oid dboid);
extern void worker_signal_database(Oid dboid, List *procs);
extern void worker_note_due(TimestampTz due);
extern void worker_note_housekeeping(TimestampTz due);
extern void worker_job_ended_wait(long timeout_ms);
extern void worker_job_ended_prepare(void);
extern void worker_job_ended_cancel(void);
extern void worker_note_job_ended(void);

/* ... used by the launcher */
extern void worker_launcher_attach(void);
extern List *worker_known_databases(void);
extern void worker_add_database(Oid dboid, TimestampTz housekeeping);
extern void worker_forget_database(Oid dboid);
extern Oid	worker_next_visit(TimestampTz now, int *nclaim, TimestampTz *wake);
extern bool worker_visit_reported(Oid dboid, TimestampTz since);
extern void worker_visit_failed(Oid dboid, TimestampTz retry_after);
extern void worker_release_reserved(Oid dboid);
extern bool worker_next_claimed(JobStart *job);
extern void worker_job_started(int slot, bool started);
extern void worker_job_gone(int slot);
extern void worker_set_reason(Oid dboid, const char *reason);

/* ... used by a dispatcher */
extern List *worker_live_jobs(Oid dboid);
extern List *worker_unstarted_jobs(Oid dboid);
extern void worker_fill_slot(Oid dboid, int64 job_id, Oid roleoid);
extern void worker_report_visit(Oid dboid, int queued, TimestampTz next_due,
								TimestampTz next_housekeeping);
extern void worker_report_no_extension(Oid dboid);

/* ... used by a job worker */
extern void worker_job_running(int slot, int64 job_id);
extern void worker_job_finished(int slot, bool failed);

/* ... for idem_etl.worker_status */
extern List *worker_status_list(void);

/* worker_common.c */
extern void worker_describe(BackgroundWorker *bgw, const char *function,
							const char *type);
extern void worker_begin_tx(const char *activity);
extern void worker_end_tx(void);
extern void worker_stop_for_dropdb(DropdbStmt *stmt, bool isTopLevel);
extern void worker_pin_session(void);

/* worker_launcher.c */
extern void worker_register_launcher(void);

/* Entry points, named in BackgroundWorker.bgw_function_name */
extern PGDLLEXPORT void worker_launcher_main(Datum arg);
extern PGDLLEXPORT void worker_dispatcher_main(Datum arg);
extern PGDLLEXPORT void worker_job_main(Datum arg);

#endif							/* IDEM_WORKER_H */
