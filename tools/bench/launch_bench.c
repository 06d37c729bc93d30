/*
 * launch_bench - the interposer's cost on the two hottest driver calls, with
 * a realistic number of live regions, measured on the fake CUDA driver.
 *
 *   LD_LIBRARY_PATH=build/tests/fakecuda build/tools/bench/launch_bench [REGIONS]
 *   (tools/bench/launch_bench.sh runs it plain and under LD_PRELOAD, alternating)
 *
 * Setup: REGIONS (default 100,000) small buffers of 4 KiB .. 64 KiB (the
 * interposer packs these into resident shared chunks) plus 16 launch buffers
 * of 4 MiB stay live throughout. The launch buffers are made resident by
 * warm-up launches of a kernel that writes one byte of each, so the timed
 * launches have nothing to fetch.
 *
 * Measured, each as the median over batches:
 *   launch_ns      one cuLaunchKernel of an empty kernel with 16 CUdeviceptr
 *                  parameters on one created stream. The timed region is the
 *                  host-side calls only; the stream is synchronised after each
 *                  batch, outside the timed region, so the queue never grows.
 *   alloc_free_ns  one cuMemAlloc_v2 + cuMemFree_v2 pair, 4 KiB and 8 MiB
 *                  separately.
 * The fake driver's own cost (queueing an op to a stream's worker thread, its
 * allocation table) is in every number; the interposer's overhead is the
 * difference between a plain and a preloaded run, which the script prints.
 *
 * The driver is reached as libcudart reaches it: dlopen("libcuda.so.1"),
 * dlsym of cuGetProcAddress_v2 only, every entry point by base name at CUDA
 * version 13000. The kernels are registered with the fake's
 * fakecuda_register_kernel, found with dlsym on the same handle.
 *
 * Output: human-readable header lines starting with '#', then one
 * "key value" line per result, which launch_bench.sh parses. Exit 0 on
 * success, 1 on any driver error, 2 on bad usage.
 */
#include <cudaTypedefs.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "cudart_route.h"

#define NPARAMS 16
#define LAUNCH_BUF_BYTES ((size_t)4 << 20)
#define WARMUP_LAUNCHES 2000
#define LAUNCH_BATCH 1000   /* launches per timed batch */
#define LAUNCH_BATCHES 201
#define PAIR_BATCH 32       /* alloc+free pairs per timed batch */
#define PAIR_BATCHES 41

static PFN_cuGetErrorName_v6000 p_cuGetErrorName;
static PFN_cuInit_v2000 p_cuInit;
static PFN_cuDeviceGet_v2000 p_cuDeviceGet;
static PFN_cuDevicePrimaryCtxRetain_v7000 p_cuDevicePrimaryCtxRetain;
static PFN_cuDevicePrimaryCtxRelease_v11000 p_cuDevicePrimaryCtxRelease;
static PFN_cuCtxSetCurrent_v4000 p_cuCtxSetCurrent;
static PFN_cuMemAlloc_v3020 p_cuMemAlloc;
static PFN_cuMemFree_v3020 p_cuMemFree;
static PFN_cuLaunchKernel_v4000 p_cuLaunchKernel;
static PFN_cuStreamCreate_v2000 p_cuStreamCreate;
static PFN_cuStreamSynchronize_v2000 p_cuStreamSynchronize;
static PFN_cuStreamDestroy_v4000 p_cuStreamDestroy;

static void fail(const char *what, CUresult r) {
  const char *name = "?";
  if (p_cuGetErrorName) p_cuGetErrorName(r, &name);
  fprintf(stderr, "launch_bench: %s failed: %s (%d)\n", what, name, (int)r);
  exit(1);
}

