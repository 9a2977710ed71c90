/*
 * stage.h
 *		Staging a batch: the source query, evaluated once, into a temporary
 *		table with the target's column types; and its fingerprint.
 */
#ifndef IDEM_STAGE_H
#define IDEM_STAGE_H

#include "relinfo.h"

typedef struct Stage
{
	char	   *name;			/* quoted, schema-qualified table holding it */
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
extern char *stage_temp_name(const char *purpose);
extern void stage_drop(const char *name);

#endif							/* IDEM_STAGE_H */
