/*
 * fake_library.c - libraries, modules and CUkernel handles.
 *
 * Concept: CUDA 12+ runtimes load device code with cuLibraryLoadData and
 * get context-independent CUkernel handles (cuLibraryGetKernel,
 * cuLibraryEnumerateKernels), which cuLaunchKernel accepts cast to
 * CUfunction; cuKernelGetFunction gives the CUfunction behind one. Older
 * code loads modules (cuModuleLoadData) and gets CUfunctions
 * (cuModuleGetFunction). The fake's "image" is a fakecuda_image_t
 * (fakecuda.h) listing host functions and parameter sizes.
 *
 * A library owns its kernels; each kernel owns one function (the one
 * cuKernelGetFunction returns and the launch runs). A library also has a
 * module (cuLibraryGetModule) whose functions are those same functions. A
 * module loaded by itself owns its functions. Unloading drains every
 * stream first (the real driver may not free code still running), then
 * retires the functions, kernels, the library and its module; their memory
 * is reused (last freed, first reused) by the next load, so a later load
 * gets the same library, module, kernel and function handles, as the real
 * driver may -- exactly the case a cache keyed by handle must survive.
 *
 * Invariants: every live library, module and kernel is in its g_fc set, so
 * a stale or foreign handle is detected by lookup, never dereferenced.
 * Graphs still holding an unloaded kernel's node are the program's error.
 *
 * Threading: under g_fc.mu, except that function creation takes it itself.
 */
#include <stdlib.h>
#include <string.h>

#include "fake_internal.h"

typedef struct fc_kernel {
  fc_func_t *func;
  struct fc_library *lib;
} fc_kernel_t;

typedef struct fc_library {
  bool is_module;              /* loaded by cuModuleLoadData */
  size_t n;
  fc_kernel_t **kernels;       /* libraries: n kernels */
  fc_func_t **funcs;           /* both: n functions */
  struct fc_library *module;   /* a library's module: a handle of its own */
  struct fc_library *owner;    /* a library's module: the library */
} fc_library_t;

static fc_kernel_t *kernel_recycle[64];
static size_t nkernel_recycle;
static fc_library_t *lib_recycle[64]; /* libraries and modules alike */
static size_t nlib_recycle;

/* A zeroed library or module, reusing an unloaded one's memory first (so
 * its handle comes back, as with the real driver). Caller holds mu. */
static fc_library_t *lib_alloc(void) {
  fc_library_t *l = nlib_recycle ? lib_recycle[--nlib_recycle] : NULL;
  if (l) memset(l, 0, sizeof *l);
  else l = calloc(1, sizeof *l);
  return l;
}

static void lib_release(fc_library_t *l) {
  if (nlib_recycle < sizeof lib_recycle / sizeof lib_recycle[0]) lib_recycle[nlib_recycle++] = l;
  else free(l);
}

fc_func_t *fc_kernel_func(const void *h) {
  return fc_set_has(&g_fc.kernels, h) ? ((const fc_kernel_t *)h)->func : NULL;
}

static void lib_free(fc_library_t *l) {
  if (!l) return;
  for (size_t i = 0; i < l->n; i++) {
    if (l->kernels && l->kernels[i]) {
      fc_set_del(&g_fc.kernels, l->kernels[i]);
      if (nkernel_recycle < sizeof kernel_recycle / sizeof kernel_recycle[0])
        kernel_recycle[nkernel_recycle++] = l->kernels[i];
      else
        free(l->kernels[i]);
    }
    if (l->funcs && l->funcs[i]) fc_func_retire(l->funcs[i]);
  }
  free(l->kernels);
  free(l->funcs);
  if (l->module) {
    fc_set_del(&g_fc.modules, l->module);
    lib_release(l->module);
  }
  lib_release(l); /* popped first by the next load: the same handle again */
}

