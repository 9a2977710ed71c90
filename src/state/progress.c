/*
 * progress.c
 *		Live progress of idem_etl's calls: one entry per backend in shared
 *		memory, written only by its backend, read by idem_etl.progress (like
 *		pg_stat_progress_copy).
 *
 * A backend changes its entry between two increments of changecount (odd
 * while it writes); a reader copies the entry and retries when the count
 * was odd or changed meanwhile, as pgstat does for backend status: no lock
 * is taken, so reporting costs a few stores per phase.  Without the preload
 * there is no shared memory: the entry is the backend's own, and the view
 * shows the caller's own session only.
 */
#include "postgres.h"

#include "compat.h"

#include "access/xact.h"
#include "catalog/pg_authid.h"
#include "commands/dbcommands.h"
#include "fmgr.h"
#include "funcapi.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "util/args.h"
#include "util/settings.h"
#include "state/ledger.h"
#include "state/progress.h"

typedef struct ProgressEntry
{
	pg_atomic_uint32 changecount;
	pid_t		pid;			/* 0: no call running */
	Oid			dboid;
	Oid			roleoid;
	char		operation[24];
	char		target[2 * NAMEDATALEN + 8];
	char		run_key[64];
	char		phase[24];
	int64		rows_done;
	int64		rows_total;		/* -1: not known */
	TimestampTz phase_start;
	TimestampTz call_start;
} ProgressEntry;

static ProgressEntry *entries = NULL;	/* MaxBackends of them */
static ProgressEntry local_entry;
static bool callback_registered = false;

/*
 * The calls in progress in this backend, outermost first: a call may run
 * another (from its source, or from a trigger on its target).  The entry
 * shows the outermost; the others leave it alone.  Each is known by the
 * subtransaction it started in, which ends it if aborted.
 */
#define MAX_NESTED_CALLS 16
static SubTransactionId call_subids[MAX_NESTED_CALLS];
static int	ncalls = 0;

/*
 * Copy src into dst of size bytes, cut if need be at a character boundary
 * (strlcpy could cut a multibyte character, and the view would show
 * invalid text).
 */
static void
clip_copy(char *dst, const char *src, size_t size)
{
	int			len = pg_mbcliplen(src, strlen(src), size - 1);

	memcpy(dst, src, len);
	dst[len] = '\0';
}

Size
progress_shmem_size(void)
{
	return mul_size(sizeof(ProgressEntry), MaxBackends);
}

void
progress_shmem_init(void)
{
	bool		found;

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	entries = ShmemInitStruct("idem_etl progress", progress_shmem_size(), &found);
	if (!found)
	{
		memset(entries, 0, progress_shmem_size());
		for (int i = 0; i < MaxBackends; i++)
			pg_atomic_init_u32(&entries[i].changecount, 0);
	}
	LWLockRelease(AddinShmemInitLock);
}

static ProgressEntry *
my_entry(void)
{
	int			slot = compat_my_proc_index();

	if (entries && slot >= 0 && slot < MaxBackends)
		return &entries[slot];
	return &local_entry;
}

static void
begin_write(ProgressEntry *e)
{
	pg_atomic_fetch_add_u32(&e->changecount, 1);
	pg_write_barrier();
}

static void
end_write(ProgressEntry *e)
{
	pg_write_barrier();
	pg_atomic_fetch_add_u32(&e->changecount, 1);
}

static void
clear_entry(void)
{
	ProgressEntry *e = my_entry();

	if (e->pid == 0)
		return;
	begin_write(e);
	e->pid = 0;
	end_write(e);
}

/* A call that fails is over too (caught by a savepoint or not). */
static void
clear_at_end(XactEvent event, void *arg)
{
	if (event == XACT_EVENT_ABORT || event == XACT_EVENT_COMMIT ||
		event == XACT_EVENT_PARALLEL_ABORT || event == XACT_EVENT_PARALLEL_COMMIT)
	{
		ncalls = 0;
		clear_entry();
	}
}

/*
 * The calls started in the aborted subtransaction or below it are over;
 * not those around the subtransactions a call makes itself (lock retries).
 */
static void
clear_at_subabort(SubXactEvent event, SubTransactionId mySubid,
				  SubTransactionId parentSubid, void *arg)
{
	if (event != SUBXACT_EVENT_ABORT_SUB)
		return;
	while (ncalls > 0 &&
		   (ncalls > MAX_NESTED_CALLS || call_subids[ncalls - 1] >= mySubid))
		ncalls--;
	if (ncalls == 0)
		clear_entry();
}

void
progress_start(const char *operation, const char *target, const char *run_key)
{
	ProgressEntry *e = my_entry();
	TimestampTz now;

	/*
	 * Every call is counted, tracked or not: an untracked call made by a
	 * tracked one must not end the outer call's entry when it ends.
	 */
	if (!callback_registered)
	{
		RegisterXactCallback(clear_at_end, NULL);
		RegisterSubXactCallback(clear_at_subabort, NULL);
	}
	callback_registered = true;
	if (ncalls < MAX_NESTED_CALLS)
		call_subids[ncalls] = GetCurrentSubTransactionId();
	if (ncalls++ > 0)
		return;					/* the outermost call is shown */
	/* idem_etl.track_progress off: nothing is reported (as track_activities) */
	if (!idem_track_progress)
		return;
	now = GetCurrentTimestamp();
	begin_write(e);
	e->dboid = MyDatabaseId;
	e->roleoid = GetUserId();
	strlcpy(e->operation, operation, sizeof(e->operation));
	clip_copy(e->target, target, sizeof(e->target));
	clip_copy(e->run_key, run_key ? run_key : "", sizeof(e->run_key));
	strlcpy(e->phase, "starting", sizeof(e->phase));
	e->rows_done = 0;
	e->rows_total = -1;
	e->phase_start = now;
	e->call_start = now;
	e->pid = MyProcPid;
	end_write(e);
}

