/*
 * Description: work larger than the budget, on the fake driver under
 * LD_PRELOAD=libmtalloc.so, case by case:
 *   biglaunch  a kernel taking a ~25 KB struct of 700 buffer pointers by
 *              value (PyTorch's multi-tensor apply), the buffers 4x the
 *              budget, reads and writes every element of every buffer; then
 *              the same launch captured in a CUDA graph and launched. With
 *              host mappings both run host-mapped (launches_host_mapped,
 *              host_mapped_bytes) and every element is exact; with
 *              MT_HOST_MAP=off the launch fails with
 *              CUDA_ERROR_OUT_OF_MEMORY and a line naming the kernel
 *              (meson checks it) and the data is untouched.
 *   copybig    a region of 3x the budget copied in (HtoD), set in part
 *              (cuMemsetD32), copied to a second such region (DtoD, async)
 *              and out (DtoH), both exact; run with host mappings on and off
 *   fresh      a buffer no one has touched is reached by a kernel only
 *              through an XOR-masked address (the scan cannot see it): with
 *              host mappings it must have backing (a host copy) by the first
 *              launch after its allocation, and the data written through it
 *              must be exact afterwards
 *   meminfo    cuMemGetInfo as PyTorch's cudaMallocAsync backend checks it:
 *              allocating far past the GPU budget, free + the bytes allocated
 *              <= total at every step, and an allocation fails only when
 *              free says it does not fit
 *   moves      chunk moves take physical memory from pools: after a warm-up,
 *              fetches and evictions call neither cuMemCreate nor cuMemRelease,
 *              and each fetch costs at most the mapping calls the design
 *              allows (libmtalloc/physpool.c)
 *   ordering   no cuMemUnmap (which may wait for the device) comes while a
 *              fetch copy the pager issued is in flight, whether the copy
 *              belongs to the launch being prepared or to an earlier
 *              operation: the fake counts such calls (cuMemUnmap_busy);
 *              the same for cuMemSetAccess (cuMemSetAccess_busy)
 * Usage: oversize_test CASE. Exit 0 pass, 1 fail, 77 skip (not preloaded).
 */
#include <cudaTypedefs.h>
#include <dlfcn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fakecuda.h"

#define WHO "oversize_test"
#define CONTRACT_LINKED
#include "contract.h"


static size_t env_size(const char *name) {
  const char *v = getenv(name);
  if (v == NULL) return 0;
  char *end;
  size_t n = strtoull(v, &end, 10);
  if (*end == 'M') n <<= 20;
  else if (*end == 'G') n <<= 30;
  return n;
}

static uint32_t mix(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352dU;
  x ^= x >> 15;
  x *= 0x846ca68bU;
  return x ^ (x >> 16);
}

/* ---- biglaunch ---------------------------------------------------------------- */

#define NT 700
/* Like PyTorch's TensorListMetadata: addresses, sizes and per-tensor
 * arguments side by side, ~25 KB passed by value. */
typedef struct tensor_list {
  uint64_t addr[NT];
  uint64_t numel[NT];
  uint64_t scale[NT];
  uint64_t chunk_of_block[NT];
  uint32_t tag[NT];
  uint32_t n;
  uint32_t pad;
} tensor_list_t;

static uint32_t apply_value(uint32_t x, uint32_t scale, uint32_t tag, uint64_t i) {
  return x * scale + tag + (uint32_t)i;
}

static void k_multi_fn(void **p, const fakecuda_launch_t *l) {
  (void)l;
  const tensor_list_t *t = p[0];
  for (uint32_t j = 0; j < t->n; j++) {
    uint32_t *x = (uint32_t *)(uintptr_t)t->addr[j];
    for (uint64_t i = 0; i < t->numel[j]; i++) x[i] = apply_value(x[i], (uint32_t)t->scale[j], t->tag[j], i);
  }
}