static CUresult load(const void *code, bool as_module, fc_library_t **out) {
  const fakecuda_image_t *img = code;
  if (!img) return CUDA_ERROR_INVALID_VALUE;
  if (img->magic != FAKECUDA_IMAGE_MAGIC || (img->nkernels && !img->kernels)) return CUDA_ERROR_INVALID_IMAGE;
  fc_lock();
  fc_library_t *l = lib_alloc();
  fc_library_t *m = l && !as_module ? lib_alloc() : NULL;
  fc_unlock();
  if (!l) return CUDA_ERROR_OUT_OF_MEMORY;
  l->is_module = as_module;
  l->module = m;
  l->funcs = calloc(img->nkernels ? img->nkernels : 1, sizeof *l->funcs);
  if (!as_module) l->kernels = calloc(img->nkernels ? img->nkernels : 1, sizeof *l->kernels);
  CUresult r = CUDA_ERROR_OUT_OF_MEMORY;
  if (!l->funcs || (!as_module && (!l->kernels || !l->module))) goto fail;
  for (size_t i = 0; i < img->nkernels; i++) {
    const fakecuda_image_kernel_t *k = &img->kernels[i];
    fc_func_t *f = fc_func_new(k->name, k->fn, k->nparams, k->param_sizes, k->param_aligns);
    fc_lock();
    if (!f) {
      l->n = i;
      r = CUDA_ERROR_INVALID_IMAGE;
      goto fail_locked;
    }
    l->funcs[i] = f;
    l->n = i + 1;
    if (!as_module) {
      fc_kernel_t *kh = nkernel_recycle ? kernel_recycle[--nkernel_recycle] : malloc(sizeof *kh);
      if (!kh || !fc_set_add(&g_fc.kernels, kh)) {
        free(kh);
        goto fail_locked;
      }
      kh->func = f;
      kh->lib = l;
      l->kernels[i] = kh;
    }
    fc_unlock();
  }
  fc_lock();
  if (!fc_set_add(as_module ? &g_fc.modules : &g_fc.libraries, l)) goto fail_locked;
  if (!as_module) {
    l->module->is_module = true;
    l->module->owner = l;
    if (!fc_set_add(&g_fc.modules, l->module)) {
      fc_set_del(&g_fc.libraries, l);
      goto fail_locked;
    }
  }
  fc_unlock();
  *out = l;
  return CUDA_SUCCESS;
fail_locked:
  lib_free(l);
  fc_unlock();
  return r;
fail:
  free(l->funcs);
  free(l->kernels);
  fc_lock();
  if (l->module) lib_release(l->module);
  lib_release(l);
  fc_unlock();
  return r;
}

FC_API CUresult cuLibraryLoadData(CUlibrary *library, const void *code, CUjit_option *jitOptions,
                                  void **jitOptionsValues, unsigned int numJitOptions,
                                  CUlibraryOption *libraryOptions, void **libraryOptionValues,
                                  unsigned int numLibraryOptions) {
  (void)jitOptions, (void)jitOptionsValues, (void)libraryOptions, (void)libraryOptionValues;
  CUresult r = fc_check_init();
  if (r) return r;
  if (!library || (numJitOptions && !jitOptions) || (numLibraryOptions && !libraryOptions))
    return CUDA_ERROR_INVALID_VALUE;
  fc_library_t *l;
  r = load(code, false, &l);
  if (r == CUDA_SUCCESS) *library = (CUlibrary)l;
  return r;
}

FC_API CUresult cuModuleLoadData(CUmodule *module, const void *image) {
  CUresult r = fc_check_ctx();
  if (r) return r;
  if (!module) return CUDA_ERROR_INVALID_VALUE;
  fc_library_t *l;
  r = load(image, true, &l);
  if (r == CUDA_SUCCESS) *module = (CUmodule)l;
  return r;
}

/* Drains the device, then frees l's code. Caller holds mu. */
static void unload(fc_library_t *l) {
  fc_sync_all();
  fc_set_del(l->is_module ? &g_fc.modules : &g_fc.libraries, l);
  lib_free(l);
}

FC_API CUresult cuLibraryUnload(CUlibrary library) {
  CUresult r = fc_check_init();
  if (r) return r;
  fc_lock();
  bool ok = fc_set_has(&g_fc.libraries, library);
  if (ok) unload((fc_library_t *)library);
  fc_unlock();
  return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

FC_API CUresult cuModuleUnload(CUmodule hmod) {
  CUresult r = fc_check_init();
  if (r) return r;
  fc_lock();
  fc_library_t *l = fc_set_has(&g_fc.modules, hmod) ? (fc_library_t *)hmod : NULL;
  if (l && l->owner) r = CUDA_ERROR_NOT_PERMITTED; /* a library's module goes with the library */
  else if (l) unload(l);
  else r = CUDA_ERROR_INVALID_HANDLE;
  fc_unlock();
  return r;
}

/* The functions of a module: its own, or its library's. */
static fc_library_t *code_of_module(CUmodule hmod) {
  if (!fc_set_has(&g_fc.modules, hmod)) return NULL;
  fc_library_t *m = (fc_library_t *)hmod;
  return m->owner ? m->owner : m;
}

FC_API CUresult cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name) {
  CUresult r = fc_check_init();
  if (r) return r;
  if (!hfunc || !name) return CUDA_ERROR_INVALID_VALUE;
  fc_lock();
  fc_library_t *l = code_of_module(hmod);
  r = l ? CUDA_ERROR_NOT_FOUND : CUDA_ERROR_INVALID_HANDLE;
  for (size_t i = 0; l && i < l->n; i++) {
    if (strcmp(l->funcs[i]->name, name) == 0) {
      *hfunc = (CUfunction)l->funcs[i];
      r = CUDA_SUCCESS;
      break;
    }
  }
  fc_unlock();
  return r;
}

