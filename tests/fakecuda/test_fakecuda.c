/*
 * Description: criterion self-tests of the fake CUDA driver: device info,
 * accounting, misuse error codes, the VMM lifecycle, copies and sets,
 * stream order, events, legacy default stream rules, kernels and their
 * parameter layout, cuGetProcAddress, stream capture, FAKECUDA_BW.
 * Each criterion test runs in its own process, so tests that need an
 * environment variable set it before cuInit.
 */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fakecuda.h"

/* With ASan, SIGSEGV must stay with the default action / the fake's handler. */
__attribute__((visibility("default"), used)) const char *__asan_default_options(void) {
  return "handle_segv=0:allow_user_segv_handler=1";
}

#define OK(call) cr_assert_eq((call), CUDA_SUCCESS, "%s", #call)
#define MiB ((size_t)1 << 20)

static CUcontext ctx;

static void setup(void) {
  CUdevice dev;
  OK(cuInit(0));
  OK(cuDeviceGet(&dev, 0));
  OK(cuDevicePrimaryCtxRetain(&ctx, dev));
  OK(cuCtxSetCurrent(ctx));
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- kernels used below ------------------------------------------------- */

static void k_sleep_ms(void **p, const fakecuda_launch_t *l) {
  (void)l;
  usleep((useconds_t)(*(int *)p[0]) * 1000u);
}

static atomic_int gate; /* kernels that wait for the test to open the gate */
static void k_wait_gate(void **p, const fakecuda_launch_t *l) {
  (void)p;
  (void)l;
  while (!atomic_load(&gate)) usleep(200);
}

static void k_store_int(void **p, const fakecuda_launch_t *l) {
  (void)l;
  *(int *)*(void **)p[0] = *(int *)p[1];
}

/* y[i] = a * y[i] + b for i < n, with (float *y, float a, int n, double b) */
static void k_axpb(void **p, const fakecuda_launch_t *l) {
  (void)l;
  float *y = *(float **)p[0];
  float a = *(float *)p[1];
  int n = *(int *)p[2];
  double b = *(double *)p[3];
  for (int i = 0; i < n; i++) y[i] = a * y[i] + (float)b;
}

static int log_buf[64];
static atomic_int log_n;
static void k_log(void **p, const fakecuda_launch_t *l) {
  (void)l;
  int i = atomic_fetch_add(&log_n, 1);
  if (i < 64) log_buf[i] = *(int *)p[0];
}

static CUfunction reg(const char *name, fakecuda_kernel_fn fn, size_t n, const size_t *sizes) {
  CUfunction f = fakecuda_register_kernel(name, fn, n, sizes);
  cr_assert_not_null(f);
  return f;
}

static const size_t SZ_INT[] = {sizeof(int)};
static const size_t SZ_PTR_INT[] = {sizeof(void *), sizeof(int)};

/* ---- device, context, info --------------------------------------------- */

Test(fakecuda, not_initialized_before_cuInit) {
  CUdevice dev;
  CUdeviceptr p;
  int v = 0;
  cr_assert_eq(cuDeviceGet(&dev, 0), CUDA_ERROR_NOT_INITIALIZED);
  cr_assert_eq(cuMemAlloc(&p, 16), CUDA_ERROR_NOT_INITIALIZED);
  OK(cuDriverGetVersion(&v)); /* works without cuInit, as in CUDA */
  cr_assert_eq(v, 13000);
  cr_assert_eq(cuInit(1), CUDA_ERROR_INVALID_VALUE);
}

Test(fakecuda, device_info) {
  setup();
  int n = 0, v = 0;
  char name[64];
  size_t total = 0, free_b = 0;
  OK(cuDeviceGetCount(&n));
  cr_assert_eq(n, 1);
  OK(cuDeviceGetName(name, sizeof name, 0));
  cr_assert_str_eq(name, "Fake CUDA Device");
  struct { CUdevice_attribute a; int want; } attrs[] = {
      {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 9},
      {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 0},
      {CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 1},
      {CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, 0},
      {CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, 1},
      {CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, 1},
      {CU_DEVICE_ATTRIBUTE_WARP_SIZE, 32},
      {CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, 1024},
      {CU_DEVICE_ATTRIBUTE_TCC_DRIVER, 0}, /* not in the table: 0 */
  };
  for (size_t i = 0; i < sizeof attrs / sizeof attrs[0]; i++) {
    OK(cuDeviceGetAttribute(&v, attrs[i].a, 0));
    cr_assert_eq(v, attrs[i].want, "attribute %d: %d != %d", attrs[i].a, v, attrs[i].want);
  }
  cr_assert_eq(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_WARP_SIZE, 1), CUDA_ERROR_INVALID_DEVICE);
  OK(cuDeviceTotalMem(&total, 0));
  cr_assert_eq(total, (size_t)1 << 30);
  OK(cuMemGetInfo(&free_b, &total));
  cr_assert_eq(free_b, total);
  CUcontext c = NULL;
  OK(cuCtxGetCurrent(&c));
  cr_assert_eq(c, ctx);
  unsigned flags;
  int active = 0;
  OK(cuDevicePrimaryCtxGetState(0, &flags, &active));
  cr_assert_eq(active, 1);
  OK(cuCtxPushCurrent(ctx));
  OK(cuCtxPopCurrent(&c));
  cr_assert_eq(c, ctx);
  const char *s = NULL;
  OK(cuGetErrorName(CUDA_ERROR_OUT_OF_MEMORY, &s));
  cr_assert_str_eq(s, "CUDA_ERROR_OUT_OF_MEMORY");
  OK(cuGetErrorString(CUDA_ERROR_INVALID_VALUE, &s));
  cr_assert_str_eq(s, "invalid argument");
}

Test(fakecuda, no_current_context) {
  OK(cuInit(0));
  CUdeviceptr p;
  CUstream s;
  cr_assert_eq(cuMemAlloc(&p, 16), CUDA_ERROR_INVALID_CONTEXT);
  cr_assert_eq(cuStreamCreate(&s, 0), CUDA_ERROR_INVALID_CONTEXT);
}

