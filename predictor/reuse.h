/*
 * reuse.h - when will a region be used next? The estimate behind next-use
 * eviction (policy/nextuse.c).
 *
 * A training loop repeats: the launches of one iteration come back in the
 * next, in the same order, and so do the uses of every region (by its
 * stable key, regionkey.h). So the uses of a key in the last period,
 * shifted by one period, are its next uses:
 *
 *     next(k) = min { u + P : u a use of k, u > now - P }
 *
 * where the clock counts launches and P is the period in launches. P is not
 * told (mt_mark_iteration() is optional): it is the most frequent distance
 * between two launches of one identity (identities name a function and its
 * footprint's keys, so most of them occur once per iteration), kept by a
 * Misra-Gries summary of the recent distances, so a changed loop (a longer
 * sequence, gradient accumulation) is relearned.
 *
 * Each key keeps its last RING uses. A key used more often than RING times
 * per period has no use from one period ago left in its ring: its next use
 * is then expected one mean gap after its last (it is used all the time).
 *
 * Unknown (0) when the period is not known yet, or the key has never been
 * used. Pure logic: no CUDA, no pager; one caller at a time.
 */
#ifndef MT_REUSE_H
#define MT_REUSE_H

#include <stddef.h>
#include <stdint.h>

typedef struct mt_reuse mt_reuse_t;

/* A new estimator, or NULL when out of memory. */
mt_reuse_t *_mt_reuse_create(void);
void _mt_reuse_destroy(mt_reuse_t *r);

/* A launch of identity id (nonzero) begins: the clock ticks; returns the
 * new clock, the time of this launch's uses. */
uint64_t _mt_reuse_launch(mt_reuse_t *r, uint64_t id);
/* Key (nonzero) is used by the current launch. Returns 0 or -ENOMEM (the
 * use is then not remembered: an estimate is lost, nothing else). */
int _mt_reuse_use(mt_reuse_t *r, uint64_t key);
/* The clock time of key's next use after the current launch, or 0 when
 * unknown. */
uint64_t _mt_reuse_next(const mt_reuse_t *r, uint64_t key);

uint64_t _mt_reuse_now(const mt_reuse_t *r);
/* The period in launches, 0 while unknown. */
uint64_t _mt_reuse_period(const mt_reuse_t *r);
/* Memory held by its tables, bytes. */
size_t _mt_reuse_bytes(const mt_reuse_t *r);

#endif
