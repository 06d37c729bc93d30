/*
 * alloc.c - regions come and go: cuMemAlloc's and cuMemFree's side of the
 * pager (pager.c keeps the chunks' state machine).
 *
 * The concept. An allocation is a region: a small one is a slot of a slab
 * (smallpool.c), a paged one a run of chunks in the pager's address space,
 * none of them backed until first used. A free is immediate when the
 * caller waits (cuMemFree waits for work using the region, as the driver
 * does), else deferred: the region leaves the live counts at once and is
 * destroyed once the work before the free on its stream has run (the
 * pending list, reaped here, and by make_room_ex when it needs the memory;
 * handoff.c may hand its chunks on first). cuMemGetInfo's answer is here
 * too: capacity and held bytes, in whole chunks and slabs.
 *
 * Threading: under p->lock (pager_internal.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pager_internal.h"
#include "trace.h"

/* Something is mapped at c's address: device memory, or its host copy. */
static bool chunk_mapped(const mt_pager_t *p, const mt_chunk_t *c) {
  return c->state == CH_DEVICE || (c->state == CH_HOST && p->host_mapped);
}

static void region_destroy(mt_pager_t *p, mt_region_t *r) {
  _mt_fresh_unlink(p, r);
  _mt_prefetch_forget(p, r);
  if (r->kind == REG_SMALL) {
    _mt_small_free(p, r->addr, r->small_class);
    free(r);
    return;
  }
  /* one unmap per run of mapped chunks (device memory or host copies),
   * after any fetch copy in flight (unmapfence.c; on error the unmaps go
   * ahead: the region is gone either way) */
  bool fenced = false;
  for (uint32_t i = 0; i < r->nchunks; i++) {
    _mt_wb_settle(p, &r->chunks[i]); /* copies reading them */
    _mt_wb_cancel(p, &r->chunks[i]); /* out of the write-behind stock (and its batch) */
  }
  for (uint32_t i = 0; i < r->nchunks;) {
    if (!chunk_mapped(p, &r->chunks[i])) {
      i++;
      continue;
    }
    if (!fenced) _mt_unmap_fence(p);
    fenced = true;
    uint32_t j = i + 1;
    while (j < r->nchunks && chunk_mapped(p, &r->chunks[j])) j++;
    p->dev->ops->unmap(p->dev, r->addr + (uintptr_t)i * p->chunk, (size_t)(j - i) * p->chunk);
    i = j;
  }
  for (uint32_t i = 0; i < r->nchunks; i++) {
    mt_chunk_t *c = &r->chunks[i];
    if (c->state == CH_DEVICE && c->handed) { /* its memory is another chunk's now */
      c->handed = false;
      r->nhanded--;
    } else if (c->state == CH_DEVICE) {
      p->pol_ops->remove(p->pol, &c->node);
      p->used -= p->chunk;
      _mt_pool_dev_put(p, c->dev);
      c->dev = 0;
    }
    if (c->state == CH_HOST) _mt_host_tier_out(p, c);
    if (c->nv != NULL) _mt_nv_drop(p, c);
    _mt_live_move(p, c, c->state, CH_NONE, false);
    c->state = CH_NONE;
    _mt_host_release(p, c);
  }
  if (r->escaped) {
    p->pinned -= (size_t)r->nchunks * p->chunk;
    p->escaped -= (size_t)r->nchunks * p->chunk;
  }
  p->committed -= (size_t)r->nchunks * p->chunk;
  _mt_va_free(&p->va, r->addr, r->nchunks, p->chunk);
  _mt_resident_changed(p);
  free(r);
}

/* The application freed r: its chunks leave the live tier counts now (a
 * trace drops the region at its FREE record), and never move again. */
static void region_leaves_live(mt_pager_t *p, mt_region_t *r) {
  _mt_prefetch_forget(p, r);
  if (r->kind == REG_SMALL) {
    p->live[CH_DEVICE] -= r->size;
  } else {
    for (uint32_t i = 0; i < r->nchunks; i++) _mt_live_move(p, &r->chunks[i], r->chunks[i].state, CH_NONE, false);
  }
  r->freed = true;
  _mt_live_publish(p);
}

/* Device memory a freed region still gives back when destroyed: its chunks
 * not handed on already (handoff.c). */
static size_t pending_gives(const mt_pager_t *p, const mt_region_t *r) {
  if (r->kind == REG_SMALL) return 0;
  return (size_t)(r->ndevice - r->nhanded) * p->chunk;
}

