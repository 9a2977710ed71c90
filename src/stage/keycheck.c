/*
 * keycheck.c
 *		Whether a batch's keys are distinct, told by their 64-bit hashes.
 *
 * Staging hashes every row's key (stage.c) and hands the hash here.  Most
 * batches have no duplicate key, and equal keys have equal hashes, so
 * distinct hashes prove the keys distinct without looking at a row; equal
 * hashes (a duplicate, or a collision) send dedup.c to the rows.
 *
 * The hashes are kept in an array while it fits in work_mem and sorted.
 * Beyond, they go to temporary files by their top bits, one file per value
 * of those bits: equal hashes land in the same file, so each file is
 * checked alone, read back into work_mem and sorted; a file that does not
 * fit is split again by the next bits.  Each hash is written and read once
 * (more only for a batch tens of times work_mem's worth of hashes), where
 * a sort that spills writes and merges runs: for 1M keys, that sort was
 * about a seventh of an identical rerun (issue 11, perf).
 */
#include "postgres.h"

#include "miscadmin.h"
#include "commands/tablespace.h"
#include "storage/buffile.h"
#include "utils/memutils.h"

#include "stage/keycheck.h"

/* A level of files: a hash goes to file (hash >> shift) & (nfiles - 1). */
typedef struct HashFiles
{
	MemoryContext cxt;			/* where the files are opened */
	int			shift;
	int			nfiles;
	BufFile   **files;			/* opened on first use */
	int64	   *counts;
} HashFiles;

struct KeyCheck
{
	MemoryContext cxt;			/* all of it */
	int64		n;				/* hashes added */
	uint64	   *hashes;			/* while they fit in work_mem, */
	int64		nheld;
	int64		capacity;
	int64		max_in_memory;
	HashFiles  *files;			/* then in files, */
	int			bits;			/* chosen by that many bits at a time */
};

/*
 * Sorted with the comparison inlined (sort_template.h, as PostgreSQL sorts
 * its own arrays of integers): a call of qsort's comparison function per
 * step took most of the check's time.
 */
#define ST_SORT sort_hashes
#define ST_ELEMENT_TYPE uint64
#define ST_COMPARE(a, b) ((*(a) > *(b)) - (*(a) < *(b)))
#define ST_SCOPE static
#define ST_DEFINE
#include "lib/sort_template.h"

/* Sorts hashes; true when no two are equal. */
static bool
hashes_distinct(uint64 *hashes, int64 n)
{
	sort_hashes(hashes, n);
	for (int64 i = 1; i < n; i++)
		if (hashes[i] == hashes[i - 1])
			return false;
	return true;
}

/*
 * How many top bits choose a hash's file: as many files as work_mem has
 * room for the buffers of (a block each), twice over; from 2 files to 64.
 */
static int
file_bits(void)
{
	int64		room = (int64) work_mem * 1024L / (2 * BLCKSZ);
	int			bits = 1;

	while (bits < 6 && ((int64) 1 << (bits + 1)) <= room)
		bits++;
	return bits;
}

static HashFiles *
files_begin(MemoryContext cxt, int shift, int bits)
{
	HashFiles  *f = MemoryContextAllocZero(cxt, sizeof(HashFiles));

	f->cxt = cxt;
	f->shift = shift;
	f->nfiles = 1 << bits;
	f->files = MemoryContextAllocZero(cxt, sizeof(BufFile *) * f->nfiles);
	f->counts = MemoryContextAllocZero(cxt, sizeof(int64) * f->nfiles);
	return f;
}

static void
files_add(HashFiles *f, uint64 hash)
{
	int			i = (int) ((hash >> f->shift) & (uint64) (f->nfiles - 1));

	if (f->files[i] == NULL)
	{
		MemoryContext oldcxt = MemoryContextSwitchTo(f->cxt);

		f->files[i] = BufFileCreateTemp(false);
		MemoryContextSwitchTo(oldcxt);
	}
	BufFileWrite(f->files[i], &hash, sizeof(hash));
	f->counts[i]++;
}

/* Close the files from the from'th on. */
static void
files_close(HashFiles *f, int from)
{
	for (int i = from; i < f->nfiles; i++)
		if (f->files[i])
		{
			BufFileClose(f->files[i]);
			f->files[i] = NULL;
		}
}

static void
read_hashes(BufFile *file, uint64 *buf, int64 n)
{
	size_t		want = sizeof(uint64) * n;
	size_t		got = BufFileRead(file, buf, want);

	if (got != want)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not read from a temporary file of key hashes: read only %zu of %zu bytes",
						got, want)));
}

