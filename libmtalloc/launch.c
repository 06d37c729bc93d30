/*
 * launch.c - a launch's footprint, and the residency guarantee.
 *
 * Before a kernel runs, every region it can reach through its parameters
 * must be resident. The parameter layout (offset and size of each
 * parameter) comes from the driver and is kept per handle (layout.c);
 * every 8-byte word of every parameter is a candidate pointer (a struct
 * parameter can hold pointers, e.g. PyTorch's TensorInfo). A word outside
 * the pager's address range is rejected by one comparison; the rest are
 * looked up in the region map. Each region is taken once per launch
 * (epoch mark), made resident whole, and held until the stream passes the
 * launch.
 *
 * What a launch writes: nothing in a parameter says whether the kernel
 * writes through it, so a region is made resident for writing (its chunks
 * dirty, copied back at eviction) unless somebody said otherwise: the
 * application, by advising the region read-mostly (mt_advise), or the
 * caller of _mt_launch_regions, per address (mt-trace replay --writes aware,
 * from the trace's access kinds). A region only read keeps the chunks that
 * have a current host copy clean, so evicting them costs no copy. A kernel
 * that writes such a region anyway breaks a promise we cannot check here;
 * mt_advise (mtalloc.h) says what is lost, and MT_VERIFY_CLEAN=1 catches it
 * at eviction (verify.c).
 *
 * A CUtensorMap passed by value names its tensor in an encoding only the
 * driver reads; its bytes are looked up among the descriptors the encoders
 * made (tensormap.c).
 *
 * Threading: everything under the pager lock; a launch's layout is also
 * held under the layout lock while its parameters are scanned.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "driver.h"
#include "layout.h"
#include "pager.h"
#include "pager_internal.h"
#include "tensormap.h"
#include "trace.h"

#include "hash.h"

typedef struct footprint {
  mt_region_t **r;
  bool *w;                   /* per_addr: per region, the launch may write it */
  size_t n, cap;
  size_t need;               /* bytes that must be resident at once */
  size_t cold;               /* regions not already hot (see _mt_region_hot) */
  bool per_addr;             /* write flags come per address (_mt_launch_regions); else a
                              * region is written unless advised read-mostly */
  uint64_t func;             /* names the work for the prefetcher; 0 = not shown to it */
  mt_region_t *inline_r[64];
  bool inline_w[64];
} footprint_t;

#define FP_INIT(fp) ((fp).r = (fp).inline_r, (fp).w = (fp).inline_w, (fp).cap = 64)

static void fp_fini(footprint_t *fp) {
  if (fp->r != fp->inline_r) free(fp->r);
  if (fp->w != fp->inline_w) free(fp->w);
}

/* Whether the launch may write footprint region i. */
static inline bool fp_writes(const footprint_t *fp, size_t i) {
  return fp->per_addr ? fp->w[i] : !fp->r[i]->readmostly;
}

/* Adds the region containing word, written unless advised read-mostly (the
 * scan's path: it stores no flag, fp_writes derives it). Returns the
 * region, new or already in the footprint, or NULL when word is in none. */
static mt_region_t *fp_add(mt_pager_t *p, footprint_t *fp, uintptr_t word) {
  if (!_mt_in_range(p, word)) return NULL;
  mt_region_t *r = _mt_rmap_find(p->rmap, word, NULL, NULL);
  if (r == NULL || r->epoch == p->epoch) return r;
  r->epoch = p->epoch;
  if (fp->n == fp->cap) {
    size_t cap = fp->cap * 2;
    mt_region_t **nr = malloc(cap * sizeof(*nr));
    bool *nw = malloc(cap * sizeof(*nw));
    if (nr == NULL || nw == NULL) { /* the region stays marked, so it is still never evicted here */
      free(nr);
      free(nw);
      return NULL;
    }
    memcpy(nr, fp->r, fp->n * sizeof(*nr));
    memcpy(nw, fp->w, fp->n * sizeof(*nw));
    fp_fini(fp);
    fp->r = nr;
    fp->w = nw;
    fp->cap = cap;
  }
  fp->r[fp->n++] = r;
  fp->need += _mt_region_bytes(p, r);
  fp->cold += !_mt_region_hot(p, r, !r->readmostly);
  return r;
}

