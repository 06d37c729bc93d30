/*
 * hook_kernel.c - where kernel handles and tensor-map descriptors come from.
 *
 * Concept: a launch is scanned with the parameter layout of its handle
 * (libmtalloc/layout.c), and a CUtensorMap parameter is resolved through
 * the descriptors the encoders produced (libmtalloc/tensormap.c). Neither
 * can be learnt at the launch alone: whether a handle is a CUkernel or a
 * CUfunction, which library or module it belongs to, and which address a
 * descriptor encodes are only visible where the driver hands them out. So
 * these hooks forward to the driver and, on success, tell the core what
 * they saw; on cuModuleUnload / cuLibraryUnload they make the core forget
 * the owner's layouts, since a kernel loaded later may get the same handle.
 *
 * Nothing here changes what the driver is asked or answers.
 *
 * Threading: the core's tables have their own locks; these hooks take no
 * pager lock.
 */
#include "driver.h"
#include "hooks.h"
#include "layout.h"
#include "tensormap.h"

#define READY(h) (_mt_hooks_init() && _mt_hook_real[h] != NULL)

CUresult impl_lib_get_kernel(int h, int pt, CUkernel *pKernel, CUlibrary library, const char *name) {
  (void)pt;
  if (!READY(h)) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult rc = REAL(h, cuLibraryGetKernel)(pKernel, library, name);
  if (rc == CUDA_SUCCESS && pKernel != NULL)
    _mt_layout_note((uintptr_t)*pKernel, MT_FN_KERNEL, (uintptr_t)library, 0);
  return rc;
}

CUresult impl_lib_enum_kernels(int h, int pt, CUkernel *kernels, unsigned int numKernels, CUlibrary lib) {
  (void)pt;
  if (!READY(h)) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult rc = REAL(h, cuLibraryEnumerateKernels)(kernels, numKernels, lib);
  if (rc == CUDA_SUCCESS && kernels != NULL)
    for (unsigned int i = 0; i < numKernels; i++) _mt_layout_note((uintptr_t)kernels[i], MT_FN_KERNEL, (uintptr_t)lib, 0);
  return rc;
}

CUresult impl_kernel_get_function(int h, int pt, CUfunction *pFunc, CUkernel kernel) {
  (void)pt;
  if (!READY(h)) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult rc = REAL(h, cuKernelGetFunction)(pFunc, kernel);
  if (rc == CUDA_SUCCESS && pFunc != NULL)
    _mt_layout_note((uintptr_t)*pFunc, MT_FN_FUNCTION, 0, (uintptr_t)kernel);
  return rc;
}

CUresult impl_module_get_function(int h, int pt, CUfunction *hfunc, CUmodule hmod, const char *name) {
  (void)pt;
  if (!READY(h)) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult rc = REAL(h, cuModuleGetFunction)(hfunc, hmod, name);
  if (rc == CUDA_SUCCESS && hfunc != NULL) _mt_layout_note((uintptr_t)*hfunc, MT_FN_FUNCTION, (uintptr_t)hmod, 0);
  return rc;
}

/* The layouts are dropped after the driver unloaded (a launch racing with
 * the unload of its own kernel is the program's error either way). A
 * library's functions may also have come from its module
 * (cuLibraryGetModule + cuModuleGetFunction): that owner goes too. */
CUresult impl_library_unload(int h, int pt, CUlibrary library) {
  (void)pt;
  if (!READY(h)) return CUDA_ERROR_NOT_INITIALIZED;
  CUmodule mod = NULL;
  const mt_driver_t *drv = _mt_driver();
  if (drv == NULL || drv->cuLibraryGetModule == NULL || drv->cuLibraryGetModule(&mod, library) != CUDA_SUCCESS)
    mod = NULL;
  CUresult rc = REAL(h, cuLibraryUnload)(library);
  if (rc == CUDA_SUCCESS) {
    _mt_layout_unload((uintptr_t)library);
    if (mod != NULL) _mt_layout_unload((uintptr_t)mod);
  }
  return rc;
}

CUresult impl_module_unload(int h, int pt, CUmodule hmod) {
  (void)pt;
  if (!READY(h)) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult rc = REAL(h, cuModuleUnload)(hmod);
  if (rc == CUDA_SUCCESS) _mt_layout_unload((uintptr_t)hmod);
  return rc;
}

CUresult impl_tmap_tiled(int h, int pt, CUtensorMap *tensorMap, CUtensorMapDataType tensorDataType,
                         cuuint32_t tensorRank, void *globalAddress, const cuuint64_t *globalDim,
                         const cuuint64_t *globalStrides, const cuuint32_t *boxDim, const cuuint32_t *elementStrides,
                         CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle,
                         CUtensorMapL2promotion l2Promotion, CUtensorMapFloatOOBfill oobFill) {
  (void)pt;
  if (!READY(h)) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult rc = REAL(h, cuTensorMapEncodeTiled) MT_A_TMTILED;
  if (rc == CUDA_SUCCESS) _mt_tmap_note(tensorMap, (uintptr_t)globalAddress);
  return rc;
}

CUresult impl_tmap_im2col(int h, int pt, CUtensorMap *tensorMap, CUtensorMapDataType tensorDataType,
                          cuuint32_t tensorRank, void *globalAddress, const cuuint64_t *globalDim,
                          const cuuint64_t *globalStrides, const int *pixelBoxLowerCorner,
                          const int *pixelBoxUpperCorner, cuuint32_t channelsPerPixel, cuuint32_t pixelsPerColumn,
                          const cuuint32_t *elementStrides, CUtensorMapInterleave interleave,
                          CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2Promotion,
                          CUtensorMapFloatOOBfill oobFill) {
  (void)pt;
  if (!READY(h)) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult rc = REAL(h, cuTensorMapEncodeIm2col) MT_A_TMIM2COL;
  if (rc == CUDA_SUCCESS) _mt_tmap_note(tensorMap, (uintptr_t)globalAddress);
  return rc;
}

CUresult impl_tmap_im2col_wide(int h, int pt, CUtensorMap *tensorMap, CUtensorMapDataType tensorDataType,
                               cuuint32_t tensorRank, void *globalAddress, const cuuint64_t *globalDim,
                               const cuuint64_t *globalStrides, int pixelBoxLowerCornerWidth,
                               int pixelBoxUpperCornerWidth, cuuint32_t channelsPerPixel,
                               cuuint32_t pixelsPerColumn, const cuuint32_t *elementStrides,
                               CUtensorMapInterleave interleave, CUtensorMapIm2ColWideMode mode,
                               CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2Promotion,
                               CUtensorMapFloatOOBfill oobFill) {
  (void)pt;
  if (!READY(h)) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult rc = REAL(h, cuTensorMapEncodeIm2colWide) MT_A_TMWIDE;
  if (rc == CUDA_SUCCESS) _mt_tmap_note(tensorMap, (uintptr_t)globalAddress);
  return rc;
}

CUresult impl_tmap_replace(int h, int pt, CUtensorMap *tensorMap, void *globalAddress) {
  (void)pt;
  if (!READY(h)) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult rc = REAL(h, cuTensorMapReplaceAddress)(tensorMap, globalAddress);
  if (rc == CUDA_SUCCESS) _mt_tmap_note(tensorMap, (uintptr_t)globalAddress);
  return rc;
}
