/*
 * pipeline_run.c
 *		Running a pipeline's due periods (etl_pipeline_run), and the view
 *		idem_etl.pipelines_status.
 *
 * A run takes the pipeline's lock without waiting (a second run at the
 * same time returns at once: the first runs everything), then, oldest
 * first: periods queued again by etl_pipeline_rerun and failed periods
 * whose retry is due, then the new periods that are due (end + lag <=
 * now), each after its lookback.  Each period runs in a subtransaction,
 * and its row in idem_etl.pipeline_periods is written in that same
 * subtransaction: the period and its state commit together or not at all.
 * The worker's job runs one period per call (max_periods => 1), so one
 * period per transaction: a crash loses at most the period in progress,
 * which then runs again.  A failed period is recorded outside the
 * subtransaction, with its error, and retried after 1s, 2s, 4s, ...
 * (idem_etl.max_backoff) up to max_attempts; with on_failure 'block' the
 * periods after it wait until it succeeds.
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "pipeline/pipeline.h"
#include "state/ledger.h"
#include "util/args.h"
#include "util/settings.h"
#include "util/sql.h"
#include "worker/jobs.h"

PG_FUNCTION_INFO_V1(etl_pipeline_run);
PG_FUNCTION_INFO_V1(idem_etl_pipelines_status);

/* A period's row in idem_etl.pipeline_periods, as far as a run needs it. */
typedef struct PeriodRow
{
	int64		n;
	char	   *status;
	int32		attempts;
	TimestampTz retry_after;	/* DT_NOBEGIN: none */
} PeriodRow;

/* One period's call, in its subtransaction (sql_try). */
typedef struct PeriodCall
{
	Pipeline   *p;
	int64		n;
	int32		attempts;		/* before this one */
	bool		record;			/* write its row (not for a lookback) */
	int64		run_id;
} PeriodCall;

static Datum
column(int row, int col, bool *isnull)
{
	return SPI_getbinval(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, col, isnull);
}

/* The last period that is due at now (end + lag <= now), or -1. */
static int64
last_due(const Pipeline *p, TimestampTz now)
{
	int64		n = period_index_at(&p->period, now) - 1;

	while (n >= 0 && pipeline_due_at(p, n) > now)
		n--;
	return n;
}

/*
 * The first period never run: periods get their rows in order (those left
 * out by max_catchup too), so it follows the last row.
 */
static int64
first_new(const Pipeline *p)
{
	Oid			argtypes[1] = {INT8OID};
	Datum		args[1] = {Int64GetDatum(p->id)};
	bool		isnull;
	Datum		d;

	static SPIPlanPtr plan = NULL;

	ledger_exec_as_owner_kept(&plan, "SELECT pg_catalog.max(period_start) FROM idem_etl.pipeline_periods"
							  " WHERE pipeline_id OPERATOR(pg_catalog.=) $1",
							  1, argtypes, args, NULL, SPI_OK_SELECT);
	d = column(0, 1, &isnull);
	return isnull ? 0 : period_index_at(&p->period, DatumGetTimestampTz(d)) + 1;
}

/*
 * The oldest period that is queued, retrying or failed; with runnable, the
 * oldest that may run at now (queued, or retrying and due).
 */
