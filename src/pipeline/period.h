/*
 * period.h
 *		A pipeline's periods: their bounds in a named time zone, and the
 *		placeholders of its command.
 */
#ifndef IDEM_PERIOD_H
#define IDEM_PERIOD_H

#include "postgres.h"

#include "datatype/timestamp.h"
#include "pgtime.h"

/* How a pipeline divides time: start + n * every, in a zone. */
typedef struct PeriodSpec
{
	TimestampTz start;
	Interval   *every;
	pg_tz	   *tz;
	bool		daily;			/* whole days from a local midnight: run_date
								 * is a date */
} PeriodSpec;

extern pg_tz *period_zone(const char *name);
extern void period_check_every(const Interval *every);
extern void period_init(PeriodSpec *spec, TimestampTz start, Interval *every,
						const char *time_zone);
extern TimestampTz period_start(const PeriodSpec *spec, int64 n);
extern int64 period_index_at(const PeriodSpec *spec, TimestampTz t);
extern char *period_format(const PeriodSpec *spec, TimestampTz t);
extern char *period_run_date(const PeriodSpec *spec, TimestampTz t);
extern void period_check_command(const char *command);
extern char *period_expand(const PeriodSpec *spec, const char *command, int64 n);
extern void period_check_range_command(const char *command);
extern char *period_expand_range(const char *command, int64 from, int64 to);

#endif							/* IDEM_PERIOD_H */
