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
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/date.h"
#include "utils/datetime.h"
#include "utils/lsyscache.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#include "idem_etl.h"
#include "jobs.h"
#include "ledger.h"
#include "sql_build.h"
#include "worker.h"

PG_FUNCTION_INFO_V1(etl_submit);
PG_FUNCTION_INFO_V1(etl_wait);
PG_FUNCTION_INFO_V1(etl_cancel);
PG_FUNCTION_INFO_V1(etl_backfill);

#define JOB_ENDED "('succeeded', 'failed', 'cancelled')"

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
 * Queue one statement to run as the current role; with a name, return the
 * queued or running job of that name instead of queueing another.
 */
static int64
submit(const char *command, const char *job_name, int32 max_attempts,
	   TimestampTz run_after)
{
	Oid			argtypes[6] = {TEXTOID, TEXTOID, INT4OID, NAMEOID, OIDOID, TIMESTAMPTZOID};
	Datum		args[6];
	char		nulls[6] = {' ', ' ', ' ', ' ', ' ', ' '};

	if (list_length(sqlb_parse(command)) != 1)
		ereport(ERROR,
				(errcode(ERRCODE_SYNTAX_ERROR),
				 errmsg("a job must be exactly one SQL statement"),
				 errhint("Wrap several statements in a function or procedure and submit its call.")));
	if (max_attempts < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("max_attempts must be at least 1")));

	if (job_name)
	{
		Oid			nametype[1] = {TEXTOID};
		Datum		name[1] = {CStringGetTextDatum(job_name)};

		ledger_lock_key(InvalidOid, "job", job_name);
		ledger_exec_as_owner("SELECT job_id FROM idem_etl.jobs WHERE job_name = $1"
							 " AND status IN ('queued', 'running')",
							 1, nametype, name, NULL, SPI_OK_SELECT);
		if (SPI_processed > 0)
			return sqlb_result_int8(1);
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
	return sqlb_result_int8(1);
}

Datum
etl_submit(PG_FUNCTION_ARGS)
{
	int64		job_id;

	require_preload();
	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("command must not be NULL")));
	SPI_connect();
	job_id = submit(idem_text_arg(fcinfo, 0), idem_text_arg(fcinfo, 1),
					PG_ARGISNULL(2) ? 5 : PG_GETARG_INT32(2),
					PG_ARGISNULL(3) ? GetCurrentTransactionStartTimestamp() : PG_GETARG_TIMESTAMPTZ(3));
	SPI_finish();
	PG_RETURN_INT64(job_id);
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
	uint64		n;
	SPITupleTable *values;

	require_preload();
	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(2) || PG_ARGISNULL(3))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("command, from_value, to_value and step must not be NULL")));
	store = idem_srf_store(fcinfo, &desc);
	SPI_connect();
	command = idem_text_arg(fcinfo, 0);
	job_name = PG_ARGISNULL(4) ? psprintf("backfill %s",
										 text_to_cstring(DatumGetTextPP(DirectFunctionCall1(md5_text,
																							PG_GETARG_DATUM(0))))) :
		idem_text_arg(fcinfo, 4);
	{
		Oid			argtypes[3] = {DATEOID, DATEOID, INTERVALOID};
		Datum		args[3] = {PG_GETARG_DATUM(1), PG_GETARG_DATUM(2), PG_GETARG_DATUM(3)};

		if (SPI_execute_with_args("SELECT pg_catalog.to_char(d, 'YYYY-MM-DD')"
								  " FROM pg_catalog.generate_series($1::pg_catalog.timestamp,"
								  " $2::pg_catalog.timestamp, $3) d ORDER BY d",
								  3, argtypes, args, NULL, true, 0) != SPI_OK_SELECT)
			elog(ERROR, "listing backfill values failed");
	}
	n = SPI_processed;
	values = SPI_tuptable;
	for (uint64 i = 0; i < n; i++)
	{
		char	   *value = SPI_getvalue(values->vals[i], values->tupdesc, 1);
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
 * READ transaction still sees the job end); NULL when the caller cannot see
 * it.
 */