Test(fakecuda, fork_child_cannot_use_cuda) {
  setup();
  CUdeviceptr d;
  OK(cuMemAlloc(&d, 64));
  CUfunction wait = reg("wait_gate", k_wait_gate, 0, NULL);
  OK(cuLaunchKernel(wait, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL)); /* work in flight */
  pid_t pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) {
    CUdeviceptr c;
    int bad = cuInit(0) != CUDA_ERROR_NOT_INITIALIZED;
    bad |= cuMemAlloc(&c, 64) != CUDA_ERROR_NOT_INITIALIZED;
    _exit(bad ? 1 : 0); /* the parent's workers do not exist here */
  }
  int status = 0;
  waitpid(pid, &status, 0);
  cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status 0x%x", status);
  atomic_store(&gate, 1);
  OK(cuCtxSynchronize());
  OK(cuMemFree(d));
}

/* ---- accounting --------------------------------------------------------- */

Test(fakecuda, alloc_accounting_peak_oom) {
  setenv("FAKECUDA_MEM", "64M", 1);
  setup();
  CUdeviceptr a, b, c;
  size_t free_b, total;
  OK(cuMemAlloc(&a, 10 * MiB));
  OK(cuMemAlloc(&b, 20 * MiB));
  cr_assert_eq(fakecuda_device_used(), 30 * MiB);
  OK(cuMemGetInfo(&free_b, &total));
  cr_assert_eq(total, 64 * MiB);
  cr_assert_eq(free_b, 34 * MiB);
  OK(cuMemFree(a));
  cr_assert_eq(fakecuda_device_used(), 20 * MiB);
  cr_assert_eq(fakecuda_device_peak(), 30 * MiB);
  fakecuda_reset_peak();
  cr_assert_eq(fakecuda_device_peak(), 20 * MiB);
  cr_assert_eq(cuMemAlloc(&c, 50 * MiB), CUDA_ERROR_OUT_OF_MEMORY);
  cr_assert_eq(fakecuda_device_used(), 20 * MiB);
  cr_assert_eq(cuMemAlloc(&c, 0), CUDA_ERROR_INVALID_VALUE);

  /* VMM: device-located physical memory counts, host-located does not */
  CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                              .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};
  CUmemGenericAllocationHandle hd, hh;
  OK(cuMemCreate(&hd, 4 * MiB, &prop, 0));
  cr_assert_eq(fakecuda_device_used(), 24 * MiB);
  prop.location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
  OK(cuMemCreate(&hh, 64 * MiB, &prop, 0));
  cr_assert_eq(fakecuda_device_used(), 24 * MiB);
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  CUmemGenericAllocationHandle big;
  cr_assert_eq(cuMemCreate(&big, 42 * MiB, &prop, 0), CUDA_ERROR_OUT_OF_MEMORY);
  OK(cuMemRelease(hd));
  OK(cuMemRelease(hh));
  cr_assert_eq(fakecuda_device_used(), 20 * MiB);
  cr_assert_eq(fakecuda_device_peak(), 24 * MiB);
  /* async alloc and stream-ordered free */
  CUdeviceptr d;
  OK(cuMemAllocAsync(&d, 8 * MiB, NULL));
  cr_assert_eq(fakecuda_device_used(), 28 * MiB);
  OK(cuMemFreeAsync(d, NULL));
  OK(cuStreamSynchronize(NULL));
  cr_assert_eq(fakecuda_device_used(), 20 * MiB);
  OK(cuMemFree(b));
  cr_assert_eq(fakecuda_device_used(), 0);
}

Test(fakecuda, free_async_happens_in_stream_order) {
  setup();
  CUstream s;
  OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CUfunction wait = reg("wait_gate", k_wait_gate, 0, NULL);
  CUdeviceptr d;
  OK(cuMemAllocAsync(&d, 4 * MiB, s));
  OK(cuLaunchKernel(wait, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL));
  OK(cuMemFreeAsync(d, s));
  usleep(20000);
  cr_assert_eq(fakecuda_device_used(), 4 * MiB, "freed before the stream reached the free");
  cr_assert_eq(cuMemFreeAsync(d, s), CUDA_ERROR_INVALID_VALUE, "double free must be caught");
  atomic_store(&gate, 1);
  OK(cuStreamSynchronize(s));
  cr_assert_eq(fakecuda_device_used(), 0);
  OK(cuStreamDestroy(s));
}

/* ---- misuse ---------------------------------------------------------------- */

