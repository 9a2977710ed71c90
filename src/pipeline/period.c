/*
 * period.c
 *		A pipeline's periods: period n runs from start + n * every to start +
 *		(n + 1) * every, computed in the pipeline's time zone as timestamptz
 *		+ interval computes them when TimeZone is that zone (months and days
 *		on the local calendar, hours and less in elapsed time), so that a day
 *		across a change to or from summer time is 23 or 25 hours long, and
 *		hourly periods are 23 or 25 on that day, each exactly once.  Each
 *		bound is computed from start, never from the previous one, so that
 *		months from the 31st do not drift to the 28th.  And the placeholders
 *		of a pipeline's command: {run_date}, {period_start}, {period_end},
 *		{run_key}.
 */
#include "postgres.h"

#include <limits.h>

#include "common/int.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/datetime.h"
#include "utils/timestamp.h"

#include "pipeline/period.h"
#include "worker/jobs.h"

/* A time zone by its name, as AT TIME ZONE accepts it; 22023 otherwise. */
pg_tz *
period_zone(const char *name)
{
	pg_tz	   *tz = pg_tzset(name);

	if (tz == NULL || !pg_tz_acceptable(tz))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("time zone \"%s\" not recognized", name),
				 errhint("Pass a name from pg_timezone_names, such as 'Europe/Berlin' or 'UTC'.")));
	return tz;
}

/*
 * A period is positive, and either months or days and time: a month is not
 * a fixed number of days, so '1 month 1 day' has no steady length.
 */
void
period_check_every(const Interval *every)
{
	if (every->month < 0 || every->day < 0 || every->time < 0 ||
		(every->month == 0 && every->day == 0 && every->time == 0))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("every must be a positive interval"),
				 errhint("Pass a period such as '1 day', '1 hour' or '1 month'.")));
	if (every->month != 0 && (every->day != 0 || every->time != 0))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("every must not mix months with days or hours"),
				 errdetail("A month is not a fixed number of days: periods of months and days would not follow each other evenly."),
				 errhint("Pass whole months, or days and hours.")));
}

void
period_init(PeriodSpec *spec, TimestampTz start, Interval *every, const char *time_zone)
{
	struct pg_tm tm;
	fsec_t		fsec;
	int			tzoff;

	if (TIMESTAMP_NOT_FINITE(start))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("start must be a finite timestamp")));
	period_check_every(every);
	spec->start = start;
	spec->every = every;
	spec->tz = period_zone(time_zone);
	if (timestamp2tm(start, &tzoff, &tm, &fsec, NULL, spec->tz) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				 errmsg("timestamp out of range")));
	spec->daily = every->time == 0 && tm.tm_hour == 0 && tm.tm_min == 0 &&
		tm.tm_sec == 0 && fsec == 0;
}

static void
out_of_range(void)
{
	ereport(ERROR,
			(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
			 errmsg("period out of range")));
}

/* start + n * every in the spec's zone (timestamptz_pl_interval's way). */
TimestampTz
period_start(const PeriodSpec *spec, int64 n)
{
	TimestampTz t = spec->start;
	int64		months;
	int64		days;
	int64		time;

	if (pg_mul_s64_overflow(spec->every->month, n, &months) ||
		pg_mul_s64_overflow(spec->every->day, n, &days) ||
		pg_mul_s64_overflow(spec->every->time, n, &time) ||
		months > INT_MAX || days > INT_MAX)
		out_of_range();
	if (months != 0 || days != 0)
	{
		struct pg_tm tm;
		fsec_t		fsec;
		int			tzoff;

		if (timestamp2tm(t, &tzoff, &tm, &fsec, NULL, spec->tz) != 0)
			out_of_range();
		if (months != 0)
		{
			int64		m = (int64) tm.tm_year * 12 + (tm.tm_mon - 1) + months;

			tm.tm_year = (int) (m / 12);
			tm.tm_mon = (int) (m % 12) + 1;
			/* the 31st of a shorter month is its last day */
			if (tm.tm_mday > day_tab[isleap(tm.tm_year)][tm.tm_mon - 1])
				tm.tm_mday = day_tab[isleap(tm.tm_year)][tm.tm_mon - 1];
		}
		if (days != 0)
		{
			int64		julian = date2j(tm.tm_year, tm.tm_mon, tm.tm_mday) + days;

			if (julian > INT_MAX)
				out_of_range();
			j2date((int) julian, &tm.tm_year, &tm.tm_mon, &tm.tm_mday);
		}
		tzoff = DetermineTimeZoneOffset(&tm, spec->tz);
		if (tm2timestamp(&tm, fsec, &tzoff, &t) != 0)
			out_of_range();
	}
	if (pg_add_s64_overflow(t, time, &t) || !IS_VALID_TIMESTAMP(t))
		out_of_range();
	return t;
}

/*
 * The period that holds t: the largest n with period_start(n) <= t, or -1
 * when t is before start.  Estimated from the period's average length, then
 * stepped to the exact one (a few steps: months differ from 30 days by a
 * few percent).
 */
