/* Description: write-behind on a schedule (prefetch.c, predictor/demand.h),
 * on the virtual clock, with the handoff on.
 *
 * A training-like loop: six forward launches each allocate an activation
 * (4 MiB) and write it, reading the weights and the activation before;
 * six backward launches read the activations in reverse and free each
 * after its use. The GPU budget (24 MiB) holds the weights and five
 * activations, so the last forward launches evict the oldest activations,
 * dirty, and the host waits for their copies. No predicted launch lacks
 * anything on the GPU there (the room is for activations not allocated
 * yet), so the window's lack asks write-behind for nothing. The schedule
 * records last iteration's evictions by launch and, once the predictor
 * knows the period (from the fourth iteration here: predictor/reuse.c
 * wants a few repeats), copies the oldest activations out while the
 * forward pass runs, not before they are written (the last iteration's
 * ones are used before the evictions and freed): their evictions then copy
 * nothing, and no copy is wasted. With MT_WRITEBEHIND_HORIZON=0 (no
 * schedule) they still copy. */
#include <criterion/criterion.h>

#include "stats.h"
#include "vpager.h"

#define ITERS 7
#define LAYERS 6

typedef struct run {
  uint64_t clean[ITERS], dirty[ITERS], host_wait[ITERS];
} run_t;

static void train(unsigned horizon, run_t *out) {
  memset(&_mt_stats, 0, sizeof(_mt_stats));
  mt_pager_config_t pc = {.budget = 24 * MiB, .host_budget = 128 * MiB, .chunk = 2 * MiB, .small_limit = 4096,
                          .policy = "nextuse", .predictor = "correlation", .prefetch_depth = 2,
                          .prefetch_pace = true, .handoff = 1, .writebehind_horizon = horizon};
  mt_device_t *d;
  mt_pager_t *p = vp_start(&pc, &d);
  uintptr_t w;
  cr_assert_eq(_mt_alloc(4 * MiB, &w), 0);
  mt_handle_t ev;
  cr_assert_eq(d->ops->event_create(d, &ev), 0);
  for (int it = 0; it < ITERS; it++) {
    uint64_t c0 = mt_stat_get(evictions_clean), d0 = mt_stat_get(evictions_dirty);
    mt_vdev_totals_t t0, t1;
    _mt_vdev_totals(d, &t0);
    uintptr_t act[LAYERS];
    for (int k = 0; k < 2 * LAYERS; k++) {
      uintptr_t a[3];
      bool wr[3] = {false, false, false};
      size_t n = 0;
      a[n++] = w;
      if (k < LAYERS) { /* forward: reads the last activation, writes a new one */
        if (k > 0) a[n++] = act[k - 1];
        cr_assert_eq(_mt_alloc(4 * MiB, &act[k]), 0);
        wr[n] = true;
        a[n++] = act[k];
      } else { /* backward: reads an activation, last one first */
        a[n++] = act[2 * LAYERS - 1 - k];
      }
      vp_kern_t kc = {d, 0, 20 * MS};
      vp_launch(p, &kc, a, wr, n, 1 + (uint64_t)k);
      if (k >= LAYERS) cr_assert_eq(_mt_free(act[2 * LAYERS - 1 - k], 0, false), 0);
      /* the host reads a result: the launch's holds are known done */
      cr_assert_eq(d->ops->event_record(d, ev, 0), 0);
      cr_assert_eq(d->ops->event_sync(d, ev), 0);
    }
    _mt_vdev_totals(d, &t1);
    out->clean[it] = mt_stat_get(evictions_clean) - c0;
    out->dirty[it] = mt_stat_get(evictions_dirty) - d0;
    out->host_wait[it] = t1.host_wait_ns - t0.host_wait_ns;
    cr_log_info("horizon %u, iteration %d: %lu clean / %lu dirty evictions, host waited %.2f ms", horizon, it,
                (unsigned long)out->clean[it], (unsigned long)out->dirty[it], out->host_wait[it] / 1e6);
  }
  cr_assert_eq(p->wb_stock, 0, "every copy made ahead was used or left with its chunk (%zu)", p->wb_stock);
  vp_stop(p);
}

Test(wbsched_pager, evictions_for_activations_not_allocated_yet_go_clean) {
  run_t r;
  train(256, &r);
  cr_assert_gt(r.dirty[0], 0, "the first iteration has no schedule: its evictions copy");
  for (int it = 4; it < ITERS; it++) {
    cr_assert_eq(r.dirty[it], 0, "iteration %d: no eviction copies", it);
    cr_assert_eq(r.clean[it], r.dirty[0], "iteration %d: as many evictions as the first, all clean", it);
    cr_assert_lt(r.host_wait[it], r.host_wait[0], "iteration %d: the host waits less", it);
  }
  cr_log_info("write-behind: %llu copies, %llu used", (unsigned long long)mt_stat_get(write_behind),
              (unsigned long long)mt_stat_get(write_behind_used));
  cr_assert_eq(mt_stat_get(write_behind), mt_stat_get(write_behind_used), "every copy made ahead was used");
}

Test(wbsched_pager, without_a_schedule_they_copy) {
  run_t r;
  train(0, &r);
  for (int it = 4; it < ITERS; it++)
    cr_assert_gt(r.dirty[it], 0, "iteration %d: the window's lack asks for nothing, evictions copy", it);
}
