/*
 * citus_rows.c
 *		A staged batch as Citus can read it: a few rows as the parameters of
 *		a VALUES list, or all of them from idem_etl.citus_batch().
 *
 * Citus cannot read a staged batch (an ephemeral named relation) in a
 * statement it distributes, so a large batch travels in a table beside the
 * target's shards (citus_upsert.c), filled by an INSERT ... SELECT from
 * idem_etl.citus_batch(), which Citus runs on the coordinator: the function
 * returns the call's staged batch, or its keys and the hash of its other
 * columns, with no copy of it in a table of the coordinator.  That table
 * costs a call its creation and drop on every shard, which for a few
 * hundred rows is most of the call.  A small batch travels instead as the
 * parameters of the statements themselves: Citus routes each row of an
 * INSERT ... VALUES to its shard, and sends the VALUES of an UPDATE ... FROM
 * or a DELETE to every shard that may hold one of its keys.  The same rows,
 * read one in every so many, are the sample that tells a large batch's
 * merge whether most of it is stored already.  Parameters keep the values
 * as they are (no text to quote), and Citus sends them to the workers as it
 * sends any statement's.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "common/hashfn.h"
#include "executor/executor.h"
#include "executor/tuptable.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/tuplestore.h"

#include "citus/citus_rows.h"
#include "stage/compare.h"
#include "util/sql.h"

/*
 * The batch of the etl_upsert_batch call in progress in this backend, for
 * idem_etl.citus_batch(); forgotten with the call's memory, at its end or
 * when it fails.
 */
static StagedRel *current_batch = NULL;
static Oid	current_role = InvalidOid;	/* the role that loads it */

static void
forget_batch(void *arg)
{
	if (current_batch == (StagedRel *) arg)
		current_batch = NULL;
}

/* staged is the batch idem_etl.citus_batch() returns, while memory lasts */
void
citus_rows_publish(StagedRel *staged)
{
	MemoryContextCallback *callback = palloc0(sizeof(MemoryContextCallback));

	callback->func = forget_batch;
	callback->arg = staged;
	MemoryContextRegisterResetCallback(CurrentMemoryContext, callback);
	current_batch = staged;
	current_role = GetUserId();
}

void
citus_rows_unpublish(StagedRel *staged)
{
	forget_batch(staged);
}

/* The 1-based attribute numbers of an int2[] argument, checked against desc */
static int16 *
attnums_arg(ArrayType *array, TupleDesc desc, int *n)
{
	Datum	   *elems;
	bool	   *nulls;
	int16	   *attnums;

	deconstruct_array(array, INT2OID, sizeof(int16), true, TYPALIGN_SHORT,
					  &elems, &nulls, n);
	attnums = palloc(sizeof(int16) * Max(*n, 1));
	for (int i = 0; i < *n; i++)
	{
		if (nulls[i] || DatumGetInt16(elems[i]) < 1 ||
			DatumGetInt16(elems[i]) > desc->natts)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("idem_etl.citus_batch: no column %d in the batch",
							nulls[i] ? 0 : DatumGetInt16(elems[i]))));
		attnums[i] = DatumGetInt16(elems[i]);
	}
	return attnums;
}

/*
 * idem_etl.citus_batch(columns, hash_columns): the rows of the batch being
 * loaded by etl_upsert_batch in this backend, its columns columns, then,
 * when hash_columns is not empty, the image hash of those (as
 * idem_etl.image_hash computes it).  Internal: the caller names the
 * columns and their types in a column definition list, which must match.
 */
PG_FUNCTION_INFO_V1(idem_etl_citus_batch);

/* What idem_etl.citus_batch() returns of each row */
typedef struct BatchOut
{
	ReturnSetInfo *rsinfo;
	int16	   *cols;			/* attribute numbers, 1-based */
	int			ncols;
	int16	   *hcols;			/* hashed, 1-based */
	int			nhcols;
	Datum	   *values;			/* the row returned */
	bool	   *isnull;
} BatchOut;

