/*
 * fake_core.c - initialisation, the one device and its primary context,
 * error strings, device-memory accounting and the fakecuda_* counters.
 *
 * Concept: the fake has exactly one device (ordinal 0) with one primary
 * context (fc_primary_ctx). A thread has a current context only after
 * cuCtxSetCurrent / cuCtxPushCurrent, as with the real driver, and the calls
 * that need one (allocation, copies, launches, stream creation) answer
 * CUDA_ERROR_INVALID_CONTEXT without it: a helper thread that forgot to bind
 * the context fails here as it would on a GPU.
 *
 * Invariants: g_fc.used <= g_fc.capacity; g_fc.peak >= g_fc.used; nothing
 * but cuInit, cuDriverGetVersion, cuGetErrorName/String, cuGetProcAddress and
 * the fakecuda_* test API works before cuInit.
 *
 * Threading: all state is under g_fc.mu (see fake_internal.h). The current
 * context stack is thread-local.
 *
 * Fork: as with the real driver, a child forked after cuInit cannot use
 * CUDA -- every call answers CUDA_ERROR_NOT_INITIALIZED, cuInit included --
 * and the child's exit does not wait for the parent's stream workers (they
 * do not exist in the child). A child forked before cuInit may initialise
 * the fake normally.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fake_internal.h"

/* cuda.h renames these to _v2; the driver also exports the old names, with
 * the same signatures. */
#undef cuCtxPushCurrent
#undef cuCtxPopCurrent
#undef cuDevicePrimaryCtxRelease
CUresult cuCtxPushCurrent(CUcontext ctx);
CUresult cuCtxPopCurrent(CUcontext *pctx);
CUresult cuDevicePrimaryCtxRelease(CUdevice dev);

fc_global_t g_fc = {
    .mu = PTHREAD_MUTEX_INITIALIZER,
    .done_cv = PTHREAD_COND_INITIALIZER,
    .capacity = (size_t)1 << 30,
};

struct CUctx_st {
  int unused;
};
static struct CUctx_st primary_ctx_storage;
struct CUctx_st *const fc_primary_ctx = &primary_ctx_storage;

#define FC_CTX_STACK 16
static __thread CUcontext tls_ctx_stack[FC_CTX_STACK]; /* [0] is current */
static __thread int tls_ctx_depth;                     /* entries in use */

void fc_lock(void) { pthread_mutex_lock(&g_fc.mu); }
void fc_unlock(void) { pthread_mutex_unlock(&g_fc.mu); }

CUresult fc_check_init(void) {
  /* initialized only goes false -> true, under mu; a racy read that sees
   * false just reports NOT_INITIALIZED, as a call racing cuInit may.
   * deinitialized only goes false -> true, at teardown. */
  if (__atomic_load_n(&g_fc.deinitialized, __ATOMIC_ACQUIRE)) return CUDA_ERROR_DEINITIALIZED;
  return __atomic_load_n(&g_fc.initialized, __ATOMIC_ACQUIRE) ? CUDA_SUCCESS
                                                              : CUDA_ERROR_NOT_INITIALIZED;
}

static CUcontext current_ctx(void) {
  return tls_ctx_depth > 0 ? tls_ctx_stack[tls_ctx_depth - 1] : NULL;
}