int64
period_index_at(const PeriodSpec *spec, TimestampTz t)
{
	double		approx = spec->every->month * 30.0 * USECS_PER_DAY +
		spec->every->day * (double) USECS_PER_DAY + spec->every->time;
	int64		n;

	if (t < spec->start)
		return -1;
	n = (int64) (((double) t - (double) spec->start) / approx);
	if (n < 0)
		n = 0;
	while (n > 0 && period_start(spec, n) > t)
		n--;
	while (period_start(spec, n + 1) <= t)
		n++;
	return n;
}

/* t as an ISO timestamp in the spec's zone, with its offset. */
char *
period_format(const PeriodSpec *spec, TimestampTz t)
{
	struct pg_tm tm;
	fsec_t		fsec;
	int			tzoff;
	const char *tzn;
	char		buf[MAXDATELEN + 1];

	if (timestamp2tm(t, &tzoff, &tm, &fsec, &tzn, spec->tz) != 0)
		out_of_range();
	EncodeDateTime(&tm, fsec, true, tzoff, NULL, USE_ISO_DATES, buf);
	return pstrdup(buf);
}

/* The logical date of a period that starts at t: a date for daily periods. */
char *
period_run_date(const PeriodSpec *spec, TimestampTz t)
{
	struct pg_tm tm;
	fsec_t		fsec;
	int			tzoff;

	if (!spec->daily)
		return period_format(spec, t);
	if (timestamp2tm(t, &tzoff, &tm, &fsec, NULL, spec->tz) != 0)
		out_of_range();
	return psprintf("%04d-%02d-%02d", tm.tm_year, tm.tm_mon, tm.tm_mday);
}

/* The placeholders of a time pipeline's command, and of a sequence pipeline's. */
static const char *const period_names[] = {
	"run_date", "period_start", "period_end", "run_key", NULL
};
static const char *const range_names[] = {"from_id", "to_id", "run_key", NULL};

/*
 * The placeholder at p ("{word}": lower-case letters and underscores
 * between braces), as an index into names, -1 when p holds none, -2 for
 * an unknown one.
 */
static int
placeholder_at(const char *p, const char *const names[], int *len)
{
	const char *q = p + 1;

	if (*p != '{')
		return -1;
	while ((*q >= 'a' && *q <= 'z') || *q == '_')
		q++;
	if (*q != '}' || q == p + 1)
		return -1;
	*len = (int) (q - p) + 1;
	for (int i = 0; names[i]; i++)
		if (strlen(names[i]) == (size_t) (q - p - 1) &&
			strncmp(names[i], p + 1, q - p - 1) == 0)
			return i;
	return -2;
}

static char *
expand(const char *command, const char *const names[], char *const values[])
{
	StringInfoData buf;

	initStringInfo(&buf);
	for (const char *p = command; *p;)
	{
		int			len = 0;
		int			i = placeholder_at(p, names, &len);

		if (i == -2)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("unknown placeholder \"%.*s\" in command", len, p),
					 names == range_names ?
					 errhint("The placeholders of a sequence pipeline are {from_id}, {to_id} and {run_key}; write an array literal with braces as ARRAY[...].") :
					 errhint("The placeholders are {run_date}, {period_start}, {period_end} and {run_key}; write an array literal with braces as ARRAY[...].")));
		if (i >= 0)
		{
			appendStringInfoString(&buf, quote_literal_cstr(values[i]));
			p += len;
		}
		else
			appendStringInfoChar(&buf, *p++);
	}
	return buf.data;
}

/*
 * A pipeline's command: known placeholders only (22023), and, with them
 * replaced, one statement that is not transaction control (42601, 0A000,
 * as etl_submit checks a job's).
 */
void
period_check_command(const char *command)
{
	char	   *samples[] = {"2000-01-01", "2000-01-01 00:00:00+00",
	"2000-01-02 00:00:00+00", "2000-01-01"};

	jobs_check_command(expand(command, period_names, samples), "a pipeline's command");
}

/* The same for a sequence pipeline's command. */
void
period_check_range_command(const char *command)
{
	char	   *samples[] = {"1", "2", "1-2"};

	jobs_check_command(expand(command, range_names, samples), "a pipeline's command");
}

/*
 * A sequence pipeline's command for the keys from .. to: {from_id} and
 * {to_id} the bounds (both included), {run_key} "from-to"; each as a
 * quoted literal.
 */
char *
period_expand_range(const char *command, int64 from, int64 to)
{
	char	   *values[3];

	values[0] = psprintf(INT64_FORMAT, from);
	values[1] = psprintf(INT64_FORMAT, to);
	values[2] = psprintf(INT64_FORMAT "-" INT64_FORMAT, from, to);
	return expand(command, range_names, values);
}

/*
 * The command of period n: {period_start} and {period_end} its bounds as
 * ISO timestamps with their offset in the pipeline's zone, {run_date} its
 * local date for daily periods (else its start), {run_key} the same as
 * {run_date}; each as a quoted literal.
 */
char *
period_expand(const PeriodSpec *spec, const char *command, int64 n)
{
	TimestampTz from = period_start(spec, n);
	char	   *values[4];

	values[0] = period_run_date(spec, from);
	values[1] = period_format(spec, from);
	values[2] = period_format(spec, period_start(spec, n + 1));
	values[3] = values[0];
	return expand(command, period_names, values);
}
