/*
 * fake_procaddr.c - cuGetProcAddress: the driver entry point table.
 *
 * Concept: libcudart (and anything built like it) never links driver
 * symbols; it asks cuGetProcAddress for a BASE name ("cuMemAlloc") plus the
 * CUDA version it was built for, and gets the versioned implementation the
 * real driver would hand out: cuMemAlloc -> cuMemAlloc_v2 from 3020,
 * cuStreamDestroy -> cuStreamDestroy_v2 from 4000, cuGetProcAddress ->
 * cuGetProcAddress_v2 from 12000, ... With
 * CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM the _ptsz/_ptds variants
 * are returned where they exist.
 *
 * One table, FC_PROCS below, lists {base name, first version, symbol,
 * stream mode}; lookup takes, among the rows for the name and stream mode,
 * the one with the highest first version <= the requested version (rows
 * of the per-thread mode are preferred when that flag is given, and the
 * legacy rows used otherwise). A name with rows but none old enough is
 * CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT; a name without rows is
 * CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND; both return CUDA_ERROR_NOT_FOUND.
 * Only entry points the fake implements are listed, so versions older than
 * the oldest implemented form report VERSION_NOT_SUFFICIENT.
 *
 * FAKECUDA_PROCADDR_WRAPPERS=1 makes the answers internal entry points: one
 * small machine-code thunk per row that jumps to the implementation, so
 * the call works exactly the same but the address differs from what dlsym
 * returns for the symbol -- as with a driver that hands out its own
 * dispatch table. An interposer that recognises its functions only by
 * comparing addresses with the dlsym exports then sees nothing.
 *
 * Threading: the table is constant; lookups need no lock and no cuInit
 * (the thunks are made once, under pthread_once).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "fake_internal.h"

/* cuda.h renames these to their newest forms; the driver exports the
 * old names too, with the old signatures. */
#undef cuGetProcAddress
#undef cuGraphInstantiate
#undef cuEventElapsedTime
#undef cuCtxPushCurrent
#undef cuCtxPopCurrent
#undef cuDevicePrimaryCtxRelease
#undef cuStreamDestroy
#undef cuEventDestroy
CUresult cuCtxPushCurrent(CUcontext);
CUresult cuCtxPopCurrent(CUcontext *);
CUresult cuDevicePrimaryCtxRelease(CUdevice);
CUresult cuStreamDestroy(CUstream);
CUresult cuEventDestroy(CUevent);
CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags);
CUresult cuGraphInstantiate(CUgraphExec *, CUgraph, CUgraphNode *, char *, size_t);
CUresult cuEventElapsedTime(float *, CUevent, CUevent);

#define L 0 /* legacy default stream semantics (or no stream at all) */
#define P 1 /* per-thread default stream variant */