CUresult fc_check_ctx(void) {
  CUresult r = fc_check_init();
  if (r != CUDA_SUCCESS) return r;
  return current_ctx() == fc_primary_ctx ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

void fc_sleep_ns(uint64_t ns) {
  struct timespec ts = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

bool fc_parse_size(const char *s, double *out) {
  if (!s || !*s) return false;
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || end == s || v < 0) return false;
  double mul = 1;
  switch (*end) {
    case 'k': case 'K': mul = 1024.0; end++; break;
    case 'm': case 'M': mul = 1024.0 * 1024; end++; break;
    case 'g': case 'G': mul = 1024.0 * 1024 * 1024; end++; break;
    case 't': case 'T': mul = 1024.0 * 1024 * 1024 * 1024; end++; break;
    default: break;
  }
  if (*end == 'i' || *end == 'B') end++; /* tolerate "Gi", "GB" */
  if (*end == 'B') end++;
  if (*end) return false;
  *out = v * mul;
  return true;
}

/* Reads the FAKECUDA_* variables once, at the first cuInit. */
static void read_env(void) {
  double v;
  const char *s = getenv("FAKECUDA_MEM");
  if (s) {
    if (fc_parse_size(s, &v) && v >= 1)
      g_fc.capacity = (size_t)v;
    else
      fprintf(stderr, "fakecuda: bad FAKECUDA_MEM=\"%s\" (bytes, K/M/G suffix), using 1G\n", s);
  }
  s = getenv("FAKECUDA_JITTER_US");
  if (s) g_fc.jitter_us = (unsigned)strtoul(s, NULL, 10);
  s = getenv("FAKECUDA_BW");
  if (s) {
    if (fc_parse_size(s, &v))
      g_fc.bw = v;
    else
      fprintf(stderr, "fakecuda: bad FAKECUDA_BW=\"%s\" (bytes/s, K/M/G suffix), ignored\n", s);
  }
  s = getenv("FAKECUDA_REPORT");
  g_fc.report = s && *s && strcmp(s, "0") != 0;
  s = getenv("FAKECUDA_KERNEL_AS_FUNC");
  if (s && strcmp(s, "reject") == 0)
    g_fc.kernel_as_func_reject = true;
  else if (s && *s && strcmp(s, "accept") != 0)
    fprintf(stderr, "fakecuda: bad FAKECUDA_KERNEL_AS_FUNC=\"%s\" (accept or reject), using accept\n", s);
  s = getenv("FAKECUDA_PARAMINFO");
  if (s && strcmp(s, "unsupported") == 0)
    g_fc.paraminfo_unsupported = true;
  else if (s && *s && strcmp(s, "ok") != 0)
    fprintf(stderr, "fakecuda: bad FAKECUDA_PARAMINFO=\"%s\" (ok or unsupported), using ok\n", s);
}

/* ---- pointer set -------------------------------------------------------- */

static size_t set_hash(uintptr_t p, size_t cap) {
  uint64_t h = (uint64_t)p * 0x9E3779B97F4A7C15ull;
  return (size_t)(h >> 17) & (cap - 1);
}

static bool set_grow(fc_set_t *s) {
  size_t ncap = s->cap ? s->cap * 2 : 64;
  uintptr_t *ns = calloc(ncap, sizeof *ns);
  if (!ns) return false;
  for (size_t i = 0; i < s->cap; i++) {
    uintptr_t p = s->slots[i];
    if (!p) continue;
    size_t j = set_hash(p, ncap);
    while (ns[j]) j = (j + 1) & (ncap - 1);
    ns[j] = p;
  }
  free(s->slots);
  s->slots = ns;
  s->cap = ncap;
  return true;
}

bool fc_set_add(fc_set_t *s, const void *p) {
  if ((s->count + 1) * 2 > s->cap && !set_grow(s)) return false;
  uintptr_t k = (uintptr_t)p;
  size_t j = set_hash(k, s->cap);
  while (s->slots[j] && s->slots[j] != k) j = (j + 1) & (s->cap - 1);
  if (!s->slots[j]) {
    s->slots[j] = k;
    s->count++;
  }
  return true;
}

bool fc_set_has(const fc_set_t *s, const void *p) {
  uintptr_t k = (uintptr_t)p;
  if (!s->cap || !k) return false;
  for (size_t j = set_hash(k, s->cap); s->slots[j]; j = (j + 1) & (s->cap - 1))
    if (s->slots[j] == k) return true;
  return false;
}

void fc_set_del(fc_set_t *s, const void *p) {
  uintptr_t k = (uintptr_t)p;
  if (!s->cap || !k) return;
  size_t j = set_hash(k, s->cap);
  while (s->slots[j] && s->slots[j] != k) j = (j + 1) & (s->cap - 1);
  if (!s->slots[j]) return;
  /* backward-shift deletion keeps probe chains intact without tombstones */
  size_t hole = j;
  for (size_t i = (j + 1) & (s->cap - 1); s->slots[i]; i = (i + 1) & (s->cap - 1)) {
    size_t home = set_hash(s->slots[i], s->cap);
    bool movable = hole <= i ? (home <= hole || home > i) : (home <= hole && home > i);
    if (movable) {
      s->slots[hole] = s->slots[i];
      hole = i;
    }
  }
  s->slots[hole] = 0;
  s->count--;
}

/* ---- accounting ---------------------------------------------------------- */

bool fc_device_charge(size_t bytes) {
  if (bytes > g_fc.capacity - g_fc.used) return false;
  g_fc.used += bytes;
  if (g_fc.used > g_fc.peak) g_fc.peak = g_fc.used;
  return true;
}

void fc_device_uncharge(size_t bytes) { g_fc.used -= bytes; }

FC_API size_t fakecuda_device_used(void) {
  fc_lock();
  size_t v = g_fc.used;
  fc_unlock();
  return v;
}

FC_API size_t fakecuda_device_peak(void) {
  fc_lock();
  size_t v = g_fc.peak;
  fc_unlock();
  return v;
}

FC_API void fakecuda_reset_peak(void) {
  fc_lock();
  g_fc.peak = g_fc.used;
  fc_unlock();
}

FC_API unsigned long long fakecuda_launch_count(void) {
  fc_lock();
  unsigned long long v = g_fc.launches;
  fc_unlock();
  return v;
}

/* ---- init, lifetime, fork ------------------------------------------------ */

static void atfork_prepare(void) { fc_lock(); }
static void atfork_parent(void) { fc_unlock(); }
static void atfork_child(void) {
  /* Only the forking thread survives: the mutex is ours (re-create it), the
   * condition variables have no waiters left, the workers are gone. */
  pthread_mutex_init(&g_fc.mu, NULL);
  pthread_cond_init(&g_fc.done_cv, NULL);
  fc_streams_atfork_child();
  g_fc.forked = true;
  __atomic_store_n(&g_fc.initialized, false, __ATOMIC_RELEASE);
}

FC_API CUresult cuInit(unsigned int flags) {
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  CUresult r = CUDA_SUCCESS;
  fc_lock();
  if (g_fc.forked) {
    r = CUDA_ERROR_NOT_INITIALIZED; /* "cannot re-initialize CUDA in forked subprocess" */
  } else if (!g_fc.initialized) {
    read_env();
    r = fc_streams_init();
    if (r == CUDA_SUCCESS) {
      fc_fault_install();
      static bool atfork_done;
      if (!atfork_done) pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
      atfork_done = true;
      __atomic_store_n(&g_fc.initialized, true, __ATOMIC_RELEASE);
    }
  }
  fc_unlock();
  return r;
}

/* The driver's own teardown at exit: workers joined, and every later call
 * (a free from another library's destructor) answers CUDA_ERROR_DEINITIALIZED,
 * as the real driver does once it is shutting down. */
static void teardown(void) {
  if (__atomic_exchange_n(&g_fc.deinitialized, true, __ATOMIC_ACQ_REL)) return;
  fc_streams_shutdown();
}

FC_API void fakecuda_deinit(void) {
  if (g_fc.initialized) teardown();
}

__attribute__((destructor)) static void fc_fini(void) {
  if (!g_fc.initialized) return;
  teardown();
  if (g_fc.report) {
    char line[96];
    int n = snprintf(line, sizeof line, "fakecuda: peak_device_bytes %zu\n", g_fc.peak);
    if (n > 0 && write(2, line, (size_t)n) < 0) {
    }
    /* calls a real driver may have made wait for a copy (fake_calls.c) */
    n = snprintf(line, sizeof line, "fakecuda: busy cuMemUnmap %llu cuMemSetAccess %llu\n",
                 fakecuda_call_count("cuMemUnmap_busy"), fakecuda_call_count("cuMemSetAccess_busy"));
    if (n > 0 && write(2, line, (size_t)n) < 0) {
    }
  }
}

FC_API CUresult cuDriverGetVersion(int *version) {
  if (!version) return CUDA_ERROR_INVALID_VALUE;
  *version = FC_DRIVER_VERSION;
  return CUDA_SUCCESS;
}

/* ---- device -------------------------------------------------------------- */

FC_API CUresult cuDeviceGet(CUdevice *dev, int ordinal) {
  CUresult r = fc_check_init();
  if (r) return r;
  if (!dev) return CUDA_ERROR_INVALID_VALUE;
  if (ordinal != 0) return CUDA_ERROR_INVALID_DEVICE;
  *dev = 0;
  return CUDA_SUCCESS;
}

FC_API CUresult cuDeviceGetCount(int *count) {
  CUresult r = fc_check_init();
  if (r) return r;
  if (!count) return CUDA_ERROR_INVALID_VALUE;
  *count = 1;
  return CUDA_SUCCESS;
}

FC_API CUresult cuDeviceGetName(char *name, int len, CUdevice dev) {
  CUresult r = fc_check_init();
  if (r) return r;
  if (dev != 0) return CUDA_ERROR_INVALID_DEVICE;
  if (!name || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  snprintf(name, (size_t)len, "%s", "Fake CUDA Device");
  return CUDA_SUCCESS;
}

FC_API CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev) {
  CUresult r = fc_check_init();
  if (r) return r;
  if (dev != 0) return CUDA_ERROR_INVALID_DEVICE;
  if (!bytes) return CUDA_ERROR_INVALID_VALUE;
  *bytes = g_fc.capacity;
  return CUDA_SUCCESS;
}

/* Attribute values of an H100-like device (compute capability 9.0). */
#define FC_DEVICE_ATTRS(X)                                      \
  X(MAX_THREADS_PER_BLOCK, 1024)                                \
  X(MAX_BLOCK_DIM_X, 1024)                                      \
  X(MAX_BLOCK_DIM_Y, 1024)                                      \
  X(MAX_BLOCK_DIM_Z, 64)                                        \
  X(MAX_GRID_DIM_X, 2147483647)                                 \
  X(MAX_GRID_DIM_Y, 65535)                                      \
  X(MAX_GRID_DIM_Z, 65535)                                      \
  X(MAX_SHARED_MEMORY_PER_BLOCK, 49152)                         \
  X(MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, 232448)                  \
  X(MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, 233472)               \
  X(TOTAL_CONSTANT_MEMORY, 65536)                               \
  X(WARP_SIZE, 32)                                              \
  X(MAX_PITCH, 2147483647)                                      \
  X(MAX_REGISTERS_PER_BLOCK, 65536)                             \
  X(MAX_REGISTERS_PER_MULTIPROCESSOR, 65536)                    \
  X(CLOCK_RATE, 1755000)                                        \
  X(MEMORY_CLOCK_RATE, 2619000)                                 \
  X(GLOBAL_MEMORY_BUS_WIDTH, 5120)                              \
  X(L2_CACHE_SIZE, 52428800)                                    \
  X(TEXTURE_ALIGNMENT, 512)                                     \
  X(TEXTURE_PITCH_ALIGNMENT, 32)                                \
  X(GPU_OVERLAP, 1)                                             \
  X(ASYNC_ENGINE_COUNT, 2)                                      \
  X(MULTIPROCESSOR_COUNT, 132)                                  \
  X(MAX_THREADS_PER_MULTIPROCESSOR, 2048)                       \
  X(MAX_BLOCKS_PER_MULTIPROCESSOR, 32)                          \
  X(CAN_MAP_HOST_MEMORY, 1)                                     \
  X(CONCURRENT_KERNELS, 1)                                      \
  X(UNIFIED_ADDRESSING, 1)                                      \
  X(COMPUTE_CAPABILITY_MAJOR, 9)                                \
  X(COMPUTE_CAPABILITY_MINOR, 0)                                \
  X(STREAM_PRIORITIES_SUPPORTED, 1)                             \
  X(GLOBAL_L1_CACHE_SUPPORTED, 1)                               \
  X(LOCAL_L1_CACHE_SUPPORTED, 1)                                \
  X(MANAGED_MEMORY, 1)                                          \
  X(CONCURRENT_MANAGED_ACCESS, 1)                               \
  X(COMPUTE_PREEMPTION_SUPPORTED, 1)                            \
  X(COOPERATIVE_LAUNCH, 1)                                      \
  X(HOST_REGISTER_SUPPORTED, 1)                                 \
  X(VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 1)                     \
  X(HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, 1)             \
  X(MEMORY_POOLS_SUPPORTED, 1)                                  \
  X(MEMPOOL_SUPPORTED_HANDLE_TYPES, 1)                          \
  X(READ_ONLY_HOST_REGISTER_SUPPORTED, 1)                       \
  X(CAN_USE_64_BIT_STREAM_MEM_OPS, 1)                           \
  X(CLUSTER_LAUNCH, 1)                                          \
  X(DEFERRED_MAPPING_CUDA_ARRAY_SUPPORTED, 1)                   \
  X(PCI_BUS_ID, 1)                                              \
  X(NUMA_CONFIG, 0)                                             \
  X(NUMA_ID, -1)                                                \
  X(HOST_NUMA_ID, 0)                                            \
  X(HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 1)           \
  X(HOST_NUMA_MEMORY_POOLS_SUPPORTED, 1)                        \
  X(HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 1)                \
  X(HOST_MEMORY_POOLS_SUPPORTED, 1)                             \
  X(MEM_SYNC_DOMAIN_COUNT, 4)

FC_API CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev) {
  CUresult r = fc_check_init();
  if (r) return r;
  if (dev != 0) return CUDA_ERROR_INVALID_DEVICE;
  if (!pi || attrib <= 0 || attrib >= CU_DEVICE_ATTRIBUTE_MAX) return CUDA_ERROR_INVALID_VALUE;
  switch (attrib) {
#define FC_ATTR_CASE(name, value) \
  case CU_DEVICE_ATTRIBUTE_##name: *pi = (value); break;
    FC_DEVICE_ATTRS(FC_ATTR_CASE)
#undef FC_ATTR_CASE
    default: *pi = 0; break;
  }
  return CUDA_SUCCESS;
}

