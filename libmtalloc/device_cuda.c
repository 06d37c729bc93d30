/*
 * device_cuda.c - the device interface over the real CUDA driver.
 *
 * Physical chunks are cuMemCreate allocations mapped with cuMemMap into
 * address ranges from cuMemAddressReserve: the virtual-memory API is what
 * lets one address be backed by device memory now and by host memory (or
 * nothing) later, without the application's pointer changing.
 *
 * Host-located physical memory (CU_MEM_LOCATION_TYPE_HOST_NUMA) can be
 * mapped at a device address on drivers that support it; we find out by
 * trying once at open, because attribute queries for it vary between
 * drivers while a failed cuMemCreate is unambiguous.
 *
 * All calls run on the caller's thread with the context current at open:
 * the pager is driven from the application's own hooked calls, which always
 * have one.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "device.h"
#include "driver.h"
#include "internal.h"

typedef struct cuda_device {
  mt_device_t base;
  const mt_driver_t *drv;
  CUcontext ctx;
  CUdevice dev;
} cuda_device_t;

static int fail(const char *what, CUresult rc) {
  if (rc == CUDA_ERROR_OUT_OF_MEMORY) return -ENOMEM;
  /* At exit the driver may be torn down before the program's last frees
   * reach us: the memory goes with the process, and there is nothing to
   * report. */
  if (rc == CUDA_ERROR_DEINITIALIZED) return -ESHUTDOWN;
  mt_error("%s failed: %s", what, _mt_cu_errname(rc));
  _mt_cu_note_error(rc); /* what the application gets for this -EIO (_mt_cu_result) */
  return -EIO;
}

#define CD(d) ((cuda_device_t *)(d))
#define CALL(what, expr)                                         \
  do {                                                           \
    CUresult rc_ = (expr);                                       \
    if (rc_ != CUDA_SUCCESS) return fail(what, rc_);      \
  } while (0)

static int cd_reserve(mt_device_t *d, size_t size, size_t align, uintptr_t *va) {
  CUdeviceptr p = 0;
  CALL("cuMemAddressReserve", CD(d)->drv->cuMemAddressReserve(&p, size, align, 0, 0));
  *va = (uintptr_t)p;
  return 0;
}

static void cd_unreserve(mt_device_t *d, uintptr_t va, size_t size) {
  CD(d)->drv->cuMemAddressFree((CUdeviceptr)va, size);
}

static int cd_phys_create(mt_device_t *d, size_t size, bool on_host, mt_handle_t *h) {
  CUmemAllocationProp prop;
  memset(&prop, 0, sizeof(prop));
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  if (on_host) {
    /* MT_NUMA_NODE, else the GPU's own node: host copies travel over its link */
    int node = (int)_mt_opt_int(MT_OPT_NUMA_NODE);
    if (node < 0) node = d->info.host_numa_node < 0 ? 0 : d->info.host_numa_node;
    prop.location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
    prop.location.id = node;
  } else {
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = CD(d)->dev;
  }
  CUmemGenericAllocationHandle g;
  CALL("cuMemCreate", CD(d)->drv->cuMemCreate(&g, size, &prop, 0));
  *h = (mt_handle_t)g;
  return 0;
}

static void cd_phys_release(mt_device_t *d, mt_handle_t h) {
  CUresult rc = CD(d)->drv->cuMemRelease((CUmemGenericAllocationHandle)h);
  if (rc != CUDA_SUCCESS) fail("cuMemRelease", rc);
}

static int cd_map(mt_device_t *d, uintptr_t va, size_t size, mt_handle_t h, size_t off) {
  CALL("cuMemMap", CD(d)->drv->cuMemMap((CUdeviceptr)va, size, off, (CUmemGenericAllocationHandle)h, 0));
  return 0;
}

static int cd_set_access(mt_device_t *d, uintptr_t va, size_t size) {
  CUmemAccessDesc acc;
  memset(&acc, 0, sizeof(acc));
  acc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  acc.location.id = CD(d)->dev;
  acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  CALL("cuMemSetAccess", CD(d)->drv->cuMemSetAccess((CUdeviceptr)va, size, &acc, 1));
  return 0;
}

static int cd_unmap(mt_device_t *d, uintptr_t va, size_t size) {
  CALL("cuMemUnmap", CD(d)->drv->cuMemUnmap((CUdeviceptr)va, size));
  return 0;
}

