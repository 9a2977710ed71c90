/*
 * snapshot_versions.c
 *		The versions a snapshot opens: the staged batch joined to each key's
 *		current version, read once, and the rows that change something kept
 *		in a staged relation of their own.
 *
 * One query reads the batch beside each key's current version (and, with
 * hard_deletes => 'invalidate', the end of a deleted key's history); a
 * filter in C (stage_query_filtered) walks its rows, per key in the order of
 * their validity when a key has several, and keeps a row when it opens a
 * version: its tracked columns differ, byte for byte, NULLs included, from
 * the version before it.  On the way it collapses exact duplicates, refuses
 * differing rows dated alike (21000), and drops late rows (older than the
 * key's current version), which it counts.
 *
 * A batch that came in key order (stage.c watches) is first walked beside
 * the current versions read in key order (snapshot_versions_none): when
 * every row meets its key's current version unchanged, nothing opens a
 * version and the query is not needed.
 */
#include "postgres.h"

#include "executor/executor.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "nodes/plannodes.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/plancache.h"

#include "snapshot/snapshot.h"
#include "stage/compare.h"
#include "stage/ordering.h"
#include "util/sql.h"

/* The columns the query returns after the source's n, from n on. */
enum
{
	V_FROM,						/* the version's valid_from (staged) */
	V_CUR,						/* ctid of the key's current version (staged) */
	V_O,						/* the row's date: updated_at or valid_at */
	V_FLOOR,					/* where the key's history ends */
	V_LIVE,						/* the key has a current version not deleted */
	V_SAME,						/* its tracked columns equal the row's */
	V_LAST_CLAMPED,				/* of a deleted key's rows dated before its
								 * return, the latest date */
	V_KNOWN,					/* a row dated before the current version is
								 * one of the key's stored versions */
	V_NCOLS
};

typedef struct VersionFilter
{
	SnapshotSpec *s;
	SnapshotCounts *counts;
	int			n;				/* the source's columns */
	TupleDesc	desc;
	KeyOrder   *key;
	SortSupport vcmp;			/* of the validity type */
	int		   *tracked;		/* attribute numbers, 0-based */
	MemoryContext prevcxt;		/* the previous row of the query */
	MemoryContext keptcxt;		/* the previous row kept, of the same key */
	Datum	   *prev;
	bool	   *prevnull;
	bool		have_prev;
	Datum	   *kept;
	bool	   *keptnull;
	bool		kept_any;		/* a row of this key was kept */
	int64		seen;			/* rows the filter looked at */
	MemoryContext cxt;			/* the call's: the filter runs in a context
								 * reset after each row */
} VersionFilter;

static void
copy_row(VersionFilter *f, MemoryContext cxt, Datum *to, bool *tonull,
		 Datum *values, bool *isnull)
{
	MemoryContext old;

	MemoryContextReset(cxt);
	old = MemoryContextSwitchTo(cxt);
	for (int i = 0; i < f->desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(f->desc, i);

		tonull[i] = isnull[i];
		to[i] = isnull[i] ? (Datum) 0 : datumCopy(values[i], att->attbyval, att->attlen);
	}
	MemoryContextSwitchTo(old);
}

static int
compare_dates(VersionFilter *f, Datum *values, bool *isnull, int a, int b)
{
	return ApplySortComparator(values[f->n + a], isnull[f->n + a],
							   values[f->n + b], isnull[f->n + b], f->vcmp);
}

/* "(k1, k2)=(v1, v2)", as PostgreSQL prints a key in its messages */
static char *
key_text(VersionFilter *f, Datum *values, bool *isnull)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfo(&buf, "(%s)=(", target_key_list(f->s->key));
	for (int i = 0; i < f->key->n; i++)
	{
		int			a = f->key->atts[i];
		Oid			out;
		bool		varlena;

		getTypeOutputInfo(TupleDescAttr(f->desc, a)->atttypid, &out, &varlena);
		appendStringInfo(&buf, "%s%s", i ? ", " : "",
						 isnull[a] ? "null" : OidOutputFunctionCall(out, values[a]));
	}
	appendStringInfoChar(&buf, ')');
	return buf.data;
}

