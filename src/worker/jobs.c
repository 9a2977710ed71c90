/*
 * jobs.c
 *		The job queue, idem_etl.jobs: every read and write of it, and the SQL
 *		functions etl_submit, etl_wait, etl_cancel and etl_backfill.
 *
 * The table is written only here, with its owner's rights (it is readable by
 * everybody, and row security shows each role its own jobs).  A job runs as
 * the role that submitted it.
 */
#include "postgres.h"

#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "storage/lmgr.h"
#include "tcop/utility.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/date.h"
#include "utils/datetime.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#include "util/args.h"
#include "util/settings.h"
#include "worker/jobs.h"
#include "state/ledger.h"
#include "util/sql.h"
#include "worker/worker.h"

PG_FUNCTION_INFO_V1(etl_submit);
PG_FUNCTION_INFO_V1(etl_wait);
PG_FUNCTION_INFO_V1(etl_cancel);
PG_FUNCTION_INFO_V1(etl_backfill);

/* The job's status is one of these: conditions with qualified operators. */
#define JOB_PENDING "status OPERATOR(pg_catalog.=) ANY ('{queued,running}'::pg_catalog.text[])"
#define JOB_ENDED "status OPERATOR(pg_catalog.=) ANY ('{succeeded,failed,cancelled}'::pg_catalog.text[])"

/* The most attempts a job may have; the backoff of the last is bounded. */
#define MAX_ATTEMPTS 100

/*
 * When a job whose attempt failed may run again: 1s, 2s, 4s, ... after its
 * 1st, 2nd, 3rd attempt, at most the parameter (idem_etl.max_backoff, s).
 */
#define RETRY_AFTER(max_backoff_param) \
	"pg_catalog.now() OPERATOR(pg_catalog.+) pg_catalog.make_interval(secs =>" \
	" LEAST(pg_catalog.power(2::pg_catalog.float8," \
	" LEAST(attempts OPERATOR(pg_catalog.-) 1, 30)), " max_backoff_param "))"

static void
require_preload(void)
{
	if (!idem_preloaded)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("idem_etl's background worker is not running"),
				 errdetail("Jobs are run by a worker that starts only when the server preloads idem_etl."),
				 errhint("Add idem_etl to shared_preload_libraries in postgresql.conf and restart the server.")));
}

/*
 * What every job's command must be: one statement that is not BEGIN/COMMIT.
 * what names it in the messages ("a job", "a pipeline's command").
 */
void
jobs_check_command(const char *command, const char *what)
{
	List	   *stmts = sql_parse(command);

	if (list_length(stmts) != 1)
		ereport(ERROR,
				(errcode(ERRCODE_SYNTAX_ERROR),
				 errmsg("%s must be exactly one SQL statement", what),
				 errhint("Wrap several statements in a function or procedure and submit its call.")));
	if (IsA(linitial_node(RawStmt, stmts)->stmt, TransactionStmt))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("%s cannot be a transaction control statement", what),
				 errdetail("Each job runs in a transaction of its own, which commits together with the job's status."),
				 errhint("Submit the statement that does the work; wrap several in a procedure or function.")));
}

static void
check_max_attempts(int32 max_attempts)
{
	if (max_attempts < 1 || max_attempts > MAX_ATTEMPTS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("max_attempts must be between 1 and %d", MAX_ATTEMPTS),
				 errdetail("It is %d.", max_attempts)));
}

/*
 * Queue one statement to run as the current role; with a name, return the
 * current role's queued or running job of that name instead of queueing
 * another.  Names are per role: another role's job of the same name is
 * neither returned nor in the way.
 */
