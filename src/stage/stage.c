/*
 * stage.c
 *		Staging a batch: the source query, evaluated once, into a tuplestore
 *		with the target's column types, or straight into a new partition
 *		(bulkload.c); and its fingerprint, gathered on the way.
 *
 * Staging is what lets the rest of the operation look at the batch as often
 * as it needs (null keys, duplicates, changed rows) while the source runs only
 * once, and keeps the batch out of backend memory.
 */
#include "postgres.h"

#include "compat.h"

#include "access/detoast.h"
#include "access/relation.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_collation.h"
#include "catalog/pg_operator.h"
#include "catalog/pg_type.h"
#include "common/hashfn.h"
#include "executor/executor.h"
#include "executor/tstoreReceiver.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "optimizer/optimizer.h"
#include "parser/parse_coerce.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/plancache.h"
#include "utils/queryenvironment.h"
#include "utils/rel.h"
#include "utils/ruleutils.h"
#include "utils/snapmgr.h"
#include "utils/tuplesort.h"
#include "utils/typcache.h"

#include "stage/bulkload.h"
#include "stage/collapse.h"
#include "stage/keycheck.h"
#include "stage/ordering.h"
#include "state/progress.h"
#include "stage/source_rights.h"
#include "util/args.h"
#include "util/sql.h"
#include "stage/stage.h"

/*
 * Staged batches live in tuplestores (in memory up to work_mem, then in a
 * temporary file), each registered with SPI as an ephemeral named relation,
 * as PL/pgSQL does for trigger transition tables: statements read it by its
 * name, which nothing in the catalogs can shadow.  No temporary table is
 * created, so a stream of small calls writes nothing to the system catalogs
 * and leaves nothing in the session's caches.
 */
static StagedRel *
stage_register(const char *purpose, TupleDesc desc)
{
	StagedRel  *rel = palloc0(sizeof(StagedRel));
	EphemeralNamedRelation enr = palloc0(sizeof(EphemeralNamedRelationData));

	rel->name = psprintf("idem_etl_%s", purpose);
	rel->desc = desc;
	rel->store = tuplestore_begin_heap(false, false, work_mem);
	enr->md.name = rel->name;
	enr->md.reliddesc = InvalidOid;
	enr->md.tupdesc = desc;
	enr->md.enrtype = ENR_NAMED_TUPLESTORE;
	enr->md.enrtuples = 0;
	enr->reldata = rel->store;
	rel->enr = enr;
	return rel;
}

/*
 * Publish the relation for the statements that follow, with its row count.
 * Its name is the same at every call (idem_etl_<purpose>), so that the
 * statements reading it have the same text each time and their plans can be
 * kept (sql_exec_cached); only when that name is taken in this SPI
 * connection does it get a number.
 */
static void
stage_publish(StagedRel *rel)
{
	static uint32 serial = 0;
	int			rc;

	rel->enr->md.enrtuples = (double) rel->nrows;
	rc = SPI_register_relation(rel->enr);
	if (rc == SPI_ERROR_REL_DUPLICATE)
	{
		rel->name = psprintf("%s_%u", rel->name, ++serial);
		rel->enr->md.name = rel->name;
		rc = SPI_register_relation(rel->enr);
	}
	if (rc != SPI_OK_REL_REGISTER)
		elog(ERROR, "could not register staged relation %s", rel->name);
}

void
stage_drop(StagedRel *rel)
{
	if (SPI_unregister_relation(rel->name) != SPI_OK_REL_UNREGISTER)
		elog(ERROR, "could not unregister staged relation %s", rel->name);
	tuplestore_end(rel->store);
}

/*
 * The receiver of stage_query_filtered: keep(), when given, sees every row
 * of the query (in a context reset after each) and says whether it is
 * staged.  Values are detoasted, as in stage_receive.
 */
typedef struct FilterReceiver
{
	DestReceiver pub;
	StagedRel  *rel;
	StageRowFilter keep;
	void	   *arg;
	MemoryContext rowcxt;
	Datum	   *values;			/* the row staged, detoasted */
} FilterReceiver;

static bool
filter_receive(TupleTableSlot *slot, DestReceiver *self)
{
	FilterReceiver *f = (FilterReceiver *) self;
	TupleDesc	desc = f->rel->desc;
	MemoryContext oldcxt;

	CHECK_FOR_INTERRUPTS();
	slot_getallattrs(slot);
	oldcxt = MemoryContextSwitchTo(f->rowcxt);
	if (f->keep == NULL || f->keep(slot, f->arg))
	{
		for (int i = 0; i < desc->natts; i++)
		{
			f->values[i] = slot->tts_values[i];
			if (!slot->tts_isnull[i] && TupleDescAttr(desc, i)->attlen == -1 &&
				VARATT_IS_EXTERNAL(DatumGetPointer(f->values[i])))
				f->values[i] = PointerGetDatum(detoast_external_attr((struct varlena *) DatumGetPointer(f->values[i])));
		}
		tuplestore_putvalues(f->rel->store, desc, f->values, slot->tts_isnull);
		f->rel->nrows++;
	}
	MemoryContextSwitchTo(oldcxt);
	MemoryContextReset(f->rowcxt);
	return true;
}

static void
filter_startup(DestReceiver *self, int operation, TupleDesc typeinfo)
{
}

/* Shutdown and destroy of both receivers: their callers free what they use. */
static void
receiver_shutdown(DestReceiver *self)
{
}

static void
receiver_destroy(DestReceiver *self)
{
}