Test(fakecuda, misuse_error_codes) {
  setup();
  CUdeviceptr p;
  OK(cuMemAlloc(&p, 4096));
  OK(cuMemFree(p));
  cr_assert_eq(cuMemFree(p), CUDA_ERROR_INVALID_VALUE);
  cr_assert_eq(cuMemFree((CUdeviceptr)0xdead000), CUDA_ERROR_INVALID_VALUE);
  cr_assert_eq(cuMemFreeAsync((CUdeviceptr)0xdead000, NULL), CUDA_ERROR_INVALID_VALUE);
  int local;
  cr_assert_eq(cuMemFreeHost(&local), CUDA_ERROR_INVALID_VALUE);
  cr_assert_eq(cuMemRelease((CUmemGenericAllocationHandle)12345), CUDA_ERROR_INVALID_VALUE);

  CUstream s;
  OK(cuStreamCreate(&s, 0));
  OK(cuStreamDestroy(s));
  cr_assert_eq(cuStreamSynchronize(s), CUDA_ERROR_INVALID_HANDLE);
  cr_assert_eq(cuStreamQuery(s), CUDA_ERROR_INVALID_HANDLE);
  cr_assert_eq(cuStreamDestroy(s), CUDA_ERROR_INVALID_HANDLE);
  cr_assert_eq(cuMemsetD8Async(p, 0, 1, s), CUDA_ERROR_INVALID_HANDLE);
  cr_assert_eq(cuStreamSynchronize((CUstream)(uintptr_t)0x12345678), CUDA_ERROR_INVALID_HANDLE);
  cr_assert_eq(cuStreamDestroy(NULL), CUDA_ERROR_INVALID_HANDLE);

  CUevent e;
  OK(cuEventCreate(&e, 0));
  OK(cuEventDestroy(e));
  cr_assert_eq(cuEventRecord(e, NULL), CUDA_ERROR_INVALID_HANDLE);
  cr_assert_eq(cuEventQuery(e), CUDA_ERROR_INVALID_HANDLE);
  cr_assert_eq(cuEventSynchronize(e), CUDA_ERROR_INVALID_HANDLE);
  cr_assert_eq(cuEventDestroy(e), CUDA_ERROR_INVALID_HANDLE);
  cr_assert_eq(cuStreamWaitEvent(NULL, e, 0), CUDA_ERROR_INVALID_HANDLE);

  cr_assert_eq(cuLaunchKernel((CUfunction)(uintptr_t)0x999, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL),
               CUDA_ERROR_INVALID_HANDLE);
  CUfunction f = reg("sleep_ms", k_sleep_ms, 1, SZ_INT);
  int ms = 0;
  void *args[] = {&ms};
  cr_assert_eq(cuLaunchKernel(f, 1, 1, 1, 2048, 1, 1, 0, NULL, args, NULL), CUDA_ERROR_INVALID_VALUE);
  cr_assert_eq(cuLaunchKernel(f, 0, 1, 1, 1, 1, 1, 0, NULL, args, NULL), CUDA_ERROR_INVALID_VALUE);
  cr_assert_eq(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL), CUDA_ERROR_INVALID_VALUE);

  void *h;
  OK(cuMemAllocHost(&h, 100));
  cr_assert_eq(cuMemHostRegister(h, 100, 0), CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
  OK(cuMemFreeHost(h));
  cr_assert_eq(cuMemHostUnregister(&local), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
  static char buf[8192];
  OK(cuMemHostRegister(buf, sizeof buf, 0));
  OK(cuMemHostUnregister(buf));
  cr_assert_eq(cuMemHostUnregister(buf), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
}

/* ---- VMM ------------------------------------------------------------------- */

static CUmemAllocationProp dev_prop(void) {
  return (CUmemAllocationProp){.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                               .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};
}

static void set_rw(CUdeviceptr p, size_t n) {
  CUmemAccessDesc d = {.location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0},
                       .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
  OK(cuMemSetAccess(p, n, &d, 1));
}

Test(fakecuda, vmm_lifecycle) {
  setup();
  CUmemAllocationProp prop = dev_prop();
  size_t gran = 0;
  OK(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  cr_assert_eq(gran, 2 * MiB);
  OK(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
  cr_assert_eq(gran, 2 * MiB);

  CUdeviceptr base;
  OK(cuMemAddressReserve(&base, 16 * MiB, 0, 0, 0));
  cr_assert_eq(base % (2 * MiB), 0);
  CUdeviceptr bad;
  cr_assert_eq(cuMemAddressReserve(&bad, 3 * MiB, 0, 0, 0), CUDA_ERROR_INVALID_VALUE);

  CUmemGenericAllocationHandle h, h2;
  cr_assert_eq(cuMemCreate(&h, MiB, &prop, 0), CUDA_ERROR_INVALID_VALUE);
  OK(cuMemCreate(&h, 2 * MiB, &prop, 0));
  OK(cuMemCreate(&h2, 4 * MiB, &prop, 0));
  CUmemAllocationProp got;
  OK(cuMemGetAllocationPropertiesFromHandle(&got, h));
  cr_assert_eq(got.location.type, CU_MEM_LOCATION_TYPE_DEVICE);
  cr_assert_eq(fakecuda_device_used(), 6 * MiB);

  /* one handle at two addresses shares its bytes */
  OK(cuMemMap(base, 2 * MiB, 0, h, 0));
  OK(cuMemMap(base + 8 * MiB, 2 * MiB, 0, h, 0));
  cr_assert_eq(cuMemMap(base, 2 * MiB, 0, h, 0), CUDA_ERROR_INVALID_VALUE, "already mapped");
  cr_assert_eq(cuMemMap(base + MiB, 2 * MiB, 0, h, 0), CUDA_ERROR_INVALID_VALUE, "misaligned");
  OK(cuMemMap(base + 2 * MiB, 4 * MiB, 0, h2, 0));
  set_rw(base, 6 * MiB);
  set_rw(base + 8 * MiB, 2 * MiB);
  cr_assert_eq(cuMemSetAccess(base + 6 * MiB, 2 * MiB,
                              &(CUmemAccessDesc){{CU_MEM_LOCATION_TYPE_DEVICE, 0},
                                                 CU_MEM_ACCESS_FLAGS_PROT_READWRITE},
                              1),
               CUDA_ERROR_INVALID_VALUE, "set access on an unmapped range");
  char *a = (char *)(uintptr_t)base, *b = (char *)(uintptr_t)(base + 8 * MiB);
  strcpy(a + 100, "shared bytes");
  cr_assert_str_eq(b + 100, "shared bytes");
  a[2 * MiB + 5] = 7; /* h2 is writable too */

  /* pointer queries see mappings */
  CUdeviceptr rb;
  size_t rs;
  OK(cuMemGetAddressRange(&rb, &rs, base + 3 * MiB));
  cr_assert_eq(rb, base + 2 * MiB);
  cr_assert_eq(rs, 4 * MiB);
  unsigned mt = 0;
  OK(cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, base + 8 * MiB));
  cr_assert_eq(mt, CU_MEMORYTYPE_DEVICE);
  CUmemGenericAllocationHandle r;
  OK(cuMemRetainAllocationHandle(&r, (void *)(uintptr_t)(base + 8 * MiB + 64)));
  cr_assert_eq(r, h);
  OK(cuMemRelease(r));

  /* unmap rules */
  cr_assert_eq(cuMemUnmap(base + 2 * MiB, 2 * MiB), CUDA_ERROR_INVALID_VALUE, "part of a mapping");
  cr_assert_eq(cuMemUnmap(base + 6 * MiB, 2 * MiB), CUDA_ERROR_INVALID_VALUE, "never mapped");
  OK(cuMemUnmap(base, 6 * MiB)); /* two whole mappings at once */
  cr_assert_eq(cuMemUnmap(base, 2 * MiB), CUDA_ERROR_INVALID_VALUE, "already unmapped");

  /* release while mapped: memory lives until the last unmap */
  OK(cuMemRelease(h));
  OK(cuMemRelease(h2));
  cr_assert_eq(fakecuda_device_used(), 2 * MiB, "h still mapped at base+8M");
  cr_assert_str_eq(b + 100, "shared bytes");
  cr_assert_eq(cuMemRelease(h2), CUDA_ERROR_INVALID_VALUE, "double release");
  OK(cuMemUnmap(base + 8 * MiB, 2 * MiB));
  cr_assert_eq(fakecuda_device_used(), 0);

  OK(cuMemAddressFree(base, 16 * MiB));
  /* the address hint is honoured when free */
  CUdeviceptr again;
  OK(cuMemAddressReserve(&again, 4 * MiB, 0, base, 0));
  cr_assert_eq(again, base);
  OK(cuMemAddressFree(again, 4 * MiB));
  cr_assert_eq(cuMemAddressFree(again, 4 * MiB), CUDA_ERROR_INVALID_VALUE);
}

Test(fakecuda, vmm_mapped_without_access_faults_on_host, .signal = SIGSEGV) {
  setup();
  CUmemAllocationProp prop = dev_prop();
  CUdeviceptr base;
  CUmemGenericAllocationHandle h;
  OK(cuMemAddressReserve(&base, 2 * MiB, 0, 0, 0));
  OK(cuMemCreate(&h, 2 * MiB, &prop, 0));
  OK(cuMemMap(base, 2 * MiB, 0, h, 0));
  /* not fake GPU work: the fake re-raises and the default action kills us */
  *(volatile char *)(uintptr_t)base = 1;
}

Test(fakecuda, host_located_vmm_is_accessible) {
  setup();
  CUmemAllocationProp prop = dev_prop();
  prop.location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
  prop.location.id = 0;
  CUdeviceptr base;
  CUmemGenericAllocationHandle h;
  OK(cuMemAddressReserve(&base, 2 * MiB, 0, 0, 0));
  OK(cuMemCreate(&h, 2 * MiB, &prop, 0));
  OK(cuMemMap(base, 2 * MiB, 0, h, 0));
  set_rw(base, 2 * MiB);
  OK(cuMemsetD32(base, 0xabcdef01u, 4));
  cr_assert_eq(((uint32_t *)(uintptr_t)base)[3], 0xabcdef01u);
  cr_assert_eq(fakecuda_device_used(), 0);
  OK(cuMemUnmap(base, 2 * MiB));
  OK(cuMemRelease(h));
  OK(cuMemAddressFree(base, 2 * MiB));
}

/* ---- copies and sets -------------------------------------------------------- */

Test(fakecuda, copies_and_sets) {
  setup();
  enum { N = 1 << 16 };
  unsigned char *src = malloc(N), *dst = malloc(N);
  for (int i = 0; i < N; i++) src[i] = (unsigned char)(i * 7 + 3);
  CUdeviceptr a, b;
  OK(cuMemAlloc(&a, N));
  OK(cuMemAlloc(&b, N));
  OK(cuMemcpyHtoD(a, src, N));
  OK(cuMemcpyDtoD(b, a, N));
  memset(dst, 0, N);
  OK(cuMemcpyDtoH(dst, b, N));
  cr_assert_eq(memcmp(src, dst, N), 0);
  OK(cuMemsetD8(a, 0x5a, 100));
  OK(cuMemsetD16(a + 100, 0x1234, 10));
  OK(cuMemsetD32(a + 120, 0xdeadbeef, 10));
  OK(cuMemcpy((CUdeviceptr)(uintptr_t)dst, a, 200));
  cr_assert_eq(dst[0], 0x5a);
  cr_assert_eq(dst[99], 0x5a);
  cr_assert_eq(*(uint16_t *)(dst + 118), 0x1234);
  cr_assert_eq(*(uint32_t *)(dst + 156), 0xdeadbeefu);
  cr_assert_eq(dst[160], src[160]);
  cr_assert_eq(cuMemsetD32(a + 1, 0, 1), CUDA_ERROR_INVALID_VALUE, "misaligned D32");

  /* async forms on a created stream, in order */
  CUstream s;
  OK(cuStreamCreate(&s, 0));
  void *pinned;
  OK(cuMemHostAlloc(&pinned, N, 0));
  memset(pinned, 0, N);
  OK(cuMemsetD8Async(a, 0x11, N, s));
  OK(cuMemcpyHtoDAsync(a, src, N / 2, s));
  OK(cuMemsetD32Async(b, 0x01020304, N / 4, s));
  OK(cuMemcpyDtoDAsync(b + 16, a + 16, 16, s));
  OK(cuMemcpyAsync(b + 32, a + N / 2, 16, s));
  OK(cuMemcpyDtoHAsync(pinned, b, N, s));
  OK(cuStreamSynchronize(s));
  unsigned char *pb = pinned;
  cr_assert_eq(*(uint32_t *)pb, 0x01020304u);
  cr_assert_eq(memcmp(pb + 16, src + 16, 16), 0);
  cr_assert_eq(pb[32], 0x11);
  cr_assert_eq(*(uint32_t *)(pb + 48), 0x01020304u);
  CUdeviceptr dp;
  OK(cuMemHostGetDevicePointer(&dp, pinned, 0));
  cr_assert_eq(dp, (CUdeviceptr)(uintptr_t)pinned);
  OK(cuMemFreeHost(pinned));
  OK(cuStreamDestroy(s));
  OK(cuMemFree(a));
  OK(cuMemFree(b));
  free(src);
  free(dst);
}

Test(fakecuda, pointer_attributes) {
  setup();
  CUdeviceptr d;
  OK(cuMemAlloc(&d, 1000));
  unsigned mt = 0;
  CUdeviceptr start = 0;
  size_t size = 0;
  CUcontext c = NULL;
  OK(cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, d + 10));
  cr_assert_eq(mt, CU_MEMORYTYPE_DEVICE);
  OK(cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, d + 10));
  cr_assert_eq(start, d);
  OK(cuPointerGetAttribute(&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, d + 999));
  cr_assert_eq(size, 1000);
  OK(cuPointerGetAttribute(&c, CU_POINTER_ATTRIBUTE_CONTEXT, d));
  cr_assert_eq(c, ctx);
  CUdeviceptr dp = 0;
  OK(cuPointerGetAttribute(&dp, CU_POINTER_ATTRIBUTE_DEVICE_POINTER, d + 5));
  cr_assert_eq(dp, d + 5);
  void *h;
  OK(cuMemAllocHost(&h, 64));
  OK(cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)(uintptr_t)h));
  cr_assert_eq(mt, CU_MEMORYTYPE_HOST);
  int local;
  cr_assert_eq(cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                     (CUdeviceptr)(uintptr_t)&local),
               CUDA_ERROR_INVALID_VALUE);
  CUpointer_attribute as[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_RANGE_SIZE};
  mt = 77;
  size = 77;
  void *data[] = {&mt, &size};
  OK(cuPointerGetAttributes(2, as, data, (CUdeviceptr)(uintptr_t)&local));
  cr_assert_eq(mt, 0);
  cr_assert_eq(size, 0);
  OK(cuPointerGetAttributes(2, as, data, d + 1));
  cr_assert_eq(mt, CU_MEMORYTYPE_DEVICE);
  cr_assert_eq(size, 1000);
  OK(cuMemGetAddressRange(&start, &size, d + 500));
  cr_assert_eq(start, d);
  OK(cuMemFree(d));
  OK(cuMemFreeHost(h));
}

