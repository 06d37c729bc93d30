/*
 * hooks.h - THE list of driver symbols mtalloc hooks.
 *
 * One X-macro list generates the enum, the name table, the real-function
 * pointers, the exported symbols and the per-route trampolines (hooks.c),
 * so nothing can be hooked in one place and forgotten in another. Names are
 * exact driver symbols, never prefixes ("cu" also starts cuDNN's symbols).
 *
 * Columns: symbol, implementation (impl_<name> in the hook_*.c files),
 * per-thread default stream variant (1 for _ptsz/_ptds), parameters,
 * argument names. Every hook returns CUresult.
 */
#ifndef MT_HOOKS_H
#define MT_HOOKS_H

#include <cuda.h>
#include <stdbool.h>

#undef cuGetProcAddress /* cuda.h maps it to _v2; we hook both symbols */

#define MT_P_ALLOC (CUdeviceptr *dptr, size_t bytesize)
#define MT_A_ALLOC (dptr, bytesize)
#define MT_P_ALLOCASYNC (CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
#define MT_A_ALLOCASYNC (dptr, bytesize, hStream)
#define MT_P_POOLASYNC (CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream)
#define MT_A_POOLASYNC (dptr, bytesize, pool, hStream)
#define MT_P_FREEASYNC (CUdeviceptr dptr, CUstream hStream)
#define MT_A_FREEASYNC (dptr, hStream)
#define MT_P_MEMCREATE \
  (CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop, unsigned long long flags)
#define MT_A_MEMCREATE (handle, size, prop, flags)
#define MT_P_MEMMAP \
  (CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle, unsigned long long flags)
#define MT_A_MEMMAP (ptr, size, offset, handle, flags)
#define MT_P_CPY (CUdeviceptr dst, CUdeviceptr src, size_t ByteCount)
#define MT_A_CPY (dst, src, ByteCount)
#define MT_P_CPYA (CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream hStream)
#define MT_A_CPYA (dst, src, ByteCount, hStream)
#define MT_P_HTOD (CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)
#define MT_A_HTOD (dstDevice, srcHost, ByteCount)
#define MT_P_HTODA (CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount, CUstream hStream)
#define MT_A_HTODA (dstDevice, srcHost, ByteCount, hStream)
#define MT_P_DTOH (void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)
#define MT_A_DTOH (dstHost, srcDevice, ByteCount)
#define MT_P_DTOHA (void *dstHost, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream)
#define MT_A_DTOHA (dstHost, srcDevice, ByteCount, hStream)
#define MT_P_DTOD (CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount)
#define MT_A_DTOD (dstDevice, srcDevice, ByteCount)
#define MT_P_DTODA (CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream)
#define MT_A_DTODA (dstDevice, srcDevice, ByteCount, hStream)
#define MT_P_SET8 (CUdeviceptr dstDevice, unsigned char uc, size_t N)
#define MT_P_SET16 (CUdeviceptr dstDevice, unsigned short us, size_t N)
#define MT_P_SET32 (CUdeviceptr dstDevice, unsigned int ui, size_t N)
#define MT_P_SET8A (CUdeviceptr dstDevice, unsigned char uc, size_t N, CUstream hStream)
#define MT_P_SET16A (CUdeviceptr dstDevice, unsigned short us, size_t N, CUstream hStream)
#define MT_P_SET32A (CUdeviceptr dstDevice, unsigned int ui, size_t N, CUstream hStream)
#define MT_A_SET8 (dstDevice, uc, N)
#define MT_A_SET16 (dstDevice, us, N)
#define MT_A_SET32 (dstDevice, ui, N)
#define MT_A_SET8A (dstDevice, uc, N, hStream)
#define MT_A_SET16A (dstDevice, us, N, hStream)
#define MT_A_SET32A (dstDevice, ui, N, hStream)
#define MT_P_LAUNCH                                                                            \
  (CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,          \
   unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,                     \
   unsigned int sharedMemBytes, CUstream hStream, void **kernelParams, void **extra)
#define MT_A_LAUNCH                                                                            \
  (f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes, hStream, \
   kernelParams, extra)
