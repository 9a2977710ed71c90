/*
 * relinfo.c
 *		What idem_etl needs to know about a target table: its columns, its
 *		keys, and whether the caller may write it.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/pg_attribute.h"
#include "catalog/pg_class.h"
#include "catalog/pg_index.h"
#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/syscache.h"

#include "relinfo.h"

/*
 * Describe the target.  The lock taken here (ROW EXCLUSIVE, as the write will
 * take anyway) keeps its definition stable until the end of the transaction.
 */
TargetInfo *
target_open(Oid relid)
{
	TargetInfo *target = palloc0(sizeof(TargetInfo));
	Relation	rel = table_open(relid, RowExclusiveLock);
	TupleDesc	desc = RelationGetDescr(rel);

	target->relid = relid;
	target->relkind = rel->rd_rel->relkind;
	target->relname = pstrdup(RelationGetRelationName(rel));
	target->qualname = quote_qualified_identifier(get_namespace_name(RelationGetNamespace(rel)),
												  target->relname);
	if (target->relkind != RELKIND_RELATION &&
		target->relkind != RELKIND_PARTITIONED_TABLE)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("\"%s\" is not a table", target->relname),
				 errdetail("idem_etl loads into ordinary and partitioned tables only."),
				 errhint("Pass the table itself, not a view, index, sequence or foreign table.")));

	target->columns = palloc0(sizeof(TargetColumn) * desc->natts);
	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);
		TargetColumn *col;

		if (att->attisdropped)
			continue;
		col = &target->columns[target->ncolumns++];
		col->name = pstrdup(NameStr(att->attname));
		col->attnum = att->attnum;
		col->typid = att->atttypid;
		col->typmod = att->atttypmod;
		col->collation = att->attcollation;
		col->notnull = att->attnotnull;
		col->writable = att->attgenerated == '\0' &&
			att->attidentity != ATTRIBUTE_IDENTITY_ALWAYS;
	}
	table_close(rel, NoLock);
	return target;
}

TargetColumn *
target_column(TargetInfo *target, const char *name)
{
	for (int i = 0; i < target->ncolumns; i++)
		if (strcmp(target->columns[i].name, name) == 0)
			return &target->columns[i];
	return NULL;
}

/* "a, b" for messages */
char *
target_key_list(TargetKey *key)
{
	StringInfoData buf;

	initStringInfo(&buf);
	for (int i = 0; i < key->ncolumns; i++)
		appendStringInfo(&buf, "%s%s", i ? ", " : "", key->names[i]);
	return buf.data;
}

/*
 * Find a unique index usable as ON CONFLICT arbiter on exactly these
 * columns: valid, immediate, not partial, no expressions.
 */
static bool
find_unique_index(Relation rel, TargetKey *key, AttrNumber *attnums)
{
	List	   *indexes = RelationGetIndexList(rel);
	ListCell   *lc;
	bool		found = false;

	foreach(lc, indexes)
	{
		HeapTuple	tup = SearchSysCache1(INDEXRELID, ObjectIdGetDatum(lfirst_oid(lc)));
		Form_pg_index idx;
		bool		match;

		if (!HeapTupleIsValid(tup))
			elog(ERROR, "cache lookup failed for index %u", lfirst_oid(lc));
		idx = (Form_pg_index) GETSTRUCT(tup);
		match = idx->indisunique && idx->indimmediate && idx->indisvalid &&
			idx->indnkeyatts == key->ncolumns &&
			heap_attisnull(tup, Anum_pg_index_indpred, NULL) &&
			heap_attisnull(tup, Anum_pg_index_indexprs, NULL);
		for (int i = 0; match && i < idx->indnkeyatts; i++)
		{
			bool		in_key = false;

			for (int j = 0; j < key->ncolumns; j++)
				in_key |= (idx->indkey.values[i] == attnums[j]);
			match = in_key;
		}
		if (match)
		{
#if PG_VERSION_NUM >= 150000
			key->nulls_not_distinct = idx->indnullsnotdistinct;
#endif
			found = true;
		}
		ReleaseSysCache(tup);
		if (found)
			break;
	}
	list_free(indexes);
	return found;
}

/*
 * The key to merge on: key_columns, or the primary key when it is NULL.
 * Either way a unique index on exactly those columns must exist, because
 * ON CONFLICT needs it as arbiter.
 */