static int64
submit(const char *command, const char *job_name, int32 max_attempts,
	   TimestampTz run_after)
{
	Oid			argtypes[6] = {TEXTOID, TEXTOID, INT4OID, NAMEOID, OIDOID, TIMESTAMPTZOID};
	Datum		args[6];
	char		nulls[6] = {' ', ' ', ' ', ' ', ' ', ' '};

	jobs_check_command(command, "a job");
	check_max_attempts(max_attempts);
	ledger_check_length("job_name", job_name);

	/*
	 * Due jobs start in the order of their run_after.  A time before the
	 * submission would put this role's jobs ahead of every role's jobs
	 * already waiting (and '-infinity', always ahead): it counts as now.
	 */
	if (run_after < GetCurrentTransactionStartTimestamp())
		run_after = GetCurrentTransactionStartTimestamp();

	if (job_name)
	{
		Oid			nametypes[2] = {TEXTOID, OIDOID};
		Datum		name[2] = {CStringGetTextDatum(job_name), ObjectIdGetDatum(GetUserId())};

		ledger_lock_key(GetUserId(), "job", job_name);
		ledger_exec_as_owner("SELECT job_id FROM idem_etl.jobs"
							 " WHERE submitted_by_oid OPERATOR(pg_catalog.=) $2"
							 " AND job_name OPERATOR(pg_catalog.=) $1 AND " JOB_PENDING,
							 2, nametypes, name, NULL, SPI_OK_SELECT);
		if (SPI_processed > 0)
			return sql_result_int8(1);
		args[1] = name[0];
	}
	else
		nulls[1] = 'n';
	args[0] = CStringGetTextDatum(command);
	args[2] = Int32GetDatum(max_attempts);
	args[3] = DirectFunctionCall1(namein, CStringGetDatum(GetUserNameFromId(GetUserId(), false)));
	args[4] = ObjectIdGetDatum(GetUserId());
	args[5] = TimestampTzGetDatum(run_after);
	ledger_exec_as_owner("INSERT INTO idem_etl.jobs (command, job_name, max_attempts,"
						 " submitted_by, submitted_by_oid, run_after)"
						 " VALUES ($1, $2, $3, $4, $5, $6) RETURNING job_id",
						 6, argtypes, args, nulls, SPI_OK_INSERT_RETURNING);
	worker_note_due(run_after);
	return sql_result_int8(1);
}

Datum
etl_submit(PG_FUNCTION_ARGS)
{
	int64		job_id;

	PreventCommandIfReadOnly("etl_submit()");
	require_preload();
	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("command must not be NULL")));
	SPI_connect();
	job_id = submit(args_text(fcinfo, 0), args_text(fcinfo, 1),
					PG_ARGISNULL(2) ? 5 : PG_GETARG_INT32(2),
					PG_ARGISNULL(3) ? GetCurrentTransactionStartTimestamp() : PG_GETARG_TIMESTAMPTZ(3));
	SPI_finish();
	PG_RETURN_INT64(job_id);
}

/*
 * A job that a caller keeps track of by its id (a pipeline's next run):
 * when job_id is still queued, it is moved to run_after (and its command
 * replaced); otherwise a new job of roleoid is queued, without a name
 * (the job that calls this is still running: a name would be taken).
 * Returns the queued job's id.  The caller serializes calls for one job.
 */
int64
jobs_schedule(int64 job_id, Oid roleoid, const char *command, TimestampTz run_after)
{
	Oid			argtypes[5] = {INT8OID, TEXTOID, TIMESTAMPTZOID, NAMEOID, OIDOID};
	Datum		args[5];

	if (run_after < GetCurrentTransactionStartTimestamp())
		run_after = GetCurrentTransactionStartTimestamp();
	args[0] = Int64GetDatum(job_id);
	args[1] = CStringGetTextDatum(command);
	args[2] = TimestampTzGetDatum(run_after);
	args[3] = DirectFunctionCall1(namein, CStringGetDatum(GetUserNameFromId(roleoid, false)));
	args[4] = ObjectIdGetDatum(roleoid);
	ledger_exec_as_owner("UPDATE idem_etl.jobs SET run_after = $3, command = $2"
						 " WHERE job_id OPERATOR(pg_catalog.=) $1"
						 " AND status OPERATOR(pg_catalog.=) 'queued' RETURNING job_id",
						 3, argtypes, args, NULL, SPI_OK_UPDATE_RETURNING);
	if (SPI_processed == 0)
		ledger_exec_as_owner("INSERT INTO idem_etl.jobs (command, max_attempts,"
							 " submitted_by, submitted_by_oid, run_after)"
							 " VALUES ($2, 10, $4, $5, $3) RETURNING job_id",
							 5, argtypes, args, NULL, SPI_OK_INSERT_RETURNING);
	job_id = sql_result_int8(1);
	worker_note_due(run_after);
	return job_id;
}

/* A job kept track of by its id, cancelled if it is still queued. */
void
jobs_unschedule(int64 job_id, const char *why)
{
	Oid			argtypes[2] = {INT8OID, TEXTOID};
	Datum		args[2] = {Int64GetDatum(job_id), CStringGetTextDatum(why)};

	ledger_exec_as_owner("UPDATE idem_etl.jobs SET status = 'cancelled',"
						 " finished_at = pg_catalog.clock_timestamp(), last_error = $2"
						 " WHERE job_id OPERATOR(pg_catalog.=) $1"
						 " AND status OPERATOR(pg_catalog.=) 'queued'",
						 2, argtypes, args, NULL, SPI_OK_UPDATE);
}