#define CALL(fn, ...)                      \
  do {                                     \
    CUresult r_ = p_##fn(__VA_ARGS__);     \
    if (r_ != CUDA_SUCCESS) fail(#fn, r_); \
  } while (0)

/* The timed kernel: does nothing, so only the launch path is measured. */
static void k_empty16(void **p, const fakecuda_launch_t *l) {
  (void)p;
  (void)l;
}

/* Warm-up kernel: writes the first byte of each buffer, so a buffer the
 * interposer failed to make resident faults here, before timing starts. */
static void k_touch16(void **p, const fakecuda_launch_t *l) {
  (void)l;
  for (int i = 0; i < NPARAMS; i++) **(volatile unsigned char **)p[i] = (unsigned char)i;
}

static cudart_route_t route;

static void bind_driver(void) {
  cudart_route_open(&route, "launch_bench");
  struct { const char *name; void **slot; } table[] = {
#define E(n) {#n, (void **)&p_##n}
      E(cuGetErrorName), E(cuInit), E(cuDeviceGet), E(cuDevicePrimaryCtxRetain),
      E(cuDevicePrimaryCtxRelease), E(cuCtxSetCurrent), E(cuMemAlloc), E(cuMemFree),
      E(cuLaunchKernel), E(cuStreamCreate), E(cuStreamSynchronize), E(cuStreamDestroy),
#undef E
  };
  for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
    cudart_route_get(&route, "launch_bench", table[i].name, table[i].slot);
}

static CUfunction register_kernel(const char *name, fakecuda_kernel_fn fn) {
  cudart_register_fn reg = route.register_kernel;
  if (!reg) {
    fprintf(stderr, "launch_bench: libcuda.so.1 is not the fake (no fakecuda_register_kernel); "
                    "run with LD_LIBRARY_PATH=build/tests/fakecuda\n");
    exit(1);
  }
  size_t sizes[NPARAMS];
  for (int i = 0; i < NPARAMS; i++) sizes[i] = sizeof(CUdeviceptr);
  CUfunction f = reg(name, fn, NPARAMS, sizes);
  if (!f) {
    fprintf(stderr, "launch_bench: registering kernel %s failed\n", name);
    exit(1);
  }
  return f;
}

/* Median ns per cuMemAlloc_v2 + cuMemFree_v2 pair of `bytes`. */
static double alloc_free_ns(size_t bytes) {
  double per[PAIR_BATCHES];
  CUdeviceptr d;
  for (int i = 0; i < PAIR_BATCH; i++) { /* warm-up */
    CALL(cuMemAlloc, &d, bytes);
    CALL(cuMemFree, d);
  }
  for (int b = 0; b < PAIR_BATCHES; b++) {
    uint64_t t0 = bench_now_ns();
    for (int i = 0; i < PAIR_BATCH; i++) {
      CALL(cuMemAlloc, &d, bytes);
      CALL(cuMemFree, d);
    }
    per[b] = (double)(bench_now_ns() - t0) / PAIR_BATCH;
  }
  return bench_median(per, PAIR_BATCHES);
}

int main(int argc, char **argv) {
  char *end = NULL;
  size_t nregions = argc > 1 ? strtoul(argv[1], &end, 10) : 100000;
  if (argc > 2 || (argc > 1 && (*end || nregions == 0))) {
    fprintf(stderr, "usage: launch_bench [REGIONS]   (default 100000)\n");
    return 2;
  }
  /* 100,000 regions of 34 KiB on average are 3.3 GiB: more than the fake's
   * default 1 GiB device. Its memory is untouched MAP_NORESERVE, so a larger
   * fake device costs no RAM. Read by the fake at cuInit. */
  setenv("FAKECUDA_MEM", "16G", 0);
  bind_driver();
  CUfunction empty16 = register_kernel("launch_bench_empty16", k_empty16);
  CUfunction touch16 = register_kernel("launch_bench_touch16", k_touch16);

  CUdevice dev;
  CUcontext ctx;
  CUstream s;
  CALL(cuInit, 0);
  CALL(cuDeviceGet, &dev, 0);
  CALL(cuDevicePrimaryCtxRetain, &ctx, dev);
  CALL(cuCtxSetCurrent, ctx);
  CALL(cuStreamCreate, &s, CU_STREAM_NON_BLOCKING);

  /* the live regions, sizes from a fixed seed so every run is the same */
  CUdeviceptr *small = malloc(nregions * sizeof *small);
  if (!small) return 1;
  uint64_t seed = 0x9E3779B97F4A7C15ULL, small_bytes = 0;
  uint64_t t0 = bench_now_ns();
  for (size_t i = 0; i < nregions; i++) {
    size_t sz = (size_t)4096 * (1 + bench_rand(&seed) % 16); /* 4 KiB .. 64 KiB */
    CALL(cuMemAlloc, &small[i], sz);
    small_bytes += sz;
  }
  double setup_s = (double)(bench_now_ns() - t0) / 1e9;
  CUdeviceptr buf[NPARAMS];
  void *args[NPARAMS];
  for (int i = 0; i < NPARAMS; i++) {
    CALL(cuMemAlloc, &buf[i], LAUNCH_BUF_BYTES);
    args[i] = &buf[i];
  }

  printf("# launch_bench: %zu live regions (%.1f MiB, 4..64 KiB each) + %d launch buffers of "
         "%zu MiB; allocating the regions took %.2f s\n",
         nregions, (double)small_bytes / (1 << 20), NPARAMS, LAUNCH_BUF_BYTES >> 20, setup_s);
  printf("# launch: empty kernel, %d CUdeviceptr params, one stream; timed: host-side "
         "cuLaunchKernel calls only, %d per batch, median of %d batches; the stream is "
         "synchronised after each batch, outside the timed region\n",
         NPARAMS, LAUNCH_BATCH, LAUNCH_BATCHES);

  for (int i = 0; i < WARMUP_LAUNCHES; i++) {
    CALL(cuLaunchKernel, i % 2 ? empty16 : touch16, 1, 1, 1, 32, 1, 1, 0, s, args, NULL);
    if (i % LAUNCH_BATCH == LAUNCH_BATCH - 1) CALL(cuStreamSynchronize, s);
  }
  CALL(cuStreamSynchronize, s);

  double per_launch[LAUNCH_BATCHES];
  for (int b = 0; b < LAUNCH_BATCHES; b++) {
    t0 = bench_now_ns();
    for (int i = 0; i < LAUNCH_BATCH; i++)
      CALL(cuLaunchKernel, empty16, 1, 1, 1, 32, 1, 1, 0, s, args, NULL);
    per_launch[b] = (double)(bench_now_ns() - t0) / LAUNCH_BATCH;
    CALL(cuStreamSynchronize, s);
  }
  double launch_ns = bench_median(per_launch, LAUNCH_BATCHES);
  printf("launch_ns %.1f\n", launch_ns);
  fflush(stdout);

  printf("# alloc_free: cuMemAlloc_v2 + cuMemFree_v2 pairs, %d per batch, median of %d "
         "batches, with the regions above live\n", PAIR_BATCH, PAIR_BATCHES);
  printf("alloc_free_4096_ns %.1f\n", alloc_free_ns(4096));
  printf("alloc_free_8388608_ns %.1f\n", alloc_free_ns((size_t)8 << 20));
  fflush(stdout);

  for (int i = 0; i < NPARAMS; i++) CALL(cuMemFree, buf[i]);
  for (size_t i = 0; i < nregions; i++) CALL(cuMemFree, small[i]);
  free(small);
  CALL(cuStreamDestroy, s);
  CALL(cuDevicePrimaryCtxRelease, dev);
  return 0;
}