/* _mt_launch_regions' path: the same, with the caller's word on whether
 * the launch writes through word (a read-mostly region is read whatever it
 * says). A region listed twice is written if either listing writes. */
static void fp_add_addr(mt_pager_t *p, footprint_t *fp, uintptr_t word, bool write) {
  size_t n0 = fp->n;
  mt_region_t *r = fp_add(p, fp, word);
  if (r == NULL) return;
  write = write && !r->readmostly;
  size_t i = n0;
  bool was;
  if (fp->n > n0) {
    was = !r->readmostly; /* what fp_add counted in cold */
  } else { /* listed before: find it */
    for (i = fp->n; i-- > 0 && fp->r[i] != r;) {}
    if (i >= fp->n) return;
    was = fp->w[i];
    write = write || was;
  }
  fp->w[i] = write;
  if (write != was) {
    fp->cold -= !_mt_region_hot(p, r, was);
    fp->cold += !_mt_region_hot(p, r, write);
  }
}

static void scan_bytes(mt_pager_t *p, footprint_t *fp, const void *v, size_t size) {
  for (size_t o = 0; o + 8 <= size; o += 8) {
    uintptr_t w;
    memcpy(&w, (const char *)v + o, 8);
    fp_add(p, fp, w);
  }
}

/* CUtensorMap descriptors are 128 bytes, 64-byte aligned in the parameter
 * buffer, alone or inside a struct parameter: each such window of a large
 * parameter (off: its offset in the buffer) is looked up. */
typedef struct tmap_ctx {
  mt_pager_t *p;
  footprint_t *fp;
} tmap_ctx_t;

static void tmap_found(void *arg, uintptr_t addr) {
  tmap_ctx_t *c = arg;
  fp_add(c->p, c->fp, addr);
}

static __attribute__((noinline)) void scan_tensormaps(mt_pager_t *p, footprint_t *fp, const void *v, size_t off,
                                                      size_t size) {
  tmap_ctx_t c = {p, fp};
  _mt_tmap_each(v, (64 - off % 64) % 64, size, tmap_found, &c);
}

static void scan(mt_pager_t *p, footprint_t *fp, const mt_layout_t *l, void **params, void **extra) {
  /* Descriptors are looked for in a second pass, only once any exists, so
   * the word scan every launch makes stays as lean as it was. */
  bool tmaps = _mt_tmap_any();
  if (params != NULL) {
    for (uint32_t i = 0; i < l->n; i++)
      if (params[i] != NULL) scan_bytes(p, fp, params[i], l->size[i]);
    for (uint32_t i = 0; tmaps && i < l->n; i++)
      if (params[i] != NULL && l->size[i] >= MT_TMAP_BYTES) scan_tensormaps(p, fp, params[i], l->off[i], l->size[i]);
    return;
  }
  if (extra == NULL) return;
  const char *buf = NULL;
  size_t len = 0;
  for (size_t i = 0; extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
    if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER) buf = extra[i + 1];
    else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE && extra[i + 1]) len = *(size_t *)extra[i + 1];
    else if (i > 64) break; /* a malformed array: stop rather than run off */
  }
  if (buf == NULL) return;
  if (l->known && l->n > 0) {
    for (uint32_t i = 0; i < l->n; i++)
      if (l->off[i] + l->size[i] <= len) scan_bytes(p, fp, buf + l->off[i], l->size[i]);
  } else {
    scan_bytes(p, fp, buf, len);
  }
  if (tmaps) scan_tensormaps(p, fp, buf, 0, len); /* descriptors sit 64-byte aligned in the buffer */
}

bool _mt_owns(uintptr_t addr) {
  mt_pager_t *p = _mt_pager_if_started();
  return p != NULL && _mt_in_range(p, addr);
}

