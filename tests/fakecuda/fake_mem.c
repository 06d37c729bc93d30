/*
 * fake_mem.c - linear device memory (cuMemAlloc*), pinned and registered
 * host memory, and pointer queries.
 *
 * Concept: each allocation is its own anonymous mmap, so a kernel that runs
 * past the end of the last page, or touches memory after cuMemFree, faults
 * as it would on a GPU. Device addresses are host addresses (unified
 * addressing), so the host pointer of pinned memory is also its device
 * pointer. Every range lives in one table sorted by base address, which
 * answers cuMemGetAddressRange and cuPointerGetAttribute(s); VMM mappings
 * (fake_vmm.c) are consulted after it.
 *
 * Accounting: device allocations count their requested size against
 * FAKECUDA_MEM; host memory never counts. cuMemFreeAsync marks the range
 * free-pending at once (a second free is CUDA_ERROR_INVALID_VALUE) and the
 * memory is released, and uncounted, when the stream reaches the free.
 * cuMemFree waits for the whole device first, as the real one does.
 *
 * Threading: the table and counters are under g_fc.mu.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fake_internal.h"

typedef enum { R_DEVICE, R_HOST_ALLOC, R_HOST_REGISTERED } range_kind_t;

typedef struct range {
  uintptr_t base;
  size_t size;      /* requested bytes */
  size_t map_size;  /* bytes mmap'ed (0 for registered memory) */
  range_kind_t kind;
  bool free_pending;
  uint64_t id;      /* CU_POINTER_ATTRIBUTE_BUFFER_ID */
} range_t;

static range_t *ranges; /* sorted by base */
static size_t nranges, cap_ranges;
static uint64_t next_buffer_id = 1;

/* Index of the first range with base > p. */
static size_t upper_bound(uintptr_t p) {
  size_t lo = 0, hi = nranges;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (ranges[mid].base <= p)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

/* The range containing p, or NULL. */
static range_t *range_find(uintptr_t p) {
  size_t i = upper_bound(p);
  if (i == 0) return NULL;
  range_t *r = &ranges[i - 1];
  size_t extent = r->size ? r->size : 1;
  return p - r->base < extent ? r : NULL;
}

static range_t *range_exact(uintptr_t p) {
  range_t *r = range_find(p);
  return r && r->base == p ? r : NULL;
}

static bool range_insert(range_t r) {
  if (nranges == cap_ranges) {
    size_t ncap = cap_ranges ? cap_ranges * 2 : 64;
    range_t *n = realloc(ranges, ncap * sizeof *n);
    if (!n) return false;
    ranges = n;
    cap_ranges = ncap;
  }
  size_t i = upper_bound(r.base);
  memmove(&ranges[i + 1], &ranges[i], (nranges - i) * sizeof *ranges);
  r.id = next_buffer_id++;
  ranges[i] = r;
  nranges++;
  return true;
}

static void range_remove(range_t *r) {
  size_t i = (size_t)(r - ranges);
  memmove(&ranges[i], &ranges[i + 1], (nranges - i - 1) * sizeof *ranges);
  nranges--;
}

static size_t page_round(size_t n) {
  size_t pg = (size_t)sysconf(_SC_PAGESIZE);
  return (n + pg - 1) / pg * pg;
}

/* mmaps and records a range; caller holds mu. */
static CUresult alloc_range(uintptr_t *out, size_t size, range_kind_t kind) {
  if (size == 0) return CUDA_ERROR_INVALID_VALUE;
  if (kind == R_DEVICE && !fc_device_charge(size)) return CUDA_ERROR_OUT_OF_MEMORY;
  size_t map = page_round(size);
  void *p = mmap(NULL, map, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                 -1, 0);
  if (p == MAP_FAILED ||
      !range_insert((range_t){.base = (uintptr_t)p, .size = size, .map_size = map, .kind = kind})) {
    if (p != MAP_FAILED) munmap(p, map);
    if (kind == R_DEVICE) fc_device_uncharge(size);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  *out = (uintptr_t)p;
  return CUDA_SUCCESS;
}

static void release_range(range_t *r) {
  if (r->map_size) munmap((void *)r->base, r->map_size);
  if (r->kind == R_DEVICE) fc_device_uncharge(r->size);
  range_remove(r);
}

void fc_mem_free_now(uintptr_t ptr) {
  range_t *r = range_exact(ptr);
  if (r && r->kind == R_DEVICE) release_range(r);
}

/* ---- device memory ---------------------------------------------------------- */

FC_API CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize) {
  CUresult r = fc_check_ctx();
  if (r) return r;
  if (!dptr) return CUDA_ERROR_INVALID_VALUE;
  uintptr_t p = 0;
  fc_lock();
  r = alloc_range(&p, bytesize, R_DEVICE);
  fc_unlock();
  if (r == CUDA_SUCCESS) *dptr = (CUdeviceptr)p;
  return r;
}

FC_API CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes,
                                   size_t Height, unsigned int ElementSizeBytes) {
  if (!pPitch || (ElementSizeBytes != 4 && ElementSizeBytes != 8 && ElementSizeBytes != 16))
    return CUDA_ERROR_INVALID_VALUE;
  if (WidthInBytes == 0 || Height == 0) return CUDA_ERROR_INVALID_VALUE;
  size_t pitch = (WidthInBytes + 511) / 512 * 512;
  CUresult r = cuMemAlloc_v2(dptr, pitch * Height);
  if (r == CUDA_SUCCESS) *pPitch = pitch;
  return r;
}