/* X(base name, first CUDA version, symbol, stream mode) */
#define FC_PROCS(X)                                                       \
  X(cuInit, 2000, cuInit, L)                                              \
  X(cuDriverGetVersion, 2020, cuDriverGetVersion, L)                      \
  X(cuGetErrorName, 6000, cuGetErrorName, L)                              \
  X(cuGetErrorString, 6000, cuGetErrorString, L)                          \
  X(cuGetProcAddress, 11030, cuGetProcAddress, L)                         \
  X(cuGetProcAddress, 12000, cuGetProcAddress_v2, L)                      \
  X(cuDeviceGet, 2000, cuDeviceGet, L)                                    \
  X(cuDeviceGetCount, 2000, cuDeviceGetCount, L)                          \
  X(cuDeviceGetName, 2000, cuDeviceGetName, L)                            \
  X(cuDeviceGetAttribute, 2000, cuDeviceGetAttribute, L)                  \
  X(cuDeviceTotalMem, 3020, cuDeviceTotalMem_v2, L)                       \
  X(cuDevicePrimaryCtxRetain, 7000, cuDevicePrimaryCtxRetain, L)          \
  X(cuDevicePrimaryCtxRelease, 7000, cuDevicePrimaryCtxRelease, L)       \
  X(cuDevicePrimaryCtxRelease, 11000, cuDevicePrimaryCtxRelease_v2, L)    \
  X(cuDevicePrimaryCtxGetState, 7000, cuDevicePrimaryCtxGetState, L)      \
  X(cuCtxGetCurrent, 4000, cuCtxGetCurrent, L)                            \
  X(cuCtxSetCurrent, 4000, cuCtxSetCurrent, L)                            \
  X(cuCtxPushCurrent, 2000, cuCtxPushCurrent, L)                          \
  X(cuCtxPushCurrent, 4000, cuCtxPushCurrent_v2, L)                       \
  X(cuCtxPopCurrent, 2000, cuCtxPopCurrent, L)                            \
  X(cuCtxPopCurrent, 4000, cuCtxPopCurrent_v2, L)                         \
  X(cuCtxGetDevice, 2000, cuCtxGetDevice, L)                              \
  X(cuCtxGetDevice, 13000, cuCtxGetDevice_v2, L)                          \
  X(cuCtxSynchronize, 2000, cuCtxSynchronize, L)                          \
  X(cuCtxSynchronize, 13000, cuCtxSynchronize_v2, L)                      \
  X(cuCtxGetStreamPriorityRange, 5050, cuCtxGetStreamPriorityRange, L)    \
  X(cuMemGetInfo, 3020, cuMemGetInfo_v2, L)                               \
  X(cuMemAlloc, 3020, cuMemAlloc_v2, L)                                   \
  X(cuMemAllocPitch, 3020, cuMemAllocPitch_v2, L)                         \
  X(cuMemFree, 3020, cuMemFree_v2, L)                                     \
  X(cuMemGetAddressRange, 3020, cuMemGetAddressRange_v2, L)               \
  X(cuMemAllocHost, 3020, cuMemAllocHost_v2, L)                           \
  X(cuMemHostAlloc, 2020, cuMemHostAlloc, L)                              \
  X(cuMemFreeHost, 2000, cuMemFreeHost, L)                                \
  X(cuMemHostRegister, 6050, cuMemHostRegister_v2, L)                     \
  X(cuMemHostUnregister, 4000, cuMemHostUnregister, L)                    \
  X(cuMemHostGetDevicePointer, 3020, cuMemHostGetDevicePointer_v2, L)     \
  X(cuPointerGetAttribute, 4000, cuPointerGetAttribute, L)                \
  X(cuPointerGetAttributes, 7000, cuPointerGetAttributes, L)              \
  X(cuMemAllocAsync, 11020, cuMemAllocAsync, L)                           \
  X(cuMemAllocAsync, 11020, cuMemAllocAsync_ptsz, P)                      \
  X(cuMemAllocFromPoolAsync, 11020, cuMemAllocFromPoolAsync, L)           \
  X(cuMemAllocFromPoolAsync, 11020, cuMemAllocFromPoolAsync_ptsz, P)      \
  X(cuMemFreeAsync, 11020, cuMemFreeAsync, L)                             \
  X(cuMemFreeAsync, 11020, cuMemFreeAsync_ptsz, P)                        \
  X(cuMemAddressReserve, 10020, cuMemAddressReserve, L)                   \
  X(cuMemAddressFree, 10020, cuMemAddressFree, L)                         \
  X(cuMemCreate, 10020, cuMemCreate, L)                                   \
  X(cuMemRelease, 10020, cuMemRelease, L)                                 \
  X(cuMemMap, 10020, cuMemMap, L)                                         \
  X(cuMemUnmap, 10020, cuMemUnmap, L)                                     \
  X(cuMemSetAccess, 10020, cuMemSetAccess, L)                             \
  X(cuMemGetAccess, 10020, cuMemGetAccess, L)                             \
  X(cuMemGetAllocationGranularity, 10020, cuMemGetAllocationGranularity, L) \
  X(cuMemGetAllocationPropertiesFromHandle, 10020,                        \
    cuMemGetAllocationPropertiesFromHandle, L)                            \
  X(cuMemRetainAllocationHandle, 11000, cuMemRetainAllocationHandle, L)   \
  X(cuMemcpy, 4000, cuMemcpy, L)                                          \
  X(cuMemcpy, 7000, cuMemcpy_ptds, P)                                     \
  X(cuMemcpyAsync, 4000, cuMemcpyAsync, L)                                \
  X(cuMemcpyAsync, 7000, cuMemcpyAsync_ptsz, P)                           \
  X(cuMemcpyHtoD, 3020, cuMemcpyHtoD_v2, L)                               \
  X(cuMemcpyHtoD, 7000, cuMemcpyHtoD_v2_ptds, P)                          \
  X(cuMemcpyDtoH, 3020, cuMemcpyDtoH_v2, L)                               \
  X(cuMemcpyDtoH, 7000, cuMemcpyDtoH_v2_ptds, P)                          \
  X(cuMemcpyDtoD, 3020, cuMemcpyDtoD_v2, L)                               \
  X(cuMemcpyDtoD, 7000, cuMemcpyDtoD_v2_ptds, P)                          \
  X(cuMemcpyHtoDAsync, 3020, cuMemcpyHtoDAsync_v2, L)                     \
  X(cuMemcpyHtoDAsync, 7000, cuMemcpyHtoDAsync_v2_ptsz, P)                \
  X(cuMemcpyDtoHAsync, 3020, cuMemcpyDtoHAsync_v2, L)                     \
  X(cuMemcpyDtoHAsync, 7000, cuMemcpyDtoHAsync_v2_ptsz, P)                \
  X(cuMemcpyDtoDAsync, 3020, cuMemcpyDtoDAsync_v2, L)                     \
  X(cuMemcpyDtoDAsync, 7000, cuMemcpyDtoDAsync_v2_ptsz, P)                \
  X(cuMemsetD8, 3020, cuMemsetD8_v2, L)                                   \
  X(cuMemsetD8, 7000, cuMemsetD8_v2_ptds, P)                              \
  X(cuMemsetD16, 3020, cuMemsetD16_v2, L)                                 \
  X(cuMemsetD16, 7000, cuMemsetD16_v2_ptds, P)                            \
  X(cuMemsetD32, 3020, cuMemsetD32_v2, L)                                 \
  X(cuMemsetD32, 7000, cuMemsetD32_v2_ptds, P)                            \
  X(cuMemsetD8Async, 3020, cuMemsetD8Async, L)                            \
  X(cuMemsetD8Async, 7000, cuMemsetD8Async_ptsz, P)                       \
  X(cuMemsetD16Async, 3020, cuMemsetD16Async, L)                          \
  X(cuMemsetD16Async, 7000, cuMemsetD16Async_ptsz, P)                     \
  X(cuMemsetD32Async, 3020, cuMemsetD32Async, L)                          \
  X(cuMemsetD32Async, 7000, cuMemsetD32Async_ptsz, P)                     \
  X(cuStreamCreate, 2000, cuStreamCreate, L)                              \
  X(cuStreamCreateWithPriority, 5050, cuStreamCreateWithPriority, L)      \
  X(cuStreamDestroy, 2000, cuStreamDestroy, L)                            \
  X(cuStreamDestroy, 4000, cuStreamDestroy_v2, L)                         \
  X(cuStreamSynchronize, 2000, cuStreamSynchronize, L)                    \
  X(cuStreamSynchronize, 7000, cuStreamSynchronize_ptsz, P)               \
  X(cuStreamQuery, 2000, cuStreamQuery, L)                                \
  X(cuStreamQuery, 7000, cuStreamQuery_ptsz, P)                           \
  X(cuStreamWaitEvent, 3020, cuStreamWaitEvent, L)                        \
  X(cuStreamWaitEvent, 7000, cuStreamWaitEvent_ptsz, P)                   \
  X(cuStreamGetFlags, 5050, cuStreamGetFlags, L)                          \
  X(cuStreamGetFlags, 7000, cuStreamGetFlags_ptsz, P)                     \
  X(cuStreamGetPriority, 5050, cuStreamGetPriority, L)                    \
  X(cuStreamGetCtx, 9020, cuStreamGetCtx, L)                              \
  X(cuLaunchHostFunc, 10000, cuLaunchHostFunc, L)                         \
  X(cuLaunchHostFunc, 10000, cuLaunchHostFunc_ptsz, P)                    \
  X(cuEventCreate, 2000, cuEventCreate, L)                                \
  X(cuEventDestroy, 2000, cuEventDestroy, L)                              \
  X(cuEventDestroy, 4000, cuEventDestroy_v2, L)                           \
  X(cuEventRecord, 2000, cuEventRecord, L)                                \
  X(cuEventRecord, 7000, cuEventRecord_ptsz, P)                           \
  X(cuEventRecordWithFlags, 11010, cuEventRecordWithFlags, L)             \
  X(cuEventRecordWithFlags, 11010, cuEventRecordWithFlags_ptsz, P)        \
  X(cuEventQuery, 2000, cuEventQuery, L)                                  \
  X(cuEventSynchronize, 2000, cuEventSynchronize, L)                      \
  X(cuEventElapsedTime, 2000, cuEventElapsedTime, L)                      \
  X(cuEventElapsedTime, 12080, cuEventElapsedTime_v2, L)                  \
  X(cuLaunchKernel, 4000, cuLaunchKernel, L)                              \
  X(cuLaunchKernel, 7000, cuLaunchKernel_ptsz, P)                         \
  X(cuLaunchKernelEx, 11060, cuLaunchKernelEx, L)                         \
  X(cuLaunchKernelEx, 11060, cuLaunchKernelEx_ptsz, P)                    \
  X(cuLaunchCooperativeKernel, 9000, cuLaunchCooperativeKernel, L)        \
  X(cuLaunchCooperativeKernel, 9000, cuLaunchCooperativeKernel_ptsz, P)   \
  X(cuFuncGetName, 12030, cuFuncGetName, L)                               \
  X(cuFuncGetParamInfo, 12040, cuFuncGetParamInfo, L)                     \
  X(cuModuleLoadData, 2000, cuModuleLoadData, L)                         \
  X(cuModuleUnload, 2000, cuModuleUnload, L)                             \
  X(cuModuleGetFunction, 2000, cuModuleGetFunction, L)                   \
  X(cuLibraryLoadData, 12000, cuLibraryLoadData, L)                       \
  X(cuLibraryUnload, 12000, cuLibraryUnload, L)                           \
  X(cuLibraryGetKernel, 12000, cuLibraryGetKernel, L)                     \
  X(cuLibraryGetKernelCount, 12040, cuLibraryGetKernelCount, L)           \
  X(cuLibraryEnumerateKernels, 12040, cuLibraryEnumerateKernels, L)       \
  X(cuLibraryGetModule, 12000, cuLibraryGetModule, L)                     \
  X(cuKernelGetFunction, 12000, cuKernelGetFunction, L)                   \
  X(cuKernelGetName, 12030, cuKernelGetName, L)                           \
  X(cuKernelGetParamInfo, 12040, cuKernelGetParamInfo, L)                 \
  X(cuTensorMapEncodeTiled, 12000, cuTensorMapEncodeTiled, L)             \
  X(cuTensorMapEncodeIm2col, 12000, cuTensorMapEncodeIm2col, L)           \
  X(cuTensorMapEncodeIm2colWide, 12080, cuTensorMapEncodeIm2colWide, L)   \
  X(cuTensorMapReplaceAddress, 12000, cuTensorMapReplaceAddress, L)       \
  X(cuStreamBeginCapture, 10010, cuStreamBeginCapture_v2, L)              \
  X(cuStreamBeginCapture, 10010, cuStreamBeginCapture_v2_ptsz, P)         \
  X(cuStreamEndCapture, 10000, cuStreamEndCapture, L)                     \
  X(cuStreamEndCapture, 10000, cuStreamEndCapture_ptsz, P)                \
  X(cuStreamIsCapturing, 10000, cuStreamIsCapturing, L)                   \
  X(cuStreamIsCapturing, 10000, cuStreamIsCapturing_ptsz, P)              \
  X(cuThreadExchangeStreamCaptureMode, 10010, cuThreadExchangeStreamCaptureMode, L) \
  X(cuGraphInstantiate, 10000, cuGraphInstantiate, L)                     \
  X(cuGraphInstantiate, 11000, cuGraphInstantiate_v2, L)                  \
  X(cuGraphInstantiate, 12000, cuGraphInstantiateWithFlags, L)            \
  X(cuGraphInstantiateWithFlags, 11040, cuGraphInstantiateWithFlags, L)   \
  X(cuGraphLaunch, 10000, cuGraphLaunch, L)                               \
  X(cuGraphLaunch, 10000, cuGraphLaunch_ptsz, P)                          \
  X(cuGraphExecDestroy, 10000, cuGraphExecDestroy, L)                     \
  X(cuGraphDestroy, 10000, cuGraphDestroy, L)

