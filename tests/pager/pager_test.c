/*
 * Description: the interposer's contract, case by case, on the fake driver
 * under LD_PRELOAD=libmtalloc.so:
 *   routes    calls made by direct linking, dlsym (both glibc versions) and
 *             cuGetProcAddress(_v2) (plain and per-thread-stream flag) are all
 *             seen, by route
 *   toobig    a launch whose footprint exceeds MT_MAX_VRAM fails with
 *             CUDA_ERROR_OUT_OF_MEMORY, or runs host-mapped where host mappings
 *             are on (the wrapper checks the message naming the kernel)
 *   hostfull  allocation beyond MT_MAX_VRAM + MT_MAX_HOST (less a swap chunk) fails with
 *             CUDA_ERROR_OUT_OF_MEMORY and every byte already stored is intact
 *   graph     launches captured into a CUDA graph are made resident before
 *             each cuGraphLaunch, at 8x oversubscription
 *   torch     mt_torch_malloc / mt_torch_free (PyTorch's pluggable allocator)
 *             hand out regions that launches page like any other
 *   queries   cuMemGetInfo reports the capacity; cuMemAllocPitch,
 *             cuMemGetAddressRange and cuPointerGetAttribute answer for regions
 *   handoff   a buffer freed with cuMemFreeAsync while a slow kernel still
 *             reads it gives its memory to the next buffer a kernel on the
 *             same stream fills (handoffs > 0, nothing evicted), and the slow
 *             kernel still reads its old values; on another stream the memory
 *             is not handed
 *   trial     MT_HANDOFF=auto times the handoff on and off over one period
 *             each of a repeating loop, with timing events (cuEventCreate
 *             without CU_EVENT_DISABLE_TIMING, cuEventElapsedTime), decides
 *             once (the wrapper checks the message: GPU time), and the data
 *             is right throughout
 * Usage: pager_test CASE. Exit 0 pass, 1 fail, 77 skip (not preloaded).
 */
#include <cudaTypedefs.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fakecuda.h"

#define WHO "pager_test"
#define CONTRACT_LINKED
#include "contract.h"


/* kernels */
static void k_add(void **p, const fakecuda_launch_t *l) { /* x[i] += a */
  (void)l;
  uint32_t *x = *(uint32_t **)p[0];
  uint32_t a = *(uint32_t *)p[1];
  size_t n = *(size_t *)p[2];
  for (size_t i = 0; i < n; i++) x[i] += a;
}
static void k_sum3(void **p, const fakecuda_launch_t *l) { /* touches three buffers */
  (void)l;
  uint8_t *a = *(uint8_t **)p[0], *b = *(uint8_t **)p[1], *c = *(uint8_t **)p[2];
  a[0] = (uint8_t)(b[0] + c[0]);
}

static void k_fill(void **p, const fakecuda_launch_t *l) { /* x[i] = a */
  (void)l;
  uint32_t *x = *(uint32_t **)p[0];
  uint32_t a = *(uint32_t *)p[1];
  size_t n = *(size_t *)p[2];
  for (size_t i = 0; i < n; i++) x[i] = a;
}
static void k_slow_sum(void **p, const fakecuda_launch_t *l) { /* r[0] = sum x[], slowly */
  (void)l;
  usleep(50000);
  uint32_t *x = *(uint32_t **)p[0], *r = *(uint32_t **)p[1];
  size_t n = *(size_t *)p[2];
  uint32_t sum = 0;
  for (size_t i = 0; i < n; i++) sum += x[i];
  r[0] = sum;
}

static CUfunction f_add, f_sum3, f_fill, f_slow_sum;

static void setup(void) {
  contract_preloaded();
  CK(cuInit(0));
  CUdevice d;
  CUcontext c;
  CK(cuDeviceGet(&d, 0));
  CK(cuDevicePrimaryCtxRetain(&c, d));
  CK(cuCtxSetCurrent(c));
  size_t add_params[] = {8, 4, 8}, sum_params[] = {8, 8, 8};
  f_add = fakecuda_register_kernel("add_u32", k_add, 3, add_params);
  f_sum3 = fakecuda_register_kernel("sum3", k_sum3, 3, sum_params);
  f_fill = fakecuda_register_kernel("fill_u32", k_fill, 3, add_params);
  f_slow_sum = fakecuda_register_kernel("slow_sum", k_slow_sum, 3, sum_params);
}

