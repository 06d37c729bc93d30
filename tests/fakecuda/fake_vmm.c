/*
 * fake_vmm.c - the virtual memory management API: address reservations,
 * physical allocations (handles), mappings and access rights.
 *
 * Concept, as the real driver has it:
 *   reservation  cuMemAddressReserve: address space only. Here an mmap of
 *                PROT_NONE, so touching it faults.
 *   handle       cuMemCreate: physical memory of a granularity multiple,
 *                on the device (counts against FAKECUDA_MEM) or on the host
 *                (CU_MEM_LOCATION_TYPE_HOST / HOST_NUMA / HOST_NUMA_CURRENT;
 *                does not count). Backed by a memfd, so one handle mapped
 *                at two addresses shows the same bytes.
 *   mapping      cuMemMap: the handle's pages MAP_SHARED|MAP_FIXED over part
 *                of a reservation, still PROT_NONE until cuMemSetAccess.
 * cuMemUnmap puts PROT_NONE anonymous memory back (the range stays
 * reserved); it must cover whole mappings exactly, else
 * CUDA_ERROR_INVALID_VALUE. Physical memory is freed (and uncounted) only
 * once the handle is released (refcount 0: cuMemRelease balances cuMemCreate
 * and cuMemRetainAllocationHandle) AND no mapping uses it any more.
 *
 * Invariants: every address, size and offset is a multiple of
 * FC_GRANULARITY (2 MiB) -- anything else is CUDA_ERROR_INVALID_VALUE; each
 * reservation has a per-granule table of the mapping covering it (or NULL),
 * so map/unmap/lookup cost O(granules touched), not O(mappings).
 *
 * Threading: all tables are under g_fc.mu. Unmapping does not wait for
 * streams, so a kernel still running on unmapped memory faults: the pager
 * bug the fake exists to expose.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fake_internal.h"

typedef struct phys {
  size_t size;
  CUmemAllocationProp prop;
  int fd;
  unsigned refs;      /* cuMemCreate + retains - releases */
  unsigned maps;      /* live mappings */
  bool device;        /* counts against capacity */
  uint64_t id;
} phys_t;

typedef struct mapping {
  uintptr_t va;
  size_t size;
  size_t offset;      /* into the handle */
  phys_t *ph;
  int prot;
} mapping_t;

typedef struct reservation {
  uintptr_t base;
  size_t size;
  mapping_t **granule; /* size / FC_GRANULARITY entries */
} reservation_t;

static reservation_t *resv;
static size_t nresv, cap_resv;
static fc_set_t phys_set;
static uint64_t next_phys_id = 1;

static bool granular(size_t v) { return v % FC_GRANULARITY == 0; }

static reservation_t *resv_find(uintptr_t p) {
  for (size_t i = 0; i < nresv; i++)
    if (p - resv[i].base < resv[i].size) return &resv[i];
  return NULL;
}

static phys_t *phys_get(CUmemGenericAllocationHandle h) {
  void *p = (void *)(uintptr_t)h;
  return fc_set_has(&phys_set, p) ? p : NULL;
}

/* Frees the physical memory once nothing holds it; caller holds mu. */
static void phys_maybe_free(phys_t *ph) {
  if (ph->refs || ph->maps) return;
  close(ph->fd);
  if (ph->device) fc_device_uncharge(ph->size);
  free(ph);
}

bool fc_vmm_lookup(uintptr_t p, uintptr_t *base, size_t *size, bool *device, uint64_t *id) {
  reservation_t *rv = resv_find(p);
  if (!rv) return false;
  mapping_t *m = rv->granule[(p - rv->base) / FC_GRANULARITY];
  if (!m) return false;
  *base = m->va;
  *size = m->size;
  *device = true; /* a mapping's address is a device virtual address */
  *id = m->ph->id;
  return true;
}

bool fc_vmm_host_located(uintptr_t p) {
  reservation_t *rv = resv_find(p);
  if (!rv) return false;
  mapping_t *m = rv->granule[(p - rv->base) / FC_GRANULARITY];
  return m && m->ph->prop.location.type != CU_MEM_LOCATION_TYPE_DEVICE;
}

/* ---- reservations ---------------------------------------------------------- */

