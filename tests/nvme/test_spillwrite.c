/* Description: asynchronous spill writes (spillwrite.c) inside the pager,
 * on the fake driver with a real NVMe store (fault-injecting, as
 * test_nvme_tier.c): after a launch the host tier's next victims are
 * written to NVMe while they stay HOST; a completed write turns the chunk
 * NVME and frees its host copy, with the bytes intact; a fetch of a chunk
 * whose write is in flight is served from its host copy (no NVMe read); a
 * write to a region with a spill in flight settles it first, so the new
 * bytes win (ordering); freeing with writes in flight settles them and
 * gives the host copies back; an injected EIO or ENOSPC on the writes
 * loses nothing: the chunks stay in host memory, the errors are counted.
 * Copies written ahead (while the drive is idle, once the host tier has
 * spilled, with the read-ahead on): the next chunks in the spill order get valid NVMe copies and
 * stay HOST with their host memory; their spill later writes nothing; a
 * write to one makes its copy stale, and the next spill writes it again;
 * a spill that finds a copy ahead counts for its region, and a region
 * whose copies ahead keep going stale (rewritten before any spill) gets
 * none after a few (_mt_ahead_outcome).
 *
 * The launch hook (_mt_sw_launch) is called directly under the lock, as a
 * launch would, so that no kernel is needed. Host mappings are off (async
 * spills need host copies the CPU can read). */
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
  S(spill_async) S(spill_async_waits) S(spill_ahead_copies)
#undef S
  return 0;
}

/* What a launch does after its prefetch: spill writes ahead of need. */
static void launch_spill(void) {
  pthread_mutex_lock(&P->lock);
  P->epoch++;
  _mt_sw_launch(P);
  pthread_mutex_unlock(&P->lock);
}

static unsigned inflight(void) {
  pthread_mutex_lock(&P->lock);
  unsigned n = _mt_sw_inflight(P);
  pthread_mutex_unlock(&P->lock);
  return n;
}

/* Polls until no spill write is in flight (bounded). */
static void settle_all(void) {
  for (int t = 0; t < 2000; t++) {
    pthread_mutex_lock(&P->lock);
    _mt_sw_poll(P);
    unsigned n = _mt_sw_inflight(P);
    pthread_mutex_unlock(&P->lock);
    if (n == 0) return;
    usleep(1000);
  }
  cr_assert_fail("the spill writes did not finish in 2 s");
}

/* Chunks with a spill write in flight, up to max, into cs (their region
 * index in ri). */
static int writing(const uintptr_t *a, mt_chunk_t **cs, int *ri, int max) {
  int n = 0;
  for (int i = 0; i < NREG; i++) {
    mt_region_t *r = _mt_region_of(P, a[i]);
    for (uint32_t k = 0; k < r->nchunks && n < max; k++) {
      if (r->chunks[k].sw == 0) continue;
      cs[n] = &r->chunks[k];
      ri[n++] = i;
    }
  }
  return n;
}

static void start_full(uintptr_t *a, uint32_t *buf) {
  start(4, 24, NULL, 0);
  cr_assert_not_null(P->nv, "the tier opened");
  write_n(a, buf, NREG);
  /* synchronous spills free host memory in batches: reading regions back
   * (their evictions land in host memory) fills it again */
  for (int t = 0; t < 4 * NREG && P->host_used + P->chunk < P->host_budget; t++)
    cr_assert_eq(get(buf, a[(NREG - 1 - t) % NREG], REG), 0);
  cr_assert_geq(P->host_used + P->chunk, P->host_budget, "host memory is full (%zu of %zu bytes)", P->host_used,
                P->host_budget);
}