static bool
oldest_open(const Pipeline *p, TimestampTz now, bool runnable, PeriodRow *row)
{
	Oid			argtypes[3] = {INT8OID, TIMESTAMPTZOID, BOOLOID};
	Datum		args[3] = {Int64GetDatum(p->id), TimestampTzGetDatum(now), BoolGetDatum(runnable)};
	bool		isnull;
	Datum		d;

	static SPIPlanPtr plan = NULL;

	ledger_exec_as_owner_kept(&plan, "SELECT period_start, status, attempts, retry_after"
							  " FROM idem_etl.pipeline_periods"
							  " WHERE pipeline_id OPERATOR(pg_catalog.=) $1"
							  " AND status OPERATOR(pg_catalog.=) ANY ('{queued,retrying,failed}'::pg_catalog.text[])"
							  " AND (NOT $3 OR status OPERATOR(pg_catalog.=) 'queued'"
							  "  OR (status OPERATOR(pg_catalog.=) 'retrying'"
							  "      AND retry_after OPERATOR(pg_catalog.<=) $2))"
							  " ORDER BY period_start LIMIT 1",
							  3, argtypes, args, NULL, SPI_OK_SELECT);
	if (SPI_processed == 0)
	{
		SPI_freetuptable(SPI_tuptable);
		return false;
	}
	row->status = TextDatumGetCString(column(0, 2, &isnull));
	row->attempts = DatumGetInt32(column(0, 3, &isnull));
	d = column(0, 4, &isnull);
	row->retry_after = isnull ? DT_NOBEGIN : DatumGetTimestampTz(d);
	row->n = period_index_at(&p->period, DatumGetTimestampTz(column(0, 1, &isnull)));
	SPI_freetuptable(SPI_tuptable);
	return true;
}

static bool
row_runnable(const PeriodRow *row, TimestampTz now)
{
	return strcmp(row->status, "queued") == 0 ||
		(strcmp(row->status, "retrying") == 0 && row->retry_after <= now);
}

/* Write period n's row, in the (sub)transaction that ran it. */
static void
record_period(const Pipeline *p, int64 n, const char *status, int32 attempts,
			  const char *error, TimestampTz retry_after, int64 run_id)
{
	Oid			argtypes[9] = {INT8OID, TIMESTAMPTZOID, TIMESTAMPTZOID, TEXTOID, INT4OID,
	TEXTOID, TIMESTAMPTZOID, INT8OID, INT8OID};
	Datum		args[9];
	char		nulls[10] = "         ";
	static SPIPlanPtr plan = NULL;

	args[0] = Int64GetDatum(p->id);
	args[1] = TimestampTzGetDatum(period_start(&p->period, n));
	args[2] = TimestampTzGetDatum(period_start(&p->period, n + 1));
	args[3] = CStringGetTextDatum(status);
	args[4] = Int32GetDatum(attempts);
	if (error)
		args[5] = CStringGetTextDatum(error);
	else
		nulls[5] = 'n';
	args[6] = TimestampTzGetDatum(retry_after);
	if (retry_after == DT_NOBEGIN)
		nulls[6] = 'n';
	args[7] = Int64GetDatum(jobs_current());
	if (jobs_current() == 0)
		nulls[7] = 'n';
	args[8] = Int64GetDatum(run_id);
	if (run_id == 0)
		nulls[8] = 'n';
	ledger_exec_as_owner_kept(&plan, "INSERT INTO idem_etl.pipeline_periods AS pp (pipeline_id, period_start,"
							  " period_end, status, attempts, last_error, retry_after, job_id, run_id,"
							  " finished_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9,"
							  " pg_catalog.clock_timestamp())"
							  " ON CONFLICT (pipeline_id, period_start) DO UPDATE SET"
							  " status = EXCLUDED.status, attempts = EXCLUDED.attempts,"
							  " last_error = EXCLUDED.last_error, retry_after = EXCLUDED.retry_after,"
							  " job_id = EXCLUDED.job_id,"
							  " run_id = COALESCE(EXCLUDED.run_id, pp.run_id),"
							  " finished_at = EXCLUDED.finished_at",
							  9, argtypes, args, nulls, SPI_OK_INSERT);
}

/* The run_id column of the command's first row, when it returns one. */
static int64
command_run_id(void)
{
	int			col;
	bool		isnull;
	Datum		d;

	if (SPI_tuptable == NULL || SPI_processed == 0)
		return 0;
	col = SPI_fnumber(SPI_tuptable->tupdesc, "run_id");
	if (col <= 0 || SPI_gettypeid(SPI_tuptable->tupdesc, col) != INT8OID)
		return 0;
	d = column(0, col, &isnull);
	return isnull ? 0 : DatumGetInt64(d);
}

