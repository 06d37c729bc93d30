/* Description: write-behind counts the room that regions allocated anew
 * will take (prefetch.c), on the virtual clock, with the handoff off.
 *
 * The GPU budget holds 15 chunks: W (24 MiB), D (4 MiB) and one more.
 * Each iteration, A writes D (and reads W), C reads W and writes S (2 MiB,
 * a scratch region allocated before it and freed after), then B writes O,
 * 6 MiB allocated just before it and freed after: two of its chunks' room
 * must come from D. The host reads a result after each launch, and S,
 * allocated anew, makes A's prefetch leave a checkpoint behind A, so the
 * pager knows D free to copy once A is done. At C, the predictor knows B
 * is next, and B's O is not allocated yet: nothing in the window lacks
 * device memory, yet B will evict 4 MiB. Counting O's bytes (within
 * write-behind's cap, a quarter of the budget), write-behind copies D
 * while C runs, and B's evictions copy nothing (clean); counting only
 * regions to fetch, it does nothing, and both evictions of D copy (the
 * host waits for those copies before B runs). */
#include <criterion/criterion.h>

#include "stats.h"
#include "vpager.h"

#define ITERS 6

Test(freshroom_pager, write_behind_makes_room_for_regions_allocated_anew) {
  memset(&_mt_stats, 0, sizeof(_mt_stats));
  mt_pager_config_t pc = {.budget = 30 * MiB, .host_budget = 64 * MiB, .chunk = 2 * MiB, .small_limit = 4096,
                          .policy = "nextuse", .predictor = "correlation", .prefetch_depth = 1,
                          .prefetch_pace = true, .handoff = 2};
  mt_device_t *d;
  mt_pager_t *p = vp_start(&pc, &d);
  uintptr_t w, dd;
  cr_assert_eq(_mt_alloc(24 * MiB, &w), 0);
  cr_assert_eq(_mt_alloc(4 * MiB, &dd), 0);
  mt_handle_t ev;
  cr_assert_eq(d->ops->event_create(d, &ev), 0);
  uint64_t clean[ITERS], dirty[ITERS], host_wait[ITERS];
  for (int it = 0; it < ITERS; it++) {
    uint64_t c0 = mt_stat_get(evictions_clean), d0 = mt_stat_get(evictions_dirty);
    mt_vdev_totals_t t0, t1;
    _mt_vdev_totals(d, &t0);
    for (int k = 0; k < 3; k++) {
      uintptr_t o = 0, a[2];
      bool wr[2] = {false, true};
      const size_t n = 2;
      if (k == 0) { /* A: reads W, writes D */
        a[0] = w, a[1] = dd;
      } else if (k == 1) { /* C: reads W, writes S, allocated anew */
        cr_assert_eq(_mt_alloc(2 * MiB, &o), 0);
        a[0] = w, a[1] = o;
      } else { /* B: reads W, writes O, allocated anew */
        cr_assert_eq(_mt_alloc(6 * MiB, &o), 0);
        a[0] = w, a[1] = o;
      }
      vp_kern_t kc = {d, 0, 20 * MS};
      vp_launch(p, &kc, a, wr, n, 1 + (uint64_t)k);
      if (o != 0) cr_assert_eq(_mt_free(o, 0, false), 0);
      /* the host reads a result: A's hold on D is known done */
      cr_assert_eq(d->ops->event_record(d, ev, 0), 0);
      cr_assert_eq(d->ops->event_sync(d, ev), 0);
    }
    _mt_vdev_totals(d, &t1);
    clean[it] = mt_stat_get(evictions_clean) - c0;
    dirty[it] = mt_stat_get(evictions_dirty) - d0;
    host_wait[it] = t1.host_wait_ns - t0.host_wait_ns;
    cr_log_info("iteration %d: %lu clean / %lu dirty evictions, host waited %.2f ms", it, (unsigned long)clean[it],
                (unsigned long)dirty[it], host_wait[it] / 1e6);
  }
  /* from the third iteration on the predictor knows the loop */
  for (int it = 3; it < ITERS; it++) {
    cr_assert_eq(clean[it], 2, "iteration %d: D's two chunks go clean (written behind while C ran)", it);
    cr_assert_eq(dirty[it], 0, "iteration %d: no eviction copies", it);
  }
  cr_assert_gt(mt_stat_get(write_behind_used), 0);
  vp_stop(p);
}
