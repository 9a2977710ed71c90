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
#include "pipeline/sequence.h"
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

static Datum
column(int row, int col, bool *isnull)
{
	return SPI_getbinval(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, col, isnull);
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
 * The oldest period that starts after after and is queued, retrying or
 * failed; with runnable, the oldest that may run at now (queued, or
 * retrying and due).
 */
static bool
oldest_open(const Pipeline *p, TimestampTz now, bool runnable, TimestampTz after,
			PeriodRow *row)
{
	Oid			argtypes[4] = {INT8OID, TIMESTAMPTZOID, BOOLOID, TIMESTAMPTZOID};
	Datum		args[4] = {Int64GetDatum(p->id), TimestampTzGetDatum(now), BoolGetDatum(runnable),
	TimestampTzGetDatum(after)};
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
							  " AND period_start OPERATOR(pg_catalog.>) $4"
							  " ORDER BY period_start LIMIT 1",
							  4, argtypes, args, NULL, SPI_OK_SELECT);
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

/*
 * The oldest open period this run may take (a rerun, or a retry that is
 * due), in *row; with on_failure 'block', *blocked when the oldest open
 * period may not run.  With max_parallel > 1 a period another run has is
 * passed over (with 'block', a retry another run has blocks the periods
 * after it as a failed one does), and one taken is read again under its
 * lock: another run may have run it since.
 */
static bool
take_open(const Pipeline *p, TimestampTz now, PeriodRow *row, bool *blocked)
{
	TimestampTz after = DT_NOBEGIN;

	while (oldest_open(p, now, !p->block, after, row))
	{
		PeriodRow	again;

		if (!row_runnable(row, now))
		{
			*blocked = true;
			return false;
		}
		if (p->max_parallel == 1)
			return true;
		after = period_start(&p->period, row->n);
		if (!pipeline_lock_period(p, row->n))
		{
			if (p->block && strcmp(row->status, "retrying") == 0)
			{
				*blocked = true;
				return false;
			}
			continue;
		}
		if (oldest_open(p, now, true, after - 1, &again) && again.n == row->n)
		{
			*row = again;
			return true;
		}
	}
	return false;
}

/*
 * With max_parallel > 1: the first period from n on that has no row yet.
 * Runs in parallel may commit out of order, and a run that crashed leaves
 * a hole below periods that other runs committed.
 */
static int64
first_missing(const Pipeline *p, int64 n)
{
	Oid			argtypes[2] = {INT8OID, TIMESTAMPTZOID};
	Datum		args[2] = {Int64GetDatum(p->id), TimestampTzGetDatum(period_start(&p->period, n))};
	bool		isnull;
	Datum		d;

	static SPIPlanPtr plan = NULL;

	ledger_exec_as_owner_kept(&plan, "SELECT CASE WHEN NOT EXISTS (SELECT FROM idem_etl.pipeline_periods"
							  "  WHERE pipeline_id OPERATOR(pg_catalog.=) $1"
							  "  AND period_start OPERATOR(pg_catalog.=) $2) THEN $2"
							  " ELSE (SELECT pg_catalog.min(a.period_end) FROM idem_etl.pipeline_periods a"
							  "  WHERE a.pipeline_id OPERATOR(pg_catalog.=) $1"
							  "  AND a.period_start OPERATOR(pg_catalog.>=) $2"
							  "  AND NOT EXISTS (SELECT FROM idem_etl.pipeline_periods b"
							  "   WHERE b.pipeline_id OPERATOR(pg_catalog.=) $1"
							  "   AND b.period_start OPERATOR(pg_catalog.=) a.period_end)) END",
							  2, argtypes, args, NULL, SPI_OK_SELECT);
	d = column(0, 1, &isnull);
	SPI_freetuptable(SPI_tuptable);
	return period_index_at(&p->period, DatumGetTimestampTz(d));
}

/*
 * The next new period this run takes, from *next on, in *next: false when
 * none is due.  Runs in turn (max_parallel 1) take *next itself; runs in
 * parallel the first period without a row that no other run has, checked
 * again under its lock.
 */
static bool
take_new(const Pipeline *p, int64 *next, int64 due_last)
{
	if (p->max_parallel == 1)
		return *next <= due_last;
	for (;;)
	{
		int64		n = first_missing(p, *next);

		if (n > due_last)
			return false;
		*next = n;
		if (pipeline_lock_period(p, n) && first_missing(p, n) == n)
			return true;
		*next = n + 1;
	}
}

/*
 * Write the row of a call's period or range, in the (sub)transaction that
 * ran it.  'skipped' (max_catchup) never replaces a row: with max_parallel
 * > 1 another run may have run the period.
 */
static void
record_call(const PeriodCall *c, const char *status, int32 attempts,
			const char *error, TimestampTz retry_after)
{
	Oid			argtypes[11] = {INT8OID, TIMESTAMPTZOID, TIMESTAMPTZOID, TEXTOID, INT4OID,
	TEXTOID, TIMESTAMPTZOID, INT8OID, INT8OID, INT8OID, INT8OID};
	Datum		args[11];
	char		nulls[12] = "           ";
	static SPIPlanPtr plan = NULL;

	args[0] = Int64GetDatum(c->p->id);
	args[1] = TimestampTzGetDatum(c->start);
	args[2] = TimestampTzGetDatum(c->end);
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
	args[8] = Int64GetDatum(c->run_id);
	if (c->run_id == 0)
		nulls[8] = 'n';
	args[9] = Int64GetDatum(c->from_id);
	args[10] = Int64GetDatum(c->to_id);
	if (!c->p->sequence)
		nulls[9] = nulls[10] = 'n';
	ledger_exec_as_owner_kept(&plan, "INSERT INTO idem_etl.pipeline_periods AS pp (pipeline_id, period_start,"
							  " period_end, status, attempts, last_error, retry_after, job_id, run_id,"
							  " from_id, to_id, finished_at)"
							  " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, pg_catalog.clock_timestamp())"
							  " ON CONFLICT (pipeline_id, period_start) DO UPDATE SET"
							  " status = EXCLUDED.status, attempts = EXCLUDED.attempts,"
							  " last_error = EXCLUDED.last_error, retry_after = EXCLUDED.retry_after,"
							  " job_id = EXCLUDED.job_id,"
							  " run_id = COALESCE(EXCLUDED.run_id, pp.run_id),"
							  " finished_at = EXCLUDED.finished_at"
							  " WHERE EXCLUDED.status OPERATOR(pg_catalog.<>) 'skipped'",
							  11, argtypes, args, nulls, SPI_OK_INSERT);
}

/* The call of period n of a time pipeline (kind: see pipeline_run_call). */
static PeriodCall
period_of(Pipeline *p, int64 n, const char *kind, int32 attempts)
{
	PeriodCall	c = {0};

	c.p = p;
	c.kind = kind;
	c.command = period_expand(&p->period, p->command, n);
	c.start = period_start(&p->period, n);
	c.end = period_start(&p->period, n + 1);
	c.attempts = attempts;
	c.record = strcmp(kind, "lookback") != 0;
	return c;
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
 * sql_try's callback: the command, then its row, in the same
 * subtransaction.  The caller is the pipeline's owner (etl_pipeline_run
 * refuses anyone else).
 */
static void
period_call(void *arg)
{
	PeriodCall *c = (PeriodCall *) arg;
	int			rc;

	rc = SPI_execute(c->command, false, 0);
	if (rc < 0)
		elog(ERROR, "SPI_execute failed: %s", SPI_result_code_string(rc));
	c->run_id = command_run_id();
	SPI_freetuptable(SPI_tuptable);
	if (c->record)
		record_call(c, "succeeded", c->attempts + 1, NULL, DT_NOBEGIN);
}

/* One row of etl_pipeline_run's result. */
static void
put_result(Tuplestorestate *store, TupleDesc desc, const PeriodCall *c,
		   const char *status, const char *error)
{
	Datum		values[8];
	bool		nulls[8] = {c->p->sequence, c->p->sequence, false, false, error == NULL,
	c->run_id == 0, !c->p->sequence, !c->p->sequence};

	values[0] = TimestampTzGetDatum(c->start);
	values[1] = TimestampTzGetDatum(c->end);
	values[2] = CStringGetTextDatum(c->kind);
	values[3] = CStringGetTextDatum(status);
	values[4] = error ? CStringGetTextDatum(error) : (Datum) 0;
	values[5] = Int64GetDatum(c->run_id);
	values[6] = Int64GetDatum(c->from_id);
	values[7] = Int64GetDatum(c->to_id);
	tuplestore_putvalues(store, desc, values, nulls);
}

/*
 * Run a period or a range (kind: 'due', 'retry', 'rerun' or 'lookback').
 * A failure is recorded with its error: retried after a backoff while
 * attempts remain, else failed for good.  Returns whether it succeeded.
 */
bool
pipeline_run_call(PeriodCall *c, Tuplestorestate *store, TupleDesc desc)
{
	Pipeline   *p = c->p;
	ErrorData  *failure;
	char	   *error;
	TimestampTz retry_after;
	int			backoff;
	int32		attempts = c->attempts;

	failure = sql_try(period_call, c);
	if (failure == NULL)
	{
		put_result(store, desc, c, "succeeded", NULL);
		return true;
	}
	c->run_id = 0;
	error = psprintf("%s: %s", unpack_sql_state(failure->sqlerrcode), failure->message);
	if (!c->record)
	{
		/* a lookback's failure leaves the period as it was */
		ereport(WARNING,
				(errmsg("pipeline \"%s\": the lookback rerun of the period from %s failed",
						p->name, period_format(&p->period, c->start)),
				 errdetail("%s", error)));
		put_result(store, desc, c, "failed", error);
		return false;
	}
	attempts++;
	backoff = Min(1 << Min(attempts - 1, 30), idem_max_backoff);
	retry_after = GetCurrentTimestamp() + (TimestampTz) backoff * USECS_PER_SEC;
	if (attempts >= p->max_attempts)
		record_call(c, "failed", attempts, error, DT_NOBEGIN);
	else
		record_call(c, "retrying", attempts, error, retry_after);
	put_result(store, desc, c, attempts >= p->max_attempts ? "failed" : "retrying", error);
	return false;
}

/* Run period n of a time pipeline. */
static void
run_period(Pipeline *p, int64 n, const char *kind, int32 attempts,
		   Tuplestorestate *store, TupleDesc desc)
{
	PeriodCall	c = period_of(p, n, kind, attempts);

	(void) pipeline_run_call(&c, store, desc);
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
	{
		int64		k = *(int64 *) lfirst(lc);

		/* a period another run has is being run now */
		if (p->max_parallel == 1 || pipeline_lock_period(p, k))
			run_period(p, k, "lookback", 0, store, desc);
	}
}

/* Periods first .. last, left out by max_catchup: rows 'skipped'. */
static void
skip_periods(Pipeline *p, int64 first, int64 last)
{
	for (int64 n = first; n <= last; n++)
	{
		PeriodCall	c = period_of(p, n, "due", 0);

		CHECK_FOR_INTERRUPTS();
		record_call(&c, "skipped", 0, NULL, DT_NOBEGIN);
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
	if (strcmp(state, "behind") == 0 && p->sequence)
		ereport(WARNING,
				(errmsg("pipeline \"%s\" is behind", p->name),
				 errdetail("New keys wait: its ranges run one per job when the worker runs them.")));
	else if (strcmp(state, "behind") == 0)
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
	if (!pipeline_lock_run(p))
	{
		if (p->max_parallel == 1)
			ereport(NOTICE,
					(errmsg("pipeline \"%s\" is being run by another session", p->name),
					 errdetail("That run runs what is due and schedules the next.")));
		else
			ereport(NOTICE,
					(errmsg("pipeline \"%s\" runs %d periods at once already", p->name,
							p->max_parallel),
					 errdetail("Its max_parallel is %d; those runs run what is due and schedule the next.",
							   p->max_parallel)));
		SPI_finish();
		return (Datum) 0;
	}
	/* what the run before ours committed: read after the lock */
	p = pipeline_load(p->name);
	if (p->sequence)
	{
		bool		more;

		(void) sequence_run(p, max_periods, store, desc, &blocked, &more);
		counts = count_periods(p);
		if (blocked && counts.failed > 0)
			due = DT_NOEND;
		else if (more)
			due = now;
		else
			due = Min(pipeline_due_at(p, period_index_at(&p->period, now)), counts.next_retry);
		pipeline_schedule(p, due, 1);
		note_state(p, &counts, pipeline_state(p, &counts, more), counts.open);
		SPI_finish();
		return (Datum) 0;
	}
	next_new = p->max_parallel == 1 ? first_new(p) : 0;
	due_last = pipeline_last_due(p, now);

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
		if (take_open(p, now, &row, &blocked))
		{
			run_period(p, row.n, strcmp(row.status, "queued") == 0 ? "rerun" : "retry",
					   row.attempts, store, desc);
			ran++;
			continue;
		}
		/* on_failure 'block': nothing after the failed period runs */
		if (blocked)
			break;
		if (p->max_parallel > 1)
			next_new = first_missing(p, next_new);
		if (p->max_catchup > 0 && due_last - next_new + 1 > p->max_catchup)
		{
			skip_periods(p, next_new, due_last - p->max_catchup);
			next_new = due_last - p->max_catchup + 1;
		}
		if (!take_new(p, &next_new, due_last))
			break;
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
			 (next_new <= due_last || oldest_open(p, now, true, DT_NOBEGIN, &row)))
		due = now;
	else
		due = Min(pipeline_due_at(p, next_new), counts.next_retry);
	if (p->max_parallel > 1)
		pipeline_refresh(p);
	pipeline_schedule(p, due, due == now ? (int) Min(behind, p->max_parallel) : 1);
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
		int64		due_last = pipeline_last_due(p, now);
		Datum		values[13];
		bool		nulls[13] = {0};
		TimestampTz watermark;
		TimestampTz next_due;

		if (c.first_open == DT_NOEND)
			watermark = c.last_end;
		else
			watermark = c.first_open > p->period.start ? c.first_open : DT_NOBEGIN;
		if (p->sequence)
		{
			/* its ticks are when it looks for new rows: no watermark in time */
			watermark = DT_NOBEGIN;
			next_due = Min(pipeline_due_at(p, period_index_at(&p->period, now)), c.next_retry);
			next_new = due_last + 1;
		}
		else
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
		values[12] = p->sequence ? Int64GetDatum(sequence_last_id(p)) : (Datum) 0;
		nulls[12] = !p->sequence || c.last_end == DT_NOBEGIN;
		tuplestore_putvalues(store, desc, values, nulls);
	}
	SPI_finish();
	return (Datum) 0;
}