/*
 * sql_try's callback: the period's command, then its row, in the same
 * subtransaction.  The caller is the pipeline's owner (etl_pipeline_run
 * refuses anyone else).
 */
static void
period_call(void *arg)
{
	PeriodCall *c = (PeriodCall *) arg;
	char	   *command = period_expand(&c->p->period, c->p->command, c->n);
	int			rc;

	rc = SPI_execute(command, false, 0);
	if (rc < 0)
		elog(ERROR, "SPI_execute failed: %s", SPI_result_code_string(rc));
	c->run_id = command_run_id();
	SPI_freetuptable(SPI_tuptable);
	if (c->record)
		record_period(c->p, c->n, "succeeded", c->attempts + 1, NULL, DT_NOBEGIN, c->run_id);
}

/* One row of etl_pipeline_run's result. */
static void
put_result(Tuplestorestate *store, TupleDesc desc, const Pipeline *p, int64 n,
		   const char *kind, const char *status, const char *error, int64 run_id)
{
	Datum		values[6];
	bool		nulls[6] = {false, false, false, false, error == NULL, run_id == 0};

	values[0] = TimestampTzGetDatum(period_start(&p->period, n));
	values[1] = TimestampTzGetDatum(period_start(&p->period, n + 1));
	values[2] = CStringGetTextDatum(kind);
	values[3] = CStringGetTextDatum(status);
	values[4] = error ? CStringGetTextDatum(error) : (Datum) 0;
	values[5] = Int64GetDatum(run_id);
	tuplestore_putvalues(store, desc, values, nulls);
}

/*
 * Run period n (kind: 'due', 'retry', 'rerun' or 'lookback').  A failure
 * is recorded with its error: retried after a backoff while attempts
 * remain, else failed for good.  Returns whether it succeeded.
 */
static bool
run_period(Pipeline *p, int64 n, const char *kind, int32 attempts,
		   Tuplestorestate *store, TupleDesc desc)
{
	PeriodCall	call = {p, n, attempts, strcmp(kind, "lookback") != 0, 0};
	ErrorData  *failure = sql_try(period_call, &call);
	char	   *error;
	TimestampTz retry_after;
	int			backoff;

	if (failure == NULL)
	{
		put_result(store, desc, p, n, kind, "succeeded", NULL, call.run_id);
		return true;
	}
	error = psprintf("%s: %s", unpack_sql_state(failure->sqlerrcode), failure->message);
	if (!call.record)
	{
		/* a lookback's failure leaves the period as it was */
		ereport(WARNING,
				(errmsg("pipeline \"%s\": the lookback rerun of the period from %s failed",
						p->name, period_format(&p->period, period_start(&p->period, n))),
				 errdetail("%s", error)));
		put_result(store, desc, p, n, kind, "failed", error, 0);
		return false;
	}
	attempts++;
	backoff = Min(1 << Min(attempts - 1, 30), idem_max_backoff);
	retry_after = GetCurrentTimestamp() + (TimestampTz) backoff * USECS_PER_SEC;
	if (attempts >= p->max_attempts)
		record_period(p, n, "failed", attempts, error, DT_NOBEGIN, 0);
	else
		record_period(p, n, "retrying", attempts, error, retry_after, 0);
	put_result(store, desc, p, n, kind, attempts >= p->max_attempts ? "failed" : "retrying",
			   error, 0);
	return false;
}

/*
 * Before period n runs for the first time, the lookback: the previous
 * periods that succeeded, up to lookback of them, run again (oldest
 * first).  Their rows stay as they are: a rerun of unchanged data is
 * skipped by the ledger (run_key) and writes nothing else.
 */