static CUresult fill(CUdeviceptr x, uint32_t a, size_t n, CUstream s) {
  void *args[] = {&x, &a, &n};
  return cuLaunchKernel(f_fill, 1, 1, 1, 1, 1, 1, 0, s, args, NULL);
}

static CUresult add(CUdeviceptr x, uint32_t a, size_t n, CUstream s) {
  void *args[] = {&x, &a, &n};
  return cuLaunchKernel(f_add, 1, 1, 1, 1, 1, 1, 0, s, args, NULL);
}

static int case_routes(void) {
  void *h = dlopen("libcuda.so.1", RTLD_NOW);
  EXPECT(h != NULL, "dlopen libcuda.so.1: %s", dlerror());
  PFN_cuMemAlloc_v3020 dl_alloc = (PFN_cuMemAlloc_v3020)dlsym(h, "cuMemAlloc_v2");
  PFN_cuLaunchKernel_v4000 dl_launch = (PFN_cuLaunchKernel_v4000)dlsym(h, "cuLaunchKernel");
  PFN_cuGetProcAddress_v12000 gpa = (PFN_cuGetProcAddress_v12000)dlsym(h, "cuGetProcAddress_v2");
  EXPECT(dl_alloc && dl_launch && gpa, "dlsym of driver symbols failed");
  PFN_cuMemAlloc_v3020 pa_alloc;
  PFN_cuLaunchKernel_v4000 pa_launch, pa_launch_pt;
  CUdriverProcAddressQueryResult st;
  CK(gpa("cuMemAlloc", (void **)&pa_alloc, 13000, CU_GET_PROC_ADDRESS_DEFAULT, &st));
  CK(gpa("cuLaunchKernel", (void **)&pa_launch, 13000, CU_GET_PROC_ADDRESS_DEFAULT, &st));
  CK(gpa("cuLaunchKernel", (void **)&pa_launch_pt, 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st));
  CUdeviceptr a, b, c;
  CK(cuMemAlloc(&a, 4 * MiB));
  CK(dl_alloc(&b, 4 * MiB));
  CK(pa_alloc(&c, 4 * MiB));
  size_t n = MiB;
  uint32_t one = 1;
  void *args_a[] = {&a, &one, &n}, *args_b[] = {&b, &one, &n}, *args_c[] = {&c, &one, &n};
  CK(cuMemsetD32(a, 0, n));
  CK(cuMemsetD32(b, 0, n));
  CK(cuMemsetD32(c, 0, n));
  CK(cuLaunchKernel(f_add, 1, 1, 1, 1, 1, 1, 0, NULL, args_a, NULL));
  CK(dl_launch(f_add, 1, 1, 1, 1, 1, 1, 0, NULL, args_b, NULL));
  CK(pa_launch(f_add, 1, 1, 1, 1, 1, 1, 0, NULL, args_c, NULL));
  CK(pa_launch_pt(f_add, 1, 1, 1, 1, 1, 1, 0, NULL, args_c, NULL));
  CK(cuCtxSynchronize());
  uint32_t v[3];
  CK(cuMemcpyDtoH(&v[0], a + 4 * (n - 1), 4));
  CK(cuMemcpyDtoH(&v[1], b + 4 * (n - 1), 4));
  CK(cuMemcpyDtoH(&v[2], c + 4 * (n - 1), 4));
  EXPECT(v[0] == 1 && v[1] == 1 && v[2] == 2, "kernel results %u %u %u, want 1 1 2", v[0], v[1], v[2]);
  EXPECT(calls("cuMemAlloc_v2", "direct") == 1, "direct cuMemAlloc_v2: %ld", calls("cuMemAlloc_v2", "direct"));
  EXPECT(calls("cuMemAlloc_v2", "dlsym") == 1, "dlsym cuMemAlloc_v2: %ld", calls("cuMemAlloc_v2", "dlsym"));
  EXPECT(calls("cuMemAlloc_v2", "procaddr") == 1, "procaddr cuMemAlloc_v2");
  EXPECT(calls("cuLaunchKernel", "direct") == 1, "direct cuLaunchKernel: %ld", calls("cuLaunchKernel", "direct"));
  EXPECT(calls("cuLaunchKernel", "dlsym") == 1, "dlsym cuLaunchKernel");
  EXPECT(calls("cuLaunchKernel", "procaddr") == 1, "procaddr cuLaunchKernel");
  long ptsz = calls("cuLaunchKernel_ptsz", "procaddr");
  /* The fake has no separate per-thread variant of everything; when it does,
   * the per-thread lookup must land on the _ptsz hook. */
  EXPECT(ptsz == 1 || calls("cuLaunchKernel", "procaddr") + ptsz == 2, "per-thread lookup not seen");
  EXPECT(stat_of("launches") == 4, "launches %ld, want 4", stat_of("launches"));
  EXPECT(calls("cuGetProcAddress_v2", "dlsym") == 3, "cuGetProcAddress_v2 via dlsym: %ld calls, want 3",
         calls("cuGetProcAddress_v2", "dlsym"));
  /* Binaries linked against glibc before 2.34 call dlsym@GLIBC_2.2.5: the
   * hook must be there too. */
  typedef void *(*dlsym_fn)(void *, const char *);
  dlsym_fn old_dlsym = (dlsym_fn)dlvsym(RTLD_DEFAULT, "dlsym", "GLIBC_2.2.5");
  EXPECT(old_dlsym != NULL, "no dlsym@GLIBC_2.2.5");
  PFN_cuMemFree_v3020 old_free = (PFN_cuMemFree_v3020)old_dlsym(h, "cuMemFree_v2");
  EXPECT(old_free != NULL, "dlsym@GLIBC_2.2.5 found no cuMemFree_v2");
  CK(old_free(a));
  EXPECT(calls("cuMemFree_v2", "dlsym") == 1, "a free through dlsym@GLIBC_2.2.5 was not seen as dlsym route");
  printf("pager_test routes: ok (direct, dlsym, procaddr each seen once for alloc and launch)\n");
  return 0;
}

