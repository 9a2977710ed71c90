/*
 * partmap.c
 *		Where a value belongs in a partitioned table: the partition that holds
 *		it, or the bounds of the partition to create for it.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "mb/pg_wchar.h"
#include "nodes/makefuncs.h"
#include "nodes/parsenodes.h"
#include "partitioning/partbounds.h"
#include "partitioning/partdesc.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/date.h"
#include "utils/datetime.h"
#include "utils/fmgrprotos.h"
#include "utils/guc.h"
#include "utils/timestamp.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/partcache.h"
#include "utils/rel.h"
#include "utils/syscache.h"
#include "utils/typcache.h"

#include "util/settings.h"
#include "state/ledger.h"
#include "replace/partmap.h"
#include "util/args.h"
#include "util/sql.h"

PartKey *
partmap_key(TargetInfo *target, const char *partition_column)
{
	PartKey    *pk = palloc0(sizeof(PartKey));
	Relation	rel;
	PartitionKey key;
	PartitionDesc pd;
	const char *keycol;
	MemoryContext tmpcxt;
	MemoryContext oldcxt;
	bool		detached;

	if (target->relkind == RELKIND_RELATION)
	{
		TypeCacheEntry *tc;

		if (partition_column == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("\"%s\" is not partitioned, so partition_column is required",
							target->relname),
					 errhint("Pass partition_column naming the column that holds the run value.")));
		pk->column = target_column(target, partition_column);
		if (pk->column == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_COLUMN),
					 errmsg("column \"%s\" of relation \"%s\" does not exist",
							partition_column, target->relname)));
		/* the value's rows are those equal to it by the type's default = */
		tc = lookup_type_cache(pk->column->typid, TYPECACHE_BTREE_OPFAMILY);
		if (!OidIsValid(tc->btree_opf))
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_FUNCTION),
					 errmsg("partition_column \"%s\" has type %s, which has no default btree operator class",
							partition_column, format_type_be(pk->column->typid)),
					 errhint("Use a column of a type with an ordering, such as a date.")));
		pk->opfamily = tc->btree_opf;
		pk->opcintype = tc->btree_opintype;
		return pk;
	}

	rel = table_open(target->relid, NoLock);
	key = RelationGetPartitionKey(rel);
	if (key->strategy == PARTITION_STRATEGY_HASH)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("\"%s\" is partitioned by hash", target->relname),
				 errdetail("A run value maps to a partition only under RANGE or LIST partitioning.")));
	if (key->partnatts != 1 || key->partattrs[0] == 0)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("the partition key of \"%s\" is not one plain column", target->relname),
				 errdetail("etl_replace_partition handles tables partitioned on a single column, not on several columns or an expression.")));
	keycol = get_attname(target->relid, key->partattrs[0], false);
	if (partition_column && target_column(target, partition_column) == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("column \"%s\" of relation \"%s\" does not exist",
						partition_column, target->relname)));
	if (partition_column && strcmp(partition_column, keycol) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("partition_column \"%s\" is not the partition key of \"%s\"",
						partition_column, target->relname),
				 errdetail("\"%s\" is partitioned on \"%s\".", target->relname, keycol),
				 errhint("Leave partition_column NULL for a partitioned table.")));
	pk->strategy = key->strategy;
	pk->column = target_column(target, keycol);
	pk->opfamily = key->partopfamily[0];
	pk->opcintype = key->partopcintype[0];

	/*
	 * The partition descriptor goes into the relcache; what building it
	 * parses (every partition's bound) is left in the current context, a few
	 * megabytes with thousands of partitions.  Freed at once, that memory
	 * serves the builds of the swap's DETACH and ATTACH, as it does between
	 * the statements of a hand-written swap; kept to the end of the call,
	 * each build takes fresh memory, and the page faults of a new session's
	 * fresh memory cost more than the parsing.
	 */
	tmpcxt = AllocSetContextCreate(CurrentMemoryContext, "idem_etl partition bounds",
								   ALLOCSET_DEFAULT_SIZES);
	oldcxt = MemoryContextSwitchTo(tmpcxt);
	detached = RelationGetPartitionDesc(rel, false)->detached_exist;
	pd = RelationGetPartitionDesc(rel, true);
	MemoryContextSwitchTo(oldcxt);
	MemoryContextDelete(tmpcxt);

	/*
	 * A partition whose DETACH ... CONCURRENTLY has not finished is left out
	 * of what the partitions are read from here, yet its bounds would still
	 * make the ATTACH of an overlapping new partition fail, at the end of all
	 * the work.
	 */
	if (detached)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("a partition of \"%s\" is being detached", target->relname),
				 errdetail("An ALTER TABLE ... DETACH PARTITION ... CONCURRENTLY has not finished."),
				 errhint("Wait for it to end, or finish it with ALTER TABLE %s DETACH PARTITION ... FINALIZE.",
						 target->qualname)));
	if (pd->boundinfo && pd->boundinfo->default_index >= 0)
		pk->default_part = pd->oids[pd->boundinfo->default_index];
	table_close(rel, NoLock);
	return pk;
}