static void
foreach_lookback(Pipeline *p, int64 n, Tuplestorestate *store, TupleDesc desc)
{
	Oid			argtypes[3] = {INT8OID, TIMESTAMPTZOID, TIMESTAMPTZOID};
	Datum		args[3];
	List	   *periods = NIL;
	ListCell   *lc;
	bool		isnull;
	static SPIPlanPtr plan = NULL;

	if (p->lookback == 0 || n == 0)
		return;
	args[0] = Int64GetDatum(p->id);
	args[1] = TimestampTzGetDatum(period_start(&p->period, Max(0, n - p->lookback)));
	args[2] = TimestampTzGetDatum(period_start(&p->period, n));
	ledger_exec_as_owner_kept(&plan, "SELECT period_start FROM idem_etl.pipeline_periods"
							  " WHERE pipeline_id OPERATOR(pg_catalog.=) $1"
							  " AND status OPERATOR(pg_catalog.=) 'succeeded'"
							  " AND period_start OPERATOR(pg_catalog.>=) $2"
							  " AND period_start OPERATOR(pg_catalog.<) $3 ORDER BY period_start",
							  3, argtypes, args, NULL, SPI_OK_SELECT);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		int64	   *k = palloc(sizeof(int64));

		*k = period_index_at(&p->period, DatumGetTimestampTz(column(i, 1, &isnull)));
		periods = lappend(periods, k);
	}
	SPI_freetuptable(SPI_tuptable);
	foreach(lc, periods)
		run_period(p, *(int64 *) lfirst(lc), "lookback", 0, store, desc);
}

/* Periods first .. last, left out by max_catchup: rows 'skipped'. */
static void
skip_periods(Pipeline *p, int64 first, int64 last)
{
	for (int64 n = first; n <= last; n++)
	{
		CHECK_FOR_INTERRUPTS();
		record_period(p, n, "skipped", 0, NULL, DT_NOBEGIN, 0);
	}
	ereport(WARNING,
			(errmsg("pipeline \"%s\" left out " INT64_FORMAT " missed periods, from %s to %s",
					p->name, last - first + 1,
					period_format(&p->period, period_start(&p->period, first)),
					period_format(&p->period, period_start(&p->period, last + 1))),
			 errdetail("max_catchup is %d: only the latest %d missed periods run by themselves.",
					   p->max_catchup, p->max_catchup),
			 errhint("Run them with etl_pipeline_rerun('%s', from_value, to_value).", p->name)));
}

/* The counts behind a pipeline's state. */
typedef struct PeriodCounts
{
	int64		open;			/* queued, retrying or failed */
	int64		failed;
	int64		retrying;
	int64		skipped;
	TimestampTz next_retry;		/* DT_NOEND: none */
	TimestampTz first_open;		/* DT_NOEND: none */
	TimestampTz last_end;		/* DT_NOBEGIN: no period yet */
	char	   *last_error;
} PeriodCounts;