/*
 * runs jobs of roleoid with that command queued or running: as many more
 * queued now as it takes (a pipeline whose periods run in parallel).  Two
 * callers at once may queue one too many; such a job finds every run slot
 * taken and ends.
 */
void
jobs_fill(Oid roleoid, const char *command, int runs)
{
	Oid			argtypes[4] = {OIDOID, TEXTOID, NAMEOID, INT4OID};
	Datum		args[4];

	args[0] = ObjectIdGetDatum(roleoid);
	args[1] = CStringGetTextDatum(command);
	args[2] = DirectFunctionCall1(namein, CStringGetDatum(GetUserNameFromId(roleoid, false)));
	args[3] = Int32GetDatum(runs);
	ledger_exec_as_owner("INSERT INTO idem_etl.jobs (command, max_attempts, submitted_by,"
						 " submitted_by_oid, run_after)"
						 " SELECT $2, 10, $3, $1, pg_catalog.now()"
						 " FROM pg_catalog.generate_series(1, $4 OPERATOR(pg_catalog.-)"
						 "  (SELECT pg_catalog.count(*)::pg_catalog.int4 FROM idem_etl.jobs"
						 "   WHERE submitted_by_oid OPERATOR(pg_catalog.=) $1"
						 "   AND command OPERATOR(pg_catalog.=) $2"
						 "   AND status OPERATOR(pg_catalog.=) ANY ('{queued,running}'::pg_catalog.text[])))",
						 4, argtypes, args, NULL, SPI_OK_INSERT);
	if (SPI_processed > 0)
		worker_note_due(GetCurrentTransactionStartTimestamp());
}

/* The job this process runs (a job worker), else 0. */
static int64 current_job = 0;

int64
jobs_current(void)
{
	return current_job;
}

/*
 * The most jobs one etl_backfill may queue: a backfill is one statement,
 * and its jobs are inserted in its transaction.  Ten thousand daily jobs
 * are more than 27 years; a longer range is split into several calls.
 */
#define MAX_BACKFILL_JOBS 10000

/*
 * The dates of a backfill (a list of DateADT), oldest first: from_value + n * step for n = 0,
 * 1, ... up to to_value (each computed from from_value, so that months from
 * the 31st give the 31st or the month's last day, never drift to the 28th).
 * Refused before anything is queued: an infinite bound (22023, the range
 * would never end), a step with a time part (22023: the values are dates, and
 * such a step gives the same date twice or uneven dates), more than
 * MAX_BACKFILL_JOBS dates (54000).
 */
static List *
backfill_dates(DateADT from, DateADT to, Interval *step)
{
	List	   *dates = NIL;
	Timestamp	last;
	Datum		first;

	if (DATE_NOT_FINITE(from) || DATE_NOT_FINITE(to))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must be a finite date", DATE_NOT_FINITE(from) ? "from_value" : "to_value"),
				 errdetail("A backfill queues one job per date, and an infinite range has no end."),
				 errhint("Pass the first and the last date to load.")));
	if (from > to)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("from_value must not be later than to_value"),
				 errhint("Swap the two dates.")));
	if (step->month < 0 || step->day < 0 || step->time < 0 ||
		(step->month == 0 && step->day == 0 && step->time == 0))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("step must be a positive interval"),
				 errhint("Pass a step such as '1 day'.")));
	if (step->time != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("step must be a whole number of days or months"),
				 errdetail("The values of a backfill are dates: a step with hours, minutes or seconds would give the same date more than once, or dates at uneven distances."),
				 errhint("Pass a step such as '1 day', '7 days' or '1 month'.")));

	first = DirectFunctionCall1(date_timestamp, DateADTGetDatum(from));
	last = DatumGetTimestamp(DirectFunctionCall1(date_timestamp, DateADTGetDatum(to)));
	for (int n = 0;; n++)
	{
		Datum		by = DirectFunctionCall2(interval_mul, IntervalPGetDatum(step),
											 Float8GetDatum((double) n));
		Timestamp	value = DatumGetTimestamp(DirectFunctionCall2(timestamp_pl_interval,
																  first, by));

		if (value > last)
			break;
		if (n >= MAX_BACKFILL_JOBS)
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("a backfill may queue at most %d jobs", MAX_BACKFILL_JOBS),
					 errdetail("From %s to %s by %s are more dates than that.",
							   DatumGetCString(DirectFunctionCall1(date_out, DateADTGetDatum(from))),
							   DatumGetCString(DirectFunctionCall1(date_out, DateADTGetDatum(to))),
							   DatumGetCString(DirectFunctionCall1(interval_out, IntervalPGetDatum(step)))),
					 errhint("Split the range into several backfills, or pass a longer step.")));
		dates = lappend_int(dates, DatumGetDateADT(DirectFunctionCall1(timestamp_date,
																	   TimestampGetDatum(value))));
	}
	return dates;
}

