/* Description: prefetches into free memory beyond MT_PREFETCH_DEPTH
 * (MT_PREFETCH_FREE; prefetch.c, "Prefetches into free memory"), on the
 * virtual clock.
 *
 * A loop: a 1 ms kernel writes a temporary region Y of 8 chunks, which is
 * then freed; two 30 ms kernels read a small region A; six 1 ms kernels a
 * small region S; a 1 ms kernel reads a region X of 8 chunks. 12 chunks of
 * GPU budget: Y's room is X's, so X goes to host memory every iteration
 * (clean: only the first iteration writes it) and comes back. The handoff
 * is on, the host at most MT_RUNAHEAD = 4 launches ahead of the GPU, and
 * prefetches look 2 launches ahead:
 *  - with MT_PREFETCH_FREE=0, X joins the window only two launches before
 *    its own, when the GPU is past the long kernels: its 16.8 ms copy
 *    (1 GB/s) runs behind 6 ms of short ones, and the GPU waits for it;
 *  - with MT_PREFETCH_FREE=8, X is within 2 + 8 launches while the long
 *    kernels run, and Y's memory is free again (its kernel is done): X
 *    comes back into it under them.
 * The GPU idles less with it (measured: 3.3 against 26.0 ms over three
 * iterations), the chunks are counted (prefetches_free), and nothing is
 * evicted for them: no more evictions than without (49 against 52). */
#include <string.h>

#include "stats.h"
#include "vpager.h"

typedef struct spare_run {
  uint64_t idle;      /* GPU idle over the last three iterations */
  uint64_t spare;     /* prefetches_free */
  uint64_t evictions; /* evictions_dirty + evictions_clean */
} spare_run_t;

static void spare_loop(unsigned spare, int handoff, spare_run_t *out) {
  memset(&_mt_stats, 0, sizeof(_mt_stats));
  mt_pager_config_t pc = {.budget = 12 * 2 * MiB, .host_budget = 256 * MiB, .chunk = 2 * MiB,
                          .small_limit = 4096, .policy = "nextuse", .predictor = "correlation",
                          .prefetch_depth = 2, .prefetch_free = spare, .handoff = handoff, .runahead = 4};
  mt_device_t *d;
  mt_pager_t *p = vp_start(&pc, &d);
  uintptr_t a, s, x;
  cr_assert_eq(_mt_alloc(2 * MiB, &a), 0);
  cr_assert_eq(_mt_alloc(2 * MiB, &s), 0);
  cr_assert_eq(_mt_alloc(16 * MiB, &x), 0);
  mt_vdev_totals_t t0 = {0}, t1;
  const int iters = 8; /* the last three measured: the predictor has learned the loop */
  for (int it = 0; it < iters; it++) {
    if (it == iters - 3) _mt_vdev_totals(d, &t0);
    const bool first = it == 0, yes = true;
    uintptr_t y;
    cr_assert_eq(_mt_alloc(16 * MiB, &y), 0);
    vp_kern_t ky = {d, 0, 1 * MS};
    vp_launch(p, &ky, &y, &yes, 1, 40);
    cr_assert_eq(_mt_free(y, 0, true), 0);
    for (int i = 0; i < 2; i++) {
      vp_kern_t k = {d, 0, 30 * MS};
      vp_launch(p, &k, &a, &first, 1, 10 + (uint64_t)i);
    }
    for (int i = 0; i < 6; i++) {
      vp_kern_t k = {d, 0, 1 * MS};
      vp_launch(p, &k, &s, &first, 1, 20 + (uint64_t)i);
    }
    vp_kern_t kx = {d, 0, 1 * MS};
    vp_launch(p, &kx, &x, &first, 1, 30);
  }
  _mt_vdev_totals(d, &t1);
  out->idle = t1.gpu_idle_ns - t0.gpu_idle_ns;
  out->spare = mt_stat_get(prefetches_free);
  out->evictions = mt_stat_get(evictions_dirty) + mt_stat_get(evictions_clean);
  vp_stop(p);
}

Test(sparefetch_pager, far_regions_come_back_into_free_memory) {
  spare_run_t on, off;
  spare_loop(8, 1, &on);
  spare_loop(0, 1, &off);
  cr_log_info("GPU idle over 3 iterations: %.1f ms with MT_PREFETCH_FREE=8 (%llu chunks), %.1f ms without",
              on.idle / 1e6, (unsigned long long)on.spare, off.idle / 1e6);
  cr_assert_gt(on.spare, 0, "X was prefetched into free memory");
  cr_assert_eq(off.spare, 0, "MT_PREFETCH_FREE=0: never");
  cr_assert_leq(on.evictions, off.evictions, "nothing is evicted for them: %llu evictions against %llu",
               (unsigned long long)on.evictions, (unsigned long long)off.evictions);
  /* X's copy moves under the long kernels: most of the 8 ms an iteration
   * the GPU waited for it comes off */
  cr_assert_leq(on.idle + 3 * 6 * MS, off.idle, "GPU idle %.1f ms with them, %.1f ms without (3 iterations)",
                on.idle / 1e6, off.idle / 1e6);
}

Test(sparefetch_pager, not_with_the_handoff_off) {
  spare_run_t r;
  spare_loop(8, 2, &r);
  cr_assert_eq(r.spare, 0, "handoff off: no prefetches into free memory (%llu chunks)", (unsigned long long)r.spare);
}
