/*
 * Description: the interposer's contract for CUDA graphs, synchronous copies,
 * per-thread default streams, memory that bypasses mtalloc, pointer queries
 * and frees at exit, on the fake driver under LD_PRELOAD=libmtalloc.so:
 *   capture_alloc   a temporary allocated, filled and freed inside a capture
 *                   keeps its address while the graph lives: a buffer
 *                   allocated after the capture is not written by replays;
 *                   and an allocation during the capture reaps no pending
 *                   free (that needs cuEventQuery, which would invalidate it)
 *   capture_thread  the same while another thread allocates and frees: the
 *                   global capture mode forbids that thread's event queries
 *   capture_copy    copies and sets captured into a graph fetch and evict
 *                   nothing while capturing and are made resident at replay
 *   synccopy        synchronous device-to-device and pageable host-to-device
 *                   copies and memsets return before the GPU has run them;
 *                   their chunks must not be evicted meanwhile (MT_HOST_MAP=off)
 *   ptds            CU_STREAM_PER_THREAD is one stream per thread: a hold on
 *                   one thread's is not answered by another thread's
 *   allocconf       PYTORCH_ALLOC_CONF is mirrored to PYTORCH_CUDA_ALLOC_CONF,
 *                   cuMemCreate outside mtalloc is counted in bypassed_bytes
 *                   (the pager's own is not) and warned about
 *   allocconf_default  neither set: both name backend:cudaMallocAsync
 *   ptrattr         pointer attributes of chunks never touched or evicted
 *   exitfree        frees after the driver is torn down print no errors
 * Usage: capture_test CASE. Exit 0 pass, 1 fail, 77 skip (not preloaded).
 */
#include <cudaTypedefs.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fakecuda.h"

#define WHO "capture_test"
#define CONTRACT_LINKED
#include "contract.h"

CUresult cuMemcpyDtoD_v2_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n); /* cuda.h declares it for driver builds only */


/* kernels */
static void k_add(void **p, const fakecuda_launch_t *l) { /* x[i] += a */
  (void)l;
  uint32_t *x = *(uint32_t **)p[0];
  uint32_t a = *(uint32_t *)p[1];
  size_t n = *(size_t *)p[2];
  for (size_t i = 0; i < n; i++) x[i] += a;
}
static void k_slow_add(void **p, const fakecuda_launch_t *l) { /* sleeps, then x[i] += a */
  usleep(300 * 1000);
  k_add(p, l);
}

static CUfunction f_add, f_slow_add;
static CUcontext ctx;

static void setup(void) {
  contract_preloaded();
  CK(cuInit(0));
  CUdevice d;
  CK(cuDeviceGet(&d, 0));
  CK(cuDevicePrimaryCtxRetain(&ctx, d));
  CK(cuCtxSetCurrent(ctx));
  size_t add_params[] = {8, 4, 8};
  f_add = fakecuda_register_kernel("add_u32", k_add, 3, add_params);
  f_slow_add = fakecuda_register_kernel("slow_add_u32", k_slow_add, 3, add_params);
}

static CUresult launch(CUfunction f, CUdeviceptr x, uint32_t a, size_t n, CUstream s) {
  void *args[] = {&x, &a, &n};
  return cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, args, NULL);
}

/* Every u32 of [d, d + 4n) is want. */
static void expect_all(CUdeviceptr d, size_t n, uint32_t want, const char *what) {
  uint32_t *h = malloc(n * 4);
  CK(cuMemcpyDtoH(h, d, n * 4));
  for (size_t i = 0; i < n; i++)
    EXPECT(h[i] == want, "%s[%zu] = %u, want %u", what, i, h[i], want);
  free(h);
}

/* A pending stream-ordered free whose work is still running on s2: the
 * pager can only reap it by asking an event. */
static void pending_free(CUstream s2) {
  CUdeviceptr old;
  CK(cuMemAllocAsync(&old, 4 * MiB, s2));
  CK(cuMemsetD32Async(old, 0, MiB, s2));
  CK(launch(f_slow_add, old, 1, MiB, s2));
  CK(cuMemFreeAsync(old, s2));
}

