/*
 * jobs.h
 *		The job queue, idem_etl.jobs: every read and write of it.
 */
#ifndef IDEM_JOBS_H
#define IDEM_JOBS_H

#include "postgres.h"

#include "datatype/timestamp.h"
#include "nodes/pg_list.h"

extern void jobs_check_command(const char *command, const char *what);
extern int64 jobs_schedule(int64 job_id, Oid roleoid, const char *command,
						   TimestampTz run_after);
extern void jobs_unschedule(int64 job_id, const char *why);
extern void jobs_fill(Oid roleoid, const char *command, int runs);
extern int64 jobs_current(void);
extern bool jobs_lock_state(void);
extern int	jobs_requeue_dead(List *live_jobs, int *skipped);
extern void jobs_next_due(int *queued, TimestampTz *next_due,
						  TimestampTz *next_housekeeping);
extern bool jobs_claim_next(int64 *job_id, Oid *roleoid);
extern void jobs_unclaim(int64 job_id);
extern void jobs_fail(int64 job_id, const char *message);
extern int	jobs_purge_finished(void);
extern char *jobs_start(int64 job_id);
extern void jobs_succeeded(int64 job_id);
extern void jobs_attempt_failed(int64 job_id, int sqlerrcode, const char *message);
extern void jobs_set_notices(int64 job_id, const char *notices);

#endif							/* IDEM_JOBS_H */