#define MT_P_LAUNCHEX (const CUlaunchConfig *config, CUfunction f, void **kernelParams, void **extra)
#define MT_A_LAUNCHEX (config, f, kernelParams, extra)
#define MT_P_COOP                                                                              \
  (CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,          \
   unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,                     \
   unsigned int sharedMemBytes, CUstream hStream, void **kernelParams)
#define MT_A_COOP                                                                              \
  (f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes, hStream, \
   kernelParams)
#define MT_P_BEGINCAP (CUstream hStream, CUstreamCaptureMode mode)
#define MT_A_BEGINCAP (hStream, mode)
#define MT_P_ENDCAP (CUstream hStream, CUgraph *phGraph)
#define MT_A_ENDCAP (hStream, phGraph)
#define MT_P_GLAUNCH (CUgraphExec hGraphExec, CUstream hStream)
#define MT_A_GLAUNCH (hGraphExec, hStream)
#define MT_P_GINSTP (CUgraphExec *phGraphExec, CUgraph hGraph, CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams)
#define MT_A_GINSTP (phGraphExec, hGraph, instantiateParams)
#define MT_P_GPA2                                                                              \
  (const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,                          \
   CUdriverProcAddressQueryResult *symbolStatus)
#define MT_A_GPA2 (symbol, pfn, cudaVersion, flags, symbolStatus)