static int case_biglaunch(void) {
  /* run with MT_MAX_VRAM=350M: 700 buffers of 1 MiB, one 2 MiB chunk each, 1400 MiB: 4x */
  size_t budget = env_size("MT_MAX_VRAM");
  size_t sz = MiB, n = sz / 4;
  size_t ksize = sizeof(tensor_list_t);
  EXPECT(ksize > 24000 && ksize < 32764, "struct of %zu bytes", ksize);
  CUfunction f = fakecuda_register_kernel("multi_tensor_apply", k_multi_fn, 1, &ksize);
  EXPECT(f != NULL, "the fake refused a %zu-byte parameter", ksize);
  static tensor_list_t t;
  uint32_t *host = malloc(sz), *back = malloc(sz);
  t.n = NT;
  for (uint32_t j = 0; j < NT; j++) {
    CUdeviceptr d;
    CK(cuMemAlloc(&d, sz));
    for (size_t i = 0; i < n; i++) host[i] = mix(j * 7919u + (uint32_t)i);
    CK(cuMemcpyHtoD(d, host, sz));
    t.addr[j] = d;
    t.numel[j] = n;
    t.scale[j] = 3 + j % 5;
    t.tag[j] = j * 11;
  }
  bool host_map = stat_of("host_mapped") == 1;
  EXPECT((size_t)NT * 2 * MiB >= 4 * budget, "footprint %zu is not 4x the budget %zu", (size_t)NT * 2 * MiB, budget);
  void *args[] = {&t};
  CUresult r = cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL);
  if (!host_map) {
    EXPECT(r == CUDA_ERROR_OUT_OF_MEMORY, "launch of 4x the budget without host mappings returned %d", (int)r);
    for (uint32_t j = 0; j < NT; j += 97) {
      CK(cuMemcpyDtoH(back, t.addr[j], sz));
      for (size_t i = 0; i < n; i++)
        EXPECT(back[i] == mix(j * 7919u + (uint32_t)i), "buffer %u changed by a refused launch", j);
    }
    printf("oversize_test biglaunch: ok (refused without host mappings, data untouched)\n");
    return 0;
  }
  EXPECT(r == CUDA_SUCCESS, "launch of 4x the budget returned %d", (int)r);
  /* The same launch captured in a graph: the graph's footprint is 4x too. */
  CUstream s;
  CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CK(cuCtxSynchronize());
  CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, args, NULL));
  CUgraph g;
  CUgraphExec ge;
  CK(cuStreamEndCapture(s, &g));
  CK(cuGraphInstantiateWithFlags(&ge, g, 0));
  CK(cuGraphLaunch(ge, s));
  CK(cuStreamSynchronize(s));
  for (uint32_t j = 0; j < NT; j++) {
    CK(cuMemcpyDtoH(back, t.addr[j], sz));
    for (size_t i = 0; i < n; i++) {
      uint32_t want = mix(j * 7919u + (uint32_t)i);
      for (int k = 0; k < 2; k++) want = apply_value(want, (uint32_t)t.scale[j], t.tag[j], i);
      EXPECT(back[i] == want, "buffer %u element %zu = %#x, want %#x after the launch and the graph", j, i,
             back[i], want);
    }
  }
  long long hl = stat_of("launches_host_mapped"), hb = stat_of("host_mapped_bytes");
  EXPECT(hl == 2, "launches_host_mapped %lld, want 2 (the launch and the graph launch)", hl);
  EXPECT(hb >= 2 * (long long)(3 * budget - 2 * MiB), "host_mapped_bytes %lld: too few for 2 launches of 4x %zu", hb,
         budget);
  EXPECT(fakecuda_device_peak() <= budget, "device peak %zu > budget %zu", fakecuda_device_peak(), budget);
  CK(cuGraphExecDestroy(ge));
  CK(cuGraphDestroy(g));
  CK(cuStreamDestroy(s));
  for (uint32_t j = 0; j < NT; j++) CK(cuMemFree(t.addr[j]));
  free(host);
  free(back);
  printf("oversize_test biglaunch: ok (%lld host-mapped launches, %lld bytes in host memory, exact)\n", hl, hb);
  return 0;
}

