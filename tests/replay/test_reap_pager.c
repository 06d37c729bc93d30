/* Description: what the pager waits for when no chunk can be evicted
 * without a wait (pager.c, make_room_ex), on the virtual clock.
 *
 * no_wait_for_a_freed_small_region: it waits for freed regions that give
 * device memory back, oldest first, and not for the others. The
 * 8 MiB budget holds a small-region slab and A, B, C, which a 1 ms kernel
 * on stream 1 uses; a 100 ms kernel on stream 2 uses small region S, which
 * is then freed in stream order. D's launch needs a chunk: before, the
 * pager waited for every freed region, S's 100 ms kernel included (S's slab
 * stays: nothing gained), and then evicted A anyway; now it waits for A's
 * 1 ms kernel only. (On BERT with the handoff on, that wait for a freed
 * small region at the end of the queue was 1.0 s and emptied the GPU's
 * queue; README "Freed memory in stream order".)
 *
 * a_step_not_the_coldest_last_use: it waits for the GPU a step at a time
 * (streams.c, _mt_stream_step) and looks again, rather than for the
 * coldest chunk's last use. A, the coldest (first touched), is held by a
 * 100 ms kernel on stream 1; B, C and E by a 1 ms kernel on stream 2,
 * followed there by a 50 ms kernel that uses B, with a checkpoint after
 * each. Before, D's launch waited 100 ms for A; now one step (1 ms) ends
 * C's and E's holds, and C goes. */
#include "vpager.h"

/* A kernel of ns on s over the n regions at a, writing them all. */
static void launch(mt_pager_t *p, mt_device_t *d, mt_handle_t s, uint64_t ns, uintptr_t *a, size_t n) {
  vp_kern_t k = {d, s, ns};
  bool w[4] = {true, true, true, true};
  vp_launch(p, &k, a, w, n, 0);
}

static void mark(mt_pager_t *p, mt_handle_t s) {
  pthread_mutex_lock(&p->lock);
  _mt_stream_mark(p, _mt_stream_index(p, s));
  pthread_mutex_unlock(&p->lock);
}

/* A pager of four 2 MiB chunks, LRU, demand fetching, the handoff off. */
static mt_pager_t *start(mt_device_t **d) {
  mt_pager_config_t pc = {.budget = 8 * MiB, .host_budget = 64 * MiB, .chunk = 2 * MiB, .small_limit = 4096,
                          .policy = "lru", .predictor = "none", .handoff = 2};
  return vp_start(&pc, d);
}

Test(reap_pager, no_wait_for_a_freed_small_region) {
  mt_device_t *d;
  mt_pager_t *p = start(&d);
  /* stream handles 1 and 2 are CUDA's legacy and per-thread streams */
  const mt_handle_t s1 = 16, s2 = 17;
  uintptr_t s, abc[3], dd;
  cr_assert_eq(_mt_alloc(1024, &s), 0); /* a slab: one chunk of the budget, for good */
  for (int i = 0; i < 3; i++) cr_assert_eq(_mt_alloc(2 * MiB, &abc[i]), 0);
  launch(p, d, s1, 1 * MS, abc, 3);
  launch(p, d, s2, 100 * MS, &s, 1);
  cr_assert_eq(p->used, p->budget, "the slab and A, B, C fill the budget");
  cr_assert_eq(_mt_free(s, s2, true), 0); /* in stream order: pending behind the 100 ms kernel */
  cr_assert_not_null(p->pending);
  mt_vdev_totals_t t0, t1;
  _mt_vdev_totals(d, &t0);
  cr_assert_eq(_mt_alloc(2 * MiB, &dd), 0);
  launch(p, d, s1, 1 * MS, &dd, 1);
  _mt_vdev_totals(d, &t1);
  uint64_t waited = t1.host_wait_ns - t0.host_wait_ns;
  /* A's kernel (1 ms) and A's copy out (2 MiB at 1 GB/s: 2.1 ms) */
  cr_assert_lt(waited, 10 * MS, "the host waited %.1f ms: not for S's 100 ms kernel", waited / 1e6);
  cr_assert_gt(waited, 1 * MS, "it waited for A's kernel and copy (%.1f ms)", waited / 1e6);
  cr_assert_eq(p->used, p->budget);
  vp_stop(p);
}

Test(reap_pager, a_step_not_the_coldest_last_use) {
  mt_device_t *d;
  mt_pager_t *p = start(&d);
  const mt_handle_t s1 = 16, s2 = 17;
  uintptr_t a, bce[3], dd;
  cr_assert_eq(_mt_alloc(2 * MiB, &a), 0);
  for (int i = 0; i < 3; i++) cr_assert_eq(_mt_alloc(2 * MiB, &bce[i]), 0);
  cr_assert_eq(_mt_alloc(2 * MiB, &dd), 0);
  launch(p, d, s1, 100 * MS, &a, 1);
  launch(p, d, s2, 1 * MS, bce, 3);
  mark(p, s2);
  launch(p, d, s2, 50 * MS, bce, 1); /* B again */
  mark(p, s2);
  cr_assert_eq(p->used, p->budget, "A, B, C and E fill the budget");
  mt_vdev_totals_t t0, t1;
  _mt_vdev_totals(d, &t0);
  launch(p, d, s1, 1 * MS, &dd, 1);
  _mt_vdev_totals(d, &t1);
  uint64_t waited = t1.host_wait_ns - t0.host_wait_ns;
  /* the step (1 ms) and C's copy out (2 MiB at 1 GB/s: 2.1 ms) */
  cr_assert_lt(waited, 10 * MS, "the host waited %.1f ms: not for A's 100 ms kernel", waited / 1e6);
  cr_assert_gt(waited, 1 * MS, "it waited for the step and C's copy (%.1f ms)", waited / 1e6);
  cr_assert_eq(_mt_region_of(p, a)->ndevice, 1, "A, still in use, stays");
  cr_assert_eq(_mt_region_of(p, bce[1])->ndevice, 0, "C, the coldest whose work is done, goes");
  vp_stop(p);
}