/*
 * The rows of a query over staged relations that keep() accepts (all, when
 * it is NULL), in the query's order, staged in turn under a name made of
 * purpose, with the first natts columns of each row (all when natts < 0):
 * the query may return more, for keep() to look at.
 */
StagedRel *
stage_query_filtered(const char *sql, const char *purpose, int natts,
					 StageRowFilter keep, void *arg)
{
	SPIPlanPtr	plan = sql_prepare(sql, 0, NULL);
	CachedPlanSource *ps = linitial(SPI_plan_get_plan_sources(plan));
	TupleDesc	desc;
	FilterReceiver f;

	if (natts < 0)
		natts = ps->resultDesc->natts;
	desc = CreateTemplateTupleDesc(natts);
	for (int i = 0; i < natts; i++)
		TupleDescCopyEntry(desc, i + 1, ps->resultDesc, i + 1);
	TupleDescFinalize(desc);
	memset(&f, 0, sizeof(f));
	f.pub.receiveSlot = filter_receive;
	f.pub.rStartup = filter_startup;
	f.pub.rShutdown = receiver_shutdown;
	f.pub.rDestroy = receiver_destroy;
	f.pub.mydest = DestTuplestore;
	f.rel = stage_register(purpose, desc);
	f.keep = keep;
	f.arg = arg;
	f.rowcxt = AllocSetContextCreate(CurrentMemoryContext, "idem_etl staging row",
									 ALLOCSET_DEFAULT_SIZES);
	f.values = palloc(sizeof(Datum) * Max(natts, 1));
	sql_exec_into(plan, (DestReceiver *) &f, "staging");
	MemoryContextDelete(f.rowcxt);
	stage_publish(f.rel);
	return f.rel;
}

/*
 * The rows of a query over staged relations, staged in turn under a name
 * made of purpose.
 */
StagedRel *
stage_query(const char *sql, const char *purpose)
{
	return stage_query_filtered(sql, purpose, -1, NULL, NULL);
}

/*
 * A bare VALUES list names its columns column1, column2, ...: like INSERT
 * ... VALUES, it fills the target's columns in order (those the source may
 * write), so it is given their names.  "" for any other query.
 */
static const char *
values_aliases(TargetInfo *target, const char *body)
{
	int			width = sql_values_width(body);
	StringInfoData buf;
	int			n = 0;

	if (width < 0)
		return "";
	initStringInfo(&buf);
	for (int i = 0; i < target->ncolumns && n < width; i++)
		if (target->columns[i].writable)
			appendStringInfo(&buf, "%s%s", n++ ? ", " : "(",
							 quote_identifier(target->columns[i].name));
	if (n < width)
		ereport(ERROR,
				(errcode(ERRCODE_SYNTAX_ERROR),
				 errmsg("the VALUES list of the source has %d columns and relation \"%s\" only %d",
						width, target->relname, n),
				 errdetail("A bare VALUES list fills the target's columns in order, generated columns left out."),
				 errhint("Name the columns: SELECT * FROM (VALUES ...) AS v(column, ...).")));
	appendStringInfoChar(&buf, ')');
	return buf.data;
}

/*
 * Check the source and match its columns to the target's by name.  Planning
 * the query gives its result columns without running it; the plan is kept
 * in stage->plan for stage_load, so that the source is parsed and planned
 * once.  With fingerprint, the rows are hashed for the fingerprint as they
 * are staged: the callers ask for it only with a run_key, the one thing
 * that compares fingerprints (hashing every value was a tenth of a
 * partition replacement of 100,000 rows).
 */
Stage *
stage_plan(TargetInfo *target, const char *source, bool fingerprint)
{
	Stage	   *stage = palloc0(sizeof(Stage));
	SPIPlanPtr	plan;
	CachedPlanSource *ps;
	TupleDesc	desc;
	bool	   *in_source = palloc0(sizeof(bool) * target->ncolumns);
	ErrorContextCallback context;

	stage->fingerprint = fingerprint;
	args_context_push(&context, "source");
	stage->body = sql_single_query(source, "source");
	plan = sql_prepare(psprintf("SELECT * FROM (%s\n) AS idem_src%s", stage->body,
								values_aliases(target, stage->body)), 0, NULL);
	args_context_pop(&context);
	ps = linitial(SPI_plan_get_plan_sources(plan));
	source_rights_check(ps->query_list);
	desc = ps->resultDesc;

	for (int i = 0; i < desc->natts; i++)
	{
		const char *name = NameStr(TupleDescAttr(desc, i)->attname);
		TargetColumn *col = target_column(target, name);
		int			pos;

		if (col == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_COLUMN),
					 errmsg("column \"%s\" of the source does not exist in relation \"%s\"",
							name, target->relname),
					 errdetail("Source columns are matched to the target's columns by name."),
					 errhint("Rename the column in the source query with AS, or leave it out.")));
		pos = col - target->columns;
		if (in_source[pos])
			ereport(ERROR,
					(errcode(ERRCODE_DUPLICATE_COLUMN),
					 errmsg("column \"%s\" appears more than once in the source", name),
					 errhint("Give each source column a distinct name with AS.")));
		in_source[pos] = true;
	}
	stage->plan = plan;

	stage->columns = palloc(sizeof(char *) * target->ncolumns);
	for (int i = 0; i < target->ncolumns; i++)
		if (in_source[i] && target->columns[i].writable)
			stage->columns[stage->ncolumns++] = target->columns[i].name;
	return stage;
}

bool
stage_has_column(Stage *stage, const char *name)
{
	for (int i = 0; i < stage->ncolumns; i++)
		if (strcmp(stage->columns[i], name) == 0)
			return true;
	return false;
}

