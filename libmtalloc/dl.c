/*
 * dl.c - the real dlsym, and the driver opened through it.
 *
 * The preload layer replaces dlsym (that is how cudart and PyTorch find the
 * driver), so the core must never call the public dlsym for itself: it
 * resolves glibc's own with dlvsym, which nobody hooks. The driver handle and
 * every pointer the core uses are resolved once.
 */
#include <errno.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#include "driver.h"
#include "internal.h"

typedef void *(*dlsym_fn)(void *, const char *);

MT_NO_SANITIZE static dlsym_fn real_dlsym_fn(void) {
  static _Atomic(dlsym_fn) fn;
  dlsym_fn f = fn;
  if (f == NULL) {
    f = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
    if (f == NULL) f = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
    fn = f;
  }
  return f;
}

MT_NO_SANITIZE void *_mt_real_dlsym(void *handle, const char *name) {
  dlsym_fn f = real_dlsym_fn();
  return f ? f(handle, name) : NULL;
}

static void *driver_handle;
static mt_driver_t driver;
static const mt_driver_t *driver_ok;
static pthread_once_t driver_once = PTHREAD_ONCE_INIT;

static void driver_open(void) {
  driver_handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (driver_handle == NULL) {
    mt_error("cannot open the CUDA driver libcuda.so.1: %s", dlerror());
    return;
  }
  bool ok = true;
#define MT_DRV_RESOLVE(name)                                                    \
  driver.name = (__typeof__(driver.name))_mt_real_dlsym(driver_handle, #name); \
  if (driver.name == NULL) {                                                    \
    mt_error("the CUDA driver lacks %s (driver 12.4 or newer is required)", #name); \
    ok = false;                                                                 \
  }
  MT_DRIVER_CORE_FUNCS(MT_DRV_RESOLVE)
#undef MT_DRV_RESOLVE
#define MT_DRV_OPTIONAL(name) driver.name = (__typeof__(driver.name))_mt_real_dlsym(driver_handle, #name);
  MT_DRIVER_OPTIONAL_FUNCS(MT_DRV_OPTIONAL)
#undef MT_DRV_OPTIONAL
  if (ok) driver_ok = &driver;
}

const mt_driver_t *_mt_driver(void) {
  pthread_once(&driver_once, driver_open);
  return driver_ok;
}

void *_mt_driver_sym(const char *name) {
  pthread_once(&driver_once, driver_open);
  return driver_handle ? _mt_real_dlsym(driver_handle, name) : NULL;
}

static __thread CUresult noted_error;

void _mt_cu_note_error(CUresult rc) {
  noted_error = rc;
}

CUresult _mt_cu_result(int rc) {
  if (rc > 0) return (CUresult)rc;
  switch (rc) {
    case 0: return CUDA_SUCCESS;
    case -ENOMEM:
    case -E2BIG: return CUDA_ERROR_OUT_OF_MEMORY;
    case -EINVAL:
    case -ENOENT: return CUDA_ERROR_INVALID_VALUE;
    case -EBUSY: return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    case -ESHUTDOWN: return CUDA_ERROR_DEINITIALIZED;
    case -EIO: {
      CUresult e = noted_error;
      noted_error = CUDA_SUCCESS;
      return e != CUDA_SUCCESS ? e : CUDA_ERROR_UNKNOWN;
    }
    default: return CUDA_ERROR_UNKNOWN;
  }
}

const char *_mt_cu_errname(CUresult rc) {
  const char *s = NULL;
  if (driver_ok && driver.cuGetErrorName(rc, &s) == CUDA_SUCCESS && s) return s;
  static __thread char buf[32];
  snprintf(buf, sizeof(buf), "CUresult %d", (int)rc);
  return buf;
}
