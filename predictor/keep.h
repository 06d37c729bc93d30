/*
 * keep.h - region keys whose fetch came late, kept on the device: next-use
 * eviction weighs how late bringing a chunk back would be.
 *
 * Next-use eviction (policy/nextuse.c) takes the chunk needed last, which
 * moves the fewest bytes (Belady). It does not see when those bytes move.
 * A region used only in the last launches of an iteration (the end of the
 * backward pass) is the farthest of all right after its use, so it goes
 * first, and comes back in the last launches, where every other region
 * comes back too: the link (and the drive behind it) is saturated there
 * and the GPU waits for it. Fetching it back in a quieter phase is not
 * possible: its room is full of the regions needed before.
 *
 * So a key used late once the period is known (its launch found chunks in
 * host memory or on NVMe and fetched them on demand) is kept: its next use
 * counts as KEEP_DIV times nearer (_mt_keep_due), and it is evicted after
 * regions needed sooner but on time. Kept keys hold at most a cap of bytes
 * (a quarter of the GPU budget, prefetch.c): past it, late keys are not
 * kept, so the rest of the iteration keeps room to work in. A key stays
 * kept (a kept region is on time, and dropping it would make it late
 * again); a changed period clears the set (another loop).
 *
 * Measured on G10's traces over six iterations (docs/eviction.md,
 * "Eviction keeps what came late"): ResNet152 96.5 -> 98.1-98.3% of ideal
 * from the third iteration, SENet154 92.9 -> 94.3%, the others within 0.3
 * points.
 *
 * Bounded memory: an open-addressed table of `capacity` keys; when it is
 * three-quarters full no key is added. Pure logic: no CUDA, no pager; one
 * caller at a time.
 */
#ifndef MT_KEEP_H
#define MT_KEEP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MT_KEEP_DIV 4 /* a kept key's next use counts this many times nearer */

typedef struct mt_keep mt_keep_t;

/* A set for at most `capacity` keys (rounded up to a power of two, at least
 * 16) of at most cap_bytes bytes in all. NULL when out of memory. */
mt_keep_t *_mt_keep_create(size_t capacity, uint64_t cap_bytes);
void _mt_keep_destroy(mt_keep_t *k);

/* Key (nonzero), of `bytes`, was used late: kept from now on if its bytes
 * fit under the cap (and the table has room). Whether it is kept. */
bool _mt_keep_late(mt_keep_t *k, uint64_t key, uint64_t bytes);
/* Whether key is kept (false for a NULL set). */
bool _mt_keep_has(const mt_keep_t *k, uint64_t key);
/* Forgets every key. */
void _mt_keep_clear(mt_keep_t *k);
/* Bytes of the keys kept. */
uint64_t _mt_keep_bytes(const mt_keep_t *k);
/* The due a kept key is filed by, at clock now: MT_KEEP_DIV times nearer,
 * and still after now; an unknown (0) or passed due is returned as it is. */
uint64_t _mt_keep_due(uint64_t now, uint64_t due);

#endif