/* What the filter needs, from the query's first row (desc: its type). */
static void
filter_begin(VersionFilter *f, TupleDesc desc)
{
	SnapshotSpec *s = f->s;
	int			natts = desc->natts;
	MemoryContext old = MemoryContextSwitchTo(f->cxt);
	int		   *oatt = palloc(sizeof(int));

	Assert(natts == f->n + V_NCOLS);
	f->desc = desc;
	f->key = ordering_key_prepare(desc, s->key->ncolumns, stage_key_attnos(desc, s->key));
	*oatt = f->n + V_O;
	f->vcmp = ordering_key_prepare(desc, 1, oatt)->ssup;
	f->tracked = palloc(sizeof(int) * Max(s->ntracked, 1));
	for (int i = 0; i < s->ntracked; i++)
		for (int a = 0; a < f->n; a++)
			if (strcmp(NameStr(TupleDescAttr(desc, a)->attname), s->tracked[i]) == 0)
				f->tracked[i] = a;
	f->prevcxt = AllocSetContextCreate(CurrentMemoryContext, "idem_etl snapshot row",
									   ALLOCSET_DEFAULT_SIZES);
	f->keptcxt = AllocSetContextCreate(CurrentMemoryContext, "idem_etl snapshot version",
									   ALLOCSET_DEFAULT_SIZES);
	f->prev = palloc(sizeof(Datum) * natts);
	f->prevnull = palloc(sizeof(bool) * natts);
	f->kept = palloc(sizeof(Datum) * natts);
	f->keptnull = palloc(sizeof(bool) * natts);
	MemoryContextSwitchTo(old);
}

static bool
keep_version(TupleTableSlot *slot, void *arg)
{
	VersionFilter *f = (VersionFilter *) arg;
	SnapshotCounts *c = f->counts;
	Datum	   *v = slot->tts_values;
	bool	   *nl = slot->tts_isnull;
	int			n = f->n;
	bool		same_key;
	bool		live;
	bool		changed;

	if (f->desc == NULL)
		filter_begin(f, slot->tts_tupleDescriptor);
	f->seen++;

	if (nl[n + V_O])
		snapshot_refuse_null_date(f->s, key_text(f, v, nl));
	/* with one row per key, no row is compared with another of the batch */
	same_key = !f->s->keys_distinct && f->have_prev &&
		ordering_key_equal(f->key, v, nl, f->prev, f->prevnull);
	if (same_key &&
		ApplySortComparator(v[n + V_O], false, f->prev[n + V_O], false, f->vcmp) == 0)
	{
		if (compare_rows_same_image(f->desc, n, NULL, v, nl, f->prev, f->prevnull))
			return false;		/* an exact duplicate */
		ereport(ERROR,
				(errcode(ERRCODE_CARDINALITY_VIOLATION),
				 errmsg("the batch for \"%s\" has differing rows for key %s dated alike",
						f->s->target->relname, key_text(f, v, nl)),
				 errdetail("Two versions of one key cannot start at the same time."),
				 errhint(f->s->updated_at ?
						 "Fix the source so that each key has one row per updated_at value." :
						 "Without updated_at every row is dated valid_at: pass one row per key.")));
	}
	if (!same_key)
		f->kept_any = false;
	if (!f->s->keys_distinct)
	{
		copy_row(f, f->prevcxt, f->prev, f->prevnull, v, nl);
		f->have_prev = true;
	}

	live = DatumGetBool(v[n + V_LIVE]);
	if ((live && compare_dates(f, v, nl, V_O, V_FLOOR) < 0) ||
		(!live && !nl[n + V_FLOOR] && !nl[n + V_LAST_CLAMPED] &&
		 compare_dates(f, v, nl, V_O, V_LAST_CLAMPED) < 0))
	{
		/* a batch holding a key's past, applied again, is not late */
		if (!nl[n + V_KNOWN] && DatumGetBool(v[n + V_KNOWN]))
			c->unchanged++;
		else
			c->late++;
		return false;
	}

	if (f->kept_any)
		changed = !compare_rows_same_image(f->desc, f->s->ntracked, f->tracked,
										   v, nl, f->kept, f->keptnull);
	else
		changed = !live || !DatumGetBool(v[n + V_SAME]);
	if (!changed)
	{
		c->unchanged++;
		return false;
	}
	if (!f->kept_any && !nl[n + V_CUR])
	{
		if (compare_dates(f, v, nl, V_FROM, V_FLOOR) == 0)
			c->corrected++;
		else
			c->closed++;
	}
	f->kept_any = true;
	if (!f->s->keys_distinct)
		copy_row(f, f->keptcxt, f->kept, f->keptnull, v, nl);
	c->inserted++;
	return true;
}