/* ---- streams and events ------------------------------------------------------ */

Test(fakecuda, stream_fifo_under_jitter) {
  setenv("FAKECUDA_JITTER_US", "300", 1);
  setup();
  CUstream s;
  OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CUfunction f = reg("log", k_log, 1, SZ_INT);
  for (int i = 0; i < 40; i++) {
    int v = i;
    void *args[] = {&v};
    OK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, args, NULL));
  }
  OK(cuStreamSynchronize(s));
  cr_assert_eq(atomic_load(&log_n), 40);
  for (int i = 0; i < 40; i++) cr_assert_eq(log_buf[i], i, "op %d ran out of order", i);
  OK(cuStreamDestroy(s));
}

Test(fakecuda, events_query_and_elapsed_time) {
  setup();
  CUstream s;
  OK(cuStreamCreate(&s, 0));
  CUevent e0, e1, et;
  OK(cuEventCreate(&e0, 0));
  OK(cuEventCreate(&e1, 0));
  OK(cuEventCreate(&et, CU_EVENT_DISABLE_TIMING));
  OK(cuEventQuery(e0)); /* never recorded: complete */
  float ms = 0;
  cr_assert_eq(cuEventElapsedTime(&ms, e0, e1), CUDA_ERROR_INVALID_HANDLE, "never recorded");

  CUfunction wait = reg("wait_gate", k_wait_gate, 0, NULL);
  CUfunction sl = reg("sleep_ms", k_sleep_ms, 1, SZ_INT);
  OK(cuEventRecord(e0, s));
  OK(cuLaunchKernel(wait, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL));
  int sleep_ms = 30;
  void *args[] = {&sleep_ms};
  OK(cuLaunchKernel(sl, 1, 1, 1, 1, 1, 1, 0, s, args, NULL));
  OK(cuEventRecord(e1, s));
  OK(cuEventRecord(et, s));
  usleep(10000);
  cr_assert_eq(cuStreamQuery(s), CUDA_ERROR_NOT_READY);
  cr_assert_eq(cuEventQuery(e1), CUDA_ERROR_NOT_READY);
  cr_assert_eq(cuEventElapsedTime(&ms, e0, e1), CUDA_ERROR_NOT_READY);
  atomic_store(&gate, 1);
  OK(cuEventSynchronize(e1));
  OK(cuEventQuery(e1));
  OK(cuEventElapsedTime(&ms, e0, e1));
  cr_assert_geq(ms, 29.0f, "elapsed %f ms, kernel slept 30", (double)ms);
  cr_assert_lt(ms, 5000.0f);
  OK(cuStreamSynchronize(s));
  OK(cuStreamQuery(s));
  cr_assert_eq(cuEventElapsedTime(&ms, e0, et), CUDA_ERROR_INVALID_HANDLE, "timing disabled");
  /* destroying an event with a pending record is fine */
  atomic_store(&gate, 0);
  OK(cuLaunchKernel(wait, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL));
  OK(cuEventRecord(e0, s));
  OK(cuEventDestroy(e0));
  atomic_store(&gate, 1);
  OK(cuStreamSynchronize(s));
  OK(cuEventDestroy(e1));
  OK(cuEventDestroy(et));
  OK(cuStreamDestroy(s));
}