/* Set TimeZone until zone_pop. */
static int
zone_push(const char *zone)
{
	int			level = NewGUCNestLevel();

	settings_save("timezone", zone);
	return level;
}

static void
zone_pop(int level)
{
	AtEOXact_GUC(true, level);
}

/*
 * Partition values and bounds of a timestamptz key never depend on the
 * session's TimeZone: values are printed (and so stored, compared and
 * named) in UTC, and a value written without an offset is read in
 * idem_etl.partition_time_zone, the zone whose days, weeks and months the
 * partitions follow.
 */
static int
utc_push(PartKey *pk)
{
	return pk->column->typid == TIMESTAMPTZOID ? zone_push("UTC") : -1;
}

static void
utc_pop(int level)
{
	if (level >= 0)
		zone_pop(level);
}

static Datum
value_datum(PartKey *pk, const char *value)
{
	Oid			typinput;
	Oid			typioparam;
	int			level = -1;
	Datum		d;
	ErrorContextCallback context;

	/* callers refuse NULL values first: none has a partition found by it */
	if (value == NULL)
		elog(ERROR, "no partition is found by a NULL value");
	if (pk->column->typid == TIMESTAMPTZOID)
		level = zone_push(idem_partition_time_zone);
	getTypeInputInfo(pk->column->typid, &typinput, &typioparam);
	args_context_push(&context, "partition_value");
	d = OidInputFunctionCall(typinput, (char *) value, typioparam, pk->column->typmod);
	args_context_pop(&context);
	if (level >= 0)
		zone_pop(level);
	return d;
}

/* The value as its type prints it: '2026-11-28' for '20261128'::date. */
char *
partmap_normalize(PartKey *pk, const char *value)
{
	Oid			typoutput;
	bool		isvarlena;
	int			level = utc_push(pk);
	char	   *out;

	getTypeOutputInfo(pk->column->typid, &typoutput, &isvarlena);
	out = OidOutputFunctionCall(typoutput, value_datum(pk, value));
	utc_pop(level);
	return out;
}

char *
partmap_literal(PartKey *pk, const char *text)
{
	return psprintf("%s::%s", quote_literal_cstr(text),
					format_type_extended(pk->column->typid, pk->column->typmod,
										 FORMAT_TYPE_TYPEMOD_GIVEN | FORMAT_TYPE_FORCE_QUALIFY));
}

/* An operator of the partition key's operator class, "OPERATOR(schema.op)". */
char *
partmap_operator(PartKey *pk, int16 strategy)
{
	Oid			op = get_opfamily_member(pk->opfamily, pk->opcintype, pk->opcintype, strategy);

	if (!OidIsValid(op))
		elog(ERROR, "operator of strategy %d missing from the partition key's operator family %u",
			 strategy, pk->opfamily);
	return sql_operator(op);
}

/*
 * The partition constraint of a RANGE partition [lower, upper) (NULL for
 * MINVALUE/MAXVALUE), written with the partition key's own operators, as
 * PostgreSQL derives it, but schema-qualified: it is evaluated in
 * statements that also hold the caller's text.
 */
static char *
range_check(PartKey *pk, const char *lower, const char *upper)
{
	const char *col = quote_identifier(pk->column->name);
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfo(&buf, "%s IS NOT NULL", col);
	if (lower)
		appendStringInfo(&buf, " AND %s %s %s", col,
						 partmap_operator(pk, BTGreaterEqualStrategyNumber),
						 partmap_literal(pk, lower));
	if (upper)
		appendStringInfo(&buf, " AND %s %s %s", col,
						 partmap_operator(pk, BTLessStrategyNumber),
						 partmap_literal(pk, upper));
	return buf.data;
}

/* The partition constraint of a LIST partition of values (and NULL). */
static char *
list_check(PartKey *pk, List *values, bool has_null)
{
	const char *col = quote_identifier(pk->column->name);
	StringInfoData buf;
	ListCell   *lc;

	initStringInfo(&buf);
	if (values == NIL)
	{
		appendStringInfo(&buf, "%s IS NULL", col);
		return buf.data;
	}
	appendStringInfo(&buf, "%s %s %s ANY (ARRAY[", has_null ? "(" : "", col,
					 partmap_operator(pk, BTEqualStrategyNumber));
	foreach(lc, values)
		appendStringInfo(&buf, "%s%s", foreach_current_index(lc) ? ", " : "",
						 partmap_literal(pk, lfirst(lc)));
	appendStringInfoString(&buf, "])");
	if (has_null)
		appendStringInfo(&buf, " OR %s IS NULL)", col);
	else
		appendStringInfo(&buf, " AND %s IS NOT NULL", col);
	return buf.data;
}

/* The constraint "column = value" of one value. */
char *
partmap_value_check(PartKey *pk, const char *value)
{
	return list_check(pk, list_make1((char *) value), false);
}

