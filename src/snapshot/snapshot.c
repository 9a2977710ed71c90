/*
 * snapshot.c
 *		etl_snapshot: keep the history of a source in a table of versions
 *		(a slowly changing dimension of type 2), so that applying a batch
 *		once or many times gives the same history.
 *
 * The steps, as etl_upsert_batch's: stage the source once (stage.c),
 * fingerprinting it on the way; skip when the run_key's latest run had the
 * same fingerprint; refuse NULL keys; find the rows that open a version
 * (snapshot_versions.c); close the current versions they follow and insert
 * them, then treat the keys missing from the batch (snapshot_write.c);
 * record the run.  Snapshots of one target are serialized by the lock
 * replacements of a plain table take (ledger_lock_table).
 */
#include "postgres.h"

#include "access/stratnum.h"
#include "access/xact.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "fmgr.h"
#include "tcop/utility.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/rls.h"
#include "utils/timestamp.h"
#include "utils/typcache.h"

#include "citus/citus_target.h"
#include "snapshot/snapshot.h"
#include "stage/evolve.h"
#include "state/audit.h"
#include "state/ledger.h"
#include "state/progress.h"
#include "util/args.h"
#include "util/settings.h"
#include "util/sql.h"

PG_FUNCTION_INFO_V1(etl_snapshot);

typedef struct SnapshotArgs
{
	Oid			target;
	char	   *source;
	ArrayType  *key_columns;
	char	   *updated_at;
	bool		has_valid_at;
	TimestampTz valid_at;
	ArrayType  *check_columns;
	ArrayType  *exclude_columns;
	char	   *hard_deletes;
	bool		allow_shrink;
	char	   *valid_from;
	char	   *valid_to;
	char	   *is_deleted;
	char	   *current_valid_to;
	char	   *run_key;
	char	   *expect;
	char	   *on_schema_change;
} SnapshotArgs;

/*
 * alias is a current version: valid_to NULL, or the sentinel current_valid_to;
 * with live, and not a deletion record either.
 */
void
snapshot_append_current(StringInfo buf, SnapshotSpec *s, const char *alias, bool live)
{
	const char *vt = quote_identifier(s->valid_to);

	if (s->current_to)
		appendStringInfo(buf, "%s.%s %s %s", alias, vt, s->veq, s->current_to);
	else
		appendStringInfo(buf, "%s.%s IS NULL", alias, vt);
	if (live && s->is_deleted)
		appendStringInfo(buf, " AND %s.%s IS NOT TRUE", alias, quote_identifier(s->is_deleted));
}

/* A row of the batch whose updated_at is NULL: 22004, naming its key. */
void
snapshot_refuse_null_date(SnapshotSpec *s, const char *key)
{
	ereport(ERROR,
			(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
			 errmsg("updated_at column \"%s\" is NULL in a row of the batch for \"%s\"",
					s->updated_at, s->target->relname),
			 errdetail("The row has key %s.", key),
			 errhint("Every row must say when it became valid; filter or fix the row in the source query.")));
}

static TargetColumn *
required_column(TargetInfo *target, const char *name, const char *argname)
{
	TargetColumn *col = target_column(target, name);

	if (col == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("%s \"%s\" of relation \"%s\" does not exist",
						argname, name, target->relname),
				 errhint("Name the column as it is in the catalog, without quotes.")));
	if (!col->writable)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("%s \"%s\" of relation \"%s\" is a generated column",
						argname, name, target->relname),
				 errdetail("idem_etl never writes generated columns or GENERATED ALWAYS identity columns."),
				 errhint("Name a column that etl_snapshot can write.")));
	return col;
}

static void
require_type(TargetInfo *target, TargetColumn *col, Oid typid, const char *argname,
			 const char *why)
{
	if (col->typid != typid)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("%s \"%s\" of relation \"%s\" has type %s, not %s",
						argname, col->name, target->relname,
						format_type_be(col->typid), format_type_be(typid)),
				 errdetail("%s", why)));
}

/*
 * The key columns: named by key_columns (the target keeps several versions
 * of a key, so no unique index names them), each compared with its type's
 * default equality.
 */