/* ---- copybig ------------------------------------------------------------------ */

static int case_copybig(void) {
  /* run with MT_MAX_VRAM=8M: regions of 24 MiB */
  size_t budget = env_size("MT_MAX_VRAM");
  size_t sz = 3 * budget, n = sz / 4;
  uint32_t *host = malloc(sz), *back = malloc(sz);
  for (size_t i = 0; i < n; i++) host[i] = mix((uint32_t)i);
  CUdeviceptr a, b;
  CK(cuMemAlloc(&a, sz));
  CK(cuMemAlloc(&b, sz));
  CK(cuMemcpyHtoD(a, host, sz));
  size_t set_from = n / 3 + 1000, set_n = n / 3; /* across chunk boundaries */
  CK(cuMemsetD32(a + set_from * 4, 0xabcdef01u, set_n));
  for (size_t i = set_from; i < set_from + set_n; i++) host[i] = 0xabcdef01u;
  CUstream s;
  CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CK(cuMemcpyDtoDAsync(b, a, sz, s));
  CK(cuStreamSynchronize(s));
  memset(back, 0, sz);
  CK(cuMemcpyDtoH(back, a, sz));
  for (size_t i = 0; i < n; i++) EXPECT(back[i] == host[i], "a[%zu] = %#x, want %#x", i, back[i], host[i]);
  memset(back, 0, sz);
  CK(cuMemcpyDtoHAsync(back, b, sz, s));
  CK(cuStreamSynchronize(s));
  for (size_t i = 0; i < n; i++) EXPECT(back[i] == host[i], "b[%zu] = %#x, want %#x", i, back[i], host[i]);
  EXPECT(fakecuda_device_peak() <= budget, "device peak %zu > budget %zu", fakecuda_device_peak(), budget);
  EXPECT(stat_of("evictions_dirty") > 0, "no evictions: the copies did not go through the budget");
  CK(cuMemFree(a));
  CK(cuMemFree(b));
  CK(cuStreamDestroy(s));
  free(host);
  free(back);
  printf("oversize_test copybig: ok (2 regions of %zu bytes through a budget of %zu, host_mapped=%lld)\n", sz,
         budget, (long long)stat_of("host_mapped"));
  return 0;
}

/* ---- fresh -------------------------------------------------------------------- */

#define KEY 0xa5c3000000000000ULL

static void k_hidden_fill_fn(void **p, const fakecuda_launch_t *l) { /* x = masked ^ key; x[i] = f(i) */
  (void)l;
  uint32_t *x = (uint32_t *)(uintptr_t)(*(uint64_t *)p[0] ^ *(uint64_t *)p[1]);
  uint64_t n = *(uint64_t *)p[2];
  for (uint64_t i = 0; i < n; i++) x[i] = mix((uint32_t)i ^ 0x5eed);
}

static void k_touch_fn(void **p, const fakecuda_launch_t *l) {
  (void)l;
  uint32_t *x = *(uint32_t **)p[0];
  x[0] += 1;
}

