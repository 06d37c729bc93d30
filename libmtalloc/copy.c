/*
 * copy.c - copies and sets that touch managed regions.
 *
 * A copy into or out of a region is cut into pieces that never cross a
 * chunk boundary on either side; each piece's chunks are made resident and
 * the piece forwarded before the next, so a copy of any size goes through a
 * budget of two chunks. Only the piece's own chunks are protected from
 * eviction while it is prepared (_mt_range_protect), not their regions: a
 * region larger than the budget is copied through it chunk by chunk. A
 * piece that overwrites a whole chunk does not fetch its old contents.
 * Pieces hold their regions until the stream they run on passes them:
 * asynchronous ones, and also the synchronous forms that may return before
 * the GPU is done (the driver's API synchronisation rules: device-to-device
 * and pageable host-to-device copies, and every memset of device memory),
 * which run on the legacy default stream, or the calling thread's
 * per-thread one for the _ptds forms. Only copies out of regions to the
 * host are complete when the call returns.
 *
 * A copy or set issued on a capturing stream runs at each launch of the
 * graph, not now: its regions join the capture's footprint (graph.c), and
 * it is forwarded whole, fetching and evicting nothing.
 *
 * Escaped pointers: a small host buffer copied to the device may be a table
 * of device pointers (an array of tensors, a struct of arguments); every
 * 8-byte word of it that points into a region marks that region escaped,
 * resident for good, since kernels will reach it without naming it. Only
 * buffers up to ESCAPE_SCAN_MAX are scanned: pointer tables are small, and
 * scanning gigabytes of weights would cost seconds and find false hits.
 *
 * Threading: under the pager lock, like everything the pager forwards.
 */
#include <errno.h>
#include <string.h>

#include "driver.h"
#include "pager.h"
#include "pager_internal.h"
#include "trace.h"

#define ESCAPE_SCAN_MAX ((size_t)1 << 20)

/* Every region an 8-byte word of the buffer points into. Outside a
 * capture it escapes: pinned now, since kernels will reach it without
 * naming it. In a captured copy the table is read at each replay, so its
 * regions join the graph's footprint instead. */
static void escape_scan(mt_pager_t *p, const void *src, size_t n, mt_handle_t s, bool captured) {
  const char *b = src;
  for (size_t o = 0; o + 8 <= n; o += 8) {
    uintptr_t w;
    memcpy(&w, b + o, 8);
    if (!_mt_in_range(p, w)) continue;
    mt_region_t *r = _mt_rmap_find(p->rmap, w, NULL, NULL);
    if (r == NULL) continue;
    if (captured) _mt_capture_add(p, s, r->addr);
    else if (!r->escaped && r->kind != REG_SMALL) _mt_region_escape(p, r, s);
  }
}

/* Is src (not ours) host memory we may read? Pageable host memory is
 * unknown to the driver; pinned memory says HOST. */
static bool readable_host(uintptr_t src) {
  const mt_driver_t *drv = _mt_driver();
  unsigned type = 0;
  CUresult rc = drv->cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)src);
  return rc != CUDA_SUCCESS || type == CU_MEMORYTYPE_HOST;
}

static size_t piece_limit(mt_pager_t *p, mt_region_t *r, uintptr_t a, size_t n) {
  if (r == NULL || r->kind == REG_SMALL) return n;
  size_t to_end = p->chunk - (size_t)((a - r->addr) % p->chunk);
  return n < to_end ? n : to_end;
}

