/* tier_fixture.h - the pager-with-NVMe-tier setup shared by the tier's
 * criterion programs (test_nvme_tier, test_readahead, test_spillwrite): a
 * pager on the fake driver whose NVMe store lives in a fresh directory under
 * MT_NVME_TEST_DIR, and copies through _mt_copy as the interposer makes
 * them. Included once per program (criterion forks a process per Test, so
 * each has its own P). TIER_HOST_MAP, defined before the include, picks
 * MT_HOST_MAP for the pager (default off). */
#ifndef MT_TESTS_TIER_FIXTURE_H
#define MT_TESTS_TIER_FIXTURE_H
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

#ifndef TIER_HOST_MAP
#define TIER_HOST_MAP false

#endif

#define MiB ((size_t)1 << 20)
#define NREG 16
#define REG (4 * MiB)

static char dir[4096];
static mt_pager_t *P;
static uint32_t tier_wait_ms; /* the store's wait bound (0: its default, 10 s) */

static inline int fwd_h2d(void *ctx, uintptr_t dst, uintptr_t src, size_t n) {
  (void)ctx;
  return cuMemcpyHtoD((CUdeviceptr)dst, (const void *)src, n) == CUDA_SUCCESS ? 0 : -EIO;
}

static inline int fwd_d2h(void *ctx, uintptr_t dst, uintptr_t src, size_t n) {
  (void)ctx;
  return cuMemcpyDtoH((void *)dst, (CUdeviceptr)src, n) == CUDA_SUCCESS ? 0 : -EIO;
}

static inline int put(uintptr_t a, const void *buf, size_t n) {
  return _mt_copy(a, (uintptr_t)buf, n, 0, false, 1, fwd_h2d, NULL);
}

static inline int get(void *buf, uintptr_t a, size_t n) {
  return _mt_copy((uintptr_t)buf, a, n, 0, false, 0, fwd_d2h, NULL);
}

static inline void fill(uint32_t *b, size_t n, uint32_t seed) {
  for (size_t i = 0; i < n / 4; i++) b[i] = seed * 2654435761u + (uint32_t)i;
}

/* A pager on the fake driver: vram and host budgets in MiB, the NVMe tier
 * in `dirs` (NULL: this test's directory) capped at nvme bytes (0: free
 * space), the GPU's eviction policy, the host tier's spill order (NULL:
 * auto) and the predictor (NULL: none). */
static inline void start_with(size_t vram, size_t host, const char *dirs, uint64_t nvme, const char *policy,
                              const char *spill_policy, const char *predictor) {
  const char *base = getenv("MT_NVME_TEST_DIR");
  cr_assert_not_null(base, "MT_NVME_TEST_DIR is not set (meson test sets it)");
  snprintf(dir, sizeof(dir), "%s/tier-test.XXXXXX", base);
  cr_assert_not_null(mkdtemp(dir));
  char probe[4200];
  snprintf(probe, sizeof(probe), "%s/probe", dir);
  int fd = open(probe, O_RDWR | O_CREAT | O_DIRECT, 0600);
  if (fd < 0) cr_skip_test("%s has no O_DIRECT: set MT_NVME_TEST_DIR to a disk", dir);
  close(fd);
  unlink(probe);
  char *env[] = {NULL};
  _mt_options_load(env);
  cr_assert_eq(cuInit(0), CUDA_SUCCESS);
  mt_device_t *d = _mt_device_cuda_open();
  cr_assert_not_null(d);
  _mt_nvme_cfg_t nc = {.dirs = dirs ? dirs : dir, .max_bytes = nvme ? nvme : 256 * MiB, .queue_depth = 4,
                       .request_bytes = MiB, .wait_ms = tier_wait_ms};
  mt_pager_config_t cfg = {.budget = vram * MiB, .host_budget = host * MiB, .chunk = 2 * MiB,
                           .small_limit = MiB, .policy = policy, .spill_policy = spill_policy,
                           .predictor = predictor, .prefetch_depth = 8, .readahead_depth = 1024,
                           .host_map = TIER_HOST_MAP, .nvme = &nc};
  cr_assert_eq(_mt_pager_create(d, &cfg, &P), 0);
  _mt_pager_install(P);
}

static inline void start(size_t vram, size_t host, const char *dirs, uint64_t nvme) {
  start_with(vram, host, dirs, nvme, "lru", NULL, NULL);
}

static inline void finish(void) {
  rmdir(dir);
}


/* n regions of REG bytes, each written with its own pattern. */
static inline void write_n(uintptr_t *a, uint32_t *buf, int n) {
  for (int i = 0; i < n; i++) {
    cr_assert_eq(_mt_alloc(REG, &a[i]), 0);
    fill(buf, REG, (uint32_t)i + 1);
    cr_assert_eq(put(a[i], buf, REG), 0, "region %d", i);
  }
}

/* Every region but skip1 and skip2 (-1: none) reads back its own bytes. */
static inline void check_all_but(const uintptr_t *a, uint32_t *buf, uint32_t *want, int skip1, int skip2) {
  for (int i = 0; i < NREG; i++) {
    if (i == skip1 || i == skip2) continue;
    memset(buf, 0xee, REG);
    cr_assert_eq(get(buf, a[i], REG), 0, "region %d", i);
    fill(want, REG, (uint32_t)i + 1);
    cr_assert(memcmp(buf, want, REG) == 0, "region %d differs after the round trip", i);
  }
}

static inline void check_all(const uintptr_t *a, uint32_t *buf, uint32_t *want) {
  check_all_but(a, buf, want, -1, -1);
}

/* Polls the store until the drive has nothing in flight (bounded: 2 s),
 * under the pager lock as the pager polls it. */
static inline void tier_drain(void) {
  for (int t = 0; t < 2000 && _mt_nvme_pending(P->nv->store) > 0; t++) {
    pthread_mutex_lock(&P->lock);
    (void)_mt_nvme_poll(P->nv->store, 0, 0);
    pthread_mutex_unlock(&P->lock);
    usleep(1000);
  }
  cr_assert_eq(_mt_nvme_pending(P->nv->store), 0, "the drive finished what it had");
}
#endif