/*
 * Feed one attribute's binary image into the two hash lanes.  seed is the
 * column's position among the source's columns (1, 2, ...), whatever the
 * attribute number in the relation read, so that rows hash alike whether
 * they are read from a stage or from a table loaded from the source.
 */
static void
hash_attribute(Form_pg_attribute att, int seed, Datum value, bool isnull, uint64 *h)
{
	const char *data;
	Size		len;

	if (isnull)
	{
		h[0] = hash_combine64(h[0], UINT64CONST(0x9E3779B97F4A7C15));
		h[1] = hash_combine64(h[1], UINT64CONST(0xC2B2AE3D27D4EB4F));
		return;
	}
	if (att->attbyval)
	{
		data = (const char *) &value;
		len = sizeof(Datum);
	}
	else if (att->attlen > 0)
	{
		data = DatumGetPointer(value);
		len = att->attlen;
	}
	else if (att->attlen == -1)
	{
		struct varlena *v = pg_detoast_datum_packed((struct varlena *) DatumGetPointer(value));

		data = VARDATA_ANY(v);
		len = VARSIZE_ANY_EXHDR(v);
	}
	else
	{
		data = DatumGetCString(value);
		len = strlen(data);
	}
	h[0] = hash_combine64(h[0], hash_bytes_extended((const unsigned char *) data, len, seed));
	h[1] = hash_combine64(h[1], hash_bytes_extended((const unsigned char *) data, len,
													UINT64CONST(0x5BD1E995) + seed));
}

/*
 * Hash a key with its type's own hash function, so that keys the unique
 * index considers equal hash alike; types without one fall back to the
 * binary image.
 */
typedef struct KeyHasher
{
	int			attno;			/* 0-based attribute of the stage */
	bool		use_proc;
	FmgrInfo	proc;
	Oid			collation;
} KeyHasher;

/* Where the key's columns are in desc (0-based attribute numbers). */
int *
stage_key_attnos(TupleDesc desc, TargetKey *key)
{
	int		   *atts = palloc(sizeof(int) * key->ncolumns);

	for (int i = 0; i < key->ncolumns; i++)
	{
		atts[i] = -1;
		for (int a = 0; a < desc->natts; a++)
			if (strcmp(NameStr(TupleDescAttr(desc, a)->attname), key->names[i]) == 0)
				atts[i] = a;
		Assert(atts[i] >= 0);
	}
	return atts;
}

static KeyHasher *
key_hashers(TupleDesc desc, TargetKey *key)
{
	KeyHasher  *kh = palloc0(sizeof(KeyHasher) * key->ncolumns);
	int		   *atts = stage_key_attnos(desc, key);

	for (int i = 0; i < key->ncolumns; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, atts[i]);
		TypeCacheEntry *tc;

		kh[i].attno = atts[i];
		tc = lookup_type_cache(att->atttypid, TYPECACHE_HASH_EXTENDED_PROC_FINFO);
		kh[i].use_proc = OidIsValid(tc->hash_extended_proc);
		if (kh[i].use_proc)
			fmgr_info_copy(&kh[i].proc, &tc->hash_extended_proc_finfo, CurrentMemoryContext);
		kh[i].collation = att->attcollation;
	}
	return kh;
}

/* Returns false when the key has a NULL, which the caller counts. */
static bool
hash_key(KeyHasher *kh, int nkeys, TupleDesc desc, Datum *values, bool *isnull,
		 bool nulls_hash, uint64 *result)
{
	uint64		h[2] = {0, 0};

	for (int i = 0; i < nkeys; i++)
	{
		int			a = kh[i].attno;

		if (isnull[a] && !nulls_hash)
			return false;
		if (kh[i].use_proc && !isnull[a])
			h[0] = hash_combine64(h[0],
								  DatumGetUInt64(FunctionCall2Coll(&kh[i].proc, kh[i].collation,
																   values[a], Int64GetDatum(0))));
		else
			hash_attribute(TupleDescAttr(desc, a), a + 1, values[a], isnull[a], h);
	}
	*result = h[0] ^ h[1];
	return true;
}

/*
 * Where the stage's columns are in desc (attribute numbers, 1-based): the
 * staged relation holds exactly them, a loaded table may hold more (columns
 * the table filled in itself: defaults, identities, generated columns).
 */
static AttrNumber *
source_attnums(Stage *stage, TupleDesc desc)
{
	AttrNumber *atts = palloc(sizeof(AttrNumber) * stage->ncolumns);

	for (int i = 0; i < stage->ncolumns; i++)
	{
		atts[i] = InvalidAttrNumber;
		for (int a = 0; a < desc->natts; a++)
			if (!TupleDescAttr(desc, a)->attisdropped &&
				strcmp(NameStr(TupleDescAttr(desc, a)->attname), stage->columns[i]) == 0)
				atts[i] = a + 1;
		if (atts[i] == InvalidAttrNumber)
			elog(ERROR, "column \"%s\" missing from staged rows", stage->columns[i]);
	}
	return atts;
}

/* Add one row's hash (columns atts of values, or all) to the multiset sum. */
static void
hash_row(TupleDesc desc, Datum *values, bool *isnull, const AttrNumber *atts,
		 int natts, uint64 *sum)
{
	uint64		h[2] = {0, 0};

	for (int i = 0; i < natts; i++)
	{
		int			a = (atts ? atts[i] : i + 1) - 1;

		hash_attribute(TupleDescAttr(desc, a), i + 1, values[a], isnull[a], h);
	}
	sum[0] += h[0];
	sum[1] += h[1];
}

/*
 * What running the source gathers (see run_source), row by row, as the rows
 * are staged (stage_receive).
 */