static int case_fresh(void) {
  /* run with MT_MAX_VRAM=8M and host mappings */
  size_t p3[] = {8, 8, 8}, p1[] = {8};
  CUfunction hidden = fakecuda_register_kernel("hidden_fill", k_hidden_fill_fn, 3, p3);
  CUfunction touch = fakecuda_register_kernel("touch", k_touch_fn, 1, p1);
  CUdeviceptr other, a;
  CK(cuMemAlloc(&other, 2 * MiB));
  CK(cuMemsetD32(other, 0, 1));
  EXPECT(stat_of("host_mapped") == 1, "host mappings are off: the case needs them");
  size_t sz = 4 * MiB + 4096; /* three chunks, the last partly used */
  CK(cuMemAlloc(&a, sz));   /* never touched: no copy, set or launch names it */
  uint64_t masked = (uint64_t)a ^ KEY, key = KEY, n = sz / 4;
  void *hargs[] = {&masked, &key, &n};
  CK(cuLaunchKernel(hidden, 1, 1, 1, 1, 1, 1, 0, NULL, hargs, NULL));
  void *targs[] = {&other};
  CK(cuLaunchKernel(touch, 1, 1, 1, 1, 1, 1, 0, NULL, targs, NULL));
  CK(cuCtxSynchronize());
  uint32_t *back = malloc(sz);
  CK(cuMemcpyDtoH(back, a, sz));
  for (size_t i = 0; i < n; i++)
    EXPECT(back[i] == mix((uint32_t)i ^ 0x5eed), "a[%zu] = %#x: written through a hidden pointer, lost", i, back[i]);
  CK(cuMemFree(a));
  CK(cuMemFree(other));
  free(back);
  printf("oversize_test fresh: ok (a never-touched buffer reached through a hidden pointer: exact)\n");
  return 0;
}

/* ---- meminfo ------------------------------------------------------------------ */

static int case_meminfo(void) {
  /* run with MT_MAX_VRAM=8M MT_MAX_HOST=64M */
  enum { MAXB = 256 };
  CUdeviceptr b[MAXB];
  size_t live = 0;
  int nb = 0, refused = 0;
  static const size_t sizes[] = {3 * MiB, 100, 2 * MiB, 64 * 1024, 5 * MiB + 7, 1000};
  for (int step = 0; step < MAXB; step++) {
    size_t fr = 0, tot = 0;
    CK(cuMemGetInfo(&fr, &tot));
    EXPECT(fr + live <= tot, "step %d: free %zu + allocated %zu > total %zu", step, fr, live, tot);
    size_t want = sizes[step % 6];
    CUresult r = cuMemAlloc(&b[nb], want);
    size_t rounded = want < MiB ? 0 : (want + 2 * MiB - 1) / (2 * MiB) * (2 * MiB);
    if (r == CUDA_SUCCESS) {
      live += want;
      nb++;
    } else {
      EXPECT(r == CUDA_ERROR_OUT_OF_MEMORY, "step %d: alloc %zu returned %d", step, want, (int)r);
      EXPECT(rounded == 0 || rounded > fr, "step %d: %zu bytes refused although cuMemGetInfo said %zu free", step,
             want, fr);
      if (++refused > 8) break;
    }
  }
  size_t fr = 0, tot = 0;
  CK(cuMemGetInfo(&fr, &tot));
  EXPECT(live > 8 * MiB, "allocated %zu: did not go past the GPU budget", live);
  EXPECT(fr + live <= tot, "at the end: free %zu + allocated %zu > total %zu", fr, live, tot);
  EXPECT(tot <= (8 + 64) * MiB, "total %zu is more than the budgets can hold", tot);
  printf("oversize_test meminfo: ok (%d allocations, %zu bytes, total %zu, free %zu)\n", nb, live, tot, fr);
  for (int i = 0; i < nb; i++) CK(cuMemFree(b[i]));
  size_t fr2 = 0, tot2 = 0;
  CK(cuMemGetInfo(&fr2, &tot2));
  EXPECT(fr2 > fr && fr2 <= tot2, "after freeing everything: free %zu of %zu", fr2, tot2);
  return 0;
}

/* ---- moves -------------------------------------------------------------------- */

static void k_add_fn(void **p, const fakecuda_launch_t *l) { /* x[i] += a */
  (void)l;
  uint32_t *x = *(uint32_t **)p[0];
  uint32_t a = *(uint32_t *)p[1];
  size_t n = *(size_t *)p[2];
  for (size_t i = 0; i < n; i++) x[i] += a;
}