/* prefix, then "the tracked columns of alias equal b's" (nothing if none) */
static void
append_same_image(StringInfo sql, SnapshotSpec *s, const char *alias, const char *prefix)
{
	if (s->ntracked == 0)
		return;
	appendStringInfo(sql, "%sidem_etl.same_image(", prefix);
	for (int i = 0; i < s->ntracked; i++)
	{
		const char *col = quote_identifier(s->tracked[i]);

		appendStringInfo(sql, "%s%s.%s, b.%s", i ? ", " : "", alias, col, col);
	}
	appendStringInfoChar(sql, ')');
}

/* The key columns, and then the row's date: the order of a key's history. */
static void
append_key_order(StringInfo sql, SnapshotSpec *s, const char *date)
{
	sql_append_columns(sql, "b", s->key->names, s->key->ncolumns);
	appendStringInfo(sql, ", %s", date);
}

/*
 * The query: every row of the batch, with its key's current version (c)
 * and, with hard_deletes => 'invalidate', the end of a key's history when it
 * has no current version (h).  A deleted key that returns is dated no
 * earlier than its deletion, nor than valid_at.
 */
static char *
versions_query(SnapshotSpec *s)
{
	StringInfoData sql;
	const char *vf = quote_identifier(s->valid_from);
	const char *date;
	char	   *floor;
	char	   *back;			/* when a deleted key comes back */
	StringInfoData live;

	if (s->updated_at)
		date = psprintf("b.%s", quote_identifier(s->updated_at));
	else
		date = s->valid_at;
	initStringInfo(&live);
	appendStringInfoString(&live, "(c.ctid IS NOT NULL");
	if (s->is_deleted)
		appendStringInfo(&live, " AND c.%s IS NOT TRUE", quote_identifier(s->is_deleted));
	appendStringInfoChar(&live, ')');
	if (s->deletes == SNAPSHOT_DELETES_INVALIDATE)
		floor = psprintf("COALESCE(c.%s, h.idem_gone)", vf);
	else
		floor = psprintf("c.%s", vf);
	back = s->valid_at ? psprintf("GREATEST(%s, %s)", floor, s->valid_at) : floor;

	initStringInfo(&sql);
	appendStringInfoString(&sql, "SELECT ");
	sql_append_columns(&sql, "b", s->stage->columns, s->stage->ncolumns);
	appendStringInfo(&sql, ", CASE WHEN %s OR %s IS NULL THEN %s ELSE GREATEST(%s, %s) END AS idem_from,"
					 " c.ctid AS idem_cur, %s, %s, %s,",
					 live.data, floor, date, date, back, date, floor, live.data);
	appendStringInfoString(&sql, " CASE WHEN c.ctid IS NOT NULL THEN true");
	append_same_image(&sql, s, "c", " AND ");
	appendStringInfoString(&sql, " END,");
	if (s->keys_distinct)
		appendStringInfo(&sql, " NULL%s", s->vcast);
	else
	{
		appendStringInfo(&sql, " pg_catalog.max(CASE WHEN NOT %s AND %s IS NOT NULL AND %s %s %s THEN %s END) OVER (PARTITION BY ",
						 live.data, floor, date, s->vle, back, date);
		sql_append_columns(&sql, "b", s->key->names, s->key->ncolumns);
		appendStringInfoChar(&sql, ')');
	}
	appendStringInfo(&sql, ", CASE WHEN %s AND NOT %s %s %s THEN EXISTS (SELECT FROM ONLY %s k WHERE ",
					 live.data, floor, s->vle, date, s->target->qualname);
	sql_append_key_match(&sql, "k", "b", s->key->names, s->key->eqops, s->key->ncolumns,
						 false);
	appendStringInfo(&sql, " AND k.%s %s %s", vf, s->veq, date);
	append_same_image(&sql, s, "k", " AND ");
	appendStringInfoString(&sql, ") END");
	appendStringInfo(&sql, " FROM %s b LEFT JOIN ONLY %s c ON ", s->stage->name,
					 s->target->qualname);
	sql_append_key_match(&sql, "c", "b", s->key->names, s->key->eqops, s->key->ncolumns,
						 false);
	appendStringInfoString(&sql, " AND ");
	snapshot_append_current(&sql, s, "c", false);
	if (s->deletes == SNAPSHOT_DELETES_INVALIDATE)
	{
		const char *vt = quote_identifier(s->valid_to);

		appendStringInfo(&sql, " LEFT JOIN LATERAL (SELECT h.%s AS idem_gone FROM ONLY %s h"
						 " WHERE c.ctid IS NULL AND ", vt, s->target->qualname);
		sql_append_key_match(&sql, "h", "b", s->key->names, s->key->eqops,
							 s->key->ncolumns, false);
		appendStringInfo(&sql, " ORDER BY h.%s DESC NULLS LAST LIMIT 1) h ON true", vt);
	}
	if (!s->keys_distinct)
	{
		appendStringInfoString(&sql, " ORDER BY ");
		append_key_order(&sql, s, date);
	}
	else
	{
		/*
		 * One row per key: a row equal to its key's current version, and not
		 * older, changes nothing and needs no look from the filter (an
		 * identical rerun is all such rows); snapshot_versions counts them.
		 */
		appendStringInfo(&sql, " WHERE (%s AND c.%s %s %s", live.data, vf, s->vle, date);
		append_same_image(&sql, s, "c", " AND ");
		appendStringInfoString(&sql, ") IS NOT TRUE");
	}
	return sql.data;
}

