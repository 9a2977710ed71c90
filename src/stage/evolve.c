/*
 * evolve.c
 *		Opt-in schema evolution (on_schema_change): the target gains the
 *		source's new columns, and columns whose type the source widens
 *		without loss, before anything is staged.
 *
 * The default ('fail', or NULL) changes nothing: a source column the target
 * lacks is an error (stage_plan).  With 'append_new_columns' the changes
 * are made by one ALTER TABLE in the call's transaction, so a failed load
 * leaves the table as it was, under idem_etl.lock_timeout (it takes ACCESS
 * EXCLUSIVE: it must not queue behind a long reader, holding up everyone
 * behind it).  A partitioned target is altered as a whole, so a partition
 * built afterwards for a replacement has the new columns too.  Columns are
 * added without a default (no rewrite: the existing rows read NULL); a
 * type is changed only within a family and only to a wider type, where no
 * value can be lost (smallint < integer < bigint, real < double precision,
 * numeric to more digits, varchar(n) to varchar(m > n) or text).  Other
 * differences are left to the assignment casts that apply without
 * on_schema_change: no column is ever narrowed or changed across families.
 */
#include "postgres.h"

#include "compat.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/builtins.h"
#include "utils/guc.h"

#include "stage/evolve.h"
#include "util/args.h"
#include "util/settings.h"
#include "util/sql.h"

/* numeric's typmod: precision and scale, -1 when unconstrained */
#define NUMERIC_PRECISION(m) ((((m) - VARHDRSZ) >> 16) & 0xffff)
#define NUMERIC_SCALE(m) (((m) - VARHDRSZ) & 0x7ff)

/* Rank of an integer or float type within its family, 0 for others. */
static int
number_rank(Oid type, Oid *family)
{
	switch (type)
	{
		case INT2OID:
			*family = INT8OID;
			return 1;
		case INT4OID:
			*family = INT8OID;
			return 2;
		case INT8OID:
			*family = INT8OID;
			return 3;
		case FLOAT4OID:
			*family = FLOAT8OID;
			return 1;
		case FLOAT8OID:
			*family = FLOAT8OID;
			return 2;
		default:
			*family = InvalidOid;
			return 0;
	}
}

/*
 * Whether a column of type (to, tomod) holds every value of type (from,
 * frommod) unchanged, both of one family.
 */
static bool
holds_without_loss(Oid to, int32 tomod, Oid from, int32 frommod)
{
	Oid			tofam,
				fromfam;
	int			torank = number_rank(to, &tofam);
	int			fromrank = number_rank(from, &fromfam);

	if (OidIsValid(tofam))
		return tofam == fromfam && torank >= fromrank;
	if (to == TEXTOID)
		return from == TEXTOID || from == VARCHAROID;
	if (to == VARCHAROID)
		return from == VARCHAROID && (tomod < 0 || (frommod >= 0 && tomod >= frommod));
	if (to == NUMERICOID)
		return from == NUMERICOID &&
			(tomod < 0 ||
			 (frommod >= 0 &&
			  NUMERIC_SCALE(tomod) >= NUMERIC_SCALE(frommod) &&
			  NUMERIC_PRECISION(tomod) - NUMERIC_SCALE(tomod) >=
			  NUMERIC_PRECISION(frommod) - NUMERIC_SCALE(frommod)));
	return false;
}

/*
 * Apply on_schema_change (mode) for source to target, which was opened with
 * acl and replacing (target_open): NULL or "fail" change nothing.  Returns
 * the target as it is now (opened again when it changed), and appends to
 * changes what was done, for the ledger ("" when nothing).
 */
TargetInfo *
evolve_target(TargetInfo *target, const char *source, const char *mode,
			  AclMode acl, bool replacing, StringInfo changes)
{
	StringInfoData alter;
	SPIPlanPtr	plan;
	TupleDesc	desc;
	ErrorContextCallback context;
	char	   *body;
	int			nestlevel;

	if (mode == NULL || strcmp(mode, "fail") == 0)
		return target;
	if (strcmp(mode, "append_new_columns") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("on_schema_change must be 'fail' or 'append_new_columns', not \"%s\"", mode)));

	args_context_push(&context, "source");
	body = sql_single_query(source, "source");
	/* a bare VALUES list names no column: it fills the target's in order */
	if (sql_values_width(body) >= 0)
	{
		args_context_pop(&context);
		return target;
	}
	plan = sql_prepare(psprintf("SELECT * FROM (%s\n) AS idem_src", body), 0, NULL);
	args_context_pop(&context);
	desc = ((CachedPlanSource *) linitial(SPI_plan_get_plan_sources(plan)))->resultDesc;

	initStringInfo(&alter);
	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);
		const char *name = NameStr(att->attname);
		TargetColumn *col = target_column(target, name);
		char	   *type = format_type_with_typemod(att->atttypid, att->atttypmod);

		if (col == NULL)
		{
			appendStringInfo(&alter, "%sADD COLUMN %s %s", alter.len ? ", " : "",
							 quote_identifier(name), type);
			appendStringInfo(changes, "%sadded %s %s", changes->len ? "; " : "",
							 quote_identifier(name), type);
		}
		else if (col->writable &&
				 (col->typid != att->atttypid || col->typmod != att->atttypmod) &&
				 !holds_without_loss(col->typid, col->typmod, att->atttypid, att->atttypmod) &&
				 holds_without_loss(att->atttypid, att->atttypmod, col->typid, col->typmod))
		{
			appendStringInfo(&alter, "%sALTER COLUMN %s TYPE %s", alter.len ? ", " : "",
							 quote_identifier(name), type);
			appendStringInfo(changes, "%swidened %s from %s to %s", changes->len ? "; " : "",
							 quote_identifier(name),
							 format_type_with_typemod(col->typid, col->typmod), type);
		}
	}
	SPI_freeplan(plan);
	if (alter.len == 0)
		return target;

	nestlevel = NewGUCNestLevel();
	settings_save("lock_timeout", psprintf("%d", idem_lock_timeout));
	sql_exec(psprintf("ALTER TABLE %s %s", target->qualname, alter.data));
	AtEOXact_GUC(true, nestlevel);
	ereport(NOTICE,
			(errmsg("on_schema_change changed relation \"%s\": %s", target->relname, changes->data)));
	return target_open(target->relid, acl, replacing);
}
