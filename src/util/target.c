/*
 * target.c
 *		What idem_etl needs to know about a target table: its columns, its
 *		keys, and whether the caller may write it.
 */
#include "postgres.h"

#include "compat.h"

#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/pg_attribute.h"
#include "access/stratnum.h"
#include "catalog/pg_class.h"
#include "catalog/partition.h"
#include "catalog/pg_index.h"
#include "catalog/pg_trigger.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/rls.h"
#include "utils/regproc.h"
#include "utils/syscache.h"
#include "utils/typcache.h"

#include "util/target.h"
#include "util/sql.h"

/*
 * Refuse a caller who has none of the privileges in mode on the table (for
 * SELECT, INSERT and UPDATE, on any of its columns; DELETE is table-wide).
 * Checked before the lock, so that a role without privileges can neither
 * queue a lock on the table nor learn about its keys.
 */
static void
require_some_privilege(Oid relid, const char *relname, AclMode mode)
{
	Oid			userid = GetUserId();
	AclMode		modes[] = {ACL_SELECT, ACL_INSERT, ACL_UPDATE, ACL_DELETE};

	for (size_t i = 0; i < lengthof(modes); i++)
	{
		if ((mode & modes[i]) == 0 ||
			pg_class_aclcheck(relid, userid, modes[i]) == ACLCHECK_OK)
			continue;
		if (modes[i] != ACL_DELETE &&
			pg_attribute_aclcheck_all(relid, userid, modes[i], ACLMASK_ANY) == ACLCHECK_OK)
			continue;
		aclcheck_error(ACLCHECK_NO_PRIV, OBJECT_TABLE, relname);
	}
}

/*
 * Lock the target, after checking that the caller has some of the
 * privileges in mode, and describe it.  The lock keeps its definition
 * stable until the end of the transaction.  ROW EXCLUSIVE, as the write
 * will take anyway; but a plain table's rows are replaced by one call at a
 * time (ledger_lock_table), which takes EXCLUSIVE on the table before its
 * DELETE (replace_lock_writers): a call waiting for the one before must
 * not hold ROW EXCLUSIVE meanwhile, or the two deadlock.  So replacing
 * opens a plain table with ACCESS SHARE.  A table dropped while we waited
 * for the lock is reported by name (42P01), as a statement naming it would.
 */
TargetInfo *
target_open(Oid relid, AclMode mode, bool replacing)
{
	TargetInfo *target = palloc0(sizeof(TargetInfo));
	char	   *relname = get_rel_name(relid);
	char		relkind;
	Relation	rel;
	TupleDesc	desc;

	if (relname == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("relation with OID %u does not exist", relid)));
	relkind = get_rel_relkind(relid);

	/*
	 * Checked before opening it: table_open's own error for an index differs
	 * between majors, and a view or sequence needs no lock here.
	 */
	if (relkind != RELKIND_RELATION && relkind != RELKIND_PARTITIONED_TABLE)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("\"%s\" is not a table", relname),
				 errdetail("idem_etl loads into ordinary and partitioned tables only."),
				 errhint("Pass the table itself, not a view, index, sequence or foreign table.")));
	/* named with its schema: a source may read a table of the same name */
	require_some_privilege(relid, quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)),
															 relname), mode);
	LockRelationOid(relid, replacing && relkind == RELKIND_RELATION ?
					AccessShareLock : RowExclusiveLock);
	if (!SearchSysCacheExists1(RELOID, ObjectIdGetDatum(relid)))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("relation \"%s\" does not exist", relname),
				 errdetail("It was dropped while this call waited for its lock.")));
	rel = table_open(relid, NoLock);
	desc = RelationGetDescr(rel);

	target->relid = relid;
	target->relkind = rel->rd_rel->relkind;
	target->relname = pstrdup(RelationGetRelationName(rel));
	target->qualname = quote_qualified_identifier(get_namespace_name(RelationGetNamespace(rel)),
												  target->relname);
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
		col->identity = att->attidentity;
		col->generated = att->attgenerated != '\0';
		col->writable = att->attgenerated == '\0' &&
			att->attidentity != ATTRIBUTE_IDENTITY_ALWAYS;
	}
	target->has_triggers_or_rules = rel->rd_rel->relhasrules;
	if (rel->trigdesc)
		for (int i = 0; i < rel->trigdesc->numtriggers; i++)
			if (!rel->trigdesc->triggers[i].tgisinternal)
				target->has_triggers_or_rules = true;
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

