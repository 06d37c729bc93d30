/* Description: the read-ahead (readahead.c) inside the pager, on the fake
 * driver with a real NVMe store: a chunk read ahead from NVMe becomes HOST
 * with its NVMe copy still valid, and a later fetch takes it from host
 * memory (no second NVMe read); a fetch that needs a chunk whose read is
 * still in flight waits for that read; freeing a region with reads in
 * flight cancels them and no stale byte reaches the memory reused after;
 * an injected read fault (EIO, a flipped bit) on a read-ahead only drops
 * it: the demand read brings the data back intact; a read-ahead the drive
 * does not answer within the store's bound is given up (a free of its
 * region neither crashes nor loses other data, its ring entry serves
 * another read at once) and, once the drive answers, every byte is back.
 *
 * Read-ahead is driven here region by region (_mt_ra_region, what each
 * launch does for its predicted window), so that no predictor is needed.
 * The store is compiled in with -DMT_FAULT_INJECT, as for test_nvme_tier.c,
 * whose setup this copies with host mappings off (read-ahead needs host
 * copies the CPU can reach). */
#include <criterion/criterion.h>
#include <cuda.h>
#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "nvme_store.h"
#include "pager.h"
#include "pager_internal.h"
#include "stats.h"

#include "tier_fixture.h"

static uint64_t st(const char *name) {
  /* stats by name, so a failure message says which */
#define S(f) if (!strcmp(name, #f)) return mt_stat_get(f);
  S(bytes_nvme_read) S(bytes_nvme_write) S(nvme_spills) S(nvme_loads) S(nvme_drops) S(nvme_errors)
  S(readahead) S(readahead_used) S(readahead_late) S(readahead_spilled)
#undef S
  return 0;
}

/* The first region (in allocation order) but skip (-1: none) whose chunks
 * are all on NVMe. */
static int first_on_nvme_but(const uintptr_t *a, int skip) {
  for (int i = 0; i < NREG; i++) {
    if (i == skip) continue;
    mt_region_t *r = _mt_region_of(P, a[i]);
    bool all = true;
    for (uint32_t k = 0; k < r->nchunks; k++) all &= r->chunks[k].state == CH_NVME;
    if (all) return i;
  }
  return -1;
}

static int first_on_nvme(const uintptr_t *a) {
  return first_on_nvme_but(a, -1);
}

/* Reads ahead the chunks of the region at a (under the lock, as a launch). */
static void read_ahead(uintptr_t a) {
  pthread_mutex_lock(&P->lock);
  P->epoch++;
  cr_assert(_mt_ra_region(P, _mt_region_of(P, a)), "room and read slots for one region");
  pthread_mutex_unlock(&P->lock);
}

/* Polls until every read-ahead of the region at a is done (bounded). */
static void settle(uintptr_t a) {
  mt_region_t *r = _mt_region_of(P, a);
  for (int t = 0; t < 2000; t++) {
    pthread_mutex_lock(&P->lock);
    _mt_ra_poll(P);
    bool busy = false;
    for (uint32_t k = 0; k < r->nchunks; k++) busy |= r->chunks[k].ra != 0 && r->chunks[k].ra != MT_RA_READY;
    pthread_mutex_unlock(&P->lock);
    if (!busy) return;
    usleep(1000);
  }
  cr_assert_fail("the read-ahead did not finish in 2 s");
}

Test(readahead, later_fetch_finds_the_chunk_in_host_memory) {
  start(4, 24, NULL, 0);
  cr_assert_not_null(P->nv, "the tier opened");
  uint32_t *buf = malloc(REG), *want = malloc(REG);
  uintptr_t a[NREG];
  write_n(a, buf, NREG);
  int i = first_on_nvme(a);
  cr_assert_geq(i, 0, "some region is all on NVMe");
  mt_region_t *r = _mt_region_of(P, a[i]);
  uint64_t rd0 = st("bytes_nvme_read"), loads0 = st("nvme_loads");
  read_ahead(a[i]);
  cr_assert_eq(st("readahead"), r->nchunks, "one read per chunk");
  settle(a[i]);
  for (uint32_t k = 0; k < r->nchunks; k++) {
    mt_chunk_t *c = &r->chunks[k];
    cr_assert_eq(c->state, CH_HOST, "chunk %u is in host memory after its read", k);
    cr_assert(c->nv != NULL && _mt_nvme_chunk_valid(c->nv), "chunk %u keeps its NVMe copy", k);
  }
  cr_assert_eq(st("bytes_nvme_read") - rd0, (uint64_t)REG, "the read-ahead read the region once");
  /* the fetch: from host memory, no NVMe read of its own */
  memset(buf, 0xee, REG);
  cr_assert_eq(get(buf, a[i], REG), 0);
  fill(want, REG, (uint32_t)i + 1);
  cr_assert(memcmp(buf, want, REG) == 0, "region %d reads back what was written", i);
  cr_assert_eq(st("nvme_loads"), loads0, "no chunk came from NVMe on the fetch");
  cr_assert_eq(st("bytes_nvme_read") - rd0, (uint64_t)REG, "no second NVMe read");
  cr_assert_eq(st("readahead_used"), r->nchunks);
  cr_assert_eq(r->nra, 0u);
  /* a fetch while the read is still in flight waits for that read */
  int j = first_on_nvme(a);
  cr_assert_geq(j, 0, "another region is on NVMe");
  loads0 = st("nvme_loads");
  read_ahead(a[j]);
  memset(buf, 0xee, REG);
  cr_assert_eq(get(buf, a[j], REG), 0);
  fill(want, REG, (uint32_t)j + 1);
  cr_assert(memcmp(buf, want, REG) == 0, "region %d, fetched with its reads in flight", j);
  cr_assert_eq(st("nvme_loads"), loads0, "it waited for the read-ahead, no second read");
  cr_assert_eq(st("readahead_used"), 2 * (uint64_t)r->nchunks);
  check_all(a, buf, want);
  free(buf);
  free(want);
  finish();
}

