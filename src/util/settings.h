/*
 * settings.h
 *		idem_etl's settings (the idem_etl.* GUCs), and where its own state
 *		lives.
 */
#ifndef IDEM_SETTINGS_H
#define IDEM_SETTINGS_H

/* Schema holding the extension's own state (ledger, views). */
#define IDEM_ETL_STATE_SCHEMA "idem_etl"

extern int	idem_keep_replaced; /* s */
extern int	idem_lock_timeout;	/* ms */
extern int	idem_lock_retries;
extern char *idem_partition_time_zone;
extern double idem_min_replaced_ratio;
extern bool idem_allow_shrink;
extern int	idem_max_workers;
extern int	idem_naptime;		/* ms */
extern int	idem_max_backoff;	/* s */
extern int	idem_job_retention; /* s */
extern int	idem_run_retention; /* s; 0: keep every run */
extern bool idem_track_progress;
extern int	idem_citus_inline_rows;
extern bool idem_citus_parallel_shards;

/* True in every process of a server that preloaded the library. */
extern bool idem_preloaded;

extern void settings_define(void);
extern void settings_save(const char *name, const char *value);
extern int	settings_canonical_output(void);

#endif							/* IDEM_SETTINGS_H */
