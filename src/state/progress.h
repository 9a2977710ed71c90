/*
 * progress.h
 *		Live progress of idem_etl's calls, for the view idem_etl.progress.
 */
#ifndef IDEM_PROGRESS_H
#define IDEM_PROGRESS_H

extern Size progress_shmem_size(void);
extern void progress_shmem_init(void);

extern void progress_start(const char *operation, const char *target,
						   const char *run_key);
extern void progress_phase(const char *phase, int64 rows_total);
extern void progress_rows(int64 rows_done);
extern const char *progress_tick_call(void);
extern void progress_end(void);

#endif							/* IDEM_PROGRESS_H */