/* The launch's trace record: identity = xxh3 of the function and the
 * footprint's region ids (stable across iterations for long-lived regions).
 * A span's access kind is read where the launch made its region resident
 * for reading (advised read-mostly, or told so by the caller), else unknown:
 * a launch written through is not known to write. */
static void trace_launch(mt_pager_t *p, const footprint_t *fp, CUfunction f, const char *name, uint32_t si) {
  (void)p;
  mt_trace_span_t stackspans[64];
  uint8_t stackkinds[64];
  bool heap = fp->n > 64;
  mt_trace_span_t *sp = heap ? malloc(fp->n * sizeof(*sp)) : stackspans;
  uint8_t *kinds = heap ? malloc(fp->n) : stackkinds;
  if (sp != NULL && kinds != NULL) {
    uint64_t fid = (uint64_t)(uintptr_t)f;
    uint64_t h = XXH3_64bits(&fid, sizeof(fid));
    for (size_t i = 0; i < fp->n; i++) {
      sp[i] = (mt_trace_span_t){fp->r[i]->id, 0, fp->r[i]->size};
      kinds[i] = fp_writes(fp, i) ? MT_ACC_UNKNOWN : MT_ACC_READ;
      h = XXH3_64bits_withSeed(&fp->r[i]->id, sizeof(uint64_t), h);
    }
    _mt_trace_launch(h, fid, name, si, sp, kinds, (uint32_t)fp->n, 0, f == NULL);
  }
  if (heap) {
    free(sp);
    free(kinds);
  }
}

/* A footprint larger than what the budget leaves (budget less pinned
 * memory) runs host-mapped where kernels can reach host copies: as much of
 * it as fits is made resident, the rest is used where it lies, in host
 * memory reached through the host mappings (slow, not wrong). What is
 * already on the device is counted first, so every region chosen for
 * residency fits beside it; then regions are taken in footprint order while
 * they fit. Without host mappings such a launch fails, naming the kernel. */
static unsigned oversize_warnings;
#define OVERSIZE_WARNINGS_MAX 16 /* then at MT_VERBOSE=2 only */

/* The footprint's regions are in use by the work queued on s so far:
 * holds, so that nothing reuses their memory (an eviction, a free, the
 * handoff's next taker) before that work is done. Returns s's index. */
static uint32_t hold_footprint(mt_pager_t *p, const footprint_t *fp, mt_handle_t s) {
  uint32_t si = _mt_stream_index(p, s);
  uint64_t seq = _mt_stream_next(p, si);
  for (size_t i = 0; i < fp->n; i++) {
    mt_region_t *r = fp->r[i];
    if (r->nholds > 0 && r->holds[0].stream == si) r->holds[0].seq = seq; /* the common case */
    else _mt_region_hold(p, r, si, seq);
  }
  return si;
}

/* A launch that fails after its footprint was made (partly) resident has
 * fetch copies queued on h2d and may have taken memory the handoff gave in
 * stream order, still in use by earlier work on s. Without holds, an
 * eviction copied a chunk out while its fetch still wrote it (overwriting
 * the only good host copy), and a free gave handed memory to another
 * stream under that work (found by review). So s waits for the fetches,
 * and the footprint is held as if the kernel had been queued. */
static void failed_hold(mt_pager_t *p, const footprint_t *fp, mt_handle_t s) {
  (void)_mt_fetch_fence(p, s); /* an error here is the driver's, already the launch's */
  if (fp->n > 0) (void)hold_footprint(p, fp, s);
}