Test(fakecuda, stream_wait_event_orders_two_streams) {
  setenv("FAKECUDA_JITTER_US", "500", 1);
  setup();
  CUstream a, b;
  OK(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
  OK(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
  CUevent e;
  OK(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
  CUfunction st = reg("store_int", k_store_int, 2, SZ_PTR_INT);
  CUdeviceptr d;
  OK(cuMemAlloc(&d, 4));
  for (int i = 1; i <= 20; i++) {
    int out = -1;
    void *args[] = {&d, &i};
    OK(cuLaunchKernel(st, 1, 1, 1, 1, 1, 1, 0, a, args, NULL));
    OK(cuEventRecord(e, a));
    OK(cuStreamWaitEvent(b, e, 0));
    OK(cuMemcpyDtoHAsync(&out, d, 4, b));
    OK(cuStreamSynchronize(b));
    cr_assert_eq(out, i);
  }
  OK(cuCtxSynchronize());
  OK(cuMemFree(d));
}

Test(fakecuda, legacy_default_stream_synchronises_blocking_streams) {
  setup();
  CUfunction sl = reg("sleep_ms", k_sleep_ms, 1, SZ_INT);
  CUfunction st = reg("store_int", k_store_int, 2, SZ_PTR_INT);
  CUstream blk;
  OK(cuStreamCreate(&blk, 0));
  CUdeviceptr d;
  OK(cuMemAlloc(&d, 4));
  int ms = 40, one = 1, two = 2, out = 0;
  void *sargs[] = {&ms};

  /* blocking stream, then legacy: legacy work waits */
  void *a1[] = {&d, &one};
  OK(cuLaunchKernel(sl, 1, 1, 1, 1, 1, 1, 0, blk, sargs, NULL));
  OK(cuLaunchKernel(st, 1, 1, 1, 1, 1, 1, 0, blk, a1, NULL));
  OK(cuMemcpyDtoH(&out, d, 4)); /* sync copy = legacy stream */
  cr_assert_eq(out, 1, "legacy stream ran before earlier blocking-stream work");

  /* legacy, then blocking stream: blocking work waits */
  void *a2[] = {&d, &two};
  OK(cuLaunchKernel(sl, 1, 1, 1, 1, 1, 1, 0, NULL, sargs, NULL));
  OK(cuLaunchKernel(st, 1, 1, 1, 1, 1, 1, 0, CU_STREAM_LEGACY, a2, NULL));
  OK(cuMemcpyDtoHAsync(&out, d, 4, blk));
  OK(cuStreamSynchronize(blk));
  cr_assert_eq(out, 2, "blocking stream ran before earlier legacy-stream work");

  /* a non-blocking stream does not wait for the legacy stream */
  CUstream nb;
  OK(cuStreamCreate(&nb, CU_STREAM_NON_BLOCKING));
  unsigned fl = 0;
  OK(cuStreamGetFlags(nb, &fl));
  cr_assert_eq(fl, CU_STREAM_NON_BLOCKING);
  CUfunction wait = reg("wait_gate", k_wait_gate, 0, NULL);
  OK(cuLaunchKernel(wait, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL));
  int three = 3;
  void *a3[] = {&d, &three};
  OK(cuLaunchKernel(st, 1, 1, 1, 1, 1, 1, 0, nb, a3, NULL));
  OK(cuStreamSynchronize(nb)); /* would hang if nb waited for the gate */
  cr_assert_eq(cuStreamQuery(NULL), CUDA_ERROR_NOT_READY);
  atomic_store(&gate, 1);
  OK(cuCtxSynchronize());
  OK(cuStreamQuery(NULL));
  OK(cuMemcpyDtoH(&out, d, 4));
  cr_assert_eq(out, 3);
  OK(cuStreamDestroy(blk));
  OK(cuStreamDestroy(nb));
}

Test(fakecuda, host_func_runs_in_order) {
  setup();
  CUstream s;
  OK(cuStreamCreate(&s, 0));
  CUfunction f = reg("log", k_log, 1, SZ_INT);
  int v = 5;
  void *args[] = {&v};
  OK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, args, NULL));
  OK(cuLaunchHostFunc(s, free, malloc(16)));
  OK(cuStreamSynchronize(s));
  cr_assert_eq(atomic_load(&log_n), 1);
  OK(cuStreamDestroy(s));
}

/* ---- kernels ------------------------------------------------------------------ */

Test(fakecuda, func_param_info_and_name) {
  setup();
  const size_t sizes[] = {8, 4, 4, 8, 12, 1, 2, 16};
  const size_t want[] = {0, 8, 12, 16, 24, 36, 38, 40};
  CUfunction f = reg("layout_kernel", k_sleep_ms, 8, sizes);
  for (size_t i = 0; i < 8; i++) {
    size_t off = 99, sz = 99;
    OK(cuFuncGetParamInfo(f, i, &off, &sz));
    cr_assert_eq(off, want[i], "param %zu at %zu, want %zu", i, off, want[i]);
    cr_assert_eq(sz, sizes[i]);
  }
  size_t off, sz;
  cr_assert_eq(cuFuncGetParamInfo(f, 8, &off, &sz), CUDA_ERROR_INVALID_VALUE);
  cr_assert_eq(cuFuncGetParamInfo((CUfunction)(uintptr_t)0x77, 0, &off, &sz),
               CUDA_ERROR_INVALID_HANDLE);
  const char *name = NULL;
  OK(cuFuncGetName(&name, f));
  cr_assert_str_eq(name, "layout_kernel");
  cr_assert_null(fakecuda_register_kernel(NULL, k_sleep_ms, 0, NULL));
}

Test(fakecuda, launch_param_forms) {
  setup();
  const size_t sizes[] = {sizeof(float *), sizeof(float), sizeof(int), sizeof(double)};
  CUfunction f = reg("axpb", k_axpb, 4, sizes);
  enum { N = 256 };
  float host[N];
  for (int i = 0; i < N; i++) host[i] = (float)i;
  CUdeviceptr d;
  OK(cuMemAlloc(&d, sizeof host));
  OK(cuMemcpyHtoD(d, host, sizeof host));
  OK(cuStreamSynchronize(NULL)); /* a copy from pageable memory may still be in flight */
  CUstream s;
  OK(cuStreamCreate(&s, 0));
  CUfunction wait = reg("wait_gate", k_wait_gate, 0, NULL);
  OK(cuLaunchKernel(wait, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL)); /* hold the stream */

  /* kernelParams form: y = 2y + 1, then the caller reuses its variables */
  float *y = (float *)(uintptr_t)d;
  float a = 2.0f;
  int n = N;
  double b = 1.0;
  void *args[] = {&y, &a, &n, &b};
  OK(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, s, args, NULL));
  a = 100.0f;
  b = 100.0;
  n = 0;

  /* extra form: y = 3y + 0.5, packed at the registered offsets */
  unsigned char buf[32] = {0};
  size_t off;
  float a2 = 3.0f;
  int n2 = N;
  double b2 = 0.5;
  OK(cuFuncGetParamInfo(f, 0, &off, NULL));
  memcpy(buf + off, &y, sizeof y);
  OK(cuFuncGetParamInfo(f, 1, &off, NULL));
  memcpy(buf + off, &a2, sizeof a2);
  OK(cuFuncGetParamInfo(f, 2, &off, NULL));
  memcpy(buf + off, &n2, sizeof n2);
  OK(cuFuncGetParamInfo(f, 3, &off, NULL));
  memcpy(buf + off, &b2, sizeof b2);
  size_t bufsize = 24;
  void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buf, CU_LAUNCH_PARAM_BUFFER_SIZE, &bufsize,
                   CU_LAUNCH_PARAM_END};
  OK(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, s, NULL, extra));
  memset(buf, 0xff, sizeof buf);
  size_t small = 16;
  void *extra_small[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buf, CU_LAUNCH_PARAM_BUFFER_SIZE, &small,
                         CU_LAUNCH_PARAM_END};
  cr_assert_eq(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, NULL, extra_small), CUDA_ERROR_INVALID_VALUE);

  /* cuLaunchKernelEx: y = y - 1 */
  float a3 = 1.0f;
  double b3 = -1.0;
  int n3 = N;
  void *args3[] = {&y, &a3, &n3, &b3};
  CUlaunchConfig cfg = {.gridDimX = 2, .gridDimY = 1, .gridDimZ = 1, .blockDimX = 64,
                        .blockDimY = 1, .blockDimZ = 1, .hStream = s};
  OK(cuLaunchKernelEx(&cfg, f, args3, NULL));
  OK(cuLaunchCooperativeKernel(f, 1, 1, 1, 1, 1, 1, 0, s, args3));

  unsigned long long before = fakecuda_launch_count();
  atomic_store(&gate, 1);
  OK(cuStreamSynchronize(s));
  cr_assert_eq(fakecuda_launch_count() - before, 5, "wait + 4 kernels");
  OK(cuMemcpyDtoH(host, d, sizeof host));
  for (int i = 0; i < N; i++) {
    float want = (2.0f * (float)i + 1.0f) * 3.0f + 0.5f - 2.0f;
    cr_assert_float_eq(host[i], want, 1e-3, "y[%d] = %f, want %f", i, (double)host[i], (double)want);
  }
  OK(cuStreamDestroy(s));
  OK(cuMemFree(d));
}

