/*
 * worker.h
 *		The background workers: a launcher for the cluster, a scheduler per
 *		database where the extension is installed, and a worker per job.
 */
#ifndef IDEM_WORKER_H
#define IDEM_WORKER_H

#include "postgres.h"

/* Settings */
extern int	idem_max_workers;
extern int	idem_naptime;		/* ms */
extern int	idem_max_backoff;	/* s */
extern int	idem_job_retention; /* s */

/* True in every process of a server that preloaded the library. */
extern bool idem_preloaded;

/* Shared memory: the cluster-wide slots of running job workers. */
extern void worker_shmem_init(void);
extern Size worker_shmem_size(void);
extern int	worker_slot_reserve(void);
extern void worker_slot_release(int slot);
extern void worker_shmem_request(void);
extern void worker_register_proc(Oid dboid);
extern void worker_signal_database(Oid dboid);
extern void worker_pin_session(void);

#include "postmaster/bgworker.h"

extern void worker_describe(BackgroundWorker *bgw, const char *function,
							const char *type);
extern void worker_begin_tx(const char *activity);
extern void worker_end_tx(void);
extern void worker_stop_in_database(const char *dbname);
extern void worker_register_launcher(void);

/* Entry points, named in BackgroundWorker.bgw_function_name */
extern PGDLLEXPORT void idem_launcher_main(Datum arg);
extern PGDLLEXPORT void idem_scheduler_main(Datum arg);
extern PGDLLEXPORT void idem_job_main(Datum arg);

/* What a job worker needs, passed in bgw_extra. */
typedef struct JobStart
{
	Oid			dboid;
	Oid			roleoid;
	int64		job_id;
} JobStart;

#endif							/* IDEM_WORKER_H */