Test(spillwrite, completed_writes_free_host_memory_and_keep_the_bytes) {
  uint32_t *buf = malloc(REG), *want = malloc(REG);
  uintptr_t a[NREG];
  start_full(a, buf);
  uint64_t spills0 = st("nvme_spills"), wr0 = st("bytes_nvme_write");
  size_t host0 = P->host_used;
  launch_spill();
  unsigned n = inflight();
  cr_assert_geq(n, 1u, "the launch started spill writes (host memory was full)");
  cr_assert_eq(st("spill_async"), n);
  mt_chunk_t *cs[64];
  int ri[64];
  cr_assert_eq(writing(a, cs, ri, 64), (int)n);
  for (unsigned k = 0; k < n; k++) {
    cr_assert_eq(cs[k]->state, CH_HOST, "a chunk being written stays HOST");
    cr_assert_not_null(cs[k]->nv);
  }
  cr_assert_eq(P->host_used, host0, "host copies are freed only when their writes complete");
  settle_all();
  for (unsigned k = 0; k < n; k++) {
    cr_assert_eq(cs[k]->state, CH_NVME, "a completed write turns its chunk NVME");
    cr_assert(_mt_nvme_chunk_valid(cs[k]->nv), "with a valid NVMe copy");
    cr_assert_eq(cs[k]->host_addr, 0u);
  }
  cr_assert_eq(P->host_used, host0 - n * P->chunk, "their host copies went back");
  cr_assert_eq(st("nvme_spills") - spills0, n);
  cr_assert_eq(st("bytes_nvme_write") - wr0, n * P->chunk);
  /* a second launch keeps the headroom: nothing more to write */
  launch_spill();
  cr_assert_eq(inflight(), 0u, "the headroom is free: no new write");
  check_all(a, buf, want);
  free(buf);
  free(want);
  finish();
}

Test(spillwrite, fetch_during_write_is_served_from_the_host_copy) {
  uint32_t *buf = malloc(REG), *want = malloc(REG);
  uintptr_t a[NREG];
  start_full(a, buf);
  launch_spill();
  mt_chunk_t *cs[64];
  int ri[64];
  cr_assert_geq(writing(a, cs, ri, 64), 1);
  int i = ri[0];
  uint64_t loads0 = st("nvme_loads"), rd0 = st("bytes_nvme_read");
  memset(buf, 0xee, REG);
  cr_assert_eq(get(buf, a[i], REG), 0);
  fill(want, REG, (uint32_t)i + 1);
  cr_assert(memcmp(buf, want, REG) == 0, "region %d reads back its bytes while its spill is in flight", i);
  cr_assert_eq(st("bytes_nvme_read"), rd0, "no NVMe read: the host copy served it");
  cr_assert_geq(st("nvme_loads"), loads0);
  /* evicted clean while its write may still be in flight: back to HOST,
   * in the spill order once (the write's completion takes it out first;
   * seen here with the write still in flight, though a poll may finish it
   * first, so not asserted) */
  int other = (i + 1) % NREG;
  cr_assert_eq(get(buf, a[other], REG), 0);
  settle_all();
  launch_spill();
  settle_all();
  check_all(a, buf, want);
  free(buf);
  free(want);
  finish();
}

Test(spillwrite, a_write_to_a_chunk_being_spilled_wins) {
  uint32_t *buf = malloc(REG), *want = malloc(REG);
  uintptr_t a[NREG];
  start_full(a, buf);
  launch_spill();
  mt_chunk_t *cs[64];
  int ri[64];
  cr_assert_geq(writing(a, cs, ri, 64), 1);
  int i = ri[0];
  /* new bytes for the region while its chunk's old bytes are on their
   * way to NVMe: the spill is settled first, its NVMe copy dropped */
  fill(buf, REG, 5000);
  cr_assert_eq(put(a[i], buf, REG), 0);
  settle_all();
  /* push everything through host memory and NVMe again */
  launch_spill();
  settle_all();
  for (int k = 0; k < NREG; k++) {
    memset(buf, 0xee, REG);
    cr_assert_eq(get(buf, a[k], REG), 0);
    fill(want, REG, k == i ? 5000u : (uint32_t)k + 1);
    cr_assert(memcmp(buf, want, REG) == 0, "region %d holds its %s bytes", k, k == i ? "new" : "own");
  }
  free(buf);
  free(want);
  finish();
}

Test(spillwrite, free_with_writes_in_flight) {
  uint32_t *buf = malloc(REG), *want = malloc(REG);
  uintptr_t a[NREG];
  start_full(a, buf);
  launch_spill();
  mt_chunk_t *cs[64];
  int ri[64];
  cr_assert_geq(writing(a, cs, ri, 64), 1);
  int i = ri[0];
  mt_region_t *r = _mt_region_of(P, a[i]);
  size_t host_chunks = 0;
  for (uint32_t k = 0; k < r->nchunks; k++) host_chunks += r->chunks[k].host_addr != 0;
  size_t host1 = P->host_used;
  unsigned n1 = inflight();
  cr_assert_eq(_mt_free(a[i], 0, false), 0);
  cr_assert_eq(P->host_used, host1 - host_chunks * P->chunk, "freeing gives the host copies back");
  cr_assert_lt(inflight(), n1, "its writes were settled");
  /* slots and pages reused at once hold their new bytes */
  cr_assert_eq(_mt_alloc(REG, &a[i]), 0);
  fill(buf, REG, 1000);
  cr_assert_eq(put(a[i], buf, REG), 0);
  launch_spill();
  settle_all();
  for (int k = 0; k < NREG; k++) {
    memset(buf, 0xee, REG);
    cr_assert_eq(get(buf, a[k], REG), 0);
    fill(want, REG, k == i ? 1000u : (uint32_t)k + 1);
    cr_assert(memcmp(buf, want, REG) == 0, "region %d intact", k);
  }
  free(buf);
  free(want);
  finish();
}