static int case_toobig(void) {
  /* run with MT_MAX_VRAM=8M: three 4 MiB buffers cannot be resident at once */
  CUdeviceptr a, b, c;
  CK(cuMemAlloc(&a, 4 * MiB));
  CK(cuMemAlloc(&b, 4 * MiB));
  CK(cuMemAlloc(&c, 4 * MiB));
  void *args[] = {&a, &b, &c};
  CUresult r = cuLaunchKernel(f_sum3, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL);
  /* With host mappings it runs host-mapped (oversize_test has the details). */
  if (stat_of("host_mapped") == 1)
    EXPECT(r == CUDA_SUCCESS && stat_of("launches_host_mapped") == 1, "host-mapped launch over budget returned %d",
           (int)r);
  else
    EXPECT(r == CUDA_ERROR_OUT_OF_MEMORY, "launch over budget returned %d, want OUT_OF_MEMORY", (int)r);
  /* Two of them fit: the pager must still work after refusing. */
  void *args2[] = {&a, &b, &b};
  CK(cuLaunchKernel(f_sum3, 1, 1, 1, 1, 1, 1, 0, NULL, args2, NULL));
  CK(cuCtxSynchronize());
  printf("pager_test toobig: ok\n");
  return 0;
}

static int case_hostfull(void) {
  /* run with MT_MAX_VRAM=4M MT_MAX_HOST=8M: 12 MiB can be held in all */
  CUdeviceptr buf[16];
  int n = 0;
  CUresult r = CUDA_SUCCESS;
  uint32_t *host = malloc(2 * MiB);
  for (; n < 16; n++) {
    r = cuMemAlloc(&buf[n], 2 * MiB);
    if (r != CUDA_SUCCESS) break;
    for (size_t i = 0; i < 2 * MiB / 4; i++) host[i] = (uint32_t)(n * 7919 + i);
    CK(cuMemcpyHtoD(buf[n], host, 2 * MiB));
  }
  EXPECT(r == CUDA_ERROR_OUT_OF_MEMORY, "allocation past the budgets returned %d", (int)r);
  EXPECT(n == 5, "held %d buffers of 2 MiB, want 5 (4 MiB device + 8 MiB host - one swap chunk)", n);
  for (int k = n - 1; k >= 0; k--) {
    CK(cuMemcpyDtoH(host, buf[k], 2 * MiB));
    for (size_t i = 0; i < 2 * MiB / 4; i++)
      EXPECT(host[i] == (uint32_t)(k * 7919 + i), "buffer %d word %zu lost after the refusal", k, i);
  }
  /* Freeing one makes room again. */
  CK(cuMemFree(buf[0]));
  CK(cuMemAlloc(&buf[0], 2 * MiB));
  free(host);
  printf("pager_test hostfull: ok (%d buffers held, all intact)\n", n);
  return 0;
}

