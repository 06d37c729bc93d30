/*
 * fake_copy.c - memory copies and sets, synchronous and asynchronous.
 *
 * Concept: every copy or set is an op on a stream, run by the stream's
 * worker (so a copy touching unmapped memory faults on a worker and is
 * reported as "copy HtoD" etc.). The synchronous forms go to the legacy
 * default stream -- ordered after all earlier legacy-stream work and so,
 * by the legacy rules, after earlier work on blocking streams -- and return
 * when the op has run, as the real driver does for pageable memory. The
 * _ptds/_ptsz variants behave the same: the fake maps the per-thread
 * default stream to the legacy one.
 *
 * FAKECUDA_BW (bytes/s) makes each copy take n/BW seconds on its stream,
 * so tests can check that prefetches are issued early enough.
 *
 * Threading: nothing here touches shared state except through fc_submit
 * (under g_fc.mu). Source and destination are read and written only by the
 * worker, when the op runs: an async copy from a host buffer that the
 * caller changes before the stream reaches it copies the new bytes, as on a
 * GPU.
 */
#include "fake_internal.h"

static CUresult copy_op(void *dst, const void *src, size_t n, const char *what, CUstream h,
                        bool sync) {
  CUresult r = fc_check_ctx();
  if (r) return r;
  if (n && (!dst || !src)) return CUDA_ERROR_INVALID_VALUE;
  fc_op_t *op = fc_op_new(FC_OP_COPY, 0);
  if (!op) return CUDA_ERROR_OUT_OF_MEMORY;
  op->u.copy.dst = dst;
  op->u.copy.src = src;
  op->u.copy.n = n;
  op->u.copy.what = what;
  op->handle = h;
  if (sync) return fc_run_sync(op);
  return fc_submit_to(h, op);
}

static CUresult set_op(CUdeviceptr dst, uint32_t value, unsigned width, size_t count, CUstream h,
                       bool sync) {
  CUresult r = fc_check_ctx();
  if (r) return r;
  if (count && !dst) return CUDA_ERROR_INVALID_VALUE;
  if ((uintptr_t)dst % width) return CUDA_ERROR_INVALID_VALUE;
  fc_op_t *op = fc_op_new(FC_OP_MEMSET, 0);
  if (!op) return CUDA_ERROR_OUT_OF_MEMORY;
  op->u.set.dst = (void *)(uintptr_t)dst;
  op->u.set.value = value;
  op->u.set.width = width;
  op->u.set.count = count;
  op->handle = h;
  if (sync) return fc_run_sync(op);
  return fc_submit_to(h, op);
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

/* synchronous, per-thread default stream (= legacy stream here) */
FC_API CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr dst, const void *src, size_t n) {
  return cuMemcpyHtoD_v2(dst, src, n);
}
FC_API CUresult cuMemcpyDtoH_v2_ptds(void *dst, CUdeviceptr src, size_t n) {
  return cuMemcpyDtoH_v2(dst, src, n);
}
FC_API CUresult cuMemcpyDtoD_v2_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n) {
  return cuMemcpyDtoD_v2(dst, src, n);
}
FC_API CUresult cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n) {
  return cuMemcpy(dst, src, n);
}
FC_API CUresult cuMemsetD8_v2_ptds(CUdeviceptr dst, unsigned char v, size_t n) {
  return cuMemsetD8_v2(dst, v, n);
}
FC_API CUresult cuMemsetD16_v2_ptds(CUdeviceptr dst, unsigned short v, size_t n) {
  return cuMemsetD16_v2(dst, v, n);
}
FC_API CUresult cuMemsetD32_v2_ptds(CUdeviceptr dst, unsigned int v, size_t n) {
  return cuMemsetD32_v2(dst, v, n);
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
