/*
 * sequence.h
 *		Sequence pipelines: the command runs for each new range of keys of an
 *		append-only table.
 */
#ifndef IDEM_SEQUENCE_H
#define IDEM_SEQUENCE_H

#include "postgres.h"

#include "pipeline/pipeline.h"

extern Oid	sequence_check_source(Oid relid, char **key_column);
extern int64 sequence_last_id(const Pipeline *p);
extern int32 sequence_run(Pipeline *p, int32 max_periods, Tuplestorestate *store,
						  TupleDesc desc, bool *blocked, bool *more);

#endif							/* IDEM_SEQUENCE_H */