void _mt_reap_pending(mt_pager_t *p, bool wait) {
  if (_mt_capture_active(p)) return; /* no event queries during a capture (graph.c) */
  /* Without a wait, a region still pending after the last walk (or its own
   * look when it joined the list, _mt_free) can be free now only if some
   * stream's work has completed since: each was held by a checkpoint not
   * passed then. So the walk is skipped while no checkpoint has passed or
   * been popped, and its outcome is the same. The walk is over every
   * pending region, and with the host far ahead of the GPU there are
   * thousands: walked at every allocation, free and eviction, it took 97%
   * of a replay's time (MT_HANDOFF=on, 64 micro-batches). */
  if (p->pending == NULL) return; /* the usual case: nothing to query */
  uint64_t sig = _mt_streams_progress(p);
  if (!wait && sig == p->reaped_sig) return;
  mt_region_t **pp = &p->pending;
  while (*pp != NULL) {
    mt_region_t *r = *pp;
    if (!_mt_region_held(p, r, wait && (r->kind == REG_SMALL || pending_gives(p, r) > 0))) {
      *pp = r->next_pending;
      region_destroy(p, r);
    } else {
      pp = &r->next_pending;
    }
  }
  /* what the walk itself found (popped) makes the next one walk again */
  p->reaped_sig = sig;
}

void _mt_reap_for(mt_pager_t *p, size_t need) {
  size_t n = 0;
  for (mt_region_t *r = p->pending; r != NULL; r = r->next_pending) n++;
  mt_region_t *stack[64], **v = n <= 64 ? stack : malloc(n * sizeof(*v));
  if (v == NULL) return;
  size_t k = 0;
  for (mt_region_t *r = p->pending; r != NULL; r = r->next_pending) v[k++] = r; /* newest first */
  size_t over = p->used + need - p->budget, got = 0;
  for (size_t i = n; i-- > 0 && got < over;) {
    mt_region_t *r = v[i];
    if (r->kind == REG_SMALL || pending_gives(p, r) == 0) continue; /* gives no paged device memory */
    if (!_mt_region_held(p, r, true)) got += pending_gives(p, r);
  }
  if (v != stack) free(v);
  _mt_reap_pending(p, false); /* the ones just waited for, and any others done by now */
}

static void regions_changed(int delta) {
  if (delta > 0) {
    uint64_t live = atomic_fetch_add_explicit(&_mt_stats.regions_live, 1, memory_order_relaxed) + 1;
    _mt_stat_peak(&_mt_stats.regions_peak, live);
    mt_stat_add(allocs, 1);
  } else {
    mt_stat_sub(regions_live, 1);
    mt_stat_add(frees, 1);
  }
}

static int alloc_locked(mt_pager_t *p, size_t size, uintptr_t *out) {
  _mt_reap_pending(p, false);
  mt_region_t *r;
  if (size < p->small_limit && size <= p->chunk / 2) {
    r = calloc(1, sizeof(*r));
    if (r == NULL) return -ENOMEM;
    int cls;
    int rc = _mt_small_alloc(p, size, &r->addr, &cls);
    if (rc == -ENOMEM && p->pending) {
      _mt_reap_pending(p, true);
      rc = _mt_small_alloc(p, size, &r->addr, &cls);
    }
    if (rc < 0) {
      free(r);
      return rc;
    }
    r->kind = REG_SMALL;
    r->small_class = (uint8_t)cls;
    r->span = _mt_small_class_size(p, cls);
  } else {
    size_t n = (size + p->chunk - 1) / p->chunk;
    size_t bytes = n * p->chunk;
    /* The capacity (see _mt_capacity()) is what cuMemGetInfo reports: an
     * allocation the reported free bytes cover must succeed, and one beyond
     * them must fail. */
    if (_mt_held_bytes(p) + bytes > _mt_capacity(p)) {
      if (p->pending && !_mt_capture_active(p)) {
        _mt_reap_pending(p, true);
        return alloc_locked(p, size, out);
      }
      if (p->nv != NULL)
        mt_error("out of memory: %zu bytes asked, %zu already allocated; MT_MAX_VRAM=%zu plus "
                 "MT_MAX_HOST=%zu (after the NVMe tier's staging) plus %zu bytes of the NVMe tier, less "
                 "one %zu-byte chunk kept for swapping, is all mtalloc can hold (raise MT_MAX_NVME)", size,
                 _mt_held_bytes(p), p->budget, p->host_budget, _mt_nv_capacity(p), p->chunk);
      else
        mt_error("out of memory: %zu bytes asked, %zu already allocated; MT_MAX_VRAM=%zu plus "
                 "MT_MAX_HOST=%zu, less one %zu-byte chunk kept for swapping, is all mtalloc can "
                 "hold (raise MT_MAX_HOST, or give MT_OFFLOAD_DIR an NVMe directory)", size,
                 _mt_held_bytes(p), p->budget, p->host_budget, p->chunk);
      return -ENOMEM;
    }
    r = calloc(1, sizeof(*r) + n * sizeof(mt_chunk_t));
    if (r == NULL) return -ENOMEM;
    if (_mt_va_alloc(&p->va, n, p->chunk, &r->addr) < 0) {
      free(r);
      mt_error("out of address space: the pager reserved %zu bytes; %zu more asked", p->va_size, size);
      return -ENOMEM;
    }
    r->kind = REG_PAGED;
    r->nchunks = (uint32_t)n;
    r->span = bytes;
    for (size_t i = 0; i < n; i++) {
      r->chunks[i].region = r;
      r->chunks[i].index = (uint32_t)i;
    }
    p->committed += bytes;
    if (p->host_mapped) { /* backed by the next launch: _mt_back_fresh */
      r->fnext = p->fresh;
      if (p->fresh) p->fresh->fprev = r;
      p->fresh = r;
      r->fresh = true;
    }
  }
  r->size = size;
  r->id = ++p->next_region_id;
  int rc = _mt_rmap_insert(p->rmap, r->addr, r->size, r);
  if (rc < 0) {
    region_destroy(p, r);
    return rc;
  }
  regions_changed(+1);
  if (r->kind == REG_SMALL) {
    p->live[CH_DEVICE] += size;
    _mt_live_publish(p);
  }
  if (_mt_trace_on()) _mt_trace_alloc(r->id, size, 0, r->kind == REG_SMALL);
  *out = r->addr;
  return 0;
}

