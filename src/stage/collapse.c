/*
 * collapse.c
 *		Rows of a batch that cannot win their key, recognised while it is
 *		staged.
 *
 * An upsert keeps one row per key: rows of a key that are exact copies
 * (equal binary images, as the *= operator compares them) are one row, and
 * with order_by the first row wins.  A batch of many rows over few keys
 * (snapshots of a small table appended to a log, say) would otherwise be
 * staged and sorted whole only to keep one row per key.  So while staging,
 * each key's best row so far is held in a hash table, by the key hash the
 * key check computes anyway, and a row of the same key that is a copy of
 * it, or that order_by puts after it, is not staged.  The fingerprint still
 * counts every row.  At the end the held rows are staged.
 *
 * Whatever dedup.c would decide about a key is left to it, with the rows it
 * needs: when a key has two differing rows and no order_by, or two differing
 * rows tie for first place, both are staged and so is every later row of
 * that key (the key is "released").  The rows dropped before were copies of
 * the held row or lost to it, so they change neither the winner nor a tie.
 * A row whose key hash matches a held row's but whose key differs in
 * binary image (a collision, or keys the index finds equal, like numeric
 * 1.0 and 1.00) is staged as well; the key check sees its hash and sorts.
 *
 * The table holds at most work_mem.  When it is full, keys not in it are
 * staged as they come.  Whether it pays is looked at when it holds 1,024
 * keys, 2,048, 4,096 ... and when it is full: if it has dropped fewer than
 * one row per 16 keys it holds, the batch is not of that kind (a batch
 * without duplicates drops none), and the held rows are staged and the
 * table given up.  So such a batch pays for holding 1,024 rows, not for a
 * lookup per row.
 *
 * order_by is evaluated as ORDER BY would (ordering.c), and only for keys
 * with a second row: dedup.c never sorts a batch whose keys are distinct,
 * so an order_by that fails for a row (a division by zero) fails only when
 * that row's key has others.  One that cannot be evaluated row by row is
 * left to dedup.c.
 */
#include "postgres.h"

#include "miscadmin.h"
#include "utils/datum.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"

#include "stage/collapse.h"
#include "stage/compare.h"
#include "stage/ordering.h"

/* A table that dropped fewer than one row per this many keys is given up, */
#define COLLAPSE_MIN_YIELD 16
/* as looked at when it holds this many keys, twice as many, ..., and full. */
#define COLLAPSE_FIRST_LOOK 1024

typedef struct HeldRow
{
	uint64		keyhash;		/* the hash key */
	bool		released;		/* its rows are staged as they come */
	Datum	   *values;			/* the best row so far */
	bool	   *isnull;
	bool		ob_valid;		/* its order_by values, once needed */
	Datum	   *ob_values;
	bool	   *ob_isnull;
} HeldRow;

struct Collapse
{
	TupleDesc	desc;
	int			nkeys;
	const int  *keyatts;		/* 0-based */
	OrderBy    *ob;				/* NULL: no order_by evaluated here */
	CollapseStageRow stage_row;
	void	   *arg;
	MemoryContext cxt;			/* the table and the rows it holds */
	HTAB	   *held;			/* NULL once given up */
	bool		full;
	int64		nheld;
	int64		ndropped;
};

