/*
 * stage.h
 *		Staging a batch: the source query, evaluated once, into a temporary
 *		table with the target's column types; and its fingerprint.
 */
#ifndef IDEM_STAGE_H
#define IDEM_STAGE_H

#include "executor/spi.h"
#include "relinfo.h"
#include "utils/tuplestore.h"

/*
 * A batch staged in a tuplestore, registered with SPI as an ephemeral named
 * relation: statements read it as name.
 */
typedef struct StagedRel
{
	char	   *name;			/* as written in SQL; needs no quoting */
	TupleDesc	desc;
	Tuplestorestate *store;
	int64		nrows;
	EphemeralNamedRelation enr;
} StagedRel;

typedef struct Stage
{
	char	   *name;			/* the staged relation, or a quoted table name
								 * (stage_fill) */
	StagedRel  *staged;			/* NULL when in a table */
	char	   *body;			/* the source query, checked */
	int			ncolumns;		/* the columns to write, in target order */
	char	  **columns;
	int64		nrows;

	/* Filled by stage_scan, for the key checks of dedup.c: */
	int64		null_key_rows;	/* rows with a NULL in a key column */
	uint64	   *key_hashes;		/* one hash per non-NULL key, or NULL when
								 * the batch was too large to keep them */
	int64		nkey_hashes;
} Stage;

extern Stage *stage_plan(TargetInfo *target, const char *source);
extern bool stage_has_column(Stage *stage, const char *name);
extern void stage_load(Stage *stage, TargetInfo *target);
extern void stage_fill(Stage *stage, const char *into);
extern char *stage_scan(Stage *stage, TargetKey *key, const char *options);
extern StagedRel *stage_query(const char *sql, const char *purpose);
extern void stage_drop(StagedRel *rel);

#endif							/* IDEM_STAGE_H */