typedef struct BatchHashes
{
	TupleDesc	desc;			/* of the rows added */
	AttrNumber *atts;			/* the source's columns in desc, 1-based */
	int			natts;
	TargetKey  *key;			/* NULL: no key checks */
	KeyHasher  *kh;
	uint64		sum[2];
	int64		null_key_rows;
	KeyCheck   *keys;			/* the non-NULL keys' hashes */
} BatchHashes;

static void
hashes_begin(BatchHashes *bh, Stage *stage, TupleDesc desc, TargetKey *key)
{
	memset(bh, 0, sizeof(BatchHashes));
	bh->desc = desc;
	bh->atts = source_attnums(stage, desc);
	bh->natts = stage->ncolumns;
	bh->key = key;
	if (key == NULL)
		return;
	bh->kh = key_hashers(desc, key);
	bh->keys = keycheck_begin();
}

/*
 * Add one row (values and isnull as desc lays them out) to the fingerprint,
 * and then (hashes_add_key) to the key checks; allocations other than
 * key_hashes go to the caller's short-lived context.
 */
static void
hashes_add_row(BatchHashes *bh, Datum *values, bool *isnull)
{
	hash_row(bh->desc, values, isnull, bh->atts, bh->natts, bh->sum);
}

/* The row's key hash; false when there is no key, or a NULL in it. */
static bool
hashes_key(BatchHashes *bh, Datum *values, bool *isnull, uint64 *keyhash)
{
	return bh->key != NULL &&
		hash_key(bh->kh, bh->key->ncolumns, bh->desc, values, isnull,
				 bh->key->nulls_not_distinct, keyhash);
}

/* hashed and keyhash: what hashes_key said of the row */
static void
hashes_add_key(BatchHashes *bh, bool hashed, uint64 keyhash)
{
	if (bh->key == NULL)
		return;
	if (!hashed)
		bh->null_key_rows++;
	else
		keycheck_add(bh->keys, keyhash);
}

/* The key checks' part of what was gathered, for dedup.c. */
static void
hashes_end(BatchHashes *bh, Stage *stage)
{
	stage->null_key_rows = bh->null_key_rows;
	stage->key_check = bh->keys;
	stage->sum[0] = bh->sum[0];
	stage->sum[1] = bh->sum[1];
}

/*
 * How source column i (of type srcdesc's) becomes a value of target column
 * col: NULL when it already is one, else the coercion INSERT applies.
 */
static ExprState *
coercion_for(Form_pg_attribute src, TargetColumn *col)
{
	CaseTestExpr *placeholder;
	Node	   *expr;

	if (src->atttypid == col->typid && (src->atttypmod == col->typmod || col->typmod < 0))
		return NULL;
	placeholder = makeNode(CaseTestExpr);
	placeholder->typeId = src->atttypid;
	placeholder->typeMod = src->atttypmod;
	placeholder->collation = src->attcollation;
	expr = coerce_to_target_type(NULL, (Node *) placeholder, src->atttypid,
								 col->typid, col->typmod,
								 COERCION_ASSIGNMENT, COERCE_IMPLICIT_CAST, -1);
	if (expr == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("column \"%s\" is of type %s but the source's column is of type %s",
						col->name, format_type_be(col->typid), format_type_be(src->atttypid)),
				 errhint("Cast the column in the source query.")));
	if (expr == (Node *) placeholder)
		return NULL;
	return ExecInitExpr(expression_planner((Expr *) expr), NULL);
}

/*
 * The receiver that stages the source: each value is coerced to its target
 * column's type exactly as INSERT would (assignment coercion, typmod and
 * domain checks), and detoasted, so that the stage holds the values as they
 * would be stored and depends on no other table's TOAST data.
 */
typedef struct StageReceiver
{
	DestReceiver pub;
	TupleDesc	desc;			/* the rows staged */
	StagedRel  *rel;			/* where they go: a staged relation, */
	BulkLoad   *into;			/* or a table */
	Stage	   *stage;
	TargetInfo *target;
	int		   *source_att;		/* per staged column, its source column */
	ExprState **coerce;			/* per column; NULL when the types match */
	ExprContext *econtext;
	MemoryContext rowcxt;
	Datum	   *values;
	bool	   *nulls;
	BatchHashes hashes;
	Collapse   *collapse;		/* NULL: every row is staged */
	KeyOrder   *order;			/* watching the keys' order; NULL: not, or no
								 * longer (they were not ascending) */
	MemoryContext prevcxt;		/* the previous row's key */
	Datum	   *prev;
	bool	   *prevnull;
} StageReceiver;

/*
 * Whether the keys keep coming in strictly ascending order, as ORDER BY key
 * sorts them: a batch in key order has distinct keys, proved without
 * sorting their hashes, and can be walked beside a table read in key order
 * (snapshot_versions_none).  The watch ends at the first row out of order,
 * or with a NULL key.
 */
static void
stage_watch_order(StageReceiver *r, bool hashed, Datum *values, bool *isnull)
{
	KeyOrder   *ko = r->order;
	MemoryContext oldcxt;

	if (!hashed ||
		(r->stage->nrows > 0 && ordering_key_compare(ko, r->prev, r->prevnull, values, isnull) >= 0))
	{
		r->order = NULL;
		return;
	}
	MemoryContextReset(r->prevcxt);
	oldcxt = MemoryContextSwitchTo(r->prevcxt);
	for (int i = 0; i < ko->n; i++)
	{
		int			a = ko->atts[i];
		Form_pg_attribute att = TupleDescAttr(r->desc, a);

		r->prevnull[a] = isnull[a];
		r->prev[a] = isnull[a] ? (Datum) 0 : datumCopy(values[a], att->attbyval, att->attlen);
	}
	MemoryContextSwitchTo(oldcxt);
}

