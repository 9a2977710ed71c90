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
 *
 * idem_etl.image_hash(v1, v2, ...) is a 128-bit hash (as a uuid) of the same
 * images: on Citus, the coordinator sends the shards each batch row's key
 * and hash, and only the rows whose stored row hashes otherwise travel in
 * full (citus_upsert.c).  Equal images hash alike on every node, whatever its
 * settings; a changed row hashes like its stored one by chance with a
 * probability of about 2^-128 (not a cryptographic hash: rows built to
 * collide could).
 */
#include "postgres.h"

#include "compat.h"

#include "access/detoast.h"
#include "access/tupmacs.h"
#include "common/hashfn.h"
#include "fmgr.h"
#include "utils/datum.h"
#include "utils/uuid.h"
#include "utils/lsyscache.h"

#include "stage/compare.h"

typedef struct ArgType
{
	int16		typlen;
	bool		typbyval;
} ArgType;

/* Each argument's type, looked up once per call site (fn_extra). */
static ArgType *
arg_types(FunctionCallInfo fcinfo)
{
	ArgType    *types = (ArgType *) fcinfo->flinfo->fn_extra;

	if (types == NULL)
	{
		int			nargs = PG_NARGS();

		types = MemoryContextAlloc(fcinfo->flinfo->fn_mcxt, sizeof(ArgType) * Max(nargs, 1));
		for (int i = 0; i < nargs; i++)
		{
			Oid			typid = get_fn_expr_argtype(fcinfo->flinfo, i);

			if (!OidIsValid(typid))
				elog(ERROR, "could not determine the type of argument %d", i + 1);
			get_typlenbyval(typid, &types[i].typlen, &types[i].typbyval);
		}
		fcinfo->flinfo->fn_extra = types;
	}
	return types;
}

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
		for (int i = 0; i < nargs; i += 2)
			if (get_fn_expr_argtype(fcinfo->flinfo, i) != get_fn_expr_argtype(fcinfo->flinfo, i + 1))
				ereport(ERROR,
						(errcode(ERRCODE_DATATYPE_MISMATCH),
						 errmsg("arguments %d and %d of same_image have different types", i + 1, i + 2)));
		types = arg_types(fcinfo);
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
 * The 128-bit hash of a row's images, one value at a time: add each value
 * with its position, then take the result.  The bytes hashed are those
 * datum_image_eq compares: a by-value type's typlen bytes, a varlena's data
 * detoasted, without its header.
 */
void
compare_image_hash_init(ImageHash *ih)
{
	ih->h[0] = UINT64CONST(0x243F6A8885A308D3);
	ih->h[1] = UINT64CONST(0x13198A2E03707344);
	ih->only = -1;
}

void
compare_image_hash_add(ImageHash *ih, int position, Datum value, bool isnull,
					   int16 typlen, bool typbyval)
{
	const unsigned char *data;
	Size		len;
	unsigned char buf[sizeof(Datum)];

	if (isnull)
	{
		/* apart from every value's hash: (NULL, x) and (x, NULL) differ */
		if (ih->only != 1)
			ih->h[0] = hash_combine64(ih->h[0], UINT64CONST(0x9E3779B97F4A7C15) + position);
		if (ih->only != 0)
			ih->h[1] = hash_combine64(ih->h[1], UINT64CONST(0xC2B2AE3D27D4EB4F) + position);
		return;
	}
	if (typbyval)
	{
		store_att_byval(buf, value, typlen);
		data = buf;
		len = typlen;
	}
	else if (typlen > 0)
	{
		data = (const unsigned char *) DatumGetPointer(value);
		len = typlen;
	}
	else if (typlen == -1)
	{
		struct varlena *v = pg_detoast_datum_packed((struct varlena *) DatumGetPointer(value));

		data = (const unsigned char *) VARDATA_ANY(v);
		len = VARSIZE_ANY_EXHDR(v);
	}
	else
	{
		data = (const unsigned char *) DatumGetCString(value);
		len = strlen((const char *) data);
	}
	if (ih->only != 1)
		ih->h[0] = hash_combine64(ih->h[0], hash_bytes_extended(data, len, position));
	if (ih->only != 0)
		ih->h[1] = hash_combine64(ih->h[1], hash_bytes_extended(data, len,
																UINT64CONST(0x5BD1E995) + position));
}

Datum
compare_image_hash_result(ImageHash *ih)
{
	pg_uuid_t  *result = palloc(sizeof(pg_uuid_t));

	for (int b = 0; b < 8; b++)
	{
		result->data[b] = (unsigned char) (ih->h[0] >> (8 * b));
		result->data[8 + b] = (unsigned char) (ih->h[1] >> (8 * b));
	}
	return UUIDPGetDatum(result);
}

PG_FUNCTION_INFO_V1(idem_etl_image_hash);

Datum
idem_etl_image_hash(PG_FUNCTION_ARGS)
{
	ArgType    *types = arg_types(fcinfo);
	ImageHash	ih;

	compare_image_hash_init(&ih);
	for (int i = 0; i < PG_NARGS(); i++)
		compare_image_hash_add(&ih, i, PG_GETARG_DATUM(i), PG_ARGISNULL(i),
							   types[i].typlen, types[i].typbyval);
	PG_RETURN_DATUM(compare_image_hash_result(&ih));
}

/*
 * idem_etl.image_hash_half(half, v1, v2, ...): half 0 or 1 of
 * idem_etl.image_hash(v1, v2, ...) as a bigint (the uuid's first or last
 * eight bytes, little-endian), which sum() adds up on the shards; computes
 * only that half.
 */
PG_FUNCTION_INFO_V1(idem_etl_image_hash_half);

Datum
idem_etl_image_hash_half(PG_FUNCTION_ARGS)
{
	ArgType    *types = arg_types(fcinfo);
	ImageHash	ih;
	int32		half;

	if (PG_ARGISNULL(0) || (PG_GETARG_INT32(0) != 0 && PG_GETARG_INT32(0) != 1))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("half must be 0 or 1")));
	half = PG_GETARG_INT32(0);
	compare_image_hash_init(&ih);
	ih.only = half;
	for (int i = 1; i < PG_NARGS(); i++)
		compare_image_hash_add(&ih, i - 1, PG_GETARG_DATUM(i), PG_ARGISNULL(i),
							   types[i].typlen, types[i].typbyval);
	PG_RETURN_INT64((int64) ih.h[half]);
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