/* A date as YYYY-MM-DD whatever DateStyle says (as to_char prints it). */
static char *
iso_date(DateADT date)
{
	int			year,
				month,
				day;

	j2date(date + POSTGRES_EPOCH_JDATE, &year, &month, &day);
	if (year <= 0)
		year = -(year - 1);
	return psprintf("%04d-%02d-%02d", year, month, day);
}

/*
 * One job per value from from_value to to_value, oldest first, each with
 * {run_date} replaced by the value's quoted literal and named
 * job_name:value, so that submitting the same backfill again while it is
 * pending queues nothing new.
 */
Datum
etl_backfill(PG_FUNCTION_ARGS)
{
	TupleDesc	desc;
	Tuplestorestate *store;
	char	   *command;
	char	   *job_name;
	List	   *dates;
	ListCell   *lc;

	PreventCommandIfReadOnly("etl_backfill()");
	require_preload();
	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(2) || PG_ARGISNULL(3))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("command, from_value, to_value and step must not be NULL")));
	dates = backfill_dates(PG_GETARG_DATEADT(1), PG_GETARG_DATEADT(2),
						   PG_GETARG_INTERVAL_P(3));
	store = args_srf_store(fcinfo, &desc);
	SPI_connect();
	command = args_text(fcinfo, 0);
	job_name = PG_ARGISNULL(4) ? psprintf("backfill %s",
										  text_to_cstring(DatumGetTextPP(DirectFunctionCall1(md5_text,
																							 PG_GETARG_DATUM(0))))) :
		args_text(fcinfo, 4);
	foreach(lc, dates)
	{
		char	   *value = iso_date((DateADT) lfirst_int(lc));
		StringInfoData cmd;
		Datum		job[1];
		bool		isnull[1] = {false};

		initStringInfo(&cmd);
		for (const char *p = command; *p;)
		{
			if (strncmp(p, "{run_date}", 10) == 0)
			{
				appendStringInfoString(&cmd, quote_literal_cstr(value));
				p += 10;
			}
			else
				appendStringInfoChar(&cmd, *p++);
		}
		job[0] = Int64GetDatum(submit(cmd.data, psprintf("%s:%s", job_name, value), 5,
									  GetCurrentTransactionStartTimestamp()));
		tuplestore_putvalues(store, desc, job, isnull);
	}
	SPI_finish();
	return (Datum) 0;
}

/*
 * The job's status, as committed now (so that waiting inside a REPEATABLE
 * READ transaction still sees the job end), copied into cxt, with its
 * worker's pid.  A job the caller may not see is reported exactly like one
 * that does not exist.
 */
static char *
job_status(SPIPlanPtr plan, int64 job_id, MemoryContext cxt, pid_t *pid)
{
	Datum		args[1] = {Int64GetDatum(job_id)};
	char	   *status;
	bool		isnull;
	Datum		d;

	if (SPI_execute_snapshot(plan, args, NULL, GetLatestSnapshot(), InvalidSnapshot,
							 true, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "reading the job failed");
	if (SPI_processed != 1)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("job %lld does not exist or is not visible to role \"%s\"",
						(long long) job_id, GetUserNameFromId(GetUserId(), false)),
				 errhint("A role sees only the jobs of roles it is a member of.")));
	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	status = MemoryContextStrdup(cxt, TextDatumGetCString(d));
	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull);
	if (pid)
		*pid = isnull ? 0 : DatumGetInt32(d);
	SPI_freetuptable(SPI_tuptable);
	return status;
}

/*
 * Read with the caller's rights, and only a job of a role the caller is a
 * member of (superusers are of every role), as row security shows the
 * table: that condition is repeated here because a role with BYPASSRLS
 * skips row security, and would otherwise wait for and cancel any role's
 * jobs.
 */
static SPIPlanPtr
job_status_plan(void)
{
	Oid			argtypes[1] = {INT8OID};

	return sql_prepare("SELECT status, worker_pid FROM idem_etl.jobs"
					   " WHERE job_id OPERATOR(pg_catalog.=) $1"
					   " AND pg_catalog.pg_has_role(submitted_by_oid, 'MEMBER')", 1, argtypes);
}

