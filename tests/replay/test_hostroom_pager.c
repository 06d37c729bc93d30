/* Description: host room for the host optimizer (_mt_host_reserve,
 * hostbudget.c) right after a launch whose read-ahead marked its window.
 * The read-ahead marks every region of its window with the pager's epoch,
 * so that the host tier's spills leave them be for a farther one; the
 * marks stay until the next operation bumps the epoch. A reservation that
 * did not bump it found every HOST chunk marked and nothing it might
 * spill: out of memory, where the same request a moment later fit. */
#include "nvme_store.h"
#include "vpager.h"

#define NR 24

Test(hostroom_pager, a_reservation_after_a_launch_may_spill_the_window) {
  _mt_nvme_cfg_t nv = {.simulate = true, .max_bytes = 256 * MiB};
  mt_pager_config_t pc = {.budget = 2 * 2 * MiB, .host_budget = 10 * 2 * MiB, .chunk = 2 * MiB, .small_limit = 4096,
                          .policy = "lru", .predictor = "correlation", .prefetch_depth = 2, .handoff = 2,
                          .nvme = &nv, .readahead_depth = 1024, .host_map = false};
  mt_device_t *d;
  mt_pager_t *p = vp_start(&pc, &d);
  cr_assert_not_null(p->nv);
  uintptr_t a[NR];
  for (int i = 0; i < NR; i++) cr_assert_eq(_mt_alloc(2 * MiB, &a[i]), 0);
  for (int it = 0; it < 4; it++)
    for (int i = 0; i < NR; i++) {
      vp_kern_t k = {d, 0, 1 * MS};
      bool w = true;
      vp_launch(p, &k, &a[i], &w, 1, 500 + (uint64_t)i);
    }
  pthread_mutex_lock(&p->lock);
  size_t marked = 0, nret = 0;
  for (int i = 0; i < NR; i++) marked += _mt_region_of(p, a[i])->epoch == p->epoch;
  for (mt_chunk_t *c = p->retained.rprev; c != &p->retained; c = c->rprev) nret++;
  /* more than free memory and the retained copies give: a spill is needed */
  size_t want = p->host_budget - p->host_used + (nret + 1) * 2 * MiB;
  pthread_mutex_unlock(&p->lock);
  cr_assert_gt(marked, 0u, "the last launch's read-ahead marked its window");
  cr_assert_eq(_mt_host_reserve(want), 0, "the reservation spills what it needs");
  _mt_host_unreserve(want);
  vp_stop(p);
}