/* the rows idem_etl.progress_tick() counted in this phase */
static int64 ticks = 0;

void
progress_phase(const char *phase, int64 rows_total)
{
	ProgressEntry *e = my_entry();

	ticks = 0;
	if (e->pid == 0 || ncalls > 1)
		return;
	begin_write(e);
	strlcpy(e->phase, phase, sizeof(e->phase));
	e->rows_done = 0;
	e->rows_total = rows_total;
	e->phase_start = GetCurrentTimestamp();
	end_write(e);
}

void
progress_rows(int64 rows_done)
{
	ProgressEntry *e = my_entry();

	if (e->pid == 0 || ncalls > 1)
		return;
	begin_write(e);
	e->rows_done = rows_done;
	end_write(e);
}

void
progress_end(void)
{
	if (ncalls > 0 && --ncalls > 0)
		return;
	clear_entry();
}

/* A consistent copy of entry e; false when it shows no call. */
static bool
read_entry(ProgressEntry *e, ProgressEntry *copy)
{
	for (;;)
	{
		uint32		before = pg_atomic_read_u32(&e->changecount);

		pg_read_barrier();
		memcpy((char *) copy + sizeof(pg_atomic_uint32),
			   (char *) e + sizeof(pg_atomic_uint32),
			   sizeof(ProgressEntry) - sizeof(pg_atomic_uint32));
		pg_read_barrier();
		if (before % 2 == 0 && before == pg_atomic_read_u32(&e->changecount))
			break;
		CHECK_FOR_INTERRUPTS();
	}
	return copy->pid != 0;
}

PG_FUNCTION_INFO_V1(idem_etl_progress_tick);

/*
 * idem_etl.progress_tick(): true, counting one row read by a phase that is
 * one statement (the merge of etl_upsert_batch reads its batch through it),
 * shown every 1,024 rows.
 */
Datum
idem_etl_progress_tick(PG_FUNCTION_ARGS)
{
	if ((++ticks & 1023) == 0)
		progress_rows(ticks);
	PG_RETURN_BOOL(true);
}

/*
 * The call a statement puts in its scan of the rows it works through, to
 * count them: NULL when this call is not shown, or when the extension's
 * objects are older than 0.3 (which have no idem_etl.progress_tick()).
 */
const char *
progress_tick_call(void)
{
	ProgressEntry *e = my_entry();

	if (e->pid == 0 || ncalls > 1 || !ledger_objects_at_least("0.3"))
		return NULL;
	return IDEM_ETL_STATE_SCHEMA ".progress_tick()";
}

PG_FUNCTION_INFO_V1(idem_etl_progress);

/*
 * One row per running idem_etl call.  Another role's call shows its pid,
 * database, role and operation; what it loads, and how far it is, only to
 * members of that role and of pg_read_all_stats (as pg_stat_progress_*).
 */
Datum
idem_etl_progress(PG_FUNCTION_ARGS)
{
	TupleDesc	desc;
	Tuplestorestate *store = args_srf_store(fcinfo, &desc);
	int			n = entries ? MaxBackends : 1;

	for (int i = 0; i < n; i++)
	{
		ProgressEntry e;
		Datum		values[11];
		bool		nulls[11];
		char	   *dbname;
		bool		visible;

		if (!read_entry(entries ? &entries[i] : &local_entry, &e))
			continue;
		memset(nulls, 0, sizeof(nulls));
		visible = has_privs_of_role(GetUserId(), e.roleoid) ||
			has_privs_of_role(GetUserId(), ROLE_PG_READ_ALL_STATS);
		values[0] = Int32GetDatum(e.pid);
		dbname = get_database_name(e.dboid);
		if (dbname)
			values[1] = DirectFunctionCall1(namein, CStringGetDatum(dbname));
		else
			nulls[1] = true;
		values[2] = DirectFunctionCall1(namein,
										CStringGetDatum(GetUserNameFromId(e.roleoid, true) ?
														GetUserNameFromId(e.roleoid, true) : "?"));
		values[3] = CStringGetTextDatum(e.operation);
		values[4] = CStringGetTextDatum(e.target);
		values[5] = CStringGetTextDatum(e.run_key);
		nulls[5] = e.run_key[0] == '\0';
		values[6] = CStringGetTextDatum(e.phase);
		values[7] = Int64GetDatum(e.rows_done);
		values[8] = Int64GetDatum(e.rows_total);
		nulls[8] = e.rows_total < 0;
		values[9] = TimestampTzGetDatum(e.phase_start);
		values[10] = TimestampTzGetDatum(e.call_start);
		if (!visible)
			for (int j = 4; j < 11; j++)
				nulls[j] = true;
		tuplestore_putvalues(store, desc, values, nulls);
	}
	return (Datum) 0;
}