/* Captures on s: a temporary allocated, filled, used and freed in the
 * graph; then a buffer allocated after the capture must keep its value
 * through replays. */
static void capture_temporary(CUstream s, void (*during)(void)) {
  long live0 = stat_of("regions_live");
  CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CUdeviceptr tmp;
  CK(cuMemAllocAsync(&tmp, 4 * MiB, s));
  CK(cuMemsetD32Async(tmp, 5, MiB, s));
  CK(launch(f_add, tmp, 1, MiB, s));
  CK(cuMemFreeAsync(tmp, s));
  if (during) during();
  CUgraph g;
  CUgraphExec ge;
  CK(cuStreamEndCapture(s, &g)); /* CUDA_ERROR_STREAM_CAPTURE_INVALIDATED if the pager queried an event */
  CK(cuGraphInstantiateWithFlags(&ge, g, 0));
  CUdeviceptr b;
  CK(cuMemAlloc(&b, 4 * MiB));
  CK(cuMemsetD32(b, 7, MiB));
  for (int i = 0; i < 3; i++) CK(cuGraphLaunch(ge, s));
  CK(cuStreamSynchronize(s));
  expect_all(b, MiB, 7, b == tmp ? "b (at the graph's temporary's address)" : "b");
  EXPECT(b != tmp, "the graph's temporary's address was handed out again while the graph lives");
  EXPECT(stat_of("regions_live") == live0 + 2, "regions live %ld, want %ld (b and the graph's temporary)",
         stat_of("regions_live"), live0 + 2);
  CK(cuGraphDestroy(g));
  EXPECT(stat_of("regions_live") == live0 + 2, "the exec still replays into the temporary");
  CK(cuGraphExecDestroy(ge));
  CK(cuStreamSynchronize(s));
  EXPECT(stat_of("regions_live") == live0 + 1, "regions live %ld after the graph's end, want %ld",
         stat_of("regions_live"), live0 + 1);
  CK(cuMemFree(b));
}

static int case_capture_alloc(void) {
  CUstream s, s2;
  CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
  pending_free(s2);
  capture_temporary(s, NULL);
  CK(cuCtxSynchronize());
  printf("capture_test capture_alloc: ok\n");
  return 0;
}

/* The other thread of capture_thread: stream-ordered allocations and frees
 * while the main thread captures (global mode), as a data loader might. */
static atomic_int phase;
static void *other_thread(void *arg) {
  (void)arg;
  CK(cuCtxSetCurrent(ctx));
  while (atomic_load(&phase) != 1) usleep(100);
  CUstream s2;
  CK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
  pending_free(s2);
  for (int i = 0; i < 4; i++) {
    CUdeviceptr x;
    CK(cuMemAllocAsync(&x, 4 * MiB, s2)); /* reaping the pending free would query an event */
    CK(launch(f_add, x, 1, MiB, s2));
    CK(cuMemFreeAsync(x, s2));
  }
  atomic_store(&phase, 2);
  while (atomic_load(&phase) != 3) usleep(100);
  CK(cuStreamSynchronize(s2));
  CK(cuStreamDestroy(s2));
  return NULL;
}

static void wait_other(void) {
  atomic_store(&phase, 1);
  while (atomic_load(&phase) != 2) usleep(100);
}

static int case_capture_thread(void) {
  pthread_t t;
  EXPECT(pthread_create(&t, NULL, other_thread, NULL) == 0, "pthread_create");
  CUstream s;
  CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  capture_temporary(s, wait_other);
  atomic_store(&phase, 3);
  pthread_join(t, NULL);
  CK(cuCtxSynchronize());
  printf("capture_test capture_thread: ok\n");
  return 0;
}