/* Stage one row, whose key hash (hashes_key) is known. */
static void
stage_put(StageReceiver *r, bool hashed, uint64 keyhash, Datum *values, bool *isnull)
{
	if (r->into)
		bulkload_put(r->into, values, isnull);
	else if (r->rel)			/* none: stage_fingerprint_source */
	{
		tuplestore_putvalues(r->rel->store, r->desc, values, isnull);
		r->rel->nrows++;
	}
	hashes_add_key(&r->hashes, hashed, keyhash);
}

/* Stage one row that collapse.c held or releases. */
static void
stage_held_row(void *arg, Datum *values, bool *isnull)
{
	StageReceiver *r = (StageReceiver *) arg;
	uint64		keyhash = 0;
	bool		hashed = hashes_key(&r->hashes, values, isnull, &keyhash);

	stage_put(r, hashed, keyhash, values, isnull);
}

static bool
stage_receive(TupleTableSlot *slot, DestReceiver *self)
{
	StageReceiver *r = (StageReceiver *) self;
	TupleDesc	desc = r->desc;
	MemoryContext oldcxt = MemoryContextSwitchTo(r->rowcxt);
	uint64		keyhash = 0;
	bool		hashed;

	slot_getallattrs(slot);
	for (int i = 0; i < desc->natts; i++)
	{
		Datum		value = slot->tts_values[r->source_att[i]];
		bool		isnull = slot->tts_isnull[r->source_att[i]];

		if (r->coerce[i])
		{
			r->econtext->caseValue_datum = value;
			r->econtext->caseValue_isNull = isnull;
			value = ExecEvalExpr(r->coerce[i], r->econtext, &isnull);
		}
		if (!isnull && TupleDescAttr(desc, i)->attlen == -1 &&
			VARATT_IS_EXTERNAL(DatumGetPointer(value)))
			value = PointerGetDatum(detoast_external_attr((struct varlena *) DatumGetPointer(value)));
		r->values[i] = value;
		r->nulls[i] = isnull;
	}
	if (r->stage->fingerprint)
		hashes_add_row(&r->hashes, r->values, r->nulls);
	hashed = hashes_key(&r->hashes, r->values, r->nulls, &keyhash);
	if (r->order)
		stage_watch_order(r, hashed, r->values, r->nulls);
	if (!hashed || r->collapse == NULL ||
		!collapse_row(r->collapse, keyhash, r->values, r->nulls))
		stage_put(r, hashed, keyhash, r->values, r->nulls);
	MemoryContextSwitchTo(oldcxt);
	MemoryContextReset(r->rowcxt);
	ResetExprContext(r->econtext);
	if (++r->stage->nrows % 1024 == 0)
		progress_rows(r->stage->nrows);
	return true;
}

/*
 * Match the source's columns, as the plan returns them now (a replan since
 * stage_plan looked may have changed them), to the staged ones by name, and
 * prepare the coercions.
 */
static void
stage_receiver_startup(DestReceiver *self, int operation, TupleDesc typeinfo)
{
	StageReceiver *r = (StageReceiver *) self;

	for (int i = 0; i < r->stage->ncolumns; i++)
	{
		const char *name = r->stage->columns[i];

		r->source_att[i] = -1;
		for (int a = 0; a < typeinfo->natts; a++)
			if (strcmp(NameStr(TupleDescAttr(typeinfo, a)->attname), name) == 0)
				r->source_att[i] = a;
		if (r->source_att[i] < 0)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_COLUMN),
					 errmsg("column \"%s\" is missing from the source", name),
					 errdetail("An object the source reads changed while the batch was being staged."),
					 errhint("Run the call again.")));
		r->coerce[i] = coercion_for(TupleDescAttr(typeinfo, r->source_att[i]),
									target_column(r->target, name));
	}
}

/*
 * Run the source, once, in the caller's statement snapshot (read-only
 * execution uses the active snapshot as it is): the source sees what the
 * calling statement sees.  Its rows, coerced to the target's column types,
 * go into a staged relation, or with into valid, into that table
 * (bulkload.c).  The fingerprint and, with key, the key checks of dedup.c
 * (the number of rows with a NULL key, and a 64-bit hash of every key,
 * kept while they fit in work_mem) are gathered on the way.  With collapse
 * (and key), rows that cannot win their key are counted but not staged
 * (collapse.c): exact copies, and with order_by (NULL: none) the rows it
 * puts after another of their key.
 */