/* The text of a bound's value, as its type prints it. */
static char *
bound_text(Node *value)
{
	Const	   *c = castNode(Const, value);
	Oid			typoutput;
	bool		isvarlena;

	getTypeOutputInfo(c->consttype, &typoutput, &isvarlena);
	return OidOutputFunctionCall(typoutput, c->constvalue);
}

/* The constraint of an existing partition, from its bound. */
static char *
bound_check(PartKey *pk, PartitionBoundSpec *spec)
{
	if (spec->strategy == PARTITION_STRATEGY_LIST)
	{
		List	   *values = NIL;
		bool		has_null = false;
		ListCell   *lc;

		foreach(lc, spec->listdatums)
		{
			Const	   *c = lfirst_node(Const, lc);

			if (c->constisnull)
				has_null = true;
			else
				values = lappend(values, bound_text((Node *) c));
		}
		return list_check(pk, values, has_null);
	}
	else
	{
		PartitionRangeDatum *lo = linitial_node(PartitionRangeDatum, spec->lowerdatums);
		PartitionRangeDatum *hi = linitial_node(PartitionRangeDatum, spec->upperdatums);

		return range_check(pk,
						   lo->kind == PARTITION_RANGE_DATUM_VALUE ? bound_text(lo->value) : NULL,
						   hi->kind == PARTITION_RANGE_DATUM_VALUE ? bound_text(hi->value) : NULL);
	}
}

/* Partition partoid's bound; NULL when it is not a partition. */
static PartitionBoundSpec *
bound_spec(Oid partoid)
{
	HeapTuple	tup = SearchSysCache1(RELOID, ObjectIdGetDatum(partoid));
	bool		isnull;
	Datum		d;
	PartitionBoundSpec *spec;

	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for relation %u", partoid);
	d = SysCacheGetAttr(RELOID, tup, Anum_pg_class_relpartbound, &isnull);
	spec = isnull ? NULL : stringToNode(TextDatumGetCString(d));
	ReleaseSysCache(tup);
	return spec;
}

/* The lower and upper bounds of RANGE partition partoid; false for DEFAULT. */
static bool
range_datums(Oid partoid, PartitionRangeDatum **l, PartitionRangeDatum **h)
{
	PartitionBoundSpec *spec = bound_spec(partoid);

	if (spec == NULL || spec->is_default)
		return false;
	*l = linitial_node(PartitionRangeDatum, spec->lowerdatums);
	*h = linitial_node(PartitionRangeDatum, spec->upperdatums);
	return true;
}

/*
 * The finite lower and upper bound values of RANGE partition partoid; false
 * for the default partition and for MINVALUE/MAXVALUE bounds.
 */
static bool
finite_range(Oid partoid, Datum *lo, Datum *hi)
{
	PartitionRangeDatum *l;
	PartitionRangeDatum *h;

	if (!range_datums(partoid, &l, &h) ||
		l->kind != PARTITION_RANGE_DATUM_VALUE || h->kind != PARTITION_RANGE_DATUM_VALUE)
		return false;
	*lo = castNode(Const, l->value)->constvalue;
	*hi = castNode(Const, h->value)->constvalue;
	return true;
}

/* Lower and upper bounds, as text, of every sibling with finite bounds. */
static void
sibling_ranges(PartitionDesc pd, PartKey *pk, ArrayBuildState **lows,
			   ArrayBuildState **highs)
{
	Oid			typoutput;
	bool		isvarlena;

	getTypeOutputInfo(pk->column->typid, &typoutput, &isvarlena);
	*lows = initArrayResult(TEXTOID, CurrentMemoryContext, false);
	*highs = initArrayResult(TEXTOID, CurrentMemoryContext, false);
	for (int i = 0; i < pd->nparts; i++)
	{
		Datum		lo;
		Datum		hi;

		if (!finite_range(pd->oids[i], &lo, &hi))
			continue;
		accumArrayResult(*lows, CStringGetTextDatum(OidOutputFunctionCall(typoutput, lo)),
						 false, TEXTOID, CurrentMemoryContext);
		accumArrayResult(*highs, CStringGetTextDatum(OidOutputFunctionCall(typoutput, hi)),
						 false, TEXTOID, CurrentMemoryContext);
	}
}

/*
 * Check that partitions of width g can be aligned: a positive whole number
 * of months, or of days, or of hours, minutes and seconds, not a mix (22023,
 * naming the width).
 */
static void
check_granularity(Interval *g, Oid typid)
{
	int			kinds = (g->month != 0) + (g->day != 0) + (g->time != 0);

	if (g->month < 0 || g->day < 0 || g->time < 0 || kinds == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("granularity must be a positive interval")));
	if (kinds > 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("granularity \"%s\" cannot be aligned",
						DatumGetCString(DirectFunctionCall1(interval_out, IntervalPGetDatum(g)))),
				 errdetail("A partition width is a whole number of months, of days, or of hours, minutes and seconds, not a mix of them."),
				 errhint("Pass e.g. '1 month', '2 days', '1 week' or '6 hours'.")));
	if (typid == DATEOID && g->time != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("granularity \"%s\" cannot be aligned",
						DatumGetCString(DirectFunctionCall1(interval_out, IntervalPGetDatum(g)))),
				 errdetail("A date partition key needs a width of whole days or months.")));
}

