/*
 * sequence.c
 *		Sequence pipelines (etl_pipeline_create_sequence): the command runs
 *		for each new range of keys, {from_id} .. {to_id}, of an append-only
 *		table whose key a sequence fills; ranges in order, each once.
 *
 * The upper end of a new range is the sequence's last value, read before
 * waiting for every transaction that writes the table at that moment (as
 * CREATE INDEX CONCURRENTLY waits for them).  A transaction that drew a key
 * up to that value has held its lock on the table since its INSERT began,
 * so once it has ended its rows are visible or gone for good; a
 * transaction that begins to write later draws a larger key.  Two ways
 * around this are refused or documented: a sequence with CACHE > 1 (a
 * session may insert a cached key below the last value later: refused),
 * and a key drawn by nextval() in a statement of its own before the
 * INSERT, or written by hand (the README says so).
 *
 * A range's row in idem_etl.pipeline_periods (from_id, to_id; its
 * period_start is when it first ran) commits with its command; the next
 * range starts after the last row's to_id, so a failed range keeps its
 * bounds for its retries, and with on_failure 'block' nothing after it
 * runs until it succeeds.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/dependency.h"
#include "catalog/pg_sequence.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "pipeline/pipeline.h"
#include "pipeline/sequence.h"
#include "state/ledger.h"
#include "util/args.h"

PG_FUNCTION_INFO_V1(etl_pipeline_create_sequence);

static Datum
column(int col, bool *isnull)
{
	return SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, col, isnull);
}

/* The sequence that fills column attnum of relid (serial or identity), or InvalidOid. */
static Oid
column_sequence(Oid relid, AttrNumber attnum)
{
	ListCell   *lc;

	foreach(lc, getOwnedSequences(relid))
	{
		Oid			seq = lfirst_oid(lc);
		Oid			table;
		int32		col;

		if ((sequenceIsOwned(seq, DEPENDENCY_AUTO, &table, &col) ||
			 sequenceIsOwned(seq, DEPENDENCY_INTERNAL, &table, &col)) &&
			table == relid && col == attnum)
			return seq;
	}
	return InvalidOid;
}

/* The one column of relid that a sequence fills, or an error. */
static AttrNumber
key_of(Oid relid)
{
	AttrNumber	found = InvalidAttrNumber;
	ListCell   *lc;

	foreach(lc, getOwnedSequences(relid))
	{
		Oid			table;
		int32		col;

		if (!sequenceIsOwned(lfirst_oid(lc), DEPENDENCY_AUTO, &table, &col) &&
			!sequenceIsOwned(lfirst_oid(lc), DEPENDENCY_INTERNAL, &table, &col))
			continue;
		if (found != InvalidAttrNumber)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("table \"%s\" has several columns filled by a sequence", get_rel_name(relid)),
					 errhint("Pass the key with key_column.")));
		found = (AttrNumber) col;
	}
	if (found == InvalidAttrNumber)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TABLE_DEFINITION),
				 errmsg("table \"%s\" has no increasing key", get_rel_name(relid)),
				 errdetail("A sequence pipeline reads ranges of a key that a sequence fills: an identity or serial column."),
				 errhint("Use a time pipeline (etl_pipeline_create) for this table.")));
	return found;
}

/*
 * Checks a sequence pipeline's source, before anything is written: a table
 * the caller may read, and a key of an integer type that an increasing
 * sequence with CACHE 1 fills (key_column, or the only such column when
 * NULL).  Returns that sequence, and the key's name in *key_column.
 */