static TargetKey *
snapshot_key(TargetInfo *target, ArrayType *key_columns)
{
	TargetKey  *key = palloc0(sizeof(TargetKey));

	key->names = args_names(key_columns, "key_columns", &key->ncolumns);
	if (key->ncolumns == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("key_columns must not be empty"),
				 errhint("Name the columns that identify a row of the source.")));
	key->eqops = palloc(sizeof(char *) * key->ncolumns);
	for (int i = 0; i < key->ncolumns; i++)
	{
		TargetColumn *col = required_column(target, key->names[i], "key column");
		TypeCacheEntry *tc = lookup_type_cache(col->typid, TYPECACHE_EQ_OPR | TYPECACHE_LT_OPR);

		if (!OidIsValid(tc->eq_opr) || !OidIsValid(tc->lt_opr))
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_FUNCTION),
					 errmsg("key column \"%s\" has type %s, which has no ordering",
							col->name, format_type_be(col->typid)),
					 errhint("Use key columns of types with a default btree operator class.")));
		key->eqops[i] = sql_operator(tc->eq_opr);
	}
	return key;
}

/* The validity columns, their type and its operators. */
static void
validity_columns(SnapshotSpec *s, const SnapshotArgs *args)
{
	TargetInfo *target = s->target;
	TargetColumn *vf = required_column(target, args->valid_from, "valid_from_column");
	TargetColumn *vt = required_column(target, args->valid_to, "valid_to_column");
	TypeCacheEntry *tc;
	Oid			le = InvalidOid;

	if (strcmp(vf->name, vt->name) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("valid_from_column and valid_to_column are both \"%s\"", vf->name),
				 errhint("Name two columns: where a version starts, and where it ends.")));
	require_type(target, vt, vf->typid, "valid_to_column",
				 "valid_from and valid_to must have the same type.");
	s->valid_from = vf->name;
	s->valid_to = vt->name;
	s->vtype = vf->typid;
	s->vcast = psprintf("::%s", format_type_extended(vf->typid, vf->typmod,
													 FORMAT_TYPE_TYPEMOD_GIVEN | FORMAT_TYPE_FORCE_QUALIFY));
	tc = lookup_type_cache(vf->typid, TYPECACHE_EQ_OPR | TYPECACHE_BTREE_OPFAMILY);
	if (OidIsValid(tc->btree_opf))
		le = get_opfamily_member(tc->btree_opf, tc->btree_opintype, tc->btree_opintype,
								 BTLessEqualStrategyNumber);
	if (!OidIsValid(tc->eq_opr) || !OidIsValid(le))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_FUNCTION),
				 errmsg("valid_from_column \"%s\" has type %s, which has no ordering",
						vf->name, format_type_be(vf->typid)),
				 errhint("Use timestamptz validity columns.")));
	s->veq = sql_operator(tc->eq_opr);
	s->vle = sql_operator(le);
	if (args->is_deleted)
	{
		TargetColumn *del = required_column(target, args->is_deleted, "is_deleted_column");

		require_type(target, del, BOOLOID, "is_deleted_column",
					 "It says whether a version records a deletion.");
		s->is_deleted = del->name;
	}
	if (args->current_valid_to)
		s->current_to = psprintf("%s%s", quote_literal_cstr(args->current_valid_to), s->vcast);
}

/*
 * What dates the versions: updated_at, a column of the batch of the
 * validity columns' type, or valid_at, the run's timestamp (which also
 * dates deletions).  Never now(): a rerun of a date must give the same
 * history.  valid_at needs timestamptz validity columns, so that no
 * TimeZone moves it.
 */