/*
 * The zone in which a timestamptz key's partitions are aligned: widths of
 * days and months follow idem_etl.partition_time_zone's calendar; widths
 * under a day are cut in absolute time (UTC), so that a change to or from
 * daylight saving time neither overlaps nor skips an hour.
 */
static const char *
align_zone(Interval *g)
{
	return (g->month == 0 && g->day == 0) ? "UTC" : idem_partition_time_zone;
}

/* A date or timestamp as a timestamp in the zone of alignment. */
static Timestamp
to_local(PartKey *pk, Datum v, const char *zone)
{
	if (pk->column->typid == DATEOID)
		return DatumGetTimestamp(DirectFunctionCall1(date_timestamp, v));
	if (pk->column->typid == TIMESTAMPTZOID)
		return DatumGetTimestamp(DirectFunctionCall2(timestamptz_zone,
													 CStringGetTextDatum(zone), v));
	return DatumGetTimestamp(v);
}

static Datum
from_local(PartKey *pk, Timestamp t, const char *zone)
{
	if (pk->column->typid == DATEOID)
		return DirectFunctionCall1(timestamp_date, TimestampGetDatum(t));
	if (pk->column->typid == TIMESTAMPTZOID)
		return DirectFunctionCall2(timestamp_zone, CStringGetTextDatum(zone),
								   TimestampGetDatum(t));
	return TimestampGetDatum(t);
}

/*
 * The start of the partition of width g holding t, on the grid through
 * origin: months counted from origin's month (a grid of month starts),
 * other widths as date_bin does.
 */
static Timestamp
align_local(Timestamp t, Interval *g, Timestamp origin)
{
	if (g->month > 0)
	{
		struct pg_tm tt;
		struct pg_tm ot;
		fsec_t		fsec;
		int			mt;
		int			mo;
		int			k;
		Timestamp	result;

		if (timestamp2tm(t, NULL, &tt, &fsec, NULL, NULL) != 0 ||
			timestamp2tm(origin, NULL, &ot, &fsec, NULL, NULL) != 0)
			ereport(ERROR,
					(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
					 errmsg("timestamp out of range")));
		mt = tt.tm_year * 12 + tt.tm_mon - 1;
		mo = ot.tm_year * 12 + ot.tm_mon - 1;
		k = (mt - mo) >= 0 ? (mt - mo) / g->month : -((mo - mt + g->month - 1) / g->month);
		mo += k * g->month;
		memset(&ot, 0, sizeof(ot));
		ot.tm_year = mo >= 0 ? mo / 12 : -((11 - mo) / 12);
		ot.tm_mon = mo - ot.tm_year * 12 + 1;
		ot.tm_mday = 1;
		if (tm2timestamp(&ot, 0, NULL, &result) != 0)
			ereport(ERROR,
					(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
					 errmsg("timestamp out of range")));
		return result;
	}
	return DatumGetTimestamp(DirectFunctionCall3(timestamp_bin, IntervalPGetDatum(g),
												 TimestampGetDatum(t),
												 TimestampGetDatum(origin)));
}

/*
 * Bounds of the partition of width g holding value, as text: on the grid of
 * a sibling exactly g wide when there is one, else of the Unix epoch
 * (1970-01-01, a Monday 1970-01-05 for whole weeks), as date_bin does.
 */
static void
aligned_bounds(PartKey *pk, PartitionDesc pd, const char *value, Interval *g,
			   char **lower, char **upper)
{
	const char *zone = align_zone(g);
	Timestamp	origin = SetEpochTimestamp();
	Timestamp	lo;
	Timestamp	hi;
	Oid			typoutput;
	bool		isvarlena;

	if (g->month == 0 && g->time == 0 && g->day % 7 == 0)
		origin += 4 * USECS_PER_DAY;
	for (int i = 0; pd && i < pd->nparts; i++)
	{
		Datum		l;
		Datum		h;

		if (!finite_range(pd->oids[i], &l, &h))
			continue;
		lo = to_local(pk, l, zone);
		hi = to_local(pk, h, zone);
		if (DatumGetTimestamp(DirectFunctionCall2(timestamp_pl_interval, TimestampGetDatum(lo),
												  IntervalPGetDatum(g))) == hi)
		{
			origin = lo;
			break;
		}
	}
	lo = align_local(to_local(pk, value_datum(pk, value), zone), g, origin);
	hi = DatumGetTimestamp(DirectFunctionCall2(timestamp_pl_interval, TimestampGetDatum(lo),
											   IntervalPGetDatum(g)));
	getTypeOutputInfo(pk->column->typid, &typoutput, &isvarlena);
	*lower = OidOutputFunctionCall(typoutput, from_local(pk, lo, zone));
	*upper = OidOutputFunctionCall(typoutput, from_local(pk, hi, zone));
}

