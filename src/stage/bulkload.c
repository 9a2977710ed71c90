/*
 * bulkload.c
 *		Rows written straight into a table created in this transaction, as
 *		COPY FROM writes them.
 *
 * A partition replacement loads the source into a new table that has no
 * indexes, triggers or row security yet (newpart.c adds them after the
 * load).  Written by INSERT ... SELECT, every row is a heap insertion and a
 * WAL record of its own; written here, the rows are buffered and inserted a
 * page at a time with table_multi_insert, as COPY does: 100,000 rows load in
 * about two thirds of the time.  The rows come from the receiver that
 * stages the source (stage.c), which has already coerced them to the
 * table's column types as INSERT would, so what INSERT would still do is
 * done here, in its order: the columns the rows do not give take the
 * defaults an INSERT into the parent would give them (the parent's, not
 * the partition's own; an identity column, which a new partition does not
 * get, takes the parent's sequence), stored generated columns are
 * computed, and the table's NOT NULL and CHECK constraints are checked,
 * with INSERT's errors.
 */
#include "postgres.h"

#include "compat.h"

#include "access/heapam.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "executor/executor.h"
#include "executor/nodeModifyTable.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "optimizer/optimizer.h"
#include "parser/parse_coerce.h"
#include "parser/parsetree.h"
#include "rewrite/rewriteHandler.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "stage/bulkload.h"

/* As COPY buffers: at most this many rows, or this many bytes, at a time. */
#define BULKLOAD_MAX_ROWS 1000
#define BULKLOAD_MAX_BYTES 65535

struct BulkLoad
{
	Relation	rel;
	EState	   *estate;
	ResultRelInfo *rri;
	int		   *rowatt;			/* per attribute of rel: the row's column
								 * giving it (0-based), or -1 */
	ExprState **defaults;		/* per attribute no column gives: its default,
								 * or NULL */
	int			max_rows;		/* 1 with a volatile default: it may read what
								 * the rows before wrote */
	MemoryContext cxt;			/* of bulkload_begin's caller */
	TupleDesc	slotdesc;		/* of the slots: see bulkload_begin */
	TupleTableSlot **slots;		/* the rows buffered, materialized */
	int			nbuffered;
	Size		nbytes;
	CommandId	cid;
	int			ti_options;
	BulkInsertState bistate;
};

/*
 * The default of attribute att of rel for a row that does not give it, as
 * an INSERT into parent (the table the rows were loaded into, whose
 * partition rel becomes; NULL: rel itself) gives it: parent's default for
 * the column of that name, which for an identity column is parent's
 * sequence (partitions have no identity of their own), not a default of
 * the partition's own, which only an INSERT into the partition applies.
 * Without one, a column of a domain type gets a NULL checked against the
 * domain, as INSERT gives it (expand_targetlist): a domain NOT NULL refuses
 * the row.  NULL when the value is a plain NULL.
 */
static Expr *
column_default(Relation rel, Form_pg_attribute att, Relation parent)
{
	Node	   *def = NULL;

	if (parent == NULL)
		def = build_column_default(rel, att->attnum);
	else
	{
		AttrNumber	parent_att = get_attnum(RelationGetRelid(parent), NameStr(att->attname));

		if (parent_att != InvalidAttrNumber)
			def = build_column_default(parent, parent_att);
	}
	if (def == NULL)
	{
		/*
		 * A domain's constraints apply to the NULL a column without a default
		 * gets.  The base type is passed, not InvalidOid: 18 no longer looks
		 * it up in coerce_to_domain (and asserts it is valid).
		 */
		int32		basetypmod = att->atttypmod;
		Oid			basetype = getBaseTypeAndTypmod(att->atttypid, &basetypmod);

		if (basetype != att->atttypid)
			def = coerce_to_domain((Node *) makeConst(basetype, basetypmod, att->attcollation,
													  att->attlen, (Datum) 0, true,
													  att->attbyval),
								   basetype, basetypmod, att->atttypid, COERCION_IMPLICIT,
								   COERCE_IMPLICIT_CAST, -1, false);
	}
	return def ? expression_planner((Expr *) def) : NULL;
}

/*
 * Start loading rows shaped as rowdesc (columns named as into's, with its
 * types) into table into, created in this transaction and still without
 * indexes and triggers; defaults_from: the table whose defaults the rows
 * take (see column_default), or InvalidOid for into's own.
 */