/* Every write fails: the chunks stay HOST, each failure counted. */
static void write_fault(_mt_nvme_fault_t f, uint32_t count) {
  uint32_t *buf = malloc(REG), *want = malloc(REG);
  uintptr_t a[NREG];
  start_full(a, buf);
  uint64_t err0 = st("nvme_errors"), spills0 = st("nvme_spills");
  size_t host0 = P->host_used;
  _mt_nvme_fault_arm(f, 0, count);
  launch_spill();
  mt_chunk_t *cs[64];
  int ri[64];
  int n = writing(a, cs, ri, 64);
  cr_assert_geq(n, 1);
  settle_all();
  cr_assert_gt(_mt_nvme_fault_injected(f), 0, "the fault was injected");
  _mt_nvme_fault_reset();
  for (int k = 0; k < n; k++) {
    cr_assert_eq(cs[k]->state, CH_HOST, "a chunk whose write failed stays in host memory");
    cr_assert_neq(cs[k]->host_addr, 0u);
    cr_assert_eq(cs[k]->sw, 0u);
  }
  cr_assert_eq(st("nvme_errors") - err0, (uint64_t)n, "each failed write is counted");
  cr_assert_eq(st("nvme_spills"), spills0, "none moved");
  cr_assert_eq(P->host_used, host0, "no host copy was given up");
  /* the bytes are all there, through host memory and NVMe again */
  check_all(a, buf, want);
  free(buf);
  free(want);
  finish();
}

/* EIO on every try (1 + 3 retries) of every request */
Test(spillwrite, eio_on_spill_write_loses_nothing) { write_fault(MT_NVME_FAULT_EIO, 1000); }

/* A write the drive does not answer within the store's bound is abandoned:
 * its chunk stays HOST with its bytes, its ring entry serves again at
 * once, and its NVMe pages come back once the drive answers. */
Test(spillwrite, a_stalled_spill_write_is_abandoned_and_loses_nothing) {
  tier_wait_ms = 100;
  uint32_t *buf = malloc(REG), *want = malloc(REG);
  uintptr_t a[NREG];
  start_full(a, buf);
  uint64_t err0 = st("nvme_errors");
  _mt_nvme_fault_arm(MT_NVME_FAULT_STALL, 0, UINT32_MAX);
  launch_spill();
  mt_chunk_t *cs[64];
  int ri[64];
  int n = writing(a, cs, ri, 64);
  cr_assert_geq(n, 1);
  /* a free settles the writes of its chunks: each waits out the bound */
  int i = ri[0];
  mt_region_t *r = _mt_region_of(P, a[i]);
  unsigned mine = 0;
  for (uint32_t k = 0; k < r->nchunks; k++) mine += r->chunks[k].sw != 0;
  cr_assert_eq(_mt_free(a[i], 0, false), 0);
  cr_assert_eq(st("nvme_errors") - err0, mine, "each abandoned write is counted");
  /* the drive answers: the other writes finish (or fail) as usual */
  _mt_nvme_fault_reset();
  settle_all();
  tier_drain();
  check_all_but(a, buf, want, i, -1);
  /* every page is accounted for: what the regions hold on NVMe plus free */
  _mt_nvme_stats_t s1;
  _mt_nvme_get_stats(P->nv->store, &s1);
  uint64_t held = 0;
  for (int k = 0; k < NREG; k++) {
    if (k == i) continue;
    mt_region_t *q = _mt_region_of(P, a[k]);
    for (uint32_t c = 0; c < q->nchunks; c++) held += q->chunks[c].nv != NULL ? P->chunk / MT_NVME_PAGE : 0;
  }
  cr_assert_eq(s1.pages_free + held, s1.pages_total, "no NVMe page is lost (%llu free, %llu held, %llu total)",
               (unsigned long long)s1.pages_free, (unsigned long long)held, (unsigned long long)s1.pages_total);
  free(buf);
  free(want);
  finish();
}
Test(spillwrite, enospc_on_spill_write_loses_nothing) { write_fault(MT_NVME_FAULT_NOSPC, 1000); }