FC_API CUresult cuMemFree_v2(CUdeviceptr dptr) {
  CUresult r = fc_check_ctx();
  if (r) return r;
  fc_lock();
  range_t *rg = range_exact((uintptr_t)dptr);
  if (!rg || rg->kind != R_DEVICE || rg->free_pending) {
    r = dptr ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS; /* cuMemFree(0) is a no-op */
  } else if ((r = fc_capture_unsafe_call()) != CUDA_SUCCESS) {
  } else {
    rg->free_pending = true;
    fc_sync_all(); /* the real cuMemFree synchronises the device first */
    fc_mem_free_now((uintptr_t)dptr);
  }
  fc_unlock();
  return r;
}

static CUresult alloc_async(CUdeviceptr *dptr, size_t bytesize, CUstream hStream) {
  CUresult r = fc_check_ctx();
  if (r) return r;
  if (!dptr) return CUDA_ERROR_INVALID_VALUE;
  fc_lock();
  uintptr_t p = 0;
  if (!fc_stream_get(hStream))
    r = CUDA_ERROR_INVALID_HANDLE;
  else
    r = alloc_range(&p, bytesize, R_DEVICE);
  fc_unlock();
  if (r == CUDA_SUCCESS) *dptr = (CUdeviceptr)p;
  return r;
}

FC_API CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream) {
  return alloc_async(dptr, bytesize, hStream);
}
FC_API CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream) {
  return alloc_async(dptr, bytesize, hStream);
}
FC_API CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                        CUstream hStream) {
  (void)pool;
  return alloc_async(dptr, bytesize, hStream);
}
FC_API CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize,
                                             CUmemoryPool pool, CUstream hStream) {
  (void)pool;
  return alloc_async(dptr, bytesize, hStream);
}

static CUresult free_async(CUdeviceptr dptr, CUstream hStream) {
  CUresult r = fc_check_ctx();
  if (r) return r;
  fc_op_t *op = fc_op_new(FC_OP_FREE, 0);
  if (!op) return CUDA_ERROR_OUT_OF_MEMORY;
  op->u.free.ptr = (uintptr_t)dptr;
  op->handle = hStream;
  fc_lock();
  fc_stream_t *s = fc_stream_get(hStream);
  range_t *rg = range_exact((uintptr_t)dptr);
  if (!s) {
    fc_op_free(op);
    r = CUDA_ERROR_INVALID_HANDLE;
  } else if (!rg || rg->kind != R_DEVICE || rg->free_pending) {
    fc_op_free(op);
    r = CUDA_ERROR_INVALID_VALUE;
  } else {
    r = fc_submit(s, op, NULL);
    if (r == CUDA_SUCCESS) rg->free_pending = true;
  }
  fc_unlock();
  return r;
}