/*
 * A table alias for the SQL idem_etl builds: base, or base_2, base_3, ...,
 * whichever is neither a column of the target nor its name.  So no name the
 * extension invents can hide a user's column or table, or be hidden by one
 * (a column "s" would otherwise win over a row alias "s").
 */
char *
target_alias(TargetInfo *target, const char *base)
{
	char	   *alias = pstrdup(base);

	for (int n = 2; target_column(target, alias) != NULL ||
		 strcmp(alias, target->relname) == 0; n++)
		alias = psprintf("%s_%d", base, n);
	return alias;
}

/*
 * "ONLY " for an ordinary table, "" for a partitioned one.  The target is the
 * named table, as for INSERT ... ON CONFLICT, which checks and writes only
 * it: rows of tables inheriting from it are neither matched nor deleted.
 */
const char *
target_only(TargetInfo *target)
{
	return target->relkind == RELKIND_RELATION ? "ONLY " : "";
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
 * A deferrable primary key (primary == true) or unique constraint on exactly
 * the key columns: ON CONFLICT cannot use it as its arbiter.  Refuse it by
 * name, before ON CONFLICT would with a less helpful message.
 */
static void
refuse_deferrable(Relation rel, TargetInfo *target, TargetKey *key,
				  AttrNumber *attnums, bool primary)
{
	List	   *indexes = RelationGetIndexList(rel);
	ListCell   *lc;

	foreach(lc, indexes)
	{
		HeapTuple	tup = SearchSysCache1(INDEXRELID, ObjectIdGetDatum(lfirst_oid(lc)));
		Form_pg_index idx;
		bool		match;

		if (!HeapTupleIsValid(tup))
			elog(ERROR, "cache lookup failed for index %u", lfirst_oid(lc));
		idx = (Form_pg_index) GETSTRUCT(tup);
		match = idx->indisunique && !idx->indimmediate &&
			(primary ? idx->indisprimary : idx->indnkeyatts == key->ncolumns);
		for (int j = 0; match && !primary && j < key->ncolumns; j++)
		{
			bool		found = false;

			for (int i = 0; i < idx->indnkeyatts; i++)
				found |= idx->indkey.values[i] == attnums[j];
			match = found;
		}
		ReleaseSysCache(tup);
		if (match)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_COLUMN_REFERENCE),
					 errmsg("%s \"%s\" of relation \"%s\" is deferrable",
							primary ? "primary key" : "unique constraint",
							get_rel_name(lfirst_oid(lc)), target->relname),
					 errdetail("INSERT ... ON CONFLICT cannot use a deferrable constraint as its arbiter."),
					 errhint("Recreate the constraint as NOT DEFERRABLE, or merge on other key columns.")));
	}
	list_free(indexes);
}

/*
 * Refuse a unique index on the key columns that would find keys equal that
 * the column's own collation and type do not, or the reverse: a
 * nondeterministic collation on one side only, or an operator class whose
 * equality is not the type's.  ON CONFLICT takes any such index as its
 * arbiter, while the probe, the key hashes and the key ordering compare as
 * the column does.  A case-insensitive index over a case-sensitive column
 * would make 'a' a new key to the probe and a conflict to the index:
 * written at every rerun, or deleted by delete_missing right after being
 * updated.
 */
