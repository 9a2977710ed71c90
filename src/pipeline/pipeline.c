/*
 * pipeline.c
 *		Pipelines: the SQL functions that manage them (etl_pipeline_create,
 *		etl_pipeline_pause, etl_pipeline_resume, etl_pipeline_drop,
 *		etl_pipeline_rerun), every read and write of idem_etl.pipelines,
 *		their locks, and their next run in the job queue.
 *
 * Like the job queue, the tables are written only here and in
 * pipeline_run.c, with their owner's rights (ledger_exec_as_owner: fixed,
 * qualified text under a pinned search_path).  A pipeline belongs to the
 * role that created it: only that role and superusers find it by its name,
 * and its command runs as that role.
 */
#include "postgres.h"

#include "compat.h"

#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "storage/lock.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"

#include "pipeline/pipeline.h"
#include "state/ledger.h"
#include "util/args.h"
#include "util/settings.h"
#include "util/sql.h"
#include "worker/jobs.h"

PG_FUNCTION_INFO_V1(etl_pipeline_create);
PG_FUNCTION_INFO_V1(etl_pipeline_pause);
PG_FUNCTION_INFO_V1(etl_pipeline_resume);
PG_FUNCTION_INFO_V1(etl_pipeline_drop);
PG_FUNCTION_INFO_V1(etl_pipeline_rerun);

/*
 * The advisory lock spaces of pipelines (the ledger's are 0x1DE7, 0x1DE8):
 * a pipeline; one period of a pipeline whose periods run in parallel; and
 * its run slots, one per period run at once (0x1E00 + slot).
 */
#define PIPELINE_LOCK_SPACE 0x1DEA
#define PIPELINE_PERIOD_SPACE 0x1DEB
#define PIPELINE_SLOT_SPACE 0x1E00

#define PIPELINE_COLUMNS \
	"pipeline_id, name, owner_oid, command, every, start, lag, lookback," \
	" max_catchup, time_zone, on_failure, max_attempts, paused, state, job_id," \
	" max_parallel, kind, source_oid, key_column, sequence_oid, max_batch_size"

static Interval *
interval_copy(Datum d)
{
	Interval   *copy = palloc(sizeof(Interval));

	memcpy(copy, DatumGetIntervalP(d), sizeof(Interval));
	return copy;
}

static Datum
column(int row, int col, bool *isnull)
{
	return SPI_getbinval(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, col, isnull);
}

/*
 * The current role's pipeline of that name; for a superuser, also another
 * role's, when only one role has a pipeline of that name.  42704 when there
 * is none the caller may see: another role's pipeline is reported exactly
 * like one that does not exist.
 */
/* The first row of SPI_tuptable (PIPELINE_COLUMNS) as a Pipeline. */
static Pipeline *
from_row(void)
{
	Pipeline   *p = palloc0(sizeof(Pipeline));
	bool		isnull;
	Datum		d;

	p->id = DatumGetInt64(column(0, 1, &isnull));
	p->name = TextDatumGetCString(column(0, 2, &isnull));
	p->owner = DatumGetObjectId(column(0, 3, &isnull));
	p->command = TextDatumGetCString(column(0, 4, &isnull));
	p->lag = interval_copy(column(0, 7, &isnull));
	p->lookback = DatumGetInt32(column(0, 8, &isnull));
	d = column(0, 9, &isnull);
	p->max_catchup = isnull ? 0 : DatumGetInt32(d);
	p->block = strcmp(TextDatumGetCString(column(0, 11, &isnull)), "block") == 0;
	p->max_attempts = DatumGetInt32(column(0, 12, &isnull));
	p->paused = DatumGetBool(column(0, 13, &isnull));
	p->state = TextDatumGetCString(column(0, 14, &isnull));
	d = column(0, 15, &isnull);
	p->job_id = isnull ? 0 : DatumGetInt64(d);
	p->max_parallel = DatumGetInt32(column(0, 16, &isnull));
	p->sequence = strcmp(TextDatumGetCString(column(0, 17, &isnull)), "sequence") == 0;
	if (p->sequence)
	{
		p->source = DatumGetObjectId(column(0, 18, &isnull));
		p->key_column = pstrdup(NameStr(*DatumGetName(column(0, 19, &isnull))));
		p->seq = DatumGetObjectId(column(0, 20, &isnull));
		d = column(0, 21, &isnull);
		p->max_batch_size = isnull ? 0 : DatumGetInt64(d);
	}
	period_init(&p->period, DatumGetTimestampTz(column(0, 6, &isnull)),
				interval_copy(column(0, 5, &isnull)),
				TextDatumGetCString(column(0, 10, &isnull)));
	return p;
}

