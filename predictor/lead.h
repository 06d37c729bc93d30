/*
 * lead.h - timeliness feedback for the prefetch scheduler: a region key
 * whose fetch came late is fetched earlier next time.
 *
 * The scheduler (libmtalloc/prefetch.c) prefetches for the next
 * MT_PREFETCH_DEPTH predicted launches. A key whose use still found it
 * late (its stream waited for the prefetch copy, or its chunks were not on
 * the device at all and the launch fetched them on demand) gets a lead: the
 * number of launches beyond the depth at which it is prefetched in the next
 * iteration. Each late use doubles the lead (1, 2, 4, ...) up to the bound
 * given at creation; every eighth use on time takes one launch off it, so a
 * lead that is no longer needed fades and stops taking room early. Slowly:
 * a use is on time mostly because of its lead, and a lead dropped too soon
 * makes the next use late again.
 *
 * Bounded memory: an open-addressed table of `capacity` entries (a power of
 * two); when it is three-quarters full a new late key replaces the entry
 * with the smallest lead in its probe run (the one that matters least).
 * Pure logic: no CUDA, no pager; one caller at a time.
 */
#ifndef MT_LEAD_H
#define MT_LEAD_H

#include <stddef.h>
#include <stdint.h>

typedef struct mt_lead mt_lead_t;

/* A table for at most `capacity` keys (rounded up to a power of two, at
 * least 16) whose leads stay within max_lead launches (1..255). NULL when
 * out of memory or max_lead is 0 (no feedback). */
mt_lead_t *_mt_lead_create(size_t capacity, unsigned max_lead);
void _mt_lead_destroy(mt_lead_t *l);

/* Key (nonzero) was used late: its lead doubles (0 becomes 1), bounded. */
void _mt_lead_late(mt_lead_t *l, uint64_t key);
/* Key was used on time: every eighth such use takes one launch off its
 * lead; a key without a lead is not stored. */
void _mt_lead_on_time(mt_lead_t *l, uint64_t key);
/* Key's lead in launches, 0 when none (or l is NULL). */
unsigned _mt_lead_get(const mt_lead_t *l, uint64_t key);
/* The largest lead any key may have: how much further the walk looks. */
unsigned _mt_lead_max(const mt_lead_t *l);
/* Keys holding a lead now. */
size_t _mt_lead_count(const mt_lead_t *l);

#endif
