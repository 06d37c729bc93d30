/*
 * fake_copy.c - memory copies and sets, synchronous and asynchronous.
 *
 * Concept: every copy or set is an op on a stream, run by the stream's
 * worker (so a copy touching unmapped memory faults on a worker and is
 * reported as "copy HtoD" etc.). The synchronous forms go to the legacy
 * default stream (the _ptds forms to the calling thread's per-thread
 * default stream) and return when the driver's "API synchronization
 * behavior" rules say the real one may, no later:
 *   - device to host, pinned host to device, host to host: when the copy
 *     has run;
 *   - pageable host to device: the stream's earlier work is waited for, the
 *     source is staged (copied into the op) and the call returns; the copy
 *     to the device runs later;
 *   - device to device: at once, the copy runs later;
 *   - memset: at once, unless the target is pinned host memory.
 * So a caller that frees or unmaps memory a synchronous copy or set uses,
 * right after it returns, is caught as it would be on a GPU (with
 * FAKECUDA_JITTER_US the op runs late enough to notice).
 *
 * FAKECUDA_BW (bytes/s) makes each copy take n/BW seconds on its stream,
 * so tests can check that prefetches are issued early enough.
 *
 * Threading: nothing here touches shared state except under g_fc.mu.
 * Source and destination are read and written only by the worker, when
 * the op runs (a staged source was read by the caller): an async copy from
 * a host buffer that the caller changes before the stream reaches it copies
 * the new bytes, as on a GPU.
 */
#include <string.h>

#include "fake_internal.h"

typedef enum { WAIT_DONE, WAIT_STAGED, WAIT_NONE } sync_t;

/* How long a synchronous copy from src to dst keeps the caller (above). */
static sync_t copy_sync(const void *dst, const void *src) {
  fc_mem_kind_t d = fc_mem_kind((uintptr_t)dst), s = fc_mem_kind((uintptr_t)src);
  if (d == FC_MEM_DEVICE && s == FC_MEM_DEVICE) return WAIT_NONE;
  if (d == FC_MEM_DEVICE && s == FC_MEM_PAGEABLE) return WAIT_STAGED;
  return WAIT_DONE;
}

/* Queues op on h; for a synchronous call, returns when `how` says. */
static CUresult submit(fc_op_t *op, CUstream h, bool sync, sync_t how) {
  if (!sync) return fc_submit_to(h, op);
  fc_lock();
  fc_stream_t *s = fc_stream_get(h);
  CUresult r = CUDA_ERROR_INVALID_HANDLE;
  if (!s) {
    fc_op_free(op);
  } else {
    if (how == WAIT_STAGED) fc_wait_seq(s->id, s->submitted); /* "a stream sync ... before the copy" */
    uint64_t seq = 0;
    r = fc_submit(s, op, &seq);
    if (r == CUDA_SUCCESS && how == WAIT_DONE) fc_wait_seq(s->id, seq);
  }
  fc_unlock();
  return r;
}

static CUresult copy_op(void *dst, const void *src, size_t n, const char *what, CUstream h,
                        bool sync) {
  CUresult r = fc_check_ctx();
  if (r) return r;
  if (n && (!dst || !src)) return CUDA_ERROR_INVALID_VALUE;
  sync_t how = WAIT_DONE;
  if (sync) {
    fc_lock();
    how = copy_sync(dst, src);
    fc_unlock();
  }
  fc_op_t *op = fc_op_new(FC_OP_COPY, how == WAIT_STAGED ? n : 0);
  if (!op) return CUDA_ERROR_OUT_OF_MEMORY;
  if (how == WAIT_STAGED) {
    memcpy(op->buf, src, n); /* the staging buffer: the caller may reuse src at once */
    src = op->buf;
  }
  op->u.copy.dst = dst;
  op->u.copy.src = src;
  op->u.copy.n = n;
  op->u.copy.what = what;
  op->handle = h;
  return submit(op, h, sync, how);
}

static CUresult set_op(CUdeviceptr dst, uint32_t value, unsigned width, size_t count, CUstream h,
                       bool sync) {
  CUresult r = fc_check_ctx();
  if (r) return r;
  if (count && !dst) return CUDA_ERROR_INVALID_VALUE;
  if ((uintptr_t)dst % width) return CUDA_ERROR_INVALID_VALUE;
  sync_t how = WAIT_NONE;
  if (sync) {
    fc_lock();
    how = fc_mem_kind((uintptr_t)dst) == FC_MEM_PINNED ? WAIT_DONE : WAIT_NONE;
    fc_unlock();
  }
  fc_op_t *op = fc_op_new(FC_OP_MEMSET, 0);
  if (!op) return CUDA_ERROR_OUT_OF_MEMORY;
  op->u.set.dst = (void *)(uintptr_t)dst;
  op->u.set.value = value;
  op->u.set.width = width;
  op->u.set.count = count;
  op->handle = h;
  return submit(op, h, sync, how);
}