static bool
status_ended(const char *status)
{
	return strcmp(status, "succeeded") == 0 || strcmp(status, "failed") == 0 ||
		strcmp(status, "cancelled") == 0;
}

/*
 * Sleep between looks at the job, on a condition variable that every job's
 * end (and every cancel, at commit) broadcasts: no busy waiting, and the
 * wait ends as soon as the job does.  Each look
 * allocates in a context reset before the next, so a long wait does not
 * grow; the status returned is copied to the caller's context before SPI's
 * memory goes away.
 */
Datum
etl_wait(PG_FUNCTION_ARGS)
{
	MemoryContext callercxt = CurrentMemoryContext;
	MemoryContext pollcxt;
	int64		job_id;
	Interval   *timeout = PG_ARGISNULL(1) ? NULL : PG_GETARG_INTERVAL_P(1);
	TimestampTz deadline;
	SPIPlanPtr	plan;
	char	   *status;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("job_id must not be NULL")));
	job_id = PG_GETARG_INT64(0);
	if (timeout == NULL)
		deadline = DT_NOEND;
	else
		deadline = DatumGetTimestampTz(DirectFunctionCall2(timestamptz_pl_interval,
														   TimestampTzGetDatum(GetCurrentTimestamp()),
														   IntervalPGetDatum(timeout)));
	SPI_connect();
	plan = job_status_plan();
	pollcxt = AllocSetContextCreate(CurrentMemoryContext, "idem_etl wait",
									ALLOCSET_SMALL_SIZES);
	for (;;)
	{
		long		remaining;

		MemoryContextReset(pollcxt);
		worker_job_ended_prepare();
		status = job_status(plan, job_id, pollcxt, NULL);
		if (status_ended(status))
			break;
		remaining = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), deadline);
		if (remaining <= 0)
			break;
		/* woken as soon as any job ends; the timeout is a safety net */
		worker_job_ended_wait(Min(remaining, 1000L));
		CHECK_FOR_INTERRUPTS();
	}
	worker_job_ended_cancel();
	status = MemoryContextStrdup(callercxt, status);
	SPI_finish();
	PG_RETURN_TEXT_P(cstring_to_text(status));
}

/*
 * Cancel a queued job, or a running one by cancelling its backend (whose
 * failure handling then sees the job cancelled and leaves it so).
 */
Datum
etl_cancel(PG_FUNCTION_ARGS)
{
	int64		job_id = PG_GETARG_INT64(0);
	Oid			argtypes[2] = {INT8OID, TEXTOID};
	Datum		args[2] = {Int64GetDatum(job_id),
	CStringGetTextDatum(GetUserNameFromId(GetUserId(), false))};
	char	   *status;
	pid_t		pid = 0;
	bool		cancelled;

	PreventCommandIfReadOnly("etl_cancel()");
	SPI_connect();
	status = job_status(job_status_plan(), job_id, CurrentMemoryContext, &pid);
	if (status_ended(status))
	{
		SPI_finish();
		PG_RETURN_BOOL(false);
	}
	ledger_exec_as_owner("UPDATE idem_etl.jobs SET status = 'cancelled', finished_at = pg_catalog.clock_timestamp(),"
						 " last_error = pg_catalog.concat('cancelled by ', pg_catalog.quote_ident($2))"
						 " WHERE job_id OPERATOR(pg_catalog.=) $1 AND " JOB_PENDING,
						 2, argtypes, args, NULL, SPI_OK_UPDATE);

	/*
	 * None when the job ended between the look above and the UPDATE (the
	 * UPDATE waits for a job committing its end, then finds it ended): then
	 * nothing was cancelled.
	 */
	cancelled = SPI_processed > 0;
	if (cancelled)
		worker_note_job_ended();
	if (cancelled && pid > 0 && strcmp(status, "running") == 0)
		(void) DirectFunctionCall1(pg_cancel_backend, Int32GetDatum(pid));
	SPI_finish();
	PG_RETURN_BOOL(cancelled);
}

/* --- queue access for the scheduler and the job workers --- */

/*
 * Lock the extension's state tables for the scheduler's work, without
 * waiting: every one it reads or writes (the ledger too, which the purge
 * deletes from).  DROP EXTENSION takes ACCESS EXCLUSIVE on them one after
 * another; a scheduler holding one and waiting for the next would deadlock
 * with it (it did, holding replaced_partitions and waiting for runs).
 * When they are not all free at once, the scheduler skips this round.
 */
