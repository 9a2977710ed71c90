/*
 * ordering.c
 *		Orderings evaluated in C, as SQL would evaluate them over a staged
 *		batch: order_by over one row, and whether two rows have the same key
 *		as ORDER BY key sees it.
 *
 * Deciding each key's winner row by row, without a window over the batch,
 * needs both: the key's equality (its type's default btree ordering, as in
 * the window's PARTITION BY) and order_by's comparison (the ordering
 * operators, collations and NULLS placement ORDER BY would use).
 */
#include "postgres.h"

#include "executor/executor.h"
#include "executor/spi.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"
#include "utils/plancache.h"
#include "utils/ruleutils.h"
#include "utils/typcache.h"

#include "stage/ordering.h"

/*
 * order_by, analysed as dedup.c checks it (SELECT 1 FROM the stage ORDER BY
 * order_by), here over a one-row VALUES list with the stage's column names,
 * types and collations (not typmods, which no ordering depends on); NULL
 * when it cannot be evaluated row by row here.
 */
OrderBy *
ordering_prepare(TupleDesc desc, const char *order_by, const char *alias)
{
	StringInfoData sql;
	SPIPlanPtr	plan;
	CachedPlanSource *source;
	Query	   *query;
	Oid		   *argtypes = palloc(sizeof(Oid) * Max(desc->natts, 1));
	OrderBy    *ob;
	ListCell   *lc;
	int			i = 0;

	initStringInfo(&sql);
	appendStringInfoString(&sql, "SELECT 1 FROM (VALUES (");
	for (int a = 0; a < desc->natts; a++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, a);

		/*
		 * Typed parameters, not type names: a caller may use a column whose
		 * type lives in a schema it has no USAGE on.
		 */
		argtypes[a] = att->atttypid;
		appendStringInfo(&sql, "%s$%d", a ? ", " : "", a + 1);
		if (OidIsValid(att->attcollation) &&
			att->attcollation != get_typcollation(att->atttypid))
			appendStringInfo(&sql, " COLLATE %s", generate_collation_name(att->attcollation));
	}
	appendStringInfo(&sql, ")) %s(", alias);
	for (int a = 0; a < desc->natts; a++)
		appendStringInfo(&sql, "%s%s", a ? ", " : "",
						 quote_identifier(NameStr(TupleDescAttr(desc, a)->attname)));
	appendStringInfo(&sql, ") ORDER BY %s\n", order_by);

	plan = SPI_prepare(sql.data, desc->natts, argtypes);
	if (plan == NULL)
		elog(ERROR, "SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
	source = linitial(SPI_plan_get_plan_sources(plan));
	query = linitial_node(Query, source->query_list);
	if (query->hasAggs || query->hasWindowFuncs || query->hasSubLinks ||
		query->hasTargetSRFs || query->sortClause == NIL)
	{
		SPI_freeplan(plan);
		return NULL;
	}

	ob = palloc0(sizeof(OrderBy));
	ob->n = list_length(query->sortClause);
	ob->exprs = palloc(sizeof(ExprState *) * ob->n);
	ob->ssup = palloc0(sizeof(SortSupportData) * ob->n);
	ob->typlen = palloc(sizeof(int16) * ob->n);
	ob->typbyval = palloc(sizeof(bool) * ob->n);
	foreach(lc, query->sortClause)
	{
		SortGroupClause *sc = lfirst_node(SortGroupClause, lc);
		Expr	   *expr = (Expr *) get_sortgroupclause_expr(sc, query->targetList);

		if (contain_volatile_functions((Node *) expr))
		{
			SPI_freeplan(plan);
			return NULL;
		}
		expr = expression_planner((Expr *) copyObject(expr));
		ob->exprs[i] = ExecInitExpr(expr, NULL);
		ob->ssup[i].ssup_cxt = CurrentMemoryContext;
		ob->ssup[i].ssup_collation = exprCollation((Node *) expr);
		ob->ssup[i].ssup_nulls_first = sc->nulls_first;
		PrepareSortSupportFromOrderingOp(sc->sortop, &ob->ssup[i]);
		get_typlenbyval(exprType((Node *) expr), &ob->typlen[i], &ob->typbyval[i]);
		i++;
	}
	SPI_freeplan(plan);
	ob->econtext = CreateStandaloneExprContext();
	ob->slot = MakeSingleTupleTableSlot(desc, &TTSOpsVirtual);
	ob->econtext->ecxt_scantuple = ob->slot;
	ob->values = palloc(sizeof(Datum) * ob->n);
	ob->isnull = palloc(sizeof(bool) * ob->n);
	return ob;
}