#define MT_DRIVER_HOOKS(X)                                                                              \
  X(cuMemAlloc_v2, alloc, 0, MT_P_ALLOC, MT_A_ALLOC)                                                  \
  X(cuMemAllocPitch_v2, alloc_pitch, 0,                                                                \
    (CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes, size_t Height, unsigned int ElementSizeBytes), \
    (dptr, pPitch, WidthInBytes, Height, ElementSizeBytes))                                             \
  X(cuMemAllocAsync, alloc_async, 0, MT_P_ALLOCASYNC, MT_A_ALLOCASYNC)                                 \
  X(cuMemAllocAsync_ptsz, alloc_async, 1, MT_P_ALLOCASYNC, MT_A_ALLOCASYNC)                            \
  X(cuMemAllocFromPoolAsync, alloc_pool, 0, MT_P_POOLASYNC, MT_A_POOLASYNC)                            \
  X(cuMemAllocFromPoolAsync_ptsz, alloc_pool, 1, MT_P_POOLASYNC, MT_A_POOLASYNC)                       \
  X(cuMemFree_v2, free, 0, (CUdeviceptr dptr), (dptr))                                                 \
  X(cuMemFreeAsync, free_async, 0, MT_P_FREEASYNC, MT_A_FREEASYNC)                                     \
  X(cuMemFreeAsync_ptsz, free_async, 1, MT_P_FREEASYNC, MT_A_FREEASYNC)                                \
  X(cuMemGetInfo_v2, get_info, 0, (size_t *free, size_t *total), (free, total))                        \
  X(cuMemCreate, mem_create, 0, MT_P_MEMCREATE, MT_A_MEMCREATE)                                       \
  X(cuMemMap, mem_map, 0, MT_P_MEMMAP, MT_A_MEMMAP)                                                    \
  X(cuMemGetAddressRange_v2, addr_range, 0, (CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr),     \
    (pbase, psize, dptr))                                                                              \
  X(cuPointerGetAttribute, ptr_attr, 0, (void *data, CUpointer_attribute attribute, CUdeviceptr ptr),   \
    (data, attribute, ptr))                                                                            \
  X(cuPointerGetAttributes, ptr_attrs, 0,                                                              \
    (unsigned int numAttributes, CUpointer_attribute *attributes, void **data, CUdeviceptr ptr),       \
    (numAttributes, attributes, data, ptr))                                                            \
  X(cuMemcpy, cpy, 0, MT_P_CPY, MT_A_CPY)                                                              \
  X(cuMemcpy_ptds, cpy, 1, MT_P_CPY, MT_A_CPY)                                                         \
  X(cuMemcpyAsync, cpy_async, 0, MT_P_CPYA, MT_A_CPYA)                                                 \
  X(cuMemcpyAsync_ptsz, cpy_async, 1, MT_P_CPYA, MT_A_CPYA)                                            \
  X(cuMemcpyHtoD_v2, htod, 0, MT_P_HTOD, MT_A_HTOD)                                                    \
  X(cuMemcpyHtoD_v2_ptds, htod, 1, MT_P_HTOD, MT_A_HTOD)                                               \
  X(cuMemcpyHtoDAsync_v2, htod_async, 0, MT_P_HTODA, MT_A_HTODA)                                       \
  X(cuMemcpyHtoDAsync_v2_ptsz, htod_async, 1, MT_P_HTODA, MT_A_HTODA)                                  \
  X(cuMemcpyDtoH_v2, dtoh, 0, MT_P_DTOH, MT_A_DTOH)                                                    \
  X(cuMemcpyDtoH_v2_ptds, dtoh, 1, MT_P_DTOH, MT_A_DTOH)                                               \
  X(cuMemcpyDtoHAsync_v2, dtoh_async, 0, MT_P_DTOHA, MT_A_DTOHA)                                       \
  X(cuMemcpyDtoHAsync_v2_ptsz, dtoh_async, 1, MT_P_DTOHA, MT_A_DTOHA)                                  \
  X(cuMemcpyDtoD_v2, dtod, 0, MT_P_DTOD, MT_A_DTOD)                                                    \
  X(cuMemcpyDtoD_v2_ptds, dtod, 1, MT_P_DTOD, MT_A_DTOD)                                               \
  X(cuMemcpyDtoDAsync_v2, dtod_async, 0, MT_P_DTODA, MT_A_DTODA)                                       \
  X(cuMemcpyDtoDAsync_v2_ptsz, dtod_async, 1, MT_P_DTODA, MT_A_DTODA)                                  \
  X(cuMemsetD8_v2, set8, 0, MT_P_SET8, MT_A_SET8)                                                      \
  X(cuMemsetD8_v2_ptds, set8, 1, MT_P_SET8, MT_A_SET8)                                                 \
  X(cuMemsetD16_v2, set16, 0, MT_P_SET16, MT_A_SET16)                                                  \
  X(cuMemsetD16_v2_ptds, set16, 1, MT_P_SET16, MT_A_SET16)                                             \
  X(cuMemsetD32_v2, set32, 0, MT_P_SET32, MT_A_SET32)                                                  \
  X(cuMemsetD32_v2_ptds, set32, 1, MT_P_SET32, MT_A_SET32)                                             \
  X(cuMemsetD8Async, set8_async, 0, MT_P_SET8A, MT_A_SET8A)                                            \
  X(cuMemsetD8Async_ptsz, set8_async, 1, MT_P_SET8A, MT_A_SET8A)                                       \
  X(cuMemsetD16Async, set16_async, 0, MT_P_SET16A, MT_A_SET16A)                                        \
  X(cuMemsetD16Async_ptsz, set16_async, 1, MT_P_SET16A, MT_A_SET16A)                                   \
  X(cuMemsetD32Async, set32_async, 0, MT_P_SET32A, MT_A_SET32A)                                        \
  X(cuMemsetD32Async_ptsz, set32_async, 1, MT_P_SET32A, MT_A_SET32A)                                   \
  X(cuLaunchKernel, launch, 0, MT_P_LAUNCH, MT_A_LAUNCH)                                               \
  X(cuLaunchKernel_ptsz, launch, 1, MT_P_LAUNCH, MT_A_LAUNCH)                                          \
  X(cuLaunchKernelEx, launch_ex, 0, MT_P_LAUNCHEX, MT_A_LAUNCHEX)                                      \
  X(cuLaunchKernelEx_ptsz, launch_ex, 1, MT_P_LAUNCHEX, MT_A_LAUNCHEX)                                 \
  X(cuLaunchCooperativeKernel, launch_coop, 0, MT_P_COOP, MT_A_COOP)                                   \
  X(cuLaunchCooperativeKernel_ptsz, launch_coop, 1, MT_P_COOP, MT_A_COOP)                              \
  X(cuStreamDestroy_v2, stream_destroy, 0, (CUstream hStream), (hStream))                              \
  X(cuStreamBeginCapture_v2, begin_capture, 0, MT_P_BEGINCAP, MT_A_BEGINCAP)                           \
  X(cuStreamBeginCapture_v2_ptsz, begin_capture, 1, MT_P_BEGINCAP, MT_A_BEGINCAP)                      \
  X(cuStreamEndCapture, end_capture, 0, MT_P_ENDCAP, MT_A_ENDCAP)                                      \
  X(cuStreamEndCapture_ptsz, end_capture, 1, MT_P_ENDCAP, MT_A_ENDCAP)                                 \
  X(cuGraphInstantiateWithFlags, graph_inst, 0,                                                        \
    (CUgraphExec *phGraphExec, CUgraph hGraph, unsigned long long flags), (phGraphExec, hGraph, flags)) \
  X(cuGraphInstantiateWithParams, graph_inst_params, 0, MT_P_GINSTP, MT_A_GINSTP)                      \
  X(cuGraphInstantiateWithParams_ptsz, graph_inst_params, 1, MT_P_GINSTP, MT_A_GINSTP)                 \
  X(cuGraphLaunch, graph_launch, 0, MT_P_GLAUNCH, MT_A_GLAUNCH)                                        \
  X(cuGraphLaunch_ptsz, graph_launch, 1, MT_P_GLAUNCH, MT_A_GLAUNCH)                                   \
  X(cuGraphExecDestroy, graph_exec_destroy, 0, (CUgraphExec hGraphExec), (hGraphExec))                 \
  X(cuGraphDestroy, graph_destroy, 0, (CUgraph hGraph), (hGraph))                                      \
  X(cuGetProcAddress, gpa1, 0, (const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags),    \
    (symbol, pfn, cudaVersion, flags))                                                                 \
  X(cuGetProcAddress_v2, gpa2, 0, MT_P_GPA2, MT_A_GPA2)