static void
run_source(Stage *stage, TargetInfo *target, TargetKey *key, bool collapse,
		   const char *order_by, Oid into, bool discard)
{
	TupleDesc	desc = CreateTemplateTupleDesc(stage->ncolumns);
	StageReceiver r;
	SPIExecuteOptions options;
	int			rc;
	ErrorContextCallback context;

	for (int i = 0; i < stage->ncolumns; i++)
	{
		TargetColumn *col = target_column(target, stage->columns[i]);

		TupleDescInitEntry(desc, i + 1, col->name, col->typid, col->typmod, 0);
		TupleDescInitEntryCollation(desc, i + 1, col->collation);
	}
	TupleDescFinalize(desc);

	memset(&r, 0, sizeof(r));
	r.pub.receiveSlot = stage_receive;
	r.pub.rStartup = stage_receiver_startup;
	r.pub.rShutdown = receiver_shutdown;
	r.pub.rDestroy = receiver_destroy;
	r.pub.mydest = DestTuplestore;
	r.desc = desc;
	if (OidIsValid(into))
		r.into = bulkload_begin(into, target->relid, desc);
	else if (!discard)
		r.rel = stage_register("stage", desc);
	r.stage = stage;
	r.target = target;
	r.source_att = palloc(sizeof(int) * stage->ncolumns);
	r.coerce = palloc0(sizeof(ExprState *) * stage->ncolumns);
	r.econtext = CreateStandaloneExprContext();
	r.rowcxt = AllocSetContextCreate(CurrentMemoryContext, "idem_etl staging row",
									 ALLOCSET_DEFAULT_SIZES);
	r.values = palloc(sizeof(Datum) * stage->ncolumns);
	r.nulls = palloc(sizeof(bool) * stage->ncolumns);
	hashes_begin(&r.hashes, stage, desc, key);
	if (collapse && key)
		r.collapse = collapse_begin(desc, key->ncolumns, stage_key_attnos(desc, key),
									order_by, target_alias(target, "s"),
									stage_held_row, &r);
	else if (key && stage->key_order && !OidIsValid(into))
	{
		r.order = ordering_key_prepare(desc, key->ncolumns, stage_key_attnos(desc, key));
		r.prevcxt = AllocSetContextCreate(CurrentMemoryContext, "idem_etl staging key",
										  ALLOCSET_SMALL_SIZES);
		r.prev = palloc0(sizeof(Datum) * stage->ncolumns);
		r.prevnull = palloc0(sizeof(bool) * stage->ncolumns);
	}
	stage->nrows = 0;

	memset(&options, 0, sizeof(options));
	options.read_only = true;
	options.dest = (DestReceiver *) &r;
	args_context_push(&context, "source");
	rc = SPI_execute_plan_extended(stage->plan, &options);
	args_context_pop(&context);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "loading the source failed: %s", SPI_result_code_string(rc));
	FreeExprContext(r.econtext, true);
	MemoryContextDelete(r.rowcxt);
	if (r.collapse)
		collapse_end(r.collapse);
	stage->key_sorted = r.order != NULL;
	if (r.prevcxt)
		MemoryContextDelete(r.prevcxt);

	hashes_end(&r.hashes, stage);
	if (r.into || discard)
	{
		if (r.into)
			bulkload_end(r.into);
		stage->staged = NULL;
		stage->name = NULL;
		stage->ncollapsed = 0;
	}
	else
	{
		stage_publish(r.rel);
		stage->staged = r.rel;
		stage->name = r.rel->name;
		stage->ncollapsed = stage->nrows - r.rel->nrows;
	}
}

/* The source staged in a tuplestore (see run_source). */
void
stage_load(Stage *stage, TargetInfo *target, TargetKey *key, bool collapse,
		   const char *order_by)
{
	run_source(stage, target, key, collapse, order_by, InvalidOid, false);
}

/*
 * The source loaded into table into, created in this transaction for a
 * partition of target and still without indexes (see run_source).
 */
void
stage_load_into(Stage *stage, TargetInfo *target, Oid into)
{
	run_source(stage, target, NULL, false, NULL, into, false);
}

/*
 * Only the batch's number of rows and fingerprint: the source runs and its
 * rows are hashed, not kept.  A rerun that the ledger may skip is told so
 * without writing its rows anywhere (and then no WAL); the caller runs the
 * source again to load it when it is not skipped.
 */
void
stage_fingerprint_source(Stage *stage, TargetInfo *target)
{
	run_source(stage, target, NULL, false, NULL, InvalidOid, true);
}

/*
 * The fingerprint of nrows rows of stage whose row hashes add up to sum, and
 * of the options that shape the result; '' when stage does not fingerprint
 * its rows.
 */
char *
stage_fingerprint(Stage *stage, const uint64 *sum, int64 nrows, const char *options)
{
	uint64		opts;

	if (!stage->fingerprint)
		return "";
	opts = hash_bytes_extended((const unsigned char *) options, strlen(options), (uint64) nrows);
	return psprintf("%016llx%016llx",
					(unsigned long long) hash_combine64(sum[0], opts),
					(unsigned long long) hash_combine64(sum[1], opts ^ UINT64CONST(0xFF51AFD7ED558CCD)));
}

/*
 * The fingerprint of the batch, gathered while the source ran (stage_load,
 * stage_load_into), with no second pass over the rows: an order-independent
 * digest of the rows the source produced plus the options that shape the
 * result.  Each row's binary image is hashed into two 64-bit lanes, the
 * lanes are summed over rows (a multiset hash), then mixed with the
 * options.  Only the source's columns count, as coerced to the target's
 * types: what a loaded table fills in itself (a DEFAULT now(), an
 * identity) is not part of the input, so a rerun of the same rows is
 * recognised.  Binary images, like the *= operator used for change
 * detection, need no equality operator, so json, point and xml work.
 */
char *
stage_batch_fingerprint(Stage *stage, const char *options)
{
	return stage_fingerprint(stage, stage->sum, stage->nrows, options);
}

/*
 * True when the key hashes gathered while staging prove every key of the
 * batch distinct (dedup.c; keycheck.c).  Equal hashes may be a real
 * duplicate or a collision: the caller then looks at the rows.  Once per
 * stage.
 */
bool
stage_keys_distinct(Stage *stage)
{
	bool		distinct;

	if (stage->key_check == NULL)
		return false;
	/* keys in strictly ascending order are distinct: no need to sort */
	distinct = stage->key_sorted ||
	/* not every staged row hashed: NULL keys under NULLS NOT DISTINCT */
		(keycheck_count(stage->key_check) == stage->nrows - stage->ncollapsed &&
		 keycheck_distinct(stage->key_check));
	keycheck_end(stage->key_check);
	stage->key_check = NULL;
	return distinct;
}

