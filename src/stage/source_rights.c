/*
 * source_rights.c
 *		The source's privileges, checked before it runs, so that a refusal
 *		names the relation with its schema.
 *
 * The executor refuses a relation the role may not read with "permission
 * denied for table sales", without a schema: when the source reads
 * staging.sales and the target is public.sales, the user cannot tell which
 * one it means (an etl_upsert_batch also checks its own rights on the
 * target).  The queries of the source, views, subqueries and CTEs included,
 * are checked as the executor would check them; a relation found readable
 * neither as a table nor by any of its columns is named.  Anything else the
 * executor would refuse (a column not granted) is left to it.
 */
#include "postgres.h"

#include "compat.h"

#include "nodes/nodeFuncs.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"

#include "stage/source_rights.h"
#include "util/args.h"

static bool
check_query(Node *node, void *context)
{
	Oid			denied;
	Oid			role;

	if (node == NULL)
		return false;
	if (!IsA(node, Query))
		return expression_tree_walker(node, check_query, context);
	if (!compat_query_readable((Query *) node) &&
		OidIsValid(denied = compat_query_unreadable_rel((Query *) node, &role)))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for table %s",
						quote_qualified_identifier(get_namespace_name(get_rel_namespace(denied)),
												   get_rel_name(denied))),
				 errdetail("The source query reads it with the rights of role \"%s\"%s.",
						   GetUserNameFromId(role, false),
						   role == GetUserId() ? "" : ", the owner of a view it reads"),
				 errhint("GRANT SELECT on it to that role, or read another relation.")));
	return query_tree_walker((Query *) node, check_query, context, 0);
}

/* Refuse the source (its rewritten queries) if it reads what it may not. */
void
source_rights_check(List *queries)
{
	ErrorContextCallback context;
	ListCell   *lc;

	args_context_push(&context, "source");
	foreach(lc, queries)
		check_query(lfirst(lc), NULL);
	args_context_pop(&context);
}