/* ---- contexts ------------------------------------------------------------ */

FC_API CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev) {
  CUresult r = fc_check_init();
  if (r) return r;
  if (dev != 0) return CUDA_ERROR_INVALID_DEVICE;
  if (!pctx) return CUDA_ERROR_INVALID_VALUE;
  fc_lock();
  g_fc.primary_refs++;
  fc_unlock();
  *pctx = fc_primary_ctx;
  return CUDA_SUCCESS;
}

FC_API CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  CUresult r = fc_check_init();
  if (r) return r;
  if (dev != 0) return CUDA_ERROR_INVALID_DEVICE;
  fc_lock();
  if (g_fc.primary_refs > 0) {
    g_fc.primary_refs--;
  } else {
    r = CUDA_ERROR_INVALID_CONTEXT;
  }
  fc_unlock();
  return r;
}

FC_API CUresult cuDevicePrimaryCtxRelease(CUdevice dev) {
  return cuDevicePrimaryCtxRelease_v2(dev);
}

FC_API CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active) {
  CUresult r = fc_check_init();
  if (r) return r;
  if (dev != 0) return CUDA_ERROR_INVALID_DEVICE;
  if (!flags || !active) return CUDA_ERROR_INVALID_VALUE;
  fc_lock();
  *flags = 0;
  *active = g_fc.primary_refs > 0;
  fc_unlock();
  return CUDA_SUCCESS;
}

