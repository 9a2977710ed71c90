/*
 * sql.h
 *		Building the SQL that idem_etl runs, and running it through SPI as
 *		exactly one statement.
 */
#ifndef IDEM_SQL_H
#define IDEM_SQL_H

#include "executor/spi.h"
#include "lib/stringinfo.h"

/* Raw parse trees; syntax errors point into sql itself. */
extern List *sql_parse(const char *sql);

/* Checks on SQL text taken from an argument; each returns or raises 42601. */
extern int	sql_values_width(const char *query);
extern char *sql_single_query(const char *sql, const char *argname);
extern void sql_check_sort_list(const char *fragment, const char *argname);
extern void sql_check_expression(const char *fragment, const char *argname);

/* SPI wrappers that refuse anything but one statement. */
extern SPIPlanPtr sql_prepare(const char *sql, int nargs, Oid *argtypes);
extern SPIPlanPtr sql_prepare_kept(SPIPlanPtr *cache, const char *sql, int nargs,
								   Oid *argtypes);
extern uint64 sql_exec(const char *sql);
extern void sql_exec_into(SPIPlanPtr plan, DestReceiver *dest, const char *what);
extern uint64 sql_exec_cached(const char *sql);
extern int64 sql_exec_int8(const char *sql);
extern int64 sql_result_int8(int col);

extern ErrorData *sql_try(void (*fn) (void *), void *arg);

/* Fragments: "a.c1, a.c2" and "a.k1 = b.k1 AND ..." over quoted names. */
extern void sql_append_columns(StringInfo buf, const char *alias,
							   char **names, int n);
extern void sql_append_key_match(StringInfo buf, const char *left,
								 const char *right, char **names,
								 char **eqops, int n, bool nulls_match);
extern char *sql_operator(Oid opno);
extern void sql_append_newer_wins(StringInfo buf, const char *stored,
								  const char *incoming, const char *column,
								  const char *ge);

extern int	sql_pin_search_path(void);

#endif							/* IDEM_SQL_H */