static bool
is_time_type(Oid typid)
{
	return typid == DATEOID || typid == TIMESTAMPOID || typid == TIMESTAMPTZOID;
}

/* Whether value, of a date or timestamp partition key, is finite. */
static bool
finite_time(PartKey *pk, const char *value)
{
	Datum		d = value_datum(pk, value);

	if (pk->column->typid == DATEOID)
		return !DATE_NOT_FINITE(DatumGetDateADT(d));
	return !TIMESTAMP_NOT_FINITE(DatumGetTimestamp(d));
}

/*
 * Bounds of a new RANGE partition holding value: aligned with date_trunc to
 * the granularity's unit for dates and timestamps; without granularity, the
 * width and alignment that every sibling shares.
 */
static void
new_range_bounds(TargetInfo *target, PartKey *pk, PartitionDesc pd,
				 const char *value, Interval *granularity,
				 char **lower, char **upper)
{
	const char *type = format_type_extended(pk->column->typid, pk->column->typmod,
											FORMAT_TYPE_TYPEMOD_GIVEN | FORMAT_TYPE_FORCE_QUALIFY);
	const char *ts = "pg_catalog.timestamp";
	ArrayBuildState *lows;
	ArrayBuildState *highs;
	Oid			argtypes[4] = {TEXTARRAYOID, TEXTARRAYOID, TEXTOID, TEXTOID};
	Datum		args[4];
	SPIPlanPtr	plan;
	char	   *sql;
	bool		isnull;

	if (is_time_type(pk->column->typid) && !finite_time(pk, value))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("cannot make a partition of \"%s\", or a slice of one, for %s",
						target->relname, value),
				 errdetail("An infinite value has no granule with finite bounds."),
				 errhint("Create a partition FROM (MINVALUE) or TO (MAXVALUE) for it yourself, and replace it with granularity NULL.")));
	if (granularity && !is_time_type(pk->column->typid))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("granularity applies to date and timestamp partition keys, not to %s",
						format_type_be(pk->column->typid)),
				 errhint("Create the partition for %s yourself, or let its siblings show the width.", value)));

	if (granularity == NULL)
	{
		sibling_ranges(pd, pk, &lows, &highs);
		args[0] = makeArrayResult(lows, CurrentMemoryContext);
		args[1] = makeArrayResult(highs, CurrentMemoryContext);
		args[2] = CStringGetTextDatum(value);
		args[3] = CStringGetTextDatum(idem_partition_time_zone);
		if (pk->column->typid == TIMESTAMPTZOID)
		{
			/* the siblings' bounds as local times of the partition zone */
			type = "pg_catalog.timestamptz";
			ts = "pg_catalog.timestamp";
		}
		if (is_time_type(pk->column->typid))
			sql = psprintf("SELECT c.g FROM (VALUES (1, '1 hour'::pg_catalog.interval, 'hour'),"
						   " (2, '1 day', 'day'), (3, '7 days', 'week'), (4, '1 month', 'month'),"
						   " (5, '3 months', 'quarter'), (6, '1 year', 'year')) c(n, g, u)"
						   " WHERE pg_catalog.cardinality($1) OPERATOR(pg_catalog.>) 0 AND NOT EXISTS (SELECT 1"
						   " FROM ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2)) b(lo, hi)"
						   " WHERE b.hi::%s::%s OPERATOR(pg_catalog.<>) (b.lo::%s::%s OPERATOR(pg_catalog.+) c.g)"
						   " OR pg_catalog.date_trunc(c.u, b.lo::%s::%s) OPERATOR(pg_catalog.<>) b.lo::%s::%s)"
						   " ORDER BY c.n LIMIT 1",
						   type, ts, type, ts, type, ts, type, ts);
		else

			/*
			 * Integer keys: the common width w and offset o of the siblings;
			 * the new partition is the one of that grid that holds v.
			 * mod(mod(x, w) + w, w) is x's offset, negative x included.
			 */
			sql = psprintf("WITH b AS (SELECT b.lo::%s AS lo,"
						   " b.hi::%s OPERATOR(pg_catalog.-) b.lo::%s AS w"
						   " FROM ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2)) b(lo, hi)),"
						   " m AS (SELECT w, pg_catalog.mod(pg_catalog.mod(lo, w) OPERATOR(pg_catalog.+) w, w) AS o FROM b),"
						   " f AS (SELECT pg_catalog.count(DISTINCT w) AS nw, pg_catalog.min(w) AS w,"
						   " pg_catalog.count(DISTINCT o) AS no, pg_catalog.min(o) AS o FROM m)"
						   " SELECT s.lo::pg_catalog.text, (s.lo OPERATOR(pg_catalog.+) f.w)::pg_catalog.text"
						   " FROM f, (SELECT $3::%s AS v) x,"
						   " LATERAL (SELECT x.v OPERATOR(pg_catalog.-) pg_catalog.mod(pg_catalog.mod(x.v"
						   " OPERATOR(pg_catalog.-) f.o, f.w) OPERATOR(pg_catalog.+) f.w, f.w) AS lo) s"
						   " WHERE f.nw OPERATOR(pg_catalog.=) 1 AND f.no OPERATOR(pg_catalog.=) 1",
						   type, type, type, type);
		if (pk->column->typid == TIMESTAMPTZOID)
			sql = psprintf("SELECT c.g FROM (VALUES (1, '1 hour'::pg_catalog.interval, 'hour'),"
						   " (2, '1 day', 'day'), (3, '7 days', 'week'), (4, '1 month', 'month'),"
						   " (5, '3 months', 'quarter'), (6, '1 year', 'year')) c(n, g, u)"
						   " WHERE pg_catalog.cardinality($1) OPERATOR(pg_catalog.>) 0 AND NOT EXISTS (SELECT 1"
						   " FROM ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2)) b0(lo, hi),"
						   " LATERAL (SELECT pg_catalog.timezone(CASE WHEN c.n OPERATOR(pg_catalog.=) 1"
						   " THEN 'UTC' ELSE $4 END, b0.lo::%s) AS lo,"
						   " pg_catalog.timezone(CASE WHEN c.n OPERATOR(pg_catalog.=) 1"
						   " THEN 'UTC' ELSE $4 END, b0.hi::%s) AS hi) b"
						   " WHERE b.hi OPERATOR(pg_catalog.<>) (b.lo OPERATOR(pg_catalog.+) c.g)"
						   " OR pg_catalog.date_trunc(c.u, b.lo) OPERATOR(pg_catalog.<>) b.lo)"
						   " ORDER BY c.n LIMIT 1", type, type);
		plan = sql_prepare(sql, 4, argtypes);
		if (SPI_execute_plan(plan, args, NULL, false, 1) != SPI_OK_SELECT)
			elog(ERROR, "inferring partition bounds failed");
		if (SPI_processed == 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("no partition of \"%s\" holds %s, and the bounds of a new one cannot be inferred",
							target->relname, value),
					 lows->nelems == 0 ?
					 errdetail("\"%s\" has no partition with finite bounds to take them from.",
							   target->relname) :
					 errdetail("Its partitions do not all share one width and alignment."),
					 errhint("Pass granularity, e.g. granularity => '1 day', or create the partition yourself.")));
		if (!is_time_type(pk->column->typid))
		{
			*lower = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
			*upper = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2);
			return;
		}
		granularity = DatumGetIntervalP(SPI_getbinval(SPI_tuptable->vals[0],
													  SPI_tuptable->tupdesc, 1, &isnull));
	}

	check_granularity(granularity, pk->column->typid);
	aligned_bounds(pk, pd, value, granularity, lower, upper);
}