static char *
job_status(int64 job_id, pid_t *pid)
{
	Oid			argtypes[1] = {INT8OID};
	Datum		args[1] = {Int64GetDatum(job_id)};
	SPIPlanPtr	plan = sqlb_prepare("SELECT status, worker_pid FROM idem_etl.jobs WHERE job_id = $1",
									1, argtypes);
	char	   *status = NULL;

	if (SPI_execute_snapshot(plan, args, NULL, GetLatestSnapshot(), InvalidSnapshot,
							 true, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "reading the job failed");
	if (SPI_processed == 1)
	{
		bool		isnull;

		status = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
		if (pid)
			*pid = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));
	}
	SPI_freeplan(plan);
	return status;
}

static bool
status_ended(const char *status)
{
	return strcmp(status, "succeeded") == 0 || strcmp(status, "failed") == 0 ||
		strcmp(status, "cancelled") == 0;
}

/* Sleep on the latch between looks at the job: no busy waiting. */
Datum
etl_wait(PG_FUNCTION_ARGS)
{
	int64		job_id = PG_GETARG_INT64(0);
	Interval   *timeout = PG_ARGISNULL(1) ? NULL : PG_GETARG_INTERVAL_P(1);
	TimestampTz deadline;
	char	   *status;

	if (timeout == NULL)
		deadline = DT_NOEND;
	else
		deadline = DatumGetTimestampTz(DirectFunctionCall2(timestamptz_pl_interval,
														   TimestampTzGetDatum(GetCurrentTimestamp()),
														   IntervalPGetDatum(timeout)));
	SPI_connect();
	for (;;)
	{
		long		remaining;

		status = job_status(job_id, NULL);
		if (status == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_OBJECT),
					 errmsg("job %lld does not exist", (long long) job_id),
					 errhint("A role sees only its own jobs in idem_etl.jobs.")));
		if (status_ended(status))
			break;
		remaining = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), deadline);
		if (remaining <= 0)
			break;
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 Min(remaining, 100L), PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
	status = pstrdup(status);
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

	SPI_connect();
	status = job_status(job_id, &pid);
	if (status == NULL || status_ended(status))
	{
		SPI_finish();
		PG_RETURN_BOOL(false);
	}
	ledger_exec_as_owner("UPDATE idem_etl.jobs SET status = 'cancelled', finished_at = pg_catalog.now(),"
						 " last_error = 'cancelled by ' || pg_catalog.quote_ident($2)"
						 " WHERE job_id = $1 AND status IN ('queued', 'running')",
						 2, argtypes, args, NULL, SPI_OK_UPDATE);
	if (SPI_processed > 0 && pid > 0 && strcmp(status, "running") == 0)
		sqlb_exec(psprintf("SELECT pg_catalog.pg_cancel_backend(%d)", (int) pid));
	SPI_finish();
	PG_RETURN_BOOL(true);
}

/* --- queue access for the scheduler and the job workers --- */

/*
 * Lock the extension's state tables for the scheduler's work, without
 * waiting.  DROP EXTENSION takes ACCESS EXCLUSIVE on them one after another;
 * a scheduler holding one and waiting for the next would deadlock with it.
 * When they are not all free at once, the scheduler skips this round.
 */
bool
jobs_lock_state(void)
{
	Oid			nsp = get_namespace_oid("idem_etl", true);
	const char *tables[] = {"jobs", "replaced_partitions"};

	if (!OidIsValid(nsp))
		return false;
	for (int i = 0; i < lengthof(tables); i++)
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
 * like a transient error, or failed when out of attempts.  A worker counts
 * as alive when the scheduler knows it started (live_pids: it may not be in
 * pg_stat_activity yet) or when pg_stat_activity shows it.
 */
int
jobs_requeue_dead(List *live_pids)
{
	Oid			argtypes[1] = {INT4ARRAYOID};
	Datum		args[1];
	Datum	   *pids = palloc(sizeof(Datum) * (list_length(live_pids) + 1));
	ListCell   *lc;
	int			n = 0;

	foreach(lc, live_pids)
		pids[n++] = Int32GetDatum(lfirst_int(lc));
	args[0] = PointerGetDatum(construct_array(pids, n, INT4OID, sizeof(int32), true, TYPALIGN_INT));
	if (SPI_execute_with_args("UPDATE idem_etl.jobs j SET"
							  " status = CASE WHEN attempts < max_attempts THEN 'queued' ELSE 'failed' END,"
							  " finished_at = CASE WHEN attempts < max_attempts THEN NULL ELSE pg_catalog.now() END,"
							  " run_after = pg_catalog.now(), worker_pid = NULL,"
							  " last_error = '57P02: the backend running the job ended before it finished'"
							  " WHERE status = 'running' AND NOT (j.worker_pid = ANY ($1))"
							  " AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_stat_activity a"
							  " WHERE a.pid = j.worker_pid AND a.backend_type = 'idem_etl job')",
							  1, argtypes, args, NULL, false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "requeueing the jobs of dead workers failed");
	return (int) SPI_processed;
}

/* Take the oldest due job: running from now on, one more attempt. */
bool
jobs_claim_next(int64 *job_id, Oid *roleoid)
{
	bool		isnull;

	sqlb_exec("UPDATE idem_etl.jobs SET status = 'running', attempts = attempts + 1,"
			  " started_at = pg_catalog.now(), worker_pid = NULL"
			  " WHERE job_id = (SELECT job_id FROM idem_etl.jobs WHERE status = 'queued'"
			  " AND run_after <= pg_catalog.now() ORDER BY run_after, job_id LIMIT 1"
			  " FOR UPDATE SKIP LOCKED) RETURNING job_id, submitted_by_oid");
	if (SPI_processed == 0)
		return false;
	*job_id = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	*roleoid = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));
	return true;
}