Pipeline *
pipeline_load(const char *name)
{
	Oid			argtypes[3] = {TEXTOID, OIDOID, BOOLOID};
	Datum		args[3] = {CStringGetTextDatum(name), ObjectIdGetDatum(GetUserId()),
	BoolGetDatum(superuser())};
	bool		isnull;

	ledger_exec_as_owner("SELECT " PIPELINE_COLUMNS " FROM idem_etl.pipelines"
						 " WHERE name OPERATOR(pg_catalog.=) $1"
						 " AND (owner_oid OPERATOR(pg_catalog.=) $2 OR $3)"
						 " ORDER BY owner_oid OPERATOR(pg_catalog.=) $2 DESC LIMIT 2",
						 3, argtypes, args, NULL, SPI_OK_SELECT);
	if (SPI_processed == 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("pipeline \"%s\" does not exist", name),
				 errhint("A role sees only the pipelines it created.")));
	if (SPI_processed > 1 && DatumGetObjectId(column(0, 3, &isnull)) != GetUserId())
		ereport(ERROR,
				(errcode(ERRCODE_AMBIGUOUS_PARAMETER),
				 errmsg("pipeline name \"%s\" is ambiguous", name),
				 errdetail("Several roles have a pipeline of that name."),
				 errhint("SET ROLE to the pipeline's owner first.")));
	return from_row();
}

/* A pipeline by its id, whoever owns it (the caller checked). */
Pipeline *
pipeline_load_id(int64 id)
{
	Oid			argtypes[1] = {INT8OID};
	Datum		args[1] = {Int64GetDatum(id)};

	ledger_exec_as_owner("SELECT " PIPELINE_COLUMNS " FROM idem_etl.pipelines"
						 " WHERE pipeline_id OPERATOR(pg_catalog.=) $1",
						 1, argtypes, args, NULL, SPI_OK_SELECT);
	if (SPI_processed == 0)
		elog(ERROR, "pipeline " INT64_FORMAT " does not exist", id);
	return from_row();
}

static bool
advisory_lock(uint32 key1, uint32 key2, uint16 space, LOCKMODE mode, bool wait)
{
	LOCKTAG		tag;

	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, key1, key2, space);
	return LockAcquire(&tag, mode, false, !wait) != LOCKACQUIRE_NOT_AVAIL;
}

/*
 * One run of a pipeline at a time, until the end of the transaction: with
 * wait false, false when another session runs it.
 */
bool
pipeline_lock(const Pipeline *p, bool wait)
{
	return advisory_lock((uint32) (p->id >> 32), (uint32) p->id, PIPELINE_LOCK_SPACE,
						 ExclusiveLock, wait);
}

/*
 * A run's lock, without waiting, until the end of the transaction: false
 * when the pipeline runs as many periods as it may already.  With
 * max_parallel 1 the run holds the pipeline's lock, so runs take turns and
 * periods run in order.  Otherwise runs share that lock (etl_pipeline_drop
 * and etl_pipeline_rerun, which hold it exclusively, wait for them all),
 * and each holds one of max_parallel slots; a run then takes each period
 * it runs by that period's lock (pipeline_lock_period).
 */
bool
pipeline_lock_run(const Pipeline *p)
{
	if (p->max_parallel == 1)
		return pipeline_lock(p, false);
	if (!advisory_lock((uint32) (p->id >> 32), (uint32) p->id, PIPELINE_LOCK_SPACE,
					   RowExclusiveLock, false))
		return false;
	for (int slot = 0; slot < p->max_parallel; slot++)
		if (advisory_lock((uint32) (p->id >> 32), (uint32) p->id, PIPELINE_SLOT_SPACE + slot,
						  ExclusiveLock, false))
			return true;
	return false;
}

/*
 * Period n of a pipeline whose periods run in parallel, without waiting,
 * until the end of the transaction: false when another run has it.  The
 * key is the low 32 bits of the pipeline's id and of n (a lock that two
 * pipelines 2^32 ids apart would share only makes one of them wait).
 */
bool
pipeline_lock_period(const Pipeline *p, int64 n)
{
	return advisory_lock((uint32) p->id, (uint32) n, PIPELINE_PERIOD_SPACE, ExclusiveLock, false);
}

/*
 * The pipeline's queued run and state as committed now, its row locked:
 * runs in parallel each reschedule it, and note a change of state once,
 * when they end, one after the other.  FOR NO
 * KEY UPDATE, as an UPDATE of it locks: each run's period rows hold a key
 * share lock on it (their foreign key) until the run commits, and FOR
 * UPDATE would wait for those, while the other run waits for ours.
 */