static int case_capture_copy(void) {
  /* run with MT_MAX_VRAM=16M: a and b (4 MiB each) are evicted by c (16 MiB) */
  size_t n = MiB;
  CUdeviceptr a, b, c, d;
  CK(cuMemAlloc(&a, 4 * MiB));
  CK(cuMemAlloc(&b, 4 * MiB));
  CK(cuMemAlloc(&c, 16 * MiB));
  CK(cuMemAlloc(&d, 4 * MiB));
  CK(cuMemsetD32(a, 40, n));
  CK(cuMemsetD32(b, 1, n));
  CK(cuMemsetD32(d, 1, n));
  CK(cuMemsetD32(c, 3, 4 * n));
  CK(cuCtxSynchronize());
  CUstream s;
  CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  long fetches = stat_of("fetches"), evictions = stat_of("evictions_dirty") + stat_of("evictions_clean");
  CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CK(cuMemcpyDtoDAsync(b, a, n * 4, s)); /* b = 40 */
  CK(launch(f_add, b, 2, n, s));         /* b = 42 */
  CK(cuMemsetD32Async(d, 9, n, s));      /* d = 9 */
  CUgraph g;
  CUgraphExec ge;
  CK(cuStreamEndCapture(s, &g));
  EXPECT(stat_of("fetches") == fetches, "captured copies fetched %ld chunks", stat_of("fetches") - fetches);
  EXPECT(stat_of("evictions_dirty") + stat_of("evictions_clean") == evictions, "captured work evicted");
  CK(cuGraphInstantiateWithFlags(&ge, g, 0));
  CK(cuMemsetD32(c, 4, 4 * n)); /* pushes a, b and d out again */
  CK(cuGraphLaunch(ge, s));
  CK(cuStreamSynchronize(s));
  expect_all(b, n, 42, "b");
  expect_all(d, n, 9, "d");
  expect_all(a, n, 40, "a");
  EXPECT(stat_of("fetches") > fetches, "the replay fetched nothing: the test did not page");
  CK(cuGraphExecDestroy(ge));
  CK(cuGraphDestroy(g));
  CK(cuStreamDestroy(s));
  printf("capture_test capture_copy: ok\n");
  return 0;
}

static int case_synccopy(void) {
  /* run with MT_MAX_VRAM=8M MT_HOST_MAP=off: four 4 MiB buffers, and every
   * operation evicts what the one before it used */
  size_t n = MiB; /* u32 words: 4 MiB */
  uint32_t *h[4], *back = malloc(n * 4);
  CUdeviceptr b[4];
  for (int k = 0; k < 4; k++) {
    h[k] = malloc(n * 4);
    for (size_t i = 0; i < n; i++) h[k][i] = (uint32_t)((i + (size_t)k * 7919) * 2654435761u);
    CK(cuMemAlloc(&b[k], n * 4));
  }
  for (int round = 0; round < 3; round++) {
    for (int k = 0; k < 4; k++) CK(cuMemcpyHtoD(b[k], h[k], n * 4)); /* pageable: returns once staged */
    CK(cuMemsetD32(b[0], 9, n));                                     /* returns at once */
    CK(cuMemsetD32(b[2], 11, n));
    CK(cuMemcpyDtoD(b[1], b[3], n * 4));                             /* returns at once */
    CK(cuMemcpyDtoD_v2_ptds(b[3], b[0], n * 4));                     /* on the per-thread stream */
    CK(cuMemcpyDtoD(b[2], b[1], n * 4));
  }
  const uint32_t *want[4] = {NULL, h[3], h[3], NULL};
  for (int k = 0; k < 4; k++) {
    CK(cuMemcpyDtoH(back, b[k], n * 4));
    for (size_t i = 0; i < n; i++) {
      uint32_t w = want[k] ? want[k][i] : 9;
      EXPECT(back[i] == w, "b%d[%zu] = %#x, want %#x", k, i, back[i], w);
    }
  }
  EXPECT(stat_of("evictions_dirty") > 0, "nothing was evicted: the test did not page");
  for (int k = 0; k < 4; k++) free(h[k]);
  free(back);
  printf("capture_test synccopy: ok\n");
  return 0;
}

/* ptds: thread A's slow kernel on its per-thread stream holds X while thread
 * B, on its own per-thread stream, needs room. */