static int launch_prepared(mt_pager_t *p, footprint_t *fp, CUfunction f, mt_handle_t s, mt_forward_fn fwd,
                           void *ctx, const char *what, const char *name) {
  size_t need = fp->need;
  const char *kn = f && name ? name : ""; /* the kernel's name, cached with its layout */
  size_t room = p->budget > p->pinned ? p->budget - p->pinned : 0;
  bool over = need > room;
  if (over && !p->host_reach) {
    mt_error("%s%s%s needs %zu bytes resident at once (%zu buffers), more than MT_MAX_VRAM=%zu "
             "leaves after %zu bytes that stay on the device; raise MT_MAX_VRAM or split the work "
             "(with host mappings, MT_HOST_MAP=auto on a driver that has them, it would run "
             "with the rest in host memory)",
             what, *kn ? " " : "", kn, need, fp->n, p->budget, p->pinned);
    return -E2BIG;
  }
  int rc = _mt_runahead_wait(p); /* decided near the launches the GPU runs */
  if (rc < 0) return rc;
  /* its identity and uses first: residency files chunks by their next use */
  if (p->pf != NULL && fp->func != 0) _mt_prefetch_begin(p, fp->func, fp->r, fp->n);
  size_t placed = 0, host_bytes = 0;
  if (!over && fp->cold > 0) {
    /* Room for every chunk the footprint lacks, in one go (see
     * _mt_make_room); a failure here is left to the region that meets it. */
    size_t lack = 0;
    /* never-touched chunks, which only freed memory handed on may back:
     * counted only when some may be (a walk over every chunk otherwise) */
    bool fresh = p->pending != NULL && _mt_handoff_on(p);
    for (size_t i = 0; i < fp->n; i++) {
      mt_region_t *r = fp->r[i];
      if (_mt_region_bytes(p, r) == 0 || r->ndevice == r->nchunks) continue;
      lack += (size_t)(r->nchunks - r->ndevice) * p->chunk;
      for (uint32_t k = 0; fresh && k < r->nchunks; k++)
        p->op_fresh += (size_t)(r->chunks[k].state == CH_NONE) * p->chunk;
    }
    if (lack > 0) _mt_make_room(p, lack);
  }
  if (over)
    for (size_t i = 0; i < fp->n; i++)
      if (_mt_region_bytes(p, fp->r[i]) > 0) placed += (size_t)fp->r[i]->ndevice * p->chunk;
  for (size_t i = 0; i < fp->n && (fp->cold > 0 || over); i++) {
    mt_region_t *r = fp->r[i];
    bool write = fp_writes(fp, i);
    if (_mt_region_hot(p, r, write)) continue;
    size_t extra = over && _mt_region_bytes(p, r) > 0 ? (size_t)(r->nchunks - r->ndevice) * p->chunk : 0;
    if (!over || placed + extra <= room) {
      placed += extra; /* counted only for a launch over the budget */
      rc = _mt_region_resident(p, r, s, write);
    } else {
      rc = _mt_region_use_in_place(p, r, s, &host_bytes);
    }
    if (rc < 0) {
      failed_hold(p, fp, s); /* what was fetched so far is DEVICE: its copies run, ordered */
      if (rc == -E2BIG)
        mt_error("%s%s%s: could not make its %zu bytes resident within MT_MAX_VRAM=%zu (the rest "
                 "is held by work in flight)", what, *kn ? " " : "", kn, need, p->budget);
      else if (rc == -ENOMEM && over)
        mt_error("%s%s%s needs %zu bytes at once, more than MT_MAX_VRAM=%zu, and host memory for "
                 "the rest is full (MT_MAX_HOST=%zu): raise MT_MAX_HOST or MT_MAX_VRAM",
                 what, *kn ? " " : "", kn, need, p->budget, p->host_budget);
      return rc;
    }
  }
  if (over) {
    mt_stat_add(launches_host_mapped, 1);
    mt_stat_add(host_mapped_bytes, host_bytes);
    mt_log_level_t level = oversize_warnings < OVERSIZE_WARNINGS_MAX ? MT_LOG_WARN : MT_LOG_INFO;
    if (level == MT_LOG_WARN) oversize_warnings++;
    _mt_log(level, "%s%s%s needs %zu bytes resident at once (%zu buffers), more than MT_MAX_VRAM=%zu "
           "leaves after %zu bytes that stay on the device; it runs with %zu bytes in host memory, "
           "reached through host mappings (slow, not wrong; counted in launches_host_mapped)",
           what, *kn ? " " : "", kn, need, fp->n, p->budget, p->pinned, host_bytes);
    if (host_bytes > 0 && p->dev->ops->kernel_host_bytes) p->dev->ops->kernel_host_bytes(p->dev, s, host_bytes);
  }
  _mt_back_fresh(p);
  rc = _mt_fetch_fence(p, s);
  if (rc < 0) {
    failed_hold(p, fp, s);
    return rc;
  }
  rc = fwd(ctx);
  if (rc == 0) _mt_runahead_record(p);
  if (rc == 0 && fp->n > 0) {
    uint32_t si = hold_footprint(p, fp, s);
    if (_mt_trace_on()) trace_launch(p, fp, f, name, si);
  } else if (rc == 0 && _mt_trace_on()) {
    trace_launch(p, fp, f, name, 0);
  } else if (rc != 0) {
    failed_hold(p, fp, s);
  }
  /* while the kernel runs: fetch what the next ones are expected to use */
  if (rc == 0 && p->pf != NULL && fp->func != 0) _mt_prefetch_launch(p, s);
  /* and host room for what comes back: spills to NVMe on the drive's time */
  if (rc == 0 && p->nv != NULL) _mt_sw_launch(p);
  return rc;
}

