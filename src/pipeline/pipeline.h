/*
 * pipeline.h
 *		Pipelines (idem_etl.pipelines): their definitions, their locks and
 *		their next run in the job queue.
 */
#ifndef IDEM_PIPELINE_H
#define IDEM_PIPELINE_H

#include "postgres.h"

#include "access/tupdesc.h"
#include "fmgr.h"
#include "pipeline/period.h"
#include "utils/tuplestore.h"

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
	int32		max_parallel;	/* periods run at once: 1, in order */
	bool		paused;
	char	   *state;
	int64		job_id;			/* its next run in the job queue, or 0 */
	/* a sequence pipeline (etl_pipeline_create_sequence) */
	bool		sequence;
	Oid			source;			/* the table it reads */
	char	   *key_column;
	Oid			seq;			/* the sequence that fills key_column */
	int64		max_batch_size; /* 0: no bound */
} Pipeline;

/* One run of a period, or of a sequence pipeline's range (pipeline_run.c). */
typedef struct PeriodCall
{
	Pipeline   *p;
	const char *kind;			/* 'due', 'retry', 'rerun' or 'lookback' */
	char	   *command;		/* with its placeholders replaced */
	TimestampTz start;			/* its row's key */
	TimestampTz end;
	int64		from_id;		/* a sequence pipeline's range */
	int64		to_id;
	int32		attempts;		/* before this one */
	bool		record;			/* write its row (not for a lookback) */
	int64		run_id;			/* the ledger run its command returned */
} PeriodCall;

extern void pipeline_require_args(FunctionCallInfo fcinfo, int n, const char *names);
extern void pipeline_check_range(const char *argname, int32 value, int32 min, int32 max);
extern void pipeline_check_name(const char *name);
extern void pipeline_check_on_failure(const char *on_failure);
extern void pipeline_check_inserted(const char *name);
extern Pipeline *pipeline_load(const char *name);
extern Pipeline *pipeline_load_id(int64 id);
extern bool pipeline_lock(const Pipeline *p, bool wait);
extern bool pipeline_lock_run(const Pipeline *p);
extern bool pipeline_lock_period(const Pipeline *p, int64 n);
extern void pipeline_refresh(Pipeline *p);
extern void pipeline_schedule(Pipeline *p, TimestampTz due, int runs);
extern TimestampTz pipeline_due_at(const Pipeline *p, int64 n);
extern int64 pipeline_last_due(const Pipeline *p, TimestampTz now);
extern bool pipeline_run_call(PeriodCall *c, Tuplestorestate *store, TupleDesc desc);

#endif							/* IDEM_PIPELINE_H */