void
pipeline_refresh(Pipeline *p)
{
	Oid			argtypes[1] = {INT8OID};
	Datum		args[1] = {Int64GetDatum(p->id)};
	bool		isnull;
	Datum		d;

	ledger_exec_as_owner("SELECT job_id, state FROM idem_etl.pipelines"
						 " WHERE pipeline_id OPERATOR(pg_catalog.=) $1 FOR NO KEY UPDATE",
						 1, argtypes, args, NULL, SPI_OK_SELECT);
	d = column(0, 1, &isnull);
	p->job_id = isnull ? 0 : DatumGetInt64(d);
	p->state = TextDatumGetCString(column(0, 2, &isnull));
}

/* When period n is due: its end plus the lag, in the pipeline's zone. */
TimestampTz
pipeline_due_at(const Pipeline *p, int64 n)
{
	PeriodSpec	lag = p->period;

	lag.start = period_start(&p->period, n + 1);
	lag.every = p->lag;
	return period_start(&lag, 1);
}

/* The last period that is due at now (end + lag <= now), or -1. */
int64
pipeline_last_due(const Pipeline *p, TimestampTz now)
{
	int64		n = period_index_at(&p->period, now) - 1;

	while (n >= 0 && pipeline_due_at(p, n) > now)
		n--;
	return n;
}

/*
 * The pipeline's next run: one job, as its owner, at due (DT_NOEND: none),
 * moved there if it is queued already; with runs > 1 (periods that may run
 * in parallel now), as many jobs queued or running.  Only with the worker
 * (without it, etl_pipeline_run is called by the user, from pg_cron for
 * instance).
 */
void
pipeline_schedule(Pipeline *p, TimestampTz due, int runs)
{
	int64		job_id;
	Oid			argtypes[2] = {INT8OID, INT8OID};
	Datum		args[2];
	char	   *command;

	if (!idem_preloaded)
		return;
	if (p->paused || due == DT_NOEND)
	{
		if (p->job_id != 0)
			jobs_unschedule(p->job_id, p->paused ? "pipeline paused" : "nothing due");
		return;
	}
	command = psprintf("SELECT %s.etl_pipeline_run(%s, 1)",
					   quote_identifier(get_namespace_name(get_extension_schema(get_extension_oid("idem_etl", false)))),
					   quote_literal_cstr(p->name));
	job_id = jobs_schedule(p->job_id, p->owner, command, due);
	if (runs > 1)
		jobs_fill(p->owner, command, runs);
	if (job_id == p->job_id)
		return;
	p->job_id = job_id;
	args[0] = Int64GetDatum(p->id);
	args[1] = Int64GetDatum(job_id);
	ledger_exec_as_owner("UPDATE idem_etl.pipelines SET job_id = $2"
						 " WHERE pipeline_id OPERATOR(pg_catalog.=) $1",
						 2, argtypes, args, NULL, SPI_OK_UPDATE);
}

/*
 * The checks that etl_pipeline_create and etl_pipeline_create_sequence
 * share, each before anything is written.
 */
void
pipeline_require_args(FunctionCallInfo fcinfo, int n, const char *names)
{
	for (int i = 0; i < n; i++)
		if (PG_ARGISNULL(i))
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("%s must not be NULL", names)));
}

void
pipeline_check_range(const char *argname, int32 value, int32 min, int32 max)
{
	if (value < min || value > max)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must be between %d and %d", argname, min, max),
				 errdetail("It is %d.", value)));
}

void
pipeline_check_name(const char *name)
{
	if (name[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("a pipeline's name must not be empty")));
	ledger_check_length("name", name);
}

void
pipeline_check_on_failure(const char *on_failure)
{
	if (strcmp(on_failure, "block") != 0 && strcmp(on_failure, "continue") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("on_failure must be 'block' or 'continue'"),
				 errdetail("It is '%s'.", on_failure)));
}

/* After the INSERT ... ON CONFLICT DO NOTHING of a new pipeline. */
void
pipeline_check_inserted(const char *name)
{
	if (SPI_processed == 0)
		ereport(ERROR,
				(errcode(ERRCODE_DUPLICATE_OBJECT),
				 errmsg("pipeline \"%s\" already exists", name),
				 errhint("Drop it with etl_pipeline_drop, or choose another name.")));
}

/*
 * etl_pipeline_create(name, command, every, start, lag, lookback,
 * max_catchup, time_zone, on_failure, max_attempts): checks everything
 * before anything is written, then queues the first run for when the first
 * period is due.
 */