/*
 * Drop the staged relation and what the key check still holds (its
 * temporary files, when a skipped run never checked the keys).
 */
void
stage_end(Stage *stage)
{
	if (stage->key_check)
	{
		keycheck_end(stage->key_check);
		stage->key_check = NULL;
	}
	if (stage->staged)
		stage_drop(stage->staged);
}

/*
 * The runs of a staged relation sorted on column "column" (attribute
 * number att) with the ordering whose comparison function is cmp: one run
 * per distinct value (equal by cmp), with its first value as its type
 * prints it, its number of rows and, with hash, the sum of its rows' hashes
 * (see stage_batch_fingerprint: a run's fingerprint is stage_fingerprint of
 * that sum).  One pass, in the order of the values.
 */
StageRun *
stage_runs(StagedRel *sorted, bool hash, AttrNumber att, FmgrInfo *cmp, Oid collation,
		   int *nruns)
{
	TupleDesc	desc = sorted->desc;
	Form_pg_attribute keyatt = TupleDescAttr(desc, att - 1);
	TupleTableSlot *slot = MakeSingleTupleTableSlot(desc, &TTSOpsMinimalTuple);
	MemoryContext rowcxt = AllocSetContextCreate(CurrentMemoryContext, "idem_etl stage runs",
												 ALLOCSET_DEFAULT_SIZES);
	MemoryContext outer PG_USED_FOR_ASSERTS_ONLY = CurrentMemoryContext;
	int			readptr = tuplestore_alloc_read_pointer(sorted->store, EXEC_FLAG_REWIND);
	int			allocated = 64;
	StageRun   *runs = palloc0(sizeof(StageRun) * allocated);
	StageRun   *cur = NULL;
	Oid			outfunc;
	bool		isvarlena;

	getTypeOutputInfo(keyatt->atttypid, &outfunc, &isvarlena);
	*nruns = 0;
	tuplestore_select_read_pointer(sorted->store, readptr);
	tuplestore_rescan(sorted->store);
	while (tuplestore_gettupleslot(sorted->store, true, false, slot))
	{
		MemoryContext oldcxt;
		Datum		v;
		bool		isnull;

		CHECK_FOR_INTERRUPTS();
		v = slot_getattr(slot, att, &isnull);
		if (isnull)
			elog(ERROR, "NULL in the column that splits the batch");
		if (cur == NULL ||
			DatumGetInt32(FunctionCall2Coll(cmp, collation, cur->value, v)) != 0)
		{
			if (*nruns == allocated)
			{
				allocated *= 2;
				runs = repalloc(runs, sizeof(StageRun) * allocated);
			}
			cur = &runs[(*nruns)++];
			memset(cur, 0, sizeof(StageRun));
			cur->value = datumCopy(v, keyatt->attbyval, keyatt->attlen);
			cur->text = OidOutputFunctionCall(outfunc, v);
		}
		cur->nrows++;
		if (!hash)
			continue;
		oldcxt = MemoryContextSwitchTo(rowcxt);
		slot_getallattrs(slot);
		hash_row(desc, slot->tts_values, slot->tts_isnull, NULL, desc->natts, cur->sum);
		MemoryContextSwitchTo(oldcxt);
		MemoryContextReset(rowcxt);
	}
	Assert(CurrentMemoryContext == outer);
	ExecDropSingleTupleTableSlot(slot);
	tuplestore_select_read_pointer(sorted->store, 0);
	MemoryContextDelete(rowcxt);
	return runs;
}

/*
 * The rows of a staged relation, regrouped: rows of run i (see stage_runs;
 * the relation is in run order) go to group group_of[i], groups numbered
 * 0, 1, ... in the order they are to be read.  Returns a reader that hands
 * out one group at a time (stage_next_group).  When every group's runs are
 * adjacent and in group order (always so for RANGE partitions) the rows are
 * read as they are; otherwise they are sorted by group once.
 */