/* ---- cuGetProcAddress ----------------------------------------------------------- */

#undef cuGetProcAddress
typedef CUresult (*get_proc_v1_t)(const char *, void **, int, cuuint64_t);

Test(fakecuda, get_proc_address_versions) {
  void *fn = NULL;
  CUdriverProcAddressQueryResult st;
  OK(cuGetProcAddress_v2("cuMemAlloc", &fn, 13000, 0, &st));
  cr_assert_eq(st, CU_GET_PROC_ADDRESS_SUCCESS);
  cr_assert_eq(fn, (void *)&cuMemAlloc_v2);
  cr_assert_eq(cuGetProcAddress_v2("cuMemAlloc", &fn, 3000, 0, &st), CUDA_ERROR_NOT_FOUND);
  cr_assert_eq(st, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
  cr_assert_null(fn);
  cr_assert_eq(cuGetProcAddress_v2("cuNoSuchFunction", &fn, 13000, 0, &st), CUDA_ERROR_NOT_FOUND);
  cr_assert_eq(st, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);

  OK(cuGetProcAddress_v2("cuStreamDestroy", &fn, 4000, 0, &st));
  cr_assert_eq(fn, (void *)&cuStreamDestroy_v2);
  OK(cuGetProcAddress_v2("cuStreamDestroy", &fn, 3020, 0, &st));
  cr_assert_eq(fn, dlsym(RTLD_DEFAULT, "cuStreamDestroy"), "pre-4.0 callers get the v1 symbol");
  OK(cuGetProcAddress_v2("cuCtxSynchronize", &fn, 12000, 0, &st));
  cr_assert_eq(fn, (void *)&cuCtxSynchronize);
  OK(cuGetProcAddress_v2("cuCtxSynchronize", &fn, 13000, 0, &st));
  cr_assert_eq(fn, (void *)&cuCtxSynchronize_v2, "CUDA 13 changed cuCtxSynchronize");
  OK(cuGetProcAddress_v2("cuMemcpyHtoD", &fn, 12000, 0, &st));
  cr_assert_eq(fn, (void *)&cuMemcpyHtoD_v2);
  OK(cuGetProcAddress_v2("cuMemGetInfo", &fn, 12000, 0, &st));
  cr_assert_eq(fn, (void *)&cuMemGetInfo_v2);
  OK(cuGetProcAddress_v2("cuEventElapsedTime", &fn, 12080, 0, &st));
  cr_assert_eq(fn, (void *)&cuEventElapsedTime_v2);

  void *self = dlsym(RTLD_DEFAULT, "cuGetProcAddress");
  cr_assert_not_null(self, "v1 cuGetProcAddress is exported under its own name");
  OK(cuGetProcAddress_v2("cuGetProcAddress", &fn, 11030, 0, &st));
  cr_assert_eq(fn, self);
  OK(cuGetProcAddress_v2("cuGetProcAddress", &fn, 12000, 0, &st));
  cr_assert_eq(fn, (void *)&cuGetProcAddress_v2);
  get_proc_v1_t v1 = (get_proc_v1_t)self;
  OK(v1("cuLaunchKernel", &fn, 12000, 0));
  cr_assert_eq(fn, (void *)&cuLaunchKernel);
  cr_assert_eq(v1("cuNoSuchFunction", &fn, 12000, 0), CUDA_ERROR_NOT_FOUND);

  /* per-thread default stream variants */
  const cuuint64_t PT = CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
  const char *pt_names[] = {"cuLaunchKernel", "cuMemcpyHtoD", "cuMemcpyHtoDAsync", "cuMemsetD8",
                            "cuStreamSynchronize", "cuMemAllocAsync"};
  const char *pt_syms[] = {"cuLaunchKernel_ptsz", "cuMemcpyHtoD_v2_ptds", "cuMemcpyHtoDAsync_v2_ptsz",
                           "cuMemsetD8_v2_ptds", "cuStreamSynchronize_ptsz", "cuMemAllocAsync_ptsz"};
  for (size_t i = 0; i < sizeof pt_names / sizeof pt_names[0]; i++) {
    OK(cuGetProcAddress_v2(pt_names[i], &fn, 13000, PT, &st));
    void *want = dlsym(RTLD_DEFAULT, pt_syms[i]);
    cr_assert_not_null(want, "%s exported", pt_syms[i]);
    cr_assert_eq(fn, want, "%s with PTDS flag", pt_names[i]);
  }
  OK(cuGetProcAddress_v2("cuMemAlloc", &fn, 13000, PT, &st)); /* no PT variant: the plain one */
  cr_assert_eq(fn, (void *)&cuMemAlloc_v2);
  OK(cuGetProcAddress_v2("cuLaunchKernel", &fn, 13000, CU_GET_PROC_ADDRESS_LEGACY_STREAM, &st));
  cr_assert_eq(fn, (void *)&cuLaunchKernel);
}

/* ---- capture and graphs ----------------------------------------------------------- */

Test(fakecuda, stream_capture_and_graph_replay) {
  setup();
  CUstream s;
  OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CUfunction f = reg("log", k_log, 1, SZ_INT);
  cr_assert_eq(cuStreamBeginCapture(NULL, CU_STREAM_CAPTURE_MODE_GLOBAL),
               CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "legacy stream cannot capture");
  OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CUstreamCaptureStatus cs;
  OK(cuStreamIsCapturing(s, &cs));
  cr_assert_eq(cs, CU_STREAM_CAPTURE_STATUS_ACTIVE);
  for (int i = 1; i <= 3; i++) {
    int v = i;
    void *args[] = {&v};
    OK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, args, NULL));
  }
  CUgraph g;
  OK(cuStreamEndCapture(s, &g));
  OK(cuStreamIsCapturing(s, &cs));
  cr_assert_eq(cs, CU_STREAM_CAPTURE_STATUS_NONE);
  usleep(5000);
  cr_assert_eq(atomic_load(&log_n), 0, "captured launches must not run");
  CUgraphExec ex;
  OK(cuGraphInstantiateWithFlags(&ex, g, 0));
  OK(cuGraphDestroy(g)); /* the exec is independent of the graph */
  OK(cuGraphLaunch(ex, s));
  OK(cuGraphLaunch(ex, s));
  OK(cuStreamSynchronize(s));
  cr_assert_eq(atomic_load(&log_n), 6);
  const int want[] = {1, 2, 3, 1, 2, 3};
  for (int i = 0; i < 6; i++) cr_assert_eq(log_buf[i], want[i]);
  OK(cuGraphExecDestroy(ex));
  cr_assert_eq(cuGraphExecDestroy(ex), CUDA_ERROR_INVALID_VALUE);
  cr_assert_eq(cuStreamEndCapture(s, &g), CUDA_ERROR_ILLEGAL_STATE);
  OK(cuStreamDestroy(s));
}

