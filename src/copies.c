/*
 * copies.c
 *		Exact copies of a batch's rows, recognised while it is staged.
 *
 * An upsert keeps one row per key, and rows of a key that are exact copies
 * (equal binary images, as the *= operator compares them) are one row to
 * every later step: the winner, the conflict check, the counts.  A batch of
 * many rows over few keys (snapshots of a small table appended to a log,
 * say) would otherwise be staged and sorted whole only to keep one row per
 * key.  So the rows seen are remembered in a hash table, by the 128-bit hash
 * of their image that the fingerprint computes anyway, and a row equal to a
 * remembered one is not staged.  The fingerprint still counts it.
 *
 * The table holds at most work_mem.  When it is full and has recognised few
 * copies, the batch is not of that kind, and it is dropped: a batch without
 * copies pays for filling work_mem once, not a lookup per row.
 */
#include "postgres.h"

#include "miscadmin.h"
#include "utils/datum.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"

#include "copies.h"

/*
 * A full table that recognised fewer than one copy per this many rows it
 * holds is dropped.
 */
#define COPIES_MIN_YIELD 4

typedef struct SeenRow
{
	uint64		hash[2];		/* the hash key */
	Datum	   *values;
	bool	   *isnull;
} SeenRow;

struct RowCopies
{
	TupleDesc	desc;
	MemoryContext cxt;			/* the table and the rows it holds */
	HTAB	   *seen;			/* NULL once given up */
	bool		full;
	int64		nseen;
	int64		ncopies;
};

RowCopies *
copies_begin(TupleDesc desc)
{
	RowCopies  *c = palloc0(sizeof(RowCopies));
	HASHCTL		ctl;

	c->desc = desc;
	c->cxt = AllocSetContextCreate(CurrentMemoryContext, "idem_etl row copies",
								   ALLOCSET_DEFAULT_SIZES);
	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = sizeof(uint64) * 2;
	ctl.entrysize = sizeof(SeenRow);
	ctl.hcxt = c->cxt;
	c->seen = hash_create("idem_etl row copies", 1024, &ctl,
						  HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	return c;
}

static bool
same_image(TupleDesc desc, SeenRow *row, Datum *values, bool *isnull)
{
	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		if (row->isnull[i] != isnull[i] ||
			(!isnull[i] && !datum_image_eq(row->values[i], values[i],
										   att->attbyval, att->attlen)))
			return false;
	}
	return true;
}

/*
 * True when the row (values, isnull as desc lays them out; hash, its image's
 * hash) is an exact copy of a row seen before; else it is remembered, while
 * the table has room.
 */
bool
copies_seen(RowCopies *c, const uint64 *hash, Datum *values, bool *isnull)
{
	SeenRow    *row;
	bool		found;
	MemoryContext oldcxt;

	if (c->seen == NULL)
		return false;
	row = hash_search(c->seen, hash, c->full ? HASH_FIND : HASH_ENTER, &found);
	if (found)
	{
		/* equal hashes of differing rows: the later row is staged */
		if (!same_image(c->desc, row, values, isnull))
			return false;
		c->ncopies++;
		return true;
	}
	if (row == NULL)
		return false;			/* full */

	oldcxt = MemoryContextSwitchTo(c->cxt);
	row->values = palloc(sizeof(Datum) * c->desc->natts);
	row->isnull = palloc(sizeof(bool) * c->desc->natts);
	for (int i = 0; i < c->desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(c->desc, i);

		row->isnull[i] = isnull[i];
		row->values[i] = isnull[i] ? (Datum) 0 :
			datumCopy(values[i], att->attbyval, att->attlen);
	}
	MemoryContextSwitchTo(oldcxt);
	c->nseen++;

	if (MemoryContextMemAllocated(c->cxt, false) >= (Size) work_mem * 1024)
	{
		c->full = true;
		if (c->ncopies < c->nseen / COPIES_MIN_YIELD)
		{
			hash_destroy(c->seen);
			c->seen = NULL;
			MemoryContextReset(c->cxt);
		}
	}
	return false;
}

void
copies_end(RowCopies *c)
{
	MemoryContextDelete(c->cxt);
	pfree(c);
}
