/*
 * hooks.c - the hook tables and the three ways in.
 *
 * A program reaches a driver function one of three ways, and we must be in
 * each:
 *   direct    it links libcuda: our exported symbol of the same name wins
 *             because we are preloaded;
 *   dlsym     it dlopens libcuda.so.1 and asks dlsym (cudart's first step,
 *             Triton, ctypes): our dlsym hands back our function;
 *   procaddr  it asks cuGetProcAddress(_v2) by base name and version (cudart,
 *             cuBLAS, PyTorch's driver lookups): we ask the driver, and if
 *             the function it resolved is one we hook, hand back ours. Going
 *             through the driver keeps its version and flag rules (_v2,
 *             _ptsz) exactly right without copying them. A driver may
 *             answer with internal entry points rather than its exports;
 *             then the request itself (name, version, flag) is matched
 *             against MT_PROCADDR_NAMES (hooks.h).
 * Each way gets its own trampoline per hook so that the stats can say which
 * route a program used; all three call the same implementation.
 *
 * dlsym itself is exported at both glibc symbol versions (GLIBC_2.2.5 for
 * old binaries, GLIBC_2.34 for new) and forwards to glibc's via dlvsym.
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "driver.h"
#include "hooks.h"
#include "internal.h"
#include "stats.h"

void *_mt_hook_real[MT_HOOK__COUNT];
static _Atomic uint64_t hook_calls[MT_HOOK__COUNT][MT_ROUTE__COUNT];

static const char *const hook_names[MT_HOOK__COUNT] = {
#define MT_HOOK_NAME(name, impl, pt, params, args) #name,
  MT_DRIVER_HOOKS(MT_HOOK_NAME)
#undef MT_HOOK_NAME
};

#define COUNT(h, route) atomic_fetch_add_explicit(&hook_calls[h][route], 1, memory_order_relaxed)

/* direct: the exported symbol */
#define MT_HOOK_DIRECT(name, impl, pt, params, args)    \
  MT_API CUresult name params {                         \
    COUNT(MT_HOOK_##name, MT_ROUTE_DIRECT);             \
    return impl_##impl(MT_HOOK_##name, pt, MT_UNPAREN args); \
  }
MT_DRIVER_HOOKS(MT_HOOK_DIRECT)
#undef MT_HOOK_DIRECT

#define MT_HOOK_VIA(name, impl, pt, params, args)       \
  static CUresult dl_##name params {                    \
    COUNT(MT_HOOK_##name, MT_ROUTE_DLSYM);              \
    return impl_##impl(MT_HOOK_##name, pt, MT_UNPAREN args); \
  }                                                     \
  static CUresult pa_##name params {                    \
    COUNT(MT_HOOK_##name, MT_ROUTE_PROCADDR);           \
    return impl_##impl(MT_HOOK_##name, pt, MT_UNPAREN args); \
  }
MT_DRIVER_HOOKS(MT_HOOK_VIA)
#undef MT_HOOK_VIA

static void *const hook_self[MT_HOOK__COUNT] = {
#define MT_HOOK_SELF(name, impl, pt, params, args) (void *)name,
  MT_DRIVER_HOOKS(MT_HOOK_SELF)
#undef MT_HOOK_SELF
};
static void *const hook_dl[MT_HOOK__COUNT] = {
#define MT_HOOK_DL(name, impl, pt, params, args) (void *)dl_##name,
  MT_DRIVER_HOOKS(MT_HOOK_DL)
#undef MT_HOOK_DL
};
static void *const hook_pa[MT_HOOK__COUNT] = {
#define MT_HOOK_PA(name, impl, pt, params, args) (void *)pa_##name,
  MT_DRIVER_HOOKS(MT_HOOK_PA)
#undef MT_HOOK_PA
};

_Static_assert(sizeof(hook_names) / sizeof(hook_names[0]) == MT_HOOK__COUNT, "one name per hook");

static const bool hook_pt[MT_HOOK__COUNT] = {
#define MT_HOOK_PT(name, impl, pt, params, args) pt,
  MT_DRIVER_HOOKS(MT_HOOK_PT)
#undef MT_HOOK_PT
};

static const struct procaddr_row {
  const char *base;
  int version;
  int h;
} procaddr_rows[] = {
#define MT_PROCADDR_ROW(base, version, sym) {#base, version, MT_HOOK_##sym},
  MT_PROCADDR_NAMES(MT_PROCADDR_ROW)
#undef MT_PROCADDR_ROW
};

/* The row of (base, version) with the highest first version not above the
 * request, among per-thread rows (pt) or legacy ones; -1 when none. The
 * driver's own rule, so a request lands on the same form it would get. */
static int best_request_row(const char *symbol, int version, bool pt) {
  int best = -1;
  for (int i = 0; i < (int)(sizeof(procaddr_rows) / sizeof(procaddr_rows[0])); i++) {
    const struct procaddr_row *r = &procaddr_rows[i];
    if (hook_pt[r->h] != pt || r->version > version || strcmp(r->base, symbol) != 0) continue;
    if (best < 0 || r->version > procaddr_rows[best].version) best = i;
  }
  return best;
}

/* True when some row names base (at any version): then the rows decide. */
static bool has_rows(const char *base) {
  for (size_t i = 0; i < sizeof(procaddr_rows) / sizeof(procaddr_rows[0]); i++)
    if (strcmp(procaddr_rows[i].base, base) == 0) return true;
  return false;
}

/* True when hook h is the symbol column of a row. */
static bool in_rows(int h) {
  for (size_t i = 0; i < sizeof(procaddr_rows) / sizeof(procaddr_rows[0]); i++)
    if (procaddr_rows[i].h == h) return true;
  return false;
}

int _mt_hook_by_request(const char *symbol, int version, cuuint64_t flags) {
  if (symbol == NULL || symbol[0] != 'c' || symbol[1] != 'u') return -1;
  int row = -1;
  if (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) row = best_request_row(symbol, version, true);
  if (row < 0) row = best_request_row(symbol, version, false);
  if (row >= 0) return procaddr_rows[row].h;
  /* A hook without rows (an unversioned function added to the hook list
   * only) is its own base name at every version, in legacy-stream form. */
  if (has_rows(symbol)) return -1;
  int h = _mt_hook_by_name(symbol);
  return h >= 0 && !hook_pt[h] && !in_rows(h) ? h : -1;
}

void *_mt_hook_procaddr(int h) { return hook_pa[h]; }
void *_mt_hook_dlsym(int h) { return hook_dl[h]; }
void *_mt_hook_self(int h) { return hook_self[h]; }

/* real function -> hook, sorted by address for binary search */
static struct { void *fn; int h; } by_real[MT_HOOK__COUNT];
static int nby_real;
static bool hooks_ok;
static pthread_once_t hooks_once = PTHREAD_ONCE_INIT;

static int cmp_real(const void *a, const void *b) {
  uintptr_t x = (uintptr_t)((const __typeof__(by_real[0]) *)a)->fn;
  uintptr_t y = (uintptr_t)((const __typeof__(by_real[0]) *)b)->fn;
  return (x > y) - (x < y);
}

static void hooks_resolve(void) {
  /* The real functions even where the driver is too old for the pager
   * (_mt_driver() NULL, logged): no pager starts, and every hook passes
   * its call through unchanged, as if mtalloc were not loaded. */
  (void)_mt_driver();
  for (int h = 0; h < MT_HOOK__COUNT; h++) {
    void *fn = _mt_driver_sym(hook_names[h]);
    _mt_hook_real[h] = fn;
    if (fn == NULL) continue;
    /* Two names may share one function (a driver without a separate
     * per-thread variant): keep the first, the plain one. */
    bool dup = false;
    for (int i = 0; i < nby_real; i++) dup |= by_real[i].fn == fn;
    if (!dup) by_real[nby_real++] = (__typeof__(by_real[0])){fn, h};
  }
  if (nby_real == 0) return; /* no driver at all */
  qsort(by_real, (size_t)nby_real, sizeof(by_real[0]), cmp_real);
  _mt_stats_set_hooks(hook_names, hook_calls, MT_HOOK__COUNT);
  hooks_ok = true;
}

bool _mt_hooks_init(void) {
  pthread_once(&hooks_once, hooks_resolve);
  return hooks_ok;
}

int _mt_hook_of_real(void *fn) {
  /* A driver whose lookups resolve through the global scope hands back our
   * exported symbols: those are ours already. */
  for (int h = 0; h < MT_HOOK__COUNT; h++)
    if (hook_self[h] == fn) return h;
  int lo = 0, hi = nby_real - 1;
  while (lo <= hi) {
    int mid = (lo + hi) / 2;
    if (by_real[mid].fn == fn) return by_real[mid].h;
    if ((uintptr_t)by_real[mid].fn < (uintptr_t)fn) lo = mid + 1;
    else hi = mid - 1;
  }
  return -1;
}

MT_NO_SANITIZE int _mt_hook_by_name(const char *name) {
  if (name == NULL || name[0] != 'c' || name[1] != 'u') return -1;
  for (int h = 0; h < MT_HOOK__COUNT; h++)
    if (strcmp(hook_names[h], name) == 0) return h;
  return -1;
}

/* ---- the entry points ---------------------------------------------------------- */

/* Swaps the function the driver resolved for ours. First by pointer: the
 * driver handed out its dlsym export of a hooked symbol (the common case,
 * and the only check that cannot be fooled by a name table out of date).
 * Then by request: a driver whose cuGetProcAddress returns internal entry
 * points (a dispatch table, not the exports) would otherwise send every
 * runtime call past us while all outputs stay right, so the requested
 * name, version and per-thread flag pick the hook instead. Only where the
 * driver also exports that symbol: our implementation calls the export. */
static void procaddr_swap(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags) {
  if (pfn == NULL || *pfn == NULL) return;
  int k = _mt_hook_of_real(*pfn);
  if (k < 0) {
    k = _mt_hook_by_request(symbol, cudaVersion, flags);
    if (k >= 0 && _mt_hook_real[k] == NULL) k = -1;
  }
  if (k >= 0) *pfn = hook_pa[k];
}

CUresult impl_gpa2(int h, int pt, const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                   CUdriverProcAddressQueryResult *symbolStatus) {
  (void)pt;
  if (!_mt_hooks_init() || _mt_hook_real[h] == NULL) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult rc = REAL(h, cuGetProcAddress_v2)(symbol, pfn, cudaVersion, flags, symbolStatus);
  if (rc == CUDA_SUCCESS) procaddr_swap(symbol, pfn, cudaVersion, flags);
  return rc;
}

typedef CUresult (*gpa1_fn)(const char *, void **, int, cuuint64_t);

CUresult impl_gpa1(int h, int pt, const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags) {
  (void)pt;
  if (!_mt_hooks_init() || _mt_hook_real[h] == NULL) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult rc = ((gpa1_fn)_mt_hook_real[h])(symbol, pfn, cudaVersion, flags);
  if (rc == CUDA_SUCCESS) procaddr_swap(symbol, pfn, cudaVersion, flags);
  return rc;
}

/* dlsym, both glibc versions. RTLD_NEXT is resolved relative to this
 * library, the best we can do without the caller's identity; it differs
 * from the caller's view only for a caller preloaded before us. */
MT_NO_SANITIZE static void *mt_dlsym(void *handle, const char *name) {
  void *r = _mt_real_dlsym(handle, name);
  if (r == NULL || name == NULL || name[0] != 'c' || name[1] != 'u') return r;
  int h = _mt_hook_by_name(name);
  if (h < 0 || !_mt_hooks_init()) return r;
  if (r == _mt_hook_real[h] || r == hook_self[h]) return hook_dl[h];
  return r;
}

MT_API void *mt_dlsym_234(void *handle, const char *name) __asm__("mt_dlsym_234");
MT_API void *mt_dlsym_225(void *handle, const char *name) __asm__("mt_dlsym_225");
MT_NO_SANITIZE MT_API void *mt_dlsym_234(void *handle, const char *name) { return mt_dlsym(handle, name); }
MT_NO_SANITIZE MT_API void *mt_dlsym_225(void *handle, const char *name) { return mt_dlsym(handle, name); }
__asm__(".symver mt_dlsym_234, dlsym@@GLIBC_2.34");
__asm__(".symver mt_dlsym_225, dlsym@GLIBC_2.2.5");
