/*
 * snapshot_write.c
 *		The writes of a snapshot: current versions closed (or, dated alike,
 *		replaced), new versions inserted, missing keys invalidated or marked
 *		deleted.
 *
 * Each write is one statement over the versions that snapshot_versions
 * staged; nothing is written for a key that did not change.  The call holds
 * the target's snapshot lock (ledger_lock_table), so the tuple identifiers
 * read by snapshot_versions still name the current versions: no other
 * snapshot of the target runs meanwhile, and a unique index on the key of
 * the current versions (etl_snapshot_ddl) refuses two current rows from
 * anything else.
 */
#include "postgres.h"

#include "utils/builtins.h"

#include "snapshot/snapshot.h"
#include "util/sql.h"

/*
 * The first version of each key that has a current one: (idem_cur,
 * idem_from), as the relation m.
 */
static void
append_firsts(StringInfo sql, SnapshotSpec *s, StagedRel *versions)
{
	if (s->keys_distinct)
		appendStringInfo(sql, "(SELECT idem_cur, idem_from FROM %s WHERE idem_cur IS NOT NULL) m",
						 versions->name);
	else
		appendStringInfo(sql, "(SELECT DISTINCT ON (idem_cur) idem_cur, idem_from FROM %s"
						 " WHERE idem_cur IS NOT NULL ORDER BY idem_cur, idem_from) m",
						 versions->name);
}

/* INSERT INTO target (<source columns>, valid_from, valid_to[, is_deleted]) */
static void
append_insert_into(StringInfo sql, SnapshotSpec *s)
{
	appendStringInfo(sql, "INSERT INTO %s (", s->target->qualname);
	sql_append_columns(sql, NULL, s->stage->columns, s->stage->ncolumns);
	appendStringInfo(sql, ", %s, %s", quote_identifier(s->valid_from),
					 quote_identifier(s->valid_to));
	if (s->is_deleted)
		appendStringInfo(sql, ", %s", quote_identifier(s->is_deleted));
	appendStringInfoString(sql, ") SELECT ");
	sql_append_columns(sql, NULL, s->stage->columns, s->stage->ncolumns);
}

static const char *
current_to(SnapshotSpec *s)
{
	return s->current_to ? s->current_to : psprintf("NULL%s", s->vcast);
}

/*
 * Close or replace the current version of each key that opens one, then
 * insert the new versions; a key's versions follow each other, the last
 * current.
 */
void
snapshot_write_versions(SnapshotSpec *s, StagedRel *versions, SnapshotCounts *counts)
{
	StringInfoData sql;
	const char *vf = quote_identifier(s->valid_from);

	if (counts->corrected > 0)
	{
		target_check_privileges(s->target, NULL, 0, ACL_DELETE);
		initStringInfo(&sql);
		appendStringInfo(&sql, "DELETE FROM ONLY %s t USING ", s->target->qualname);
		append_firsts(&sql, s, versions);
		appendStringInfo(&sql, " WHERE t.ctid OPERATOR(pg_catalog.=) m.idem_cur"
						 " AND t.%s %s m.idem_from", vf, s->veq);
		sql_exec(sql.data);
	}
	if (counts->closed > 0)
	{
		initStringInfo(&sql);
		appendStringInfo(&sql, "UPDATE ONLY %s t SET %s = m.idem_from FROM ",
						 s->target->qualname, quote_identifier(s->valid_to));
		append_firsts(&sql, s, versions);
		appendStringInfo(&sql, " WHERE t.ctid OPERATOR(pg_catalog.=) m.idem_cur"
						 " AND NOT t.%s %s m.idem_from", vf, s->veq);
		sql_exec(sql.data);
	}
	if (counts->inserted == 0)
		return;
	initStringInfo(&sql);
	append_insert_into(&sql, s);
	appendStringInfoString(&sql, ", idem_from, ");
	if (s->keys_distinct)
		appendStringInfoString(&sql, current_to(s));
	else
	{
		appendStringInfoString(&sql, "COALESCE(pg_catalog.lead(idem_from) OVER (PARTITION BY ");
		sql_append_columns(&sql, NULL, s->key->names, s->key->ncolumns);
		appendStringInfo(&sql, " ORDER BY idem_from), %s)", current_to(s));
	}
	if (s->is_deleted)
		appendStringInfoString(&sql, ", false");
	appendStringInfo(&sql, " FROM %s", versions->name);
	sql_exec(sql.data);
}