/*
 * parent_<bound with only letters and digits>, unique in the schema.  A name
 * longer than NAMEDATALEN - 1 bytes keeps the whole value suffix and
 * shortens the parent's part, never inside a multibyte character; when the
 * name is taken (two long parents sharing a prefix), a number goes between
 * the parent's part and the suffix: parent_2_20261128.
 */
static char *
new_partition_name(TargetInfo *target, const char *bound)
{
	StringInfoData suffix;
	Oid			nsp = get_rel_namespace(target->relid);
	const char *parent = target->relname;
	char	   *name = NULL;

	initStringInfo(&suffix);
	appendStringInfoChar(&suffix, '_');
	for (const char *p = bound; *p; p++)
		if (isalnum((unsigned char) *p) && !IS_HIGHBIT_SET(*p))
			appendStringInfoChar(&suffix, *p);
	/* a bound has at most a few dozen characters; keep room for the parent */
	if (suffix.len > NAMEDATALEN / 2)
		suffix.data[suffix.len = NAMEDATALEN / 2] = '\0';
	for (int n = 1; name == NULL || OidIsValid(get_relname_relid(name, nsp)); n++)
	{
		char	   *counter = n == 1 ? "" : psprintf("_%d", n);
		int			room = NAMEDATALEN - 1 - suffix.len - (int) strlen(counter);
		int			len = pg_mbcliplen(parent, strlen(parent), room);

		name = psprintf("%.*s%s%s", len, parent, counter, suffix.data);
	}
	return name;
}

