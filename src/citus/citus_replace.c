/*
 * citus_replace.c
 *		Partition replacement on Citus: which targets it swaps on the shards,
 *		the load table distributed with the parent before it is loaded, and
 *		privileges made by statements Citus propagates to the shards.
 *
 * A hash-distributed partitioned table's partitions are distributed tables
 * colocated with it, each shard a partition of the parent's shard on the
 * same worker.  A replacement builds its new partition as such a table
 * before loading it (citus_replace_distribute), so that ATTACH, which
 * Citus runs on every shard of the parent, has no rows to move and the
 * coordinator keeps none.  Everything the swap does afterwards (DETACH,
 * RENAME, ATTACH, GRANT, DROP TABLE) goes through ProcessUtility, where
 * Citus sends it to the shards in the same distributed transaction.
 *
 * Only a database with the extension citus has Citus tables: elsewhere the
 * lookups read pg_extension's index and nothing else.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_attribute.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"

#include "citus/citus_replace.h"
#include "citus/citus_target.h"
#include "util/sql.h"

/*
 * What Citus does with relid: false when it does not manage it (or there
 * is no Citus here); else its partition method ("h" hash, "n" none, ...),
 * its distribution column (NULL unless hashed) and whether this node is
 * the coordinator.
 */
static bool
citus_lookup(Oid relid, char **method, char **column, bool *coordinator)
{
	bool		isnull;

	if (!citus_dist_partition_row(relid))
		return false;
	*method = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
	*column = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 4);
	*coordinator = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc,
											  5, &isnull)) && !isnull;
	return true;
}

/*
 * Refuse, before anything is read or locked, a replacement of a Citus table
 * that it cannot do: on a worker (the swap is the coordinator's distributed
 * transaction), of a table that is not partitioned (its rows would be
 * deleted and inserted from the staged batch, which Citus cannot read), or
 * of a partitioned table Citus does not distribute by hash.
 */
void
citus_replace_check(Oid relid, bool partitioned, const char *operation)
{
	char	   *method;
	char	   *column;
	bool		coordinator;
	const char *relname = get_rel_name(relid);

	if (!citus_lookup(relid, &method, &column, &coordinator))
		return;
	if (!coordinator)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("%s on Citus table \"%s\" must be called on the coordinator",
						operation, relname),
				 errdetail("This node is a Citus worker; the coordinator swaps the partitions of every shard in one distributed transaction."),
				 errhint("Connect to the coordinator and call %s there.", operation)));
	if (!partitioned)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("%s does not support Citus table \"%s\", which is not partitioned",
						operation, relname),
				 errdetail("A table that is not partitioned has its rows deleted and inserted from the staged batch, which Citus cannot read on the shards."),
				 errhint("Partition the table on the column whose values are replaced (PARTITION BY, then create_distributed_table), or load it with etl_upsert_batch.")));
	if (strcmp(method, "h") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("%s does not support Citus table \"%s\"", operation, relname),
				 errdetail("Partitions are swapped on Citus tables distributed by hash only."),
				 errhint("Distribute the table by hash (create_distributed_table), or undistribute it (undistribute_table).")));
}

/*
 * The distribution column of relid when Citus distributes it by hash, else
 * NULL: the replacement then takes its local path.
 */
char *
citus_replace_column(Oid relid)
{
	char	   *method;
	char	   *column;
	bool		coordinator;

	if (!citus_lookup(relid, &method, &column, &coordinator))
		return NULL;
	return column;
}

/*
 * Distribute the empty table qualname on column, colocated with the table
 * colocate_with (both quoted and qualified): its shards are created empty
 * on the workers of the parent's shards, as partitions must be.
 */