Test(readahead, free_with_reads_in_flight) {
  start(4, 24, NULL, 0);
  uint32_t *buf = malloc(REG), *want = malloc(REG);
  uintptr_t a[NREG];
  write_n(a, buf, NREG);
  int i = first_on_nvme(a);
  cr_assert_geq(i, 0);
  read_ahead(a[i]);
  mt_region_t *r = _mt_region_of(P, a[i]);
  cr_assert_eq(r->nra, r->nchunks, "every chunk has its read in flight");
  size_t host1 = P->host_used; /* the reads' slots included (room may have spilled others) */
  cr_assert_eq(_mt_free(a[i], 0, false), 0);
  cr_assert_eq(P->host_used, host1 - REG, "freeing cancels the reads and gives their slots back");
  /* the slots and pages are reused at once: a new region with new bytes,
   * pushed through host memory and NVMe, reads back its own bytes */
  cr_assert_eq(_mt_alloc(REG, &a[i]), 0);
  fill(buf, REG, 1000);
  cr_assert_eq(put(a[i], buf, REG), 0);
  for (int k = 0; k < NREG; k++) {
    if (k == i) continue;
    memset(buf, 0xee, REG);
    cr_assert_eq(get(buf, a[k], REG), 0);
    fill(want, REG, (uint32_t)k + 1);
    cr_assert(memcmp(buf, want, REG) == 0, "region %d intact", k);
  }
  memset(buf, 0xee, REG);
  cr_assert_eq(get(buf, a[i], REG), 0);
  fill(want, REG, 1000);
  cr_assert(memcmp(buf, want, REG) == 0, "the new region holds its own bytes, not the cancelled read's");
  cr_assert_eq(st("readahead_used"), 0);
  free(buf);
  free(want);
  finish();
}

static void read_fault(_mt_nvme_fault_t f, uint32_t count) {
  start(4, 24, NULL, 0);
  uint32_t *buf = malloc(REG), *want = malloc(REG);
  uintptr_t a[NREG];
  write_n(a, buf, NREG);
  int i = first_on_nvme(a);
  cr_assert_geq(i, 0);
  mt_region_t *r = _mt_region_of(P, a[i]);
  uint64_t err0 = st("nvme_errors");
  _mt_nvme_fault_arm(f, 0, count);
  read_ahead(a[i]);
  size_t host1 = P->host_used;
  settle(a[i]);
  cr_assert_gt(_mt_nvme_fault_injected(f), 0, "the fault was injected");
  _mt_nvme_fault_reset();
  uint32_t failed = 0;
  for (uint32_t k = 0; k < r->nchunks; k++) failed += r->chunks[k].state == CH_NVME;
  cr_assert_geq(failed, 1u, "a failed read-ahead leaves its chunk on NVMe");
  cr_assert_eq(st("nvme_errors") - err0, failed, "each failed read-ahead is counted");
  cr_assert_eq(P->host_used, host1 - failed * P->chunk, "the failed reads gave their slots back");
  /* the demand read brings back the bytes, intact */
  check_all(a, buf, want);
  cr_assert_eq(st("readahead_used"), r->nchunks - failed, "only the reads that succeeded are used");
  free(buf);
  free(want);
  finish();
}

/* EIO on every try (1 + 3 retries) of the 4 requests the ring holds */
Test(readahead, eio_on_read_ahead_loses_nothing) { read_fault(MT_NVME_FAULT_EIO, 16); }
Test(readahead, flipped_bit_on_read_ahead_is_never_delivered) { read_fault(MT_NVME_FAULT_FLIP, 1); }