BulkLoad *
bulkload_begin(Oid into, Oid defaults_from, TupleDesc rowdesc)
{
	BulkLoad   *bl = palloc0(sizeof(BulkLoad));
	Relation	rel = table_open(into, RowExclusiveLock);
	TupleDesc	desc = RelationGetDescr(rel);
	RangeTblEntry *rte = makeNode(RangeTblEntry);
	Relation	parent = OidIsValid(defaults_from) ? table_open(defaults_from, NoLock) : NULL;
	Bitmapset  *given = NULL;
	bool		volatile_default = false;

	if (rel->rd_rel->relhasindex || rel->trigdesc != NULL || rel->rd_rel->relrowsecurity)
		elog(ERROR, "table \"%s\" is not ready for a bulk load", RelationGetRelationName(rel));
	bl->rel = rel;
	bl->rowatt = palloc(sizeof(int) * desc->natts);
	bl->defaults = palloc0(sizeof(ExprState *) * desc->natts);

	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		bl->rowatt[i] = -1;
		if (att->attisdropped)
			continue;
		for (int c = 0; c < rowdesc->natts; c++)
			if (strcmp(NameStr(TupleDescAttr(rowdesc, c)->attname), NameStr(att->attname)) == 0)
				bl->rowatt[i] = c;
		if (bl->rowatt[i] >= 0)
		{
			if (TupleDescAttr(rowdesc, bl->rowatt[i])->atttypid != att->atttypid)
				elog(ERROR, "column \"%s\" has another type than the rows loaded into it",
					 NameStr(att->attname));
			given = bms_add_member(given, att->attnum - FirstLowInvalidHeapAttributeNumber);
		}
		else if (att->attgenerated == '\0')
		{
			Expr	   *def = column_default(rel, att, parent);

			if (def != NULL)
			{
				bl->defaults[i] = ExecInitExpr(def, NULL);
				volatile_default |= contain_volatile_functions_not_nextval((Node *) def);
			}
		}
	}
	if (parent != NULL)
		table_close(parent, NoLock);
	bl->max_rows = volatile_default ? 1 : BULKLOAD_MAX_ROWS;

	/*
	 * What ExecConstraints and ExecComputeStoredGenerated look at, as COPY
	 * sets it up (the range table tells an error's detail which values the
	 * caller may see).
	 */
	bl->estate = CreateExecutorState();
	rte->rtekind = RTE_RELATION;
	rte->relid = into;
	rte->relkind = rel->rd_rel->relkind;
	rte->rellockmode = RowExclusiveLock;
	compat_init_insert_range_table(bl->estate, rte, given);
	bl->rri = makeNode(ResultRelInfo);
	ExecInitResultRelation(bl->estate, bl->rri, 1);

	bl->cxt = CurrentMemoryContext;

	/*
	 * The slots hold rows of rel's shape, but a copy of its descriptor, which
	 * is not reference-counted: a slot on the relation's own would register
	 * with the resource owner, and releasing a thousand such registrations
	 * cost more than a tenth of a millisecond per call.
	 */
	bl->slotdesc = CreateTupleDescCopy(desc);
	bl->slots = palloc0(sizeof(TupleTableSlot *) * bl->max_rows);
	bl->cid = GetCurrentCommandId(true);
	if (rel->rd_createSubid != InvalidSubTransactionId ||
		compat_first_relfile_subid(rel) != InvalidSubTransactionId)
		bl->ti_options |= TABLE_INSERT_SKIP_FSM;
	bl->bistate = GetBulkInsertState();
	return bl;
}

static void
flush(BulkLoad *bl)
{
	if (bl->nbuffered == 0)
		return;
	table_multi_insert(bl->rel, bl->slots, bl->nbuffered, bl->cid, bl->ti_options,
					   bl->bistate);
	for (int i = 0; i < bl->nbuffered; i++)
		ExecClearTuple(bl->slots[i]);
	bl->nbuffered = 0;
	bl->nbytes = 0;
}

/*
 * Add one row (values and isnull as rowdesc lays them out, in memory the
 * caller may reset afterwards): the buffered rows are materialized in slots
 * of the caller of bulkload_begin.
 */
void
bulkload_put(BulkLoad *bl, Datum *values, bool *isnull)
{
	TupleDesc	desc = RelationGetDescr(bl->rel);
	ExprContext *econtext = GetPerTupleExprContext(bl->estate);
	TupleTableSlot *slot;

	if (bl->slots[bl->nbuffered] == NULL)
	{
		MemoryContext oldcxt = MemoryContextSwitchTo(bl->cxt);

		bl->slots[bl->nbuffered] = MakeSingleTupleTableSlot(bl->slotdesc,
															table_slot_callbacks(bl->rel));
		MemoryContextSwitchTo(oldcxt);
	}
	slot = bl->slots[bl->nbuffered];
	ExecClearTuple(slot);
	for (int i = 0; i < desc->natts; i++)
	{
		if (bl->rowatt[i] >= 0)
		{
			slot->tts_values[i] = values[bl->rowatt[i]];
			slot->tts_isnull[i] = isnull[bl->rowatt[i]];
		}
		else if (bl->defaults[i] != NULL)
			slot->tts_values[i] = ExecEvalExpr(bl->defaults[i], econtext, &slot->tts_isnull[i]);
		else
		{
			slot->tts_values[i] = (Datum) 0;
			slot->tts_isnull[i] = true;
		}
	}
	ExecStoreVirtualTuple(slot);
	if (desc->constr && desc->constr->has_generated_stored)
		ExecComputeStoredGenerated(bl->rri, bl->estate, slot, CMD_INSERT);
	if (desc->constr)
		ExecConstraints(bl->rri, slot, bl->estate);

	/* the values point into the caller's and the per-row memory */
	bl->nbytes += heap_compute_data_size(desc, slot->tts_values, slot->tts_isnull);
	ExecMaterializeSlot(slot);
	ResetPerTupleExprContext(bl->estate);
	if (++bl->nbuffered == bl->max_rows || bl->nbytes >= BULKLOAD_MAX_BYTES)
		flush(bl);
}

void
bulkload_end(BulkLoad *bl)
{
	flush(bl);
	FreeBulkInsertState(bl->bistate);
	table_finish_bulk_insert(bl->rel, bl->ti_options);
	for (int i = 0; i < bl->max_rows; i++)
		if (bl->slots[i] != NULL)
			ExecDropSingleTupleTableSlot(bl->slots[i]);
	ExecCloseResultRelations(bl->estate);
	ExecCloseRangeTableRelations(bl->estate);
	FreeExecutorState(bl->estate);
	table_close(bl->rel, NoLock);
	pfree(bl);
}