FC_API CUresult cuCtxGetCurrent(CUcontext *pctx) {
  CUresult r = fc_check_init();
  if (r) return r;
  if (!pctx) return CUDA_ERROR_INVALID_VALUE;
  *pctx = current_ctx();
  return CUDA_SUCCESS;
}

FC_API CUresult cuCtxSetCurrent(CUcontext ctx) {
  CUresult r = fc_check_init();
  if (r) return r;
  if (ctx && ctx != fc_primary_ctx) return CUDA_ERROR_INVALID_CONTEXT;
  if (!ctx) {
    if (tls_ctx_depth > 0) tls_ctx_depth--;
    return CUDA_SUCCESS;
  }
  if (tls_ctx_depth == 0) tls_ctx_depth = 1;
  tls_ctx_stack[tls_ctx_depth - 1] = ctx;
  return CUDA_SUCCESS;
}

FC_API CUresult cuCtxPushCurrent_v2(CUcontext ctx) {
  CUresult r = fc_check_init();
  if (r) return r;
  if (ctx != fc_primary_ctx) return CUDA_ERROR_INVALID_CONTEXT;
  if (tls_ctx_depth >= FC_CTX_STACK) return CUDA_ERROR_INVALID_VALUE;
  tls_ctx_stack[tls_ctx_depth++] = ctx;
  return CUDA_SUCCESS;
}