/* The regions (by index) whose chunks are all in host memory; returns how
 * many, oldest first in the host tier's LRU order (allocation order here). */
static int all_host(const uintptr_t *a, int *out) {
  int n = 0;
  for (int i = 0; i < NREG; i++) {
    mt_region_t *r = _mt_region_of(P, a[i]);
    bool all = true;
    for (uint32_t k = 0; k < r->nchunks; k++) all &= r->chunks[k].state == CH_HOST;
    if (all) out[n++] = i;
  }
  return n;
}

/* Marks regions as a read-ahead pass would (readahead.c): r's first use is
 * pos[i] launches ahead. Then the next launch begins. */
static void mark_window(const uintptr_t *a, const int *idx, const uint32_t *pos, int n) {
  P->epoch++;
  for (int i = 0; i < n; i++) {
    mt_region_t *r = _mt_region_of(P, a[idx[i]]);
    r->ra_epoch = P->epoch;
    r->ra_pos = pos[i];
  }
  P->ra_window = P->epoch;
  P->epoch++;
}

static bool region_in(const uintptr_t *a, int i, uint8_t state) {
  mt_region_t *r = _mt_region_of(P, a[i]);
  for (uint32_t k = 0; k < r->nchunks; k++)
    if (r->chunks[k].state != state) return false;
  return true;
}

/* The last read-ahead window stays marked for the launches that follow:
 * their spills take chunks outside it first, and when only window chunks
 * are left, those used farthest ahead (LRU order would take the oldest,
 * here the nearest). Without the marks kept, the 100B candidate at 256
 * GiB of host read chunks ahead and spilled them unused (README). */
Test(readahead, spills_keep_the_window_and_take_its_farthest_last) {
  start(4, 40, NULL, 0);
  uint32_t *buf = malloc(REG), *want = malloc(REG);
  uintptr_t a[NREG];
  write_n(a, buf, NREG);
  int h[NREG];
  int nh = all_host(a, h);
  cr_assert_geq(nh, 6, "six regions in host memory (%d)", nh);
  pthread_mutex_lock(&P->lock);
  /* 1. everything in host memory is in the window, nearest first in LRU
   * order: a spill of 8 chunks takes the four regions used farthest */
  uint32_t pos[NREG];
  for (int i = 0; i < nh; i++) pos[i] = (uint32_t)(10 + i); /* the oldest is needed first */
  mark_window(a, h, pos, nh);
  cr_assert_eq(_mt_host_spill(P, 8), 0);
  for (int i = 0; i < nh; i++)
    cr_assert(region_in(a, h[i], i >= nh - 4 ? CH_NVME : CH_HOST), "region at position %u: %s", pos[i],
              i >= nh - 4 ? "among the 4 farthest, spilled" : "nearer, kept");
  /* 2. a new window of the two oldest, the rest outside: a spill takes
   * none of the window while anything else can go */
  nh = all_host(a, h);
  cr_assert_geq(nh, 3, "three regions left in host memory (%d)", nh);
  uint32_t pos2[] = {3, 7};
  mark_window(a, h, pos2, 2);
  cr_assert_eq(_mt_host_spill(P, 8), 0);
  cr_assert(region_in(a, h[0], CH_HOST) && region_in(a, h[1], CH_HOST), "the window stays in host memory");
  for (int i = 2; i < nh; i++) cr_assert(region_in(a, h[i], CH_NVME), "region %d, outside the window, went", h[i]);
  pthread_mutex_unlock(&P->lock);
  check_all(a, buf, want);
  free(buf);
  free(want);
  finish();
}

/* ---- a drive that does not answer ---------------------------------------- */

/* Reads ahead the region at a with the drive stalled (MT_NVME_FAULT_STALL:
 * no completion is delivered until the fault is reset). */
static void read_ahead_stalled(uintptr_t a) {
  _mt_nvme_fault_arm(MT_NVME_FAULT_STALL, 0, UINT32_MAX);
  read_ahead(a);
}

/* Host slots counted in host_used that no chunk holds: the ones given
 * up to a drive that may still write into them. */
static size_t host_slots_lost(const uintptr_t *a) {
  size_t held = 0;
  for (int k = 0; k < NREG; k++) {
    mt_region_t *r = _mt_region_of(P, a[k]);
    for (uint32_t c = 0; c < r->nchunks; c++)
      held += r->chunks[c].host_addr != 0 || (r->chunks[c].ra != 0 && r->chunks[c].ra != MT_RA_READY);
  }
  return P->host_used / P->chunk - held;
}

/* The drive answers again: polls until every given-up request is done. */
static void drive_answers(void) {
  _mt_nvme_fault_reset();
  tier_drain();
}

