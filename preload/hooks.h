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

#include "driver.h"

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

#define MT_P_TMTILED                                                                           \
  (CUtensorMap *tensorMap, CUtensorMapDataType tensorDataType, cuuint32_t tensorRank, void *globalAddress, \
   const cuuint64_t *globalDim, const cuuint64_t *globalStrides, const cuuint32_t *boxDim,              \
   const cuuint32_t *elementStrides, CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle,     \
   CUtensorMapL2promotion l2Promotion, CUtensorMapFloatOOBfill oobFill)
#define MT_A_TMTILED                                                                           \
  (tensorMap, tensorDataType, tensorRank, globalAddress, globalDim, globalStrides, boxDim, elementStrides, \
   interleave, swizzle, l2Promotion, oobFill)
#define MT_P_TMIM2COL                                                                          \
  (CUtensorMap *tensorMap, CUtensorMapDataType tensorDataType, cuuint32_t tensorRank, void *globalAddress, \
   const cuuint64_t *globalDim, const cuuint64_t *globalStrides, const int *pixelBoxLowerCorner,        \
   const int *pixelBoxUpperCorner, cuuint32_t channelsPerPixel, cuuint32_t pixelsPerColumn,             \
   const cuuint32_t *elementStrides, CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle,     \
   CUtensorMapL2promotion l2Promotion, CUtensorMapFloatOOBfill oobFill)
#define MT_A_TMIM2COL                                                                          \
  (tensorMap, tensorDataType, tensorRank, globalAddress, globalDim, globalStrides, pixelBoxLowerCorner, \
   pixelBoxUpperCorner, channelsPerPixel, pixelsPerColumn, elementStrides, interleave, swizzle, l2Promotion, \
   oobFill)
#define MT_P_TMWIDE                                                                            \
  (CUtensorMap *tensorMap, CUtensorMapDataType tensorDataType, cuuint32_t tensorRank, void *globalAddress, \
   const cuuint64_t *globalDim, const cuuint64_t *globalStrides, int pixelBoxLowerCornerWidth,          \
   int pixelBoxUpperCornerWidth, cuuint32_t channelsPerPixel, cuuint32_t pixelsPerColumn,               \
   const cuuint32_t *elementStrides, CUtensorMapInterleave interleave, CUtensorMapIm2ColWideMode mode,  \
   CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2Promotion, CUtensorMapFloatOOBfill oobFill)
#define MT_A_TMWIDE                                                                            \
  (tensorMap, tensorDataType, tensorRank, globalAddress, globalDim, globalStrides, pixelBoxLowerCornerWidth, \
   pixelBoxUpperCornerWidth, channelsPerPixel, pixelsPerColumn, elementStrides, interleave, mode, swizzle, \
   l2Promotion, oobFill)

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
  X(cuLibraryGetKernel, lib_get_kernel, 0, (CUkernel *pKernel, CUlibrary library, const char *name),    \
    (pKernel, library, name))                                                                          \
  X(cuLibraryEnumerateKernels, lib_enum_kernels, 0,                                                   \
    (CUkernel *kernels, unsigned int numKernels, CUlibrary lib), (kernels, numKernels, lib))           \
  X(cuKernelGetFunction, kernel_get_function, 0, (CUfunction *pFunc, CUkernel kernel),                 \
    (pFunc, kernel))                                                                                   \
  X(cuModuleGetFunction, module_get_function, 0, (CUfunction *hfunc, CUmodule hmod, const char *name),  \
    (hfunc, hmod, name))                                                                               \
  X(cuLibraryUnload, library_unload, 0, (CUlibrary library), (library))                               \
  X(cuModuleUnload, module_unload, 0, (CUmodule hmod), (hmod))                                         \
  X(cuTensorMapEncodeTiled, tmap_tiled, 0, MT_P_TMTILED, MT_A_TMTILED)                                 \
  X(cuTensorMapEncodeIm2col, tmap_im2col, 0, MT_P_TMIM2COL, MT_A_TMIM2COL)                             \
  X(cuTensorMapEncodeIm2colWide, tmap_im2col_wide, 0, MT_P_TMWIDE, MT_A_TMWIDE)                        \
  X(cuTensorMapReplaceAddress, tmap_replace, 0, (CUtensorMap *tensorMap, void *globalAddress),         \
    (tensorMap, globalAddress))                                                                        \
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