static int case_graph(void) {
  /* run with MT_MAX_VRAM=8M: 8 buffers of 8 MiB, 8x the budget */
  enum { NB = 8 };
  CUdeviceptr b[NB];
  size_t n = 2 * MiB; /* u32 words: 8 MiB */
  for (int i = 0; i < NB; i++) {
    CK(cuMemAlloc(&b[i], n * 4));
    CK(cuMemsetD32(b[i], (unsigned)i, n));
  }
  CUstream s;
  CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CK(add(b[0], 1, n, s));
  CK(add(b[0], 2, n, s));
  CUgraph g;
  CUgraphExec ge;
  CK(cuStreamEndCapture(s, &g));
  CK(cuGraphInstantiateWithFlags(&ge, g, 0));
  for (int it = 0; it < 4; it++) {
    for (int i = 1; i < NB; i++) CK(add(b[i], 1, n, s)); /* pushes b[0] out */
    CK(cuGraphLaunch(ge, s));
  }
  CK(cuStreamSynchronize(s));
  uint32_t *h = malloc(n * 4);
  CK(cuMemcpyDtoH(h, b[0], n * 4));
  for (size_t i = 0; i < n; i++) EXPECT(h[i] == 12, "b[0][%zu] = %u after 4 graph launches, want 12", i, h[i]);
  CK(cuMemcpyDtoH(h, b[3], n * 4));
  for (size_t i = 0; i < n; i++) EXPECT(h[i] == 7, "b[3][%zu] = %u, want 7", i, h[i]);
  EXPECT(stat_of("evictions_dirty") > 0, "no evictions: the test did not oversubscribe");
  CK(cuGraphExecDestroy(ge));
  CK(cuGraphDestroy(g));
  CK(cuStreamDestroy(s));
  free(h);
  printf("pager_test graph: ok\n");
  return 0;
}

static int case_queries(void) {
  /* run with MT_MAX_VRAM=64M */
  size_t fr = 0, tot = 0;
  CK(cuMemGetInfo(&fr, &tot));
  EXPECT(tot > 64 * MiB, "cuMemGetInfo total %zu, want the capacity (budget %zu and the host's)", tot, 64 * MiB);
  EXPECT(fr <= tot, "free %zu > total %zu", fr, tot);
  CUdeviceptr p, base;
  size_t pitch, size;
  CK(cuMemAllocPitch(&p, &pitch, 1000, 300, 4));
  EXPECT(pitch >= 1000 && pitch % 512 == 0, "pitch %zu", pitch);
  CK(cuMemGetAddressRange(&base, &size, p + 1234));
  EXPECT(base == p && size == pitch * 300, "range %#llx+%zu, want %#llx+%zu", (unsigned long long)base, size,
         (unsigned long long)p, pitch * 300);
  unsigned type = 0;
  CK(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p + 5));
  EXPECT(type == CU_MEMORYTYPE_DEVICE, "memory type %u", type);
  CUdeviceptr start = 0;
  CK(cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, p + 5));
  EXPECT(start == p, "range start");
  CUdeviceptr small;
  CK(cuMemAlloc(&small, 100));
  CK(cuMemGetAddressRange(&base, &size, small + 99));
  EXPECT(base == small && size == 100, "small range %zu", size);
  EXPECT(cuMemFree(p + 8) == CUDA_ERROR_INVALID_VALUE, "freeing an inner address must fail");
  CK(cuMemFree(p));
  EXPECT(cuMemFree(p) == CUDA_ERROR_INVALID_VALUE, "double free must fail");
  CK(cuMemFree(small));
  printf("pager_test queries: ok\n");
  return 0;
}

