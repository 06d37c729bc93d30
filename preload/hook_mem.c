/*
 * hook_mem.c - allocation and the queries that must answer for our regions.
 *
 * Every allocation the framework makes becomes a region of the pager once
 * the pager runs (it starts on the first allocation, which always has a
 * context current). Frees and queries for addresses outside the pager's
 * range, made before it started or by someone else, go to the driver.
 */
#include <errno.h>
#include <string.h>

#include "hooks.h"
#include "internal.h"
#include "pager.h"

static CUresult alloc_common(int h, CUdeviceptr *dptr, size_t bytesize, bool *passthrough) {
  *passthrough = false;
  if (!_mt_hooks_init() || _mt_pager_start() == NULL) {
    *passthrough = true;
    return CUDA_SUCCESS;
  }
  (void)h;
  if (dptr == NULL || bytesize == 0) return CUDA_ERROR_INVALID_VALUE;
  uintptr_t a = 0;
  int rc = _mt_alloc(bytesize, &a);
  if (rc == 0) *dptr = (CUdeviceptr)a;
  return _mt_cu_result(rc);
}

CUresult impl_alloc(int h, int pt, CUdeviceptr *dptr, size_t bytesize) {
  (void)pt;
  bool pass;
  CUresult rc = alloc_common(h, dptr, bytesize, &pass);
  if (pass) return _mt_hook_real[h] ? REAL(h, cuMemAlloc_v2)(dptr, bytesize) : CUDA_ERROR_NOT_INITIALIZED;
  return rc;
}

CUresult impl_alloc_pitch(int h, int pt, CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes, size_t Height,
                          unsigned int ElementSizeBytes) {
  (void)pt;
  if (pPitch == NULL || WidthInBytes == 0 || Height == 0 ||
      (ElementSizeBytes != 4 && ElementSizeBytes != 8 && ElementSizeBytes != 16))
    return _mt_hook_real[h] ? REAL(h, cuMemAllocPitch_v2)(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes)
                            : CUDA_ERROR_NOT_INITIALIZED;
  size_t pitch = (WidthInBytes + 511) / 512 * 512; /* the driver's texture pitch alignment */
  bool pass;
  CUresult rc = alloc_common(h, dptr, pitch * Height, &pass);
  if (pass) return REAL(h, cuMemAllocPitch_v2)(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes);
  if (rc == CUDA_SUCCESS) *pPitch = pitch;
  return rc;
}

CUresult impl_alloc_async(int h, int pt, CUdeviceptr *dptr, size_t bytesize, CUstream hStream) {
  bool pass;
  CUresult rc = alloc_common(h, dptr, bytesize, &pass);
  if (pass) return _mt_hook_real[h] ? REAL(h, cuMemAllocAsync)(dptr, bytesize, hStream) : CUDA_ERROR_NOT_INITIALIZED;
  if (rc == CUDA_SUCCESS) _mt_capture_alloc(_mt_stream_of(hStream, pt), (uintptr_t)*dptr);
  return rc;
}

CUresult impl_alloc_pool(int h, int pt, CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream) {
  bool pass;
  CUresult rc = alloc_common(h, dptr, bytesize, &pass);
  if (pass)
    return _mt_hook_real[h] ? REAL(h, cuMemAllocFromPoolAsync)(dptr, bytesize, pool, hStream)
                            : CUDA_ERROR_NOT_INITIALIZED;
  if (rc == CUDA_SUCCESS) _mt_capture_alloc(_mt_stream_of(hStream, pt), (uintptr_t)*dptr);
  return rc;
}

CUresult impl_free(int h, int pt, CUdeviceptr dptr) {
  (void)pt;
  if (_mt_owns((uintptr_t)dptr)) return _mt_cu_result(_mt_free((uintptr_t)dptr, 0, false));
  if (dptr == 0) return CUDA_SUCCESS;
  return _mt_hooks_init() && _mt_hook_real[h] ? REAL(h, cuMemFree_v2)(dptr) : CUDA_ERROR_NOT_INITIALIZED;
}

CUresult impl_free_async(int h, int pt, CUdeviceptr dptr, CUstream hStream) {
  if (_mt_owns((uintptr_t)dptr)) return _mt_cu_result(_mt_free((uintptr_t)dptr, _mt_stream_of(hStream, pt), true));
  return _mt_hooks_init() && _mt_hook_real[h] ? REAL(h, cuMemFreeAsync)(dptr, hStream) : CUDA_ERROR_NOT_INITIALIZED;
}

/* The budget is the device as far as the program can tell: frameworks size
 * their caches from this answer. */
