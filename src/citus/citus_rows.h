/*
 * citus_rows.h
 *		A staged batch as Citus can read it: a few rows as the parameters of
 *		a VALUES list (the whole of a small batch, or a sample of a large
 *		one), or all of them from idem_etl.citus_batch().
 */
#ifndef IDEM_CITUS_ROWS_H
#define IDEM_CITUS_ROWS_H

#include "executor/tuptable.h"
#include "lib/stringinfo.h"
#include "stage/stage.h"

typedef struct CitusRows
{
	TupleDesc	desc;			/* the staged batch's */
	int			nrows;
	HeapTuple  *rows;
} CitusRows;

/* A statement's parameters, filled by citus_rows_append_values. */
typedef struct CitusParams
{
	int			nargs;
	Oid		   *types;
	Datum	   *values;
	char	   *nulls;
} CitusParams;

extern void citus_rows_publish(StagedRel *staged);
extern void citus_rows_unpublish(StagedRel *staged);
extern bool citus_rows_scan(StagedRel *staged,
							bool (*each) (void *arg, TupleTableSlot *slot),
							void *arg);
extern bool citus_rows_read(StagedRel *staged, int64 every, int max_rows,
							Size max_bytes, CitusRows *rows);
extern void citus_rows_append_values(StringInfo sql, CitusRows *rows,
									 const int *atts, int natts, bool ordinal,
									 CitusParams *params);
extern uint64 citus_rows_exec(const char *sql, CitusParams *params);
extern void citus_rows_free(CitusRows *rows);

#endif							/* IDEM_CITUS_ROWS_H */