/*
 * The rows of the batch that open a version, staged with two more columns:
 * idem_from, the version's valid_from, and idem_cur, the tuple identifier of
 * the key's current version (NULL: none), which the first of them closes or,
 * dated alike, replaces.  counts gets what the rows do.
 */
StagedRel *
snapshot_versions(SnapshotSpec *s, SnapshotCounts *counts)
{
	char	   *sql = versions_query(s);
	VersionFilter f;
	StagedRel  *rel;

	memset(&f, 0, sizeof(f));
	f.s = s;
	f.counts = counts;
	f.n = s->stage->ncolumns;
	f.cxt = CurrentMemoryContext;
	rel = stage_query_filtered(sql, "snapshot", f.n + 2, keep_version, &f);
	if (s->keys_distinct)
		counts->unchanged += s->stage->nrows - f.seen;
	if (f.desc != NULL)
	{
		MemoryContextDelete(f.prevcxt);
		MemoryContextDelete(f.keptcxt);
	}
	return rel;
}

/*
 * The walk of snapshot_versions_none: the current versions arrive in key
 * order, as the receiver of their query; the batch's rows, in key order
 * too, are read from the stage beside them.
 */
typedef struct SameWalk
{
	DestReceiver pub;
	SnapshotSpec *s;
	Tuplestorestate *store;
	MemoryContext cxt;			/* outlives the query: where the row read from
								 * a file is, until the next */
	TupleTableSlot *row;		/* the batch's row in hand */
	bool		more;			/* row holds one */
	bool		met;			/* row has met its current version */
	int			n;				/* the batch's columns; the query's come
								 * first, then valid_from and live */
	KeyOrder   *key;
	int		   *tracked;		/* attribute numbers, 0-based */
	int			updated_at;		/* the batch's attribute, or -1 (valid_at) */
	SortSupport vcmp;			/* with updated_at: its ordering */
	bool		same;			/* nothing differs so far */
} SameWalk;

