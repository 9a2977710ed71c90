/*
 * dedup.c
 *		Key checks of a staged batch: NULL keys, and rows sharing a key.
 *
 * ON CONFLICT cannot touch one row twice in a statement, and a result that
 * depended on the physical order of the batch would not be idempotent.  So
 * rows sharing a key must be exact duplicates, or order_by must pick one
 * winner per key; ties between differing rows are an error.
 */
#include "postgres.h"

#include "executor/spi.h"
#include "executor/tuptable.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

#include "stage/compare.h"
#include "upsert/dedup.h"
#include "stage/ordering.h"
#include "util/sql.h"

/*
 * Raise 21000 when two rows of relation rel share a key but differ.  Rows are
 * compared by binary image (*=, ordered by *<), which needs no equality
 * operator on any column type.  One sort of the batch by key and image puts
 * the rows of a key side by side, identical ones next to each other: a row
 * that differs from the one before it in the same key is a conflict.  So the
 * check costs a sort, n log n, however many duplicates there are.  The key
 * is shown as PostgreSQL shows it in unique violations: (a, b)=(1, null).
 */
static void
check_conflicts(TargetInfo *target, TargetKey *key, const char *rel, bool tie)
{
	StringInfoData sql;
	StringInfoData keys;
	int64		nkeys;
	char	   *example;

	const char *a = target_alias(target, "a");

	initStringInfo(&keys);
	sql_append_columns(&keys, a, key->names, key->ncolumns);
	initStringInfo(&sql);
	appendStringInfoString(&sql, "SELECT pg_catalog.count(DISTINCT k)::pg_catalog.int8, pg_catalog.min(k)"
						   " FROM (SELECT pg_catalog.concat('('");
	for (int i = 0; i < key->ncolumns; i++)
		appendStringInfo(&sql, ", %scoalesce(%s.%s::pg_catalog.text, 'null')",
						 i ? "', ', " : "", a, quote_identifier(key->names[i]));
	appendStringInfo(&sql, ", ')') AS k,"
					 " pg_catalog.row_number() OVER w AS n,"
					 " %s OPERATOR(pg_catalog.*=) pg_catalog.lag(%s) OVER w AS same"
					 " FROM %s %s WINDOW w AS (PARTITION BY %s ORDER BY %s USING OPERATOR(pg_catalog.*<))) c"
					 " WHERE n OPERATOR(pg_catalog.>) 1 AND NOT same",
					 a, a, rel, a, keys.data, a);
	sql_exec(sql.data);

	nkeys = sql_result_int8(1);
	if (nkeys == 0)
		return;
	example = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2);
	if (tie)
		ereport(ERROR,
				(errcode(ERRCODE_CARDINALITY_VIOLATION),
				 errmsg("differing rows of the batch for \"%s\" tie for first place in order_by at key (%s)=%s",
						target->relname, target_key_list(key), example),
				 errdetail("%lld key(s) have differing rows that sort equal by order_by, so the winner would depend on the physical order of the batch.",
						   (long long) nkeys),
				 errhint("Add columns to order_by until it decides every tie.")));
	ereport(ERROR,
			(errcode(ERRCODE_CARDINALITY_VIOLATION),
			 errmsg("the batch for \"%s\" has differing rows for key (%s)=%s",
					target->relname, target_key_list(key), example),
			 errdetail("%lld key(s) of the batch have more than one distinct row.",
					   (long long) nkeys),
			 errhint("Pass order_by to choose which row wins, or remove the duplicates from the source.")));
}

/*
 * The winners of a batch sorted by key (and order_by), one row at a time.
 * A row that starts a key wins; the key's other rows in first place (ties
 * by order_by; without order_by, every row of the key) must be the same
 * row, compared by binary image like the *= operator; rows of a lower
 * place lose.
 *
 * Where the key and order_by are compared in C (ordering.c), the query is
 * a plain sort of the stage by key and order_by: a window computing
 * row_number() and rank() over the same sort cost half as much again.  An
 * order_by that cannot be evaluated row by row (volatile functions,
 * subqueries) gets that window, and its row_number() (n) and rank() (r)
 * follow the staged columns.
 */
