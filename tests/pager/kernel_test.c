/*
 * Description: kernel handles, tensor maps and driver lookups, case by
 * case, on the fake driver under LD_PRELOAD=libmtalloc.so. The program
 * reaches the driver only as libcudart does (dlopen + cuGetProcAddress,
 * tests/fakecuda/cudart_route.h) and loads its kernels through the library
 * API, as CUDA 12+ runtimes do. With MT_MAX_VRAM of one buffer and
 * MT_HOST_MAP=off, a buffer a launch needs but the interposer did not make
 * resident is unmapped: the fake reports the illegal address and exits 86.
 *   kernel       CUkernel handles (cuLibraryGetKernel, cuLibraryEnumerateKernels)
 *                launched with cuLaunchKernel and cuLaunchKernelEx, and the
 *                CUfunction of cuKernelGetFunction, each on a buffer evicted
 *                just before: all made resident, right values,
 *                launches_unknown_layout 0. Run with FAKECUDA_KERNEL_AS_FUNC=
 *                reject (cuFunc* refuse kernels) and =accept.
 *   unknown      no layout query answers (FAKECUDA_PARAMINFO=unsupported):
 *                every launch counts in launches_unknown_layout, and one
 *                warning names each kernel once, also across an unload
 *   unload       a kernel launched, its library unloaded, a different kernel
 *                loaded at the same handle: the new layout is used (same
 *                again with cuModuleLoadData / cuModuleUnload)
 *   wrappers     with FAKECUDA_PROCADDR_WRAPPERS=1 (cuGetProcAddress answers
 *                internal entry points, not the exports) calls are still
 *                seen on the procaddr route, per-thread lookups included
 *   tensormap    kernels reach a buffer only through a CUtensorMap (by value,
 *                and inside a struct parameter) whose address the fake
 *                encodes: made resident through the descriptor, also after
 *                cuTensorMapReplaceAddress and in the packed `extra` form
 * Usage: kernel_test CASE. Exit 0 pass, 1 fail, 77 skip (not preloaded).
 */
#include <cudaTypedefs.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cudart_route.h"

#define WHO "kernel_test"
#include "contract.h"
#define NW (MiB) /* u32 words per buffer: 4 MiB, the whole MT_MAX_VRAM */


static cudart_route_t route;
static void *(*tmap_address)(const void *);

#define ENTRY_POINTS(X)                                  \
  X(cuGetErrorName, PFN_cuGetErrorName_v6000)            \
  X(cuInit, PFN_cuInit_v2000)                            \
  X(cuDeviceGet, PFN_cuDeviceGet_v2000)                  \
  X(cuDevicePrimaryCtxRetain, PFN_cuDevicePrimaryCtxRetain_v7000) \
  X(cuCtxSetCurrent, PFN_cuCtxSetCurrent_v4000)          \
  X(cuMemAlloc, PFN_cuMemAlloc_v3020)                    \
  X(cuMemFree, PFN_cuMemFree_v3020)                      \
  X(cuMemsetD32, PFN_cuMemsetD32_v3020)                  \
  X(cuMemcpyDtoH, PFN_cuMemcpyDtoH_v3020)                \
  X(cuStreamSynchronize, PFN_cuStreamSynchronize_v2000)  \
  X(cuLaunchKernel, PFN_cuLaunchKernel_v4000)            \
  X(cuLaunchKernelEx, PFN_cuLaunchKernelEx_v11060)       \
  X(cuLibraryLoadData, PFN_cuLibraryLoadData_v12000)     \
  X(cuLibraryUnload, PFN_cuLibraryUnload_v12000)         \
  X(cuLibraryGetKernel, PFN_cuLibraryGetKernel_v12000)   \
  X(cuLibraryGetKernelCount, PFN_cuLibraryGetKernelCount_v12040) \
  X(cuLibraryEnumerateKernels, PFN_cuLibraryEnumerateKernels_v12040) \
  X(cuKernelGetFunction, PFN_cuKernelGetFunction_v12000) \
  X(cuModuleLoadData, PFN_cuModuleLoadData_v2000)        \
  X(cuModuleGetFunction, PFN_cuModuleGetFunction_v2000)  \
  X(cuModuleUnload, PFN_cuModuleUnload_v2000)            \
  X(cuTensorMapEncodeTiled, PFN_cuTensorMapEncodeTiled_v12000) \
  X(cuTensorMapReplaceAddress, PFN_cuTensorMapReplaceAddress_v12000)

