/*
 * citus_ranges.c
 *		A large batch with dense integer keys compared with the stored rows
 *		by ranges of its keys, with nothing sent per row: what an identical
 *		rerun needs, and, for the other ways, which rows must go on.
 *
 * Sending each row's key and hash (the way by difference, citus_upsert.c)
 * costs Citus a copy of every row: 1.2 s of the 2 s an identical rerun of
 * 1,000,000 rows took.  Here the batch's keys, integers, are cut into at
 * most RANGES ranges of equal width, and the coordinator counts each
 * range's rows and sums each half of their image hashes (of the key and
 * the columns to set, idem_etl.image_hash_half) modulo 2^64.  One
 * aggregate on the shards computes the same of the stored rows in the
 * batch's key range, and only the sums come back.  A range whose stored rows count and sum
 * alike holds the batch's rows, each stored as it is, and no other: a row
 * missing, changed or stored beside them changes the sums (by chance, two
 * different sets of rows sum alike with a probability of about 2^-128).
 * The rows of the ranges that differ go on (citus_upsert.c): straight in
 * when nothing is stored between the batch's keys, by difference when most
 * of them are stored, else whole.
 *
 * The shards read every stored row in the batch's key range, so the ranges
 * are used only where that is bounded by the batch: a single integer key
 * whose values span at most twice as many values as the batch has rows,
 * none NULL.  The batches of other keys are sampled (citus_upsert.c).
 */
#include "postgres.h"

#include "compat.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "common/int.h"
#include "utils/builtins.h"

#include "citus/citus_ranges.h"
#include "stage/compare.h"
#include "util/sql.h"

/* Ranges of a batch at most: their sums come back from every shard */
#define RANGES 1024

#define TWO_TO_64 "'18446744073709551616'::pg_catalog.numeric"

typedef struct KeyRanges
{
	int			key;			/* the key's attribute in the batch, 0-based */
	Oid			keytype;
	int			natts;			/* hashed: the key and the columns to set */
	int		   *atts;
	int64		min;			/* the batch's smallest key ... */
	int64		max;			/* ... and largest */
	int64		width;			/* keys a range covers */
	int			nranges;
	int64	   *rows;			/* per range: the batch's rows ... */
	uint64	   *sum[2];			/* ... and the sums of their hash halves,
								 * modulo 2^64 */
} KeyRanges;

static int64
key_value(Oid type, Datum value)
{
	switch (type)
	{
		case INT2OID:
			return DatumGetInt16(value);
		case INT4OID:
			return DatumGetInt32(value);
		default:
			return DatumGetInt64(value);
	}
}

/* The first pass: the keys' bounds; false on a NULL key */
static bool
key_bounds(void *arg, TupleTableSlot *slot)
{
	KeyRanges  *kr = (KeyRanges *) arg;
	int64		k;

	if (slot->tts_isnull[kr->key])
		return false;
	k = key_value(kr->keytype, slot->tts_values[kr->key]);
	kr->min = Min(kr->min, k);
	kr->max = Max(kr->max, k);
	return true;
}

/* The second pass: the row counted and its hash added to its range */
static bool
add_row(void *arg, TupleTableSlot *slot)
{
	KeyRanges  *kr = (KeyRanges *) arg;
	int64		r = (key_value(kr->keytype, slot->tts_values[kr->key]) - kr->min) / kr->width;
	ImageHash	ih;

	compare_image_hash_init(&ih);
	for (int i = 0; i < kr->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(slot->tts_tupleDescriptor, kr->atts[i]);

		compare_image_hash_add(&ih, i, slot->tts_values[kr->atts[i]],
							   slot->tts_isnull[kr->atts[i]], att->attlen, att->attbyval);
	}
	kr->rows[r]++;
	kr->sum[0][r] += ih.h[0];
	kr->sum[1][r] += ih.h[1];
	return true;
}

/* "((a.key::int8 - min) / width)": the range of a's key */
static void
append_range_of(StringInfo sql, KeyRanges *kr, const char *a, const char *keyname)
{
	appendStringInfo(sql, "((%s.%s::pg_catalog.int8 OPERATOR(pg_catalog.-) '" INT64_FORMAT "'::pg_catalog.int8)"
					 " OPERATOR(pg_catalog./) '" INT64_FORMAT "'::pg_catalog.int8)",
					 a, quote_identifier(keyname), kr->min, kr->width);
}

/* "idem_etl.image_hash_half(half, t.key, t.c1, ...) AS hhalf" */
static void
append_half(StringInfo sql, CitusBatch *cb, const char *t, char **setcols, int nset, int half)
{
	appendStringInfo(sql, ", idem_etl.image_hash_half(%d, %s.%s", half, t,
					 quote_identifier(cb->key->names[0]));
	for (int i = 0; i < nset; i++)
		appendStringInfo(sql, ", %s.%s", t, quote_identifier(setcols[i]));
	appendStringInfo(sql, ") AS h%d", half);
}

/*
 * Compare the batch's key ranges with the stored rows (see the file's
 * comment).  False when the ranges cannot be used; else true, with what
 * they found in *found.
 */