static int case_torch(void) {
  /* run with MT_MAX_VRAM=8M: four 4 MiB tensors from the pluggable allocator */
  void *(*tmalloc)(size_t, int, void *) = (void *(*)(size_t, int, void *))dlsym(RTLD_DEFAULT, "mt_torch_malloc");
  void (*tfree)(void *, size_t, int, void *) = (void (*)(void *, size_t, int, void *))dlsym(RTLD_DEFAULT, "mt_torch_free");
  EXPECT(tmalloc && tfree, "mt_torch_malloc/mt_torch_free not exported");
  CUstream s;
  CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  size_t n = MiB; /* u32 words: 4 MiB */
  CUdeviceptr t[4];
  for (int i = 0; i < 4; i++) {
    t[i] = (CUdeviceptr)(uintptr_t)tmalloc(n * 4, 0, s);
    EXPECT(t[i] != 0, "mt_torch_malloc returned NULL");
    CK(cuMemsetD32Async(t[i], (unsigned)i, n, s));
  }
  for (int i = 0; i < 4; i++) CK(add(t[i], 10, n, s));
  CK(cuStreamSynchronize(s));
  uint32_t *h = malloc(n * 4);
  for (int i = 0; i < 4; i++) {
    CK(cuMemcpyDtoH(h, t[i], n * 4));
    EXPECT(h[0] == (uint32_t)(10 + i) && h[n - 1] == (uint32_t)(10 + i), "tensor %d: %u", i, h[0]);
    tfree((void *)(uintptr_t)t[i], n * 4, 0, s);
  }
  CK(cuStreamSynchronize(s));
  EXPECT(stat_of("regions_live") == 0, "regions live after mt_torch_free: %ld", stat_of("regions_live"));
  EXPECT(stat_of("evictions_dirty") > 0, "16 MiB of tensors in 8 MiB did not page");
  EXPECT(tmalloc(0, 0, s) == NULL, "a zero-byte request must give NULL");
  free(h);
  printf("pager_test torch: ok\n");
  return 0;
}

