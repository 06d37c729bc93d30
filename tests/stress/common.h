/*
 * common.h - what the stress programs share: reaching the driver as
 * libcudart does, checking every call, sizes, checksums, and reading the
 * interposer's statistics.
 *
 * The programs link nothing but -ldl -lpthread: the driver is dlopen'ed
 * ("libcuda.so.1"), cuGetProcAddress_v2 is the one symbol taken with dlsym,
 * and every entry point is then looked up by base name for CUDA 13000, as
 * libcudart does, so a preloaded interposer sees the calls on the route
 * real programs use. The fake's test API (fakecuda_register_kernel,
 * fakecuda_device_peak) is taken with dlsym on the same handle; without it
 * the programs cannot make kernels and exit 77.
 *
 * Everything here is static: each program is one translation unit.
 */
#ifndef STRESS_COMMON_H
#define STRESS_COMMON_H

#include <cudaTypedefs.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cudart_route.h"

#define ST_MIB ((size_t)1 << 20)

/* X(base name, PFN type): the driver entry points the programs use. */
#define ST_DRIVER(X)                                         \
  X(cuGetErrorName, PFN_cuGetErrorName_v6000)                \
  X(cuInit, PFN_cuInit_v2000)                                \
  X(cuDeviceGet, PFN_cuDeviceGet_v2000)                      \
  X(cuDevicePrimaryCtxRetain, PFN_cuDevicePrimaryCtxRetain_v7000) \
  X(cuDevicePrimaryCtxRelease, PFN_cuDevicePrimaryCtxRelease_v11000) \
  X(cuCtxSetCurrent, PFN_cuCtxSetCurrent_v4000)              \
  X(cuMemAlloc, PFN_cuMemAlloc_v3020)                        \
  X(cuMemFree, PFN_cuMemFree_v3020)                          \
  X(cuMemAllocAsync, PFN_cuMemAllocAsync_v11020)             \
  X(cuMemFreeAsync, PFN_cuMemFreeAsync_v11020)               \
  X(cuMemcpyHtoD, PFN_cuMemcpyHtoD_v3020)                    \
  X(cuMemcpyDtoH, PFN_cuMemcpyDtoH_v3020)                    \
  X(cuMemcpyDtoD, PFN_cuMemcpyDtoD_v3020)                    \
  X(cuMemcpyHtoDAsync, PFN_cuMemcpyHtoDAsync_v3020)          \
  X(cuMemcpyDtoHAsync, PFN_cuMemcpyDtoHAsync_v3020)          \
  X(cuMemcpyDtoDAsync, PFN_cuMemcpyDtoDAsync_v3020)          \
  X(cuMemsetD8, PFN_cuMemsetD8_v3020)                        \
  X(cuMemsetD8Async, PFN_cuMemsetD8Async_v3020)              \
  X(cuLaunchKernel, PFN_cuLaunchKernel_v4000)                \
  X(cuStreamCreate, PFN_cuStreamCreate_v2000)                \
  X(cuStreamSynchronize, PFN_cuStreamSynchronize_v2000)      \
  X(cuStreamDestroy, PFN_cuStreamDestroy_v4000)              \
  X(cuStreamWaitEvent, PFN_cuStreamWaitEvent_v3020)          \
  X(cuEventCreate, PFN_cuEventCreate_v2000)                  \
  X(cuEventRecord, PFN_cuEventRecord_v2000)                  \
  X(cuEventDestroy, PFN_cuEventDestroy_v4000)

#define ST_DECL(name, type) static type p_##name;
ST_DRIVER(ST_DECL)
#undef ST_DECL

typedef cudart_register_fn st_register_fn;
typedef size_t (*st_size_fn)(void);

static const char *st_prog = "stress";
static st_register_fn st_register;
static st_size_fn st_device_peak;
static CUdevice st_dev;
static CUcontext st_ctx;

static void st_fail_call(const char *what, CUresult r, const char *file, int line) {
  const char *name = "?";
  if (p_cuGetErrorName) p_cuGetErrorName(r, &name);
  fprintf(stderr, "%s: %s failed: %s (%d) at %s:%d\n", st_prog, what, name, (int)r, file, line);
  /* Other threads and streams may still be running: leave without running
   * exit handlers under them. */
  fflush(NULL);
  _exit(1);
}