FC_API CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream) {
  return free_async(dptr, hStream);
}
FC_API CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream) {
  return free_async(dptr, hStream);
}

/* ---- host memory -------------------------------------------------------------- */

FC_API CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags) {
  fc_count(FC_CALL_cuMemHostAlloc);
  CUresult r = fc_check_ctx();
  if (r) return r;
  unsigned ok = CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_WRITECOMBINED;
  if (!pp || (Flags & ~ok)) return CUDA_ERROR_INVALID_VALUE;
  uintptr_t p = 0;
  fc_lock();
  r = alloc_range(&p, bytesize, R_HOST_ALLOC);
  fc_unlock();
  if (r == CUDA_SUCCESS) *pp = (void *)p;
  return r;
}

FC_API CUresult cuMemAllocHost_v2(void **pp, size_t bytesize) {
  return cuMemHostAlloc(pp, bytesize, 0);
}

FC_API CUresult cuMemFreeHost(void *p) {
  fc_count(FC_CALL_cuMemFreeHost);
  CUresult r = fc_check_ctx();
  if (r) return r;
  fc_lock();
  range_t *rg = range_exact((uintptr_t)p);
  if (!rg || rg->kind != R_HOST_ALLOC)
    r = CUDA_ERROR_INVALID_VALUE;
  else
    release_range(rg);
  fc_unlock();
  return r;
}

FC_API CUresult cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int Flags) {
  CUresult r = fc_check_ctx();
  if (r) return r;
  if (!p || bytesize == 0) return CUDA_ERROR_INVALID_VALUE;
  (void)Flags;
  uintptr_t b = (uintptr_t)p;
  fc_lock();
  /* any overlap with a known range is an error */
  size_t i = upper_bound(b + bytesize - 1);
  if (i > 0 && ranges[i - 1].base + ranges[i - 1].size > b) {
    r = ranges[i - 1].kind == R_DEVICE ? CUDA_ERROR_INVALID_VALUE
                                       : CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
  } else if (!range_insert((range_t){.base = b, .size = bytesize, .kind = R_HOST_REGISTERED})) {
    r = CUDA_ERROR_OUT_OF_MEMORY;
  }
  fc_unlock();
  return r;
}

FC_API CUresult cuMemHostUnregister(void *p) {
  CUresult r = fc_check_ctx();
  if (r) return r;
  fc_lock();
  range_t *rg = range_exact((uintptr_t)p);
  if (!rg || rg->kind != R_HOST_REGISTERED)
    r = CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
  else
    range_remove(rg);
  fc_unlock();
  return r;
}

FC_API CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *pdptr, void *p, unsigned int Flags) {
  CUresult r = fc_check_ctx();
  if (r) return r;
  if (!pdptr || Flags != 0) return CUDA_ERROR_INVALID_VALUE;
  fc_lock();
  range_t *rg = range_find((uintptr_t)p);
  if (!rg || rg->kind == R_DEVICE) r = CUDA_ERROR_INVALID_VALUE;
  fc_unlock();
  if (r == CUDA_SUCCESS) *pdptr = (CUdeviceptr)(uintptr_t)p;
  return r;
}

/* ---- pointer queries ------------------------------------------------------------ */

typedef struct ptr_info {
  bool known;
  bool device;
  uintptr_t base;
  size_t size;
  uint64_t id;
} ptr_info_t;

static ptr_info_t ptr_info(uintptr_t p) {
  ptr_info_t pi = {0};
  range_t *rg = range_find(p);
  if (rg && !(rg->kind == R_DEVICE && rg->free_pending)) {
    pi = (ptr_info_t){true, rg->kind == R_DEVICE, rg->base, rg->size, rg->id};
  } else if (fc_vmm_lookup(p, &pi.base, &pi.size, &pi.device, &pi.id)) {
    pi.known = true;
  }
  return pi;
}

