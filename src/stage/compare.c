/*
 * compare.c
 *		idem_etl.same_image(a1, b1, a2, b2, ...): true when every pair holds
 *		the same value, byte for byte.
 *
 * This is how the merge tells unchanged rows from changed ones.  Binary
 * images need no equality operator, so json, point and xml columns work, and
 * they are stricter than "=" (1.0 vs 1.00, 'A' vs 'a' under a case-insensitive
 * collation), so an unchanged row is one whose stored bytes would not change.
 * Comparing pairs of arguments is cheaper than ROW(...) *= ROW(...), which
 * builds two tuples for every row of the batch.  compare_rows_same_image compares
 * two rows of a staged batch the same way, in C.
 */
#include "postgres.h"

#include "fmgr.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"

#include "stage/compare.h"

typedef struct ArgType
{
	int16		typlen;
	bool		typbyval;
} ArgType;

PG_FUNCTION_INFO_V1(idem_etl_same_image);

Datum
idem_etl_same_image(PG_FUNCTION_ARGS)
{
	ArgType    *types = (ArgType *) fcinfo->flinfo->fn_extra;
	int			nargs = PG_NARGS();

	if (nargs % 2 != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("same_image needs pairs of arguments")));
	if (types == NULL)
	{
		types = MemoryContextAlloc(fcinfo->flinfo->fn_mcxt, sizeof(ArgType) * nargs);
		for (int i = 0; i < nargs; i++)
		{
			Oid			typid = get_fn_expr_argtype(fcinfo->flinfo, i);

			if (!OidIsValid(typid))
				elog(ERROR, "could not determine the type of argument %d", i + 1);
			get_typlenbyval(typid, &types[i].typlen, &types[i].typbyval);
		}
		for (int i = 0; i < nargs; i += 2)
			if (get_fn_expr_argtype(fcinfo->flinfo, i) != get_fn_expr_argtype(fcinfo->flinfo, i + 1))
				ereport(ERROR,
						(errcode(ERRCODE_DATATYPE_MISMATCH),
						 errmsg("arguments %d and %d of same_image have different types", i + 1, i + 2)));
		fcinfo->flinfo->fn_extra = types;
	}

	for (int i = 0; i < nargs; i += 2)
	{
		if (PG_ARGISNULL(i) != PG_ARGISNULL(i + 1))
			PG_RETURN_BOOL(false);
		if (PG_ARGISNULL(i))
			continue;
		if (!datum_image_eq(PG_GETARG_DATUM(i), PG_GETARG_DATUM(i + 1),
							types[i].typbyval, types[i].typlen))
			PG_RETURN_BOOL(false);
	}
	PG_RETURN_BOOL(true);
}

/*
 * Do two rows laid out as desc have the same value, byte for byte, in the
 * n attributes atts (0-based), or in the first n when atts is NULL?
 */
bool
compare_rows_same_image(TupleDesc desc, int n, const int *atts,
						Datum *v1, bool *n1, Datum *v2, bool *n2)
{
	for (int i = 0; i < n; i++)
	{
		int			a = atts ? atts[i] : i;
		Form_pg_attribute att = TupleDescAttr(desc, a);

		if (n1[a] != n2[a] ||
			(!n1[a] && !datum_image_eq(v1[a], v2[a], att->attbyval, att->attlen)))
			return false;
	}
	return true;
}