Datum
etl_pipeline_create(PG_FUNCTION_ARGS)
{
	char	   *name;
	char	   *command;
	Interval   *lag;
	char	   *time_zone;
	char	   *on_failure;
	int32		lookback,
				max_catchup,
				max_attempts,
				max_parallel;
	PeriodSpec	spec;
	Oid			argtypes[13] = {TEXTOID, OIDOID, NAMEOID, TEXTOID, INTERVALOID,
	TIMESTAMPTZOID, INTERVALOID, INT4OID, INT4OID, TEXTOID, TEXTOID, INT4OID, INT4OID};
	Datum		args[13];
	char		nulls[14] = "             ";
	Pipeline   *p;

	PreventCommandIfReadOnly("etl_pipeline_create()");
	pipeline_require_args(fcinfo, 4, "name, command, every and start");
	name = args_text(fcinfo, 0);
	command = args_text(fcinfo, 1);
	lag = args_isnull(fcinfo, 4) ? NULL : PG_GETARG_INTERVAL_P(4);
	lookback = args_isnull(fcinfo, 5) ? 0 : PG_GETARG_INT32(5);
	max_catchup = args_isnull(fcinfo, 6) ? 0 : PG_GETARG_INT32(6);
	time_zone = args_isnull(fcinfo, 7) ? "UTC" : args_text(fcinfo, 7);
	on_failure = args_isnull(fcinfo, 8) ? "block" : args_text(fcinfo, 8);
	max_attempts = args_isnull(fcinfo, 9) ? 5 : PG_GETARG_INT32(9);
	max_parallel = args_isnull(fcinfo, 10) ? 1 : PG_GETARG_INT32(10);

	pipeline_check_name(name);
	period_init(&spec, PG_GETARG_TIMESTAMPTZ(3), PG_GETARG_INTERVAL_P(2), time_zone);
	if (lag && (lag->month < 0 || lag->day < 0 || lag->time < 0))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("lag must not be negative"),
				 errhint("A period becomes due lag after its end: pass '0' to run it at its end.")));
	pipeline_check_range("lookback", lookback, 0, 1000);
	if (!args_isnull(fcinfo, 6))
		pipeline_check_range("max_catchup", max_catchup, 1, INT_MAX);
	pipeline_check_on_failure(on_failure);
	pipeline_check_range("max_attempts", max_attempts, 1, 100);
	pipeline_check_range("max_parallel", max_parallel, 1, 64);
	period_check_command(command);

	SPI_connect();
	args[0] = CStringGetTextDatum(name);
	args[1] = ObjectIdGetDatum(GetUserId());
	args[2] = DirectFunctionCall1(namein, CStringGetDatum(GetUserNameFromId(GetUserId(), false)));
	args[3] = CStringGetTextDatum(command);
	args[4] = PG_GETARG_DATUM(2);
	args[5] = PG_GETARG_DATUM(3);
	args[6] = lag ? IntervalPGetDatum(lag) : DirectFunctionCall3(interval_in, CStringGetDatum("0"),
																 ObjectIdGetDatum(InvalidOid), Int32GetDatum(-1));
	args[7] = Int32GetDatum(lookback);
	args[8] = Int32GetDatum(max_catchup);
	nulls[8] = args_isnull(fcinfo, 6) ? 'n' : ' ';
	args[9] = CStringGetTextDatum(time_zone);
	args[10] = CStringGetTextDatum(on_failure);
	args[11] = Int32GetDatum(max_attempts);
	args[12] = Int32GetDatum(max_parallel);
	ledger_exec_as_owner("INSERT INTO idem_etl.pipelines (name, owner_oid, owner, command,"
						 " every, start, lag, lookback, max_catchup, time_zone, on_failure,"
						 " max_attempts, max_parallel)"
						 " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)"
						 " ON CONFLICT (owner_oid, name) DO NOTHING RETURNING pipeline_id",
						 13, argtypes, args, nulls, SPI_OK_INSERT_RETURNING);
	pipeline_check_inserted(name);
	p = pipeline_load(name);
	/* periods already due run at once, up to max_parallel of them */
	pipeline_schedule(p, pipeline_due_at(p, 0),
					  (int) Min(p->max_parallel,
								pipeline_last_due(p, GetCurrentTransactionStartTimestamp()) + 1));
	SPI_finish();
	PG_RETURN_INT64(p->id);
}