#define DECL(name, type) static type p_##name;
ENTRY_POINTS(DECL)
#undef DECL

static void fail(const char *what, CUresult r, int line) {
  const char *name = "?";
  if (p_cuGetErrorName) p_cuGetErrorName(r, &name);
  fprintf(stderr, WHO ":%d: %s failed: %s (%d)\n", line, what, name, (int)r);
  exit(1);
}
#define CALL(fn, ...)                                    \
  do {                                                   \
    CUresult r_ = p_##fn(__VA_ARGS__);                   \
    if (r_ != CUDA_SUCCESS) fail(#fn, r_, __LINE__);     \
  } while (0)

/* ---- kernels ---------------------------------------------------------------- */

static void k_add(void **p, const fakecuda_launch_t *l) { /* x[i] += a, i < n */
  (void)l;
  uint32_t *x = *(uint32_t **)p[0];
  uint32_t a = *(uint32_t *)p[1];
  uint64_t n = *(uint64_t *)p[2];
  for (uint64_t i = 0; i < n; i++) x[i] += a;
}
static void k_add_twice(void **p, const fakecuda_launch_t *l) { /* x[i] += 2a */
  (void)l;
  uint32_t *x = *(uint32_t **)p[0];
  uint32_t a = *(uint32_t *)p[1];
  uint64_t n = *(uint64_t *)p[2];
  for (uint64_t i = 0; i < n; i++) x[i] += 2 * a;
}
static void k_opaque(void **p, const fakecuda_launch_t *l) { /* touches no memory */
  (void)p, (void)l;
}
static void k_old(void **p, const fakecuda_launch_t *l) { /* old_k(x): x[i] += 1 */
  (void)l;
  uint32_t *x = *(uint32_t **)p[0];
  for (size_t i = 0; i < NW; i++) x[i] += 1;
}
static void k_new(void **p, const fakecuda_launch_t *l) { /* new_k(n, x): x[i] += 100 */
  (void)l;
  uint64_t n = *(uint64_t *)p[0];
  uint32_t *x = *(uint32_t **)p[1];
  for (uint64_t i = 0; i < n; i++) x[i] += 100;
}

/* tma_add(CUtensorMap tm, u32 a, u64 n): words of the tensor += a */
static void k_tma_add(void **p, const fakecuda_launch_t *l) {
  (void)l;
  uint32_t *x = tmap_address(p[0]);
  uint32_t a = *(uint32_t *)p[1];
  uint64_t n = *(uint64_t *)p[2];
  for (uint64_t i = 0; i < n; i++) x[i] += a;
}

/* CUTLASS-style: the descriptor inside a struct parameter. */
typedef struct tma_args {
  uint64_t n;
  uint32_t a;
  uint32_t pad;
  CUtensorMap tm; /* offset 128 */
} tma_args_t;
static void k_tma_struct(void **p, const fakecuda_launch_t *l) {
  (void)l;
  tma_args_t args; /* the fake keeps parameter values 16-byte aligned only */
  memcpy(&args, p[0], sizeof args);
  uint32_t *x = tmap_address(&args.tm);
  for (uint64_t i = 0; i < args.n; i++) x[i] += args.a;
}

static const size_t add_sizes[] = {8, 4, 8};

static CUlibrary load_library(const fakecuda_image_kernel_t *k, size_t n) {
  fakecuda_image_t img = {FAKECUDA_IMAGE_MAGIC, n, k};
  CUlibrary lib;
  CALL(cuLibraryLoadData, &lib, &img, NULL, NULL, 0, NULL, NULL, 0);
  return lib;
}

static void setup(void) {
  contract_preloaded();
  cudart_route_open(&route, WHO);
#define GET(name, type) cudart_route_get(&route, WHO, #name, (void **)&p_##name);
  ENTRY_POINTS(GET)
#undef GET
  tmap_address = (void *(*)(const void *))dlsym(route.handle, "fakecuda_tensormap_address");
  EXPECT(tmap_address != NULL, "libcuda.so.1 is not the fake");
  CUdevice d;
  CUcontext c;
  CALL(cuInit, 0);
  CALL(cuDeviceGet, &d, 0);
  CALL(cuDevicePrimaryCtxRetain, &c, d);
  CALL(cuCtxSetCurrent, c);
}

static CUdeviceptr buffer(uint32_t value) {
  CUdeviceptr x;
  CALL(cuMemAlloc, &x, NW * 4);
  CALL(cuMemsetD32, x, value, NW);
  return x;
}

/* Every word of x is want (first, middle and last checked in full copies). */
static void expect_all(CUdeviceptr x, uint32_t want, const char *what) {
  uint32_t *h = malloc(NW * 4);
  EXPECT(h != NULL, "out of memory");
  CALL(cuMemcpyDtoH, h, x, NW * 4);
  for (size_t i = 0; i < NW; i++) EXPECT(h[i] == want, "%s: word %zu is %u, want %u", what, i, h[i], want);
  free(h);
}

static void launch(CUfunction f, void **args) {
  CALL(cuLaunchKernel, f, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL);
}

static int case_kernel(void) {
  const fakecuda_image_kernel_t ks[] = {
      {"add_u32", k_add, 3, add_sizes, NULL},
      {"add_twice", k_add_twice, 3, add_sizes, NULL},
  };
  CUlibrary lib = load_library(ks, 2);
  CUkernel k, all[2];
  unsigned int count = 0;
  CALL(cuLibraryGetKernel, &k, lib, "add_u32");
  CALL(cuLibraryGetKernelCount, &count, lib);
  EXPECT(count == 2, "kernel count %u, want 2", count);
  CALL(cuLibraryEnumerateKernels, all, 2, lib);
  CUfunction f;
  CALL(cuKernelGetFunction, &f, k);

  /* Each buffer is the whole budget: each launch below must fetch its own,
   * evicting the other. */
  CUdeviceptr a = buffer(1), b = buffer(2);
  uint64_t n = NW;
  uint32_t va = 10, vb = 20, vc = 5;
  void *args_a[] = {&a, &va, &n}, *args_b[] = {&b, &vb, &n}, *args_c[] = {&a, &vc, &n};
  launch((CUfunction)k, args_a);     /* a CUkernel where a CUfunction goes */
  launch(f, args_b);                 /* the kernel's CUfunction */
  CUlaunchConfig cfg = {.gridDimX = 1, .gridDimY = 1, .gridDimZ = 1, .blockDimX = 1, .blockDimY = 1, .blockDimZ = 1};
  CALL(cuLaunchKernelEx, &cfg, (CUfunction)all[1], args_c, NULL); /* enumerated: add_twice */
  CALL(cuStreamSynchronize, NULL);
  expect_all(a, 1 + 10 + 2 * 5, "buffer a");
  expect_all(b, 2 + 20, "buffer b");
  EXPECT(stat_of("launches") == 3, "launches %ld, want 3", stat_of("launches"));
  EXPECT(stat_of("launches_unknown_layout") == 0, "launches_unknown_layout %ld, want 0",
         stat_of("launches_unknown_layout"));
  EXPECT(stat_of("fetches") >= 2, "fetches %ld: the test did not page", stat_of("fetches"));
  CALL(cuMemFree, a);
  CALL(cuMemFree, b);
  CALL(cuLibraryUnload, lib);
  printf(WHO " kernel: ok (CUkernel, enumerated CUkernel and its CUfunction all paged)\n");
  return 0;
}

/* The mtalloc log goes to stderr (fd 2): it is captured in a file here so
 * the warnings can be counted, then passed on. */
static int case_unknown(void) {
  char path[] = "/tmp/kernel_test.XXXXXX";
  int fd = mkstemp(path);
  EXPECT(fd >= 0, "mkstemp");
  int saved = dup(2);
  EXPECT(saved >= 0 && dup2(fd, 2) == 2, "dup2");
  CUdeviceptr a = buffer(0); /* the pager starts at the first allocation */
  const size_t sizes[] = {4};
  const fakecuda_image_kernel_t ks[] = {{"opaque_k", k_opaque, 1, sizes, NULL}};
  CUlibrary lib = load_library(ks, 1);
  CUkernel k;
  CALL(cuLibraryGetKernel, &k, lib, "opaque_k");
  uint32_t v = 7;
  void *args[] = {&v};
  for (int i = 0; i < 3; i++) launch((CUfunction)k, args);
  /* A function no hook saw made (its origin unknown): its layout is dropped
   * at every unload, but it is named once, not once per unload. */
  CUfunction f = route.register_kernel("opaque_f", k_opaque, 1, sizes);
  EXPECT(f != NULL, "registration");
  launch(f, args);
  CUlibrary other = load_library(ks, 1);
  CALL(cuLibraryUnload, other);
  launch(f, args);
  launch(f, args);
  CALL(cuStreamSynchronize, NULL);
  long unknown = stat_of("launches_unknown_layout");
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  FILE *log = fopen(path, "r");
  EXPECT(log != NULL, "reopen the log");
  char line[2048];
  int warnings = 0, warnings_f = 0;
  while (fgets(line, sizeof line, log)) {
    fputs(line, stderr);
    warnings += strstr(line, "kernel opaque_k: the driver gave no parameter layout") != NULL;
    warnings_f += strstr(line, "kernel opaque_f: the driver gave no parameter layout") != NULL;
  }
  fclose(log);
  close(fd);
  unlink(path);
  EXPECT(unknown == 6, "launches_unknown_layout %ld, want 6", unknown);
  EXPECT(warnings == 1, "%d warnings naming opaque_k, want exactly 1", warnings);
  EXPECT(warnings_f == 1, "%d warnings naming opaque_f, want exactly 1 (an unload in between)", warnings_f);
  CALL(cuMemFree, a);
  CALL(cuLibraryUnload, lib);
  printf(WHO " unknown: ok (6 launches counted, one warning per kernel)\n");
  return 0;
}

static int case_unload(void) {
  const size_t old_sizes[] = {8}, new_sizes[] = {8, 8};
  const fakecuda_image_kernel_t old_ks[] = {{"old_k", k_old, 1, old_sizes, NULL}};
  const fakecuda_image_kernel_t new_ks[] = {{"new_k", k_new, 2, new_sizes, NULL}};
  CUdeviceptr a = buffer(0), b = buffer(0);
  uint64_t n = NW;

  /* Libraries: old_k(x) at some handle; new_k(n, x) at the same one later. */
  CUlibrary lib = load_library(old_ks, 1);
  CUkernel k_old_h, k_new_h;
  CALL(cuLibraryGetKernel, &k_old_h, lib, "old_k");
  void *args_old[] = {&a};
  launch((CUfunction)k_old_h, args_old);
  CALL(cuLibraryUnload, lib);
  CUlibrary lib_old = lib;
  lib = load_library(new_ks, 1);
  CALL(cuLibraryGetKernel, &k_new_h, lib, "new_k");
  /* Same library and kernel handles: only the unload can tell the layout
   * cache that the kernel changed. */
  EXPECT(k_new_h == k_old_h && lib == lib_old,
         "the fake did not reuse the handles (kernel %p, %p; library %p, %p): the case tests nothing",
         (void *)k_new_h, (void *)k_old_h, (void *)lib, (void *)lib_old);
  CALL(cuMemsetD32, b, 0, NW); /* evicts a */
  void *args_new[] = {&n, &a};
  launch((CUfunction)k_new_h, args_new); /* a is parameter 1 now */
  CALL(cuStreamSynchronize, NULL);
  expect_all(a, 101, "library: buffer a");
  CALL(cuLibraryUnload, lib);

  /* Modules: the same with cuModuleLoadData / cuModuleGetFunction. */
  fakecuda_image_t img_old = {FAKECUDA_IMAGE_MAGIC, 1, old_ks}, img_new = {FAKECUDA_IMAGE_MAGIC, 1, new_ks};
  CUmodule mod;
  CUfunction f_old, f_new;
  CALL(cuModuleLoadData, &mod, &img_old);
  CALL(cuModuleGetFunction, &f_old, mod, "old_k");
  void *args_old_b[] = {&b};
  launch(f_old, args_old_b);
  CALL(cuModuleUnload, mod);
  CUmodule mod_old = mod;
  CALL(cuModuleLoadData, &mod, &img_new);
  CALL(cuModuleGetFunction, &f_new, mod, "new_k");
  EXPECT(f_new == f_old && mod == mod_old, "the fake did not reuse the module and function handles: the case "
         "tests nothing");
  CALL(cuMemsetD32, a, 0, NW); /* evicts b */
  void *args_new_b[] = {&n, &b};
  launch(f_new, args_new_b);
  CALL(cuStreamSynchronize, NULL);
  expect_all(b, 101, "module: buffer b");
  CALL(cuModuleUnload, mod);
  EXPECT(stat_of("launches_unknown_layout") == 0, "launches_unknown_layout %ld", stat_of("launches_unknown_layout"));
  CALL(cuMemFree, a);
  CALL(cuMemFree, b);
  printf(WHO " unload: ok (a kernel at a reused handle got its own layout, library and module)\n");
  return 0;
}

static int case_wrappers(void) {
  PFN_cuLaunchKernel_v4000 launch_pt = NULL;
  CUdriverProcAddressQueryResult st;
  CUresult r = route.get_proc("cuLaunchKernel", (void **)&launch_pt, CUDART_ROUTE_VERSION,
                              CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st);
  EXPECT(r == CUDA_SUCCESS && launch_pt, "per-thread lookup of cuLaunchKernel failed");
  CUfunction add = route.register_kernel("add_u32", k_add, 3, add_sizes);
  EXPECT(add != NULL, "registration");
  CUdeviceptr a = buffer(3);
  uint64_t n = NW;
  uint32_t v = 4;
  void *args[] = {&a, &v, &n};
  launch(add, args);
  CALL(cuStreamSynchronize, NULL);
  r = launch_pt(add, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL);
  EXPECT(r == CUDA_SUCCESS, "per-thread launch: %d", (int)r);
  CALL(cuStreamSynchronize, NULL);
  expect_all(a, 11, "buffer a");
  CALL(cuMemFree, a);
  EXPECT(calls("cuMemAlloc_v2", "procaddr") == 1, "procaddr cuMemAlloc_v2: %ld, want 1",
         calls("cuMemAlloc_v2", "procaddr"));
  EXPECT(calls("cuMemFree_v2", "procaddr") == 1, "procaddr cuMemFree_v2: %ld", calls("cuMemFree_v2", "procaddr"));
  EXPECT(calls("cuLaunchKernel", "procaddr") == 1, "procaddr cuLaunchKernel: %ld, want 1",
         calls("cuLaunchKernel", "procaddr"));
  EXPECT(calls("cuLaunchKernel_ptsz", "procaddr") == 1, "procaddr cuLaunchKernel_ptsz: %ld, want 1",
         calls("cuLaunchKernel_ptsz", "procaddr"));
  /* The route looked up cuGetProcAddress through itself: every lookup after
   * that one went through the procaddr route too. */
  EXPECT(calls("cuGetProcAddress_v2", "procaddr") >= 20, "procaddr cuGetProcAddress_v2: %ld",
         calls("cuGetProcAddress_v2", "procaddr"));
  EXPECT(stat_of("launches") == 2, "launches %ld, want 2", stat_of("launches"));
  printf(WHO " wrappers: ok (calls seen through cuGetProcAddress's internal entry points)\n");
  return 0;
}

static int case_tensormap(void) {
  const size_t tma_sizes[] = {sizeof(CUtensorMap), 4, 8}, tma_aligns[] = {64, 4, 8};
  const size_t st_sizes[] = {sizeof(tma_args_t)}, st_aligns[] = {128};
  const fakecuda_image_kernel_t ks[] = {
      {"tma_add", k_tma_add, 3, tma_sizes, tma_aligns},
      {"tma_struct", k_tma_struct, 1, st_sizes, st_aligns},
  };
  _Static_assert(sizeof(CUtensorMap) == 128 && offsetof(tma_args_t, tm) == 128, "descriptor layout");
  CUlibrary lib = load_library(ks, 2);
  CUkernel k_tma, k_struct;
  CALL(cuLibraryGetKernel, &k_tma, lib, "tma_add");
  CALL(cuLibraryGetKernel, &k_struct, lib, "tma_struct");
  CUdeviceptr t = buffer(1), x = buffer(2); /* x's memset evicts t */

  CUtensorMap tm;
  cuuint64_t dims[1] = {NW};
  cuuint32_t box[1] = {256}, estr[1] = {1};
  CALL(cuTensorMapEncodeTiled, &tm, CU_TENSOR_MAP_DATA_TYPE_UINT32, 1, (void *)(uintptr_t)t, dims, NULL, box, estr,
       CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_NONE,
       CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  /* The fake's encoding hides the address from a word scan. */
  for (size_t i = 0; i < CU_TENSOR_MAP_NUM_QWORDS; i++)
    EXPECT(tm.opaque[i] < t || tm.opaque[i] >= t + NW * 4, "word %zu of the descriptor is the address", i);
  uint32_t a = 10;
  uint64_t n = NW;
  void *args[] = {&tm, &a, &n};
  launch((CUfunction)k_tma, args);

  /* The same descriptor pointed at x (evicted when t came back), inside a
   * struct parameter. */
  CALL(cuTensorMapReplaceAddress, &tm, (void *)(uintptr_t)x);
  tma_args_t sargs;
  memset(&sargs, 0, sizeof sargs);
  sargs.n = NW;
  sargs.a = 5;
  sargs.tm = tm;
  void *args2[] = {&sargs};
  launch((CUfunction)k_struct, args2);

  /* A fresh descriptor of t (evicted again by x), in the packed `extra`
   * form: tm at 0, a at 128, n at 136. */
  CUtensorMap tm2;
  CALL(cuTensorMapEncodeTiled, &tm2, CU_TENSOR_MAP_DATA_TYPE_UINT32, 1, (void *)(uintptr_t)t, dims, NULL, box,
       estr, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_NONE,
       CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  _Alignas(64) unsigned char packed[144];
  uint32_t a3 = 3;
  memcpy(packed, &tm2, 128);
  memcpy(packed + 128, &a3, 4);
  memset(packed + 132, 0, 4);
  memcpy(packed + 136, &n, 8);
  size_t packed_size = sizeof packed;
  void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, packed, CU_LAUNCH_PARAM_BUFFER_SIZE, &packed_size,
                   CU_LAUNCH_PARAM_END};
  CALL(cuLaunchKernel, (CUfunction)k_tma, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, extra);
  CALL(cuStreamSynchronize, NULL);
  expect_all(t, 14, "tensor t");
  expect_all(x, 7, "tensor x");
  EXPECT(stat_of("fetches") >= 3, "fetches %ld, want 3 or more: the test did not page", stat_of("fetches"));
  EXPECT(stat_of("launches_unknown_layout") == 0, "launches_unknown_layout %ld", stat_of("launches_unknown_layout"));
  CALL(cuMemFree, t);
  CALL(cuMemFree, x);
  CALL(cuLibraryUnload, lib);
  printf(WHO " tensormap: ok (buffers reached only through descriptors were made resident)\n");
  return 0;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: " WHO " kernel|unknown|unload|wrappers|tensormap\n");
    return 2;
  }
  setup();
  if (strcmp(argv[1], "kernel") == 0) return case_kernel();
  if (strcmp(argv[1], "unknown") == 0) return case_unknown();
  if (strcmp(argv[1], "unload") == 0) return case_unload();
  if (strcmp(argv[1], "wrappers") == 0) return case_wrappers();
  if (strcmp(argv[1], "tensormap") == 0) return case_tensormap();
  fprintf(stderr, WHO ": unknown case %s\n", argv[1]);
  return 2;
}