static void
refuse_other_equality(Relation rel, HeapTuple tup, const int *position,
					  TargetKey *key, AttrNumber *attnums)
{
	Form_pg_index idx = (Form_pg_index) GETSTRUCT(tup);
	bool		isnull;
	oidvector  *indclass = (oidvector *) DatumGetPointer(SysCacheGetAttr(INDEXRELID, tup,
																		 Anum_pg_index_indclass,
																		 &isnull));
	oidvector  *indcoll = (oidvector *) DatumGetPointer(SysCacheGetAttr(INDEXRELID, tup,
																		Anum_pg_index_indcollation,
																		&isnull));

	for (int j = 0; j < key->ncolumns; j++)
	{
		Form_pg_attribute att = TupleDescAttr(RelationGetDescr(rel), attnums[j] - 1);
		Oid			opclass = indclass->values[position[j]];
		Oid			opcintype = get_opclass_input_type(opclass);
		Oid			eqop = get_opfamily_member(get_opclass_family(opclass),
											   opcintype, opcintype,
											   BTEqualStrategyNumber);
		Oid			coll = indcoll->values[position[j]];
		Oid			typeeq = lookup_type_cache(att->atttypid, TYPECACHE_EQ_OPR)->eq_opr;
		const char *differs = NULL;
		char	   *detail = NULL;
		const char *hint = NULL;

		/* deterministic collations all find equal exactly the equal bytes */
		if (coll != att->attcollation &&
			!(get_collation_isdeterministic(coll) &&
			  get_collation_isdeterministic(att->attcollation)))
		{
			differs = "collation";
			detail = psprintf("The index uses collation \"%s\" and the column \"%s\".",
							  OidIsValid(coll) ? get_collation_name(coll) : "none",
							  OidIsValid(att->attcollation) ? get_collation_name(att->attcollation) : "none");
			hint = "Give the column the index's collation (ALTER TABLE ... ALTER COLUMN ... TYPE ... COLLATE ...), or build the unique index with the column's collation.";
		}
		else if (!OidIsValid(eqop) || eqop != typeeq)
		{
			differs = "equality";
			detail = psprintf("The index's operator class compares with operator %s, the type %s with %s.",
							  OidIsValid(eqop) ? format_operator(eqop) : "(none)",
							  format_type_be(att->atttypid),
							  OidIsValid(typeeq) ? format_operator(typeeq) : "(none)");
			hint = "Build the unique index with the type's default operator class.";
		}
		if (differs)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("unique index \"%s\" compares key column \"%s\" with another %s than the column's",
							get_rel_name(idx->indexrelid), key->names[j], differs),
					 errdetail("%s idem_etl matches, hashes and orders keys as the column does, while ON CONFLICT takes the index as its arbiter, so the two could disagree on which keys are equal.",
							   detail),
					 errhint("%s", hint)));
	}
}

/*
 * The unique index ON CONFLICT would take as arbiter for the key columns:
 * unique, immediate, valid, not partial, no expressions, on exactly those
 * columns.  Every such index must compare as the columns do
 * (refuse_other_equality).  Fills key->eqops, key->nulls_not_distinct and
 * key->arbiters (every such index).
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
		int		   *position = palloc(sizeof(int) * key->ncolumns);

		if (!HeapTupleIsValid(tup))
			elog(ERROR, "cache lookup failed for index %u", lfirst_oid(lc));
		idx = (Form_pg_index) GETSTRUCT(tup);
		match = idx->indisunique && idx->indimmediate && idx->indisvalid &&
			idx->indnkeyatts == key->ncolumns &&
			heap_attisnull(tup, Anum_pg_index_indpred, NULL) &&
			heap_attisnull(tup, Anum_pg_index_indexprs, NULL);
		for (int j = 0; match && j < key->ncolumns; j++)
		{
			position[j] = -1;
			for (int i = 0; i < idx->indnkeyatts; i++)
				if (idx->indkey.values[i] == attnums[j])
					position[j] = i;
			match = position[j] >= 0;
		}
		if (match)
		{
			refuse_other_equality(rel, tup, position, key, attnums);
			if (key->arbiters == NULL)
				key->arbiters = palloc(sizeof(Oid) * list_length(indexes));
			key->arbiters[key->narbiters++] = idx->indexrelid;
		}
		if (match && !found)
		{
			key->eqops = palloc(sizeof(char *) * key->ncolumns);
			for (int j = 0; j < key->ncolumns; j++)
				key->eqops[j] = sql_operator(lookup_type_cache(TupleDescAttr(RelationGetDescr(rel), attnums[j] - 1)->atttypid,
															   TYPECACHE_EQ_OPR)->eq_opr);
			key->nulls_not_distinct = idx->indnullsnotdistinct;
			found = true;
		}
		ReleaseSysCache(tup);
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
		Oid			pk = compat_primary_key_index(rel);
		HeapTuple	tup;
		Form_pg_index idx;

		if (!OidIsValid(pk))
			refuse_deferrable(rel, target, key, NULL, true);
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

		if (ARR_NDIM(key_columns) > 1)
			ereport(ERROR,
					(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
					 errmsg("key_columns must be a one-dimensional array"),
					 errdetail("It has %d dimensions.", ARR_NDIM(key_columns)),
					 errhint("Pass the column names as ARRAY['a', 'b'].")));
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

	/*
	 * ON CONFLICT refuses to infer its arbiter when any such one is
	 * deferrable
	 */
	refuse_deferrable(rel, target, key, attnums, false);
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
 * Replacing data deletes and loads whole partitions or values without
 * looking at policies: when row security applies to the caller on relid,
 * that would delete rows it cannot see and load rows its policies forbid.
 * Refuse, as a statement blocked by a policy would.
 */