FC_API CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment,
                                    CUdeviceptr addr, unsigned long long flags) {
  CUresult r = fc_check_init();
  if (r) return r;
  if (!ptr || size == 0 || !granular(size) || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (alignment == 0) alignment = FC_GRANULARITY;
  if (alignment & (alignment - 1) || !granular(alignment) || !granular((size_t)addr))
    return CUDA_ERROR_INVALID_VALUE;
  const int mflags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
  void *p = MAP_FAILED;
  if (addr && (size_t)addr % alignment == 0) {
    p = mmap((void *)(uintptr_t)addr, size, PROT_NONE, mflags | MAP_FIXED_NOREPLACE, -1, 0);
    if (p != MAP_FAILED && p != (void *)(uintptr_t)addr) { /* old kernels ignore NOREPLACE */
      munmap(p, size);
      p = MAP_FAILED;
    }
  }
  if (p == MAP_FAILED) {
    /* over-reserve and trim to the alignment */
    size_t span = size + alignment;
    void *q = mmap(NULL, span, PROT_NONE, mflags, -1, 0);
    if (q == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
    uintptr_t a = ((uintptr_t)q + alignment - 1) & ~(uintptr_t)(alignment - 1);
    if (a > (uintptr_t)q) munmap(q, a - (uintptr_t)q);
    uintptr_t end = (uintptr_t)q + span;
    if (end > a + size) munmap((void *)(a + size), end - (a + size));
    p = (void *)a;
  }
  mapping_t **gran = calloc(size / FC_GRANULARITY, sizeof *gran);
  fc_lock();
  if (gran && nresv == cap_resv) {
    size_t ncap = cap_resv ? cap_resv * 2 : 8;
    reservation_t *n = realloc(resv, ncap * sizeof *n);
    if (n) {
      resv = n;
      cap_resv = ncap;
    }
  }
  if (!gran || nresv == cap_resv) {
    fc_unlock();
    free(gran);
    munmap(p, size);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  resv[nresv++] = (reservation_t){(uintptr_t)p, size, gran};
  fc_unlock();
  *ptr = (CUdeviceptr)(uintptr_t)p;
  return CUDA_SUCCESS;
}

FC_API CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size) {
  CUresult r = fc_check_init();
  if (r) return r;
  fc_lock();
  reservation_t *rv = resv_find((uintptr_t)ptr);
  if (!rv || rv->base != (uintptr_t)ptr || rv->size != size) {
    fc_unlock();
    return CUDA_ERROR_INVALID_VALUE;
  }
  /* mappings left behind are dropped with the address space */
  size_t ng = size / FC_GRANULARITY;
  for (size_t i = 0; i < ng;) {
    mapping_t *m = rv->granule[i];
    if (!m) {
      i++;
      continue;
    }
    i += m->size / FC_GRANULARITY;
    m->ph->maps--;
    phys_maybe_free(m->ph);
    free(m);
  }
  munmap((void *)rv->base, rv->size);
  free(rv->granule);
  *rv = resv[--nresv];
  fc_unlock();
  return CUDA_SUCCESS;
}

/* ---- physical memory ------------------------------------------------------- */

static bool host_location(CUmemLocationType t) {
  return t == CU_MEM_LOCATION_TYPE_HOST || t == CU_MEM_LOCATION_TYPE_HOST_NUMA ||
         t == CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT;
}

FC_API CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                            const CUmemAllocationProp *prop, unsigned long long flags) {
  fc_count(FC_CALL_cuMemCreate);
  CUresult r = fc_check_init();
  if (r) return r;
  if (!handle || !prop || size == 0 || !granular(size) || flags != 0)
    return CUDA_ERROR_INVALID_VALUE;
  if (prop->type != CU_MEM_ALLOCATION_TYPE_PINNED) return CUDA_ERROR_INVALID_VALUE;
  bool device = prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE;
  if (device && prop->location.id != 0) return CUDA_ERROR_INVALID_DEVICE;
  if (!device && !host_location(prop->location.type)) return CUDA_ERROR_INVALID_VALUE;
  phys_t *ph = calloc(1, sizeof *ph);
  if (!ph) return CUDA_ERROR_OUT_OF_MEMORY;
  ph->fd = memfd_create("fakecuda-phys", MFD_CLOEXEC);
  if (ph->fd < 0 || ftruncate(ph->fd, (off_t)size) != 0) {
    if (ph->fd >= 0) close(ph->fd);
    free(ph);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  ph->size = size;
  ph->prop = *prop;
  ph->refs = 1;
  ph->device = device;
  fc_lock();
  if (device && !fc_device_charge(size)) {
    r = CUDA_ERROR_OUT_OF_MEMORY;
  } else if (!fc_set_add(&phys_set, ph)) {
    if (device) fc_device_uncharge(size);
    r = CUDA_ERROR_OUT_OF_MEMORY;
  } else {
    ph->id = next_phys_id++;
  }
  fc_unlock();
  if (r != CUDA_SUCCESS) {
    close(ph->fd);
    free(ph);
    return r;
  }
  *handle = (CUmemGenericAllocationHandle)(uintptr_t)ph;
  return CUDA_SUCCESS;
}

FC_API CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  fc_count(FC_CALL_cuMemRelease);
  CUresult r = fc_check_init();
  if (r) return r;
  fc_lock();
  phys_t *ph = phys_get(handle);
  if (!ph) {
    r = CUDA_ERROR_INVALID_VALUE;
  } else if (--ph->refs == 0) {
    fc_set_del(&phys_set, ph);
    phys_maybe_free(ph);
  }
  fc_unlock();
  return r;
}

FC_API CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr) {
  CUresult r = fc_check_init();
  if (r) return r;
  if (!handle) return CUDA_ERROR_INVALID_VALUE;
  fc_lock();
  reservation_t *rv = resv_find((uintptr_t)addr);
  mapping_t *m = rv ? rv->granule[((uintptr_t)addr - rv->base) / FC_GRANULARITY] : NULL;
  if (!m) {
    r = CUDA_ERROR_INVALID_VALUE;
  } else {
    if (m->ph->refs++ == 0) fc_set_add(&phys_set, m->ph); /* released but mapped: revive */
    *handle = (CUmemGenericAllocationHandle)(uintptr_t)m->ph;
  }
  fc_unlock();
  return r;
}

