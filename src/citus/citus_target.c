/*
 * citus_target.c
 *		Whether a target is a Citus table, and which kind: distributed (by
 *		hash on a column, or in one shard), or a reference table.
 *
 * Only a database with the extension citus has Citus tables: elsewhere the
 * lookup reads pg_extension's index once and nothing else, and the
 * operations take their usual path.  In a Citus database, the table's row
 * in pg_dist_partition says what Citus does with it; the operations that
 * know Citus run on the coordinator only, where the shards' writes are one
 * distributed transaction (two-phase commit on the workers).
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "utils/builtins.h"

#include "citus/citus_target.h"
#include "util/args.h"
#include "util/sql.h"

/*
 * Whether relid is a Citus table: its row of pg_dist_partition, with this
 * node's group, is then the first row of SPI_tuptable (columns: partmethod,
 * repmodel, colocationid, the distribution column's name, whether this
 * node is the coordinator).  Without the extension citus, reads nothing
 * but pg_extension's index.
 */
bool
citus_dist_partition_row(Oid relid)
{
	Oid			argtypes[1] = {OIDOID};
	Datum		values[1];
	SPIPlanPtr	plan;

	if (!OidIsValid(get_extension_oid("citus", true)))
		return false;

	plan = sql_prepare("SELECT p.partmethod::pg_catalog.text, p.repmodel::pg_catalog.text,"
					   " p.colocationid,"
					   " CASE WHEN p.partmethod OPERATOR(pg_catalog.=) 'h'"
					   " THEN pg_catalog.column_to_column_name(p.logicalrelid, p.partkey) END,"
					   " (SELECT g.groupid OPERATOR(pg_catalog.=) 0 FROM pg_catalog.pg_dist_local_group g)"
					   " FROM pg_catalog.pg_dist_partition p"
					   " WHERE p.logicalrelid OPERATOR(pg_catalog.=) $1",
					   1, argtypes);
	values[0] = ObjectIdGetDatum(relid);
	if (SPI_execute_plan(plan, values, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not look up relation %u in pg_dist_partition", relid);
	SPI_freeplan(plan);
	return SPI_processed > 0;
}

/*
 * Refuse a Citus table as the target of an operation that does not
 * support Citus yet (0A000), rather than fail on the shards.
 */
void
citus_target_refuse(TargetInfo *target, const char *operation)
{
	if (!citus_dist_partition_row(target->relid))
		return;
	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("%s does not support Citus table \"%s\" yet", operation, target->relname),
			 errdetail("%s reads the batch staged on the coordinator in statements that Citus would have to run on the shards.",
					   operation),
			 errhint("Load a local table of the coordinator, or load the distributed table with etl_upsert_batch.")));
}

/*
 * What Citus does with the target, NULL for a table Citus does not manage
 * (or no Citus in this database).  A Citus table that the operation cannot
 * write the way it does (append- or range-distributed, a Citus-managed
 * local table), and any Citus table when this node is not the coordinator,
 * are refused before anything is read.
 */
CitusTarget *
citus_target_lookup(TargetInfo *target, const char *operation)
{
	char	   *method;
	char	   *repmodel;
	bool		coordinator;
	bool		colocated;
	bool		isnull;
	CitusTarget *ct;

	if (!citus_dist_partition_row(target->relid))
		return NULL;

	method = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
	repmodel = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2);
	coordinator = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0],
											 SPI_tuptable->tupdesc, 5, &isnull)) && !isnull;
	if (!coordinator)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("%s on Citus table \"%s\" must be called on the coordinator",
						operation, target->relname),
				 errdetail("This node is a Citus worker; idem_etl writes a Citus table's shards in one distributed transaction that the coordinator runs."),
				 errhint("Connect to the coordinator and call %s there.", operation)));

	ct = palloc0(sizeof(CitusTarget));
	colocated = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0],
											SPI_tuptable->tupdesc, 3, &isnull)) != 0;
	if (strcmp(method, "h") == 0)
	{
		ct->kind = CITUS_DISTRIBUTED;
		ct->dist_column = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 4);
	}
	else if (strcmp(method, "n") == 0 && strcmp(repmodel, "t") == 0)
		ct->kind = CITUS_REFERENCE;
	else if (strcmp(method, "n") == 0 && colocated)
		ct->kind = CITUS_DISTRIBUTED;	/* one shard, no distribution column */
	else
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("%s does not support Citus table \"%s\"", operation, target->relname),
				 errdetail("%s", strcmp(method, "n") != 0 ?
						   psprintf("The table is distributed by %s, whose shards Citus cannot merge a batch into in place.",
									strcmp(method, "a") == 0 ? "append" : "range") :
						   "The table is a local table in Citus's metadata (citus_add_local_table_to_metadata), which Citus cannot join with a batch it would have to place first."),
				 errhint("Distribute the table by hash (create_distributed_table) or make it a reference table (create_reference_table).")));
	return ct;
}

/*
 * A distributed target's key must include its distribution column: the
 * merge and the delete run on each shard alone, which decides a key only
 * when equal keys are on one shard.  Citus's unique indexes include it too,
 * so the primary key (the key when key_columns is not given) does; checked
 * before the key's unique index is looked for, so that the error says why.
 */
void
citus_target_check_key(CitusTarget *ct, TargetInfo *target, ArrayType *key_columns)
{
	char	  **names;
	int			n;

	if (ct->kind != CITUS_DISTRIBUTED || ct->dist_column == NULL ||
		key_columns == NULL)
		return;
	names = args_names(key_columns, "key_columns", &n);
	if (args_name_in(names, n, ct->dist_column))
		return;
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_COLUMN_REFERENCE),
			 errmsg("key_columns of distributed table \"%s\" do not include its distribution column \"%s\"",
					target->relname, ct->dist_column),
			 errdetail("Citus merges the batch on each shard alone, which decides a key only when the key's rows are all on one shard."),
			 errhint("Include \"%s\" in key_columns.", ct->dist_column)));
}
