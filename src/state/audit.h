/*
 * audit.h
 *		Write-audit-publish: checks of a staged batch before anything is
 *		written (expect), and of a replacement's size (min_replaced_ratio).
 */
#ifndef IDEM_AUDIT_H
#define IDEM_AUDIT_H

/* SQLSTATEs of their own, class IE (idem_etl): see README, "Audit". */
#define ERRCODE_IDEM_EXPECTATION_FAILED MAKE_SQLSTATE('I','E','0','0','1')
#define ERRCODE_IDEM_WOULD_SHRINK		MAKE_SQLSTATE('I','E','0','0','2')

extern void audit_check_syntax(const char *expect);
extern void audit_expect(const char *expect, const char *relation,
						 const char *target);
extern double audit_ratio(FunctionCallInfo fcinfo, int ratio_arg);
extern bool audit_allow_shrink(FunctionCallInfo fcinfo, int n);
extern bool audit_shrink_possible(double ratio, bool allow_shrink, int64 batch_rows);
extern void audit_empty(bool allow_shrink, int64 batch_rows, int64 held,
						const char *target, const char *what);
extern void audit_shrink(double ratio, bool allow_shrink, int64 batch_rows,
						 int64 loaded, int64 held, const char *target,
						 const char *what);

#endif							/* IDEM_AUDIT_H */