/*
 * Whether the hashes in f's files are distinct, one file at a time, each
 * read into buf (room for max hashes) and sorted, or split by the next bits
 * if it holds more.  Closes the files.
 */
static bool
files_distinct(HashFiles *f, int bits, uint64 *buf, int64 max)
{
	for (int i = 0; i < f->nfiles; i++)
	{
		BufFile    *file = f->files[i];
		int64		n = f->counts[i];
		HashFiles  *next = NULL;
		bool		distinct = true;

		if (file == NULL)
			continue;
		CHECK_FOR_INTERRUPTS();
		if (BufFileSeek(file, 0, 0, SEEK_SET) != 0)
			ereport(ERROR,
					(errcode_for_file_access(),
					 errmsg("could not rewind a temporary file of key hashes")));
		if (n <= max)
		{
			read_hashes(file, buf, n);
			distinct = hashes_distinct(buf, n);
		}
		else if (f->shift == 0)
			distinct = false;	/* more than one hash, equal in every bit */
		else
		{
			next = files_begin(f->cxt, Max(f->shift - bits, 0), bits);
			for (int64 done = 0; done < n; done += Min(n - done, max))
			{
				int64		chunk = Min(n - done, max);

				read_hashes(file, buf, chunk);
				for (int64 j = 0; j < chunk; j++)
					files_add(next, buf[j]);
			}
		}
		BufFileClose(file);
		f->files[i] = NULL;
		if (next)
			distinct = files_distinct(next, bits, buf, max);
		if (!distinct)
		{
			files_close(f, i + 1);
			return false;
		}
	}
	return true;
}

KeyCheck *
keycheck_begin(void)
{
	MemoryContext cxt = AllocSetContextCreate(CurrentMemoryContext, "idem_etl key check",
											  ALLOCSET_DEFAULT_SIZES);
	KeyCheck   *kc = MemoryContextAllocZero(cxt, sizeof(KeyCheck));

	kc->cxt = cxt;
	kc->max_in_memory = Min((int64) work_mem * 1024L, (int64) MaxAllocSize) / sizeof(uint64);
	kc->capacity = Min(kc->max_in_memory, 1024);
	kc->hashes = MemoryContextAlloc(cxt, sizeof(uint64) * kc->capacity);
	return kc;
}

/*
 * The array is full: its hashes, and all that come after, go to files.
 * They are not looked at for equal ones first: each file is sorted when
 * checked, and sorting the array as well took a third of a spilled check.
 */
static void
keycheck_spill(KeyCheck *kc)
{
	PrepareTempTablespaces();
	kc->bits = file_bits();
	kc->files = files_begin(kc->cxt, 64 - kc->bits, kc->bits);
	for (int64 i = 0; i < kc->nheld; i++)
		files_add(kc->files, kc->hashes[i]);
	pfree(kc->hashes);
	kc->hashes = NULL;
	kc->nheld = 0;
}

void
keycheck_add(KeyCheck *kc, uint64 hash)
{
	kc->n++;
	if (kc->files == NULL && kc->nheld == kc->capacity)
	{
		if (kc->capacity < kc->max_in_memory)
		{
			kc->capacity = Min(kc->capacity * 2, kc->max_in_memory);
			kc->hashes = repalloc(kc->hashes, sizeof(uint64) * kc->capacity);
		}
		else
			keycheck_spill(kc);
	}
	if (kc->files)
		files_add(kc->files, hash);
	else
		kc->hashes[kc->nheld++] = hash;
}

/* How many hashes were added. */
int64
keycheck_count(KeyCheck *kc)
{
	return kc->n;
}

/* Whether the hashes added are distinct; once, before keycheck_end. */
bool
keycheck_distinct(KeyCheck *kc)
{
	int64		largest = 0;
	uint64	   *buf;

	if (kc->files == NULL)
		return hashes_distinct(kc->hashes, kc->nheld);
	for (int i = 0; i < kc->files->nfiles; i++)
		largest = Max(largest, kc->files->counts[i]);
	buf = MemoryContextAlloc(kc->cxt, sizeof(uint64) * Min(largest, kc->max_in_memory));
	return files_distinct(kc->files, kc->bits, buf, kc->max_in_memory);
}

/* Close what is still open and free it all. */
void
keycheck_end(KeyCheck *kc)
{
	if (kc->files)
		files_close(kc->files, 0);
	MemoryContextDelete(kc->cxt);
}