typedef struct proc {
  const char *name;
  int version;
  void *fn;
  int mode;
} proc_t;

#define FC_PROC_ROW(base, ver, sym, mode) {#base, ver, (void *)&sym, mode},
static const proc_t procs[] = {FC_PROCS(FC_PROC_ROW)};
#undef FC_PROC_ROW

#define FC_PROC_COUNT(base, ver, sym, mode) +1
_Static_assert(sizeof procs / sizeof procs[0] == 0 FC_PROCS(FC_PROC_COUNT),
               "one table row per X entry");
#undef FC_PROC_COUNT

#define NPROCS (sizeof procs / sizeof procs[0])
#define THUNK_BYTES 16

static unsigned char *thunks; /* NPROCS thunks, or NULL: answer the exports */
static pthread_once_t thunks_once = PTHREAD_ONCE_INIT;

/* Writes a thunk that jumps to target. false on an architecture we do not
 * know (then the exports are answered). */
static bool thunk_write(unsigned char *t, void *target) {
  uint64_t a = (uint64_t)(uintptr_t)target;
#if defined(__x86_64__)
  static const unsigned char head[] = {0xf3, 0x0f, 0x1e, 0xfa, 0x48, 0xb8}; /* endbr64; movabs rax, */
  memcpy(t, head, sizeof head);
  memcpy(t + 6, &a, 8);
  t[14] = 0xff; /* jmp rax */
  t[15] = 0xe0;
  return true;
#elif defined(__aarch64__)
  static const uint32_t code[] = {0x58000050u, 0xd61f0200u}; /* ldr x16, #8; br x16 */
  memcpy(t, code, sizeof code);
  memcpy(t + 8, &a, 8);
  return true;
#else
  (void)t, (void)a;
  return false;
#endif
}

