/* Description: a prefetch copy that fails, on the virtual clock. A
 * launch's own fetch that fails fails its launch; a prefetch belongs to no
 * launch, and its chunks were left DEVICE without their data, so the next
 * launch to use the region read garbage, silently (found by review). Now
 * a failed fetch copy (_mt_fetch_flush, pager.c) marks its region lost:
 * the failure is logged, and every later use fails with the copy's error.
 *
 * A loop of six regions of two chunks, each read by its own 1 ms kernel,
 * in a GPU budget of six chunks: every launch's region comes back from
 * host memory, prefetched two launches ahead. After three iterations the
 * device's copies fail while one kernel is being forwarded, which is when
 * the prefetch for the next launches runs. */
#include <errno.h>

#include "vpager.h"

static const mt_device_ops_t *real;
static bool failing;

static int copy_maybe_failing(mt_device_t *d, uintptr_t dst, uintptr_t src, size_t n, mt_handle_t s) {
  return failing ? -EIO : real->copy(d, dst, src, n, s);
}

typedef struct fail_kern {
  vp_kern_t k;
  bool fail_after; /* the copies fail from this kernel's forwarding on */
} fail_kern_t;

static int run_then_fail(void *ctx) {
  fail_kern_t *f = ctx;
  int rc = vp_run(&f->k);
  if (f->fail_after) failing = true;
  return rc;
}

#define NR 6

Test(pffail_pager, a_failed_prefetch_fails_the_use_not_silently) {
  mt_pager_config_t pc = {.budget = 6 * 2 * MiB, .host_budget = 256 * MiB, .chunk = 2 * MiB, .small_limit = 4096,
                          .policy = "nextuse", .predictor = "correlation", .prefetch_depth = 2, .handoff = 2};
  mt_device_t *d;
  mt_pager_t *p = vp_start(&pc, &d);
  static mt_device_ops_t ops;
  real = d->ops;
  ops = *real;
  ops.copy = copy_maybe_failing;
  d->ops = &ops;
  uintptr_t a[NR];
  for (int i = 0; i < NR; i++) cr_assert_eq(_mt_alloc(4 * MiB, &a[i]), 0);
  bool w = false;
  for (int it = 0; it < 3; it++)
    for (int i = 0; i < NR; i++) {
      vp_kern_t k = {d, 0, 1 * MS};
      w = it == 0; /* written once: clean from then on, evicted without a copy */
      vp_launch(p, &k, &a[i], &w, 1, 700 + (uint64_t)i);
    }
  /* launch 0 of the fourth iteration: its prefetch for launches 1 and 2 fails */
  fail_kern_t f = {{d, 0, 1 * MS}, true};
  pthread_mutex_lock(&p->lock);
  int rc = _mt_launch_regions(p, &a[0], &w, 1, 0, 700, run_then_fail, &f, "test launch");
  pthread_mutex_unlock(&p->lock);
  failing = false;
  cr_assert_eq(rc, 0, "the launch itself ran");
  int lost = -1;
  for (int i = 1; i < NR && lost < 0; i++)
    if (_mt_region_of(p, a[i])->lost < 0) lost = i;
  cr_assert_geq(lost, 1, "a region the prefetch was filling is marked lost");
  cr_assert_eq(_mt_region_of(p, a[lost])->lost, -EIO);
  vp_kern_t k = {d, 0, 1 * MS};
  pthread_mutex_lock(&p->lock);
  rc = _mt_launch_regions(p, &a[lost], &w, 1, 0, 700 + (uint64_t)lost, vp_run, &k, "test launch");
  pthread_mutex_unlock(&p->lock);
  cr_assert_eq(rc, -EIO, "its next use fails with the copy's error (%d)", rc);
  vp_stop(p);
}
