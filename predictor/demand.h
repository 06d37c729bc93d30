/*
 * demand.h - eviction demand by launch, one period back: how many chunks
 * the evictions of the next launches will have to copy out, learned from
 * the same launches one period (a training iteration) ago.
 *
 * Write-behind (libmtalloc/writebehind.c) copies dirty chunks to their host
 * copies while the GPU computes, so that the evictions that take them later
 * copy nothing and the host does not wait. How many to copy, and when, is
 * this: an eviction that needed a copy (or found one made ahead) is
 * recorded at the launch clock it served; the scheduler asks, before each
 * launch t, for the chunks recorded over launches t+1-P .. t+h-P, the next
 * h launches one period P back (predictor/reuse.h learns P). The window of
 * launches, not the prefetch window's regions, because the regions that
 * take the room (a forward pass's new activations) are not allocated yet,
 * and the memory freed meanwhile is not known either: last period's
 * evictions already count both.
 *
 * The records are a log of (clock, cumulative count), one entry per launch
 * with any, in clock order: the window is two binary searches. Memory is
 * one entry per launch that evicted in the last period (entries older than
 * a period behind are dropped), not one per launch.
 * Pure logic: no CUDA, no pager; one caller at a time.
 */
#ifndef MT_DEMAND_H
#define MT_DEMAND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct mt_demand mt_demand_t;

/* An empty history. NULL when out of memory. */
mt_demand_t *_mt_demand_create(void);
void _mt_demand_destroy(mt_demand_t *d);

/* n chunks evicted for launch clock t (t never goes down). -ENOMEM: the
 * record is lost, and the history starts again after it (no window until
 * a full period is recorded again). */
int _mt_demand_record(mt_demand_t *d, uint64_t t, uint32_t n);

/* The chunks recorded for launches t+1-period .. t+h-period (h < period)
 * in *chunks, and in *first the first of the next launches they were for
 * (t+1 .. t+h; 0 when none). False when those launches were not all
 * recorded (the history began later, or was lost) or period is 0: no
 * answer. Drops the entries no later window needs while period stays
 * (those before t+1-period). */
bool _mt_demand_window(mt_demand_t *d, uint64_t t, uint64_t period, unsigned h, size_t *chunks, uint64_t *first);

/* Entries held (for the memory bound in tests and the benchmark). */
size_t _mt_demand_entries(const mt_demand_t *d);

#endif