static void thunks_make(void) {
  const char *s = getenv("FAKECUDA_PROCADDR_WRAPPERS");
  if (!s || !*s || strcmp(s, "0") == 0) return;
  size_t len = NPROCS * THUNK_BYTES;
  void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) {
    fprintf(stderr, "fakecuda: FAKECUDA_PROCADDR_WRAPPERS: mmap failed; answering the exports\n");
    return;
  }
  for (size_t i = 0; i < NPROCS; i++) {
    if (!thunk_write((unsigned char *)m + i * THUNK_BYTES, procs[i].fn)) {
      fprintf(stderr, "fakecuda: FAKECUDA_PROCADDR_WRAPPERS: no thunks on this architecture; answering the exports\n");
      munmap(m, len);
      return;
    }
  }
  __builtin___clear_cache((char *)m, (char *)m + len);
  if (mprotect(m, len, PROT_READ | PROT_EXEC) != 0) {
    fprintf(stderr, "fakecuda: FAKECUDA_PROCADDR_WRAPPERS: mprotect failed; answering the exports\n");
    munmap(m, len);
    return;
  }
  thunks = m;
}

/* Best row for (name, version, mode): NULL if none. *seen tells whether the
 * name has any row at all in that mode. */
static const proc_t *best_row(const char *name, int version, int mode, bool *seen) {
  const proc_t *best = NULL;
  for (size_t i = 0; i < NPROCS; i++) {
    const proc_t *p = &procs[i];
    if (p->mode != mode || strcmp(p->name, name) != 0) continue;
    *seen = true;
    if (p->version <= version && p->version <= FC_DRIVER_VERSION && (!best || p->version > best->version)) best = p;
  }
  return best;
}