typedef struct Winners
{
	int			ncols;
	TupleTableSlot *winner;		/* the current key's first row */
	KeyOrder   *key;			/* NULL: n and r are given by the window */
	OrderBy    *ob;				/* NULL: no order_by, or the window has it */
	Datum	   *ob_values;		/* the winner's order_by values */
	bool	   *ob_isnull;
	MemoryContext keycxt;		/* reset at each key */
	int64		conflicts;
} Winners;

static bool
keep_winner(TupleTableSlot *slot, void *arg)
{
	Winners    *w = (Winners *) arg;
	TupleDesc	desc = w->winner->tts_tupleDescriptor;
	bool		starts_key;
	bool		first_place;

	if (w->key == NULL)
	{
		starts_key = DatumGetInt64(slot->tts_values[w->ncols]) == 1;
		first_place = DatumGetInt64(slot->tts_values[w->ncols + 1]) == 1;
	}
	else
	{
		starts_key = TTS_EMPTY(w->winner) ||
			!ordering_key_equal(w->key, slot->tts_values, slot->tts_isnull,
								w->winner->tts_values, w->winner->tts_isnull);
		if (w->ob)
			ordering_eval(w->ob, desc, slot->tts_values, slot->tts_isnull);
		first_place = starts_key || w->ob == NULL ||
			ordering_compare(w->ob, w->ob_values, w->ob_isnull) == 0;
	}

	if (starts_key)
	{
		ExecClearTuple(w->winner);
		memcpy(w->winner->tts_values, slot->tts_values, sizeof(Datum) * w->ncols);
		memcpy(w->winner->tts_isnull, slot->tts_isnull, sizeof(bool) * w->ncols);
		ExecStoreVirtualTuple(w->winner);
		ExecMaterializeSlot(w->winner);
		if (w->ob)
		{
			MemoryContext oldcxt;

			MemoryContextReset(w->keycxt);
			oldcxt = MemoryContextSwitchTo(w->keycxt);
			ordering_copy(w->ob, w->ob_values, w->ob_isnull);
			MemoryContextSwitchTo(oldcxt);
		}
		return true;
	}
	if (first_place &&
		!compare_rows_same_image(desc, w->ncols, NULL, slot->tts_values, slot->tts_isnull,
								 w->winner->tts_values, w->winner->tts_isnull))
		w->conflicts++;
	return false;
}

/*
 * One sort of the batch by key (and order_by) picks every key's winner and
 * checks the other rows against it: the winners are staged in key order.
 * Returns NULL when some key has differing rows in first place.
 */