/* Evaluate order_by over a row into ob->values (short-lived memory). */
void
ordering_eval(OrderBy *ob, TupleDesc desc, Datum *values, bool *isnull)
{
	ResetExprContext(ob->econtext);
	ExecClearTuple(ob->slot);
	memcpy(ob->slot->tts_values, values, sizeof(Datum) * desc->natts);
	memcpy(ob->slot->tts_isnull, isnull, sizeof(bool) * desc->natts);
	ExecStoreVirtualTuple(ob->slot);
	for (int i = 0; i < ob->n; i++)
		ob->values[i] = ExecEvalExpr(ob->exprs[i], ob->econtext, &ob->isnull[i]);
}

/* Copy the values ordering_eval left into values, isnull (current context). */
void
ordering_copy(OrderBy *ob, Datum *values, bool *isnull)
{
	for (int i = 0; i < ob->n; i++)
	{
		isnull[i] = ob->isnull[i];
		values[i] = ob->isnull[i] ? (Datum) 0 :
			datumCopy(ob->values[i], ob->typbyval[i], ob->typlen[i]);
	}
}

/*
 * <0 when the row last evaluated sorts before the one whose order_by values
 * are given, 0 on a tie (peers, as rank() sees them).
 */
int
ordering_compare(OrderBy *ob, const Datum *values, const bool *isnull)
{
	for (int i = 0; i < ob->n; i++)
	{
		int			c = ApplySortComparator(ob->values[i], ob->isnull[i],
											values[i], isnull[i], &ob->ssup[i]);

		if (c != 0)
			return c;
	}
	return 0;
}

void
ordering_end(OrderBy *ob)
{
	FreeExprContext(ob->econtext, true);
	ExecDropSingleTupleTableSlot(ob->slot);
}

/*
 * The key columns keyatts (0-based attributes of desc) compared as ORDER BY
 * compares them: their types' default btree ordering, their collations.
 */
KeyOrder *
ordering_key_prepare(TupleDesc desc, int nkeys, const int *keyatts)
{
	KeyOrder   *ko = palloc0(sizeof(KeyOrder));

	ko->n = nkeys;
	ko->atts = keyatts;
	ko->ssup = palloc0(sizeof(SortSupportData) * nkeys);
	for (int i = 0; i < nkeys; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, keyatts[i]);
		TypeCacheEntry *tc = lookup_type_cache(att->atttypid, TYPECACHE_LT_OPR);

		if (!OidIsValid(tc->lt_opr))
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_FUNCTION),
					 errmsg("could not identify an ordering operator for type %s",
							format_type_be(att->atttypid))));
		ko->ssup[i].ssup_cxt = CurrentMemoryContext;
		ko->ssup[i].ssup_collation = att->attcollation;
		PrepareSortSupportFromOrderingOp(tc->lt_opr, &ko->ssup[i]);
	}
	return ko;
}

/*
 * Two rows of desc (or of descriptors alike in the key's attributes) by
 * their keys, as ORDER BY key orders them: < 0, 0 or > 0.
 */
int
ordering_key_compare(KeyOrder *ko, const Datum *v1, const bool *n1,
					 const Datum *v2, const bool *n2)
{
	for (int i = 0; i < ko->n; i++)
	{
		int			a = ko->atts[i];
		int			c = ApplySortComparator(v1[a], n1[a], v2[a], n2[a], &ko->ssup[i]);

		if (c != 0)
			return c;
	}
	return 0;
}

/* Do two rows of desc have the same key? */
bool
ordering_key_equal(KeyOrder *ko, Datum *v1, bool *n1, Datum *v2, bool *n2)
{
	return ordering_key_compare(ko, v1, n1, v2, n2) == 0;
}