Oid
sequence_check_source(Oid relid, char **key_column)
{
	char		relkind = get_rel_relkind(relid);
	AttrNumber	attnum;
	Oid			seq;
	Oid			type;
	HeapTuple	tuple;
	Form_pg_sequence form;
	int64		increment,
				cache;

	if (relkind != RELKIND_RELATION && relkind != RELKIND_PARTITIONED_TABLE)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("\"%s\" is not a table", get_rel_name(relid)),
				 errdetail("A sequence pipeline reads new rows of a table.")));
	if (pg_class_aclcheck(relid, GetUserId(), ACL_SELECT) != ACLCHECK_OK)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for table %s", get_rel_name(relid)),
				 errdetail("A sequence pipeline's command reads the table as the pipeline's owner.")));
	if (*key_column == NULL)
		attnum = key_of(relid);
	else
	{
		attnum = get_attnum(relid, *key_column);
		if (attnum == InvalidAttrNumber)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_COLUMN),
					 errmsg("column \"%s\" of relation \"%s\" does not exist",
							*key_column, get_rel_name(relid))));
	}
	*key_column = get_attname(relid, attnum, false);
	type = get_atttype(relid, attnum);
	seq = column_sequence(relid, attnum);
	if (seq == InvalidOid || (type != INT2OID && type != INT4OID && type != INT8OID))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TABLE_DEFINITION),
				 errmsg("column \"%s\" of \"%s\" is not an increasing key", *key_column,
						get_rel_name(relid)),
				 errdetail("A sequence pipeline reads ranges of an integer key that a sequence fills: an identity or serial column."),
				 errhint("Use a time pipeline (etl_pipeline_create) for this table.")));
	tuple = SearchSysCache1(SEQRELID, ObjectIdGetDatum(seq));
	if (!HeapTupleIsValid(tuple))
		elog(ERROR, "cache lookup failed for sequence %u", seq);
	form = (Form_pg_sequence) GETSTRUCT(tuple);
	increment = form->seqincrement;
	cache = form->seqcache;
	ReleaseSysCache(tuple);
	if (increment < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TABLE_DEFINITION),
				 errmsg("column \"%s\" of \"%s\" is not an increasing key", *key_column,
						get_rel_name(relid)),
				 errdetail("Its sequence \"%s\" counts down.", get_rel_name(seq))));
	if (cache > 1)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("sequence \"%s\" caches " INT64_FORMAT " values per session", get_rel_name(seq), cache),
				 errdetail("A session may insert a cached key after a range above it has run: its row would be left out."),
				 errhint("ALTER SEQUENCE %s CACHE 1.",
						 quote_qualified_identifier(get_namespace_name(get_rel_namespace(seq)),
													get_rel_name(seq)))));
	if (pg_class_aclcheck(seq, GetUserId(), ACL_SELECT | ACL_USAGE) != ACLCHECK_OK)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for sequence %s", get_rel_name(seq)),
				 errdetail("A sequence pipeline reads the sequence's last value as the pipeline's owner."),
				 errhint("GRANT SELECT ON SEQUENCE %s to the role.",
						 quote_qualified_identifier(get_namespace_name(get_rel_namespace(seq)),
													get_rel_name(seq)))));
	return seq;
}

/*
 * The oldest range that is queued, retrying or failed, as a call; with
 * runnable, the oldest that may run at now.
 */
static bool
oldest_open_range(Pipeline *p, TimestampTz now, bool runnable, PeriodCall *c, bool *may_run)
{
	Oid			argtypes[3] = {INT8OID, TIMESTAMPTZOID, BOOLOID};
	Datum		args[3] = {Int64GetDatum(p->id), TimestampTzGetDatum(now), BoolGetDatum(runnable)};
	bool		isnull;
	Datum		d;
	char	   *status;

	static SPIPlanPtr plan = NULL;

	ledger_exec_as_owner_kept(&plan, "SELECT period_start, status, attempts, retry_after, from_id, to_id"
							  " FROM idem_etl.pipeline_periods"
							  " WHERE pipeline_id OPERATOR(pg_catalog.=) $1 AND from_id IS NOT NULL"
							  " AND status OPERATOR(pg_catalog.=) ANY ('{queued,retrying,failed}'::pg_catalog.text[])"
							  " AND (NOT $3 OR status OPERATOR(pg_catalog.=) 'queued'"
							  "  OR (status OPERATOR(pg_catalog.=) 'retrying'"
							  "      AND retry_after OPERATOR(pg_catalog.<=) $2))"
							  " ORDER BY from_id LIMIT 1",
							  3, argtypes, args, NULL, SPI_OK_SELECT);
	if (SPI_processed == 0)
	{
		SPI_freetuptable(SPI_tuptable);
		return false;
	}
	memset(c, 0, sizeof(PeriodCall));
	c->p = p;
	c->start = c->end = DatumGetTimestampTz(column(1, &isnull));
	status = TextDatumGetCString(column(2, &isnull));
	c->attempts = DatumGetInt32(column(3, &isnull));
	d = column(4, &isnull);
	c->from_id = DatumGetInt64(column(5, &isnull));
	c->to_id = DatumGetInt64(column(6, &isnull));
	c->kind = strcmp(status, "queued") == 0 ? "rerun" : "retry";
	c->record = true;
	c->command = period_expand_range(p->command, c->from_id, c->to_id);
	*may_run = strcmp(status, "queued") == 0 ||
		(strcmp(status, "retrying") == 0 && !isnull && DatumGetTimestampTz(d) <= now);
	SPI_freetuptable(SPI_tuptable);
	return true;
}