static void
walk_next_row(SameWalk *w)
{
	MemoryContext old = MemoryContextSwitchTo(w->cxt);

	w->more = tuplestore_gettupleslot(w->store, true, false, w->row);
	if (w->more)
		slot_getallattrs(w->row);
	w->met = false;
	MemoryContextSwitchTo(old);
}

/* Is current version v (values, isnull) the row in hand, unchanged? */
static bool
walk_unchanged(SameWalk *w, Datum *v, bool *nl)
{
	Datum	   *b = w->row->tts_values;
	bool	   *bn = w->row->tts_isnull;

	/* live; dated no later than the row (valid_at: checked by the query) */
	if (nl[w->n + 1] || !DatumGetBool(v[w->n + 1]))
		return false;
	if (w->updated_at >= 0 &&
		(nl[w->n] || bn[w->updated_at] ||
		 ApplySortComparator(v[w->n], false, b[w->updated_at], false, w->vcmp) > 0))
		return false;
	return compare_rows_same_image(w->row->tts_tupleDescriptor, w->s->ntracked, w->tracked,
								   v, nl, b, bn);
}

static bool
walk_receive(TupleTableSlot *slot, DestReceiver *self)
{
	SameWalk   *w = (SameWalk *) self;
	Datum	   *v;
	bool	   *nl;

	CHECK_FOR_INTERRUPTS();
	slot_getallattrs(slot);
	v = slot->tts_values;
	nl = slot->tts_isnull;
	for (;;)
	{
		int			c = w->more ?
			ordering_key_compare(w->key, v, nl, w->row->tts_values, w->row->tts_isnull) : -1;

		if (c > 0)
		{
			/* past the row in hand: it must have met its version */
			if (!w->met)
				break;
			walk_next_row(w);
			continue;
		}
		if (c == 0)
		{
			/* a second current version of the key, or a change */
			if (w->met || !walk_unchanged(w, v, nl))
				break;
			w->met = true;
			return true;
		}
		/* a key missing from the batch: ended, with hard_deletes, if live */
		if (w->s->deletes != SNAPSHOT_DELETES_IGNORE && !nl[w->n + 1] &&
			DatumGetBool(v[w->n + 1]))
			break;
		return true;
	}
	w->same = false;
	return false;				/* stops the query */
}

static void
walk_startup(DestReceiver *self, int operation, TupleDesc typeinfo)
{
}

static void
walk_shutdown(DestReceiver *self)
{
}

/*
 * Whether plan reads the current versions in key order as it goes (by an
 * index): a plan that sorts them reads them all before the first comes
 * out, which would cost a changed batch more than the walk saves.
 */
static bool
walk_plan_ordered(SPIPlanPtr plan)
{
	CachedPlan *cplan = SPI_plan_get_cached_plan(plan);
	PlannedStmt *stmt = linitial_node(PlannedStmt, cplan->stmt_list);
	Plan	   *top = stmt->planTree;
	bool		ordered = !IsA(top, Sort) && !IsA(top, IncrementalSort) && !IsA(top, GatherMerge);

	/* the plan is not saved: SPI took it with no resource owner */
	ReleaseCachedPlan(cplan, NULL);
	return ordered;
}

