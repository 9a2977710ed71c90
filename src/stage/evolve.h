/*
 * evolve.h
 *		Opt-in schema evolution of the target (on_schema_change).
 */
#ifndef IDEM_EVOLVE_H
#define IDEM_EVOLVE_H

#include "lib/stringinfo.h"
#include "util/target.h"

extern TargetInfo *evolve_target(TargetInfo *target, const char *source,
								 const char *mode, AclMode acl, bool replacing,
								 StringInfo changes);

#endif							/* IDEM_EVOLVE_H */
