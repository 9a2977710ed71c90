/*
 * ledger.h
 *		The run ledger (idem_etl.runs), the locks that serialize runs, and
 *		writes to the extension's state with its owner's rights.
 */
#ifndef IDEM_LEDGER_H
#define IDEM_LEDGER_H

#include "datatype/timestamp.h"
#include "executor/spi.h"

typedef struct LedgerRun
{
	const char *operation;		/* 'upsert', ... */
	const char *target;			/* quoted qualified name */
	Oid			target_oid;
	const char *run_key;		/* NULL when none */
	const char *fingerprint;
	int64		batch_rows;
	int64		inserted;
	int64		updated;
	int64		unchanged;
	int64		deleted;
	const char *partition_value;	/* replace operations only, else NULL */
	const char *partition_table;
	const char *partition_bound;	/* the partition's FOR VALUES, or the
									 * value's condition on a plain table */
	int64		rows_loaded;
	int64		rows_replaced;
	bool		skipped;
	const char *expectation;	/* the expect that passed, or NULL */
	Oid			partition_oid;	/* replacements and restores of a partition:
								 * the partition left in place */
	int64		corrects;		/* run_id of the run this one corrects, or 0 */
	const char *schema_changes; /* what on_schema_change did (0.3), or NULL */
	TimestampTz started_at;
} LedgerRun;

/* What the latest earlier run under the same run_key looked like. */
typedef struct LedgerPrior
{
	int64		run_id;			/* 0 when there is none */
	char	   *fingerprint;
	int64		rows;			/* rows the run left as the batch's result */
} LedgerPrior;

/* The version of idem_etl's objects in this database (see ledger.c). */
extern char *ledger_objects_version(void);
extern bool ledger_objects_at_least(const char *version);
extern void ledger_require_objects(const char *version, const char *what);

extern void ledger_lock_key(Oid target, const char *operation, const char *key);
extern void ledger_lock_partition(Oid target, const char *bound);
extern void ledger_lock_partitions(Oid target);
extern void ledger_lock_table(Oid target);
extern LedgerPrior ledger_prior_run(Oid target, const char *operation,
									const char *run_key, const char *partition_value);
extern bool ledger_skip_batch(LedgerRun *run, const char *relname, const char *what,
							  int64 *unchanged);

/*
 * What the ledger says about one partition under one run_key: the latest run
 * with that run_key that loaded it, and the first later run that changed it.
 */
typedef struct LedgerPartPrior
{
	int64		applied;		/* 0 when there is none */
	char	   *fingerprint;
	int64		changed_by;		/* 0 when nothing changed it since */
	char	   *changed_op;
	Oid			partition_oid;	/* the partition the applied run left in
								 * place, and its file (InvalidOid: not
								 * recorded, a run made before 0.2) */
	Oid			partition_filenode;
	bool		partition_gone; /* etl_replace_where: a partition the applied
								 * run rebuilt was dropped, replaced or
								 * rewritten since */
} LedgerPartPrior;

extern Oid	ledger_partition_filenode(Oid relid);
extern LedgerPartPrior ledger_partition_prior(Oid target, Oid partoid,
											  const char *run_key, const char *bound,
											  const char *value);
extern LedgerPartPrior ledger_where_prior(Oid target, const char *run_key,
										  const char *bound);
extern int64 ledger_record(const LedgerRun *run);

/* Longest run_key or job_name, in bytes: it must fit in an index entry. */
#define IDEM_MAX_KEY_BYTES 1024

extern int64 ledger_purge(void);
extern void ledger_check_length(const char *argname, const char *value);
extern void ledger_exec_as_owner(const char *sql, int nargs, Oid *argtypes,
								 Datum *args, const char *nulls, int expected);
extern void ledger_exec_as_owner_kept(SPIPlanPtr *cache, const char *sql, int nargs,
									  Oid *argtypes, Datum *args, const char *nulls,
									  int expected);

#endif							/* IDEM_LEDGER_H */