static void
validity_source(SnapshotSpec *s, const SnapshotArgs *args)
{
	if (args->updated_at == NULL && !args->has_valid_at)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("etl_snapshot needs updated_at or valid_at"),
				 errdetail("Versions are dated by a column of the batch (updated_at) or by the run's timestamp (valid_at), never by the clock, so that a rerun gives the same history."),
				 errhint("Pass updated_at => 'column', or valid_at => the time the extract describes.")));
	if (args->updated_at)
	{
		TargetColumn *col = required_column(s->target, args->updated_at, "updated_at column");

		require_type(s->target, col, s->vtype, "updated_at column",
					 "It dates the versions, in the validity columns.");
		s->updated_at = col->name;
	}
	if (args->has_valid_at)
	{
		int			nestlevel = settings_canonical_output();

		require_type(s->target, target_column(s->target, s->valid_from), TIMESTAMPTZOID,
					 "valid_from_column", "valid_at is a timestamptz: validity columns of another type would move with the TimeZone setting.");
		s->valid_at = psprintf("%s::pg_catalog.timestamptz",
							   quote_literal_cstr(DatumGetCString(DirectFunctionCall1(timestamptz_out,
																					  TimestampTzGetDatum(args->valid_at)))));
		AtEOXact_GUC(true, nestlevel);
	}
}

static SnapshotDeletes
parse_deletes(const SnapshotArgs *args, SnapshotSpec *s)
{
	const char *d = args->hard_deletes ? args->hard_deletes : "ignore";
	SnapshotDeletes result;

	if (strcmp(d, "ignore") == 0)
		return SNAPSHOT_DELETES_IGNORE;
	if (strcmp(d, "invalidate") == 0)
		result = SNAPSHOT_DELETES_INVALIDATE;
	else if (strcmp(d, "new_record") == 0)
		result = SNAPSHOT_DELETES_NEW_RECORD;
	else
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("hard_deletes must be 'ignore', 'invalidate' or 'new_record', not \"%s\"", d)));
	if (!args->has_valid_at)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("hard_deletes => '%s' needs valid_at", d),
				 errdetail("A key missing from the batch has no row to date its deletion."),
				 errhint("Pass valid_at => the time the extract describes.")));
	if (result == SNAPSHOT_DELETES_NEW_RECORD && s->is_deleted == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("hard_deletes => 'new_record' needs is_deleted_column"),
				 errhint("Add a boolean column to the target and name it in is_deleted_column.")));
	return result;
}

/*
 * The columns whose change opens a version: check_columns, or every column
 * of the batch but the key, updated_at and exclude_columns.
 */
static void
tracked_columns(SnapshotSpec *s, const SnapshotArgs *args)
{
	Stage	   *stage = s->stage;
	char	  **names = NULL;
	int			nnames = 0;
	ArrayType  *arr = args->check_columns ? args->check_columns : args->exclude_columns;
	const char *argname = args->check_columns ? "check_columns" : "exclude_columns";

	if (args->check_columns && args->exclude_columns)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("check_columns and exclude_columns cannot both be given"),
				 errhint("Name the columns to track, or those to ignore, not both.")));
	if (arr)
		names = args_names(arr, argname, &nnames);
	for (int i = 0; i < nnames; i++)
	{
		if (args_name_in(s->key->names, s->key->ncolumns, names[i]))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("column \"%s\" of %s is a key column", names[i], argname),
					 errdetail("Key columns identify rows; a change of key is another row."),
					 errhint("Leave the key columns out of %s.", argname)));
		if (!stage_has_column(stage, names[i]))
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_COLUMN),
					 errmsg("column \"%s\" of %s is missing from the source", names[i], argname),
					 errhint("Name columns of the source query's select list.")));
	}
	s->tracked = palloc(sizeof(char *) * Max(stage->ncolumns, 1));
	s->ntracked = 0;
	for (int i = 0; i < stage->ncolumns; i++)
	{
		const char *col = stage->columns[i];

		if (args->check_columns)
		{
			if (!args_name_in(names, nnames, col))
				continue;
		}
		else if (args_name_in(s->key->names, s->key->ncolumns, col) ||
				 (s->updated_at && strcmp(col, s->updated_at) == 0) ||
				 args_name_in(names, nnames, col))
			continue;
		s->tracked[s->ntracked++] = stage->columns[i];
	}
}

/*
 * The batch's columns against what the snapshot needs and maintains (a key
 * column that is a validity column is refused by one or the other).
 */
