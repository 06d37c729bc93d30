/*
 * belady.h - the Belady bound: bytes a pager with perfect knowledge of the
 * future (MIN: evict the chunk used farthest ahead) must move to run an
 * access sequence within a GPU capacity.
 *
 * The sequence is built during replay: for each launch, the chunks of its
 * footprint (which must all be resident at once), and region frees. After
 * belady_finish, the bound counts one fetch for every use of a chunk that
 * was evicted before, and one write-back for every eviction of a chunk that
 * will be used again (launches may write what they touch, so a live chunk
 * must be saved; a dead one is dropped) while it is dirty: since its first
 * touch or an access that may write it, and not since it was fetched.
 * First touches of fresh memory cost nothing, as in the pager.
 */
#ifndef MT_BELADY_H
#define MT_BELADY_H

#include <stdbool.h>
#include <stdint.h>

typedef struct belady belady_t;

/* capacity: chunks that fit on the device; chunk: bytes per chunk. */
belady_t *belady_new(uint64_t capacity, uint64_t chunk);
void belady_free(belady_t *b);
/* Appends one launch's chunks (keys unique per chunk of a region: region
 * id << 24 | chunk index, below 2^62); write[i] false: the launch only reads
 * keys[i] (write NULL: it may write them all). Returns 0 or -ENOMEM. */
int belady_launch(belady_t *b, const uint64_t *keys, const bool *write, uint32_t n);
/* Region freed: its chunks (keys region << 24 | 0..nchunks-1) are dead. */
int belady_free_region(belady_t *b, uint64_t region, uint32_t nchunks);

typedef struct belady_result {
  uint64_t fetch_bytes, writeback_bytes;
  uint64_t fetches, writebacks;
  bool infeasible;     /* a launch alone needs more than the capacity */
} belady_result_t;

/* Runs MIN over everything appended. Returns 0 or -ENOMEM. */
int belady_finish(belady_t *b, belady_result_t *out);

#endif
