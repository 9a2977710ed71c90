/*
 * source_rights.h
 *		The source's privileges, checked before it runs.
 */
#ifndef IDEM_SOURCE_RIGHTS_H
#define IDEM_SOURCE_RIGHTS_H

#include "nodes/pg_list.h"

extern void source_rights_check(List *queries);

#endif							/* IDEM_SOURCE_RIGHTS_H */