static void
check_source_columns(SnapshotSpec *s)
{
	const char *kept[3] = {s->valid_from, s->valid_to, s->is_deleted};

	for (int i = 0; i < s->key->ncolumns; i++)
		if (!stage_has_column(s->stage, s->key->names[i]))
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_COLUMN),
					 errmsg("key column \"%s\" is missing from the source", s->key->names[i]),
					 errhint("Add the column to the source query's select list.")));
	if (s->updated_at && !stage_has_column(s->stage, s->updated_at))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("updated_at column \"%s\" is missing from the source", s->updated_at),
				 errhint("Add the column to the source query's select list.")));
	for (int i = 0; i < 3; i++)
		if (kept[i] && stage_has_column(s->stage, kept[i]))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_COLUMN_REFERENCE),
					 errmsg("column \"%s\" of the source is maintained by etl_snapshot", kept[i]),
					 errdetail("etl_snapshot writes the validity columns (and is_deleted) itself."),
					 errhint("Leave the column out of the source query.")));
}

/*
 * The statements read the target's row identifiers (ctid), which need
 * SELECT on the whole table; they insert the batch's columns and the
 * validity columns, and update valid_to.  DELETE is needed only to replace
 * a version by another dated alike, checked then.
 */
static void
check_privileges(SnapshotSpec *s)
{
	TargetInfo *target = s->target;
	char	  **cols = palloc(sizeof(char *) * (s->stage->ncolumns + 3));
	int			n = 0;

	if (pg_class_aclcheck(target->relid, GetUserId(), ACL_SELECT) != ACLCHECK_OK)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for table %s", target->relname),
				 errdetail("etl_snapshot reads the target's row identifiers (ctid), which need SELECT on the whole table, not on some of its columns."),
				 errhint("Grant SELECT on the table; INSERT and UPDATE may stay on the columns etl_snapshot writes.")));
	for (int i = 0; i < s->stage->ncolumns; i++)
		cols[n++] = s->stage->columns[i];
	cols[n++] = (char *) s->valid_from;
	cols[n++] = (char *) s->valid_to;
	if (s->is_deleted)
		cols[n++] = (char *) s->is_deleted;
	target_check_privileges(target, cols, n, ACL_INSERT);
	cols[0] = (char *) s->valid_to;
	target_check_privileges(target, cols, 1, ACL_UPDATE);
}

/* What makes two applies of the same rows differ: columns and options. */
static char *
fingerprint_options(SnapshotSpec *s, const SnapshotArgs *args)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfoString(&buf, "snapshot\n");
	for (int i = 0; i < s->stage->ncolumns; i++)
	{
		TargetColumn *col = target_column(s->target, s->stage->columns[i]);

		appendStringInfo(&buf, "col %zu:%s %u %d\n", strlen(col->name), col->name,
						 col->typid, col->typmod);
	}
	for (int i = 0; i < s->key->ncolumns; i++)
		appendStringInfo(&buf, "key %zu:%s\n", strlen(s->key->names[i]), s->key->names[i]);
	for (int i = 0; i < s->ntracked; i++)
		appendStringInfo(&buf, "track %zu:%s\n", strlen(s->tracked[i]), s->tracked[i]);
	appendStringInfo(&buf, "valid %zu:%s %zu:%s %s\n", strlen(s->valid_from), s->valid_from,
					 strlen(s->valid_to), s->valid_to, s->vcast);
	if (s->is_deleted)
		appendStringInfo(&buf, "deleted %zu:%s\n", strlen(s->is_deleted), s->is_deleted);
	if (s->current_to)
		appendStringInfo(&buf, "current %zu:%s\n", strlen(s->current_to), s->current_to);
	if (s->updated_at)
		appendStringInfo(&buf, "updated_at %zu:%s\n", strlen(s->updated_at), s->updated_at);
	if (args->has_valid_at)
		appendStringInfo(&buf, "valid_at " INT64_FORMAT "\n", (int64) args->valid_at);
	appendStringInfo(&buf, "deletes %d %d\n", (int) s->deletes, (int) args->allow_shrink);
	if (args->expect)
		appendStringInfo(&buf, "expect %zu:%s\n", strlen(args->expect), args->expect);
	return buf.data;
}