FC_API CUresult cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp *prop,
                                                       CUmemGenericAllocationHandle handle) {
  CUresult r = fc_check_init();
  if (r) return r;
  if (!prop) return CUDA_ERROR_INVALID_VALUE;
  fc_lock();
  phys_t *ph = phys_get(handle);
  if (ph)
    *prop = ph->prop;
  else
    r = CUDA_ERROR_INVALID_VALUE;
  fc_unlock();
  return r;
}

FC_API CUresult cuMemGetAllocationGranularity(size_t *granularity, const CUmemAllocationProp *prop,
                                              CUmemAllocationGranularity_flags option) {
  CUresult r = fc_check_init();
  if (r) return r;
  if (!granularity || !prop) return CUDA_ERROR_INVALID_VALUE;
  if (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM && option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED)
    return CUDA_ERROR_INVALID_VALUE;
  *granularity = FC_GRANULARITY;
  return CUDA_SUCCESS;
}

/* ---- mappings -------------------------------------------------------------- */

/* The reservation holding all of [p, p+size), or NULL. */
static reservation_t *resv_covering(uintptr_t p, size_t size) {
  reservation_t *rv = resv_find(p);
  if (!rv || size > rv->size - (p - rv->base)) return NULL;
  return rv;
}

FC_API CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                         CUmemGenericAllocationHandle handle, unsigned long long flags) {
  fc_count(FC_CALL_cuMemMap);
  CUresult r = fc_check_init();
  if (r) return r;
  uintptr_t p = (uintptr_t)ptr;
  /* cuda.h, cuMemMap: "offset - Offset into the memory represented by
   * handle from which to start mapping. Note: currently must be zero." */
  if (size == 0 || !granular(p) || !granular(size) || offset != 0 || flags != 0)
    return CUDA_ERROR_INVALID_VALUE;
  fc_lock();
  phys_t *ph = phys_get(handle);
  reservation_t *rv = resv_covering(p, size);
  mapping_t *m = NULL;
  if (!ph || !rv || offset > ph->size || size > ph->size - offset) {
    r = CUDA_ERROR_INVALID_VALUE;
    goto out;
  }
  size_t g0 = (p - rv->base) / FC_GRANULARITY, ng = size / FC_GRANULARITY;
  for (size_t i = 0; i < ng; i++) {
    if (rv->granule[g0 + i]) {
      r = CUDA_ERROR_INVALID_VALUE; /* already mapped */
      goto out;
    }
  }
  m = malloc(sizeof *m);
  if (!m) {
    r = CUDA_ERROR_OUT_OF_MEMORY;
    goto out;
  }
  void *q = mmap((void *)p, size, PROT_NONE, MAP_SHARED | MAP_FIXED, ph->fd, (off_t)offset);
  if (q == MAP_FAILED) {
    free(m);
    r = CUDA_ERROR_OUT_OF_MEMORY;
    goto out;
  }
  *m = (mapping_t){p, size, offset, ph, PROT_NONE};
  for (size_t i = 0; i < ng; i++) rv->granule[g0 + i] = m;
  ph->maps++;
out:
  fc_unlock();
  return r;
}