FC_API CUresult cuCtxPopCurrent_v2(CUcontext *pctx) {
  CUresult r = fc_check_init();
  if (r) return r;
  if (tls_ctx_depth == 0) return CUDA_ERROR_INVALID_CONTEXT;
  CUcontext c = tls_ctx_stack[--tls_ctx_depth];
  if (pctx) *pctx = c;
  return CUDA_SUCCESS;
}

FC_API CUresult cuCtxPushCurrent(CUcontext ctx) { return cuCtxPushCurrent_v2(ctx); }
FC_API CUresult cuCtxPopCurrent(CUcontext *pctx) { return cuCtxPopCurrent_v2(pctx); }

FC_API CUresult cuCtxGetDevice(CUdevice *device) {
  CUresult r = fc_check_ctx();
  if (r) return r;
  if (!device) return CUDA_ERROR_INVALID_VALUE;
  *device = 0;
  return CUDA_SUCCESS;
}

FC_API CUresult cuCtxGetDevice_v2(CUdevice *device, CUcontext ctx) {
  if (!ctx) return cuCtxGetDevice(device);
  CUresult r = fc_check_init();
  if (r) return r;
  if (ctx != fc_primary_ctx) return CUDA_ERROR_INVALID_CONTEXT;
  if (!device) return CUDA_ERROR_INVALID_VALUE;
  *device = 0;
  return CUDA_SUCCESS;
}