void
target_check_row_security(Oid relid)
{
	if (check_enable_rls(relid, InvalidOid, true) != RLS_ENABLED)
		return;
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			 errmsg("row-level security applies to role \"%s\" on \"%s\"",
					GetUserNameFromId(GetUserId(), false), get_rel_name(relid)),
			 errdetail("Replacing data would delete rows the role cannot see and load rows its policies may forbid."),
			 errhint("Replace as a role that bypasses row security (BYPASSRLS, or the table's owner without FORCE ROW LEVEL SECURITY), or load with etl_upsert_batch, which applies the policies.")));
}

/*
 * Whether trigger t would fire for an INSERT or a DELETE, at row level
 * (row) or statement level, in this session (session_replication_role
 * decides which enabled states fire, as for any statement).  Internal
 * triggers (foreign keys: the new partition's are checked when its
 * constraints are added) are not the user's.
 */
static bool
fires_on_insert_or_delete(const Trigger *t, bool row)
{
	if (t->tgisinternal || (TRIGGER_FOR_ROW(t->tgtype) != 0) != row ||
		!(TRIGGER_FOR_INSERT(t->tgtype) || TRIGGER_FOR_DELETE(t->tgtype)))
		return false;
	if (SessionReplicationRole == SESSION_REPLICATION_ROLE_REPLICA)
		return t->tgenabled == TRIGGER_FIRES_ON_REPLICA ||
			t->tgenabled == TRIGGER_FIRES_ALWAYS;
	return t->tgenabled == TRIGGER_FIRES_ON_ORIGIN ||
		t->tgenabled == TRIGGER_FIRES_ALWAYS;
}

static void
refuse_triggers_of(Oid relid, bool row, TargetInfo *target)
{
	Relation	rel = table_open(relid, AccessShareLock);

	for (int i = 0; rel->trigdesc && i < rel->trigdesc->numtriggers; i++)
		if (fires_on_insert_or_delete(&rel->trigdesc->triggers[i], row))
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("replacing a partition of \"%s\" would not fire trigger \"%s\" on \"%s\"",
							target->relname, rel->trigdesc->triggers[i].tgname,
							RelationGetRelationName(rel)),
					 errdetail("A replacement swaps a new table in for the partition: no row is inserted or deleted through \"%s\", so triggers on INSERT or DELETE, of its partitions' rows or of the statement, do not run.",
							   target->relname),
					 errhint("If the load may skip the trigger, disable it in the transaction of the call (ALTER TABLE ... DISABLE TRIGGER); to fire it, load with etl_upsert_batch.")));
	table_close(rel, AccessShareLock);
}

/*
 * Refuse to replace partition partoid of target (InvalidOid: to create
 * one) while a trigger would be skipped that an INSERT of the new rows
 * into target, or a DELETE of the replaced ones, would fire: target's
 * statement triggers; the partition's row triggers, its own and those
 * cloned from target and the tables above it; for a new partition, the
 * row triggers it would get from those tables.  Swapping a table in fires
 * none of them, and a BEFORE trigger that changes the rows, or an AFTER
 * trigger that keeps a summary or an audit trail, would be silently
 * bypassed.
 */
void
target_refuse_skipped_triggers(TargetInfo *target, Oid partoid)
{
	refuse_triggers_of(target->relid, false, target);
	if (OidIsValid(partoid))
		refuse_triggers_of(partoid, true, target);
	else
	{
		ListCell   *lc;

		refuse_triggers_of(target->relid, true, target);
		foreach(lc, get_partition_ancestors(target->relid))
			refuse_triggers_of(lfirst_oid(lc), true, target);
	}
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
						   target->qualname);
	}
	if (ncolumns == 0)
		aclcheck_error(ACLCHECK_NO_PRIV, get_relkind_objtype(target->relkind),
					   target->qualname);
}

/* The >= of a newer_column's type, from its default btree operator class. */
char *
target_newer_ge(TargetColumn *col)
{
	TypeCacheEntry *tc = lookup_type_cache(col->typid, TYPECACHE_BTREE_OPFAMILY);
	Oid			ge = InvalidOid;

	if (OidIsValid(tc->btree_opf))
		ge = get_opfamily_member(tc->btree_opf, tc->btree_opintype,
								 tc->btree_opintype, BTGreaterEqualStrategyNumber);
	if (!OidIsValid(ge))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_FUNCTION),
				 errmsg("newer_column \"%s\" has type %s, which has no ordering",
						col->name, format_type_be(col->typid)),
				 errhint("Use a column of an ordered type, such as a timestamp or a version number.")));
	return sql_operator(ge);
}
