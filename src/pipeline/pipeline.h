/*
 * pipeline.h
 *		Pipelines (idem_etl.pipelines): their definitions, their locks and
 *		their next run in the job queue.
 */
#ifndef IDEM_PIPELINE_H
#define IDEM_PIPELINE_H

#include "postgres.h"

#include "pipeline/period.h"

typedef struct Pipeline
{
	int64		id;
	char	   *name;
	Oid			owner;
	char	   *command;
	PeriodSpec	period;
	Interval   *lag;
	int32		lookback;
	int32		max_catchup;	/* 0: no bound */
	bool		block;			/* on_failure = 'block' */
	int32		max_attempts;
	bool		paused;
	char	   *state;
	int64		job_id;			/* its next run in the job queue, or 0 */
} Pipeline;

extern Pipeline *pipeline_load(const char *name);
extern Pipeline *pipeline_load_id(int64 id);
extern bool pipeline_lock(const Pipeline *p, bool wait);
extern void pipeline_schedule(Pipeline *p, TimestampTz due);
extern TimestampTz pipeline_due_at(const Pipeline *p, int64 n);

#endif							/* IDEM_PIPELINE_H */