static PeriodCounts
count_periods(const Pipeline *p)
{
	Oid			argtypes[1] = {INT8OID};
	Datum		args[1] = {Int64GetDatum(p->id)};
	PeriodCounts c;
	bool		isnull;
	Datum		d;

	ledger_exec_as_owner("SELECT pg_catalog.count(*) FILTER (WHERE status OPERATOR(pg_catalog.=)"
						 "  ANY ('{queued,retrying,failed}'::pg_catalog.text[])),"
						 " pg_catalog.count(*) FILTER (WHERE status OPERATOR(pg_catalog.=) 'failed'),"
						 " pg_catalog.count(*) FILTER (WHERE status OPERATOR(pg_catalog.=) 'retrying'),"
						 " pg_catalog.count(*) FILTER (WHERE status OPERATOR(pg_catalog.=) 'skipped'),"
						 " pg_catalog.min(retry_after) FILTER (WHERE status OPERATOR(pg_catalog.=) 'retrying'),"
						 " pg_catalog.min(period_start) FILTER (WHERE status OPERATOR(pg_catalog.<>) 'succeeded'),"
						 " pg_catalog.max(period_end),"
						 " (SELECT last_error FROM idem_etl.pipeline_periods"
						 "  WHERE pipeline_id OPERATOR(pg_catalog.=) $1 AND last_error IS NOT NULL"
						 "  ORDER BY finished_at DESC LIMIT 1)"
						 " FROM idem_etl.pipeline_periods WHERE pipeline_id OPERATOR(pg_catalog.=) $1",
						 1, argtypes, args, NULL, SPI_OK_SELECT);
	c.open = DatumGetInt64(column(0, 1, &isnull));
	c.failed = DatumGetInt64(column(0, 2, &isnull));
	c.retrying = DatumGetInt64(column(0, 3, &isnull));
	c.skipped = DatumGetInt64(column(0, 4, &isnull));
	d = column(0, 5, &isnull);
	c.next_retry = isnull ? DT_NOEND : DatumGetTimestampTz(d);
	d = column(0, 6, &isnull);
	c.first_open = isnull ? DT_NOEND : DatumGetTimestampTz(d);
	d = column(0, 7, &isnull);
	c.last_end = isnull ? DT_NOBEGIN : DatumGetTimestampTz(d);
	d = column(0, 8, &isnull);
	c.last_error = isnull ? NULL : TextDatumGetCString(d);
	return c;
}

/*
 * 'blocked' (on_failure 'block' and a period failed for good), 'failed'
 * (the same with 'continue'), 'retrying', 'behind' (due periods wait), or
 * 'ok'.
 */
static const char *
pipeline_state(const Pipeline *p, const PeriodCounts *c, bool behind)
{
	if (c->failed > 0)
		return p->block ? "blocked" : "failed";
	if (c->retrying > 0)
		return "retrying";
	return behind ? "behind" : "ok";
}

/*
 * A change of state is written, and a state other than 'ok' raises one
 * WARNING: once per change, not once per run.
 */
static void
note_state(Pipeline *p, const PeriodCounts *c, const char *state, int64 behind)
{
	Oid			argtypes[2] = {INT8OID, TEXTOID};
	Datum		args[2] = {Int64GetDatum(p->id), CStringGetTextDatum(state)};

	if (strcmp(state, p->state) == 0)
		return;
	ledger_exec_as_owner("UPDATE idem_etl.pipelines SET state = $2"
						 " WHERE pipeline_id OPERATOR(pg_catalog.=) $1",
						 2, argtypes, args, NULL, SPI_OK_UPDATE);
	p->state = pstrdup(state);
	if (strcmp(state, "ok") == 0)
		return;
	if (strcmp(state, "behind") == 0)
		ereport(WARNING,
				(errmsg("pipeline \"%s\" is " INT64_FORMAT " periods behind", p->name, behind),
				 errdetail("Its due periods run oldest first, one per job when the worker runs them.")));
	else
		ereport(WARNING,
				(errmsg(strcmp(state, "blocked") == 0 ? "pipeline \"%s\" is blocked by a failed period" :
						strcmp(state, "failed") == 0 ? "pipeline \"%s\" has a failed period" :
						"pipeline \"%s\" is retrying a failed period", p->name),
				 c->last_error ? errdetail("The last error was: %s", c->last_error) : 0,
				 strcmp(state, "retrying") == 0 ? 0 :
				 errhint("Fix the cause, then call etl_pipeline_rerun for the failed periods%s.",
						 p->block ? "; the periods after them wait until they succeed" : "")));
}

static void
require_read_committed(void)
{
	if (IsolationUsesXactSnapshot())
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("etl_pipeline_run must run at isolation level READ COMMITTED"),
				 errdetail("A run must see the periods that other runs committed after its transaction began.")));
}

/*
 * etl_pipeline_run(name, max_periods): what is due, oldest first, at most
 * max_periods of them (lookbacks not counted); one row per period run.
 */