Collapse *
collapse_begin(TupleDesc desc, int nkeys, const int *keyatts, const char *order_by,
			   const char *alias, CollapseStageRow stage_row, void *arg)
{
	Collapse   *c = palloc0(sizeof(Collapse));
	HASHCTL		ctl;

	c->desc = desc;
	c->nkeys = nkeys;
	c->keyatts = keyatts;
	c->ob = order_by ? ordering_prepare(desc, order_by, alias) : NULL;
	c->stage_row = stage_row;
	c->arg = arg;
	c->cxt = AllocSetContextCreate(CurrentMemoryContext, "idem_etl held rows",
								   ALLOCSET_DEFAULT_SIZES);
	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = sizeof(uint64);
	ctl.entrysize = sizeof(HeldRow);
	ctl.hcxt = c->cxt;
	c->held = hash_create("idem_etl held rows", 1024, &ctl,
						  HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	return c;
}

/* The order_by values ordering_eval left are the held row's. */
static void
keep_order_by(Collapse *c, HeldRow *held)
{
	MemoryContext oldcxt = MemoryContextSwitchTo(c->cxt);

	ordering_copy(c->ob, held->ob_values, held->ob_isnull);
	MemoryContextSwitchTo(oldcxt);
	held->ob_valid = true;
}

/*
 * Make the row the held one; with order_by, its values as ordering_eval
 * left them for it (ob_valid), or none yet.
 */
static void
hold(Collapse *c, HeldRow *held, Datum *values, bool *isnull, bool ob_valid)
{
	MemoryContext oldcxt = MemoryContextSwitchTo(c->cxt);

	if (held->values == NULL)
	{
		held->values = palloc(sizeof(Datum) * c->desc->natts);
		held->isnull = palloc(sizeof(bool) * c->desc->natts);
		if (c->ob)
		{
			held->ob_values = palloc(sizeof(Datum) * c->ob->n);
			held->ob_isnull = palloc(sizeof(bool) * c->ob->n);
		}
	}
	else
	{
		for (int i = 0; i < c->desc->natts; i++)
			if (!held->isnull[i] && !TupleDescAttr(c->desc, i)->attbyval)
				pfree(DatumGetPointer(held->values[i]));
		for (int i = 0; held->ob_valid && i < c->ob->n; i++)
			if (!held->ob_isnull[i] && !c->ob->typbyval[i])
				pfree(DatumGetPointer(held->ob_values[i]));
	}
	for (int i = 0; i < c->desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(c->desc, i);

		held->isnull[i] = isnull[i];
		held->values[i] = isnull[i] ? (Datum) 0 :
			datumCopy(values[i], att->attbyval, att->attlen);
	}
	MemoryContextSwitchTo(oldcxt);
	held->ob_valid = false;
	if (ob_valid)
		keep_order_by(c, held);
}

/*
 * The held row's order_by values, evaluated when a second row of its key
 * needs them: a key with one row never evaluates order_by, as dedup.c
 * never sorts a batch whose keys are distinct.
 */
static void
held_order_by(Collapse *c, HeldRow *held)
{
	if (held->ob_valid)
		return;
	ordering_eval(c->ob, c->desc, held->values, held->isnull);
	keep_order_by(c, held);
}

/* Stage every held row, and from now on every row as it comes. */
static void
give_up(Collapse *c)
{
	HASH_SEQ_STATUS seq;
	HeldRow    *held;

	hash_seq_init(&seq, c->held);
	while ((held = hash_seq_search(&seq)) != NULL)
		if (!held->released)
			c->stage_row(c->arg, held->values, held->isnull);
	hash_destroy(c->held);
	c->held = NULL;
	MemoryContextReset(c->cxt);
}

/*
 * A row of the batch with a non-NULL key (keyhash, its key check hash):
 * true when it cannot win its key and need not be staged; false when the
 * caller stages it.
 */
bool
collapse_row(Collapse *c, uint64 keyhash, Datum *values, bool *isnull)
{
	HeldRow    *held;
	bool		found;
	int			cmp;

	if (c->held == NULL)
		return false;
	held = hash_search(c->held, &keyhash, c->full ? HASH_FIND : HASH_ENTER, &found);
	if (held == NULL)
		return false;			/* a new key, and the table is full */
	if (!found)
	{
		held->released = false;
		held->values = NULL;
		held->ob_valid = false;
		hold(c, held, values, isnull, false);
		c->nheld++;
		if (MemoryContextMemAllocated(c->cxt, true) >= (Size) work_mem * 1024L)
			c->full = true;
		if ((c->full || (c->nheld >= COLLAPSE_FIRST_LOOK && (c->nheld & (c->nheld - 1)) == 0)) &&
			c->ndropped < c->nheld / COLLAPSE_MIN_YIELD)
			give_up(c);
		return true;
	}
	if (held->released ||
		!compare_rows_same_image(c->desc, c->nkeys, c->keyatts, values, isnull, held->values, held->isnull))
		return false;
	if (compare_rows_same_image(c->desc, c->desc->natts, NULL, values, isnull, held->values, held->isnull))
	{
		c->ndropped++;
		return true;
	}
	if (c->ob)
	{
		held_order_by(c, held);
		ordering_eval(c->ob, c->desc, values, isnull);
		cmp = ordering_compare(c->ob, held->ob_values, held->ob_isnull);
		if (cmp > 0)
		{
			c->ndropped++;
			return true;
		}
		if (cmp < 0)
		{
			hold(c, held, values, isnull, true);
			c->ndropped++;
			return true;
		}
	}
	/* differing rows without order_by, or tied for first place: dedup.c's */
	c->stage_row(c->arg, held->values, held->isnull);
	held->released = true;
	return false;
}

/* Stage the rows still held. */
void
collapse_end(Collapse *c)
{
	if (c->held)
		give_up(c);
	if (c->ob)
		ordering_end(c->ob);
	MemoryContextDelete(c->cxt);
	pfree(c);
}