TargetKey *
target_key(TargetInfo *target, ArrayType *key_columns)
{
	TargetKey  *key = palloc0(sizeof(TargetKey));
	Relation	rel = table_open(target->relid, NoLock);
	AttrNumber *attnums;

	if (key_columns == NULL)
	{
		Oid			pk = RelationGetPrimaryKeyIndex(rel);
		HeapTuple	tup;
		Form_pg_index idx;

		if (!OidIsValid(pk))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_COLUMN_REFERENCE),
					 errmsg("relation \"%s\" has no usable primary key", target->relname),
					 errdetail("Without key_columns the batch is merged on the primary key, which must exist and not be deferrable."),
					 errhint("Pass key_columns naming the columns of a unique index, or add a primary key.")));
		tup = SearchSysCache1(INDEXRELID, ObjectIdGetDatum(pk));
		if (!HeapTupleIsValid(tup))
			elog(ERROR, "cache lookup failed for index %u", pk);
		idx = (Form_pg_index) GETSTRUCT(tup);
		key->ncolumns = idx->indnkeyatts;
		key->names = palloc(sizeof(char *) * key->ncolumns);
		for (int i = 0; i < key->ncolumns; i++)
			key->names[i] = get_attname(target->relid, idx->indkey.values[i], false);
		ReleaseSysCache(tup);
	}
	else
	{
		Datum	   *elems;
		bool	   *nulls;

		deconstruct_array(key_columns, TEXTOID, -1, false, TYPALIGN_INT,
						  &elems, &nulls, &key->ncolumns);
		if (key->ncolumns == 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("key_columns must not be empty"),
					 errhint("Pass NULL to merge on the primary key.")));
		key->names = palloc(sizeof(char *) * key->ncolumns);
		for (int i = 0; i < key->ncolumns; i++)
		{
			if (nulls[i])
				ereport(ERROR,
						(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
						 errmsg("key_columns must not contain NULL")));
			key->names[i] = TextDatumGetCString(elems[i]);
			for (int j = 0; j < i; j++)
				if (strcmp(key->names[i], key->names[j]) == 0)
					ereport(ERROR,
							(errcode(ERRCODE_DUPLICATE_COLUMN),
							 errmsg("key column \"%s\" is named more than once", key->names[i])));
		}
	}

	attnums = palloc(sizeof(AttrNumber) * key->ncolumns);
	for (int i = 0; i < key->ncolumns; i++)
	{
		TargetColumn *col = target_column(target, key->names[i]);

		if (col == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_COLUMN),
					 errmsg("key column \"%s\" of relation \"%s\" does not exist",
							key->names[i], target->relname),
					 errhint("Name key columns as they are in the catalog, without quotes.")));
		if (!col->writable)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("key column \"%s\" of relation \"%s\" is a generated column",
							key->names[i], target->relname),
					 errdetail("idem_etl never writes generated columns or GENERATED ALWAYS identity columns, so it cannot merge on one."),
					 errhint("Use GENERATED BY DEFAULT AS IDENTITY, or another unique key.")));
		attnums[i] = col->attnum;
	}

	if (!find_unique_index(rel, key, attnums))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_COLUMN_REFERENCE),
				 errmsg("relation \"%s\" has no unique index on (%s)",
						target->relname, target_key_list(key)),
				 errdetail("ON CONFLICT needs a unique index or constraint on exactly the key columns; partial, deferrable and expression indexes do not qualify."),
				 errhint("Create a unique index on (%s), or pass key_columns naming the columns of an existing one.",
						 target_key_list(key))));
	table_close(rel, NoLock);
	return key;
}

/*
 * The statements check privileges too, but checking first gives one clear
 * error before any work, and covers a skipped rerun, which writes nothing.
 */
void
target_check_privileges(TargetInfo *target, char **columns, int ncolumns,
						AclMode mode)
{
	Oid			userid = GetUserId();

	if (pg_class_aclcheck(target->relid, userid, mode) == ACLCHECK_OK)
		return;
	for (int i = 0; i < ncolumns; i++)
	{
		TargetColumn *col = target_column(target, columns[i]);

		if (pg_attribute_aclcheck(target->relid, col->attnum, userid, mode) != ACLCHECK_OK)
			aclcheck_error(ACLCHECK_NO_PRIV, get_relkind_objtype(target->relkind),
						   target->relname);
	}
	if (ncolumns == 0)
		aclcheck_error(ACLCHECK_NO_PRIV, get_relkind_objtype(target->relkind),
					   target->relname);
}
