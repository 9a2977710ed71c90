/*
 * stage.h
 *		Staging a batch: the source query, evaluated once, into a tuplestore
 *		with the target's column types (or into a table that becomes a
 *		partition); its fingerprint and key hashes, gathered on the way; for
 *		an upsert, without the rows that cannot win their key (collapse.c).
 */
#ifndef IDEM_STAGE_H
#define IDEM_STAGE_H

#include "executor/spi.h"
#include "util/target.h"
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
	char	   *name;			/* the staged relation; NULL when loaded into
								 * a table (stage_load_into) */
	StagedRel  *staged;
	char	   *body;			/* the source query, checked */
	SPIPlanPtr	plan;			/* SELECT * FROM (body), made by stage_plan
								 * and run by stage_load; SPI_finish frees it */
	int			ncolumns;		/* the columns to write, in target order */
	char	  **columns;
	int64		nrows;			/* as the source produced them */
	int64		ncollapsed;		/* of them, rows that could not win their key,
								 * not staged (collapse.c) */
	bool		fingerprint;	/* hash the rows for the fingerprint (false:
								 * the fingerprint is '') */
	bool		key_order;		/* set before stage_load: watch whether the
								 * keys come in ascending order */

	/* Filled by stage_load: the rows' hashes, summed ... */
	uint64		sum[2];
	/* ... and for the key checks of dedup.c: */
	int64		null_key_rows;	/* rows with a NULL in a key column */
	struct KeyCheck *key_check; /* a hash per non-NULL key, checked by
								 * stage_keys_distinct */
	bool		key_sorted;		/* with key_order: every row staged, keys
								 * strictly ascending as ORDER BY key sorts
								 * them (so distinct), none NULL */
} Stage;

/* The rows of one value in a staged relation sorted on it (stage_runs). */
typedef struct StageRun
{
	Datum		value;			/* the first row's value */
	char	   *text;			/* as its type prints it */
	int64		nrows;
	uint64		sum[2];			/* the rows' hashes, summed */
} StageRun;

/* A staged relation read one group of runs at a time (stage_groups). */
typedef struct StageGroups
{
	StagedRel  *from;
	int			ngroups;
	int			next;
	int64	   *rows;			/* per group */
	TupleTableSlot *slot;
	struct Tuplesortstate *sort;	/* NULL when the rows are read as they are */
	TupleTableSlot *sortslot;
} StageGroups;

extern Stage *stage_plan(TargetInfo *target, const char *source, bool fingerprint);
extern bool stage_has_column(Stage *stage, const char *name);
extern void stage_load(Stage *stage, TargetInfo *target, TargetKey *key,
					   bool collapse, const char *order_by);
extern void stage_load_into(Stage *stage, TargetInfo *target, Oid into);
extern void stage_fingerprint_source(Stage *stage, TargetInfo *target);
extern char *stage_batch_fingerprint(Stage *stage, const char *options);
extern char *stage_fingerprint(Stage *stage, const uint64 *sum, int64 nrows,
							   const char *options);
extern bool stage_keys_distinct(Stage *stage);
extern int *stage_key_attnos(TupleDesc desc, TargetKey *key);
extern StageRun *stage_runs(StagedRel *sorted, bool hash, AttrNumber att, FmgrInfo *cmp,
							Oid collation, int *nruns);
extern StageGroups *stage_groups(StagedRel *sorted, StageRun *runs, int nruns,
								 const int *group_of, int ngroups);
extern int64 stage_next_group(StageGroups *g, TargetInfo *target, Oid into);
extern int64 stage_query_into(const char *sql, TargetInfo *target, Oid into);
extern StagedRel *stage_select_runs(StagedRel *sorted, StageRun *runs, int nruns,
									const bool *take, const char *purpose);
extern void stage_groups_end(StageGroups *g);
extern StagedRel *stage_query(const char *sql, const char *purpose);
typedef bool (*StageRowFilter) (TupleTableSlot *slot, void *arg);
extern StagedRel *stage_query_filtered(const char *sql, const char *purpose,
									   int natts, StageRowFilter keep, void *arg);
extern void stage_drop(StagedRel *rel);
extern void stage_end(Stage *stage);

#endif							/* IDEM_STAGE_H */
