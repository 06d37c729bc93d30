/*
 * driver.h - the real CUDA driver, opened with dlopen("libcuda.so.1").
 *
 * Nothing links against libcuda: the library builds and loads on machines
 * without a GPU, and the preload layer can hand out its own functions in
 * place of the driver's. The core reaches the driver only through the
 * pointers resolved here, never through a symbol the preload layer exports
 * (those are the hooks). Symbols are resolved with the real dlsym (dl.c),
 * since the preload layer hooks dlsym itself.
 */
#ifndef MT_DRIVER_H
#define MT_DRIVER_H

#include <cuda.h>

/* The driver functions the core itself calls. */
#define MT_DRIVER_CORE_FUNCS(X)                      \
  X(cuGetErrorName)                                  \
  X(cuCtxGetCurrent)                                 \
  X(cuCtxSetCurrent)                                 \
  X(cuCtxGetDevice)                                  \
  X(cuDeviceGet)                                     \
  X(cuDeviceGetName)                                 \
  X(cuDeviceGetAttribute)                            \
  X(cuDevicePrimaryCtxRetain)                        \
  X(cuDeviceTotalMem_v2)                             \
  X(cuMemGetInfo_v2)                                 \
  X(cuMemAddressReserve)                             \
  X(cuMemAddressFree)                                \
  X(cuMemCreate)                                     \
  X(cuMemRelease)                                    \
  X(cuMemMap)                                        \
  X(cuMemUnmap)                                      \
  X(cuMemSetAccess)                                  \
  X(cuMemGetAllocationGranularity)                   \
  X(cuMemHostAlloc)                                  \
  X(cuMemFreeHost)                                   \
  X(cuMemHostRegister_v2)                            \
  X(cuMemHostUnregister)                             \
  X(cuMemcpyAsync)                                   \
  X(cuStreamCreate)                                  \
  X(cuStreamIsCapturing)                             \
  X(cuStreamWaitEvent)                               \
  X(cuEventCreate)                                   \
  X(cuEventDestroy_v2)                               \
  X(cuEventRecord)                                   \
  X(cuEventQuery)                                    \
  X(cuEventSynchronize)                              \
  X(cuFuncGetParamInfo)                              \
  X(cuPointerGetAttribute)                           \
  X(cuFuncGetName)

/* Functions the core uses where the driver has them: newer than the oldest
 * driver mtalloc runs on (cuKernelGetParamInfo is 12.4, cuKernelGetName
 * 12.3, cuEventElapsedTime_v2 12.8: without it MT_HANDOFF=auto times its
 * trial on the host). NULL in mt_driver_t when missing; the driver stays
 * usable. */
#define MT_DRIVER_OPTIONAL_FUNCS(X)                  \
  X(cuKernelGetParamInfo)                            \
  X(cuKernelGetName)                                 \
  X(cuLibraryGetModule)                              \
  X(cuEventElapsedTime_v2)

typedef struct mt_driver {
#define MT_DRV_FIELD(name) __typeof__(&name) name;
  MT_DRIVER_CORE_FUNCS(MT_DRV_FIELD)
  MT_DRIVER_OPTIONAL_FUNCS(MT_DRV_FIELD)
#undef MT_DRV_FIELD
} mt_driver_t;

/* The resolved driver, or NULL when libcuda.so.1 cannot be opened or lacks
 * a function the core needs (logged once). Thread-safe; resolves once. */
const mt_driver_t *_mt_driver(void);
/* The driver's own address of an exact symbol name ("cuMemAlloc_v2"), or NULL. */
void *_mt_driver_sym(const char *name);
/* "CUDA_ERROR_OUT_OF_MEMORY" for rc, without allocating. */
const char *_mt_cu_errname(CUresult rc);
/* A driver call of the pager failed with rc (device_cuda.c turns it into
 * -EIO): remembered for this thread, so that the hook that returns the
 * pager's -EIO gives the application the driver's own error (a sticky
 * CUDA_ERROR_ILLEGAL_ADDRESS, say) rather than CUDA_ERROR_UNKNOWN. */
void _mt_cu_note_error(CUresult rc);
/* A pager result as a CUresult: 0 success, > 0 a CUresult already, -errno
 * mapped (-EIO: the driver error noted last on this thread, taken once;
 * -ESHUTDOWN: the driver is gone, CUDA_ERROR_DEINITIALIZED). */
CUresult _mt_cu_result(int rc);

/* dl.c: the real dlsym (the preload layer replaces the public one). */
void *_mt_real_dlsym(void *handle, const char *name);

#endif
