/*
 * Description: reaches the CUDA driver exactly as libcudart does -- no link
 * against libcuda: dlopen("libcuda.so.1"), dlsym of cuGetProcAddress_v2
 * only, then every entry point by base name + CUDA version through
 * cuGetProcAddress (itself looked up through itself first). It runs a
 * `scale(float *x, float a, int n)` kernel on the legacy stream and on a
 * created stream (with stream-ordered cuMemAllocAsync/cuMemFreeAsync),
 * checks the values, and prints "cudart_like: ok allocs=N launches=M".
 * Any error or wrong value: a message and exit 1. Run under LD_PRELOAD of
 * the interposer, it proves the interposer sees calls made this way.
 */
#include <cudaTypedefs.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include "cudart_route.h"

#define N 1000

static PFN_cuInit_v2000 p_cuInit;
static PFN_cuDeviceGet_v2000 p_cuDeviceGet;
static PFN_cuDevicePrimaryCtxRetain_v7000 p_cuDevicePrimaryCtxRetain;
static PFN_cuDevicePrimaryCtxRelease_v11000 p_cuDevicePrimaryCtxRelease;
static PFN_cuCtxSetCurrent_v4000 p_cuCtxSetCurrent;
static PFN_cuMemAlloc_v3020 p_cuMemAlloc;
static PFN_cuMemFree_v3020 p_cuMemFree;
static PFN_cuMemcpyHtoD_v3020 p_cuMemcpyHtoD;
static PFN_cuMemcpyDtoH_v3020 p_cuMemcpyDtoH;
static PFN_cuMemcpyHtoDAsync_v3020 p_cuMemcpyHtoDAsync;
static PFN_cuMemcpyDtoHAsync_v3020 p_cuMemcpyDtoHAsync;
static PFN_cuMemAllocAsync_v11020 p_cuMemAllocAsync;
static PFN_cuMemFreeAsync_v11020 p_cuMemFreeAsync;
static PFN_cuLaunchKernel_v4000 p_cuLaunchKernel;
static PFN_cuStreamCreate_v2000 p_cuStreamCreate;
static PFN_cuStreamSynchronize_v2000 p_cuStreamSynchronize;
static PFN_cuStreamDestroy_v4000 p_cuStreamDestroy;
static PFN_cuGetErrorName_v6000 p_cuGetErrorName;

static void fail(const char *what, CUresult r) {
  const char *name = "?";
  if (p_cuGetErrorName) p_cuGetErrorName(r, &name);
  fprintf(stderr, "cudart_like: %s failed: %s (%d)\n", what, name, (int)r);
  exit(1);
}

#define CALL(fn, ...)                               \
  do {                                              \
    CUresult r_ = p_##fn(__VA_ARGS__);              \
    if (r_ != CUDA_SUCCESS) fail(#fn, r_);          \
  } while (0)

static void k_scale(void **p, const fakecuda_launch_t *l) {
  (void)l;
  float *x = *(float **)p[0];
  float a = *(float *)p[1];
  int n = *(int *)p[2];
  for (int i = 0; i < n; i++) x[i] *= a;
}

static int check(const float *got, float factor, const char *where) {
  for (int i = 0; i < N; i++) {
    float want = (float)i * factor;
    if (got[i] != want) {
      fprintf(stderr, "cudart_like: %s: x[%d] = %g, want %g\n", where, i, (double)got[i],
              (double)want);
      return 1;
    }
  }
  return 0;
}

int main(void) {
  cudart_route_t route;
  cudart_route_open(&route, "cudart_like");
  struct { const char *name; void **slot; } table[] = {
#define E(n) {#n, (void **)&p_##n}
      E(cuGetErrorName), E(cuInit), E(cuDeviceGet), E(cuDevicePrimaryCtxRetain),
      E(cuDevicePrimaryCtxRelease), E(cuCtxSetCurrent), E(cuMemAlloc), E(cuMemFree),
      E(cuMemcpyHtoD), E(cuMemcpyDtoH), E(cuMemcpyHtoDAsync), E(cuMemcpyDtoHAsync),
      E(cuMemAllocAsync), E(cuMemFreeAsync), E(cuLaunchKernel), E(cuStreamCreate),
      E(cuStreamSynchronize), E(cuStreamDestroy),
#undef E
  };
  for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
    cudart_route_get(&route, "cudart_like", table[i].name, table[i].slot);

  cudart_register_fn reg = route.register_kernel;
  if (!reg) {
    fprintf(stderr, "cudart_like: libcuda.so.1 is not the fake (no fakecuda_register_kernel)\n");
    return 1;
  }
  size_t sizes[] = {sizeof(float *), sizeof(float), sizeof(int)};
  CUfunction scale = reg("scale", k_scale, 3, sizes);
  if (!scale) {
    fprintf(stderr, "cudart_like: kernel registration failed\n");
    return 1;
  }

  CUdevice dev;
  CUcontext ctx;
  CALL(cuInit, 0);
  CALL(cuDeviceGet, &dev, 0);
  CALL(cuDevicePrimaryCtxRetain, &ctx, dev);
  CALL(cuCtxSetCurrent, ctx);

  static float host[N];
  int allocs = 0, launches = 0, n = N;
  for (int i = 0; i < N; i++) host[i] = (float)i;

  /* legacy default stream, synchronous copies */
  CUdeviceptr d1;
  CALL(cuMemAlloc, &d1, sizeof host);
  allocs++;
  CALL(cuMemcpyHtoD, d1, host, sizeof host);
  float a = 2.0f;
  void *args1[] = {&d1, &a, &n};
  CALL(cuLaunchKernel, scale, (N + 255) / 256, 1, 1, 256, 1, 1, 0, NULL, args1, NULL);
  launches++;
  CALL(cuMemcpyDtoH, host, d1, sizeof host);
  if (check(host, 2.0f, "legacy stream")) return 1;

  /* a created stream, stream-ordered allocation, async copies */
  CUstream s;
  CALL(cuStreamCreate, &s, CU_STREAM_DEFAULT);
  CUdeviceptr d2;
  CALL(cuMemAllocAsync, &d2, sizeof host, s);
  allocs++;
  CALL(cuMemcpyHtoDAsync, d2, host, sizeof host, s);
  float b = 3.0f;
  void *args2[] = {&d2, &b, &n};
  CALL(cuLaunchKernel, scale, (N + 255) / 256, 1, 1, 256, 1, 1, 0, s, args2, NULL);
  launches++;
  b = -1.0f; /* parameters were copied at launch */
  CALL(cuMemcpyDtoHAsync, host, d2, sizeof host, s);
  CALL(cuMemFreeAsync, d2, s);
  CALL(cuStreamSynchronize, s);
  if (check(host, 6.0f, "created stream")) return 1;

  CALL(cuStreamDestroy, s);
  CALL(cuMemFree, d1);
  CALL(cuDevicePrimaryCtxRelease, dev);
  printf("cudart_like: ok allocs=%d launches=%d\n", allocs, launches);
  return 0;
}