/* Every driver call goes through CK: any error is a test failure. */
#define CK(fn, ...)                                                 \
  do {                                                              \
    CUresult ck_r_ = p_##fn(__VA_ARGS__);                           \
    if (ck_r_ != CUDA_SUCCESS) st_fail_call(#fn, ck_r_, __FILE__, __LINE__); \
  } while (0)

/* Loads the driver, resolves ST_DRIVER, makes the primary context current
 * on the calling thread. Exits 1 on a driver error, 77 when libcuda.so.1
 * is not the fake. */
static void st_open_driver(void) {
  cudart_route_t route;
  cudart_route_open(&route, st_prog);
#define ST_LOOKUP(name, type) cudart_route_get(&route, st_prog, #name, (void **)&p_##name);
  ST_DRIVER(ST_LOOKUP)
#undef ST_LOOKUP
  st_register = route.register_kernel;
  st_device_peak = route.device_peak;
  if (!st_register || !st_device_peak) {
    printf("%s: SKIP: libcuda.so.1 is not the fake driver (no fakecuda_register_kernel)\n",
           st_prog);
    exit(77);
  }
  CK(cuInit, 0);
  CK(cuDeviceGet, &st_dev, 0);
  CK(cuDevicePrimaryCtxRetain, &st_ctx, st_dev);
  CK(cuCtxSetCurrent, st_ctx);
}

static CUfunction st_kernel(const char *name, fakecuda_kernel_fn fn, size_t n,
                            const size_t *sizes) {
  CUfunction f = st_register(name, fn, n, sizes);
  if (!f) {
    fprintf(stderr, "%s: registering kernel %s failed\n", st_prog, name);
    exit(1);
  }
  return f;
}

/* Launches f on stream s with a grid that would cover n elements. */
static void st_launch(CUfunction f, CUstream s, uint64_t n, void **args) {
  uint64_t blocks = (n + 255) / 256;
  if (blocks == 0) blocks = 1;
  if (blocks > 0x7fffffff) blocks = 0x7fffffff;
  CK(cuLaunchKernel, f, (unsigned)blocks, 1, 1, 256, 1, 1, 0, s, args, NULL);
}

/* ---- numbers ------------------------------------------------------------------ */

static inline uint32_t st_mix32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352dU;
  x ^= x >> 15;
  x *= 0x846ca68bU;
  x ^= x >> 16;
  return x;
}

/* splitmix64: the programs' only random source, seeded per thread. */
static inline uint64_t st_rand(uint64_t *state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

/* Uniform in [0, n); n > 0. */
static inline uint64_t st_below(uint64_t *state, uint64_t n) { return st_rand(state) % n; }

static inline void st_fill_random(uint64_t *state, void *p, size_t n) {
  unsigned char *b = p;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t v = st_rand(state);
    memcpy(b + i, &v, 8);
  }
  if (i < n) {
    uint64_t v = st_rand(state);
    memcpy(b + i, &v, n - i);
  }
}

/* A 64-bit checksum of n bytes: FNV-style multiply-xor over 8-byte words,
 * the tail folded in with its length. Position-dependent, so a chunk moved
 * to the wrong place changes it. */
static inline uint64_t st_checksum(const void *p, size_t n) {
  const unsigned char *b = p;
  uint64_t h = 0xcbf29ce484222325ULL ^ n;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    memcpy(&w, b + i, 8);
    h = (h ^ w) * 0x100000001b3ULL;
    h ^= h >> 29;
  }
  uint64_t t = 0;
  if (i < n) memcpy(&t, b + i, n - i);
  h = (h ^ t ^ (uint64_t)(n - i) << 56) * 0x100000001b3ULL;
  return h ^ (h >> 31);
}

/* Index of the first byte where a and b differ (n if equal). */
static inline size_t st_first_diff(const void *a, const void *b, size_t n) {
  const unsigned char *x = a, *y = b;
  size_t i = 0;
  while (i < n && x[i] == y[i]) i++;
  return i;
}

/* "16M", "1G", "4096": bytes. Returns 0 on a malformed value. */
static size_t st_parse_size(const char *s) {
  if (!s || !*s) return 0;
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 0);
  if (errno || end == s) return 0;
  switch (*end) {
    case 'k': case 'K': v <<= 10; end++; break;
    case 'm': case 'M': v <<= 20; end++; break;
    case 'g': case 'G': v <<= 30; end++; break;
    case 't': case 'T': v <<= 40; end++; break;
    default: break;
  }
  if (*end == 'i' || *end == 'B' || *end == 'b') end++;
  if (*end == 'B') end++;
  return *end ? 0 : (size_t)v;
}

/* The budget: --budget BYTES if given, else MT_MAX_VRAM, else dflt. */
static size_t st_budget(const char *arg, size_t dflt) {
  const char *src = arg ? arg : getenv("MT_MAX_VRAM");
  if (!src) return dflt;
  size_t b = st_parse_size(src);
  if (!b) {
    fprintf(stderr, "%s: bad budget \"%s\" (bytes, with an optional K/M/G suffix)\n", st_prog, src);
    exit(1);
  }
  return b;
}

/* ---- the interposer's statistics ---------------------------------------------- */

/* A private copy of mt_stats_json(), or NULL when libmtalloc.so is not
 * loaded (or does not export it yet). Caller frees. */
static char *st_stats_json(void) {
  const char *(*fn)(void) = (const char *(*)(void))dlsym(RTLD_DEFAULT, "mt_stats_json");
  if (!fn) return NULL;
  const char *j = fn();
  return j ? strdup(j) : NULL;
}

/* The integer value of top-level key in json; false when absent. */
static bool st_stat(const char *json, const char *key, unsigned long long *out) {
  char pat[64];
  snprintf(pat, sizeof pat, "\"%s\"", key);
  const char *p = strstr(json, pat);
  if (!p) return false;
  p += strlen(pat);
  while (*p == ' ' || *p == '\t') p++;
  if (*p != ':') return false;
  p++;
  while (*p == ' ' || *p == '\t') p++;
  char *end;
  errno = 0;
  unsigned long long v = strtoull(p, &end, 10);
  if (errno || end == p) return false;
  *out = v;
  return true;
}

/* Like st_stat, but a missing key is a failure: counts into *bad. */
static unsigned long long st_stat_req(const char *json, const char *key, int *bad) {
  unsigned long long v = 0;
  if (!st_stat(json, key, &v)) {
    fprintf(stderr, "%s: FAIL: mt_stats_json has no integer \"%s\": %s\n", st_prog, key, json);
    (*bad)++;
  }
  return v;
}

#endif
