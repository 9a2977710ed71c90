/*
 * target.h
 *		What idem_etl needs to know about a target table: its columns, its
 *		keys, and whether the caller may write it.
 */
#ifndef IDEM_TARGET_H
#define IDEM_TARGET_H

#include "access/attnum.h"
#include "utils/acl.h"
#include "utils/array.h"

typedef struct TargetColumn
{
	char	   *name;
	AttrNumber	attnum;
	Oid			typid;
	int32		typmod;
	Oid			collation;
	bool		writable;		/* false for generated and identity ALWAYS */
	bool		generated;		/* a generated column: computed, never copied */
	bool		notnull;
	char		identity;		/* attidentity: '\0', 'a' or 'd' */
} TargetColumn;

typedef struct TargetInfo
{
	Oid			relid;
	char		relkind;
	char	   *relname;		/* unquoted, for messages */
	char	   *qualname;		/* quoted schema.name, for SQL */
	int			ncolumns;
	TargetColumn *columns;
	bool		has_triggers_or_rules;	/* of its own (not constraints'
										 * triggers) */
} TargetInfo;

typedef struct TargetKey
{
	int			ncolumns;
	char	  **names;
	char	  **eqops;			/* "OPERATOR(schema.=)" of each column's
								 * operator class in the unique index */
	bool		nulls_not_distinct;
	int			narbiters;		/* the unique indexes on exactly the key
								 * columns, which ON CONFLICT takes as
								 * arbiters */
	Oid		   *arbiters;
} TargetKey;

extern TargetInfo *target_open(Oid relid, AclMode mode, bool replacing);
extern TargetColumn *target_column(TargetInfo *target, const char *name);
extern TargetKey *target_key(TargetInfo *target, ArrayType *key_columns);
extern void target_check_privileges(TargetInfo *target, char **columns,
									int ncolumns, AclMode mode);
extern char *target_key_list(TargetKey *key);
extern const char *target_only(TargetInfo *target);
extern char *target_alias(TargetInfo *target, const char *base);
extern void target_check_row_security(Oid relid);
extern void target_refuse_skipped_triggers(TargetInfo *target, Oid partoid);
extern char *target_newer_ge(TargetColumn *col);

#endif							/* IDEM_TARGET_H */