/* cuda.h, cuStreamIsCapturing: on the legacy stream while a blocking
 * stream captures, CUDA_ERROR_STREAM_CAPTURE_IMPLICIT; a non-blocking
 * stream's capture leaves the legacy stream alone. */
Test(fakecuda, legacy_stream_while_a_blocking_stream_captures) {
  setup();
  CUstream b, nb;
  OK(cuStreamCreate(&b, 0));
  OK(cuStreamCreate(&nb, CU_STREAM_NON_BLOCKING));
  CUstreamCaptureStatus cs;
  CUgraph g;
  OK(cuStreamBeginCapture(nb, CU_STREAM_CAPTURE_MODE_RELAXED));
  OK(cuStreamIsCapturing(NULL, &cs));
  cr_assert_eq(cs, CU_STREAM_CAPTURE_STATUS_NONE);
  OK(cuStreamEndCapture(nb, &g));
  OK(cuGraphDestroy(g));
  OK(cuStreamBeginCapture(b, CU_STREAM_CAPTURE_MODE_RELAXED));
  cr_assert_eq(cuStreamIsCapturing(NULL, &cs), CUDA_ERROR_STREAM_CAPTURE_IMPLICIT);
  OK(cuStreamIsCapturing(b, &cs));
  cr_assert_eq(cs, CU_STREAM_CAPTURE_STATUS_ACTIVE, "the blocking capture is not invalidated");
  OK(cuStreamEndCapture(b, &g));
  OK(cuGraphDestroy(g));
  OK(cuStreamIsCapturing(NULL, &cs));
  cr_assert_eq(cs, CU_STREAM_CAPTURE_STATUS_NONE);
  OK(cuStreamDestroy(b));
  OK(cuStreamDestroy(nb));
}

/* ---- FAKECUDA_BW ------------------------------------------------------------------ */

Test(fakecuda, bandwidth_limits_copy_time) {
  setenv("FAKECUDA_BW", "640M", 1); /* 64 MiB at 640 MiB/s: 100 ms */
  setup();
  size_t n = 64 * MiB;
  void *h;
  OK(cuMemAllocHost(&h, n));
  CUdeviceptr d;
  OK(cuMemAlloc(&d, n));
  double t0 = now_s();
  OK(cuMemcpyHtoD(d, h, n));
  double dt = now_s() - t0;
  cr_assert_geq(dt, 0.095, "64 MiB copy took %.3f s, expected >= 0.1 s", dt);
  OK(cuMemFree(d));
  OK(cuMemFreeHost(h));
}
