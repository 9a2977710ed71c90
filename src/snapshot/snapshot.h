/*
 * snapshot.h
 *		etl_snapshot: history of a source kept as a slowly changing
 *		dimension of type 2, what its files share.
 */
#ifndef IDEM_SNAPSHOT_H
#define IDEM_SNAPSHOT_H

#include "lib/stringinfo.h"
#include "stage/stage.h"
#include "util/target.h"

typedef enum SnapshotDeletes
{
	SNAPSHOT_DELETES_IGNORE,
	SNAPSHOT_DELETES_INVALIDATE,
	SNAPSHOT_DELETES_NEW_RECORD
} SnapshotDeletes;

/* One call, as its arguments and the target's catalog describe it. */
typedef struct SnapshotSpec
{
	TargetInfo *target;
	Stage	   *stage;
	TargetKey  *key;			/* the key columns; not a unique key of the
								 * target, which keeps several versions */
	char	  **tracked;		/* the columns whose change opens a version */
	int			ntracked;
	const char *updated_at;		/* the column dating each row, or NULL */
	const char *valid_at;		/* the run's timestamp as a SQL literal, or
								 * NULL */
	const char *valid_from;		/* the validity columns */
	const char *valid_to;
	const char *is_deleted;		/* NULL when the target has none */
	const char *current_to;		/* valid_to of a current version as a SQL
								 * literal, or NULL for NULL */
	Oid			vtype;			/* the validity columns' type */
	const char *vcast;			/* "::type", qualified */
	char	   *veq;			/* its operators, as OPERATOR(schema.op) */
	char	   *vle;
	SnapshotDeletes deletes;
	bool		keys_distinct;	/* one row per key in the batch */
} SnapshotSpec;

typedef struct SnapshotCounts
{
	int64		inserted;		/* versions written, deletion records included */
	int64		closed;			/* current versions given a valid_to */
	int64		corrected;		/* current versions replaced: the batch dates
								 * a different row at their valid_from */
	int64		unchanged;		/* rows of the batch that opened nothing */
	int64		deleted;		/* keys found missing from the batch */
	int64		late;			/* rows older than their key's history */
} SnapshotCounts;

/* snapshot.c */
extern void snapshot_append_current(StringInfo buf, SnapshotSpec *s,
									const char *alias, bool live);
extern void snapshot_refuse_null_date(SnapshotSpec *s, const char *key);

/* snapshot_versions.c */
extern StagedRel *snapshot_versions(SnapshotSpec *s, SnapshotCounts *counts);
extern bool snapshot_versions_none(SnapshotSpec *s);

/* snapshot_write.c */
extern void snapshot_write_versions(SnapshotSpec *s, StagedRel *versions,
									SnapshotCounts *counts);
extern int64 snapshot_write_live_keys(SnapshotSpec *s);
extern bool snapshot_write_empty(SnapshotSpec *s);
extern int64 snapshot_write_first(SnapshotSpec *s);
extern int64 snapshot_write_deletes(SnapshotSpec *s);

#endif							/* IDEM_SNAPSHOT_H */