static void
existing_partition(PartSlot *slot, Oid partoid, TargetInfo *target, PartKey *pk)
{
	char		relkind = get_rel_relkind(partoid);
	HeapTuple	tup;
	bool		isnull;
	Datum		d;

	if (relkind != RELKIND_RELATION)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("partition \"%s\" of \"%s\" is %s",
						get_rel_name(partoid), target->relname,
						relkind == RELKIND_PARTITIONED_TABLE ? "itself partitioned" : "not a table"),
				 errdetail("Only a leaf partition that is an ordinary table can be swapped.")));
	tup = SearchSysCache1(RELOID, ObjectIdGetDatum(partoid));
	if (!HeapTupleIsValid(tup))
		elog(ERROR, "partition %u vanished", partoid);

	/*
	 * The new partition is built, and the replaced one kept, in the parent's
	 * schema, where the partition is looked up by name: one in another schema
	 * (ALTER TABLE ... SET SCHEMA moves only the parent) would not be found
	 * there, or another table of its name would.
	 */
	if (((Form_pg_class) GETSTRUCT(tup))->relnamespace != get_rel_namespace(target->relid))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("partition \"%s\" of \"%s\" is in schema \"%s\", not in its parent's schema \"%s\"",
						get_rel_name(partoid), target->relname,
						get_namespace_name(((Form_pg_class) GETSTRUCT(tup))->relnamespace),
						get_namespace_name(get_rel_namespace(target->relid))),
				 errdetail("idem_etl replaces a partition with a table built in its parent's schema."),
				 errhint("Move the partition into its parent's schema with ALTER TABLE ... SET SCHEMA.")));
	slot->partoid = partoid;
	slot->name = pstrdup(NameStr(((Form_pg_class) GETSTRUCT(tup))->relname));
	d = SysCacheGetAttr(RELOID, tup, Anum_pg_class_relpartbound, &isnull);
	if (isnull)
		elog(ERROR, "partition %u has no bound", partoid);
	slot->check_sql = bound_check(pk, castNode(PartitionBoundSpec,
											   stringToNode(TextDatumGetCString(d))));
	slot->bound_sql = TextDatumGetCString(DirectFunctionCall2(pg_get_expr, d,
															  ObjectIdGetDatum(partoid)));
	ReleaseSysCache(tup);
}

/*
 * The partition that holds value, found with the same binary search that
 * routes inserted rows; InvalidOid when none does (or only the default one).
 */
Oid
partmap_find(TargetInfo *target, PartKey *pk, const char *value)
{
	Relation	rel = table_open(target->relid, NoLock);
	PartitionKey key = RelationGetPartitionKey(rel);
	PartitionDesc pd = RelationGetPartitionDesc(rel, true);
	PartitionBoundInfo bi = pd->boundinfo;
	Datum		v = value_datum(pk, value);
	bool		equal = false;
	int			idx = -1;

	if (bi && pk->strategy == PARTITION_STRATEGY_LIST)
	{
		int			off = partition_list_bsearch(key->partsupfunc, key->partcollation,
												 bi, v, &equal);

		if (off >= 0 && equal)
			idx = bi->indexes[off];
	}
	else if (bi)
	{
		int			off = partition_range_datum_bsearch(key->partsupfunc, key->partcollation,
														bi, 1, &v, &equal);

		idx = bi->indexes[off + 1];
	}
	table_close(rel, NoLock);
	return idx >= 0 ? pd->oids[idx] : InvalidOid;
}

/*
 * How RANGE partition partoid of rel's bounds compare with [lower, upper),
 * as the partition key compares (MINVALUE and MAXVALUE unbounded): *lo_cmp
 * and *hi_cmp are <0, 0 or >0 as its lower bound is below, at or above
 * lower, and its upper bound below, at or above upper.  False for the
 * default partition.
 */
static bool
range_compare(Relation rel, PartKey *pk, Oid partoid, const char *lower,
			  const char *upper, int *lo_cmp, int *hi_cmp)
{
	PartitionKey key = RelationGetPartitionKey(rel);
	PartitionRangeDatum *l;
	PartitionRangeDatum *h;

	if (!range_datums(partoid, &l, &h))
		return false;
	if (l->kind == PARTITION_RANGE_DATUM_VALUE)
		*lo_cmp = DatumGetInt32(FunctionCall2Coll(&key->partsupfunc[0], key->partcollation[0],
												  castNode(Const, l->value)->constvalue,
												  value_datum(pk, lower)));
	else
		*lo_cmp = l->kind == PARTITION_RANGE_DATUM_MINVALUE ? -1 : 1;
	if (h->kind == PARTITION_RANGE_DATUM_VALUE)
		*hi_cmp = DatumGetInt32(FunctionCall2Coll(&key->partsupfunc[0], key->partcollation[0],
												  castNode(Const, h->value)->constvalue,
												  value_datum(pk, upper)));
	else
		*hi_cmp = h->kind == PARTITION_RANGE_DATUM_MAXVALUE ? 1 : -1;
	return true;
}

/*
 * The constraint of the slice [value's granule, + granularity) of a RANGE
 * key, aligned as a new partition of that width would be, and the slice as
 * "[lower, upper)" in *range; NULL when slot's partition is not wider than
 * that slice (nothing narrower to replace).  Of a partition that holds only
 * part of the slice, the part it holds.
 */
