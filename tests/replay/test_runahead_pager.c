/* Description: with the handoff on, the host stays at most MT_RUNAHEAD
 * launches ahead of the GPU (runahead.c), on the virtual clock.
 *
 * Twenty 10 ms kernels on one stream, over regions that all fit: nothing
 * makes the host wait but the bound. With the handoff on and a bound of 4,
 * the host waits for the GPU until the 20th kernel is queued with at most
 * 4 ahead of it: at least 16 x 10 ms of waiting, counted in
 * runahead_waits. With no bound (MT_RUNAHEAD=0), or with the handoff off
 * (whose waits for freed buffers bound the host already), it never waits.
 * The GPU never idles in any of them: the bound keeps work queued.
 *
 * a_prefetch_waits_for_room: a prefetch that finds no room free of queued
 * launches waits for the oldest of them (runahead.c, "Waiting for room");
 * see room_loop. */
#include <string.h>

#include "stats.h"
#include "vpager.h"

static void run(int handoff, unsigned runahead, uint64_t *host_wait, uint64_t *gpu_idle) {
  mt_pager_config_t pc = {.budget = 48 * MiB, .host_budget = 64 * MiB, .chunk = 2 * MiB, .small_limit = 4096,
                          .policy = "lru", .predictor = "none", .handoff = handoff, .runahead = runahead};
  mt_device_t *d;
  mt_pager_t *p = vp_start(&pc, &d);
  const mt_handle_t s = 16;
  uintptr_t a[20];
  for (int i = 0; i < 20; i++) cr_assert_eq(_mt_alloc(2 * MiB, &a[i]), 0);
  mt_vdev_totals_t t0, t1;
  _mt_vdev_totals(d, &t0);
  for (int i = 0; i < 20; i++) {
    vp_kern_t k = {d, s, 10 * MS};
    bool w = true;
    vp_launch(p, &k, &a[i], &w, 1, 0);
  }
  _mt_vdev_totals(d, &t1);
  *host_wait = t1.host_wait_ns - t0.host_wait_ns;
  *gpu_idle = t1.gpu_idle_ns - t0.gpu_idle_ns;
  vp_stop(p);
}

Test(runahead_pager, the_handoff_on_keeps_the_host_near_the_gpu) {
  uint64_t wait, idle;
  run(1, 4, &wait, &idle);
  /* the 20th launch waits for the 16th kernel to end: 160 ms in, less the
   * fetches' copies that came before the first kernel */
  cr_assert_geq(wait, 150 * MS, "the host waited %.1f ms for the GPU", wait / 1e6);
  cr_assert_lt(wait, 200 * MS, "and no longer than the bound asks (%.1f ms)", wait / 1e6);
  cr_assert_geq(mt_stat_get(runahead_waits), 15, "counted: %llu", (unsigned long long)mt_stat_get(runahead_waits));
  cr_assert_lt(idle, 1 * MS, "the GPU never ran dry (%.3f ms idle)", idle / 1e6);
}

Test(runahead_pager, no_bound_no_wait) {
  uint64_t wait, idle;
  run(1, 0, &wait, &idle);
  cr_assert_lt(wait, 1 * MS, "MT_RUNAHEAD=0: the host waited %.1f ms", wait / 1e6);
  cr_assert_eq(mt_stat_get(runahead_waits), 0);
}

Test(runahead_pager, the_handoff_off_is_not_bounded) {
  uint64_t wait, idle;
  run(2, 4, &wait, &idle);
  cr_assert_lt(wait, 1 * MS, "handoff off: the host waited %.1f ms", wait / 1e6);
  cr_assert_eq(mt_stat_get(runahead_waits), 0);
}

/* Waiting for room (runahead.c): two 100 ms kernels each read a region
 * of 4 chunks (L0, L1), six 1 ms kernels a small one (S), and then one
 * 1 ms kernel reads three regions of 4 chunks (R0..R2); 13 chunks of GPU
 * budget. The loop repeats; after the first iteration nothing is written,
 * so every eviction is clean. The host issues all of it at once, long
 * before the GPU gets there. Prefetches look two launches ahead, so the
 * next iteration's L0 and L1 are not in the window when R1 is. R0 fits
 * in the free room; R1 and R2 need the room of L0 and L1, which their
 * kernels hold:
 *  - without the waits, the launch that reads R0..R2 makes its own room,
 *    waiting for the kernels one by one (make_room), and fetches R1 and
 *    R2 once L1's kernel has ended: 16.8 ms of copies behind 6 ms of
 *    short kernels;
 *  - with them, the prefetch after a short kernel's launch finds no room,
 *    waits for L0's kernel (more than MT_RUNAHEAD / 4 = 6 launches stay
 *    queued) and fetches R1 while L1's kernel runs.
 * The GPU idles less with the waits, and the waits are counted. */
static void room_loop(bool nowait, uint64_t *idle, uint64_t *pwaits) {
  memset(&_mt_stats, 0, sizeof(_mt_stats));
  mt_pager_config_t pc = {.budget = 13 * 2 * MiB, .host_budget = 256 * MiB, .chunk = 2 * MiB,
                          .small_limit = 4096, .policy = "nextuse", .predictor = "correlation",
                          .prefetch_depth = 2, .handoff = 1, .runahead = 24, .prefetch_nowait = nowait};
  mt_device_t *d;
  mt_pager_t *p = vp_start(&pc, &d);
  uintptr_t l[2], sm, r[3];
  for (int i = 0; i < 2; i++) cr_assert_eq(_mt_alloc(8 * MiB, &l[i]), 0);
  cr_assert_eq(_mt_alloc(2 * MiB, &sm), 0);
  for (int i = 0; i < 3; i++) cr_assert_eq(_mt_alloc(8 * MiB, &r[i]), 0);
  mt_vdev_totals_t t0 = {0}, t1;
  const int iters = 8; /* the last three measured: the predictor has learned the loop */
  for (int it = 0; it < iters; it++) {
    if (it == iters - 3) _mt_vdev_totals(d, &t0);
    const bool w[3] = {it == 0, it == 0, it == 0};
    for (int i = 0; i < 2; i++) {
      vp_kern_t k = {d, 0, 100 * MS};
      vp_launch(p, &k, &l[i], w, 1, 10 + (uint64_t)i);
    }
    for (int i = 0; i < 6; i++) {
      vp_kern_t k = {d, 0, 1 * MS};
      vp_launch(p, &k, &sm, w, 1, 20 + (uint64_t)i);
    }
    vp_kern_t k = {d, 0, 1 * MS};
    vp_launch(p, &k, r, w, 3, 30);
  }
  _mt_vdev_totals(d, &t1);
  *idle = t1.gpu_idle_ns - t0.gpu_idle_ns;
  *pwaits = mt_stat_get(prefetch_waits);
  vp_stop(p);
}

Test(runahead_pager, a_prefetch_waits_for_room) {
  uint64_t idle_on, idle_off, w_on, w_off;
  room_loop(false, &idle_on, &w_on);
  room_loop(true, &idle_off, &w_off);
  cr_assert_gt(w_on, 0, "the prefetch waited for a queued launch");
  cr_assert_eq(w_off, 0, "--prefetch-wait off: it never did");
  /* R1's copy (8 MiB at 1 GB/s: 8.4 ms) moves under L1's kernel: most of
   * it comes off the GPU's idle time in each of the last three iterations
   * (measured: 15.8 against 24.1 ms an iteration) */
  cr_assert_leq(idle_on + 3 * 6 * MS, idle_off, "GPU idle with the waits %.1f ms, without %.1f ms (3 iterations)",
                idle_on / 1e6, idle_off / 1e6);
}
