/*
 * worker_job.c
 *		A job worker: connects to the job's database as the role that
 *		submitted it, runs the job's statement in a transaction of its own,
 *		and records the outcome.  One attempt per worker; retries are new
 *		workers, started after the backoff.
 */
#include "postgres.h"

#include "access/xact.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "storage/ipc.h"
#include "storage/proc.h"
#include "tcop/tcopprot.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timeout.h"

#include "worker/jobs.h"
#include "worker/worker.h"

/*
 * The job's notices: the NOTICE, INFO and WARNING messages raised while its
 * command runs, kept in its row (idem_etl.jobs.notices).  A job worker has
 * no client, and the server log takes only what log_min_messages lets
 * through (WARNING and above by default): a skip's NOTICE, or one the
 * command raises, would be lost.  So, while the command runs,
 * log_min_messages is lowered to NOTICE and a hook keeps the messages, and
 * lets into the server log only what it took before.  The last JOB_NOTICES
 * are kept, each cut at JOB_NOTICE_LEN bytes, in a buffer of fixed size: the
 * hook runs while a message is reported, and allocates nothing.
 */
#define JOB_NOTICES 20
#define JOB_NOTICE_LEN 1024

static char job_notices[JOB_NOTICES][JOB_NOTICE_LEN];
static int	njob_notices = 0;	/* raised so far; the last JOB_NOTICES kept */
static int	server_log_level = WARNING; /* log_min_messages as it was */
static char *server_log_setting = NULL;
static emit_log_hook_type prev_emit_log_hook = NULL;

/* A log_min_messages value as a level; WARNING when not understood. */
static int
log_level_of(const char *setting)
{
	static const struct
	{
		const char *name;
		int			level;
	}			levels[] = {
		{"debug5", DEBUG5}, {"debug4", DEBUG4}, {"debug3", DEBUG3},
		{"debug2", DEBUG2}, {"debug1", DEBUG1}, {"debug", DEBUG2},
		{"info", INFO}, {"notice", NOTICE}, {"warning", WARNING},
		{"error", ERROR}, {"log", LOG}, {"fatal", FATAL}, {"panic", PANIC}
	};

	for (size_t i = 0; setting != NULL && i < lengthof(levels); i++)
		if (pg_strcasecmp(setting, levels[i].name) == 0)
			return levels[i].level;
	return WARNING;
}

/* Would the server log have taken elevel?  elog.c's is_log_level_output. */
static bool
server_would_log(int elevel)
{
	if (elevel == LOG || elevel == LOG_SERVER_ONLY)
		return server_log_level == LOG || server_log_level <= ERROR;
	if (server_log_level == LOG)
		return elevel >= FATAL;
	return elevel >= server_log_level;
}

static void
keep_notice(ErrorData *edata)
{
	if ((edata->elevel == INFO || edata->elevel == NOTICE || edata->elevel == WARNING) &&
		edata->message != NULL)
	{
		snprintf(job_notices[njob_notices % JOB_NOTICES], JOB_NOTICE_LEN, "%s:  %s",
				 edata->elevel == INFO ? "INFO" : edata->elevel == NOTICE ? "NOTICE" : "WARNING",
				 edata->message);
		njob_notices++;
	}
	edata->output_to_server = server_would_log(edata->elevel);
	if (prev_emit_log_hook)
		prev_emit_log_hook(edata);
}

static void
notices_start(void)
{
	server_log_setting = MemoryContextStrdup(TopMemoryContext,
											 GetConfigOption("log_min_messages", false, false));
	server_log_level = log_level_of(server_log_setting);
	if (server_log_level > NOTICE || server_log_level == LOG)
		SetConfigOption("log_min_messages", "notice", PGC_SUSET, PGC_S_OVERRIDE);
	prev_emit_log_hook = emit_log_hook;
	emit_log_hook = keep_notice;
}

static void
notices_stop(void)
{
	if (emit_log_hook != keep_notice)
		return;
	emit_log_hook = prev_emit_log_hook;
	SetConfigOption("log_min_messages", server_log_setting, PGC_SUSET, PGC_S_OVERRIDE);
}

/* The notices kept, one a line, or NULL for none. */
static char *
notices_text(void)
{
	StringInfoData buf;
	int			first = Max(0, njob_notices - JOB_NOTICES);

	if (njob_notices == 0)
		return NULL;
	initStringInfo(&buf);
	if (first > 0)
		appendStringInfo(&buf, "(%d earlier messages not kept)", first);
	for (int i = first; i < njob_notices; i++)
		appendStringInfo(&buf, "%s%s", buf.len > 0 ? "\n" : "",
						 job_notices[i % JOB_NOTICES]);
	return buf.data;
}

void
worker_job_main(Datum arg)
{
	JobStart	job;
	char	   *command;
	MemoryContext workcxt;
	ErrorData  *volatile failure = NULL;

	memcpy(&job, MyBgworkerEntry->bgw_extra, sizeof(JobStart));
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	worker_register_proc(job.dboid, job.roleoid);
	worker_job_running(job.slot, job.job_id);

	/*
	 * Without BGWORKER_BYPASS_ROLELOGINCHECK (17 and later): a role without
	 * LOGIN runs no job on any major, since NOLOGIN is how a DBA disables a
	 * role (the dispatcher fails such jobs before they start).
	 */
	BackgroundWorkerInitializeConnectionByOid(job.dboid, job.roleoid, 0);
	workcxt = AllocSetContextCreate(TopMemoryContext, "idem_etl job", ALLOCSET_DEFAULT_SIZES);

	/* record our pid, committed, so that etl_cancel can reach us */
	worker_begin_tx(NULL);
	command = jobs_start(job.job_id);
	if (command)
		command = MemoryContextStrdup(workcxt, command);
	worker_end_tx();
	if (command == NULL)
	{
		/* cancelled since it was claimed */
		worker_job_finished(job.slot, false);
		proc_exit(0);
	}
	pgstat_report_activity(STATE_RUNNING, command);
	debug_query_string = command;

	/*
	 * The job's statement and the 'succeeded' mark commit together, so a
	 * crash leaves the job running, and it is then retried.
	 */
	worker_begin_tx(NULL);
	PG_TRY();
	{
		int			rc;

		/* a backend arms statement_timeout per statement; so must we */
		if (StatementTimeout > 0)
			enable_timeout_after(STATEMENT_TIMEOUT, StatementTimeout);
		notices_start();
		rc = SPI_execute(command, false, 0);
		if (rc < 0)
			elog(ERROR, "SPI_execute failed: %s", SPI_result_code_string(rc));
		disable_timeout(STATEMENT_TIMEOUT, false);
		notices_stop();
		jobs_set_notices(job.job_id, notices_text());
		jobs_succeeded(job.job_id);
		worker_end_tx();
	}
	PG_CATCH();
	{
		disable_timeout(STATEMENT_TIMEOUT, false);
		notices_stop();
		MemoryContextSwitchTo(workcxt);
		failure = CopyErrorData();
		EmitErrorReport();
		FlushErrorState();
		AbortCurrentTransaction();
	}
	PG_END_TRY();

	if (failure)
	{
		worker_begin_tx(NULL);
		jobs_attempt_failed(job.job_id, failure->sqlerrcode, failure->message);
		jobs_set_notices(job.job_id, notices_text());
		worker_end_tx();
	}
	/* a failed attempt may be queued again: the database is looked at */
	worker_job_finished(job.slot, failure != NULL);
	debug_query_string = NULL;
	proc_exit(0);
}
