/*
 * worker_shmem.c
 *		Shared memory of the background workers: one slot per job worker
 *		that may run, so that idem_etl.max_workers holds across every
 *		database's scheduler.
 *
 * A slot belongs to the scheduler that reserved it until that scheduler has
 * seen its job worker stop (or itself exits); a crash of any backend
 * reinitializes shared memory, which frees them all.
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "storage/spin.h"

#include "worker.h"

typedef struct WorkerShared
{
	slock_t		mutex;
	int			nslots;
	bool		slots[FLEXIBLE_ARRAY_MEMBER];
} WorkerShared;

static WorkerShared *shared = NULL;

Size
worker_shmem_size(void)
{
	return add_size(offsetof(WorkerShared, slots),
					mul_size(sizeof(bool), max_worker_processes));
}

void
worker_shmem_init(void)
{
	bool		found;

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	shared = ShmemInitStruct("idem_etl workers", worker_shmem_size(), &found);
	if (!found)
	{
		SpinLockInit(&shared->mutex);
		shared->nslots = max_worker_processes;
		memset(shared->slots, 0, sizeof(bool) * shared->nslots);
	}
	LWLockRelease(AddinShmemInitLock);
}

/* A free slot if fewer than idem_etl.max_workers are taken, else -1. */
int
worker_slot_reserve(void)
{
	int			used = 0;
	int			free_slot = -1;

	SpinLockAcquire(&shared->mutex);
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
	SpinLockRelease(&shared->mutex);
	return free_slot;
}

void
worker_slot_release(int slot)
{
	SpinLockAcquire(&shared->mutex);
	shared->slots[slot] = false;
	SpinLockRelease(&shared->mutex);
}