/* Whether the target holds no row at all. */
bool
snapshot_write_empty(SnapshotSpec *s)
{
	return sql_exec_int8(psprintf("SELECT (NOT EXISTS (SELECT FROM ONLY %s))::pg_catalog.int4::pg_catalog.int8",
								  s->target->qualname)) == 1;
}

/*
 * The first load of an empty target, with one row per key: every row of
 * the batch opens its key's first version, current, inserted straight from
 * the stage (no comparison, no second staging).  A row whose updated_at is
 * NULL is refused first, naming its key.
 */
int64
snapshot_write_first(SnapshotSpec *s)
{
	StringInfoData sql;

	if (s->updated_at)
	{
		initStringInfo(&sql);
		appendStringInfoString(&sql, "SELECT ");
		for (int i = 0; i < s->key->ncolumns; i++)
			appendStringInfo(&sql, "%sb.%s::pg_catalog.text", i ? ", " : "",
							 quote_identifier(s->key->names[i]));
		appendStringInfo(&sql, " FROM %s b WHERE b.%s IS NULL LIMIT 1", s->stage->name,
						 quote_identifier(s->updated_at));
		if (sql_exec(sql.data) > 0)
		{
			StringInfoData key;

			initStringInfo(&key);
			appendStringInfo(&key, "(%s)=(", target_key_list(s->key));
			for (int i = 0; i < s->key->ncolumns; i++)
			{
				char	   *v = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, i + 1);

				appendStringInfo(&key, "%s%s", i ? ", " : "", v ? v : "null");
			}
			appendStringInfoChar(&key, ')');
			snapshot_refuse_null_date(s, key.data);
		}
	}
	initStringInfo(&sql);
	append_insert_into(&sql, s);
	appendStringInfo(&sql, ", %s, %s", s->updated_at ?
					 quote_identifier(s->updated_at) : s->valid_at, current_to(s));
	if (s->is_deleted)
		appendStringInfoString(&sql, ", false");
	appendStringInfo(&sql, " FROM %s", s->stage->name);
	return (int64) sql_exec(sql.data);
}

/* The keys that have a current version not deleted. */
int64
snapshot_write_live_keys(SnapshotSpec *s)
{
	StringInfoData sql;

	initStringInfo(&sql);
	appendStringInfo(&sql, "SELECT pg_catalog.count(*)::pg_catalog.int8 FROM ONLY %s t WHERE ",
					 s->target->qualname);
	snapshot_append_current(&sql, s, "t", true);
	return sql_exec_int8(sql.data);
}

/*
 * Hard deletes: the current versions, not deleted, of the keys missing from
 * the batch end at valid_at; with new_record, a deletion record (is_deleted
 * true) follows each, current.  A current version that starts at valid_at or
 * later is left alone (a late run).  Returns the keys so treated.
 */
int64
snapshot_write_deletes(SnapshotSpec *s)
{
	StringInfoData sql;
	const char *vt = quote_identifier(s->valid_to);

	initStringInfo(&sql);
	if (s->deletes == SNAPSHOT_DELETES_NEW_RECORD)
		appendStringInfoString(&sql, "WITH idem_closed AS (");
	appendStringInfo(&sql, "UPDATE ONLY %s t SET %s = %s WHERE ", s->target->qualname,
					 vt, s->valid_at);
	snapshot_append_current(&sql, s, "t", true);
	appendStringInfo(&sql, " AND NOT %s %s t.%s AND NOT EXISTS (SELECT FROM %s b WHERE ",
					 s->valid_at, s->vle, quote_identifier(s->valid_from), s->stage->name);
	sql_append_key_match(&sql, "t", "b", s->key->names, s->key->eqops, s->key->ncolumns,
						 false);
	appendStringInfoChar(&sql, ')');
	if (s->deletes == SNAPSHOT_DELETES_NEW_RECORD)
	{
		appendStringInfoString(&sql, " RETURNING ");
		sql_append_columns(&sql, "t", s->stage->columns, s->stage->ncolumns);
		appendStringInfoString(&sql, ") ");
		append_insert_into(&sql, s);
		appendStringInfo(&sql, ", %s, %s, true FROM idem_closed", s->valid_at, current_to(s));
	}
	return (int64) sql_exec(sql.data);
}