/*
 * True when, for a batch in key order (stage->key_sorted), no row opens a
 * version and no current version is to be ended: every row meets its key's
 * current version, live, dated no later than the row, with the same tracked
 * columns, byte for byte; with hard_deletes, every live current version
 * meets a row.  That is exactly when the query of snapshot_versions keeps
 * no row (and snapshot_write_deletes ends nothing), so the counts are all
 * rows unchanged.  The current versions are read once, in key order (by
 * the unique index of etl_snapshot_ddl; without an index that gives that
 * order there is no walk), and the walk stops at the first difference:
 * then the caller runs the query.
 */
bool
snapshot_versions_none(SnapshotSpec *s)
{
	StagedRel  *stage = s->stage->staged;
	StringInfoData sql;
	SameWalk	w;
	SPIPlanPtr	plan;
	int			readptr;

	Assert(s->stage->key_sorted);
	initStringInfo(&sql);
	appendStringInfoString(&sql, "SELECT ");
	sql_append_columns(&sql, "c", s->stage->columns, s->stage->ncolumns);
	appendStringInfo(&sql, ", c.%s, ", quote_identifier(s->valid_from));
	if (s->is_deleted)
		appendStringInfo(&sql, "c.%s IS NOT TRUE", quote_identifier(s->is_deleted));
	else
		appendStringInfoString(&sql, "true");
	if (!s->updated_at)
		appendStringInfo(&sql, " AND c.%s %s %s", quote_identifier(s->valid_from), s->vle,
						 s->valid_at);
	appendStringInfo(&sql, " FROM ONLY %s c WHERE ", s->target->qualname);
	snapshot_append_current(&sql, s, "c", false);
	appendStringInfoString(&sql, " ORDER BY ");
	sql_append_columns(&sql, "c", s->key->names, s->key->ncolumns);
	plan = sql_prepare(sql.data, 0, NULL);
	if (!walk_plan_ordered(plan))
	{
		/* a sort of every current version would come before any row */
		SPI_freeplan(plan);
		return false;
	}

	memset(&w, 0, sizeof(w));
	w.pub.receiveSlot = walk_receive;
	w.pub.rStartup = walk_startup;
	w.pub.rShutdown = walk_shutdown;
	w.pub.rDestroy = walk_shutdown;
	w.pub.mydest = DestTuplestore;	/* not DestNone: SPI would call it a
									 * utility */
	w.s = s;
	w.store = stage->store;
	w.cxt = CurrentMemoryContext;
	w.n = s->stage->ncolumns;
	w.row = MakeSingleTupleTableSlot(stage->desc, &TTSOpsMinimalTuple);
	w.key = ordering_key_prepare(stage->desc, s->key->ncolumns,
								 stage_key_attnos(stage->desc, s->key));
	w.tracked = palloc(sizeof(int) * Max(s->ntracked, 1));
	w.updated_at = -1;
	for (int a = 0; a < w.n; a++)
	{
		const char *name = NameStr(TupleDescAttr(stage->desc, a)->attname);

		for (int i = 0; i < s->ntracked; i++)
			if (strcmp(name, s->tracked[i]) == 0)
				w.tracked[i] = a;
		if (s->updated_at && strcmp(name, s->updated_at) == 0)
		{
			w.updated_at = a;
			w.vcmp = ordering_key_prepare(stage->desc, 1, &w.updated_at)->ssup;
		}
	}
	w.same = true;

	readptr = tuplestore_alloc_read_pointer(w.store, EXEC_FLAG_REWIND);
	tuplestore_select_read_pointer(w.store, readptr);
	tuplestore_rescan(w.store);
	walk_next_row(&w);

	sql_exec_into(plan, (DestReceiver *) &w, "reading the current versions");

	/* the rows after the last current version met none */
	if (w.same && w.more && !w.met)
		w.same = false;
	if (w.same && w.more)
	{
		walk_next_row(&w);
		w.same = !w.more;
	}
	tuplestore_select_read_pointer(w.store, 0);
	ExecDropSingleTupleTableSlot(w.row);
	return w.same;
}
