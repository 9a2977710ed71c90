/*
 * keycheck.h
 *		Whether a batch's keys are distinct, told by their 64-bit hashes,
 *		in memory up to work_mem and in hash-partitioned temporary files
 *		beyond it.
 */
#ifndef IDEM_KEYCHECK_H
#define IDEM_KEYCHECK_H

typedef struct KeyCheck KeyCheck;

extern KeyCheck *keycheck_begin(void);
extern void keycheck_add(KeyCheck *kc, uint64 hash);
extern int64 keycheck_count(KeyCheck *kc);
extern bool keycheck_distinct(KeyCheck *kc);
extern void keycheck_end(KeyCheck *kc);

#endif							/* IDEM_KEYCHECK_H */
