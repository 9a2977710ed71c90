/*
 * worker_shmem.c
 *		Shared memory of the background workers: one slot per job worker
 *		that may run, so that idem_etl.max_workers holds across every
 *		database's scheduler; and which of idem_etl's processes is connected
 *		to which database, so that DROP DATABASE can ask them to leave.
 *
 * A slot belongs to the scheduler that reserved it until that scheduler has
 * seen its job worker stop (or itself exits); a crash of any backend
 * reinitializes shared memory, which frees them all.  Everything here is
 * under one LWLock: the loops over the arrays are longer than a spinlock
 * should be held.
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"

#include "worker.h"

#define TRANCHE_NAME "idem_etl"

/* A scheduler or job worker, connected (or connecting) to dboid. */
typedef struct WorkerProc
{
	pid_t		pid;			/* 0: free entry */
	Oid			dboid;
} WorkerProc;

typedef struct WorkerShared
{
	LWLock	   *lock;
	int			nslots;			/* max_worker_processes at start */
	bool	   *slots;
	WorkerProc *procs;
} WorkerShared;

static WorkerShared *shared = NULL;

Size
worker_shmem_size(void)
{
	Size		size = MAXALIGN(sizeof(WorkerShared));

	size = add_size(size, MAXALIGN(mul_size(sizeof(bool), max_worker_processes)));
	return add_size(size, mul_size(sizeof(WorkerProc), max_worker_processes));
}

/* From the shmem_request hook: the lock's tranche. */
void
worker_shmem_request(void)
{
	RequestNamedLWLockTranche(TRANCHE_NAME, 1);
}

void
worker_shmem_init(void)
{
	bool		found;

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	shared = ShmemInitStruct("idem_etl workers", worker_shmem_size(), &found);
	if (!found)
	{
		char	   *p = (char *) shared + MAXALIGN(sizeof(WorkerShared));

		shared->lock = &(GetNamedLWLockTranche(TRANCHE_NAME))->lock;
		shared->nslots = max_worker_processes;
		shared->slots = (bool *) p;
		p += MAXALIGN(sizeof(bool) * shared->nslots);
		shared->procs = (WorkerProc *) p;
		memset(shared->slots, 0, sizeof(bool) * shared->nslots);
		memset(shared->procs, 0, sizeof(WorkerProc) * shared->nslots);
	}
	LWLockRelease(AddinShmemInitLock);
}

/* A free slot if fewer than idem_etl.max_workers are taken, else -1. */
int
worker_slot_reserve(void)
{
	int			used = 0;
	int			free_slot = -1;

	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < shared->nslots; i++)
	{
		if (shared->slots[i])
			used++;
		else if (free_slot < 0)
			free_slot = i;
	}
	if (used >= idem_max_workers)
		free_slot = -1;
	if (free_slot >= 0)
		shared->slots[free_slot] = true;
	LWLockRelease(shared->lock);
	return free_slot;
}

void
worker_slot_release(int slot)
{
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	shared->slots[slot] = false;
	LWLockRelease(shared->lock);
}

static void
forget_proc(int code, Datum arg)
{
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < shared->nslots; i++)
		if (shared->procs[i].pid == MyProcPid)
			shared->procs[i].pid = 0;
	LWLockRelease(shared->lock);
}

/*
 * Record that this process (a scheduler or job worker) is about to connect
 * to dboid, until it exits.  Called before connecting, so that a DROP
 * DATABASE that starts meanwhile finds it.  Every background worker has a
 * place: there are max_worker_processes of them.
 */
void
worker_register_proc(Oid dboid)
{
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < shared->nslots; i++)
		if (shared->procs[i].pid == 0)
		{
			shared->procs[i].pid = MyProcPid;
			shared->procs[i].dboid = dboid;
			break;
		}
	LWLockRelease(shared->lock);
	before_shmem_exit(forget_proc, (Datum) 0);
}

/* Ask idem_etl's processes connected to dboid to exit. */
void
worker_signal_database(Oid dboid)
{
	LWLockAcquire(shared->lock, LW_SHARED);
	for (int i = 0; i < shared->nslots; i++)
		if (shared->procs[i].pid != 0 && shared->procs[i].dboid == dboid)
			(void) kill(shared->procs[i].pid, SIGTERM);
	LWLockRelease(shared->lock);
}