static CUdeviceptr px, py, pz;
static atomic_int pt_phase;
static void *pt_a(void *arg) {
  (void)arg;
  CK(cuCtxSetCurrent(ctx));
  CK(launch(f_slow_add, px, 1, MiB, CU_STREAM_PER_THREAD));
  atomic_store(&pt_phase, 1);
  CK(cuStreamSynchronize(CU_STREAM_PER_THREAD));
  return NULL;
}
static void *pt_b(void *arg) {
  (void)arg;
  CK(cuCtxSetCurrent(ctx));
  while (atomic_load(&pt_phase) != 1) usleep(100);
  CK(cuMemsetD32Async(py, 2, MiB, CU_STREAM_PER_THREAD));
  CK(cuStreamSynchronize(CU_STREAM_PER_THREAD));
  CK(cuMemsetD32Async(pz, 3, MiB, CU_STREAM_PER_THREAD)); /* evicts: X must not be the victim */
  CK(cuStreamSynchronize(CU_STREAM_PER_THREAD));
  return NULL;
}

static int case_ptds(void) {
  /* run with MT_MAX_VRAM=8M MT_HOST_MAP=off: X, Y, Z of 4 MiB each */
  CK(cuMemAlloc(&px, 4 * MiB));
  CK(cuMemAlloc(&py, 4 * MiB));
  CK(cuMemAlloc(&pz, 4 * MiB));
  CK(cuMemsetD32(px, 10, MiB));
  CK(cuCtxSynchronize());
  pthread_t a, b;
  EXPECT(pthread_create(&a, NULL, pt_a, NULL) == 0 && pthread_create(&b, NULL, pt_b, NULL) == 0,
         "pthread_create");
  pthread_join(a, NULL);
  pthread_join(b, NULL);
  CK(cuCtxSynchronize());
  expect_all(px, MiB, 11, "x");
  expect_all(py, MiB, 2, "y");
  expect_all(pz, MiB, 3, "z");
  printf("capture_test ptds: ok\n");
  return 0;
}

static int case_allocconf(void) {
  /* run with PYTORCH_ALLOC_CONF=expandable_segments:True */
  const char *old = getenv("PYTORCH_CUDA_ALLOC_CONF");
  EXPECT(old && strcmp(old, "expandable_segments:True") == 0,
         "PYTORCH_CUDA_ALLOC_CONF=%s, want the user's PYTORCH_ALLOC_CONF mirrored", old ? old : "(unset)");
  /* the pager's own cuMemCreate calls */
  CUdeviceptr a;
  CK(cuMemAlloc(&a, 8 * MiB));
  CK(cuMemsetD32(a, 1, 2 * MiB));
  CK(cuCtxSynchronize());
  EXPECT(stat_of("bypassed_bytes") == 0, "bypassed_bytes %ld after mtalloc's own mappings, want 0",
         stat_of("bypassed_bytes"));
  /* what PyTorch's expandable segments do */
  CUmemAllocationProp prop;
  memset(&prop, 0, sizeof(prop));
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  CUdeviceptr va;
  CUmemGenericAllocationHandle h1, h2;
  CK(cuMemAddressReserve(&va, 4 * MiB, 0, 0, 0));
  CK(cuMemCreate(&h1, 2 * MiB, &prop, 0));
  CK(cuMemCreate(&h2, 2 * MiB, &prop, 0));
  CK(cuMemMap(va, 2 * MiB, 0, h1, 0));
  CK(cuMemMap(va + 2 * MiB, 2 * MiB, 0, h2, 0));
  EXPECT(stat_of("bypassed_bytes") == (long)(4 * MiB), "bypassed_bytes %ld, want %zu", stat_of("bypassed_bytes"),
         4 * MiB);
  CK(cuMemUnmap(va, 4 * MiB));
  CK(cuMemRelease(h1));
  CK(cuMemRelease(h2));
  CK(cuMemAddressFree(va, 4 * MiB));
  printf("capture_test allocconf: ok\n");
  return 0;
}

static int case_allocconf_default(void) {
  const char *now = getenv("PYTORCH_ALLOC_CONF"), *old = getenv("PYTORCH_CUDA_ALLOC_CONF");
  EXPECT(now && strcmp(now, "backend:cudaMallocAsync") == 0, "PYTORCH_ALLOC_CONF=%s", now ? now : "(unset)");
  EXPECT(old && strcmp(old, "backend:cudaMallocAsync") == 0, "PYTORCH_CUDA_ALLOC_CONF=%s", old ? old : "(unset)");
  printf("capture_test allocconf_default: ok\n");
  return 0;
}