FC_API CUresult cuLibraryGetModule(CUmodule *pMod, CUlibrary library) {
  CUresult r = fc_check_ctx();
  if (r) return r;
  if (!pMod) return CUDA_ERROR_INVALID_VALUE;
  fc_lock();
  bool ok = fc_set_has(&g_fc.libraries, library);
  if (ok) *pMod = (CUmodule)((fc_library_t *)library)->module;
  fc_unlock();
  return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

FC_API CUresult cuLibraryGetKernel(CUkernel *pKernel, CUlibrary library, const char *name) {
  CUresult r = fc_check_init();
  if (r) return r;
  if (!pKernel || !name) return CUDA_ERROR_INVALID_VALUE;
  fc_lock();
  fc_library_t *l = fc_set_has(&g_fc.libraries, library) ? (fc_library_t *)library : NULL;
  r = l ? CUDA_ERROR_NOT_FOUND : CUDA_ERROR_INVALID_HANDLE;
  for (size_t i = 0; l && i < l->n; i++) {
    if (strcmp(l->funcs[i]->name, name) == 0) {
      *pKernel = (CUkernel)l->kernels[i];
      r = CUDA_SUCCESS;
      break;
    }
  }
  fc_unlock();
  return r;
}

FC_API_NEW CUresult cuLibraryGetKernelCount(unsigned int *count, CUlibrary lib) {
  CUresult r = fc_check_init();
  if (r) return r;
  if (!count) return CUDA_ERROR_INVALID_VALUE;
  fc_lock();
  bool ok = fc_set_has(&g_fc.libraries, lib);
  if (ok) *count = (unsigned int)((fc_library_t *)lib)->n;
  fc_unlock();
  return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

FC_API_NEW CUresult cuLibraryEnumerateKernels(CUkernel *kernels, unsigned int numKernels, CUlibrary lib) {
  CUresult r = fc_check_init();
  if (r) return r;
  if (!kernels) return CUDA_ERROR_INVALID_VALUE;
  fc_lock();
  fc_library_t *l = fc_set_has(&g_fc.libraries, lib) ? (fc_library_t *)lib : NULL;
  if (!l) r = CUDA_ERROR_INVALID_HANDLE;
  else if (numKernels > l->n) r = CUDA_ERROR_INVALID_VALUE;
  else
    for (unsigned int i = 0; i < numKernels; i++) kernels[i] = (CUkernel)l->kernels[i];
  fc_unlock();
  return r;
}

FC_API CUresult cuKernelGetFunction(CUfunction *pFunc, CUkernel kernel) {
  CUresult r = fc_check_ctx();
  if (r) return r;
  if (!pFunc) return CUDA_ERROR_INVALID_VALUE;
  fc_lock();
  fc_func_t *f = fc_kernel_func(kernel);
  if (f) *pFunc = (CUfunction)f;
  fc_unlock();
  return f ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

FC_API_NEW CUresult cuKernelGetParamInfo(CUkernel kernel, size_t paramIndex, size_t *paramOffset, size_t *paramSize) {
  CUresult r = fc_check_init();
  if (r) return r;
  fc_lock();
  fc_func_t *f = fc_kernel_func(kernel);
  fc_unlock();
  if (!f) return CUDA_ERROR_INVALID_HANDLE;
  return fc_param_info(f, paramIndex, paramOffset, paramSize);
}

FC_API_NEW CUresult cuKernelGetName(const char **name, CUkernel hfunc) {
  CUresult r = fc_check_init();
  if (r) return r;
  if (!name || !hfunc) return CUDA_ERROR_INVALID_VALUE;
  fc_lock();
  fc_func_t *f = fc_kernel_func(hfunc);
  fc_unlock();
  if (!f) return CUDA_ERROR_INVALID_HANDLE;
  *name = f->name;
  return CUDA_SUCCESS;
}