FC_API CUresult cuCtxSynchronize(void) {
  CUresult r = fc_check_ctx();
  if (r) return r;
  fc_lock();
  r = fc_capture_unsafe_call();
  if (r == CUDA_SUCCESS) fc_sync_all();
  fc_unlock();
  return r;
}

FC_API CUresult cuCtxSynchronize_v2(CUcontext ctx) {
  if (!ctx) return cuCtxSynchronize();
  CUresult r = fc_check_init();
  if (r) return r;
  if (ctx != fc_primary_ctx) return CUDA_ERROR_INVALID_CONTEXT;
  fc_lock();
  r = fc_capture_unsafe_call();
  if (r == CUDA_SUCCESS) fc_sync_all();
  fc_unlock();
  return r;
}

FC_API CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total) {
  CUresult r = fc_check_ctx();
  if (r) return r;
  if (!free_bytes || !total) return CUDA_ERROR_INVALID_VALUE;
  fc_lock();
  *free_bytes = g_fc.capacity - g_fc.used;
  *total = g_fc.capacity;
  fc_unlock();
  return CUDA_SUCCESS;
}

/* ---- error strings ------------------------------------------------------- */

#define FC_ERRORS(X)                                                                  \
  X(CUDA_SUCCESS, "no error")                                                         \
  X(CUDA_ERROR_INVALID_VALUE, "invalid argument")                                     \
  X(CUDA_ERROR_OUT_OF_MEMORY, "out of memory")                                        \
  X(CUDA_ERROR_NOT_INITIALIZED, "initialization error")                               \
  X(CUDA_ERROR_DEINITIALIZED, "driver shutting down")                                 \
  X(CUDA_ERROR_STUB_LIBRARY, "CUDA driver is a stub library")                         \
  X(CUDA_ERROR_NO_DEVICE, "no CUDA-capable device is detected")                       \
  X(CUDA_ERROR_INVALID_DEVICE, "invalid device ordinal")                              \
  X(CUDA_ERROR_INVALID_IMAGE, "device kernel image is invalid")                       \
  X(CUDA_ERROR_INVALID_CONTEXT, "invalid device context")                             \
  X(CUDA_ERROR_MAP_FAILED, "mapping of buffer object failed")                         \
  X(CUDA_ERROR_UNMAP_FAILED, "unmapping of buffer object failed")                     \
  X(CUDA_ERROR_ALREADY_MAPPED, "resource already mapped")                             \
  X(CUDA_ERROR_NOT_MAPPED, "resource not mapped")                                     \
  X(CUDA_ERROR_INVALID_SOURCE, "device kernel image is invalid")                      \
  X(CUDA_ERROR_FILE_NOT_FOUND, "file not found")                                      \
  X(CUDA_ERROR_OPERATING_SYSTEM, "OS call failed or operation not supported on this OS") \
  X(CUDA_ERROR_INVALID_HANDLE, "invalid resource handle")                             \
  X(CUDA_ERROR_ILLEGAL_STATE, "the operation cannot be performed in the present state") \
  X(CUDA_ERROR_NOT_FOUND, "named symbol not found")                                   \
  X(CUDA_ERROR_NOT_READY, "device not ready")                                         \
  X(CUDA_ERROR_ILLEGAL_ADDRESS, "an illegal memory access was encountered")           \
  X(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, "too many resources requested for launch")    \
  X(CUDA_ERROR_LAUNCH_TIMEOUT, "the launch timed out and was terminated")             \
  X(CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE, "primary context active")                      \
  X(CUDA_ERROR_CONTEXT_IS_DESTROYED, "context is destroyed")                          \
  X(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED,                                        \
    "part or all of the requested memory range is already mapped")                    \
  X(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, "pointer does not correspond to a registered memory region") \
  X(CUDA_ERROR_MISALIGNED_ADDRESS, "misaligned address")                              \
  X(CUDA_ERROR_LAUNCH_FAILED, "unspecified launch failure")                           \
  X(CUDA_ERROR_NOT_PERMITTED, "operation not permitted")                              \
  X(CUDA_ERROR_NOT_SUPPORTED, "operation not supported")                              \
  X(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "operation not permitted when stream is capturing") \
  X(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "operation failed due to a previous error during capture") \
  X(CUDA_ERROR_STREAM_CAPTURE_IMPLICIT,                                               \
    "operation would make the legacy stream depend on a capturing blocking stream")   \
  X(CUDA_ERROR_TIMEOUT, "wait operation timed out")                                   \
  X(CUDA_ERROR_UNKNOWN, "unknown error")

FC_API CUresult cuGetErrorName(CUresult error, const char **pStr) {
  if (!pStr) return CUDA_ERROR_INVALID_VALUE;
  switch (error) {
#define FC_ERR_NAME(code, text) \
  case code: *pStr = #code; return CUDA_SUCCESS;
    FC_ERRORS(FC_ERR_NAME)
#undef FC_ERR_NAME
    default: *pStr = NULL; return CUDA_ERROR_INVALID_VALUE;
  }
}

FC_API CUresult cuGetErrorString(CUresult error, const char **pStr) {
  if (!pStr) return CUDA_ERROR_INVALID_VALUE;
  switch (error) {
#define FC_ERR_TEXT(code, text) \
  case code: *pStr = text; return CUDA_SUCCESS;
    FC_ERRORS(FC_ERR_TEXT)
#undef FC_ERR_TEXT
    default: *pStr = NULL; return CUDA_ERROR_INVALID_VALUE;
  }
}