bool
jobs_lock_state(void)
{
	Oid			nsp = get_namespace_oid("idem_etl", true);
	const char *tables[] = {"jobs", "replaced_partitions", "runs"};

	if (!OidIsValid(nsp))
		return false;
	for (size_t i = 0; i < lengthof(tables); i++)
	{
		Oid			relid = get_relname_relid(tables[i], nsp);

		if (!OidIsValid(relid) || !ConditionalLockRelationOid(relid, RowExclusiveLock))
			return false;
	}
	return true;
}

static void
exec_with_job(const char *sql, int64 job_id, int expected)
{
	Oid			argtypes[1] = {INT8OID};
	Datum		args[1] = {Int64GetDatum(job_id)};

	ledger_exec_as_owner(sql, 1, argtypes, args, NULL, expected);
}

/*
 * Running jobs whose worker is gone (crash, kill, server restart): retried
 * like a transient error, after the same backoff, or failed when out of
 * attempts.  live_jobs are
 * the jobs (int64 *) that the job slots in shared memory say a worker runs
 * or is about to run; after a crash the slots are empty, so every running
 * job is requeued.
 *
 * A job row that another transaction has locked is skipped (SKIP LOCKED):
 * any role can lock its own job's row (an etl_cancel in an open
 * transaction), and the dispatcher, which serves every database in turn,
 * must never wait for that.  *skipped counts them; the caller comes back
 * soon.
 */
int
jobs_requeue_dead(List *live_jobs, int *skipped)
{
	Oid			argtypes[2] = {INT8ARRAYOID, FLOAT8OID};
	Datum		args[2];
	Datum	   *ids = palloc(sizeof(Datum) * (list_length(live_jobs) + 1));
	ListCell   *lc;
	int			n = 0;
	int			requeued;
	bool		isnull;

	foreach(lc, live_jobs)
		ids[n++] = Int64GetDatum(*(int64 *) lfirst(lc));
	args[0] = PointerGetDatum(construct_array(ids, n, INT8OID, sizeof(int64),
											  FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
	args[1] = Float8GetDatum((double) idem_max_backoff);
	if (SPI_execute_with_args("UPDATE idem_etl.jobs j SET"
							  " status = CASE WHEN attempts OPERATOR(pg_catalog.<) max_attempts"
							  " THEN 'queued' ELSE 'failed' END,"
							  " finished_at = CASE WHEN attempts OPERATOR(pg_catalog.<) max_attempts"
							  " THEN NULL ELSE pg_catalog.now() END,"
							  " worker_pid = NULL,"
							  " last_error = '57P02: the backend running the job ended before it finished',"
							  " run_after = " RETRY_AFTER("$2")
							  " WHERE j.job_id OPERATOR(pg_catalog.=) ANY (ARRAY("
							  "SELECT job_id FROM idem_etl.jobs"
							  " WHERE status OPERATOR(pg_catalog.=) 'running'"
							  " AND NOT (job_id OPERATOR(pg_catalog.=) ANY ($1))"
							  " FOR UPDATE SKIP LOCKED))",
							  2, argtypes, args, NULL, false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "requeueing the jobs of dead workers failed");
	requeued = (int) SPI_processed;
	/* what is still running without a worker was skipped */
	if (SPI_execute_with_args("SELECT pg_catalog.count(*)::pg_catalog.int4 FROM idem_etl.jobs"
							  " WHERE status OPERATOR(pg_catalog.=) 'running'"
							  " AND NOT (job_id OPERATOR(pg_catalog.=) ANY ($1))",
							  1, argtypes, args, NULL, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "counting the jobs of dead workers failed");
	*skipped = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	return requeued;
}

/*
 * When this database is next due: the number of queued jobs and the
 * earliest run_after among them, and the next housekeeping (a kept
 * partition's keep_until, a finished job's end of retention).
 */
void
jobs_next_due(int *queued, TimestampTz *next_due, TimestampTz *next_housekeeping)
{
	bool		isnull;
	Datum		d;

	sql_exec(psprintf("SELECT (SELECT pg_catalog.count(*)::pg_catalog.int4 FROM idem_etl.jobs"
					  "  WHERE status OPERATOR(pg_catalog.=) 'queued'),"
					  " (SELECT pg_catalog.min(run_after) FROM idem_etl.jobs"
					  "  WHERE status OPERATOR(pg_catalog.=) 'queued'),"
					  " LEAST((SELECT pg_catalog.min(keep_until) FROM idem_etl.replaced_partitions),"
					  "  (SELECT pg_catalog.min(finished_at) FROM idem_etl.jobs WHERE " JOB_ENDED ")"
					  "  OPERATOR(pg_catalog.+) pg_catalog.make_interval(secs => %d),"
	/* the ledger's retention: looked at once a day */
					  "  CASE WHEN %d OPERATOR(pg_catalog.>) 0 AND EXISTS (SELECT FROM idem_etl.runs)"
					  "  THEN pg_catalog.now() OPERATOR(pg_catalog.+) '1 day'::pg_catalog.interval END)",
					  idem_job_retention, idem_run_retention));
	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	*queued = isnull ? 0 : DatumGetInt32(d);
	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull);
	*next_due = isnull ? DT_NOEND : DatumGetTimestampTz(d);
	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3, &isnull);
	*next_housekeeping = isnull ? DT_NOEND : DatumGetTimestampTz(d);
}

/* Take the oldest due job: running from now on, one more attempt. */
bool
jobs_claim_next(int64 *job_id, Oid *roleoid)
{
	bool		isnull;

	sql_exec("UPDATE idem_etl.jobs SET status = 'running',"
			 " attempts = attempts OPERATOR(pg_catalog.+) 1,"
			 " started_at = pg_catalog.now(), worker_pid = NULL"
			 " WHERE job_id OPERATOR(pg_catalog.=) (SELECT job_id FROM idem_etl.jobs"
			 " WHERE status OPERATOR(pg_catalog.=) 'queued'"
			 " AND run_after OPERATOR(pg_catalog.<=) pg_catalog.now() ORDER BY run_after, job_id LIMIT 1"
			 " FOR UPDATE SKIP LOCKED) RETURNING job_id, submitted_by_oid");
	if (SPI_processed == 0)
		return false;
	*job_id = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	*roleoid = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));
	return true;
}