typedef enum mt_hook {
#define MT_HOOK_ENUM(name, impl, pt, params, args) MT_HOOK_##name,
  MT_DRIVER_HOOKS(MT_HOOK_ENUM)
#undef MT_HOOK_ENUM
  MT_HOOK__COUNT
} mt_hook_t;

/* The driver's own function for hook h (NULL when the driver lacks it). */
extern void *_mt_hook_real[MT_HOOK__COUNT];
/* Resolves the real functions once (thread-safe); false without a driver. */
bool _mt_hooks_init(void);
/* The hook index whose real function is fn, or -1. */
int _mt_hook_of_real(void *fn);
/* Our function for hook h as handed out by cuGetProcAddress / dlsym. */
void *_mt_hook_procaddr(int h);
void *_mt_hook_dlsym(int h);
/* The hook index of an exact symbol name, or -1. */
int _mt_hook_by_name(const char *name);
/* Our exported function for hook h. */
void *_mt_hook_self(int h);

/* The real function of hook h, typed like the hook fn. */
#define REAL(h, fn) ((__typeof__(&fn))_mt_hook_real[h])

/* A pager result as a CUresult (see pager.h). */
CUresult _mt_cu_result(int rc);
/* The stream a call means: with the per-thread variants NULL is the
 * per-thread default stream. */
static inline uint64_t _mt_stream_of(CUstream s, int pt) {
  return (pt && s == NULL) ? (uint64_t)(uintptr_t)CU_STREAM_PER_THREAD : (uint64_t)(uintptr_t)s;
}

/* Each implementation takes the hook index (for the real function), the
 * per-thread flag, then the hooked function's own parameters. */
#define MT_UNPAREN(...) __VA_ARGS__
#define MT_HOOK_IMPL_DECL(name, impl, per_thread, params, args) CUresult impl_##impl(int h, int pt, MT_UNPAREN params);
MT_DRIVER_HOOKS(MT_HOOK_IMPL_DECL)
#undef MT_HOOK_IMPL_DECL

#endif