static void
read_args(FunctionCallInfo fcinfo, SnapshotArgs *args)
{
	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || args_isnull(fcinfo, 2))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("target, source and key_columns must not be NULL")));
	memset(args, 0, sizeof(SnapshotArgs));
	args->target = PG_GETARG_OID(0);
	args->source = args_text(fcinfo, 1);
	args->key_columns = args_name_list(fcinfo, 2, "key_columns");
	args->updated_at = args_text(fcinfo, 3);
	args->has_valid_at = !args_isnull(fcinfo, 4);
	if (args->has_valid_at)
		args->valid_at = PG_GETARG_TIMESTAMPTZ(4);
	if (args->has_valid_at && TIMESTAMP_NOT_FINITE(args->valid_at))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("valid_at must be finite")));
	args->check_columns = args_name_list(fcinfo, 5, "check_columns");
	args->exclude_columns = args_name_list(fcinfo, 6, "exclude_columns");
	args->hard_deletes = args_text(fcinfo, 7);
	args->allow_shrink = audit_allow_shrink(fcinfo, 8);
	args->valid_from = args_isnull(fcinfo, 9) ? "valid_from" : args_text(fcinfo, 9);
	args->valid_to = args_isnull(fcinfo, 10) ? "valid_to" : args_text(fcinfo, 10);
	args->is_deleted = args_text(fcinfo, 11);
	args->current_valid_to = args_text(fcinfo, 12);
	args->run_key = args_text(fcinfo, 13);
	args->expect = args_text(fcinfo, 14);
	args->on_schema_change = args_text(fcinfo, 15);
	ledger_check_length("run_key", args->run_key);
}

/*
 * Apply the batch: the versions it opens, then the keys it misses.  Refuses
 * (IE002) to end every current version with an empty batch, or fewer rows
 * than idem_etl.min_replaced_ratio of them, unless allow_shrink.
 */
static void
apply_batch(SnapshotSpec *s, const SnapshotArgs *args, SnapshotCounts *counts)
{
	StagedRel  *versions;
	bool		none = false;

	if (s->deletes != SNAPSHOT_DELETES_IGNORE)
	{
		int64		live = snapshot_write_live_keys(s);

		audit_shrink(idem_min_replaced_ratio, args->allow_shrink, s->stage->nrows,
					 s->stage->nrows, live, s->target->relname, "the current versions");
	}
	s->keys_distinct = stage_keys_distinct(s->stage);
	if (s->keys_distinct && snapshot_write_empty(s))
	{
		/* a first load: every row opens its key's first version */
		progress_phase("writing", s->stage->nrows);
		counts->inserted = snapshot_write_first(s);
	}
	else
	{
		progress_phase("comparing", s->stage->nrows);
		/* a batch in key order that changes nothing: an identical rerun */
		none = s->stage->key_sorted && snapshot_versions_none(s);
		if (none)
			counts->unchanged = s->stage->nrows;
		else
		{
			versions = snapshot_versions(s, counts);
			progress_phase("writing", counts->inserted);
			snapshot_write_versions(s, versions, counts);
			stage_drop(versions);
		}
	}
	if (s->deletes != SNAPSHOT_DELETES_IGNORE && !none)
	{
		int64		deleted;

		progress_phase("deleting", -1);
		deleted = snapshot_write_deletes(s);
		counts->deleted = deleted;
		counts->closed += deleted;
		if (s->deletes == SNAPSHOT_DELETES_NEW_RECORD)
			counts->inserted += deleted;
	}
	if (counts->late > 0)
		ereport(NOTICE,
				(errmsg("%lld late row(s) of the batch for \"%s\" were ignored",
						(long long) counts->late, s->target->relname),
				 errdetail("They are dated before the current version of their key; etl_snapshot never rewrites history."),
				 errhint("Rebuild the history from a full extract to take them in.")));
}