Datum
etl_pipeline_run(PG_FUNCTION_ARGS)
{
	Tuplestorestate *store;
	TupleDesc	desc;
	Pipeline   *p;
	int32		max_periods = args_isnull(fcinfo, 1) ? 0 : PG_GETARG_INT32(1);
	TimestampTz now = GetCurrentTimestamp();
	int64		next_new,
				due_last;
	int32		ran = 0;
	bool		blocked = false;
	PeriodCounts counts;
	TimestampTz due;
	int64		behind;
	PeriodRow	row;
	MemoryContext periodcxt;
	MemoryContext oldcxt;

	PreventCommandIfReadOnly("etl_pipeline_run()");
	if (args_isnull(fcinfo, 0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("name must not be NULL")));
	if (!args_isnull(fcinfo, 1) && max_periods < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("max_periods must be at least 1"),
				 errdetail("It is %d.", max_periods)));
	require_read_committed();
	store = args_srf_store(fcinfo, &desc);
	SPI_connect();
	p = pipeline_load(args_text(fcinfo, 0));

	/*
	 * Only as its owner: a superuser's session running another role's command
	 * would let that command change the session (its settings, temporary
	 * objects) that the superuser goes on using.
	 */
	if (p->owner != GetUserId())
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("pipeline \"%s\" belongs to role \"%s\"", p->name,
						GetUserNameFromId(p->owner, true) ? GetUserNameFromId(p->owner, true) : "?"),
				 errdetail("A pipeline's periods run as its owner, in a session of that role."),
				 errhint("Call etl_pipeline_rerun or etl_pipeline_resume and let the worker run it, or SET ROLE to its owner.")));
	if (p->paused)
	{
		ereport(NOTICE,
				(errmsg("pipeline \"%s\" is paused", p->name),
				 errhint("Resume it with etl_pipeline_resume.")));
		SPI_finish();
		return (Datum) 0;
	}
	if (!pipeline_lock(p, false))
	{
		ereport(NOTICE,
				(errmsg("pipeline \"%s\" is being run by another session", p->name),
				 errdetail("That run runs what is due and schedules the next.")));
		SPI_finish();
		return (Datum) 0;
	}
	/* what the run before ours committed: read after the lock */
	p = pipeline_load(p->name);
	next_new = first_new(p);
	due_last = last_due(p, now);

	/*
	 * What a period allocates (its command, its rows read, an error) is freed
	 * before the next: a catch-up of many periods runs in the memory of one,
	 * and leaves the heap as it found it for the period's command.
	 */
	periodcxt = AllocSetContextCreate(CurrentMemoryContext, "idem_etl pipeline period",
									  ALLOCSET_DEFAULT_SIZES);
	oldcxt = MemoryContextSwitchTo(periodcxt);
	while (max_periods == 0 || ran < max_periods)
	{
		CHECK_FOR_INTERRUPTS();
		MemoryContextReset(periodcxt);
		if (oldest_open(p, now, !p->block, &row))
		{
			if (row_runnable(&row, now))
			{
				run_period(p, row.n, strcmp(row.status, "queued") == 0 ? "rerun" : "retry",
						   row.attempts, store, desc);
				ran++;
				continue;
			}
			/* on_failure 'block': nothing after it runs */
			blocked = true;
			break;
		}
		if (next_new > due_last)
			break;
		if (p->max_catchup > 0 && due_last - next_new + 1 > p->max_catchup)
		{
			skip_periods(p, next_new, due_last - p->max_catchup);
			next_new = due_last - p->max_catchup + 1;
		}
		foreach_lookback(p, next_new, store, desc);
		run_period(p, next_new, "due", 0, store, desc);
		next_new++;
		ran++;
	}
	MemoryContextSwitchTo(oldcxt);
	MemoryContextDelete(periodcxt);

	/*
	 * The next run: now when max_periods stopped us with more due; else the
	 * next period's due time or the next retry, whichever is first; none
	 * while a failed period blocks (etl_pipeline_rerun schedules one).
	 */
	counts = count_periods(p);
	behind = counts.open + Max(0, due_last - next_new + 1);
	if (blocked && counts.failed > 0)
		due = DT_NOEND;
	else if (max_periods > 0 && ran >= max_periods &&
			 (next_new <= due_last || oldest_open(p, now, true, &row)))
		due = now;
	else
		due = Min(pipeline_due_at(p, next_new), counts.next_retry);
	pipeline_schedule(p, due);
	note_state(p, &counts, pipeline_state(p, &counts, due == now && behind > 0), behind);
	SPI_finish();
	return (Datum) 0;
}