void
citus_replace_distribute(const char *qualname, const char *colocate_with, const char *column)
{
	Oid			argtypes[3] = {TEXTOID, TEXTOID, TEXTOID};
	Datum		args[3];

	args[0] = CStringGetTextDatum(qualname);
	args[1] = CStringGetTextDatum(column);
	args[2] = CStringGetTextDatum(colocate_with);
	if (SPI_execute_with_args("SELECT pg_catalog.create_distributed_table($1::pg_catalog.regclass,"
							  " $2, colocate_with => $3)",
							  3, argtypes, args, NULL, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "create_distributed_table failed for %s", qualname);
}

/*
 * The GRANT and REVOKE statements that give table $2 (named $3) exactly the
 * privileges of table $1, on the table and on each column of the same
 * name: first everything $2 grants is revoked, then everything $1 grants is
 * granted again.  A NULL ACL stands for the owner's defaults.
 */
static const char *const privileges_sql =
"WITH f AS (SELECT COALESCE(c.relacl, pg_catalog.acldefault('r', c.relowner)) AS acl"
"  FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) $1),"
" t AS (SELECT COALESCE(c.relacl, pg_catalog.acldefault('r', c.relowner)) AS acl"
"  FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) $2),"
" cols AS (SELECT fa.attname, fa.attacl AS facl, ta.attacl AS tacl"
"  FROM pg_catalog.pg_attribute fa JOIN pg_catalog.pg_attribute ta"
"  ON ta.attrelid OPERATOR(pg_catalog.=) $2 AND ta.attname OPERATOR(pg_catalog.=) fa.attname"
"  AND NOT ta.attisdropped"
"  WHERE fa.attrelid OPERATOR(pg_catalog.=) $1 AND fa.attnum OPERATOR(pg_catalog.>) 0"
"  AND NOT fa.attisdropped AND (fa.attacl IS NOT NULL OR ta.attacl IS NOT NULL)"
"  AND NOT COALESCE(fa.attacl OPERATOR(pg_catalog.=) ta.attacl, false)),"
" who AS (SELECT r.oid AS id, pg_catalog.quote_ident(r.rolname) AS name FROM pg_catalog.pg_roles r"
"  UNION ALL SELECT 0, 'PUBLIC')"
"SELECT s FROM ("
" SELECT 1 AS n, pg_catalog.format('REVOKE ALL ON TABLE %s FROM %s', $3, w.name) AS s"
"  FROM f, t, pg_catalog.aclexplode(t.acl) e JOIN who w ON w.id OPERATOR(pg_catalog.=) e.grantee"
"  WHERE f.acl OPERATOR(pg_catalog.<>) t.acl GROUP BY w.name"
" UNION ALL SELECT 2, pg_catalog.format('GRANT %s ON TABLE %s TO %s%s',"
"  pg_catalog.string_agg(DISTINCT e.privilege_type, ', '), $3, w.name,"
"  CASE WHEN e.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END)"
"  FROM f, t, pg_catalog.aclexplode(f.acl) e JOIN who w ON w.id OPERATOR(pg_catalog.=) e.grantee"
"  WHERE f.acl OPERATOR(pg_catalog.<>) t.acl GROUP BY w.name, e.is_grantable"
" UNION ALL SELECT 3, pg_catalog.format('REVOKE ALL (%I) ON TABLE %s FROM %s', c.attname, $3, w.name)"
"  FROM cols c, pg_catalog.aclexplode(c.tacl) e JOIN who w ON w.id OPERATOR(pg_catalog.=) e.grantee"
"  GROUP BY c.attname, w.name"
" UNION ALL SELECT 4, pg_catalog.format('GRANT %s (%I) ON TABLE %s TO %s%s',"
"  pg_catalog.string_agg(DISTINCT e.privilege_type, ', '), c.attname, $3, w.name,"
"  CASE WHEN e.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END)"
"  FROM cols c, pg_catalog.aclexplode(c.facl) e JOIN who w ON w.id OPERATOR(pg_catalog.=) e.grantee"
"  GROUP BY c.attname, w.name, e.is_grantable"
") p ORDER BY n, s";

/*
 * Whether relid has no privileges of its own: its ACL and its columns'
 * are NULL (the owner's defaults), as a partition's most often are.
 */
static bool
default_privileges(Oid relid)
{
	HeapTuple	tup = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	int			natts;
	bool		none;

	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for relation %u", relid);
	natts = ((Form_pg_class) GETSTRUCT(tup))->relnatts;
	none = heap_attisnull(tup, Anum_pg_class_relacl, NULL);
	ReleaseSysCache(tup);
	for (AttrNumber attnum = 1; none && attnum <= natts; attnum++)
	{
		tup = SearchSysCache2(ATTNUM, ObjectIdGetDatum(relid), Int16GetDatum(attnum));
		if (!HeapTupleIsValid(tup))
			continue;
		none = heap_attisnull(tup, Anum_pg_attribute_attacl, NULL);
		ReleaseSysCache(tup);
	}
	return none;
}

/*
 * Give table "to" (a Citus table, named to_qualname) exactly the privileges
 * of table "from" by GRANT and REVOKE, which Citus runs on the shards too:
 * a catalog write would reach the coordinator's catalog only, and a role
 * granted SELECT there would be refused by the workers.  The grants are
 * made by the caller (the owner, for a superuser): the grantors of "from"
 * are not kept.
 */
void
citus_replace_copy_privileges(Oid from, Oid to, const char *to_qualname)
{
	Oid			argtypes[3] = {OIDOID, OIDOID, TEXTOID};
	Datum		args[3];
	uint64		n;
	SPITupleTable *tuptable;

	/* under the parent's lock: no query when there is nothing to copy */
	if (default_privileges(from) && default_privileges(to))
		return;
	args[0] = ObjectIdGetDatum(from);
	args[1] = ObjectIdGetDatum(to);
	args[2] = CStringGetTextDatum(to_qualname);
	if (SPI_execute_with_args(privileges_sql, 3, argtypes, args, NULL, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "reading the privileges of relation %u failed", from);
	n = SPI_processed;
	tuptable = SPI_tuptable;
	for (uint64 i = 0; i < n; i++)
		sql_exec(SPI_getvalue(tuptable->vals[i], tuptable->tupdesc, 1));
}