Datum
etl_snapshot(PG_FUNCTION_ARGS)
{
	SnapshotArgs args;
	SnapshotSpec s;
	SnapshotCounts counts;
	LedgerRun	run;
	Datum		values[8];
	bool		nulls[8] = {false, false, false, false, false, false, false, false};
	StringInfoData changes;

	PreventCommandIfReadOnly("etl_snapshot()");
	read_args(fcinfo, &args);
	memset(&s, 0, sizeof(s));
	memset(&counts, 0, sizeof(counts));
	memset(&run, 0, sizeof(run));
	run.started_at = GetCurrentTimestamp();
	run.operation = "snapshot";
	run.run_key = args.run_key;

	SPI_connect();

	/* one snapshot of a target at a time, taken before any lock on it */
	ledger_lock_table(args.target);
	s.target = target_open(args.target, ACL_SELECT | ACL_INSERT | ACL_UPDATE, false);
	citus_target_refuse(s.target, "etl_snapshot");
	initStringInfo(&changes);
	s.target = evolve_target(s.target, args.source, args.on_schema_change,
							 ACL_SELECT | ACL_INSERT | ACL_UPDATE, false, &changes);
	run.schema_changes = changes.len ? changes.data : NULL;
	if (s.target->relkind != RELKIND_RELATION)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("etl_snapshot does not support partitioned table \"%s\"", s.target->relname),
				 errhint("Keep the history in an ordinary table.")));
	if (check_enable_rls(s.target->relid, InvalidOid, true) == RLS_ENABLED)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("row-level security applies to role \"%s\" on \"%s\"",
						GetUserNameFromId(GetUserId(), false), s.target->relname),
				 errdetail("A current version the role cannot see would be opened again beside it."),
				 errhint("Snapshot as a role that bypasses row security (BYPASSRLS, or the table's owner without FORCE ROW LEVEL SECURITY).")));
	progress_start("snapshot", s.target->qualname, args.run_key);
	run.target = s.target->qualname;
	run.target_oid = s.target->relid;
	s.key = snapshot_key(s.target, args.key_columns);
	validity_columns(&s, &args);
	validity_source(&s, &args);
	s.deletes = parse_deletes(&args, &s);
	audit_check_syntax(args.expect);

	s.stage = stage_plan(s.target, args.source, args.run_key != NULL);
	s.stage->key_order = true;
	check_source_columns(&s);
	tracked_columns(&s, &args);
	check_privileges(&s);

	if (args.run_key)
		ledger_lock_key(s.target->relid, run.operation, args.run_key);
	progress_phase("staging", -1);
	stage_load(s.stage, s.target, s.key, false, NULL);
	if (s.stage->null_key_rows > 0)
		ereport(ERROR,
				(errcode(ERRCODE_NOT_NULL_VIOLATION),
				 errmsg("%lld row(s) of the batch for \"%s\" have a NULL key",
						(long long) s.stage->null_key_rows, s.target->relname),
				 errdetail("Key columns (%s) identify rows; NULL never matches a stored version, so every run would open another.",
						   target_key_list(s.key)),
				 errhint("Filter or fix those rows in the source query.")));
	run.batch_rows = s.stage->nrows;
	audit_expect(args.expect, s.stage->name, s.target->relname);
	run.expectation = args.expect;
	run.fingerprint = stage_batch_fingerprint(s.stage, fingerprint_options(&s, &args));

	if (!args.run_key ||
		!ledger_skip_batch(&run, s.target->relname, "snapshot of", &counts.unchanged))
		apply_batch(&s, &args, &counts);
	stage_end(s.stage);

	run.inserted = counts.inserted;
	run.updated = counts.closed + counts.corrected;
	run.unchanged = counts.unchanged;
	run.deleted = counts.deleted;
	values[0] = Int64GetDatum(ledger_record(&run));
	values[1] = Int64GetDatum(counts.inserted);
	values[2] = Int64GetDatum(counts.closed);
	values[3] = Int64GetDatum(counts.corrected);
	values[4] = Int64GetDatum(counts.unchanged);
	values[5] = Int64GetDatum(counts.deleted);
	values[6] = Int64GetDatum(counts.late);
	values[7] = BoolGetDatum(run.skipped);

	progress_end();
	SPI_finish();
	return args_return_row(fcinfo, values, nulls);
}