static bool
put_row(void *arg, TupleTableSlot *slot)
{
	BatchOut   *out = (BatchOut *) arg;
	TupleDesc	desc = slot->tts_tupleDescriptor;

	for (int i = 0; i < out->ncols; i++)
	{
		out->values[i] = slot->tts_values[out->cols[i] - 1];
		out->isnull[i] = slot->tts_isnull[out->cols[i] - 1];
	}
	if (out->nhcols > 0)
	{
		ImageHash	ih;

		compare_image_hash_init(&ih);
		for (int i = 0; i < out->nhcols; i++)
		{
			Form_pg_attribute att = TupleDescAttr(desc, out->hcols[i] - 1);

			compare_image_hash_add(&ih, i, slot->tts_values[out->hcols[i] - 1],
								   slot->tts_isnull[out->hcols[i] - 1],
								   att->attlen, att->attbyval);
		}
		out->values[out->ncols] = compare_image_hash_result(&ih);
		out->isnull[out->ncols] = false;
	}
	tuplestore_putvalues(out->rsinfo->setResult, out->rsinfo->setDesc, out->values, out->isnull);
	return true;
}

Datum
idem_etl_citus_batch(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	StagedRel  *rel = current_batch;
	TupleDesc	desc;
	int16	   *cols;
	int16	   *hcols;
	int			ncols;
	int			nhcols;
	int			nout;
	BatchOut	out;

	if (rel == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("no batch is being loaded into a Citus table in this session"),
				 errdetail("idem_etl.citus_batch() is called by etl_upsert_batch while it loads a Citus table.")));
	/* a function running as another role in the call sees nothing */
	if (GetUserId() != current_role)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for the batch being loaded"),
				 errdetail("Only the role that called etl_upsert_batch reads its batch.")));
	desc = rel->desc;
	cols = attnums_arg(PG_GETARG_ARRAYTYPE_P(0), desc, &ncols);
	hcols = attnums_arg(PG_GETARG_ARRAYTYPE_P(1), desc, &nhcols);
	nout = ncols + (nhcols > 0 ? 1 : 0);

	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	if (rsinfo->setDesc->natts != nout)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("idem_etl.citus_batch returns %d columns, not %d", nout,
						rsinfo->setDesc->natts)));
	for (int i = 0; i < nout; i++)
	{
		Oid			want = i < ncols ? TupleDescAttr(desc, cols[i] - 1)->atttypid : UUIDOID;

		if (TupleDescAttr(rsinfo->setDesc, i)->atttypid != want)
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("column %d of idem_etl.citus_batch has type %s, not %s", i + 1,
							format_type_be(want),
							format_type_be(TupleDescAttr(rsinfo->setDesc, i)->atttypid))));
	}

	out.rsinfo = rsinfo;
	out.cols = cols;
	out.ncols = ncols;
	out.hcols = hcols;
	out.nhcols = nhcols;
	out.values = palloc(sizeof(Datum) * nout);
	out.isnull = palloc(sizeof(bool) * nout);
	citus_rows_scan(rel, put_row, &out);
	return (Datum) 0;
}

/*
 * Call each(arg, slot) for every row of staged, all its attributes
 * deformed, in a memory context reset for each row; stops at the first
 * false, and returns false then.  Reads through a pointer of its own, so
 * the statements that scan the staged relation later start where they
 * always do.
 */
bool
citus_rows_scan(StagedRel *staged, bool (*each) (void *arg, TupleTableSlot *slot), void *arg)
{
	Tuplestorestate *store = staged->store;
	TupleTableSlot *slot = MakeSingleTupleTableSlot(staged->desc, &TTSOpsMinimalTuple);
	MemoryContext rowcxt = AllocSetContextCreate(CurrentMemoryContext, "idem_etl batch row",
												 ALLOCSET_DEFAULT_SIZES);
	int			ptr = tuplestore_alloc_read_pointer(store, EXEC_FLAG_REWIND);
	bool		ok = true;

	tuplestore_select_read_pointer(store, ptr);
	tuplestore_rescan(store);
	while (ok && tuplestore_gettupleslot(store, true, false, slot))
	{
		MemoryContext oldcxt = MemoryContextSwitchTo(rowcxt);

		slot_getallattrs(slot);
		ok = each(arg, slot);
		MemoryContextSwitchTo(oldcxt);
		MemoryContextReset(rowcxt);
	}
	tuplestore_select_read_pointer(store, 0);
	ExecDropSingleTupleTableSlot(slot);
	MemoryContextDelete(rowcxt);
	return ok;
}

/*
 * Read one row in every run of every rows of staged (1: all of them), at
 * most max_rows rows and max_bytes of them; false when there are more, with
 * nothing kept.  Where in each run is chosen by a hash of the run's number:
 * read at the same place in each, a sample misses any change that recurs
 * at that interval or a divisor of it (every 100th key, with runs of
 * 1,000).  Read through a pointer of its own, so the statements that scan
 * the staged relation later start where they always do.
 */