int _mt_copy(uintptr_t dst, uintptr_t src, size_t n, mt_handle_t s, bool async, int src_is_host,
             mt_piece_fn fwd, void *ctx) {
  mt_pager_t *p = _mt_pager_if_started();
  if (p == NULL || (!_mt_in_range(p, dst) && !_mt_in_range(p, src))) return fwd(ctx, dst, src, n);
  pthread_mutex_lock(&p->lock);
  int rc = 0;
  bool din = _mt_in_range(p, dst), sin = _mt_in_range(p, src);
  bool table = n <= ESCAPE_SCAN_MAX && din && !sin && src_is_host != 0 && (src_is_host == 1 || readable_host(src));
  if (_mt_capturing(p, s)) {
    if (din) _mt_capture_range(p, s, dst, n);
    if (sin) _mt_capture_range(p, s, src, n);
    if (table) escape_scan(p, (const void *)src, n, s, true);
    rc = fwd(ctx, dst, src, n);
    pthread_mutex_unlock(&p->lock);
    return rc;
  }
  /* Synchronous copies into a region may still run after the call returns. */
  uint32_t si = async || din ? _mt_stream_index(p, s) : 0;
  if (_mt_trace_on()) {
    uint32_t dir = din && sin ? MT_TR_D2D : din ? (src_is_host ? MT_TR_H2D : MT_TR_D2D) : MT_TR_D2H;
    uint64_t t = _mt_trace_now();
    _mt_trace_copy(dir, false, async ? si : 0, n, t, t);
  }
  if (table) escape_scan(p, (const void *)src, n, s, false);
  while (n > 0 && rc == 0) {
    p->epoch++;
    mt_region_t *rd = _mt_region_of(p, dst), *rs = _mt_region_of(p, src);
    size_t piece = piece_limit(p, rd, dst, n);
    piece = piece_limit(p, rs, src, piece);
    _mt_range_protect(p, rd, dst, piece);
    _mt_range_protect(p, rs, src, piece);
    if (rd) rc = _mt_range_resident(p, rd, dst, piece, s, true, true);
    if (rs && rc == 0) rc = _mt_range_resident(p, rs, src, piece, s, false, false);
    if (rc == 0) rc = _mt_fetch_fence(p, s);
    else _mt_fetch_flush(p); /* what was fetched is DEVICE: its copies must run */
    if (rc == 0) rc = fwd(ctx, dst, src, piece);
    if (rc == 0 && si != 0) {
      uint64_t seq = _mt_stream_next(p, si);
      if (rd) _mt_region_hold(p, rd, si, seq);
      if (rs) _mt_region_hold(p, rs, si, seq);
    }
    dst += piece;
    src += piece;
    n -= piece;
  }
  pthread_mutex_unlock(&p->lock);
  return rc;
}

int _mt_memset(uintptr_t dst, size_t n, size_t elsize, mt_handle_t s, bool async, mt_piece_fn fwd, void *ctx) {
  mt_pager_t *p = _mt_pager_if_started();
  if (p == NULL || !_mt_in_range(p, dst)) return fwd(ctx, dst, 0, n);
  pthread_mutex_lock(&p->lock);
  int rc = 0;
  if (_mt_capturing(p, s)) {
    _mt_capture_range(p, s, dst, n);
    rc = fwd(ctx, dst, 0, n);
    pthread_mutex_unlock(&p->lock);
    return rc;
  }
  uint32_t si = _mt_stream_index(p, s); /* synchronous sets too may run after the call returns */
  if (_mt_trace_on()) {
    uint64_t t = _mt_trace_now();
    _mt_trace_copy(MT_TR_SET, false, async ? si : 0, n, t, t);
  }
  while (n > 0 && rc == 0) {
    p->epoch++;
    mt_region_t *rd = _mt_region_of(p, dst);
    size_t piece = piece_limit(p, rd, dst, n);
    piece -= piece % elsize;
    if (piece == 0) piece = n; /* misaligned tail: let the driver judge it */
    if (rd) {
      _mt_range_protect(p, rd, dst, piece);
      rc = _mt_range_resident(p, rd, dst, piece, s, true, true);
    }
    if (rc == 0) rc = _mt_fetch_fence(p, s);
    else _mt_fetch_flush(p);
    if (rc == 0) rc = fwd(ctx, dst, 0, piece);
    if (rc == 0 && si != 0 && rd) _mt_region_hold(p, rd, si, _mt_stream_next(p, si));
    dst += piece;
    n -= piece;
  }
  pthread_mutex_unlock(&p->lock);
  return rc;
}

/* ---- reads for mtalloc itself (the host optimizer) ---------------------------- */

/* One piece: on the pager's own d2h stream (which _mt_copy's fence made wait
 * for the fetches), waited for before the next piece is prepared. */
static int read_piece(void *ctx, uintptr_t dst, uintptr_t src, size_t n) {
  mt_pager_t *p = ctx;
  /* The application's work on the region may still run, even a
   * synchronous copy into it (from pageable memory cuMemcpyHtoD returns
   * once the source is staged): the d2h stream is ordered after none of
   * it, so the host waits for its holds first. */
  mt_region_t *r = _mt_region_of(p, src);
  for (unsigned i = 0; r != NULL && i < r->nholds; i++) {
    int d = _mt_hold_done(p, &r->holds[i], true);
    if (d < 0) return d;
  }
  return _mt_copy_wait(p, dst, src, n, p->d2h);
}

int _mt_host_read(void *dst, uintptr_t addr, size_t n) {
  mt_pager_t *p = _mt_pager_if_started();
  if (p == NULL || !_mt_in_range(p, addr)) return -ENOENT;
  return _mt_copy((uintptr_t)dst, addr, n, p->d2h, false, 0, read_piece, p);
}
