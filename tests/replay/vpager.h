/* vpager.h - a pager on the virtual-clock device for the replay suite's
 * pager tests (test_reap_pager.c, test_regionkey_pager.c,
 * test_spent_pager.c): made, installed as the library's, launched on, and
 * kept for the process. Header-only, static: each test is one program. */
#ifndef MT_TEST_VPAGER_H
#define MT_TEST_VPAGER_H

#include <criterion/criterion.h>

#include "device_virtual.h"
#include "internal.h"
#include "pager.h"
#include "pager_internal.h"

#define MiB ((size_t)1 << 20)
#define MS 1000000ull

/* A kernel of ns nanoseconds on stream s. */
typedef struct vp_kern {
  mt_device_t *d;
  mt_handle_t s;
  uint64_t ns;
} vp_kern_t;

static inline int vp_run(void *ctx) {
  vp_kern_t *k = ctx;
  return _mt_vdev_kernel(k->d, k->s, k->ns);
}

/* Launches k over the n regions at a (w[i]: whether it writes a[i]) as
 * function func, under the pager lock, as the interposer does. */
static inline void vp_launch(mt_pager_t *p, vp_kern_t *k, uintptr_t *a, const bool *w, size_t n, uint64_t func) {
  pthread_mutex_lock(&p->lock);
  int rc = _mt_launch_regions(p, a, w, n, k->s, func, vp_run, k, "test launch");
  pthread_mutex_unlock(&p->lock);
  cr_assert_eq(rc, 0);
}

/* A pager configured by pc on a 64 MiB virtual GPU with 1 GB/s links
 * (unmaps wait for copies, as cuda.h allows), installed as the library's. */
static inline mt_pager_t *vp_start(const mt_pager_config_t *pc, mt_device_t **d) {
  mt_vdev_config_t vc = {.gpu_mem = 64 * MiB, .h2d_bw = 1e9, .d2h_bw = 1e9, .unmap_syncs = true};
  *d = _mt_vdev_new(&vc);
  cr_assert_not_null(*d);
  mt_pager_t *p;
  cr_assert_eq(_mt_pager_create(*d, pc, &p), 0);
  _mt_pager_install(p);
  return p;
}

/* volatile: a static only ever stored to may be optimised away, and the
 * pagers would then be leaks to LeakSanitizer. A test may make several. */
#define VP_KEPT 8
static mt_pager_t *volatile vp_kept[VP_KEPT];
static int vp_nkept;

/* A pager lives for the process, as in the library: kept, uninstalled. */
static inline void vp_stop(mt_pager_t *p) {
  cr_assert_lt(vp_nkept, VP_KEPT, "vpager.h keeps %d pagers a process at most", VP_KEPT);
  vp_kept[vp_nkept++] = p;
  __atomic_store_n(&_mt_pager, NULL, __ATOMIC_RELEASE);
}

#endif