bool
citus_rows_read(StagedRel *staged, int64 every, int max_rows, Size max_bytes,
				CitusRows *rows)
{
	Tuplestorestate *store = staged->store;
	TupleTableSlot *slot = MakeSingleTupleTableSlot(staged->desc, &TTSOpsMinimalTuple);
	int			ptr = tuplestore_alloc_read_pointer(store, EXEC_FLAG_REWIND);
	Size		bytes = 0;
	bool		all = true;

	rows->desc = staged->desc;
	rows->nrows = 0;
	rows->rows = palloc(sizeof(HeapTuple) * Max(max_rows, 1));
	tuplestore_select_read_pointer(store, ptr);
	tuplestore_rescan(store);
	for (uint32 run = 0;; run++)
	{
		int64		at = every > 1 ? hash_bytes_uint32(run) % every : 0;
		HeapTuple	tuple;

		if ((at > 0 && !tuplestore_skiptuples(store, at, true)) ||
			!tuplestore_gettupleslot(store, true, false, slot))
			break;
		if (rows->nrows == max_rows)
		{
			all = false;
			break;
		}
		tuple = ExecCopySlotHeapTuple(slot);
		bytes += tuple->t_len;
		rows->rows[rows->nrows++] = tuple;
		if (bytes > max_bytes)
		{
			all = false;
			break;
		}
		if (every - 1 - at > 0 && !tuplestore_skiptuples(store, every - 1 - at, true))
			break;
	}
	tuplestore_select_read_pointer(store, 0);
	ExecDropSingleTupleTableSlot(slot);
	if (!all)
		citus_rows_free(rows);
	return all;
}

/*
 * Append "(VALUES ($n, ...), ...)" with the attributes atts (0-based, of
 * the staged batch) of every row read, adding them to params.  The
 * parameters have the columns' types, so the list has them too.  With
 * ordinal, each row starts with its position among the rows read (0, 1,
 * ...), an integer.
 */
void
citus_rows_append_values(StringInfo sql, CitusRows *rows, const int *atts,
						 int natts, bool ordinal, CitusParams *params)
{
	int			first = params->nargs;
	int			nargs = first + rows->nrows * natts;
	Datum	   *values = palloc(sizeof(Datum) * rows->desc->natts);
	bool	   *isnull = palloc(sizeof(bool) * rows->desc->natts);

	params->types = params->types ? repalloc(params->types, sizeof(Oid) * nargs) :
		palloc(sizeof(Oid) * nargs);
	params->values = params->values ? repalloc(params->values, sizeof(Datum) * nargs) :
		palloc(sizeof(Datum) * nargs);
	params->nulls = params->nulls ? repalloc(params->nulls, nargs) : palloc(nargs);

	appendStringInfoString(sql, "(VALUES ");
	for (int r = 0; r < rows->nrows; r++)
	{
		heap_deform_tuple(rows->rows[r], rows->desc, values, isnull);
		appendStringInfoString(sql, r ? ", (" : "(");
		if (ordinal)
			appendStringInfo(sql, "%d%s", r, natts ? ", " : "");
		for (int i = 0; i < natts; i++)
		{
			int			n = params->nargs++;

			params->types[n] = TupleDescAttr(rows->desc, atts[i])->atttypid;
			params->values[n] = values[atts[i]];
			params->nulls[n] = isnull[atts[i]] ? 'n' : ' ';
			appendStringInfo(sql, "%s$%d", i ? ", " : "", n + 1);
		}
		appendStringInfoChar(sql, ')');
	}
	appendStringInfoChar(sql, ')');
	pfree(values);
	pfree(isnull);
}

/* Run sql, exactly one statement, with params; returns its row count. */
uint64
citus_rows_exec(const char *sql, CitusParams *params)
{
	SPIPlanPtr	plan = sql_prepare(sql, params->nargs, params->types);
	int			rc = SPI_execute_plan(plan, params->values, params->nulls, false, 0);

	if (rc < 0)
		elog(ERROR, "SPI_execute_plan failed: %s", SPI_result_code_string(rc));
	SPI_freeplan(plan);
	return SPI_processed;
}

void
citus_rows_free(CitusRows *rows)
{
	for (int r = 0; r < rows->nrows; r++)
		heap_freetuple(rows->rows[r]);
	pfree(rows->rows);
	rows->rows = NULL;
	rows->nrows = 0;
}
