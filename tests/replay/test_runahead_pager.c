/* Description: with the handoff on, the host stays at most MT_RUNAHEAD
 * launches ahead of the GPU (runahead.c), on the virtual clock.
 *
 * Twenty 10 ms kernels on one stream, over regions that all fit: nothing
 * makes the host wait but the bound. With the handoff on and a bound of 4,
 * the host waits for the GPU until the 20th kernel is queued with at most
 * 4 ahead of it: at least 16 x 10 ms of waiting, counted in
 * runahead_waits. With no bound (MT_RUNAHEAD=0), or with the handoff off
 * (whose waits for freed buffers bound the host already), it never waits.
 * The GPU never idles in any of them: the bound keeps work queued. */
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