/* While a launch is prepared the pager knows its stream: memory of freed
 * regions still in use on that stream can be its room (handoff.c). */
static int launch_locked(mt_pager_t *p, footprint_t *fp, CUfunction f, mt_handle_t s, mt_forward_fn fwd,
                         void *ctx, const char *what, const char *name) {
  p->op_si = _mt_stream_index(p, s);
  p->op_fresh = 0;
  int rc = launch_prepared(p, fp, f, s, fwd, ctx, what, name);
  p->op_si = 0;
  p->op_fresh = 0;
  return rc;
}

int _mt_launch(CUfunction f, void **params, void **extra, mt_handle_t s, mt_forward_fn fwd, void *ctx) {
  mt_pager_t *p = _mt_pager_if_started();
  if (p == NULL) return fwd(ctx);
  mt_stat_add(launches, 1);
  footprint_t fp = {.n = 0, .need = 0, .cold = 0, .func = (uint64_t)(uintptr_t)f};
  FP_INIT(fp);
  pthread_mutex_lock(&p->lock);
  mt_layout_t *l = _mt_layout_acquire(f);
  p->epoch++;
  if (l != NULL) scan(p, &fp, l, params, extra);
  int rc;
  if (_mt_capturing(p, s)) {
    for (size_t i = 0; i < fp.n; i++) _mt_capture_add(p, s, fp.r[i]->addr);
    rc = fwd(ctx);
  } else {
    rc = launch_locked(p, &fp, f, s, fwd, ctx, "kernel", l ? l->name : NULL);
  }
  /* Held until here: the name messages and the trace use lives in the
   * layout, which an unload on another thread may free once released. */
  _mt_layout_release();
  pthread_mutex_unlock(&p->lock);
  fp_fini(&fp);
  return rc;
}

/* graph.c needs the same guarantee for a graph's recorded footprint, and
 * mt-trace replay for a trace's, with what each span does. */
int _mt_launch_regions(mt_pager_t *p, uintptr_t *addrs, const bool *write, size_t n, mt_handle_t s,
                       uint64_t func, mt_forward_fn fwd, void *ctx, const char *what) {
  footprint_t fp = {.n = 0, .need = 0, .cold = 0, .per_addr = write != NULL, .func = func};
  FP_INIT(fp);
  p->epoch++;
  for (size_t i = 0; i < n; i++) {
    if (write != NULL) fp_add_addr(p, &fp, addrs[i], write[i]);
    else fp_add(p, &fp, addrs[i]);
  }
  int rc = launch_locked(p, &fp, NULL, s, fwd, ctx, what, what);
  fp_fini(&fp);
  return rc;
}
