/*
 * citus_replace.h
 *		Partition replacement on Citus: which targets it swaps on the shards,
 *		the load table distributed with the parent before it is loaded, and
 *		privileges made by statements Citus propagates to the shards.
 */
#ifndef IDEM_CITUS_REPLACE_H
#define IDEM_CITUS_REPLACE_H

extern void citus_replace_check(Oid relid, bool partitioned, const char *operation);
extern char *citus_replace_column(Oid relid);
extern void citus_replace_distribute(const char *qualname, const char *colocate_with,
									 const char *column);
extern void citus_replace_copy_privileges(Oid from, Oid to, const char *to_qualname);

#endif							/* IDEM_CITUS_REPLACE_H */