static CUresult lookup(const char *symbol, void **pfn, int version, cuuint64_t flags,
                       CUdriverProcAddressQueryResult *status) {
  if (!symbol || !pfn) return CUDA_ERROR_INVALID_VALUE;
  cuuint64_t known = CU_GET_PROC_ADDRESS_LEGACY_STREAM | CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
  if (flags & ~known) return CUDA_ERROR_INVALID_VALUE;
  *pfn = NULL;
  bool seen = false;
  const proc_t *p = NULL;
  if (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) p = best_row(symbol, version, P, &seen);
  if (!p) p = best_row(symbol, version, L, &seen);
  if (!p) {
    if (status)
      *status = seen ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
                     : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return CUDA_ERROR_NOT_FOUND;
  }
  pthread_once(&thunks_once, thunks_make);
  *pfn = thunks ? (void *)(thunks + (size_t)(p - procs) * THUNK_BYTES) : p->fn;
  if (status) *status = CU_GET_PROC_ADDRESS_SUCCESS;
  return CUDA_SUCCESS;
}

FC_API CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion,
                                 cuuint64_t flags) {
  return lookup(symbol, pfn, cudaVersion, flags, NULL);
}

FC_API CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
                                    cuuint64_t flags, CUdriverProcAddressQueryResult *symbolStatus) {
  return lookup(symbol, pfn, cudaVersion, flags, symbolStatus);
}