/* Spills first (the host tier is over-committed), all done: then the drive
 * is idle and the next launch writes copies ahead. */
static void spill_then_copy_ahead(uintptr_t *a, uint32_t *buf, unsigned ahead) {
  start_full(a, buf);
  launch_spill();
  cr_assert_geq(inflight(), 1u, "the launch started spill writes");
  settle_all();
  pthread_mutex_lock(&P->lock);
  _mt_sw_set_ahead(P, ahead);
  pthread_mutex_unlock(&P->lock);
}

/* The read-ahead's state, as a predictor's first launch makes it (no
 * predictor here): a region with nothing on NVMe reads nothing. */
static void read_ahead_on(const uintptr_t *a) {
  pthread_mutex_lock(&P->lock);
  bool opened = false;
  for (int i = 0; i < NREG && !opened; i++) {
    mt_region_t *r = _mt_region_of(P, a[i]);
    if (r->nnvme == 0) opened = _mt_ra_region(P, r);
  }
  pthread_mutex_unlock(&P->lock);
  cr_assert(opened && P->ra != NULL, "the read-ahead is on");
  cr_assert_eq(_mt_ra_inflight(P), 0u, "and reads nothing");
}

Test(spillwrite, no_copies_ahead_without_the_read_ahead) {
  uint32_t *buf = malloc(REG), *want = malloc(REG);
  uintptr_t a[NREG];
  spill_then_copy_ahead(a, buf, 2);
  cr_assert_null(P->ra);
  /* demand reads would queue behind the copies: none */
  launch_spill();
  cr_assert_eq(inflight(), 0u);
  cr_assert_eq(st("spill_ahead_copies"), 0u);
  read_ahead_on(a);
  launch_spill();
  cr_assert_eq(inflight(), 2u, "with the read-ahead on, two copies ahead");
  settle_all();
  check_all(a, buf, want);
  free(buf);
  free(want);
  finish();
}

Test(spillwrite, copies_written_ahead_stay_host_and_make_the_spill_free) {
  uint32_t *buf = malloc(REG), *want = malloc(REG);
  uintptr_t a[NREG];
  spill_then_copy_ahead(a, buf, 2);
  read_ahead_on(a);
  uint64_t spills0 = st("nvme_spills"), async0 = st("spill_async"), wr0 = st("bytes_nvme_write");
  size_t host0 = P->host_used;
  launch_spill();
  mt_chunk_t *cs[64];
  int ri[64];
  int n = writing(a, cs, ri, 64);
  cr_assert_eq(n, 2, "two copies written ahead (at most `ahead` queued), got %d", n);
  cr_assert_eq(st("spill_ahead_copies"), 2u);
  cr_assert_eq(st("spill_async"), async0, "no spill: the headroom is free");
  settle_all();
  for (int k = 0; k < n; k++) {
    cr_assert_eq(cs[k]->state, CH_HOST, "a copy written ahead leaves its chunk HOST");
    cr_assert_neq(cs[k]->host_addr, 0u, "with its host memory");
    cr_assert(_mt_nvme_chunk_valid(cs[k]->nv), "and a valid NVMe copy");
  }
  cr_assert_eq(P->host_used, host0, "no host memory freed");
  cr_assert_eq(st("nvme_spills"), spills0);
  cr_assert_eq(st("bytes_nvme_write") - wr0, 2 * P->chunk);
  /* the drive is idle again: the next two in the spill order */
  launch_spill();
  cr_assert_eq(writing(a, cs + n, ri + n, 64 - n), 2, "two more, not the same ones again");
  settle_all();
  /* the spill takes the chunks copied first (they lead the spill order)
   * and writes nothing for them */
  uint64_t wr1 = st("bytes_nvme_write");
  pthread_mutex_lock(&P->lock);
  P->epoch++;
  cr_assert_eq(_mt_host_spill(P, 1), 0);
  pthread_mutex_unlock(&P->lock);
  for (int k = 0; k < 4; k++) {
    cr_assert_eq(cs[k]->state, CH_NVME, "chunk %d copied ahead leads the spill order: spilled", k);
    cr_assert(!cs[k]->ahead && cs[k]->region->ahead_score > 0, "and its copy counted as used");
  }
  uint64_t spilled = st("nvme_spills") - spills0;
  uint64_t written = (st("bytes_nvme_write") - wr1) / P->chunk;
  cr_assert_eq(written, spilled - 4, "%llu chunks written for %llu spilled: none for the four copied ahead",
               (unsigned long long)written, (unsigned long long)spilled);
  check_all(a, buf, want);
  free(buf);
  free(want);
  finish();
}