fc_mem_kind_t fc_mem_kind(uintptr_t p) {
  ptr_info_t pi = ptr_info(p);
  if (!pi.known) return FC_MEM_PAGEABLE;
  return pi.device && !fc_vmm_host_located(p) ? FC_MEM_DEVICE : FC_MEM_PINNED;
}

FC_API CUresult cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr) {
  CUresult r = fc_check_ctx();
  if (r) return r;
  fc_lock();
  ptr_info_t pi = ptr_info((uintptr_t)dptr);
  fc_unlock();
  if (!pi.known || !pi.device) return CUDA_ERROR_NOT_FOUND;
  if (pbase) *pbase = (CUdeviceptr)pi.base;
  if (psize) *psize = pi.size;
  return CUDA_SUCCESS;
}

/* Writes one attribute of a known pointer; INVALID_VALUE if it does not
 * apply. */
static CUresult attr_value(const ptr_info_t *pi, uintptr_t p, CUpointer_attribute a, void *data) {
  switch (a) {
    case CU_POINTER_ATTRIBUTE_CONTEXT: *(CUcontext *)data = fc_primary_ctx; break;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
      *(unsigned *)data = pi->device ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
      break;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER: *(CUdeviceptr *)data = (CUdeviceptr)p; break;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
      if (pi->device) return CUDA_ERROR_INVALID_VALUE;
      *(void **)data = (void *)p;
      break;
    case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS: *(int *)data = 0; break;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID: *(unsigned long long *)data = pi->id; break;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED: *(int *)data = 0; break;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: *(int *)data = 0; break;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR: *(CUdeviceptr *)data = (CUdeviceptr)pi->base; break;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE: *(size_t *)data = pi->size; break;
    case CU_POINTER_ATTRIBUTE_MAPPED: *(int *)data = 1; break;
    case CU_POINTER_ATTRIBUTE_ACCESS_FLAGS:
      *(int *)data = CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE;
      break;
    case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE: *(CUmemoryPool *)data = NULL; break;
    default: return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

FC_API CUresult cuPointerGetAttribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr) {
  CUresult r = fc_check_init();
  if (r) return r;
  if (!data) return CUDA_ERROR_INVALID_VALUE;
  fc_lock();
  ptr_info_t pi = ptr_info((uintptr_t)ptr);
  fc_unlock();
  if (!pi.known) return CUDA_ERROR_INVALID_VALUE;
  return attr_value(&pi, (uintptr_t)ptr, attribute, data);
}

FC_API CUresult cuPointerGetAttributes(unsigned int numAttributes, CUpointer_attribute *attributes,
                                       void **data, CUdeviceptr ptr) {
  CUresult r = fc_check_init();
  if (r) return r;
  if (!attributes || !data) return CUDA_ERROR_INVALID_VALUE;
  fc_lock();
  ptr_info_t pi = ptr_info((uintptr_t)ptr);
  fc_unlock();
  for (unsigned i = 0; i < numAttributes; i++) {
    if (!data[i]) continue;
    if (!pi.known) {
      /* unknown pointers are not an error here: type 0, everything zero */
      switch (attributes[i]) {
        case CU_POINTER_ATTRIBUTE_MEMORY_TYPE: *(unsigned *)data[i] = 0; break;
        case CU_POINTER_ATTRIBUTE_CONTEXT: *(CUcontext *)data[i] = NULL; break;
        case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
        case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR: *(CUdeviceptr *)data[i] = 0; break;
        case CU_POINTER_ATTRIBUTE_HOST_POINTER: *(void **)data[i] = NULL; break;
        case CU_POINTER_ATTRIBUTE_RANGE_SIZE: *(size_t *)data[i] = 0; break;
        case CU_POINTER_ATTRIBUTE_BUFFER_ID: *(unsigned long long *)data[i] = 0; break;
        case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: *(int *)data[i] = -2; break;
        default: *(int *)data[i] = 0; break;
      }
      continue;
    }
    if (attr_value(&pi, (uintptr_t)ptr, attributes[i], data[i]) != CUDA_SUCCESS &&
        attributes[i] == CU_POINTER_ATTRIBUTE_HOST_POINTER)
      *(void **)data[i] = NULL;
  }
  return CUDA_SUCCESS;
}