int _mt_alloc(size_t size, uintptr_t *out) {
  mt_pager_t *p = _mt_pager;
  if (size == 0) return -EINVAL;
  pthread_mutex_lock(&p->lock);
  /* A new operation: the marks of the last launch's prefetch and read-ahead
   * windows (the epoch) must not keep the room it needs from being made. */
  p->epoch++;
  int rc = alloc_locked(p, size, out);
  pthread_mutex_unlock(&p->lock);
  return rc;
}

int _mt_free(uintptr_t addr, mt_handle_t s, bool async) {
  mt_pager_t *p = _mt_pager;
  if (p == NULL || !_mt_in_range(p, addr)) return -ENOENT;
  pthread_mutex_lock(&p->lock);
  uintptr_t start;
  mt_region_t *r = _mt_rmap_find(p->rmap, addr, &start, NULL);
  if (r == NULL || start != addr) {
    pthread_mutex_unlock(&p->lock);
    return -EINVAL; /* inside our range but not an allocation: the driver's answer */
  }
  int kept = _mt_graph_keep(p, addr); /* allocated during a capture: its graph keeps it */
  if (kept != 0) {
    pthread_mutex_unlock(&p->lock);
    return kept < 0 ? kept : 0;
  }
  if (_mt_capture_active(p)) async = true; /* no waiting during a capture: freed in order of s */
  _mt_rmap_remove(p->rmap, addr, NULL);
  _mt_fresh_unlink(p, r); /* freed before any launch: nothing can reach it */
  regions_changed(-1);
  region_leaves_live(p, r);
  if (async) {
    /* Stream-ordered: it is freed once the work before it on s has run. */
    uint32_t si = _mt_stream_index(p, s);
    if (_mt_trace_on()) _mt_trace_free(r->id, si, true);
    if (si != 0) _mt_region_hold(p, r, si, _mt_stream_seq(p, si));
    /* this one now: the walk below runs only when some stream has moved */
    if (!_mt_capture_active(p) && !_mt_region_held(p, r, false)) {
      region_destroy(p, r);
    } else {
      r->next_pending = p->pending;
      p->pending = r;
    }
    _mt_reap_pending(p, false);
  } else {
    if (_mt_trace_on()) _mt_trace_free(r->id, 0, false);
    _mt_region_held(p, r, true); /* cuMemFree waits for work using it, as the driver does */
    region_destroy(p, r);
  }
  pthread_mutex_unlock(&p->lock);
  return 0;
}

int _mt_region_range(uintptr_t addr, uintptr_t *base, size_t *size) {
  mt_pager_t *p = _mt_pager;
  if (p == NULL || !_mt_in_range(p, addr)) return -ENOENT;
  pthread_mutex_lock(&p->lock);
  int rc = _mt_rmap_find(p->rmap, addr, base, size) ? 0 : -EINVAL;
  pthread_mutex_unlock(&p->lock);
  return rc;
}

void _mt_pager_device(uint64_t *ctx, int *ordinal) {
  mt_pager_t *p = _mt_pager;
  *ctx = p->dev->info.ctx;
  *ordinal = p->dev->info.ordinal;
}

/* cuMemGetInfo. total is the capacity: all that mtalloc can hold for the
 * application at once, device and host together; free is what an
 * allocation can still take. Both count whole chunks and slabs, of which
 * every live allocation is a part, so free + (bytes the application holds)
 * <= total at every moment, however far the program oversubscribes --
 * the assertion PyTorch's cudaMallocAsync backend makes. */
void _mt_mem_info(size_t *free_bytes, size_t *total) {
  mt_pager_t *p = _mt_pager;
  pthread_mutex_lock(&p->lock);
  size_t cap = _mt_capacity(p), held = _mt_held_bytes(p);
  /* held exceeds the capacity only after the budget shrank under us (the
   * device had less free memory than it said): report full. */
  *total = cap > held ? cap : held;
  *free_bytes = cap > held ? cap - held : 0;
  pthread_mutex_unlock(&p->lock);
}
