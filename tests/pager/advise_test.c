/*
 * Description: mt_advise(MT_ADVISE_READ_MOSTLY) on the fake driver under
 * LD_PRELOAD=libmtalloc.so, with MT_MAX_VRAM = 8 MiB and 4 MiB buffers, so
 * that every round of launches evicts:
 *   readmostly  launches that only read a buffer copy it back at every
 *               eviction while it is not advised (no clean eviction); once
 *               advised read-mostly its chunks are evicted clean, with no
 *               bytes copied to host for them, and its data stays intact
 *   broken      a kernel writes a buffer advised read-mostly: at the clean
 *               eviction the write is lost and the buffer reads back what
 *               it held before (what mtalloc.h documents)
 *   verify      the same under MT_VERIFY_CLEAN=1: the write is reported as
 *               an error naming the region (the wrapper checks the message)
 *               and copied back, so nothing is lost
 * Usage: advise_test CASE. Exit 0 pass, 1 fail, 77 skip (not preloaded).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fakecuda.h"

#define WHO "advise_test"
#define CONTRACT_LINKED
#include "contract.h"

#define BUF (4 * MiB)
#define N32 (BUF / 4)
enum { MT_ADVISE_NONE = 0, MT_ADVISE_READ_MOSTLY = 1 }; /* mtalloc.h */

static int (*advise)(const void *ptr, size_t bytes, int advice);

/* kernels */
static void k_sum(void **p, const fakecuda_launch_t *l) { /* *out = sum of x[0..n) */
  (void)l;
  const uint32_t *x = *(const uint32_t **)p[0];
  uint32_t *out = *(uint32_t **)p[1];
  size_t n = *(size_t *)p[2];
  uint32_t s = 0;
  for (size_t i = 0; i < n; i++) s += x[i];
  *out = s;
}
static void k_add(void **p, const fakecuda_launch_t *l) { /* x[i] += a */
  (void)l;
  uint32_t *x = *(uint32_t **)p[0];
  uint32_t a = *(uint32_t *)p[1];
  size_t n = *(size_t *)p[2];
  for (size_t i = 0; i < n; i++) x[i] += a;
}

static CUfunction f_sum, f_add;

static void setup(void) {
  contract_preloaded();
  advise = (int (*)(const void *, size_t, int))dlsym(RTLD_DEFAULT, "mt_advise");
  EXPECT(advise != NULL, "libmtalloc.so does not export mt_advise");
  CK(cuInit(0));
  CUdevice d;
  CUcontext c;
  CK(cuDeviceGet(&d, 0));
  CK(cuDevicePrimaryCtxRetain(&c, d));
  CK(cuCtxSetCurrent(c));
  size_t sum_params[] = {8, 8, 8}, add_params[] = {8, 4, 8};
  f_sum = fakecuda_register_kernel("sum_u32", k_sum, 3, sum_params);
  f_add = fakecuda_register_kernel("add_u32", k_add, 3, add_params);
}