FC_API CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
  fc_count(FC_CALL_cuMemUnmap);
  CUresult r = fc_check_init();
  if (r) return r;
  uintptr_t p = (uintptr_t)ptr;
  if (size == 0 || !granular(p) || !granular(size)) return CUDA_ERROR_INVALID_VALUE;
  fc_lock();
  /* A real driver's cuMemUnmap may wait for the device: count the calls
   * that would have waited for a copy (fakecuda_call_count). */
  if (g_fc.copies_inflight > 0) fc_count(FC_CALL_cuMemUnmap_busy);
  reservation_t *rv = resv_covering(p, size);
  if (!rv) {
    fc_unlock();
    return CUDA_ERROR_INVALID_VALUE;
  }
  size_t g0 = (p - rv->base) / FC_GRANULARITY, ng = size / FC_GRANULARITY;
  /* the range must be exactly a run of whole mappings, without holes */
  for (size_t i = 0; i < ng;) {
    mapping_t *m = rv->granule[g0 + i];
    if (!m || m->va != rv->base + (g0 + i) * FC_GRANULARITY ||
        m->size / FC_GRANULARITY > ng - i) {
      fc_unlock();
      return CUDA_ERROR_INVALID_VALUE;
    }
    i += m->size / FC_GRANULARITY;
  }
  mmap((void *)p, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
  for (size_t i = 0; i < ng;) {
    mapping_t *m = rv->granule[g0 + i];
    size_t mg = m->size / FC_GRANULARITY;
    for (size_t j = 0; j < mg; j++) rv->granule[g0 + i + j] = NULL;
    i += mg;
    m->ph->maps--;
    phys_maybe_free(m->ph);
    free(m);
  }
  fc_unlock();
  return CUDA_SUCCESS;
}

FC_API CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc,
                               size_t count) {
  fc_count(FC_CALL_cuMemSetAccess);
  CUresult r = fc_check_init();
  if (r) return r;
  /* Documented as synchronous for most uses, like cuMemUnmap: count the
   * calls that a copy in flight might have made wait. */
  fc_lock();
  if (g_fc.copies_inflight > 0) fc_count(FC_CALL_cuMemSetAccess_busy);
  fc_unlock();
  uintptr_t p = (uintptr_t)ptr;
  if (!desc || count == 0 || size == 0 || !granular(p) || !granular(size))
    return CUDA_ERROR_INVALID_VALUE;
  int prot = -1;
  for (size_t i = 0; i < count; i++) {
    if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE) continue; /* host access: no-op */
    if (desc[i].location.id != 0) return CUDA_ERROR_INVALID_DEVICE;
    switch (desc[i].flags) {
      case CU_MEM_ACCESS_FLAGS_PROT_NONE: prot = PROT_NONE; break;
      case CU_MEM_ACCESS_FLAGS_PROT_READ: prot = PROT_READ; break;
      case CU_MEM_ACCESS_FLAGS_PROT_READWRITE: prot = PROT_READ | PROT_WRITE; break;
      default: return CUDA_ERROR_INVALID_VALUE;
    }
  }
  fc_lock();
  reservation_t *rv = resv_covering(p, size);
  size_t g0 = rv ? (p - rv->base) / FC_GRANULARITY : 0, ng = size / FC_GRANULARITY;
  for (size_t i = 0; rv && i < ng; i++) {
    if (!rv->granule[g0 + i]) rv = NULL; /* every byte must be mapped */
  }
  if (!rv) {
    r = CUDA_ERROR_INVALID_VALUE;
  } else if (prot >= 0) {
    if (mprotect((void *)p, size, prot) != 0) r = CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; r == CUDA_SUCCESS && i < ng; i++) rv->granule[g0 + i]->prot = prot;
  }
  fc_unlock();
  return r;
}

FC_API CUresult cuMemGetAccess(unsigned long long *flags, const CUmemLocation *location,
                               CUdeviceptr ptr) {
  CUresult r = fc_check_init();
  if (r) return r;
  if (!flags || !location) return CUDA_ERROR_INVALID_VALUE;
  fc_lock();
  reservation_t *rv = resv_find((uintptr_t)ptr);
  mapping_t *m = rv ? rv->granule[((uintptr_t)ptr - rv->base) / FC_GRANULARITY] : NULL;
  if (!m)
    r = CUDA_ERROR_INVALID_VALUE;
  else
    *flags = m->prot == (PROT_READ | PROT_WRITE) ? CU_MEM_ACCESS_FLAGS_PROT_READWRITE
             : m->prot == PROT_READ             ? CU_MEM_ACCESS_FLAGS_PROT_READ
                                                : CU_MEM_ACCESS_FLAGS_PROT_NONE;
  fc_unlock();
  return r;
}