/*
 * idem_etl.pipelines_status(): one row per pipeline of the current role
 * (every role's for a superuser), computed now: the watermark (the end of
 * the periods that all succeeded, from the start), when it is next due,
 * how many due periods have not succeeded, how many max_catchup left out,
 * the last error.
 */
Datum
idem_etl_pipelines_status(PG_FUNCTION_ARGS)
{
	Tuplestorestate *store;
	TupleDesc	desc;
	Oid			argtypes[2] = {OIDOID, BOOLOID};
	Datum		args[2] = {ObjectIdGetDatum(GetUserId()), BoolGetDatum(superuser())};
	TimestampTz now = GetCurrentTimestamp();
	List	   *ids = NIL;
	ListCell   *lc;

	store = args_srf_store(fcinfo, &desc);
	SPI_connect();
	ledger_exec_as_owner("SELECT pipeline_id FROM idem_etl.pipelines"
						 " WHERE owner_oid OPERATOR(pg_catalog.=) $1 OR $2 ORDER BY name, owner",
						 2, argtypes, args, NULL, SPI_OK_SELECT);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		bool		isnull;
		int64	   *id = palloc(sizeof(int64));

		*id = DatumGetInt64(column(i, 1, &isnull));
		ids = lappend(ids, id);
	}
	foreach(lc, ids)
	{
		Pipeline   *p = pipeline_load_id(*(int64 *) lfirst(lc));
		PeriodCounts c = count_periods(p);
		int64		next_new = first_new(p);
		int64		due_last = last_due(p, now);
		Datum		values[12];
		bool		nulls[12] = {0};
		TimestampTz watermark;
		TimestampTz next_due;

		if (c.first_open == DT_NOEND)
			watermark = c.last_end;
		else
			watermark = c.first_open > p->period.start ? c.first_open : DT_NOBEGIN;
		next_due = Min(pipeline_due_at(p, next_new), c.next_retry);
		values[0] = CStringGetTextDatum(p->name);
		values[1] = DirectFunctionCall1(namein, CStringGetDatum(GetUserNameFromId(p->owner, true) ?
																GetUserNameFromId(p->owner, true) : "?"));
		values[2] = IntervalPGetDatum(p->period.every);
		values[3] = BoolGetDatum(p->paused);
		values[4] = CStringGetTextDatum(p->state);
		values[5] = TimestampTzGetDatum(watermark);
		nulls[5] = watermark == DT_NOBEGIN;
		values[6] = TimestampTzGetDatum(next_due);
		nulls[6] = p->paused || (p->block && c.failed > 0);
		values[7] = Int64GetDatum(c.open + Max(0, due_last - next_new + 1));
		values[8] = Int64GetDatum(c.skipped);
		values[9] = c.last_error ? CStringGetTextDatum(c.last_error) : (Datum) 0;
		nulls[9] = c.last_error == NULL;
		values[10] = Int64GetDatum(p->job_id);
		nulls[10] = p->job_id == 0;
		values[11] = Int64GetDatum(p->id);
		tuplestore_putvalues(store, desc, values, nulls);
	}
	SPI_finish();
	return (Datum) 0;
}