/* pause or resume: whether it changed anything. */
static bool
set_paused(const char *name, bool paused)
{
	Pipeline   *p = pipeline_load(name);
	Oid			argtypes[2] = {INT8OID, BOOLOID};
	Datum		args[2] = {Int64GetDatum(p->id), BoolGetDatum(paused)};

	ledger_exec_as_owner("UPDATE idem_etl.pipelines SET paused = $2"
						 " WHERE pipeline_id OPERATOR(pg_catalog.=) $1"
						 " AND paused OPERATOR(pg_catalog.<>) $2",
						 2, argtypes, args, NULL, SPI_OK_UPDATE);
	if (SPI_processed == 0)
		return false;
	p->paused = paused;
	/* resumed: the runs look at what is due and schedule the next */
	pipeline_schedule(p, GetCurrentTransactionStartTimestamp(), paused ? 1 : p->max_parallel);
	return true;
}

Datum
etl_pipeline_pause(PG_FUNCTION_ARGS)
{
	bool		changed;

	PreventCommandIfReadOnly("etl_pipeline_pause()");
	SPI_connect();
	changed = set_paused(args_text(fcinfo, 0), true);
	SPI_finish();
	PG_RETURN_BOOL(changed);
}

Datum
etl_pipeline_resume(PG_FUNCTION_ARGS)
{
	bool		changed;

	PreventCommandIfReadOnly("etl_pipeline_resume()");
	SPI_connect();
	changed = set_paused(args_text(fcinfo, 0), false);
	SPI_finish();
	PG_RETURN_BOOL(changed);
}

/*
 * The pipeline, its periods and its queued run go; a run in progress is
 * waited for (lock_timeout applies).  The data it loaded stay.
 */
Datum
etl_pipeline_drop(PG_FUNCTION_ARGS)
{
	Pipeline   *p;
	Oid			argtypes[1] = {INT8OID};
	Datum		args[1];

	PreventCommandIfReadOnly("etl_pipeline_drop()");
	SPI_connect();
	p = pipeline_load(args_text(fcinfo, 0));
	(void) pipeline_lock(p, true);
	args[0] = Int64GetDatum(p->id);
	if (p->job_id != 0)
		jobs_unschedule(p->job_id, "pipeline dropped");
	ledger_exec_as_owner("DELETE FROM idem_etl.pipeline_periods WHERE pipeline_id OPERATOR(pg_catalog.=) $1",
						 1, argtypes, args, NULL, SPI_OK_DELETE);
	ledger_exec_as_owner("DELETE FROM idem_etl.pipelines WHERE pipeline_id OPERATOR(pg_catalog.=) $1",
						 1, argtypes, args, NULL, SPI_OK_DELETE);
	SPI_finish();
	PG_RETURN_BOOL(true);
}

/*
 * etl_pipeline_rerun(name, from_value, to_value): the periods already run
 * (or skipped, or failed) that start from from_value to to_value are queued
 * again, attempts reset; the next run (the worker's, or etl_pipeline_run)
 * runs them oldest first.  Returns how many.
 */
Datum
etl_pipeline_rerun(PG_FUNCTION_ARGS)
{
	Pipeline   *p;
	Oid			argtypes[3] = {INT8OID, TIMESTAMPTZOID, TIMESTAMPTZOID};
	Datum		args[3];
	int32		queued;

	PreventCommandIfReadOnly("etl_pipeline_rerun()");
	pipeline_require_args(fcinfo, 3, "name, from_value and to_value");
	if (PG_GETARG_TIMESTAMPTZ(1) > PG_GETARG_TIMESTAMPTZ(2))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("from_value must not be later than to_value"),
				 errhint("Swap the two timestamps.")));
	SPI_connect();
	p = pipeline_load(args_text(fcinfo, 0));
	(void) pipeline_lock(p, true);
	args[0] = Int64GetDatum(p->id);
	args[1] = PG_GETARG_DATUM(1);
	args[2] = PG_GETARG_DATUM(2);
	ledger_exec_as_owner("UPDATE idem_etl.pipeline_periods SET status = 'queued', attempts = 0,"
						 " retry_after = NULL, last_error = NULL"
						 " WHERE pipeline_id OPERATOR(pg_catalog.=) $1"
						 " AND period_start OPERATOR(pg_catalog.>=) $2"
						 " AND period_start OPERATOR(pg_catalog.<=) $3",
						 3, argtypes, args, NULL, SPI_OK_UPDATE);
	queued = (int32) SPI_processed;
	if (queued > 0)
		pipeline_schedule(p, GetCurrentTransactionStartTimestamp(), Min(queued, p->max_parallel));
	SPI_finish();
	PG_RETURN_INT32(queued);
}