/* The store used to keep a pointer to the ring entry's op after the wait
 * gave up; the free then found the chunk's pages busy (an assertion). */
Test(readahead, free_with_a_stalled_read_ahead) {
  tier_wait_ms = 100;
  start(4, 24, NULL, 0);
  uint32_t *buf = malloc(REG), *want = malloc(REG);
  uintptr_t a[NREG];
  write_n(a, buf, NREG);
  int i = first_on_nvme(a);
  cr_assert_geq(i, 0);
  _mt_nvme_stats_t s0;
  _mt_nvme_get_stats(P->nv->store, &s0);
  read_ahead_stalled(a[i]);
  uint64_t err0 = st("nvme_errors");
  cr_assert_eq(_mt_free(a[i], 0, false), 0, "the free goes through");
  cr_assert_eq(st("nvme_errors") - err0, 2, "both chunks' reads given up, counted");
  drive_answers();
  _mt_nvme_stats_t s1;
  _mt_nvme_get_stats(P->nv->store, &s1);
  cr_assert_eq(s1.pages_free, s0.pages_free + REG / MT_NVME_PAGE, "its NVMe pages came back once the drive answered");
  check_all_but(a, buf, want, i, -1);
  free(buf);
  free(want);
  finish();
}

/* A fetch gives up on a stalled read-ahead; the ring entry then carries
 * another region's read while the drive still has the first. Once the
 * drive answers, every region reads back its own bytes, the stalled one
 * included (its NVMe copy was never touched). */
Test(readahead, stalled_read_ahead_then_ring_reuse) {
  tier_wait_ms = 100;
  start(4, 24, NULL, 0);
  uint32_t *buf = malloc(REG), *want = malloc(REG);
  uintptr_t a[NREG];
  write_n(a, buf, NREG);
  int i = first_on_nvme(a);
  cr_assert_geq(i, 0);
  read_ahead_stalled(a[i]);
  cr_assert_neq(get(buf, a[i], REG), 0, "the fetch fails while the drive holds the chunk");
  /* the fetch stopped at chunk 0: its read was given up, chunk 1's is
   * still on the drive */
  cr_assert_eq(_mt_ra_inflight(P), 1, "chunk 0's ring entry is free again");
  cr_assert_eq(host_slots_lost(a), 1, "the slot the drive may still write into stays out of use");
  /* another region's read-ahead takes the entries while the drive still
   * has the first reads; it stays queued behind them */
  int j = first_on_nvme_but(a, i);
  cr_assert_geq(j, 0);
  /* host room without a spill (a spill would poll the drive): two regions
   * wholly in host memory are freed */
  int gone[2], ngone = 0;
  for (int k = 0; k < NREG && ngone < 2; k++) {
    mt_region_t *r = _mt_region_of(P, a[k]);
    bool host = true;
    for (uint32_t c = 0; c < r->nchunks; c++) host &= r->chunks[c].state == CH_HOST && r->chunks[c].nv == NULL;
    if (host) gone[ngone++] = k;
  }
  cr_assert_eq(ngone, 2);
  for (int k = 0; k < 2; k++) cr_assert_eq(_mt_free(a[gone[k]], 0, false), 0);
  /* the ring holds two reads: chunk 1's of region i and the first of j's
   * (in the entry given up); the second of j's finds it full */
  mt_region_t *rj = _mt_region_of(P, a[j]);
  pthread_mutex_lock(&P->lock);
  P->epoch++;
  (void)_mt_ra_region(P, rj);
  pthread_mutex_unlock(&P->lock);
  cr_assert(rj->chunks[0].ra != 0, "region %d's read took the entry given up", j);
  drive_answers();
  settle(a[j]);
  check_all_but(a, buf, want, gone[0], gone[1]);
  free(buf);
  free(want);
  finish();
}

/* A read the drive finished is done to the prefetch (prefetch_region skips
 * a region whose reads are "still reading", and stops its pass there),
 * whether or not the store has reaped its completion yet. */
Test(readahead, a_finished_read_is_not_reading_before_the_poll) {
  start(4, 24, NULL, 0);
  uint32_t *buf = malloc(REG);
  uintptr_t a[NREG];
  write_n(a, buf, NREG);
  int i = first_on_nvme(a);
  cr_assert_geq(i, 0);
  mt_region_t *r = _mt_region_of(P, a[i]);
  read_ahead(a[i]);
  usleep(300000); /* the drive (a file here) is long done */
  pthread_mutex_lock(&P->lock);
  bool reading = _mt_ra_reading(P, r);
  pthread_mutex_unlock(&P->lock);
  cr_assert(!reading, "a read the drive finished 300 ms ago counts as reading");
  free(buf);
  finish();
}