static const char *const counted[] = {"cuMemCreate", "cuMemRelease", "cuMemMap", "cuMemUnmap", "cuMemSetAccess",
                                      "cuMemHostAlloc"};
enum { NCOUNTED = sizeof(counted) / sizeof(counted[0]) };

static void snapshot(unsigned long long *v) {
  for (int i = 0; i < NCOUNTED; i++) v[i] = fakecuda_call_count(counted[i]);
}

static int case_moves(void) {
  /* run with MT_MAX_VRAM=8M: A and B of 8 MiB (4 chunks each) take turns, so
   * every launch fetches one region whole and evicts the other whole */
  size_t ps[] = {8, 4, 8};
  CUfunction add = fakecuda_register_kernel("add_u32", k_add_fn, 3, ps);
  size_t sz = 8 * MiB, n = sz / 4;
  CUdeviceptr buf[2];
  for (int b = 0; b < 2; b++) {
    CK(cuMemAlloc(&buf[b], sz));
    CK(cuMemsetD32(buf[b], (unsigned)b * 1000, n));
  }
  bool host_map = stat_of("host_mapped") == 1;
  uint32_t one = 1;
  int launches = 0;
  for (int round = 0; round < 3; round++) /* warm-up: the pools fill */
    for (int b = 0; b < 2; b++, launches++) {
      void *args[] = {&buf[b], &one, &n};
      CK(cuLaunchKernel(add, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
    }
  CK(cuCtxSynchronize());
  unsigned long long before[NCOUNTED], after[NCOUNTED];
  snapshot(before);
  long long f0 = stat_of("fetches"), e0 = stat_of("evictions_dirty") + stat_of("evictions_clean");
  enum { ROUNDS = 8 };
  for (int round = 0; round < ROUNDS; round++)
    for (int b = 0; b < 2; b++, launches++) {
      void *args[] = {&buf[b], &one, &n};
      CK(cuLaunchKernel(add, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
    }
  CK(cuCtxSynchronize());
  snapshot(after);
  long long fetches = stat_of("fetches") - f0, evictions = stat_of("evictions_dirty") + stat_of("evictions_clean") - e0;
  unsigned long long d[NCOUNTED];
  for (int i = 0; i < NCOUNTED; i++) d[i] = after[i] - before[i];
  int runs = 2 * ROUNDS; /* one run of 4 chunks fetched and one evicted per launch */
  printf("oversize_test moves: %lld chunks fetched and %lld evicted in %d launches (host mappings %s): ", fetches,
         evictions, runs, host_map ? "on" : "off");
  for (int i = 0; i < NCOUNTED; i++) printf("%s %llu%s", counted[i], d[i], i + 1 < NCOUNTED ? ", " : "\n");
  EXPECT(fetches == 4 * runs && evictions == 4 * runs, "fetches %lld, evictions %lld: want %d each", fetches,
         evictions, 4 * runs);
  EXPECT(d[0] == 0 && d[1] == 0, "cuMemCreate %llu, cuMemRelease %llu in steady state: want 0 (pool)", d[0], d[1]);
  EXPECT(d[5] == 0, "cuMemHostAlloc %llu in steady state: want 0 (pool)", d[5]);
  /* The design (pager.c, physpool.c): a fetched run of chunks costs one
   * cuMemMap per chunk (each its own handle), one cuMemSetAccess, and with
   * host mappings one cuMemUnmap of their host mappings; an evicted run one
   * cuMemUnmap and, with host mappings, one cuMemMap per chunk (its host
   * copy) and one cuMemSetAccess. */
  unsigned long long want_map = (unsigned long long)(host_map ? 2 : 1) * (unsigned long long)fetches;
  unsigned long long want_runs = (unsigned long long)(host_map ? 2 : 1) * (unsigned long long)runs;
  EXPECT(d[2] == want_map, "cuMemMap %llu, want %llu", d[2], want_map);
  EXPECT(d[3] == want_runs, "cuMemUnmap %llu, want %llu (one per run)", d[3], want_runs);
  EXPECT(d[4] == want_runs, "cuMemSetAccess %llu, want %llu (one per run)", d[4], want_runs);
  uint32_t *back = malloc(sz);
  for (int b = 0; b < 2; b++) {
    CK(cuMemcpyDtoH(back, buf[b], sz));
    uint32_t want = (uint32_t)b * 1000 + (uint32_t)launches / 2;
    for (size_t i = 0; i < n; i++) EXPECT(back[i] == want, "buf %d [%zu] = %u, want %u", b, i, back[i], want);
    CK(cuMemFree(buf[b]));
  }
  free(back);
  printf("oversize_test moves: ok\n");
  return 0;
}

/* ---- ordering ----------------------------------------------------------------- */

static void k_add2_fn(void **p, const fakecuda_launch_t *l) { /* x[i] += 1, y[i] += 2 */
  (void)l;
  uint32_t *x = *(uint32_t **)p[0], *y = *(uint32_t **)p[1];
  size_t n = *(size_t *)p[2];
  for (size_t i = 0; i < n; i++) {
    x[i] += 1;
    y[i] += 2;
  }
}

static int case_ordering(void) {
  /* run with MT_MAX_VRAM=8M and FAKECUDA_BW=2G (a chunk's copy takes ~1 ms):
   * a launch on two 2 MiB regions, both evicted by reading an 8 MiB one in
   * between, needs room twice while it is prepared; the second eviction's
   * cuMemUnmap must not come while the first region's fetch copy is in
   * flight (on a real driver it may wait for it). */
  size_t ps3[] = {8, 8, 8}, ps_add[] = {8, 4, 8};
  CUfunction add2 = fakecuda_register_kernel("add2", k_add2_fn, 3, ps3);
  CUfunction add = fakecuda_register_kernel("add_u32", k_add_fn, 3, ps_add);
  size_t small = 2 * MiB, big = 8 * MiB, ns = small / 4, nb = big / 4;
  CUdeviceptr a1, a2, b;
  CK(cuMemAlloc(&a1, small));
  CK(cuMemAlloc(&a2, small));
  CK(cuMemAlloc(&b, big));
  CK(cuMemsetD32(a1, 10, ns));
  CK(cuMemsetD32(a2, 20, ns));
  CK(cuMemsetD32(b, 30, nb));
  CK(cuCtxSynchronize());
  unsigned long long busy0 = fakecuda_call_count("cuMemUnmap_busy");
  long long f0 = stat_of("fetches");
  long long ws0 = stat_of("unmap_waits");
  enum { ROUNDS = 6 };
  uint32_t one = 1;
  uint32_t *back = malloc(big);
  /* Each operation starts with nothing in flight (synchronised), so what
   * the fake counts is the launch's own doing. b comes back clean (a copy
   * only reads it), so evicting it for a2 needs no copy and no wait:
   * nothing but ordering keeps a1's fetch copy from being in flight at that
   * eviction's cuMemUnmap. */
  for (int r = 0; r < ROUNDS; r++) {
    CK(cuMemcpyDtoH(back, b, big));
    void *aargs[] = {&a1, &a2, &ns};
    CK(cuLaunchKernel(add2, 1, 1, 1, 1, 1, 1, 0, NULL, aargs, NULL));
    CK(cuCtxSynchronize());
  }
  unsigned long long busy = fakecuda_call_count("cuMemUnmap_busy") - busy0;
  long long fetches = stat_of("fetches") - f0;
  long long sync_waits = stat_of("unmap_waits") - ws0;
  /* The same without synchronising: the copy that follows the launch finds
   * its fetch copies in flight, and must not unmap before they are done
   * (unmapfence.c: a non-blocking query, a host wait only when they are
   * not, counted in unmap_waits). */
  unsigned long long cross0 = fakecuda_call_count("cuMemUnmap_busy");
  unsigned long long acc0 = fakecuda_call_count("cuMemSetAccess_busy");
  long long w0 = stat_of("unmap_waits");
  for (int r = 0; r < ROUNDS; r++) {
    CK(cuMemcpyDtoH(back, b, big));
    void *aargs[] = {&a1, &a2, &ns};
    CK(cuLaunchKernel(add2, 1, 1, 1, 1, 1, 1, 0, NULL, aargs, NULL));
  }
  CK(cuCtxSynchronize());
  unsigned long long cross = fakecuda_call_count("cuMemUnmap_busy") - cross0;
  unsigned long long acc = fakecuda_call_count("cuMemSetAccess_busy") - acc0;
  long long waits = stat_of("unmap_waits") - w0;
  void *bargs[] = {&b, &one, &nb};
  CK(cuLaunchKernel(add, 1, 1, 1, 1, 1, 1, 0, NULL, bargs, NULL));
  CK(cuCtxSynchronize());
  printf("oversize_test ordering: cuMemSetAccess while a copy was in flight: %llu\n", acc);
  printf("oversize_test ordering: %lld chunks fetched in %d rounds, cuMemUnmap while a copy of the same "
         "operation was in flight: %llu; in %d more rounds without synchronising, while a copy of an "
         "earlier one was: %llu (host waits to order them: %lld)\n", fetches, ROUNDS, busy, ROUNDS, cross,
         waits);
  CK(cuMemcpyDtoH(back, a1, small));
  for (size_t i = 0; i < ns; i++) EXPECT(back[i] == 10 + 2 * ROUNDS, "a1[%zu] = %u", i, back[i]);
  CK(cuMemcpyDtoH(back, a2, small));
  for (size_t i = 0; i < ns; i++) EXPECT(back[i] == 20 + 4 * ROUNDS, "a2[%zu] = %u", i, back[i]);
  CK(cuMemcpyDtoH(back, b, big));
  for (size_t i = 0; i < nb; i++) EXPECT(back[i] == 31, "b[%zu] = %u", i, back[i]);
  free(back);
  EXPECT(fetches >= 4 * ROUNDS, "only %lld fetches: the launches did not page", fetches);
  EXPECT(busy == 0, "%llu cuMemUnmap calls while a fetch copy of the same launch was in flight", busy);
  EXPECT(cross == 0, "%llu cuMemUnmap calls while a fetch copy of an earlier operation was in flight", cross);
  EXPECT(acc == 0, "%llu cuMemSetAccess calls while a fetch copy of an earlier operation was in flight", acc);
  /* After a synchronisation the fence's query finds the copies done: it
   * must not wait. */
  EXPECT(sync_waits == 0, "%lld host waits before unmaps although every copy had finished", sync_waits);
  CK(cuMemFree(a1));
  CK(cuMemFree(a2));
  CK(cuMemFree(b));
  printf("oversize_test ordering: ok\n");
  return 0;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: oversize_test biglaunch|copybig|fresh|meminfo|moves|ordering\n");
    return 2;
  }
  contract_preloaded();
  CK(cuInit(0));
  CUdevice d;
  CUcontext c;
  CK(cuDeviceGet(&d, 0));
  CK(cuDevicePrimaryCtxRetain(&c, d));
  CK(cuCtxSetCurrent(c));
  if (strcmp(argv[1], "biglaunch") == 0) return case_biglaunch();
  if (strcmp(argv[1], "copybig") == 0) return case_copybig();
  if (strcmp(argv[1], "fresh") == 0) return case_fresh();
  if (strcmp(argv[1], "meminfo") == 0) return case_meminfo();
  if (strcmp(argv[1], "moves") == 0) return case_moves();
  if (strcmp(argv[1], "ordering") == 0) return case_ordering();
  fprintf(stderr, "oversize_test: unknown case %s\n", argv[1]);
  return 2;
}