CUresult impl_get_info(int h, int pt, size_t *free, size_t *total) {
  (void)pt;
  if (!_mt_hooks_init() || _mt_hook_real[h] == NULL) return CUDA_ERROR_NOT_INITIALIZED;
  if (_mt_pager_start() == NULL) return REAL(h, cuMemGetInfo_v2)(free, total);
  if (free == NULL || total == NULL) return CUDA_ERROR_INVALID_VALUE;
  _mt_mem_info(free, total);
  return CUDA_SUCCESS;
}

CUresult impl_addr_range(int h, int pt, CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr) {
  (void)pt;
  if (_mt_owns((uintptr_t)dptr)) {
    uintptr_t b;
    size_t s;
    int rc = _mt_region_range((uintptr_t)dptr, &b, &s);
    if (rc < 0) return CUDA_ERROR_NOT_FOUND;
    if (pbase) *pbase = (CUdeviceptr)b;
    if (psize) *psize = s;
    return CUDA_SUCCESS;
  }
  return _mt_hooks_init() && _mt_hook_real[h] ? REAL(h, cuMemGetAddressRange_v2)(pbase, psize, dptr)
                                              : CUDA_ERROR_NOT_INITIALIZED;
}

/* One attribute of one of our regions; 1 when answered, 0 to ask the driver.
 * Everything a framework asks about a pointer (cudaPointerGetAttributes:
 * type, device, context) is answered here, because the driver knows only
 * chunks that are mapped right now, and a region's chunks may be on the
 * host or nowhere yet. */
static int our_attr(void *data, CUpointer_attribute a, uintptr_t p, uintptr_t base, size_t size) {
  uint64_t ctx;
  int ordinal;
  switch (a) {
    case CU_POINTER_ATTRIBUTE_CONTEXT:
      _mt_pager_device(&ctx, &ordinal);
      *(CUcontext *)data = (CUcontext)(uintptr_t)ctx;
      return 1;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
      _mt_pager_device(&ctx, &ordinal);
      *(int *)data = ordinal;
      return 1;
    case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS: *(int *)data = 0; return 1;
    case CU_POINTER_ATTRIBUTE_ACCESS_FLAGS: *(int *)data = CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE; return 1;
    case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE: *(CUmemoryPool *)data = NULL; return 1;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE: *(unsigned *)data = CU_MEMORYTYPE_DEVICE; return 1;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER: *(CUdeviceptr *)data = (CUdeviceptr)p; return 1;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER: *(void **)data = NULL; return 1;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED: *(unsigned *)data = 0; return 1;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR: *(CUdeviceptr *)data = (CUdeviceptr)base; return 1;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE: *(size_t *)data = size; return 1;
    case CU_POINTER_ATTRIBUTE_MAPPED: *(unsigned *)data = 1; return 1;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID: *(unsigned long long *)data = (unsigned long long)base; return 1;
    default: return 0;
  }
}

CUresult impl_ptr_attr(int h, int pt, void *data, CUpointer_attribute attribute, CUdeviceptr ptr) {
  (void)pt;
  uintptr_t base;
  size_t size;
  if (data != NULL && _mt_owns((uintptr_t)ptr) && _mt_region_range((uintptr_t)ptr, &base, &size) == 0 &&
      our_attr(data, attribute, (uintptr_t)ptr, base, size))
    return CUDA_SUCCESS;
  return _mt_hooks_init() && _mt_hook_real[h] ? REAL(h, cuPointerGetAttribute)(data, attribute, ptr)
                                              : CUDA_ERROR_NOT_INITIALIZED;
}

CUresult impl_ptr_attrs(int h, int pt, unsigned int numAttributes, CUpointer_attribute *attributes, void **data,
                        CUdeviceptr ptr) {
  (void)pt;
  if (!_mt_hooks_init() || _mt_hook_real[h] == NULL) return CUDA_ERROR_NOT_INITIALIZED;
  uintptr_t base;
  size_t size;
  if (!_mt_owns((uintptr_t)ptr) || _mt_region_range((uintptr_t)ptr, &base, &size) < 0 || attributes == NULL ||
      data == NULL)
    return REAL(h, cuPointerGetAttributes)(numAttributes, attributes, data, ptr);
  /* Ask the driver for all (it knows contexts and devices of mapped
   * memory), then overwrite what only we know. Its answer for an unmapped
   * chunk is an error, which our values replace. */
  CUresult rc = REAL(h, cuPointerGetAttributes)(numAttributes, attributes, data, ptr);
  for (unsigned i = 0; i < numAttributes; i++)
    if (data[i] != NULL) our_attr(data[i], attributes[i], (uintptr_t)ptr, base, size);
  return rc == CUDA_ERROR_INVALID_VALUE ? CUDA_SUCCESS : rc;
}