bool
citus_ranges_compare(CitusBatch *cb, char **setcols, int nset, const char *b,
					 CitusRanges *found)
{
	TargetKey  *key = cb->key;
	KeyRanges	kr = {0};
	const char *t = target_alias(cb->target, "t");
	StringInfoData sql;
	int64	   *stored;
	bool	   *same;
	int			nsame = 0;
	int64		span;

	if (key->ncolumns != 1)
		return false;
	kr.key = citus_batch_atts(cb, key->names, 1)[0];
	kr.keytype = TupleDescAttr(cb->staged->desc, kr.key)->atttypid;
	if (kr.keytype != INT2OID && kr.keytype != INT4OID && kr.keytype != INT8OID)
		return false;
	kr.min = PG_INT64_MAX;
	kr.max = PG_INT64_MIN;
	if (!citus_rows_scan(cb->staged, key_bounds, &kr) || kr.min > kr.max ||
		pg_sub_s64_overflow(kr.max, kr.min, &span) || span >= 2 * cb->nkeys)
		return false;
	span++;
	kr.width = (span + RANGES - 1) / RANGES;
	kr.nranges = (int) ((span + kr.width - 1) / kr.width);
	kr.natts = nset + 1;
	kr.atts = palloc(sizeof(int) * kr.natts);
	kr.atts[0] = kr.key;
	if (nset > 0)
		memcpy(kr.atts + 1, citus_batch_atts(cb, setcols, nset), sizeof(int) * nset);
	kr.rows = palloc0(sizeof(int64) * kr.nranges);
	kr.sum[0] = palloc0(sizeof(uint64) * kr.nranges);
	kr.sum[1] = palloc0(sizeof(uint64) * kr.nranges);
	(void) citus_rows_scan(cb->staged, add_row, &kr);

	/*
	 * The shards' sums of the halves as bigints are exact (numeric), and the
	 * same modulo 2^64 as the coordinator's of the unsigned halves.  Each
	 * half is named once per row: Citus pulls the subquery up, and a half
	 * named in two sums would be computed twice.
	 */
	initStringInfo(&sql);
	appendStringInfoString(&sql, "SELECT r, pg_catalog.count(*)::pg_catalog.int8");
	for (int half = 0; half < 2; half++)
		appendStringInfo(&sql, ", ((pg_catalog.sum(h%d) OPERATOR(pg_catalog.%%) " TWO_TO_64 ")"
						 " OPERATOR(pg_catalog.+) " TWO_TO_64 ") OPERATOR(pg_catalog.%%) " TWO_TO_64,
						 half);
	appendStringInfoString(&sql, " FROM (SELECT ");
	append_range_of(&sql, &kr, t, key->names[0]);
	appendStringInfoString(&sql, " AS r");
	append_half(&sql, cb, t, setcols, nset, 0);
	append_half(&sql, cb, t, setcols, nset, 1);
	appendStringInfo(&sql, " FROM %s AS %s WHERE %s.%s OPERATOR(pg_catalog.>=) '" INT64_FORMAT "'::pg_catalog.int8"
					 " AND %s.%s OPERATOR(pg_catalog.<=) '" INT64_FORMAT "'::pg_catalog.int8) AS ranges GROUP BY r",
					 cb->target->qualname, t, t, quote_identifier(key->names[0]), kr.min,
					 t, quote_identifier(key->names[0]), kr.max);
	sql_exec(sql.data);

	memset(found, 0, sizeof(*found));
	stored = palloc0(sizeof(int64) * kr.nranges);
	same = palloc0(sizeof(bool) * kr.nranges);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		HeapTuple	row = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		isnull;
		int64		r = DatumGetInt64(SPI_getbinval(row, desc, 1, &isnull));

		if (r < 0 || r >= kr.nranges)
			continue;
		stored[r] = DatumGetInt64(SPI_getbinval(row, desc, 2, &isnull));
		found->stored += stored[r];
		same[r] = stored[r] == kr.rows[r];
		for (int half = 0; half < 2 && same[r]; half++)
			same[r] = strcmp(SPI_getvalue(row, desc, 3 + half),
							 psprintf(UINT64_FORMAT, kr.sum[half][r])) == 0;
	}

	/* a range with no row of the batch has nothing to merge */
	resetStringInfo(&sql);
	for (int r = 0; r < kr.nranges; r++)
	{
		if (same[r] || kr.rows[r] == 0)
		{
			nsame++;
			continue;
		}
		appendStringInfo(&sql, "%s%d", sql.len ? "," : "", r);
		found->differ_rows += kr.rows[r];
		found->differ_stored += stored[r];
	}
	ereport(DEBUG1,
			(errmsg_internal("%d of the %d key ranges of the batch for \"%s\" are stored as they are, %lld rows stored between its keys",
							 nsame, kr.nranges, cb->target->relname, (long long) found->stored)));
	if (nsame < kr.nranges)
	{
		char	   *list = psprintf("{%s}", sql.data);

		resetStringInfo(&sql);
		append_range_of(&sql, &kr, b, key->names[0]);
		appendStringInfo(&sql, " OPERATOR(pg_catalog.=) ANY (%s::pg_catalog.int8[])",
						 quote_literal_cstr(list));
		found->differ = sql.data;
	}
	return true;
}
