/*
 * snapshot_ddl.c
 *		etl_snapshot_ddl: the indexes and constraints etl_snapshot
 *		recommends for a history table, printed, never run: etl_snapshot
 *		creates nothing behind the user's back.
 */
#include "postgres.h"

#include "compat.h"

#include "catalog/pg_type.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"

#include "util/args.h"
#include "util/sql.h"

PG_FUNCTION_INFO_V1(etl_snapshot_ddl);

/* The built-in range type over the validity columns' type, or NULL. */
static const char *
range_type(Oid typid)
{
	switch (typid)
	{
		case TIMESTAMPTZOID:
			return "tstzrange";
		case TIMESTAMPOID:
			return "tsrange";
		case DATEOID:
			return "daterange";
		case INT4OID:
			return "int4range";
		case INT8OID:
			return "int8range";
		case NUMERICOID:
			return "numrange";
		default:
			return NULL;
	}
}

/*
 * etl_snapshot_ddl(target, key_columns, valid_from_column, valid_to_column,
 * current_valid_to): a unique index on the key of the current versions (no
 * key ever has two), an index on (key, valid_from) for the history, and,
 * from PostgreSQL 18, a temporal key: no two versions of a key overlap.
 */
Datum
etl_snapshot_ddl(PG_FUNCTION_ARGS)
{
	Oid			relid;
	char	   *relname;
	char	   *qualname;
	char	  **keys;
	int			nkeys;
	const char *vf;
	const char *vt;
	char	   *current = args_text(fcinfo, 4);
	Oid			vtype;
	const char *range;
	StringInfoData buf;
	StringInfoData keylist;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("target and key_columns must not be NULL")));
	relid = PG_GETARG_OID(0);
	relname = get_rel_name(relid);
	if (relname == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("relation with OID %u does not exist", relid)));
	qualname = quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)), relname);
	keys = args_names(args_name_list(fcinfo, 1, "key_columns"), "key_columns", &nkeys);
	if (nkeys == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("key_columns must not be empty")));
	vf = args_isnull(fcinfo, 2) ? "valid_from" : args_text(fcinfo, 2);
	vt = args_isnull(fcinfo, 3) ? "valid_to" : args_text(fcinfo, 3);
	for (int i = 0; i < nkeys + 2; i++)
	{
		const char *col = i < nkeys ? keys[i] : (i == nkeys ? vf : vt);

		if (get_attnum(relid, col) == InvalidAttrNumber)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_COLUMN),
					 errmsg("column \"%s\" of relation \"%s\" does not exist", col, relname)));
	}
	vtype = get_atttype(relid, get_attnum(relid, vf));
	range = range_type(vtype);

	initStringInfo(&keylist);
	sql_append_columns(&keylist, NULL, keys, nkeys);
	initStringInfo(&buf);
	appendStringInfoString(&buf, "-- the current version of a key is unique\n");
	appendStringInfo(&buf, "CREATE UNIQUE INDEX ON %s (%s) WHERE %s ",
					 qualname, keylist.data, quote_identifier(vt));
	if (current)
		appendStringInfo(&buf, "OPERATOR(pg_catalog.=) %s::%s;\n", quote_literal_cstr(current),
						 format_type_be_qualified(vtype));
	else
		appendStringInfoString(&buf, "IS NULL;\n");
	appendStringInfoString(&buf, "-- a key's history, in order\n");
	appendStringInfo(&buf, "CREATE INDEX ON %s (%s, %s);\n", qualname, keylist.data,
					 quote_identifier(vf));
	if (range)
	{
		const char *prefix = COMPAT_HAS_WITHOUT_OVERLAPS ? "" : "-- ";

		appendStringInfo(&buf, "-- no two versions of a key overlap: a temporal key (PostgreSQL 18 and later%s)\n",
						 COMPAT_HAS_WITHOUT_OVERLAPS ? "" : "; this server is older");
		appendStringInfo(&buf, "%sCREATE EXTENSION IF NOT EXISTS btree_gist;\n", prefix);
		appendStringInfo(&buf, "%sALTER TABLE %s ADD COLUMN %s pg_catalog.%s"
						 " GENERATED ALWAYS AS (pg_catalog.%s(%s, %s)) STORED,\n"
						 "%s    ADD UNIQUE (%s, %s WITHOUT OVERLAPS);\n",
						 prefix, qualname, quote_identifier(psprintf("%s_range", vf)), range,
						 range, quote_identifier(vf), quote_identifier(vt),
						 prefix, keylist.data, quote_identifier(psprintf("%s_range", vf)));
	}
	PG_RETURN_TEXT_P(cstring_to_text(buf.data));
}