/* How cuGetProcAddress maps a request to a hooked symbol, for drivers whose
 * cuGetProcAddress hands out internal entry points that are not their dlsym
 * exports (so the pointer alone does not tell which function it is).
 * X(base name as requested, first CUDA version of the hooked form, hooked
 * symbol). Per-thread-stream rows are the hooks whose per_thread column is
 * 1; they apply only to requests with CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM.
 * A request older than every row of its name resolves to a form we do not
 * hook (cuMemAlloc at 2000 is the 32-bit cuMemAlloc) and is left alone.
 * A hook without any row is taken as its own base name at every version
 * (right for an unversioned function: cuMemCreate is "cuMemCreate"); a
 * versioned or per-thread form needs its rows here, and so does a new
 * versioned form of a hooked function, or requests for it would be
 * answered with the older form's hook. The symbol column must name a
 * hook: a typo does not compile. */
#define MT_PROCADDR_NAMES(X)                                            \
  X(cuMemAlloc, 3020, cuMemAlloc_v2)                                    \
  X(cuMemAllocPitch, 3020, cuMemAllocPitch_v2)                          \
  X(cuMemAllocAsync, 11020, cuMemAllocAsync)                            \
  X(cuMemAllocAsync, 11020, cuMemAllocAsync_ptsz)                       \
  X(cuMemAllocFromPoolAsync, 11020, cuMemAllocFromPoolAsync)            \
  X(cuMemAllocFromPoolAsync, 11020, cuMemAllocFromPoolAsync_ptsz)       \
  X(cuMemFree, 3020, cuMemFree_v2)                                      \
  X(cuMemFreeAsync, 11020, cuMemFreeAsync)                              \
  X(cuMemFreeAsync, 11020, cuMemFreeAsync_ptsz)                         \
  X(cuMemGetInfo, 3020, cuMemGetInfo_v2)                                \
  X(cuMemGetAddressRange, 3020, cuMemGetAddressRange_v2)                \
  X(cuPointerGetAttribute, 4000, cuPointerGetAttribute)                 \
  X(cuPointerGetAttributes, 7000, cuPointerGetAttributes)               \
  X(cuMemcpy, 4000, cuMemcpy)                                           \
  X(cuMemcpy, 7000, cuMemcpy_ptds)                                      \
  X(cuMemcpyAsync, 4000, cuMemcpyAsync)                                 \
  X(cuMemcpyAsync, 7000, cuMemcpyAsync_ptsz)                            \
  X(cuMemcpyHtoD, 3020, cuMemcpyHtoD_v2)                                \
  X(cuMemcpyHtoD, 7000, cuMemcpyHtoD_v2_ptds)                           \
  X(cuMemcpyHtoDAsync, 3020, cuMemcpyHtoDAsync_v2)                      \
  X(cuMemcpyHtoDAsync, 7000, cuMemcpyHtoDAsync_v2_ptsz)                 \
  X(cuMemcpyDtoH, 3020, cuMemcpyDtoH_v2)                                \
  X(cuMemcpyDtoH, 7000, cuMemcpyDtoH_v2_ptds)                           \
  X(cuMemcpyDtoHAsync, 3020, cuMemcpyDtoHAsync_v2)                      \
  X(cuMemcpyDtoHAsync, 7000, cuMemcpyDtoHAsync_v2_ptsz)                 \
  X(cuMemcpyDtoD, 3020, cuMemcpyDtoD_v2)                                \
  X(cuMemcpyDtoD, 7000, cuMemcpyDtoD_v2_ptds)                           \
  X(cuMemcpyDtoDAsync, 3020, cuMemcpyDtoDAsync_v2)                      \
  X(cuMemcpyDtoDAsync, 7000, cuMemcpyDtoDAsync_v2_ptsz)                 \
  X(cuMemsetD8, 3020, cuMemsetD8_v2)                                    \
  X(cuMemsetD8, 7000, cuMemsetD8_v2_ptds)                               \
  X(cuMemsetD16, 3020, cuMemsetD16_v2)                                  \
  X(cuMemsetD16, 7000, cuMemsetD16_v2_ptds)                             \
  X(cuMemsetD32, 3020, cuMemsetD32_v2)                                  \
  X(cuMemsetD32, 7000, cuMemsetD32_v2_ptds)                             \
  X(cuMemsetD8Async, 3020, cuMemsetD8Async)                             \
  X(cuMemsetD8Async, 7000, cuMemsetD8Async_ptsz)                        \
  X(cuMemsetD16Async, 3020, cuMemsetD16Async)                           \
  X(cuMemsetD16Async, 7000, cuMemsetD16Async_ptsz)                      \
  X(cuMemsetD32Async, 3020, cuMemsetD32Async)                           \
  X(cuMemsetD32Async, 7000, cuMemsetD32Async_ptsz)                      \
  X(cuLaunchKernel, 4000, cuLaunchKernel)                               \
  X(cuLaunchKernel, 7000, cuLaunchKernel_ptsz)                          \
  X(cuLaunchKernelEx, 11060, cuLaunchKernelEx)                          \
  X(cuLaunchKernelEx, 11060, cuLaunchKernelEx_ptsz)                     \
  X(cuLaunchCooperativeKernel, 9000, cuLaunchCooperativeKernel)         \
  X(cuLaunchCooperativeKernel, 9000, cuLaunchCooperativeKernel_ptsz)    \
  X(cuLibraryGetKernel, 12000, cuLibraryGetKernel)                      \
  X(cuLibraryEnumerateKernels, 12040, cuLibraryEnumerateKernels)        \
  X(cuKernelGetFunction, 12000, cuKernelGetFunction)                    \
  X(cuModuleGetFunction, 2000, cuModuleGetFunction)                     \
  X(cuLibraryUnload, 12000, cuLibraryUnload)                            \
  X(cuModuleUnload, 2000, cuModuleUnload)                               \
  X(cuTensorMapEncodeTiled, 12000, cuTensorMapEncodeTiled)              \
  X(cuTensorMapEncodeIm2col, 12000, cuTensorMapEncodeIm2col)            \
  X(cuTensorMapEncodeIm2colWide, 12080, cuTensorMapEncodeIm2colWide)    \
  X(cuTensorMapReplaceAddress, 12000, cuTensorMapReplaceAddress)        \
  X(cuStreamDestroy, 4000, cuStreamDestroy_v2)                          \
  X(cuStreamBeginCapture, 10010, cuStreamBeginCapture_v2)               \
  X(cuStreamBeginCapture, 10010, cuStreamBeginCapture_v2_ptsz)          \
  X(cuStreamEndCapture, 10000, cuStreamEndCapture)                      \
  X(cuStreamEndCapture, 10000, cuStreamEndCapture_ptsz)                 \
  X(cuGraphInstantiate, 12000, cuGraphInstantiateWithFlags)             \
  X(cuGraphInstantiateWithFlags, 11040, cuGraphInstantiateWithFlags)    \
  X(cuGraphInstantiateWithParams, 12000, cuGraphInstantiateWithParams)  \
  X(cuGraphInstantiateWithParams, 12000, cuGraphInstantiateWithParams_ptsz) \
  X(cuGraphLaunch, 10000, cuGraphLaunch)                                \
  X(cuGraphLaunch, 10000, cuGraphLaunch_ptsz)                           \
  X(cuGraphExecDestroy, 10000, cuGraphExecDestroy)                      \
  X(cuGraphDestroy, 10000, cuGraphDestroy)                              \
  X(cuGetProcAddress, 11030, cuGetProcAddress)                          \
  X(cuGetProcAddress, 12000, cuGetProcAddress_v2)

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
/* The hook cuGetProcAddress(symbol, version, flags) resolves to by name
 * (MT_PROCADDR_NAMES), or -1 when the request names no hooked form. */
int _mt_hook_by_request(const char *symbol, int version, cuuint64_t flags);
/* The hook index of an exact symbol name, or -1. */
int _mt_hook_by_name(const char *name);
/* Our exported function for hook h. */
void *_mt_hook_self(int h);

/* The real function of hook h, typed like the hook fn. */
#define REAL(h, fn) ((__typeof__(&fn))_mt_hook_real[h])

/* A pager result as a CUresult: _mt_cu_result (driver.h). */
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