static void expect_attrs(CUdeviceptr p, const char *what) {
  CUcontext c = NULL;
  CK(cuPointerGetAttribute(&c, CU_POINTER_ATTRIBUTE_CONTEXT, p));
  EXPECT(c == ctx, "%s: context %p, want %p", what, (void *)c, (void *)ctx);
  int ordinal = -1;
  CK(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, p));
  EXPECT(ordinal == 0, "%s: device ordinal %d", what, ordinal);
  /* what cudaPointerGetAttributes asks */
  unsigned type = 0;
  CUcontext c2 = NULL;
  int ord2 = -1;
  CUdeviceptr dp = 0;
  CUpointer_attribute at[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_CONTEXT,
                              CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, CU_POINTER_ATTRIBUTE_DEVICE_POINTER};
  void *data[] = {&type, &c2, &ord2, &dp};
  CK(cuPointerGetAttributes(4, at, data, p));
  EXPECT(type == CU_MEMORYTYPE_DEVICE && c2 == ctx && ord2 == 0 && dp == p,
         "%s: attributes type %u context %p ordinal %d pointer %#llx", what, type, (void *)c2, ord2,
         (unsigned long long)dp);
}

static int case_ptrattr(void) {
  /* run with MT_MAX_VRAM=8M MT_HOST_MAP=off */
  CUdeviceptr a, b;
  CK(cuMemAlloc(&a, 4 * MiB));
  CK(cuMemAlloc(&b, 8 * MiB));
  expect_attrs(a + 100, "never touched");
  CK(cuMemsetD32(a, 1, MiB));
  CK(cuMemsetD32(b, 1, 2 * MiB)); /* evicts a */
  CK(cuCtxSynchronize());
  EXPECT(stat_of("evictions_dirty") > 0, "a was not evicted");
  expect_attrs(a + 4, "evicted");
  printf("capture_test ptrattr: ok\n");
  return 0;
}

static int case_exitfree(void) {
  CUstream s;
  CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CUdeviceptr a, b, small;
  CK(cuMemAlloc(&a, 4 * MiB));
  CK(cuMemAllocAsync(&b, 4 * MiB, s));
  CK(cuMemAlloc(&small, 1000));
  CK(launch(f_add, a, 1, MiB, s));
  CK(launch(f_add, b, 1, MiB, s));
  CK(cuStreamSynchronize(s));
  /* as at exit: the driver's teardown ran before a destructor frees */
  char path[] = "/tmp/mt-exitfree.XXXXXX";
  int fd = mkstemp(path);
  EXPECT(fd >= 0, "mkstemp");
  fflush(stderr);
  int saved = dup(2);
  dup2(fd, 2);
  fakecuda_deinit();
  CUresult r1 = cuMemFree(a), r2 = cuMemFreeAsync(b, s), r3 = cuMemFree(small);
  fflush(stderr);
  dup2(saved, 2);
  char log[4096] = {0};
  ssize_t got = pread(fd, log, sizeof(log) - 1, 0);
  close(fd);
  unlink(path);
  EXPECT(got == 0, "frees after the driver's teardown printed:\n%s", log);
  EXPECT(r1 == CUDA_SUCCESS && r2 == CUDA_SUCCESS && r3 == CUDA_SUCCESS, "frees returned %d %d %d", (int)r1,
         (int)r2, (int)r3);
  printf("capture_test exitfree: ok\n");
  return 0;
}

int main(int argc, char **argv) {
  static const struct {
    const char *name;
    int (*fn)(void);
  } cases[] = {
    {"capture_alloc", case_capture_alloc}, {"capture_thread", case_capture_thread},
    {"capture_copy", case_capture_copy},   {"synccopy", case_synccopy},
    {"ptds", case_ptds},                   {"allocconf", case_allocconf},
    {"allocconf_default", case_allocconf_default}, {"ptrattr", case_ptrattr},
    {"exitfree", case_exitfree},
  };
  if (argc != 2) {
    fprintf(stderr, "usage: capture_test CASE\n");
    return 2;
  }
  setup();
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
    if (strcmp(argv[1], cases[i].name) == 0) return cases[i].fn();
  fprintf(stderr, "capture_test: unknown case %s\n", argv[1]);
  return 2;
}
