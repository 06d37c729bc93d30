/*
 * hook_copy.c - copies and sets. Each is handed to the pager (copy.c), which
 * cuts it into chunk-sized pieces, makes each piece's chunks resident and
 * calls back here to forward that piece to the driver. Calls that touch no
 * region go straight to the driver.
 */
#include "hooks.h"
#include "internal.h"
#include "pager.h"

typedef struct cpy_ctx {
  int h;
  CUstream s;
  int kind;   /* which real signature */
  const void *host_src;
  void *host_dst;
  uintptr_t dst0, src0; /* start addresses, to turn piece addresses into host offsets */
} cpy_ctx_t;

enum { K_CPY, K_CPYA, K_HTOD, K_HTODA, K_DTOH, K_DTOHA, K_DTOD, K_DTODA };

static int piece(void *vctx, uintptr_t dst, uintptr_t src, size_t n) {
  cpy_ctx_t *c = vctx;
  int h = c->h;
  switch (c->kind) {
    case K_CPY: return REAL(h, cuMemcpy)((CUdeviceptr)dst, (CUdeviceptr)src, n);
    case K_CPYA: return REAL(h, cuMemcpyAsync)((CUdeviceptr)dst, (CUdeviceptr)src, n, c->s);
    case K_HTOD: return REAL(h, cuMemcpyHtoD_v2)((CUdeviceptr)dst, (const void *)src, n);
    case K_HTODA: return REAL(h, cuMemcpyHtoDAsync_v2)((CUdeviceptr)dst, (const void *)src, n, c->s);
    case K_DTOH: return REAL(h, cuMemcpyDtoH_v2)((void *)dst, (CUdeviceptr)src, n);
    case K_DTOHA: return REAL(h, cuMemcpyDtoHAsync_v2)((void *)dst, (CUdeviceptr)src, n, c->s);
    case K_DTOD: return REAL(h, cuMemcpyDtoD_v2)((CUdeviceptr)dst, (CUdeviceptr)src, n);
    case K_DTODA: return REAL(h, cuMemcpyDtoDAsync_v2)((CUdeviceptr)dst, (CUdeviceptr)src, n, c->s);
  }
  return CUDA_ERROR_INVALID_VALUE;
}

/* src_is_host: 1 the source is host memory, 0 it is not, -1 unknown. */
static CUresult copy(int h, int kind, uintptr_t dst, uintptr_t src, size_t n, CUstream s, int pt, bool async,
                     int src_is_host) {
  if (!_mt_hooks_init() || _mt_hook_real[h] == NULL) return CUDA_ERROR_NOT_INITIALIZED;
  cpy_ctx_t c = {.h = h, .s = s, .kind = kind};
  mt_handle_t st = async ? _mt_stream_of(s, pt) : (pt ? (mt_handle_t)(uintptr_t)CU_STREAM_PER_THREAD : 0);
  return _mt_cu_result(_mt_copy(dst, src, n, st, async, src_is_host, piece, &c));
}

CUresult impl_cpy(int h, int pt, CUdeviceptr dst, CUdeviceptr src, size_t ByteCount) {
  return copy(h, K_CPY, dst, src, ByteCount, NULL, pt, false, -1);
}
CUresult impl_cpy_async(int h, int pt, CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream hStream) {
  return copy(h, K_CPYA, dst, src, ByteCount, hStream, pt, true, -1);
}
CUresult impl_htod(int h, int pt, CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount) {
  return copy(h, K_HTOD, dstDevice, (uintptr_t)srcHost, ByteCount, NULL, pt, false, 1);
}
CUresult impl_htod_async(int h, int pt, CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount,
                         CUstream hStream) {
  return copy(h, K_HTODA, dstDevice, (uintptr_t)srcHost, ByteCount, hStream, pt, true, 1);
}
CUresult impl_dtoh(int h, int pt, void *dstHost, CUdeviceptr srcDevice, size_t ByteCount) {
  return copy(h, K_DTOH, (uintptr_t)dstHost, srcDevice, ByteCount, NULL, pt, false, 0);
}
CUresult impl_dtoh_async(int h, int pt, void *dstHost, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream) {
  return copy(h, K_DTOHA, (uintptr_t)dstHost, srcDevice, ByteCount, hStream, pt, true, 0);
}
CUresult impl_dtod(int h, int pt, CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount) {
  return copy(h, K_DTOD, dstDevice, srcDevice, ByteCount, NULL, pt, false, 0);
}
CUresult impl_dtod_async(int h, int pt, CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount,
                         CUstream hStream) {
  return copy(h, K_DTODA, dstDevice, srcDevice, ByteCount, hStream, pt, true, 0);
}

/* ---- sets ---------------------------------------------------------------------- */

typedef struct set_ctx {
  int h;
  int width;     /* 1, 2, 4 */
  bool async;
  unsigned value;
  CUstream s;
} set_ctx_t;

static int set_piece(void *vctx, uintptr_t dst, uintptr_t src, size_t n) {
  (void)src;
  set_ctx_t *c = vctx;
  int h = c->h;
  CUdeviceptr d = (CUdeviceptr)dst;
  size_t count = n / (size_t)c->width;
  switch (c->width * 2 + c->async) {
    case 2: return REAL(h, cuMemsetD8_v2)(d, (unsigned char)c->value, count);
    case 3: return REAL(h, cuMemsetD8Async)(d, (unsigned char)c->value, count, c->s);
    case 4: return REAL(h, cuMemsetD16_v2)(d, (unsigned short)c->value, count);
    case 5: return REAL(h, cuMemsetD16Async)(d, (unsigned short)c->value, count, c->s);
    case 8: return REAL(h, cuMemsetD32_v2)(d, c->value, count);
    case 9: return REAL(h, cuMemsetD32Async)(d, c->value, count, c->s);
  }
  return CUDA_ERROR_INVALID_VALUE;
}

static CUresult set(int h, int pt, int width, bool async, CUdeviceptr dst, unsigned value, size_t N, CUstream s) {
  if (!_mt_hooks_init() || _mt_hook_real[h] == NULL) return CUDA_ERROR_NOT_INITIALIZED;
  set_ctx_t c = {h, width, async, value, s};
  mt_handle_t st = async ? _mt_stream_of(s, pt) : (pt ? (mt_handle_t)(uintptr_t)CU_STREAM_PER_THREAD : 0);
  return _mt_cu_result(_mt_memset(dst, N * (size_t)width, (size_t)width, st, async, set_piece, &c));
}

CUresult impl_set8(int h, int pt, CUdeviceptr d, unsigned char uc, size_t N) { return set(h, pt, 1, false, d, uc, N, NULL); }
CUresult impl_set16(int h, int pt, CUdeviceptr d, unsigned short us, size_t N) { return set(h, pt, 2, false, d, us, N, NULL); }
CUresult impl_set32(int h, int pt, CUdeviceptr d, unsigned int ui, size_t N) { return set(h, pt, 4, false, d, ui, N, NULL); }
CUresult impl_set8_async(int h, int pt, CUdeviceptr d, unsigned char uc, size_t N, CUstream s) {
  return set(h, pt, 1, true, d, uc, N, s);
}
CUresult impl_set16_async(int h, int pt, CUdeviceptr d, unsigned short us, size_t N, CUstream s) {
  return set(h, pt, 2, true, d, us, N, s);
}
CUresult impl_set32_async(int h, int pt, CUdeviceptr d, unsigned int ui, size_t N, CUstream s) {
  return set(h, pt, 4, true, d, ui, N, s);
}
