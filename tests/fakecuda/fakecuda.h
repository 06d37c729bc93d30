/*
 * fakecuda.h - the test-side API of the fake CUDA driver (libcuda.so.1 in
 * tests/fakecuda). The fake emulates the Driver API in host memory: device
 * addresses are host addresses, so a "kernel" is a host function that
 * dereferences its pointer parameters directly. Reserved but unmapped device
 * addresses are PROT_NONE, so a kernel or copy touching memory that is not
 * resident faults exactly as a GPU would raise an illegal-address error; the
 * fake turns the fault into one line naming the kernel (or copy) and the
 * address, and exits non-zero.
 *
 * Programs that reach the driver the way libcudart does (dlopen of
 * "libcuda.so.1") look these functions up with dlsym on the same handle.
 *
 * Environment:
 *   FAKECUDA_MEM        device memory capacity, bytes, K/M/G suffixes (default 1G)
 *   FAKECUDA_JITTER_US  each stream operation waits a random 0..N us first (default 0)
 *   FAKECUDA_BW         copies take bytes/FAKECUDA_BW seconds (default: instant)
 *   FAKECUDA_REPORT     1: print "fakecuda: peak_device_bytes N" at exit
 *   FAKECUDA_KERNEL_AS_FUNC  accept (default) | reject: whether cuFuncGetParamInfo
 *                       and cuFuncGetName accept a CUkernel handle; reject answers
 *                       CUDA_ERROR_INVALID_VALUE (launching a CUkernel always works)
 *   FAKECUDA_PARAMINFO  ok (default) | unsupported: every cuFuncGetParamInfo and
 *                       cuKernelGetParamInfo answers CUDA_ERROR_NOT_SUPPORTED
 *   FAKECUDA_PROCADDR_WRAPPERS  1: cuGetProcAddress returns internal entry
 *                       points (thunks) whose addresses differ from the dlsym
 *                       exports, as a driver with its own dispatch table may
 */
#ifndef FAKECUDA_H
#define FAKECUDA_H

#include <stddef.h>
#include <cuda.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What a kernel body sees of its launch. */
typedef struct fakecuda_launch {
  const char *name;         /* the registered kernel name */
  unsigned grid[3];         /* gridDim x, y, z */
  unsigned block[3];        /* blockDim x, y, z */
  unsigned shared_bytes;    /* dynamic shared memory requested */
  CUstream stream;          /* stream it was launched on (NULL: default) */
} fakecuda_launch_t;

/* A kernel body: params[i] points at the value of parameter i, exactly as the
 * kernelParams array of cuLaunchKernel. It runs on the stream's worker thread. */
typedef void (*fakecuda_kernel_fn)(void **params, const fakecuda_launch_t *launch);

/* Registers fn as a kernel named name whose parameters have the given sizes
 * in bytes, laid out in order with natural alignment (each parameter aligned
 * to min(size, 8)), as nvcc lays them out; cuFuncGetParamInfo answers from
 * this layout. name is copied. Each parameter and their total may take up to
 * 32,764 bytes, as cu130 allows. Returns the CUfunction, or NULL on bad input. */
CUfunction fakecuda_register_kernel(const char *name, fakecuda_kernel_fn fn,
                                    size_t nparams, const size_t *param_sizes);

/* A "library image" for cuLibraryLoadData / cuModuleLoadData: the fake's
 * stand-in for a cubin. Each kernel is laid out like fakecuda_register_kernel
 * lays out its parameters, except that param_aligns (when not NULL) gives
 * each parameter's alignment (64 for a CUtensorMap). The image and what it
 * points to need only live during the load call. */
#define FAKECUDA_IMAGE_MAGIC 0x4e49424b41464346ull /* "FCFAKBIN" */
typedef struct fakecuda_image_kernel {
  const char *name;
  fakecuda_kernel_fn fn;
  size_t nparams;
  const size_t *param_sizes;
  const size_t *param_aligns;
} fakecuda_image_kernel_t;
typedef struct fakecuda_image {
  unsigned long long magic; /* FAKECUDA_IMAGE_MAGIC */
  size_t nkernels;
  const fakecuda_image_kernel_t *kernels;
} fakecuda_image_t;

/* The global address a CUtensorMap made by the fake's encoders names (its
 * encoding is the fake's own, not a plain word), or NULL when desc is not
 * one. Kernel bodies use it to reach the tensor. */
void *fakecuda_tensormap_address(const void *desc);

/* Device memory in use now and at peak: cuMemAlloc* allocations plus physical
 * allocations from cuMemCreate with a device location, in bytes. Reserved
 * address space and host-located allocations do not count. */
size_t fakecuda_device_used(void);
size_t fakecuda_device_peak(void);
void fakecuda_reset_peak(void);

/* Tears the driver down as it is at process exit: every later call returns
 * CUDA_ERROR_DEINITIALIZED (as calls from destructors that run after the
 * driver's own do). */
void fakecuda_deinit(void);

/* Kernel launches and copies executed so far (all streams). */
unsigned long long fakecuda_launch_count(void);

/* Calls of the driver function `name` so far (successful or not), for the
 * counted ones: cuMemCreate, cuMemRelease, cuMemMap, cuMemUnmap,
 * cuMemSetAccess, cuMemHostAlloc, cuMemFreeHost; and "cuMemUnmap_busy", the
 * cuMemUnmap calls made while a copy was queued or running on some stream
 * (a real driver's cuMemUnmap may wait for the device), and
 * "cuMemSetAccess_busy", the same for cuMemSetAccess (also documented as
 * synchronous for most uses). ULLONG_MAX for a
 * name that is not counted. */
unsigned long long fakecuda_call_count(const char *name);

#ifdef __cplusplus
}
#endif
#endif