/*
 * A claimed job whose worker could not be started goes back, unharmed.  Not
 * when another transaction has locked its row (its role cancelling it, in a
 * transaction still open): the dispatcher does not wait, and the job, still
 * running without a worker, is requeued as a dead worker's at a later visit.
 */
void
jobs_unclaim(int64 job_id)
{
	sql_exec(psprintf("UPDATE idem_etl.jobs SET status = 'queued',"
					  " attempts = attempts OPERATOR(pg_catalog.-) 1"
					  " WHERE job_id OPERATOR(pg_catalog.=) ANY (ARRAY("
					  "SELECT job_id FROM idem_etl.jobs"
					  " WHERE job_id OPERATOR(pg_catalog.=) " INT64_FORMAT
					  " AND status OPERATOR(pg_catalog.=) 'running' FOR UPDATE SKIP LOCKED))",
					  job_id));
}

void
jobs_fail(int64 job_id, const char *message)
{
	Oid			argtypes[2] = {INT8OID, TEXTOID};
	Datum		args[2] = {Int64GetDatum(job_id), CStringGetTextDatum(message)};

	if (SPI_execute_with_args("UPDATE idem_etl.jobs SET status = 'failed', last_error = $2,"
							  " finished_at = pg_catalog.now() WHERE job_id OPERATOR(pg_catalog.=) $1",
							  2, argtypes, args, NULL, false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "failing job " INT64_FORMAT " failed", job_id);
}

/*
 * Finished jobs older than idem_etl.job_retention; a row another
 * transaction has locked is left for a later visit.
 */
int
jobs_purge_finished(void)
{
	sql_exec(psprintf("DELETE FROM idem_etl.jobs WHERE job_id OPERATOR(pg_catalog.=) ANY (ARRAY("
					  "SELECT job_id FROM idem_etl.jobs WHERE " JOB_ENDED
					  " AND finished_at OPERATOR(pg_catalog.<) (pg_catalog.now()"
					  " OPERATOR(pg_catalog.-) pg_catalog.make_interval(secs => %d))"
					  " FOR UPDATE SKIP LOCKED))",
					  idem_job_retention));
	return (int) SPI_processed;
}

/*
 * A job worker takes its claimed job: its pid is recorded (committed before
 * the job runs, so that etl_cancel can cancel it) and its command returned;
 * NULL when the job was cancelled since it was claimed.
 */
char *
jobs_start(int64 job_id)
{
	Oid			argtypes[2] = {INT8OID, INT4OID};
	Datum		args[2] = {Int64GetDatum(job_id), Int32GetDatum(MyProcPid)};

	ledger_exec_as_owner("UPDATE idem_etl.jobs SET worker_pid = $2"
						 " WHERE job_id OPERATOR(pg_catalog.=) $1"
						 " AND status OPERATOR(pg_catalog.=) 'running' RETURNING command",
						 2, argtypes, args, NULL, SPI_OK_UPDATE_RETURNING);
	if (SPI_processed != 1)
		return NULL;
	current_job = job_id;
	return SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
}

/*
 * In the job's own transaction: it commits with what the job did.  A job
 * that is no longer running was cancelled while it ran (a command that
 * caught the cancel carries on to here): its work must not commit under a
 * 'cancelled' status, so the job's transaction ends in an error and rolls
 * back, and the status stays cancelled.
 */
void
jobs_succeeded(int64 job_id)
{
	exec_with_job("UPDATE idem_etl.jobs SET status = 'succeeded', finished_at = pg_catalog.clock_timestamp(),"
				  " worker_pid = NULL WHERE job_id OPERATOR(pg_catalog.=) $1"
				  " AND status OPERATOR(pg_catalog.=) 'running'",
				  job_id, SPI_OK_UPDATE);
	if (SPI_processed == 0)
		ereport(ERROR,
				(errcode(ERRCODE_QUERY_CANCELED),
				 errmsg("job " INT64_FORMAT " was cancelled while it ran", job_id),
				 errdetail("Its command caught the cancel and finished, but the job is no longer running: what it did is rolled back.")));
}

/*
 * Errors worth retrying, because rerunning an idempotent load after them can
 * succeed: serialization failures and deadlocks (class 40), lock timeouts,
 * statement timeouts, lack of resources (class 53), connection problems
 * (class 08) and shutdowns.
 */
static bool
is_transient(int sqlerrcode)
{
	const char *state = unpack_sql_state(sqlerrcode);

	return strncmp(state, "40", 2) == 0 || strncmp(state, "53", 2) == 0 ||
		strncmp(state, "08", 2) == 0 ||
		sqlerrcode == ERRCODE_LOCK_NOT_AVAILABLE ||
		sqlerrcode == ERRCODE_QUERY_CANCELED ||
		sqlerrcode == ERRCODE_ADMIN_SHUTDOWN ||
		sqlerrcode == ERRCODE_CRASH_SHUTDOWN ||
		sqlerrcode == ERRCODE_CANNOT_CONNECT_NOW;
}

/*
 * After a failed attempt (in a new transaction): queue the job again after
 * 1s, 2s, 4s, ... (at most idem_etl.max_backoff) when the error is transient
 * and attempts remain, else fail it.  A job cancelled meanwhile stays so.
 */
void
jobs_attempt_failed(int64 job_id, int sqlerrcode, const char *message)
{
	Oid			argtypes[4] = {INT8OID, TEXTOID, BOOLOID, FLOAT8OID};
	Datum		args[4];

	args[0] = Int64GetDatum(job_id);
	args[1] = CStringGetTextDatum(psprintf("%s: %s", unpack_sql_state(sqlerrcode), message));
	args[2] = BoolGetDatum(is_transient(sqlerrcode));
	args[3] = Float8GetDatum((double) idem_max_backoff);
	ledger_exec_as_owner("UPDATE idem_etl.jobs SET last_error = $2, worker_pid = NULL,"
						 " status = CASE WHEN $3 AND attempts OPERATOR(pg_catalog.<) max_attempts"
						 " THEN 'queued' ELSE 'failed' END,"
						 " finished_at = CASE WHEN $3 AND attempts OPERATOR(pg_catalog.<) max_attempts"
						 " THEN NULL ELSE pg_catalog.now() END,"
						 " run_after = " RETRY_AFTER("$4")
						 " WHERE job_id OPERATOR(pg_catalog.=) $1 AND status OPERATOR(pg_catalog.=) 'running'",
						 4, argtypes, args, NULL, SPI_OK_UPDATE);
}

/*
 * The NOTICE, INFO and WARNING messages of an attempt of the job
 * (worker_job.c collects them), in the attempt's outcome's transaction.  An
 * attempt that raised none writes nothing (most jobs: no extra write).
 * Objects older than 0.3 have no column for them.
 */
void
jobs_set_notices(int64 job_id, const char *notices)
{
	Oid			argtypes[2] = {INT8OID, TEXTOID};
	Datum		args[2];

	if (notices == NULL || !ledger_objects_at_least("0.3"))
		return;
	args[0] = Int64GetDatum(job_id);
	args[1] = CStringGetTextDatum(notices);
	ledger_exec_as_owner("UPDATE idem_etl.jobs SET notices = $2"
						 " WHERE job_id OPERATOR(pg_catalog.=) $1",
						 2, argtypes, args, NULL, SPI_OK_UPDATE);
}