static StagedRel *
pick_winners(TargetInfo *target, TargetKey *key, Stage *stage, const char *keys,
			 const char *order_by)
{
	const char *s = target_alias(target, "s");
	TupleDesc	desc = stage->staged->desc;
	StringInfoData sql;
	Winners		w;
	StagedRel  *winners;

	memset(&w, 0, sizeof(w));
	w.ncols = stage->ncolumns;
	if (order_by)
		w.ob = ordering_prepare(desc, order_by, s);
	if (order_by == NULL || w.ob != NULL)
		w.key = ordering_key_prepare(desc, key->ncolumns, stage_key_attnos(desc, key));

	initStringInfo(&sql);
	appendStringInfoString(&sql, "SELECT ");
	sql_append_columns(&sql, s, stage->columns, stage->ncolumns);
	if (w.key)
	{
		appendStringInfo(&sql, " FROM %s %s ORDER BY %s", stage->name, s, keys);
		if (order_by)
			appendStringInfo(&sql, ", %s\n", order_by);
	}
	else
		appendStringInfo(&sql, ", pg_catalog.row_number() OVER w, pg_catalog.rank() OVER w"
						 " FROM %s %s WINDOW w AS (PARTITION BY %s ORDER BY %s\n)",
						 stage->name, s, keys, order_by);

	w.winner = MakeSingleTupleTableSlot(desc, &TTSOpsVirtual);
	if (w.ob)
	{
		w.ob_values = palloc(sizeof(Datum) * w.ob->n);
		w.ob_isnull = palloc(sizeof(bool) * w.ob->n);
		w.keycxt = AllocSetContextCreate(CurrentMemoryContext, "idem_etl winner",
										 ALLOCSET_SMALL_SIZES);
	}
	winners = stage_query_filtered(sql.data, "batch", w.ncols, keep_winner, &w);
	ExecDropSingleTupleTableSlot(w.winner);
	if (w.ob)
	{
		ordering_end(w.ob);
		MemoryContextDelete(w.keycxt);
	}
	if (w.conflicts == 0)
		return winners;
	stage_drop(winners);
	return NULL;
}

/*
 * Check the keys of the staged batch and return the relation holding one row
 * per key.  The common case, unique non-NULL keys (proven by the key hashes
 * gathered while staging), reads nothing more.  Otherwise one sort picks
 * the winners (pick_winners); only when rows conflict is the batch read
 * again, to report them (check_conflicts).
 */
KeyedBatch
dedup_batch(TargetInfo *target, TargetKey *key, Stage *stage, const char *order_by)
{
	KeyedBatch	batch = {stage->name, NULL, stage->nrows - stage->ncollapsed, false};
	StringInfoData keys;
	StagedRel  *winners;
	char	   *from;
	StagedRel  *ranked = NULL;

	initStringInfo(&keys);
	sql_append_columns(&keys, NULL, key->names, key->ncolumns);

	/* order_by is checked against the stage's columns even if never needed */
	if (order_by)
		SPI_freeplan(sql_prepare(psprintf("SELECT 1 FROM %s ORDER BY %s\n",
										  stage->name, order_by), 0, NULL));

	if (stage->null_key_rows > 0 && !key->nulls_not_distinct)
		ereport(ERROR,
				(errcode(ERRCODE_NOT_NULL_VIOLATION),
				 errmsg("%lld row(s) of the batch for \"%s\" have a NULL key",
						(long long) stage->null_key_rows, target->relname),
				 errdetail("Key columns (%s) identify rows; NULL never matches a stored row, so a rerun would insert such rows again.",
						   target_key_list(key)),
				 errhint("Filter or fix those rows in the source query, or make the unique index NULLS NOT DISTINCT.")));
	if (stage_keys_distinct(stage))
		return batch;

	winners = pick_winners(target, key, stage, keys.data, order_by);
	if (winners != NULL)
	{
		batch.copy = winners;
		batch.name = winners->name;
		batch.nkeys = winners->nrows;
		batch.in_key_order = true;
		return batch;
	}

	/* differing rows: find them again, to report them */
	from = stage->name;
	if (order_by)
	{
		/*
		 * The row travels whole, under an alias that is no column of the
		 * target's, beside its rank, so that no name we give can meet a
		 * column of the target's.
		 */
		const char *row = target_alias(target, "s");

		ranked = stage_query(psprintf("SELECT (r.%s).* FROM (SELECT %s, pg_catalog.rank()"
									  " OVER (PARTITION BY %s ORDER BY %s\n) AS n FROM %s %s) r"
									  " WHERE r.n OPERATOR(pg_catalog.=) 1",
									  row, row, keys.data, order_by, stage->name, row),
							 "ranked");
		from = ranked->name;
	}
	check_conflicts(target, key, from, order_by != NULL);
	elog(ERROR, "rows of the batch differ by binary image, but not by the *= operator");
	return batch;				/* keep the compiler quiet */
}