static void sum(CUdeviceptr x, CUdeviceptr out) {
  size_t n = N32;
  void *args[] = {&x, &out, &n};
  CK(cuLaunchKernel(f_sum, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
}

static void add(CUdeviceptr x, uint32_t a) {
  size_t n = N32;
  void *args[] = {&x, &a, &n};
  CK(cuLaunchKernel(f_add, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
}

static uint32_t *pattern(uint32_t seed) {
  uint32_t *h = malloc(BUF);
  EXPECT(h != NULL, "malloc");
  for (size_t i = 0; i < N32; i++) h[i] = seed + (uint32_t)i * 2654435761u;
  return h;
}

/* w (weights, read by every round), two activations x and y written by
 * every round: in 8 MiB, each round evicts w. */
typedef struct bufs {
  CUdeviceptr w, x, y, out;
  uint32_t *host;              /* w's contents */
} bufs_t;

static bufs_t make(void) {
  bufs_t b;
  CK(cuMemAlloc(&b.w, BUF));
  CK(cuMemAlloc(&b.x, BUF));
  CK(cuMemAlloc(&b.y, BUF));
  CK(cuMemAlloc(&b.out, 64)); /* small: packed, stays on the device */
  b.host = pattern(7);
  CK(cuMemcpyHtoD(b.w, b.host, BUF));
  CK(cuMemsetD32(b.x, 1, N32));
  CK(cuMemsetD32(b.y, 2, N32));
  return b;
}

static void round_(const bufs_t *b) {
  sum(b->w, b->out);
  add(b->x, 1);
  add(b->y, 1);
}

static void expect_w(const bufs_t *b, const uint32_t *want, const char *when) {
  CK(cuCtxSynchronize());
  uint32_t *got = malloc(BUF);
  EXPECT(got != NULL, "malloc");
  CK(cuMemcpyDtoH(got, b->w, BUF));
  size_t i = 0;
  while (i < N32 && got[i] == want[i]) i++;
  EXPECT(i == N32, "%s: w[%zu] = %u, want %u", when, i, got[i], want[i]);
  free(got);
}

static int case_readmostly(void) {
  bufs_t b = make();
  for (int i = 0; i < 3; i++) round_(&b); /* warm up: w gets its host copy */
  CK(cuCtxSynchronize());
  long clean0 = stat_of("evictions_clean"), dirty0 = stat_of("evictions_dirty"), d2h0 = stat_of("bytes_d2h");
  for (int i = 0; i < 4; i++) round_(&b);
  CK(cuCtxSynchronize());
  long clean1 = stat_of("evictions_clean"), dirty1 = stat_of("evictions_dirty"), d2h1 = stat_of("bytes_d2h");
  EXPECT(clean1 == clean0 && dirty1 > dirty0, "not advised: %ld clean, %ld dirty evictions, want 0 clean",
         clean1 - clean0, dirty1 - dirty0);
  long per_round = (d2h1 - d2h0) / 4; /* w, x and y copied back every round */

  EXPECT(advise((const void *)(uintptr_t)b.w, BUF, MT_ADVISE_READ_MOSTLY) == 1, "mt_advise did not advise w");
  round_(&b); /* w is dirty from its last read: one more copy, then it stays clean */
  CK(cuCtxSynchronize());
  long clean2 = stat_of("evictions_clean"), dirty2 = stat_of("evictions_dirty"), d2h2 = stat_of("bytes_d2h");
  for (int i = 0; i < 4; i++) round_(&b);
  CK(cuCtxSynchronize());
  long clean3 = stat_of("evictions_clean"), dirty3 = stat_of("evictions_dirty"), d2h3 = stat_of("bytes_d2h");
  long wchunks = (long)(BUF / (2 * MiB));
  EXPECT(clean3 - clean2 == 4 * wchunks, "advised: %ld clean evictions in 4 rounds, want %ld (w's chunks)",
         clean3 - clean2, 4 * wchunks);
  EXPECT(d2h3 - d2h2 == (dirty3 - dirty2) * (long)(2 * MiB), "advised: bytes_d2h %ld for %ld dirty evictions",
         d2h3 - d2h2, dirty3 - dirty2);
  EXPECT(d2h3 - d2h2 == 4 * per_round - 4 * (long)BUF, "advised: %ld bytes copied back in 4 rounds, want %ld "
         "(x and y only)", d2h3 - d2h2, 4 * per_round - 4 * (long)BUF);
  expect_w(&b, b.host, "advised");

  /* Advice is per allocation: a range over part of one advises nothing;
   * MT_ADVISE_NONE withdraws it, and w is copied back again. */
  EXPECT(advise((const void *)(uintptr_t)b.w, BUF / 2, MT_ADVISE_READ_MOSTLY) == 0, "partial range advised");
  EXPECT(advise((const void *)(uintptr_t)b.w, BUF, 9) == -EINVAL, "bad advice accepted");
  EXPECT(advise((const void *)(uintptr_t)b.w, 0, MT_ADVISE_NONE) == -EINVAL, "0 bytes accepted");
  EXPECT(advise((const void *)(uintptr_t)b.w, 3 * BUF, MT_ADVISE_NONE) >= 1, "MT_ADVISE_NONE over w");
  round_(&b);
  CK(cuCtxSynchronize());
  long clean4 = stat_of("evictions_clean");
  for (int i = 0; i < 2; i++) round_(&b);
  CK(cuCtxSynchronize());
  EXPECT(stat_of("evictions_clean") == clean4, "advice withdrawn: still %ld clean evictions",
         stat_of("evictions_clean") - clean4);
  expect_w(&b, b.host, "withdrawn");
  printf(WHO " readmostly: %ld clean evictions, %ld bytes copied back in 4 rounds (%ld unadvised)\n",
         clean3 - clean2, d2h3 - d2h2, d2h1 - d2h0);
  return 0;
}

/* w advised read-mostly, then written by a kernel (the promise broken):
 * returns the values w held before the write. */
static uint32_t *break_promise(bufs_t *b) {
  for (int i = 0; i < 3; i++) round_(b);
  EXPECT(advise((const void *)(uintptr_t)b->w, BUF, MT_ADVISE_READ_MOSTLY) == 1, "mt_advise did not advise w");
  round_(b); /* w fetched for reading: clean, with a current host copy */
  round_(b);
  add(b->w, 5); /* the broken promise */
  round_(b);    /* evicts w while it counts as clean */
  round_(b);
  return b->host;
}

static int case_broken(void) {
  bufs_t b = make();
  const uint32_t *old = break_promise(&b);
  expect_w(&b, old, "write against read-mostly without MT_VERIFY_CLEAN (documented: lost)");
  printf(WHO " broken: the write was lost at the clean eviction, as documented\n");
  return 0;
}

static int case_verify(void) {
  bufs_t b = make();
  long dirty0 = stat_of("evictions_dirty");
  break_promise(&b);
  uint32_t *want = pattern(7);
  for (size_t i = 0; i < N32; i++) want[i] += 5;
  expect_w(&b, want, "write against read-mostly with MT_VERIFY_CLEAN=1 (kept)");
  EXPECT(stat_of("evictions_dirty") > dirty0, "no dirty eviction");
  printf(WHO " verify: the write was reported and kept\n");
  free(want);
  return 0;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: advise_test readmostly|broken|verify\n");
    return 2;
  }
  setup();
  if (strcmp(argv[1], "readmostly") == 0) return case_readmostly();
  if (strcmp(argv[1], "broken") == 0) return case_broken();
  if (strcmp(argv[1], "verify") == 0) return case_verify();
  fprintf(stderr, WHO ": unknown case %s\n", argv[1]);
  return 2;
}
