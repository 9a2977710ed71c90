/*
 * worker_status.c
 *		idem_etl.worker_status(): per database, the work the background worker
 *		knows of, and why due jobs wait, if they do.
 */
#include "postgres.h"

#include "compat.h"

#include "commands/dbcommands.h"
#include "fmgr.h"
#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "util/args.h"
#include "worker/worker.h"

PG_FUNCTION_INFO_V1(idem_etl_worker_status);

Datum
idem_etl_worker_status(PG_FUNCTION_ARGS)
{
	TupleDesc	desc;
	Tuplestorestate *store = args_srf_store(fcinfo, &desc);
	TimestampTz now = GetCurrentTimestamp();
	ListCell   *lc;

	foreach(lc, worker_status_list())
	{
		DbStatus   *st = lfirst(lc);
		char	   *dbname = get_database_name(st->dboid);
		Datum		values[7];
		bool		nulls[7] = {false, false, false, false, false, false, false};

		if (dbname == NULL)
			continue;			/* dropped; the launcher forgets it soon */
		values[0] = CStringGetDatum(dbname);
		values[0] = DirectFunctionCall1(namein, values[0]);
		values[1] = Int32GetDatum(st->queued);
		values[2] = Int32GetDatum(st->running);
		if (st->next_due == DT_NOEND)
			nulls[3] = nulls[4] = true;
		else
		{
			values[3] = TimestampTzGetDatum(st->next_due);
			values[4] = DirectFunctionCall2(timestamp_mi, TimestampTzGetDatum(now),
											TimestampTzGetDatum(Min(now, st->next_due)));
		}
		if (st->next_housekeeping == DT_NOEND)
			nulls[5] = true;
		else
			values[5] = TimestampTzGetDatum(st->next_housekeeping);
		if (st->reason[0] == '\0' || st->next_due > now)
			nulls[6] = true;
		else
			values[6] = CStringGetTextDatum(st->reason);
		tuplestore_putvalues(store, desc, values, nulls);
	}
	return (Datum) 0;
}