char *
partmap_slice_check(TargetInfo *target, PartKey *pk, PartSlot *slot,
					Interval *granularity, char **range)
{
	Relation	rel;
	char	   *lower;
	char	   *upper;
	char	   *check;
	int			level;
	int			lo_cmp;
	int			hi_cmp;

	if (granularity == NULL || pk->strategy != PARTITION_STRATEGY_RANGE ||
		!OidIsValid(slot->partoid))
		return NULL;
	level = utc_push(pk);
	rel = table_open(target->relid, NoLock);
	new_range_bounds(target, pk, RelationGetPartitionDesc(rel, true), slot->value,
					 granularity, &lower, &upper);
	check = range_check(pk, lower, upper);
	*range = psprintf("[%s, %s)", lower, upper);
	if (!range_compare(rel, pk, slot->partoid, lower, upper, &lo_cmp, &hi_cmp) ||
		(lo_cmp >= 0 && hi_cmp <= 0))
		check = NULL;			/* no wider than the slice: replaced whole */
	else if (lo_cmp > 0 || hi_cmp < 0)
	{
		/* overlapping the slice's edge: the slice's part of it only */
		check = psprintf("(%s) AND (%s)", check, slot->check_sql);
	}
	table_close(rel, NoLock);
	utc_pop(level);
	return check;
}

/* A value of the partition column, as a bound's constant. */
static Node *
bound_const(PartKey *pk, const char *value)
{
	int16		typlen;
	bool		typbyval;

	get_typlenbyval(pk->column->typid, &typlen, &typbyval);
	return (Node *) makeConst(pk->column->typid, pk->column->typmod, pk->column->collation,
							  typlen, value_datum(pk, value), false, typbyval);
}

/*
 * A new partition's bound, printed as pg_get_expr prints the catalog's
 * bound of an existing one (existing_partition): skips and the partition's
 * lock are keyed by that text, and quoting every value ('7') made a
 * partition's first rerun look for another bound than the catalog's (7).
 * list_value for a LIST partition, else lower and upper.
 */
static char *
deparse_bound(TargetInfo *target, PartKey *pk, const char *list_value,
			  const char *lower, const char *upper)
{
	PartitionBoundSpec *spec = makeNode(PartitionBoundSpec);

	spec->strategy = pk->strategy;
	spec->location = -1;
	if (list_value)
		spec->listdatums = list_make1(bound_const(pk, list_value));
	else
	{
		PartitionRangeDatum *lo = makeNode(PartitionRangeDatum);
		PartitionRangeDatum *hi = makeNode(PartitionRangeDatum);

		lo->kind = hi->kind = PARTITION_RANGE_DATUM_VALUE;
		lo->value = bound_const(pk, lower);
		hi->value = bound_const(pk, upper);
		lo->location = hi->location = -1;
		spec->lowerdatums = list_make1(lo);
		spec->upperdatums = list_make1(hi);
	}
	return TextDatumGetCString(DirectFunctionCall2(pg_get_expr,
												   CStringGetTextDatum(nodeToString(spec)),
												   ObjectIdGetDatum(target->relid)));
}

/*
 * The partition that holds value or, when there is none, the bounds and
 * name of the one to create.
 */
PartSlot *
partmap_slot(TargetInfo *target, PartKey *pk, const char *value,
			 Interval *granularity)
{
	PartSlot   *slot = palloc0(sizeof(PartSlot));
	Oid			partoid = partmap_find(target, pk, value);
	int			level = utc_push(pk);

	slot->value = partmap_normalize(pk, value);
	if (OidIsValid(partoid))
		existing_partition(slot, partoid, target, pk);
	else if (pk->strategy == PARTITION_STRATEGY_LIST)
	{
		slot->name = new_partition_name(target, slot->value);
		slot->bound_sql = deparse_bound(target, pk, slot->value, NULL, NULL);
		slot->check_sql = list_check(pk, list_make1(slot->value), false);
	}
	else
	{
		Relation	rel = table_open(target->relid, NoLock);
		char	   *lower;
		char	   *upper;

		new_range_bounds(target, pk, RelationGetPartitionDesc(rel, true), slot->value,
						 granularity, &lower, &upper);
		table_close(rel, NoLock);
		slot->name = new_partition_name(target, lower);
		slot->bound_sql = deparse_bound(target, pk, NULL, lower, upper);
		slot->check_sql = range_check(pk, lower, upper);
	}
	utc_pop(level);
	return slot;
}

/*
 * The slot for value, with the lock that serializes every replacement of
 * that partition held.  The lock is keyed by the partition's bound, which is
 * only known after looking: if another call created or replaced the
 * partition meanwhile, look again with its lock held until nothing changes.
 */
PartSlot *
partmap_slot_locked(TargetInfo *target, PartKey *pk, const char *value,
					Interval *granularity)
{
	PartSlot   *slot = partmap_slot(target, pk, value, granularity);

	for (;;)
	{
		PartSlot   *again;

		ledger_lock_partition(target->relid, slot->bound_sql);
		again = partmap_slot(target, pk, value, granularity);
		if (strcmp(again->bound_sql, slot->bound_sql) == 0)
			return again;
		slot = again;
	}
}