StageGroups *
stage_groups(StagedRel *sorted, StageRun *runs, int nruns, const int *group_of,
			 int ngroups)
{
	StageGroups *g = palloc0(sizeof(StageGroups));
	bool		in_order = true;

	g->from = sorted;
	g->ngroups = ngroups;
	g->rows = palloc0(sizeof(int64) * ngroups);
	for (int i = 0; i < nruns; i++)
	{
		g->rows[group_of[i]] += runs[i].nrows;
		if (i > 0 && group_of[i] != group_of[i - 1] && group_of[i] != group_of[i - 1] + 1)
			in_order = false;
	}
	if (nruns > 0 && group_of[0] != 0)
		in_order = false;

	if (!in_order)
	{
		/* sort the rows by group, the group number an extra last column */
		TupleDesc	desc = sorted->desc;
		TupleDesc	sortdesc = CreateTemplateTupleDesc(desc->natts + 1);
		TupleTableSlot *in = MakeSingleTupleTableSlot(desc, &TTSOpsMinimalTuple);
		TupleTableSlot *out;
		AttrNumber	sortcol = desc->natts + 1;
		Oid			sortop = Int4LessOperator;
		Oid			coll = InvalidOid;
		bool		nullsfirst = false;
		int			run = 0;
		int64		left;

		for (int a = 0; a < desc->natts; a++)
			TupleDescCopyEntry(sortdesc, a + 1, desc, a + 1);
		TupleDescInitEntry(sortdesc, sortcol, "idem_etl_group", INT4OID, -1, 0);
		TupleDescFinalize(sortdesc);
		out = MakeSingleTupleTableSlot(sortdesc, &TTSOpsVirtual);
		g->sort = tuplesort_begin_heap(sortdesc, 1, &sortcol, &sortop, &coll, &nullsfirst,
									   work_mem, NULL, TUPLESORT_NONE);
		left = nruns > 0 ? runs[0].nrows : 0;
		tuplestore_rescan(sorted->store);
		while (tuplestore_gettupleslot(sorted->store, true, false, in))
		{
			CHECK_FOR_INTERRUPTS();
			while (left == 0)
				left = runs[++run].nrows;
			left--;
			slot_getallattrs(in);
			ExecClearTuple(out);
			memcpy(out->tts_values, in->tts_values, sizeof(Datum) * desc->natts);
			memcpy(out->tts_isnull, in->tts_isnull, sizeof(bool) * desc->natts);
			out->tts_values[desc->natts] = Int32GetDatum(group_of[run]);
			out->tts_isnull[desc->natts] = false;
			ExecStoreVirtualTuple(out);
			tuplesort_puttupleslot(g->sort, out);
		}
		tuplesort_performsort(g->sort);
		ExecDropSingleTupleTableSlot(in);
		g->sortslot = MakeSingleTupleTableSlot(sortdesc, &TTSOpsMinimalTuple);
		ExecDropSingleTupleTableSlot(out);
	}
	else
		tuplestore_rescan(sorted->store);
	g->slot = MakeSingleTupleTableSlot(sorted->desc, &TTSOpsMinimalTuple);
	return g;
}

/*
 * The rows of the next group, loaded into table into, a new partition of
 * target (bulkload.c), or with into invalid read past (a skipped group).
 * Groups come in order.  Returns the number of rows.
 */
int64
stage_next_group(StageGroups *g, TargetInfo *target, Oid into)
{
	int64		n = g->rows[g->next++];
	BulkLoad   *bl = OidIsValid(into) ? bulkload_begin(into, target->relid, g->from->desc) : NULL;

	for (int64 i = 0; i < n; i++)
	{
		TupleTableSlot *slot = g->sort ? g->sortslot : g->slot;

		CHECK_FOR_INTERRUPTS();
		if (g->sort ? !tuplesort_gettupleslot(g->sort, true, false, slot, NULL) :
			!tuplestore_gettupleslot(g->from->store, true, false, slot))
			elog(ERROR, "staged rows ended early");
		if (bl == NULL)
			continue;
		slot_getallattrs(slot);
		bulkload_put(bl, slot->tts_values, slot->tts_isnull);
	}
	if (bl)
		bulkload_end(bl);
	return n;
}

/*
 * The rows of a query over staged relations (sql, with columns named and
 * typed as target's), loaded into table into, a new partition of target
 * (bulkload.c), a thousand rows at a time through a cursor.  Returns the
 * number of rows.
 */
int64
stage_query_into(const char *sql, TargetInfo *target, Oid into)
{
	SPIPlanPtr	plan = sql_prepare(sql, 0, NULL);
	Portal		portal = SPI_cursor_open(NULL, plan, NULL, NULL, true);
	TupleDesc	desc = CreateTupleDescCopy(portal->tupDesc);
	BulkLoad   *bl = bulkload_begin(into, target->relid, desc);
	Datum	   *values = palloc(sizeof(Datum) * Max(desc->natts, 1));
	bool	   *isnull = palloc(sizeof(bool) * Max(desc->natts, 1));
	int64		n = 0;

	for (;;)
	{
		SPI_cursor_fetch(portal, true, 1000);
		if (SPI_processed == 0)
			break;
		for (uint64 i = 0; i < SPI_processed; i++)
		{
			heap_deform_tuple(SPI_tuptable->vals[i], desc, values, isnull);
			bulkload_put(bl, values, isnull);
		}
		n += SPI_processed;
		SPI_freetuptable(SPI_tuptable);
	}
	bulkload_end(bl);
	SPI_cursor_close(portal);
	SPI_freeplan(plan);
	return n;
}

/*
 * The rows of the runs of sorted (see stage_runs) for which take[] is true,
 * as a staged relation of their own (registered under a name made of
 * purpose), in one pass.
 */
StagedRel *
stage_select_runs(StagedRel *sorted, StageRun *runs, int nruns, const bool *take,
				  const char *purpose)
{
	StagedRel  *rel = stage_register(purpose, sorted->desc);
	TupleTableSlot *slot = MakeSingleTupleTableSlot(sorted->desc, &TTSOpsMinimalTuple);

	tuplestore_rescan(sorted->store);
	for (int i = 0; i < nruns; i++)
	{
		if (!take[i])
		{
			if (!tuplestore_skiptuples(sorted->store, runs[i].nrows, true))
				elog(ERROR, "staged rows ended early");
			continue;
		}
		for (int64 j = 0; j < runs[i].nrows; j++)
		{
			CHECK_FOR_INTERRUPTS();
			if (!tuplestore_gettupleslot(sorted->store, true, false, slot))
				elog(ERROR, "staged rows ended early");
			tuplestore_puttupleslot(rel->store, slot);
			rel->nrows++;
		}
	}
	ExecDropSingleTupleTableSlot(slot);
	stage_publish(rel);
	return rel;
}

void
stage_groups_end(StageGroups *g)
{
	if (g->sort)
	{
		ExecDropSingleTupleTableSlot(g->sortslot);
		tuplesort_end(g->sort);
	}
	ExecDropSingleTupleTableSlot(g->slot);
}
