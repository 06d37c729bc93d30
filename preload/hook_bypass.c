/*
 * hook_bypass.c - device memory that reaches the GPU around mtalloc.
 *
 * mtalloc pages what is allocated through cuMemAlloc* and friends. A program
 * can also build device memory itself from the virtual-memory API
 * (cuMemCreate + cuMemMap): PyTorch's native allocator does exactly that
 * with expandable_segments:True, which a user selects with
 * PYTORCH_ALLOC_CONF (read first by PyTorch 2.11) or PYTORCH_CUDA_ALLOC_CONF.
 * That memory is invisible to the pager: not paged, not in the budget. These
 * two hooks only notice it: cuMemCreate counts device-located bytes in the
 * `bypassed_bytes` statistic, and the first such call (or the first mapping
 * outside the pager's range) prints one warning naming the setting
 * responsible. Both calls are forwarded unchanged.
 *
 * The pager's own cuMemCreate/cuMemMap calls go through the core's driver
 * table (libmtalloc/driver.h, resolved with the real dlsym), never through
 * these exported symbols, so they are not counted.
 *
 * Threading: a relaxed counter and a once-flag; no lock.
 */
#include <stdatomic.h>
#include <stdlib.h>

#include "hooks.h"
#include "internal.h"
#include "pager.h"
#include "stats.h"

static atomic_bool warned;

static void warn_once(size_t bytes) {
  if (atomic_exchange(&warned, true)) return;
  const char *name = "PYTORCH_ALLOC_CONF", *conf = getenv(name);
  if (conf == NULL) conf = getenv(name = "PYTORCH_CUDA_ALLOC_CONF");
  if (conf != NULL)
    mt_warn("device memory is being allocated around mtalloc (cuMemCreate, %zu bytes so far): "
            "%s=\"%s\" selects PyTorch's own allocator, which mtalloc cannot page; set %s to "
            "backend:cudaMallocAsync (or unset it); see bypassed_bytes in the stats",
            bytes, name, conf, name);
  else
    mt_warn("device memory is being allocated around mtalloc (cuMemCreate, %zu bytes so far): "
            "something in the program uses the virtual-memory API directly, and mtalloc cannot "
            "page that memory; see bypassed_bytes in the stats", bytes);
}

CUresult impl_mem_create(int h, int pt, CUmemGenericAllocationHandle *handle, size_t size,
                         const CUmemAllocationProp *prop, unsigned long long flags) {
  (void)pt;
  if (!_mt_hooks_init() || _mt_hook_real[h] == NULL) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult rc = REAL(h, cuMemCreate)(handle, size, prop, flags);
  if (rc == CUDA_SUCCESS && prop != NULL && prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE) {
    uint64_t total = mt_stat_add(bypassed_bytes, size) + size;
    warn_once((size_t)total);
  }
  return rc;
}

CUresult impl_mem_map(int h, int pt, CUdeviceptr ptr, size_t size, size_t offset,
                      CUmemGenericAllocationHandle handle, unsigned long long flags) {
  (void)pt;
  if (!_mt_hooks_init() || _mt_hook_real[h] == NULL) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult rc = REAL(h, cuMemMap)(ptr, size, offset, handle, flags);
  if (rc == CUDA_SUCCESS && !_mt_owns((uintptr_t)ptr)) warn_once((size_t)mt_stat_get(bypassed_bytes));
  return rc;
}