void
jobs_set_pid(int64 job_id, pid_t pid)
{
	sqlb_exec(psprintf("UPDATE idem_etl.jobs SET worker_pid = %d WHERE job_id = " INT64_FORMAT
					   " AND status = 'running'", (int) pid, job_id));
}

/* A claimed job whose worker could not be started goes back, unharmed. */
void
jobs_unclaim(int64 job_id)
{
	sqlb_exec(psprintf("UPDATE idem_etl.jobs SET status = 'queued', attempts = attempts - 1"
					   " WHERE job_id = " INT64_FORMAT " AND status = 'running'", job_id));
}

void
jobs_fail(int64 job_id, const char *message)
{
	Oid			argtypes[2] = {INT8OID, TEXTOID};
	Datum		args[2] = {Int64GetDatum(job_id), CStringGetTextDatum(message)};

	if (SPI_execute_with_args("UPDATE idem_etl.jobs SET status = 'failed', last_error = $2,"
							  " finished_at = pg_catalog.now() WHERE job_id = $1",
							  2, argtypes, args, NULL, false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "failing job " INT64_FORMAT " failed", job_id);
}

/* Finished jobs older than idem_etl.job_retention. */
int
jobs_purge_finished(void)
{
	sqlb_exec(psprintf("DELETE FROM idem_etl.jobs WHERE status IN " JOB_ENDED
					   " AND finished_at < pg_catalog.now() - pg_catalog.make_interval(secs => %d)",
					   idem_job_retention));
	return (int) SPI_processed;
}

char *
jobs_command(int64 job_id)
{
	exec_with_job("SELECT command FROM idem_etl.jobs WHERE job_id = $1 AND status = 'running'",
				  job_id, SPI_OK_SELECT);
	if (SPI_processed != 1)
		return NULL;
	return SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
}

/* In the job's own transaction: it commits with what the job did. */
void
jobs_succeeded(int64 job_id)
{
	exec_with_job("UPDATE idem_etl.jobs SET status = 'succeeded', finished_at = pg_catalog.now(),"
				  " worker_pid = NULL WHERE job_id = $1 AND status = 'running'",
				  job_id, SPI_OK_UPDATE);
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
	Oid			argtypes[4] = {INT8OID, TEXTOID, BOOLOID, INT4OID};
	Datum		args[4];

	args[0] = Int64GetDatum(job_id);
	args[1] = CStringGetTextDatum(psprintf("%s: %s", unpack_sql_state(sqlerrcode), message));
	args[2] = BoolGetDatum(is_transient(sqlerrcode));
	args[3] = Int32GetDatum(idem_max_backoff);
	ledger_exec_as_owner("UPDATE idem_etl.jobs SET last_error = $2, worker_pid = NULL,"
						 " status = CASE WHEN $3 AND attempts < max_attempts THEN 'queued' ELSE 'failed' END,"
						 " finished_at = CASE WHEN $3 AND attempts < max_attempts THEN NULL ELSE pg_catalog.now() END,"
						 " run_after = pg_catalog.now() + LEAST("
						 "  pg_catalog.make_interval(secs => 2 ^ (attempts - 1)),"
						 "  pg_catalog.make_interval(secs => $4))"
						 " WHERE job_id = $1 AND status = 'running'",
						 4, argtypes, args, NULL, SPI_OK_UPDATE);
}