Test(spillwrite, a_write_after_a_copy_ahead_makes_it_stale) {
  uint32_t *buf = malloc(REG), *want = malloc(REG);
  uintptr_t a[NREG];
  spill_then_copy_ahead(a, buf, 1);
  read_ahead_on(a);
  launch_spill();
  mt_chunk_t *cs[4];
  int ri[4];
  cr_assert_eq(writing(a, cs, ri, 4), 1);
  mt_chunk_t *c = cs[0];
  int r = ri[0];
  /* a new pattern for the whole region, while the copy may be in flight:
   * the write settles it, then drops the NVMe copy it made stale */
  fill(buf, REG, 1000u + (uint32_t)r);
  cr_assert_eq(put(a[r], buf, REG), 0);
  cr_assert(c->nv == NULL || !_mt_nvme_chunk_valid(c->nv), "the copy written ahead is stale: dropped");
  settle_all();
  /* everything back through the tiers: the new bytes win */
  for (int i = 0; i < NREG; i++) {
    memset(buf, 0xee, REG);
    cr_assert_eq(get(buf, a[i], REG), 0);
    fill(want, REG, (i == r ? 1000u : 1u) + (uint32_t)i);
    cr_assert(memcmp(buf, want, REG) == 0, "region %d", i);
  }
  free(buf);
  free(want);
  finish();
}

Test(spillwrite, copies_ahead_that_go_stale_stop) {
  uint32_t *buf = malloc(REG), *want = malloc(REG);
  uintptr_t a[NREG];
  spill_then_copy_ahead(a, buf, 8);
  read_ahead_on(a);
  uint64_t made = 0, last = 0;
  int rounds = 0;
  for (; rounds < 32; rounds++) {
    uint64_t c0 = st("spill_ahead_copies");
    launch_spill();
    settle_all();
    last = st("spill_ahead_copies") - c0;
    made += last;
    if (rounds > 0 && last == 0) break;
    /* the regions just copied ahead are rewritten (with the bytes they
     * hold) before any spill: their copies are stale */
    bool hit[NREG] = {false};
    pthread_mutex_lock(&P->lock);
    for (int i = 0; i < NREG; i++) {
      mt_region_t *r = _mt_region_of(P, a[i]);
      for (uint32_t k = 0; k < r->nchunks; k++) hit[i] |= r->chunks[k].ahead && r->chunks[k].state == CH_HOST;
    }
    pthread_mutex_unlock(&P->lock);
    for (int i = 0; i < NREG; i++) {
      if (!hit[i]) continue;
      fill(buf, REG, (uint32_t)i + 1);
      cr_assert_eq(put(a[i], buf, REG), 0, "region %d", i);
    }
  }
  cr_assert_gt(made, 0u, "copies were written ahead at first");
  cr_assert_eq(last, 0u, "after %d rounds of stale copies none are written (%llu in all)", rounds,
               (unsigned long long)made);
  pthread_mutex_lock(&P->lock);
  int waiting = 0; /* HOST chunks whose spill would write them */
  for (int i = 0; i < NREG; i++) {
    mt_region_t *r = _mt_region_of(P, a[i]);
    for (uint32_t k = 0; k < r->nchunks; k++) {
      mt_chunk_t *c = &r->chunks[k];
      if (c->state != CH_HOST || c->sw != 0 || (c->nv != NULL && _mt_nvme_chunk_valid(c->nv))) continue;
      waiting++;
      cr_assert(r->ahead_score <= MT_AHEAD_STOP, "region %d: a chunk awaiting a write is not copied only "
                "because its region's copies went stale (score %d)", i, r->ahead_score);
      cr_assert_eq(c->node.cost, MT_COST_CHEAP, "filed apart from the candidates");
    }
  }
  pthread_mutex_unlock(&P->lock);
  cr_assert_gt(waiting, 0, "chunks await a write");
  check_all(a, buf, want);
  free(buf);
  free(want);
  finish();
}