/* The last key of the ranges that ran, or the sequence's first value - 1. */
int64
sequence_last_id(const Pipeline *p)
{
	Oid			argtypes[2] = {INT8OID, OIDOID};
	Datum		args[2] = {Int64GetDatum(p->id), ObjectIdGetDatum(p->seq)};
	bool		isnull;
	int64		last;

	static SPIPlanPtr plan = NULL;

	ledger_exec_as_owner_kept(&plan, "SELECT COALESCE((SELECT to_id FROM idem_etl.pipeline_periods"
							  "  WHERE pipeline_id OPERATOR(pg_catalog.=) $1 AND from_id IS NOT NULL"
							  "  ORDER BY from_id DESC LIMIT 1),"
							  " (SELECT seqmin OPERATOR(pg_catalog.-) 1 FROM pg_catalog.pg_sequence"
							  "  WHERE seqrelid OPERATOR(pg_catalog.=) $2))",
							  2, argtypes, args, NULL, SPI_OK_SELECT);
	last = DatumGetInt64(column(1, &isnull));
	SPI_freetuptable(SPI_tuptable);
	return last;
}

/*
 * The next new range, in *c: false when the sequence has drawn no key past
 * the last range.  Waits for the writers of the source (lock_timeout
 * applies) after reading the sequence's last value.
 */