static int cd_host_alloc(mt_device_t *d, size_t size, void **p) {
  CALL("cuMemHostAlloc", CD(d)->drv->cuMemHostAlloc(p, size, CU_MEMHOSTALLOC_PORTABLE));
  return 0;
}

static void cd_host_free(mt_device_t *d, void *p) {
  CD(d)->drv->cuMemFreeHost(p);
}

static int cd_host_register(mt_device_t *d, void *p, size_t size) {
  CALL("cuMemHostRegister", CD(d)->drv->cuMemHostRegister_v2(p, size, CU_MEMHOSTREGISTER_PORTABLE));
  return 0;
}

static void cd_host_unregister(mt_device_t *d, void *p) {
  CD(d)->drv->cuMemHostUnregister(p);
}

static int cd_copy(mt_device_t *d, uintptr_t dst, uintptr_t src, size_t n, mt_handle_t s) {
  CALL("cuMemcpyAsync", CD(d)->drv->cuMemcpyAsync((CUdeviceptr)dst, (CUdeviceptr)src, n, (CUstream)s));
  return 0;
}

static int cd_stream_create(mt_device_t *d, mt_handle_t *s) {
  CUstream st;
  CALL("cuStreamCreate", CD(d)->drv->cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
  *s = (mt_handle_t)st;
  return 0;
}

static int cd_event_create(mt_device_t *d, mt_handle_t *e) {
  CUevent ev;
  CALL("cuEventCreate", CD(d)->drv->cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
  *e = (mt_handle_t)ev;
  return 0;
}

static int cd_timer_create(mt_device_t *d, mt_handle_t *e) {
  if (CD(d)->drv->cuEventElapsedTime_v2 == NULL) return -ENOSYS; /* a driver before 12.8 */
  CUevent ev;
  CALL("cuEventCreate", CD(d)->drv->cuEventCreate(&ev, CU_EVENT_DEFAULT));
  *e = (mt_handle_t)ev;
  return 0;
}

static int cd_timer_elapsed(mt_device_t *d, mt_handle_t a, mt_handle_t b, uint64_t *ns) {
  float ms = 0;
  CUresult rc = CD(d)->drv->cuEventElapsedTime_v2(&ms, (CUevent)a, (CUevent)b);
  if (rc == CUDA_ERROR_NOT_READY) return -EAGAIN;
  if (rc != CUDA_SUCCESS) return fail("cuEventElapsedTime", rc);
  *ns = ms > 0 ? (uint64_t)((double)ms * 1e6) : 0;
  return 0;
}

static void cd_event_destroy(mt_device_t *d, mt_handle_t e) {
  CD(d)->drv->cuEventDestroy_v2((CUevent)e);
}

static int cd_event_record(mt_device_t *d, mt_handle_t e, mt_handle_t s) {
  CALL("cuEventRecord", CD(d)->drv->cuEventRecord((CUevent)e, (CUstream)s));
  return 0;
}

static int cd_event_query(mt_device_t *d, mt_handle_t e) {
  CUresult rc = CD(d)->drv->cuEventQuery((CUevent)e);
  if (rc == CUDA_SUCCESS) return 1;
  if (rc == CUDA_ERROR_NOT_READY) return 0;
  return fail("cuEventQuery", rc);
}

static int cd_event_sync(mt_device_t *d, mt_handle_t e) {
  CALL("cuEventSynchronize", CD(d)->drv->cuEventSynchronize((CUevent)e));
  return 0;
}

static int cd_stream_wait(mt_device_t *d, mt_handle_t s, mt_handle_t e) {
  CALL("cuStreamWaitEvent", CD(d)->drv->cuStreamWaitEvent((CUstream)s, (CUevent)e, 0));
  return 0;
}

static int cd_stream_capturing(mt_device_t *d, mt_handle_t s) {
  CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
  CUresult rc = CD(d)->drv->cuStreamIsCapturing((CUstream)s, &st);
  /* the legacy stream while a blocking stream captures: using it would
   * join or break that capture, so it counts as capturing (fails closed) */
  if (rc == CUDA_ERROR_STREAM_CAPTURE_IMPLICIT) return 1;
  if (rc != CUDA_SUCCESS) return 0;
  return st != CU_STREAM_CAPTURE_STATUS_NONE;
}

static const mt_device_ops_t cuda_ops = {
  .reserve = cd_reserve,
  .unreserve = cd_unreserve,
  .phys_create = cd_phys_create,
  .phys_release = cd_phys_release,
  .map = cd_map,
  .set_access = cd_set_access,
  .unmap = cd_unmap,
  .host_alloc = cd_host_alloc,
  .host_free = cd_host_free,
  .host_register = cd_host_register,
  .host_unregister = cd_host_unregister,
  .copy = cd_copy,
  .stream_create = cd_stream_create,
  .event_create = cd_event_create,
  .event_destroy = cd_event_destroy,
  .event_record = cd_event_record,
  .event_query = cd_event_query,
  .event_sync = cd_event_sync,
  .stream_wait = cd_stream_wait,
  .stream_capturing = cd_stream_capturing,
  .timer_create = cd_timer_create,
  .timer_elapsed = cd_timer_elapsed,
};

mt_device_t *_mt_device_cuda_open(void) {
  const mt_driver_t *drv = _mt_driver();
  if (drv == NULL) return NULL;
  cuda_device_t *cd = calloc(1, sizeof(*cd));
  if (cd == NULL) return NULL;
  cd->base.ops = &cuda_ops;
  cd->drv = drv;
  CUresult rc = drv->cuCtxGetCurrent(&cd->ctx);
  if (rc != CUDA_SUCCESS || cd->ctx == NULL) {
    /* No current context (the runtime sets the primary one lazily): use
     * device 0's primary context, as cudart would. */
    if ((rc = drv->cuDeviceGet(&cd->dev, 0)) != CUDA_SUCCESS ||
        (rc = drv->cuDevicePrimaryCtxRetain(&cd->ctx, cd->dev)) != CUDA_SUCCESS ||
        (rc = drv->cuCtxSetCurrent(cd->ctx)) != CUDA_SUCCESS) {
      mt_error("no CUDA context to work in: %s", _mt_cu_errname(rc));
      free(cd);
      return NULL;
    }
  } else if ((rc = drv->cuCtxGetDevice(&cd->dev)) != CUDA_SUCCESS) {
    mt_error("cuCtxGetDevice failed: %s", _mt_cu_errname(rc));
    free(cd);
    return NULL;
  }
  mt_device_info_t *in = &cd->base.info;
  in->ordinal = (int)cd->dev;
  in->ctx = (uint64_t)(uintptr_t)cd->ctx;
  drv->cuDeviceGetName(in->name, sizeof(in->name), cd->dev);
  size_t fr = 0, tot = 0;
  drv->cuMemGetInfo_v2(&fr, &tot);
  in->free_bytes = fr;
  in->total_bytes = tot;
  CUmemAllocationProp prop;
  memset(&prop, 0, sizeof(prop));
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = cd->dev;
  size_t gran = 0;
  if (drv->cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED) != CUDA_SUCCESS ||
      gran == 0)
    gran = (size_t)2 << 20;
  in->granularity = gran;
  int numa = -1;
  if (drv->cuDeviceGetAttribute(&numa, CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, cd->dev) != CUDA_SUCCESS) numa = -1;
  in->host_numa_node = numa;
  /* cuda.h marks cuMemUnmap and cuMemSetAccess \note_sync: assume they may
   * wait for the device until a measurement on a GPU says otherwise
   * (tools/gpu/move_bench.cu, unmap_waits). */
  in->unmap_syncs = true;
  /* Try one host-located chunk and a mapping of it: the only reliable test.
   * Quietly: a driver without the feature is not an error. */
  in->host_mappable = false;
  memset(&prop, 0, sizeof(prop));
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
  prop.location.id = numa < 0 ? 0 : numa;
  CUmemGenericAllocationHandle g;
  CUdeviceptr va;
  if (drv->cuMemCreate(&g, gran, &prop, 0) == CUDA_SUCCESS) {
    if (drv->cuMemAddressReserve(&va, gran, gran, 0, 0) == CUDA_SUCCESS) {
      if (drv->cuMemMap(va, gran, 0, g, 0) == CUDA_SUCCESS) {
        CUmemAccessDesc acc;
        memset(&acc, 0, sizeof(acc));
        acc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        acc.location.id = cd->dev;
        acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
        in->host_mappable = drv->cuMemSetAccess(va, gran, &acc, 1) == CUDA_SUCCESS;
        drv->cuMemUnmap(va, gran);
      }
      drv->cuMemAddressFree(va, gran);
    }
    drv->cuMemRelease(g);
  }
  return &cd->base;
}