static int case_handoff(void) {
  /* run with MT_MAX_VRAM=10M: one 2 MiB slab for r, four chunks for A, B, C */
  CUstream s, s2;
  CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
  size_t n = MiB; /* u32 words: 4 MiB */
  CUdeviceptr a, b, c, r;
  CK(cuMemAllocAsync(&r, 64, s));
  CK(cuMemAllocAsync(&a, n * 4, s));
  CK(cuMemAllocAsync(&b, n * 4, s));
  CK(fill(a, 1, n, s));
  CK(fill(b, 2, n, s));
  CK(cuStreamSynchronize(s));
  long ev0 = stat_of("evictions_dirty") + stat_of("evictions_clean"), h0 = stat_of("handoffs");
  void *args[] = {&a, &r, &n};
  CK(cuLaunchKernel(f_slow_sum, 1, 1, 1, 1, 1, 1, 0, s, args, NULL)); /* still reads a for 50 ms */
  CK(cuMemFreeAsync(a, s));
  CK(cuMemAllocAsync(&c, n * 4, s));
  CK(fill(c, 3, n, s)); /* a's memory, after slow_sum by stream order */
  CK(add(c, 4, n, s));
  CK(cuStreamSynchronize(s));
  long handed = stat_of("handoffs") - h0, evicted = stat_of("evictions_dirty") + stat_of("evictions_clean") - ev0;
  EXPECT(handed == 2, "the freed buffer's two chunks were not handed on (handoffs %ld)", handed);
  EXPECT(evicted == 0, "%ld chunks evicted although a freed buffer's memory was there", evicted);
  uint32_t *h = malloc(n * 4), sum = 0;
  CK(cuMemcpyDtoH(&sum, r, 4));
  EXPECT(sum == (uint32_t)n, "slow_sum read %u, not the freed buffer's old values (%zu)", sum, n);
  CK(cuMemcpyDtoH(h, c, n * 4));
  for (size_t i = 0; i < n; i++) EXPECT(h[i] == 7, "c[%zu] = %u", i, h[i]);
  CK(cuMemcpyDtoH(h, b, n * 4));
  EXPECT(h[0] == 2 && h[n - 1] == 2, "b = %u", h[0]);
  /* Another stream: c's memory is still in use on s when d is filled on
   * s2, which stream order does not put after it: not handed. */
  h0 = stat_of("handoffs");
  CK(cuLaunchKernel(f_slow_sum, 1, 1, 1, 1, 1, 1, 0, s, (void *[]){&c, &r, &n}, NULL));
  CK(cuMemFreeAsync(c, s));
  CUdeviceptr d;
  CK(cuMemAllocAsync(&d, n * 4, s2));
  CK(fill(d, 5, n, s2));
  CK(cuStreamSynchronize(s2));
  CK(cuStreamSynchronize(s));
  EXPECT(stat_of("handoffs") == h0, "memory in use on one stream handed to another (%ld)", stat_of("handoffs") - h0);
  CK(cuMemcpyDtoH(&sum, r, 4));
  EXPECT(sum == 7u * (uint32_t)n, "slow_sum on c read %u", sum);
  CK(cuMemcpyDtoH(h, d, n * 4));
  EXPECT(h[0] == 5 && h[n - 1] == 5, "d = %u", h[0]);
  free(h);
  printf("pager_test handoff: ok (%ld chunks handed)\n", handed);
  return 0;
}

static int case_trial(void) {
  CUstream s;
  CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  enum { NB = 4 };
  size_t n = 256 * 1024; /* u32 words: 1 MiB each */
  CUdeviceptr b[NB];
  for (int i = 0; i < NB; i++) {
    CK(cuMemAllocAsync(&b[i], n * 4, s));
    CK(fill(b[i], (uint32_t)i, n, s));
  }
  /* a loop of NB launches: its period is learned after some 32 more
   * launches, then one period on, two off, and the decision once the last
   * timing event has completed */
  int it = 0;
  for (; it < 400 && stat_of("handoff_decisions") == 0; it++) {
    for (int i = 0; i < NB; i++) CK(add(b[i], 1, n, s));
    if (it % 8 == 7) CK(cuStreamSynchronize(s));
  }
  CK(cuStreamSynchronize(s));
  EXPECT(stat_of("handoff_decisions") == 1, "no decision after %d iterations", it);
  EXPECT(it >= 10, "decided after %d iterations: before the period could be known and timed", it);
  uint32_t *h = malloc(n * 4);
  for (int i = 0; i < NB; i++) {
    CK(cuMemcpyDtoH(h, b[i], n * 4));
    EXPECT(h[0] == (uint32_t)(i + it) && h[n - 1] == (uint32_t)(i + it), "b%d = %u, want %d", i, h[0], i + it);
  }
  free(h);
  printf("pager_test trial: ok (decided after %d iterations, %s off)\n", it,
         stat_of("handoff_decided_off") ? "handoff" : "handoff not");
  return 0;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: pager_test routes|toobig|hostfull|graph|queries|torch|handoff|trial\n");
    return 2;
  }
  setup();
  if (strcmp(argv[1], "routes") == 0) return case_routes();
  if (strcmp(argv[1], "toobig") == 0) return case_toobig();
  if (strcmp(argv[1], "hostfull") == 0) return case_hostfull();
  if (strcmp(argv[1], "graph") == 0) return case_graph();
  if (strcmp(argv[1], "queries") == 0) return case_queries();
  if (strcmp(argv[1], "torch") == 0) return case_torch();
  if (strcmp(argv[1], "handoff") == 0) return case_handoff();
  if (strcmp(argv[1], "trial") == 0) return case_trial();
  fprintf(stderr, "pager_test: unknown case %s\n", argv[1]);
  return 2;
}