static bool
new_range(Pipeline *p, PeriodCall *c)
{
	Oid			argtypes[1] = {OIDOID};
	Datum		args[1] = {ObjectIdGetDatum(p->seq)};
	int64		last = sequence_last_id(p);
	int64		upper;
	bool		isnull;
	Datum		d;
	LOCKTAG		tag;

	/* as the pipeline's owner: its rights on the sequence */
	if (SPI_execute_with_args("SELECT pg_catalog.pg_sequence_last_value($1)", 1, argtypes, args,
							  NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read the last value of sequence %u", p->seq);
	d = column(1, &isnull);
	SPI_freetuptable(SPI_tuptable);
	if (isnull || DatumGetInt64(d) <= last)
		return false;
	upper = DatumGetInt64(d);
	SET_LOCKTAG_RELATION(tag, MyDatabaseId, p->source);
	WaitForLockers(tag, ShareLock, false);

	memset(c, 0, sizeof(PeriodCall));
	c->p = p;
	c->kind = "due";
	c->record = true;
	c->start = c->end = GetCurrentTimestamp();
	c->from_id = last + 1;
	c->to_id = p->max_batch_size > 0 && upper - last > p->max_batch_size ?
		last + p->max_batch_size : upper;
	c->command = period_expand_range(p->command, c->from_id, c->to_id);
	return true;
}

/*
 * etl_pipeline_run for a sequence pipeline, under its lock: failed ranges
 * whose retry is due, then new ranges, at most max_periods calls (0: no
 * bound).  *blocked when a failed range stops the others (on_failure
 * 'block'); *more when max_periods stopped it with more to do.
 */
int32
sequence_run(Pipeline *p, int32 max_periods, Tuplestorestate *store, TupleDesc desc,
			 bool *blocked, bool *more)
{
	TimestampTz now = GetCurrentTimestamp();
	int32		ran = 0;
	PeriodCall	c;
	bool		may_run;
	MemoryContext rangecxt = AllocSetContextCreate(CurrentMemoryContext, "idem_etl pipeline range",
												   ALLOCSET_DEFAULT_SIZES);
	MemoryContext oldcxt = MemoryContextSwitchTo(rangecxt);

	/* as etl_pipeline_run's periods: a range's allocations go before the next */
	*blocked = *more = false;
	for (;;)
	{
		CHECK_FOR_INTERRUPTS();
		MemoryContextReset(rangecxt);
		if (oldest_open_range(p, now, !p->block, &c, &may_run))
		{
			if (!may_run)
			{
				*blocked = true;
				break;
			}
		}
		else if (!new_range(p, &c))
			break;
		if (max_periods > 0 && ran >= max_periods)
		{
			*more = true;
			break;
		}
		(void) pipeline_run_call(&c, store, desc);
		ran++;
	}
	MemoryContextSwitchTo(oldcxt);
	MemoryContextDelete(rangecxt);
	return ran;
}

/*
 * etl_pipeline_create_sequence(name, command, source, key_column,
 * max_batch_size, every, on_failure, max_attempts): the same for the new
 * rows of an append-only table (sequence.c); it looks for them every
 * every, the first time now.
 */
Datum
etl_pipeline_create_sequence(PG_FUNCTION_ARGS)
{
	char	   *name;
	char	   *command;
	char	   *key_column;
	char	   *on_failure;
	int64		max_batch_size;
	int32		max_attempts;
	Oid			source;
	Oid			seq;
	Interval   *every;
	PeriodSpec	spec;
	TimestampTz now = GetCurrentTransactionStartTimestamp();
	Oid			argtypes[12] = {TEXTOID, OIDOID, NAMEOID, TEXTOID, INTERVALOID,
	TIMESTAMPTZOID, TEXTOID, INT4OID, OIDOID, NAMEOID, OIDOID, INT8OID};
	Datum		args[12];
	char		nulls[13] = "            ";
	Pipeline   *p;

	PreventCommandIfReadOnly("etl_pipeline_create_sequence()");
	pipeline_require_args(fcinfo, 3, "name, command and source");
	name = args_text(fcinfo, 0);
	command = args_text(fcinfo, 1);
	source = PG_GETARG_OID(2);
	key_column = args_isnull(fcinfo, 3) ? NULL : pstrdup(NameStr(*PG_GETARG_NAME(3)));
	max_batch_size = args_isnull(fcinfo, 4) ? 0 : PG_GETARG_INT64(4);
	every = args_isnull(fcinfo, 5) ?
		DatumGetIntervalP(DirectFunctionCall3(interval_in, CStringGetDatum("1 minute"),
											  ObjectIdGetDatum(InvalidOid), Int32GetDatum(-1))) :
		PG_GETARG_INTERVAL_P(5);
	on_failure = args_isnull(fcinfo, 6) ? "block" : args_text(fcinfo, 6);
	max_attempts = args_isnull(fcinfo, 7) ? 5 : PG_GETARG_INT32(7);

	pipeline_check_name(name);
	period_init(&spec, now, every, "UTC");
	if (!args_isnull(fcinfo, 4) && max_batch_size < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("max_batch_size must be at least 1"),
				 errdetail("It is " INT64_FORMAT ".", max_batch_size)));
	pipeline_check_on_failure(on_failure);
	pipeline_check_range("max_attempts", max_attempts, 1, 100);
	period_check_range_command(command);
	seq = sequence_check_source(source, &key_column);

	SPI_connect();
	args[0] = CStringGetTextDatum(name);
	args[1] = ObjectIdGetDatum(GetUserId());
	args[2] = DirectFunctionCall1(namein, CStringGetDatum(GetUserNameFromId(GetUserId(), false)));
	args[3] = CStringGetTextDatum(command);
	args[4] = IntervalPGetDatum(every);
	args[5] = TimestampTzGetDatum(now);
	args[6] = CStringGetTextDatum(on_failure);
	args[7] = Int32GetDatum(max_attempts);
	args[8] = ObjectIdGetDatum(source);
	args[9] = DirectFunctionCall1(namein, CStringGetDatum(key_column));
	args[10] = ObjectIdGetDatum(seq);
	args[11] = Int64GetDatum(max_batch_size);
	nulls[11] = args_isnull(fcinfo, 4) ? 'n' : ' ';
	ledger_exec_as_owner("INSERT INTO idem_etl.pipelines (name, owner_oid, owner, command,"
						 " every, start, lag, lookback, time_zone, on_failure, max_attempts,"
						 " kind, source_oid, key_column, sequence_oid, max_batch_size)"
						 " VALUES ($1, $2, $3, $4, $5, $6, '0', 0, 'UTC', $7, $8,"
						 " 'sequence', $9, $10, $11, $12)"
						 " ON CONFLICT (owner_oid, name) DO NOTHING RETURNING pipeline_id",
						 12, argtypes, args, nulls, SPI_OK_INSERT_RETURNING);
	pipeline_check_inserted(name);
	p = pipeline_load(name);
	pipeline_schedule(p, now, 1);
	SPI_finish();
	PG_RETURN_INT64(p->id);
}