#define D(p) ((void *)(uintptr_t)(p))

/* synchronous */
FC_API CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n) {
  return copy_op(D(dst), src, n, "HtoD", NULL, true);
}
FC_API CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n) {
  return copy_op(dst, D(src), n, "DtoH", NULL, true);
}
FC_API CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t n) {
  return copy_op(D(dst), D(src), n, "DtoD", NULL, true);
}
FC_API CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t n) {
  return copy_op(D(dst), D(src), n, "Default", NULL, true);
}
FC_API CUresult cuMemsetD8_v2(CUdeviceptr dst, unsigned char v, size_t n) {
  return set_op(dst, v, 1, n, NULL, true);
}
FC_API CUresult cuMemsetD16_v2(CUdeviceptr dst, unsigned short v, size_t n) {
  return set_op(dst, v, 2, n, NULL, true);
}
FC_API CUresult cuMemsetD32_v2(CUdeviceptr dst, unsigned int v, size_t n) {
  return set_op(dst, v, 4, n, NULL, true);
}

/* synchronous, on the calling thread's per-thread default stream */
#define PT CU_STREAM_PER_THREAD
FC_API CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr dst, const void *src, size_t n) {
  return copy_op(D(dst), src, n, "HtoD", PT, true);
}
FC_API CUresult cuMemcpyDtoH_v2_ptds(void *dst, CUdeviceptr src, size_t n) {
  return copy_op(dst, D(src), n, "DtoH", PT, true);
}
FC_API CUresult cuMemcpyDtoD_v2_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n) {
  return copy_op(D(dst), D(src), n, "DtoD", PT, true);
}
FC_API CUresult cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n) {
  return copy_op(D(dst), D(src), n, "Default", PT, true);
}
FC_API CUresult cuMemsetD8_v2_ptds(CUdeviceptr dst, unsigned char v, size_t n) {
  return set_op(dst, v, 1, n, PT, true);
}
FC_API CUresult cuMemsetD16_v2_ptds(CUdeviceptr dst, unsigned short v, size_t n) {
  return set_op(dst, v, 2, n, PT, true);
}
FC_API CUresult cuMemsetD32_v2_ptds(CUdeviceptr dst, unsigned int v, size_t n) {
  return set_op(dst, v, 4, n, PT, true);
}

/* asynchronous */
FC_API CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, CUstream s) {
  return copy_op(D(dst), src, n, "HtoD", s, false);
}
FC_API CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t n, CUstream s) {
  return copy_op(dst, D(src), n, "DtoH", s, false);
}
FC_API CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
  return copy_op(D(dst), D(src), n, "DtoD", s, false);
}
FC_API CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
  return copy_op(D(dst), D(src), n, "Default", s, false);
}
FC_API CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char v, size_t n, CUstream s) {
  return set_op(dst, v, 1, n, s, false);
}
FC_API CUresult cuMemsetD16Async(CUdeviceptr dst, unsigned short v, size_t n, CUstream s) {
  return set_op(dst, v, 2, n, s, false);
}
FC_API CUresult cuMemsetD32Async(CUdeviceptr dst, unsigned int v, size_t n, CUstream s) {
  return set_op(dst, v, 4, n, s, false);
}

/* asynchronous, per-thread default stream */
FC_API CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dst, const void *src, size_t n, CUstream s) {
  return cuMemcpyHtoDAsync_v2(dst, src, n, s);
}
FC_API CUresult cuMemcpyDtoHAsync_v2_ptsz(void *dst, CUdeviceptr src, size_t n, CUstream s) {
  return cuMemcpyDtoHAsync_v2(dst, src, n, s);
}
FC_API CUresult cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
  return cuMemcpyDtoDAsync_v2(dst, src, n, s);
}
FC_API CUresult cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
  return cuMemcpyAsync(dst, src, n, s);
}
FC_API CUresult cuMemsetD8Async_ptsz(CUdeviceptr dst, unsigned char v, size_t n, CUstream s) {
  return cuMemsetD8Async(dst, v, n, s);
}
FC_API CUresult cuMemsetD16Async_ptsz(CUdeviceptr dst, unsigned short v, size_t n, CUstream s) {
  return cuMemsetD16Async(dst, v, n, s);
}
FC_API CUresult cuMemsetD32Async_ptsz(CUdeviceptr dst, unsigned int v, size_t n, CUstream s) {
  return cuMemsetD32Async(dst, v, n, s);
}
