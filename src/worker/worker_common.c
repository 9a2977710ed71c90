/*
 * worker_common.c
 *		What the launcher, the schedulers and the job workers share: how they
 *		are described to the postmaster, and their transactions.
 */
#include "postgres.h"

#include "compat.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_database.h"
#include "commands/dbcommands.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/postmaster.h"
#include "utils/acl.h"
#include "utils/backend_status.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"

#include "worker/worker.h"
#include "util/settings.h"

/*
 * Describe one of idem_etl's workers: type is what pg_stat_activity shows
 * as backend_type.  Only the launcher restarts by itself; the others are
 * started again by their parent, which is notified when they stop.
 */
void
worker_describe(BackgroundWorker *bgw, const char *function, const char *type)
{
	memset(bgw, 0, sizeof(BackgroundWorker));
	bgw->bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	bgw->bgw_start_time = BgWorkerStart_RecoveryFinished;
	bgw->bgw_restart_time = BGW_NEVER_RESTART;
	snprintf(bgw->bgw_library_name, BGW_MAXLEN, "idem_etl");
	snprintf(bgw->bgw_function_name, BGW_MAXLEN, "%s", function);
	snprintf(bgw->bgw_name, BGW_MAXLEN, "%s", type);
	snprintf(bgw->bgw_type, BGW_MAXLEN, "%s", type);
	if (MyProcPid != PostmasterPid)
		bgw->bgw_notify_pid = MyProcPid;
}

/*
 * A unit of a worker's work: transaction, SPI and snapshot, shown in
 * pg_stat_activity as activity (when not NULL).
 */
static MemoryContext outside_tx = NULL;

void
worker_begin_tx(const char *activity)
{
	outside_tx = CurrentMemoryContext;
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());
	if (activity)
		pgstat_report_activity(STATE_RUNNING, activity);
}

void
worker_end_tx(void)
{
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
	/* back to the loop's context, not TopMemoryContext where commit leaves us */
	MemoryContextSwitchTo(outside_tx);
	pgstat_report_stat(false);
	pgstat_report_activity(STATE_IDLE, NULL);
}

/*
 * Whether PostgreSQL lets the current user signal a backend of roleoid: the
 * rules of pg_terminate_backend, which DROP DATABASE ... WITH (FORCE)
 * applies too (TerminateOtherDBBackends).  A superuser's backend only by a
 * superuser; another's by a role that has its privileges or those of
 * pg_signal_backend.
 */
static bool
may_signal_role(Oid roleoid)
{
	if (superuser_arg(roleoid))
		return superuser();
	return has_privs_of_role(GetUserId(), roleoid) ||
		has_privs_of_role(GetUserId(), ROLE_PG_SIGNAL_BACKEND);
}

/*
 * Whether a backend that is not one of idem_etl's processes (procs) is
 * connected to dboid.  DROP DATABASE without FORCE then fails with 55006
 * whatever idem_etl does.  Autovacuum workers do not count: DROP DATABASE
 * stops them itself.
 */
static bool
others_connected(Oid dboid, List *procs)
{
	int			n = pgstat_fetch_stat_numbackends();

	for (int i = 1; i <= n; i++)
	{
		LocalPgBackendStatus *local = pgstat_get_local_beentry_by_index(i);
		PgBackendStatus *be = local ? &local->backendStatus : NULL;
		bool		ours = false;
		ListCell   *lc;

		if (be == NULL || be->st_databaseid != dboid || be->st_procpid == MyProcPid ||
			be->st_backendType == B_AUTOVAC_WORKER)
			continue;
		foreach(lc, procs)
			ours |= ((WorkerProc *) lfirst(lc))->pid == be->st_procpid;
		if (!ours)
			return true;
	}
	return false;
}

/*
 * DROP DATABASE refuses while other sessions are connected, and a
 * dispatcher or job worker of idem_etl is connected to its database: ask
 * them to exit first (DROP DATABASE waits a few seconds for them).  The
 * launcher starts no new scheduler there for a while (PROBE_EVERY
 * naptimes).  The hook runs before DROP DATABASE's own checks, so it makes
 * those that it can itself, and disturbs nobody when the drop is bound to
 * fail: inside a transaction block or a function (25001), for the current
 * database (55006), for a caller who does not own it (42501), and, without
 * FORCE, while another session is connected (55006).  A job runs as its
 * role, like that role's own session: its worker is stopped only when the
 * caller could terminate that role's backends (pg_terminate_backend's rules,
 * which DROP DATABASE WITH (FORCE) applies too).  When it could not, the
 * drop fails as for a session of that role, and no worker is stopped.  A
 * dispatcher, which only does idem_etl's bookkeeping and does it again at
 * its next visit, is always asked to leave.  The workers are found in
 * idem_etl's shared memory, which, unlike pg_stat_activity, shows them to
 * every role.
 */
void
worker_stop_for_dropdb(DropdbStmt *stmt, bool isTopLevel)
{
	Oid			dboid;
	bool		force = false;
	List	   *procs;
	ListCell   *lc;

	if (!idem_preloaded)
		return;
	if (!isTopLevel || IsTransactionBlock() || IsSubTransaction())
		return;
	dboid = get_database_oid(stmt->dbname, true);
	if (!OidIsValid(dboid) || dboid == MyDatabaseId)
		return;
	if (!object_ownercheck(DatabaseRelationId, dboid, GetUserId()))
		return;
	foreach(lc, stmt->options)
		if (strcmp(lfirst_node(DefElem, lc)->defname, "force") == 0)
		force = true;

	procs = worker_database_procs(dboid);
	if (procs == NIL)
		return;
	if (!force && others_connected(dboid, procs))
		return;
	foreach(lc, procs)
	{
		WorkerProc *proc = lfirst(lc);

		if (OidIsValid(proc->roleoid) && !may_signal_role(proc->roleoid))
			return;
	}
	worker_signal_database(dboid, procs);
}

/*
 * Settings that a role or database may set (ALTER ROLE/DATABASE ... SET)
 * and that the dispatcher's session must not obey: it runs idem_etl's
 * bookkeeping, with the rights of a superuser or of the state's owner.  Set
 * at the highest priority, so that a configuration reload keeps them.
 */
void
worker_pin_session(void)
{
	static const char *const pinned[][2] = {
		{"search_path", "pg_catalog, pg_temp"},
		{"default_transaction_read_only", "off"},
		{"default_transaction_isolation", "read committed"},
		{"statement_timeout", "0"},
		{"lock_timeout", DISPATCHER_LOCK_TIMEOUT},
		{"idle_in_transaction_session_timeout", "0"},
		{"row_security", "on"},
		{"DateStyle", "ISO"},
		{"IntervalStyle", "postgres"},
	};

	/*
	 * Who the session is, first: the owner of a database may set role and
	 * session_authorization for every session there, and the dispatcher, a
	 * superuser, would become that role, fail on the queue's tables and never
	 * run that database's jobs.  Looking the name up needs a transaction.
	 */
	StartTransactionCommand();
	SetConfigOption("session_authorization",
					GetUserNameFromId(GetAuthenticatedUserId(), false),
					PGC_SUSET, PGC_S_OVERRIDE);
	SetConfigOption("role", "none", PGC_SUSET, PGC_S_OVERRIDE);
	CommitTransactionCommand();

	for (size_t i = 0; i < lengthof(pinned); i++)
		SetConfigOption(pinned[i][0], pinned[i][1], PGC_SUSET, PGC_S_OVERRIDE);
}
