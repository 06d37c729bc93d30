/*
 * pager.c - the chunk state machine: which chunk lives where, and moving it.
 *
 * Every paged region is cut into chunks of MT_CHUNK bytes (at least the
 * driver's mapping granularity). A chunk is
 *   NONE    never touched: no memory anywhere (what cudaMalloc gives back).
 *           With host mappings a chunk stays NONE only until the next launch
 *           is forwarded (_mt_back_fresh): then it gets a private host copy
 *           mapped at its address and is HOST, so that a kernel reaching it
 *           through a pointer no scan saw is slow, not wrong;
 *   DEVICE  device physical memory mapped at its address; `dirty` when the
 *           device copy is newer than the host copy (or there is none);
 *   HOST    its data lives only in its host copy; with host mappings the
 *           host copy is mapped at the chunk's address, so a kernel that
 *           reaches it through a pointer we could not see is slow, not wrong;
 *           otherwise the address is unmapped;
 *   NVME    its data lives only on NVMe (tier_nvme.c, the store in
 *           nvme_store.c); its address is unmapped, so only a launch or copy
 *           that names it brings it back.
 * A DEVICE chunk may keep its host copy ("retained") so that, while clean, it
 * is evicted by dropping the device memory with no copy at all; one brought
 * back from NVMe keeps its NVMe pages the same way (evicted clean, it is
 * NVME again without a write). Any write drops the stale copies' claim.
 *
 * Tiers: evictions go GPU -> host; when host copies would exceed
 * MT_MAX_HOST, the host tier's own policy instance (MT_SPILL_POLICY, over
 * HOST chunks) names the chunks to spill to NVMe; a fetch of an NVME chunk
 * reads it into a staging slot and copies it to the device from there,
 * without a host slot.
 *
 * Invariants (checked at level 3 by the tests): `used` is the sum of DEVICE
 * chunks and small slabs and never exceeds `budget`; `host_used` is the sum
 * of host copies and never exceeds `host_budget`; a chunk is in the policy
 * exactly when it is DEVICE; a region with an unfinished hold is never
 * evicted or freed.
 *
 * Moves: evictions are batched (all copies issued on the d2h stream, one
 * wait, then unmaps); fetches are issued on the h2d stream and the
 * application's stream waits for them with an event, never the host.
 * Physical memory comes from pools (physpool.c): a move creates and
 * releases nothing. Mapping changes go by runs of adjacent chunks: a
 * fetched run costs one cuMemMap per chunk (each has its own handle), one
 * cuMemSetAccess and, with host mappings, one cuMemUnmap of the host
 * mappings; an evicted run one cuMemUnmap and, with host mappings, one
 * cuMemMap per chunk and one cuMemSetAccess (tests/pager oversize moves).
 * cuMemUnmap may wait for the device: every unmap comes after the fetch
 * copies still in flight (unmapfence.c), at the cost of a host wait only
 * when they are not done; a launch evicts for its whole footprint first,
 * so that it pays that wait at most once.
 *
 * Building the pager from its configuration and the MT_* options is
 * pager_start.c; allocating and freeing regions (deferred frees, their
 * reaping) is alloc.c.
 *
 * Threading: everything under p->lock (see pager_internal.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pager_internal.h"
#include "trace.h"

mt_pager_t *_mt_pager;

/* Region counters behind the launch fast path (_mt_range_resident). */
void _mt_set_dirty(mt_pager_t *p, mt_chunk_t *c) {
  _mt_wb_cancel(p, c); /* a write-behind copy no longer makes it clean */
  if (!c->dirty && c->state == CH_DEVICE) c->region->nclean--;
  c->dirty = true;
  if (c->nv != NULL) _mt_nv_drop(p, c); /* its NVMe copy is stale now */
  _mt_recost(p, c);
}

void _mt_live_publish(mt_pager_t *p) {
  atomic_store_explicit(&_mt_stats.live_gpu_bytes, p->live[CH_DEVICE], memory_order_relaxed);
  atomic_store_explicit(&_mt_stats.live_host_bytes, p->live[CH_HOST], memory_order_relaxed);
  atomic_store_explicit(&_mt_stats.live_nvme_bytes, p->live[CH_NVME], memory_order_relaxed);
  _mt_stat_peak(&_mt_stats.peak_live_gpu_bytes, p->live[CH_DEVICE]);
  _mt_stat_peak(&_mt_stats.peak_live_host_bytes, p->live[CH_HOST]);
  _mt_stat_peak(&_mt_stats.peak_live_nvme_bytes, p->live[CH_NVME]);
}

/* c moves from tier `from` to `to` (CH_*): the live tier counts follow,
 * and a placement no other record shows (a first use, an overwrite, a
 * host copy for a never-touched chunk) is traced as a move from no tier,
 * so that a trace's residency is the pager's (tests/e2e/trace_check.py). */
void _mt_live_move(mt_pager_t *p, mt_chunk_t *c, int from, int to, bool trace_it) {
  if (from == to) return;
  c->region->nnvme += (to == CH_NVME) - (from == CH_NVME);
  if (to == CH_NVME) p->host_filled = true; /* the host tier spilled: every tier is in use (handoff.c) */
  if (from == CH_HOST && to == CH_NVME) _mt_ra_spilled(c); /* a read ahead it was, unused, was wasted */
  if (to == CH_NVME && c->ahead) _mt_ahead_outcome(p, c, true); /* its copy ahead saved a write */
  if (c->region->freed) return;
  uint64_t b = _mt_chunk_data(p, c);
  if (from != CH_NONE) p->live[from] -= b;
  if (to != CH_NONE) p->live[to] += b;
  _mt_live_publish(p);
  if (trace_it && _mt_trace_on()) {
    static const uint8_t tier[4] = {MT_TIER_NONE, MT_TIER_GPU, MT_TIER_HOST, MT_TIER_NVME};
    _mt_trace_move(to == CH_DEVICE ? MT_TR_FETCH : MT_TR_EVICT, c->region->id, c->index, MT_TIER_NONE, tier[to],
                   false, false, b);
  }
}

void _mt_resident_changed(mt_pager_t *p) {
  atomic_store_explicit(&_mt_stats.resident_bytes, p->used, memory_order_relaxed);
  _mt_stat_peak(&_mt_stats.peak_resident_bytes, p->used);
}

/* The retained list holds every DEVICE chunk that keeps a host copy, clean
 * (evicted for free) or stale (its buffer reused at eviction). When the
 * host budget is short, the oldest lose their copy. */

/* Level 3 (MT_CHECK_INVARIANTS): r's counters agree with its chunks, every
 * HOST chunk has its host copy, a chunk is in the retained list only
 * when it is DEVICE with a host copy, and a linked DEVICE chunk is filed
 * by its cost. */
void _mt_check_region(const mt_pager_t *p, const mt_region_t *r) {
#if MT_CHECK_INVARIANTS
  if (r->kind == REG_SMALL) return;
  uint32_t ndev = 0, nclean = 0, nwb = 0, nnvme = 0;
  for (uint32_t i = 0; i < r->nchunks; i++) {
    const mt_chunk_t *c = &r->chunks[i];
    mt_assert(c->state <= CH_NVME);
    if (c->state == CH_NVME) mt_assert(c->nv != NULL && _mt_nvme_chunk_valid(c->nv) && c->host_addr == 0 && c->dev == 0);
    if (c->nv != NULL) mt_assert(c->state == CH_NVME || (c->state == CH_DEVICE && !c->dirty) || c->state == CH_HOST);
    /* a host chunk whose NVMe write is in flight (spillwrite.c) left the
     * spill order when the write began, and may rejoin it before the
     * completion takes it out: either is right */
    if (!(c->state == CH_HOST && c->sw != 0))
      mt_assert(c->node.linked == ((c->state == CH_DEVICE && !c->handed) || (c->state == CH_HOST && p->nv != NULL)));
    mt_assert(!c->handed || (c->state == CH_DEVICE && r->freed && c->dev == 0));
    if (c->state == CH_DEVICE) {
      ndev++;
      nclean += !c->dirty;
      mt_assert(c->dev != 0 || c->handed);
      /* the policy has it under its cost now (_mt_recost) */
      mt_assert(!c->node.linked || c->node.cost == _mt_chunk_cost(c));
    }
    if (c->state == CH_HOST) mt_assert(c->host_addr != 0 && (c->host != 0 || !p->host_mapped));
    if (c->state == CH_HOST && c->node.linked) mt_assert(c->node.cost == _mt_host_cost(c)); /* _mt_recost */
    if (c->state == CH_NONE) mt_assert(c->host_addr == 0);
    mt_assert(!c->retained || (c->state == CH_DEVICE && c->host_addr != 0));
    mt_assert(c->clean_batch == 0 || (c->state == CH_DEVICE && c->dirty));
    mt_assert(c->clean_batch == 0 || c->clean_batch == c->wb_batch);
    mt_assert(!c->wbclean || (c->state == CH_DEVICE && !c->dirty && c->host_addr != 0 && c->clean_batch == 0));
    nwb += c->wb_batch != 0;
    nnvme += c->state == CH_NVME;
  }
  mt_assert(ndev == r->ndevice && nclean == r->nclean && nwb == r->nwb && nnvme == r->nnvme);
#else
  (void)p, (void)r;
#endif
}

int _mt_copy_wait(mt_pager_t *p, uintptr_t dst, uintptr_t src, size_t n, mt_handle_t s) {
  int rc = p->dev->ops->copy(p->dev, dst, src, n, s);
  if (rc == 0) rc = p->dev->ops->event_record(p->dev, p->ev_evict, s);
  if (rc == 0) rc = p->dev->ops->event_sync(p->dev, p->ev_evict);
  return rc;
}

/* ---- eviction ------------------------------------------------------------------ */

typedef struct victim_ctx {
  mt_pager_t *p;
  bool wait;  /* second pass: accept held chunks (we will wait for them) */
  bool spent; /* accept dirty chunks of spent regions (a policy that does not weigh cost) */
  uint64_t walk; /* this walk (_mt_region_held_in) */
} victim_ctx_t;

bool _mt_region_held(mt_pager_t *p, mt_region_t *r, bool wait) {
  for (unsigned i = 0; i < r->nholds; i++) {
    int d = _mt_hold_done(p, &r->holds[i], wait);
    if (d != 1) return true;
  }
  r->nholds = 0;
  return false;
}

static bool eligible(mt_policy_node_t *n, void *arg) {
  victim_ctx_t *v = arg;
  mt_chunk_t *c = _mt_chunk_of(n);
  mt_region_t *r = c->region;
  /* a freed region's data is dead: waiting for its stream beats copying it */
  if (r->escaped || r->freed || r->epoch == v->p->epoch || c->epoch == v->p->epoch) return false;
  /* During a capture no copy may be waited for (graph.c): clean chunks only,
   * and none a prefetch may still be copying into -- the unmap fence is
   * skipped then (unmapfence.c), so its memory could go to a kernel while
   * the copy still writes it (found by review). */
  if (_mt_capture_active(v->p) && (c->dirty || (c->host_addr == 0 && c->nv == NULL) || r->pf_event != 0))
    return false;
  if (v->wait) return true;
  /* probably dead data (its region past its last use, not yet freed):
   * copying it out is wasted, and the free gives its memory back soon.
   * A policy that weighs cost files it apart (MT_COST_DEAD) instead. */
  if (!v->spent && !v->p->pol_ops->weighs && c->dirty && _mt_prefetch_spent(v->p, r)) return false;
  return !_mt_region_held_in(v->p, r, v->walk);
}

/* b lies above c (regions do not overlap, so (addr, index) orders them). */
static bool chunk_va_less(const mt_chunk_t *b, const mt_chunk_t *c) {
  return b->region->addr > c->region->addr || (b->region->addr == c->region->addr && b->index > c->index);
}

/* Insertion sort by address (region, then chunk index): batches are at
 * most EVICT_BATCH long. */
static void sort_by_va(mt_chunk_t **b, int n) {
  for (int i = 1; i < n; i++) {
    mt_chunk_t *c = b[i];
    int j = i;
    while (j > 0 && chunk_va_less(b[j - 1], c)) {
      b[j] = b[j - 1];
      j--;
    }
    b[j] = c;
  }
}

/* Frees device memory until `need` more bytes fit in the budget. Chunks of
 * regions in the current epoch (the operation being prepared) are never
 * chosen; with may_wait false, neither are chunks that work in flight
 * still holds (no host wait for them). Returns 0, or -E2BIG when nothing
 * more can be evicted. */

/* A victim stays on the device after all: back in the policy, and its host
 * copy back on the retained list. */
static void unpick(mt_pager_t *p, mt_chunk_t *c) {
  c->node.cost = _mt_chunk_cost(c);
  p->pol_ops->insert(p->pol, &c->node);
  if (c->host_addr != 0) _mt_retained_link(p, c);
}

static int make_room_ex(mt_pager_t *p, size_t need, bool may_wait) {
  /* Freed regions give their memory first: those whose stream work is
   * done, then (where waiting is allowed: not for a launch's whole
   * footprint at once, nor for a prefetch) the oldest ones, waiting for
   * their streams: the kernel that last used a freed buffer is usually the
   * one running, and waiting for it costs less than evicting live data
   * (a copy out now and a fetch back later). */
  if (p->used + need > p->budget && p->pending) _mt_reap_pending(p, false);
  /* then, for a launch, those still in use on its own stream: their memory
   * is reused in stream order, no wait and no copy (handoff.c) */
  if (p->used + need > p->budget && p->pending && !p->prefetching) _mt_handoff(p, need);
  if (p->used + need > p->budget && p->pending && may_wait && !p->prefetching && !_mt_capture_active(p))
    _mt_reap_for(p, need);
  bool reaped = false;
  while (p->used + need > p->budget) {
    mt_chunk_t *batch[EVICT_BATCH];
    int n = 0;
    size_t freed = 0;
    victim_ctx_t vc = {p, false, false, 0};
    while (n < EVICT_BATCH && p->used - freed + need > p->budget) {
      vc.walk = ++p->walks;
      mt_policy_node_t *node = p->pol_ops->victim(p->pol, eligible, &vc);
      if (node == NULL && !vc.wait && !p->pol_ops->weighs) { /* only spent chunks are free to go: they go */
        vc.spent = true;
        node = p->pol_ops->victim(p->pol, eligible, &vc);
        vc.spent = false;
      }
      /* nothing free to evict, and the host may wait for the GPU */
      const bool stuck = node == NULL && !vc.wait && may_wait && !_mt_capture_active(p);
      if (stuck && p->pending && !reaped) {
        /* wait for the freed regions' streams: their memory, no copy. Oldest
         * first and only until the need is covered, and only for regions
         * that give paged memory back: a small region's slab stays, and
         * waiting for every freed region (the newest is the last work
         * queued) emptied the GPU's queue (BERT with the handoff on: one
         * 1.0 s wait for a freed small region, docs/eviction.md "Freed
         * memory in stream order"). */
        reaped = true;
        _mt_reap_for(p, need);
        continue;
      }
      /* everything is in flight: wait for the GPU to get a step further and
       * look again. Waiting for the coldest chunk's last use instead can
       * wait for most of the queue: with the handoff on, ViT's GPU then
       * idled behind the evictions that followed (75.2% against 77.7% of
       * ideal; docs/eviction.md "Freed memory in stream order"). */
      if (stuck && _mt_stream_step(p) == 1) {
        if (p->pending) _mt_reap_pending(p, false); /* freed regions the step finished */
        continue;
      }
      if (stuck) {
        vc.wait = true; /* everything is in flight: wait for the coldest */
        continue;
      }
      if (node == NULL) break;
      mt_chunk_t *c = _mt_chunk_of(node);
      if (vc.wait && _mt_region_held(p, c->region, true)) return -EIO;
      p->pol_ops->remove(p->pol, node); /* out of the way of the next pick */
      /* and of _mt_host_get_ex's drop of retained copies, which would take the
       * host copy this eviction relies on (a clean victim is skipped by the
       * copy loop before a later victim's _mt_host_get_ex runs) */
      _mt_retained_unlink(_mt_chunk_of(node));
      batch[n++] = c;
      /* a copy out this launch needed, or found made ahead: what
       * write-behind will make ahead for it next period (prefetch.c) */
      if (c->dirty || c->wbclean) _mt_prefetch_evicting(p);
      freed += p->chunk;
      vc.wait = false;
    }
    if (n == 0) {
      if (p->used + need <= p->budget) break; /* freed regions made the room */
      return -E2BIG;
    }
    /* Copies for dirty victims, one wait for all of them. */
    bool copied = false;
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++) {
      mt_chunk_t *c = batch[i];
      _mt_wb_cleaned(p, c, true); /* a write-behind copy in flight: wait for it, not a second copy */
      if (!c->dirty && (c->host_addr != 0 || c->nv != NULL)) { /* a valid copy is kept */
        if (c->host_addr == 0 || _mt_verify_clean(p, c) == 0) continue;
        _mt_set_dirty(p, c); /* MT_VERIFY_CLEAN: written against mt_advise, or unchecked: keep it */
      }
      if ((rc = _mt_host_get_ex(p, c, true)) < 0) {
        if (rc != -ENOMEM || i == 0) break;
        /* Host memory for part of the batch only: evict those, return the
         * rest to the policy, go round again. */
        for (int k = i; k < n; k++) unpick(p, batch[k]);
        n = i;
        rc = 0;
        break;
      }
      uintptr_t va = c->region->addr + (uintptr_t)c->index * p->chunk;
      if ((rc = p->dev->ops->copy(p->dev, c->host_addr, va, p->chunk, p->d2h)) < 0) break;
      copied = true;
    }
    uint64_t t0 = _mt_trace_on() ? _mt_trace_now() : 0;
    if (copied && rc == 0) {
      rc = p->dev->ops->event_record(p->dev, p->ev_evict, p->d2h);
      if (rc == 0) rc = p->dev->ops->event_sync(p->dev, p->ev_evict);
    }
    if (rc < 0) { /* nothing lost: put them back as they were */
      /* The copies issued before the failure still write into the host
       * slots the victims keep: wait for them (ev_evict names an older
       * batch until it is recorded again, after them). */
      if (copied && (p->dev->ops->event_record(p->dev, p->ev_evict, p->d2h) < 0 ||
                     p->dev->ops->event_sync(p->dev, p->ev_evict) < 0))
        mt_error("an eviction copy failed, and the copies issued before it cannot be waited for: the "
                 "driver is not answering (%s)", strerror(-rc));
      for (int i = 0; i < n; i++) unpick(p, batch[i]);
      return rc;
    }
    /* Mapping changes by runs of adjacent victims: one unmap per run, the
     * device memory back to the pool (no release), each host copy mapped
     * at its chunk (each is its own slot), one set_access per run. The
     * unmaps come after any fetch copy still in flight (unmapfence.c). */
    rc = _mt_unmap_fence(p);
    if (rc < 0) {
      for (int i = 0; i < n; i++) unpick(p, batch[i]);
      return rc;
    }
    sort_by_va(batch, n);
    for (int i = 0; i < n;) {
      int j = i + 1;
      while (j < n && _mt_chunk_va(p, batch[j]) == _mt_chunk_va(p, batch[j - 1]) + p->chunk) j++;
      uintptr_t va0 = _mt_chunk_va(p, batch[i]);
      p->dev->ops->unmap(p->dev, va0, (size_t)(j - i) * p->chunk);
      bool mapped = true;
      for (int k = i; k < j; k++) {
        mt_chunk_t *c = batch[k];
        p->used -= p->chunk;
        _mt_pool_dev_put(p, c->dev);
        c->dev = 0;
        _mt_retained_unlink(c);
        /* a clean chunk without a host copy goes back to NVMe: unmapped */
        if (p->host_mapped && c->host_addr != 0 &&
            p->dev->ops->map(p->dev, _mt_chunk_va(p, c), p->chunk, c->host, c->host_off) < 0)
          mapped = false; /* logged; the chunk is unmapped, as with MT_HOST_MAP=off */
      }
      /* access for each sub-run of host-mapped chunks */
      for (int k = i; k < j && p->host_mapped && mapped;) {
        if (batch[k]->host_addr == 0) {
          k++;
          continue;
        }
        int e = k + 1;
        while (e < j && batch[e]->host_addr != 0) e++;
        p->dev->ops->set_access(p->dev, _mt_chunk_va(p, batch[k]), (size_t)(e - k) * p->chunk);
        k = e;
      }
      i = j;
    }
    for (int i = 0; i < n; i++) {
      mt_chunk_t *c = batch[i];
      bool to_nvme = c->host_addr == 0; /* clean, its NVMe copy valid */
      if (_mt_trace_on()) {
        _mt_trace_move(MT_TR_EVICT, c->region->id, c->index, MT_TIER_GPU, to_nvme ? MT_TIER_NVME : MT_TIER_HOST,
                       c->dirty, false, _mt_chunk_data(p, c));
        if (c->dirty) _mt_trace_copy(MT_TR_D2H, true, 0, p->chunk, t0, _mt_trace_now());
      }
      if (to_nvme) mt_stat_add(nvme_drops, 1);
      if (c->dirty) {
        mt_stat_add(evictions_dirty, 1);
        /* a region advised read-mostly should never need this copy: one
         * here means a write the advice did not cover (the optimizer's
         * weights are the case to watch) */
        if (c->region->readmostly) mt_stat_add(evictions_dirty_readmostly, 1);
        mt_stat_add(bytes_d2h, p->chunk);
      } else {
        mt_stat_add(evictions_clean, 1);
        if (c->wbclean) mt_stat_add(write_behind_used, 1);
        c->region->nclean--;
      }
      c->dirty = false;
      _mt_wb_cancel(p, c); /* its copy is used (or was never made) */
      _mt_wb_clear(c); /* any write-behind copy ran before the ev_evict sync */
      if (c->pf) c->region->npf--; /* a prefetch evicted before use was wasted */
      c->pf = false;
      c->state = to_nvme ? CH_NVME : CH_HOST;
      _mt_live_move(p, c, CH_DEVICE, c->state, false);
      if (!to_nvme) _mt_host_tier_in(p, c);
      c->region->ndevice--;
    }
    _mt_resident_changed(p);
    _mt_pool_check(p);
  }
  return 0;
}

static int make_room(mt_pager_t *p, size_t need) {
  return make_room_ex(p, need, true);
}

int _mt_make_room(mt_pager_t *p, size_t need) {
  if (p->used + need <= p->budget) return 0;
  /* Its time is the launch's stall, like the evictions a fetch makes; the
   * launch's fetch that follows counts the stall itself (stalls). */
  uint64_t t0 = _mt_now_ns();
  int rc = make_room_ex(p, need, false);
  uint64_t t1 = _mt_now_ns();
  mt_stat_add(stall_ns, t1 - t0);
  if (_mt_trace_on()) _mt_trace_stall(MT_STALL_EVICT, t0, t1);
  return rc;
}

int _mt_pager_reserve_pinned(mt_pager_t *p, size_t bytes) {
  if (_mt_held_bytes(p) + bytes > _mt_capacity(p)) {
    mt_error("out of memory: a %zu-byte slab for small allocations does not fit: %zu bytes "
             "already allocated; MT_MAX_VRAM=%zu plus MT_MAX_HOST=%zu, less one chunk kept "
             "for swapping, is all mtalloc can hold (raise MT_MAX_HOST)", bytes,
             _mt_held_bytes(p), p->budget, p->host_budget);
    return -ENOMEM;
  }
  if (p->pinned + bytes > p->budget) {
    mt_error("memory that must stay on the device (small allocations and escaped buffers) "
             "would exceed MT_MAX_VRAM=%zu", p->budget);
    return -ENOMEM;
  }
  int rc = make_room(p, bytes);
  if (rc < 0) return rc == -E2BIG ? -ENOMEM : rc;
  p->used += bytes;
  p->pinned += bytes;
  _mt_resident_changed(p);
  return 0;
}

/* ---- fetch ---------------------------------------------------------------------- */

/* A device handle for a chunk about to be fetched, `left` chunks of the
 * run still to come (this one included). */
static int dev_handle(mt_pager_t *p, size_t left, bool via_h2d, mt_handle_t *h) {
  if (_mt_handoff_take(p, via_h2d, h)) return 0;
  int rc;
  for (int tries = 0;; tries++) {
    rc = _mt_pool_dev_get(p, h);
    if (rc != -ENOMEM || tries == 3) break;
    /* Someone else holds device memory the budget assumed free: shrink. */
    size_t shrink = p->used > p->chunk * 8 ? p->chunk * 8 : p->used;
    if (shrink == 0) break;
    mt_warn("the device has less free memory than MT_MAX_VRAM assumed; lowering the budget "
            "from %zu to %zu bytes", p->budget, p->budget - shrink);
    p->budget -= shrink;
    _mt_pool_dev_trim(p);
    if ((rc = make_room(p, left * p->chunk)) < 0) return rc;
  }
  return rc;
}

/* Gives back the staging slots slot[k..n) that hold reads not copied. */
static void slots_put(mt_pager_t *p, const int *slot, int k, int n) {
  for (int i = k; i < n; i++)
    if (slot[i] >= 0) _mt_nv_slot_put(p, slot[i]);
}

/* Maps their host copies back at HOST chunks [k, n) of the run at va0 (device
 * memory there was unmapped): the undo of a failed fetch. */
static void remap_host(mt_pager_t *p, mt_chunk_t *cs, int k, int n, uintptr_t va0) {
  if (!p->host_mapped) return;
  for (int i = k; i < n; i++) {
    if (cs[i].state != CH_HOST) continue;
    uintptr_t va = va0 + (uintptr_t)i * p->chunk;
    if (p->dev->ops->map(p->dev, va, p->chunk, cs[i].host, cs[i].host_off) == 0)
      p->dev->ops->set_access(p->dev, va, p->chunk);
  }
}

/* Device memory for the n adjacent chunks cs[0..n) of one region (none of
 * them DEVICE, n <= EVICT_BATCH), mapped at their addresses; contents:
 * what each had when fetch[i], else undefined. Mapping changes are batched:
 * one unmap per run of host-mapped chunks, one map per chunk (each has its
 * own handle), one set_access for the run; physical memory comes from the
 * pool. Returns 0 or -errno; on error the chunks not moved are as before. */
static int run_to_device(mt_pager_t *p, mt_chunk_t *cs, int n, const bool *fetch) {
  mt_region_t *r = cs[0].region;
  uintptr_t va0 = _mt_chunk_va(p, &cs[0]);
  if (r->hostuse) {
    /* Work in flight may still read and write the host copies through
     * their mappings: the copies must not start, nor the mappings change,
     * before it has finished. The host waits: this is the slow path of
     * launches larger than the budget. */
    if (_mt_region_held(p, r, true)) return -EIO;
    r->hostuse = false;
  }
  int rc = make_room(p, (size_t)n * p->chunk);
  if (rc < 0) return rc;
  mt_handle_t h[EVICT_BATCH];
  for (int i = 0; i < n; i++) {
    bool copy = fetch[i] && cs[i].state != CH_NONE; /* a never-touched chunk has nothing to copy */
    if ((rc = dev_handle(p, (size_t)(n - i), copy, &h[i])) < 0) {
      while (i-- > 0) _mt_pool_dev_put(p, h[i]);
      return rc;
    }
  }
  /* NVMe chunks are read into staging slots before any mapping changes: a
   * read that fails (I/O error, bad checksum) leaves everything as it was. */
  int slot[EVICT_BATCH];
  for (int i = 0; i < n; i++) {
    slot[i] = -1;
    if (cs[i].state != CH_NVME || !fetch[i] || rc < 0) continue;
    if ((rc = _mt_nv_read_slot(p, &cs[i])) >= 0) {
      slot[i] = rc;
      rc = 0;
    }
  }
  if (rc < 0) {
    slots_put(p, slot, 0, n);
    for (int i = 0; i < n; i++) _mt_pool_dev_put(p, h[i]);
    return rc;
  }
  bool hosts = false;
  for (int i = 0; i < n && p->host_mapped; i++) hosts |= cs[i].state == CH_HOST;
  /* before the unmaps and the set_access (cuda.h marks both synchronous) */
  if ((rc = _mt_unmap_fence(p)) < 0) {
    slots_put(p, slot, 0, n);
    for (int i = 0; i < n; i++) _mt_pool_dev_put(p, h[i]);
    return rc;
  }
  if (hosts) {
    for (int i = 0; i < n;) {
      if (cs[i].state != CH_HOST) {
        i++;
        continue;
      }
      int j = i + 1;
      while (j < n && cs[j].state == CH_HOST) j++;
      p->dev->ops->unmap(p->dev, va0 + (uintptr_t)i * p->chunk, (size_t)(j - i) * p->chunk);
      i = j;
    }
  }
  int mapped = 0;
  for (; mapped < n && rc == 0; mapped++)
    rc = p->dev->ops->map(p->dev, va0 + (uintptr_t)mapped * p->chunk, p->chunk, h[mapped], 0);
  if (rc < 0) mapped--;
  if (rc == 0) rc = p->dev->ops->set_access(p->dev, va0, (size_t)n * p->chunk);
  if (rc < 0) {
    if (mapped > 0) p->dev->ops->unmap(p->dev, va0, (size_t)mapped * p->chunk);
    for (int i = 0; i < n; i++) _mt_pool_dev_put(p, h[i]);
    slots_put(p, slot, 0, n);
    remap_host(p, cs, 0, n, va0);
    return rc;
  }
  for (int i = 0; i < n; i++) {
    mt_chunk_t *c = &cs[i];
    uintptr_t va = va0 + (uintptr_t)i * p->chunk;
    bool from_nvme = c->state == CH_NVME;
    if ((c->state == CH_HOST || from_nvme) && fetch[i]) {
      uintptr_t src = from_nvme ? p->nv->slots[slot[i]].addr : c->host_addr;
      if (p->ndefer == p->cap_defer) {
        size_t cap = p->cap_defer ? p->cap_defer * 2 : 64;
        struct mt_deferred_copy *nd = realloc(p->defer, cap * sizeof(*nd));
        if (nd != NULL) {
          p->defer = nd;
          p->cap_defer = cap;
        }
      }
      if (p->ndefer < p->cap_defer) {
        p->defer[p->ndefer++] = (struct mt_deferred_copy){va, src};
        if (from_nvme) _mt_nv_slot_used(p, slot[i], false);
      } else if ((rc = p->dev->ops->copy(p->dev, va, src, p->chunk, p->h2d)) < 0) {
        /* no memory to defer it, and the copy failed: undo the rest, their
         * host (or NVMe) copies stay authoritative */
        p->dev->ops->unmap(p->dev, va, (size_t)(n - i) * p->chunk);
        for (int k = i; k < n; k++) _mt_pool_dev_put(p, h[k]);
        slots_put(p, slot, i, n);
        remap_host(p, cs, i, n, va0);
        break;
      } else {
        _mt_h2d_issued(p);
        if (from_nvme) _mt_nv_slot_used(p, slot[i], true);
      }
      if (!p->prefetching) p->fetch_pending = true; /* a prefetch's users wait for its own event */
      c->pf = p->prefetching;
      c->region->npf += c->pf;
      mt_stat_add(fetches, 1);
      mt_stat_add(bytes_h2d, p->chunk);
      if (p->prefetching) mt_stat_add(prefetches, 1);
      if (from_nvme) mt_stat_add(nvme_loads, 1);
      if (_mt_trace_on()) {
        uint64_t t = _mt_trace_now(); /* issued now; the copy stream runs it */
        _mt_trace_move(MT_TR_FETCH, c->region->id, c->index, from_nvme ? MT_TIER_NVME : MT_TIER_HOST, MT_TIER_GPU,
                       false, p->prefetching, _mt_chunk_data(p, c));
        _mt_trace_copy(MT_TR_H2D, true, 0, p->chunk, t, t);
      }
      c->dirty = false;
      c->region->nclean++;
      if (c->host_addr != 0) _mt_retained_link(p, c);
    } else {
      c->dirty = true; /* new contents will be written; a host copy is stale but kept for reuse */
      if (c->nv != NULL) _mt_nv_drop(p, c);
      if (c->host_addr != 0) _mt_retained_link(p, c);
    }
    _mt_host_tier_out(p, c);
    c->dev = h[i];
    _mt_live_move(p, c, c->state, CH_DEVICE, !((c->state == CH_HOST || from_nvme) && fetch[i]));
    c->state = CH_DEVICE;
    c->region->ndevice++;
    p->used += p->chunk;
    _mt_set_dev_order(p, c);
    p->pol_ops->insert(p->pol, &c->node);
  }
  _mt_resident_changed(p);
  _mt_pool_check(p);
  return rc;
}

int _mt_fetch_flush(mt_pager_t *p) {
  int rc = 0;
  size_t i = 0;
  for (; i < p->ndefer && rc == 0; i++)
    rc = p->dev->ops->copy(p->dev, p->defer[i].dst, p->defer[i].src, p->chunk, p->h2d);
  if (p->ndefer > 0) {
    _mt_h2d_issued(p);
    _mt_nv_flushed(p); /* staging slots those copies read are free once they ran */
  }
  if (rc < 0) {
    /* The failed copy and those after it leave chunks DEVICE without their
     * data. The driver's error is the operation's (when it has one: a
     * prefetch belongs to none); their regions are lost, so that no later
     * use reads what never arrived without failing too. */
    mt_region_t *last = NULL;
    for (size_t k = i - 1; k < p->ndefer; k++) {
      mt_region_t *r = _mt_region_of(p, p->defer[k].dst);
      if (r == NULL || r == last) continue;
      last = r;
      if (r->lost == 0)
        mt_error("a copy into the %zu-byte region at %#lx failed (%s): its data is not on the device, and "
                 "every later use of it fails", r->size, (unsigned long)r->addr, strerror(-rc));
      r->lost = rc;
    }
  }
  p->ndefer = 0;
  return rc;
}

int _mt_fetch_fence(mt_pager_t *p, mt_handle_t s) {
  int rc = _mt_fetch_flush(p);
  if (rc < 0) return rc;
  if (!p->fetch_pending) return 0;
  p->fetch_pending = false;
  rc = p->dev->ops->event_record(p->dev, p->ev_fetch, p->h2d);
  if (rc == 0) _mt_h2d_marked(p, p->ev_fetch); /* lets an unmap's query reuse it */
  if (rc == 0) rc = p->dev->ops->stream_wait(p->dev, s, p->ev_fetch);
  return rc;
}

void _mt_range_protect(mt_pager_t *p, mt_region_t *r, uintptr_t addr, size_t len) {
  if (r == NULL || r->kind == REG_SMALL || len == 0) return;
  size_t first = (addr - r->addr) / p->chunk, last = (addr + len - 1 - r->addr) / p->chunk;
  for (size_t i = first; i <= last && i < r->nchunks; i++) r->chunks[i].epoch = p->epoch;
}

int _mt_range_resident(mt_pager_t *p, mt_region_t *r, uintptr_t addr, size_t len, mt_handle_t s,
                       bool write, bool overwrite) {
  if (r->kind == REG_SMALL || len == 0) return 0;
  if (r->lost < 0) return r->lost; /* no silent use of bytes that never arrived */
  /* prefetched: this use waits for those copies (not for every fetch) */
  if (r->pf_event != 0 && !p->prefetching) {
    int w = _mt_prefetch_wait(p, r, s);
    if (w < 0) return w;
  }
  /* Fast path, taken by nearly every launch of a training loop: the region
   * is all on the device, has nothing clean left to dirty, and was put at
   * the hot end of the policy a moment ago (within TOUCH_SLACK operations),
   * so touching its chunks again would not change what gets evicted. */
  if (_mt_region_hot(p, r, write)) return 0;
  if (addr == r->addr && len >= r->size) r->touched = p->epoch;
  size_t first = (addr - r->addr) / p->chunk, last = (addr + len - 1 - r->addr) / p->chunk;
  if (r->nra > 0) _mt_ra_claim(p, r, first, last); /* reads ahead in flight: done before they are fetched */
  uint64_t t0 = 0;
  int rc = 0;
  for (size_t i = first; i <= last && rc == 0;) {
    mt_chunk_t *c = &r->chunks[i];
    if (c->state == CH_DEVICE) {
      _mt_set_dev_order(p, c);
      p->pol_ops->touch(p->pol, &c->node);
      if (c->pf && !p->prefetching) {
        c->pf = false;
        r->npf--;
        mt_stat_add(prefetch_used, 1);
      }
      if (write) {
        /* a write-behind copy may still be reading it: this write comes after */
        if (c->wb_batch != 0 && (rc = _mt_wb_fence(p, c, s)) < 0) break;
        _mt_set_dirty(p, c); /* a host copy it keeps is stale now */
      }
      i++;
      continue;
    }
    /* a run of chunks not on the device: fetched together */
    if (t0 == 0 && !p->prefetching) t0 = _mt_now_ns();
    bool fetch[EVICT_BATCH];
    int n = 0;
    unsigned nnv = 0; /* NVMe chunks read in: one staging slot each (tier_nvme.c) */
    for (; i + (size_t)n <= last && n < EVICT_BATCH && c[n].state != CH_DEVICE; n++) {
      uintptr_t cs = r->addr + (i + (size_t)n) * p->chunk;
      fetch[n] = !(overwrite && addr <= cs && addr + len >= cs + p->chunk);
      if (c[n].state == CH_NVME && fetch[n] && nnv++ == p->nv->nslots) break;
    }
    rc = run_to_device(p, c, n, fetch);
    for (int k = 0; k < n && rc == 0 && write; k++) _mt_set_dirty(p, &c[k]);
    i += (size_t)n;
  }
  _mt_check_region(p, r);
  if (t0 != 0) {
    uint64_t t1 = _mt_now_ns();
    mt_stat_add(stalls, 1);
    mt_stat_add(stall_ns, t1 - t0);
    if (_mt_trace_on()) _mt_trace_stall(MT_STALL_FETCH, t0, t1);
  }
  return rc;
}

int _mt_region_resident(mt_pager_t *p, mt_region_t *r, mt_handle_t s, bool write) {
  return _mt_range_resident(p, r, r->addr, r->size, s, write, false);
}

void _mt_region_hold(mt_pager_t *p, mt_region_t *r, uint32_t si, uint64_t seq) {
  if (si == 0) return;
  for (unsigned i = 0; i < r->nholds; i++) {
    if (r->holds[i].stream == si) {
      r->holds[i].seq = seq;
      return;
    }
  }
  if (r->nholds == MT_HOLDS) {
    /* A fifth stream: finish the oldest hold and reuse its place. */
    _mt_hold_done(p, &r->holds[0], true);
    memmove(&r->holds[0], &r->holds[1], (MT_HOLDS - 1) * sizeof(mt_hold_t));
    r->nholds--;
  }
  r->holds[r->nholds++] = (mt_hold_t){si, seq};
}

/* A never-touched chunk gets a host copy (contents undefined, as
 * cudaMalloc's are), mapped at its address where host mappings are on:
 * from then on it is HOST like an evicted chunk. */
int _mt_chunk_host_back(mt_pager_t *p, mt_chunk_t *c) {
  int rc = _mt_host_get_ex(p, c, true);
  if (rc < 0) return rc;
  /* an NVME chunk comes back into its new host copy */
  if (c->state == CH_NVME && (rc = _mt_nv_read_host(p, c)) < 0) {
    _mt_host_release(p, c);
    return rc;
  }
  if (p->host_mapped) {
    uintptr_t va = _mt_chunk_va(p, c);
    if ((rc = p->dev->ops->map(p->dev, va, p->chunk, c->host, c->host_off)) < 0) {
      _mt_host_release(p, c);
      return rc;
    }
    if ((rc = _mt_unmap_fence(p)) < 0 || (rc = p->dev->ops->set_access(p->dev, va, p->chunk)) < 0) {
      p->dev->ops->unmap(p->dev, va, p->chunk);
      _mt_host_release(p, c);
      return rc;
    }
  }
  if (c->nv != NULL) _mt_nv_drop(p, c); /* the kernel about to reach it may write it */
  if (c->state == CH_NVME) {
    _mt_live_move(p, c, CH_NVME, CH_HOST, false);
    if (_mt_trace_on())
      _mt_trace_move(MT_TR_FETCH, c->region->id, c->index, MT_TIER_NVME, MT_TIER_HOST, false, false, _mt_chunk_data(p, c));
  } else {
    _mt_live_move(p, c, c->state, CH_HOST, true);
  }
  c->state = CH_HOST;
  c->dirty = false;
  _mt_host_tier_in(p, c);
  return 0;
}

void _mt_fresh_unlink(mt_pager_t *p, mt_region_t *r) {
  if (!r->fresh) return;
  if (r->fprev) r->fprev->fnext = r->fnext;
  else p->fresh = r->fnext;
  if (r->fnext) r->fnext->fprev = r->fprev;
  r->fprev = r->fnext = NULL;
  r->fresh = false;
}

void _mt_back_fresh(mt_pager_t *p) {
  while (p->fresh != NULL) {
    mt_region_t *r = p->fresh;
    int rc = 0;
    /* by runs of never-touched chunks: a host copy and a map each, one
     * set_access per run */
    for (uint32_t i = 0; i < r->nchunks && rc == 0;) {
      if (r->chunks[i].state != CH_NONE) {
        i++;
        continue;
      }
      uint32_t j = i;
      for (; j < r->nchunks && r->chunks[j].state == CH_NONE && rc == 0; j++) {
        mt_chunk_t *c = &r->chunks[j];
        if ((rc = _mt_host_get_ex(p, c, false)) < 0) break; /* never spills real data for a maybe */
        if (p->host_mapped && (rc = p->dev->ops->map(p->dev, _mt_chunk_va(p, c), p->chunk, c->host, c->host_off)) < 0) {
          _mt_host_release(p, c);
          break;
        }
        _mt_live_move(p, c, CH_NONE, CH_HOST, true);
        c->state = CH_HOST;
        c->dirty = false;
        _mt_host_tier_in(p, c);
      }
      if (p->host_mapped && j > i) {
        uintptr_t va = r->addr + (uintptr_t)i * p->chunk;
        int ra = _mt_unmap_fence(p);
        if (ra == 0) ra = p->dev->ops->set_access(p->dev, va, (size_t)(j - i) * p->chunk);
        if (rc == 0) rc = ra;
      }
      i = j;
    }
    if (rc < 0 && !p->fresh_warned) {
      p->fresh_warned = true;
      mt_warn("no host copy for a never-touched chunk of the %zu-byte region at %#lx (%s): until "
              "something touches it, a kernel reaching it through a pointer no launch names "
              "faults (raise MT_MAX_HOST)", r->size, (unsigned long)r->addr, strerror(-rc));
    }
    _mt_fresh_unlink(p, r);
  }
}

int _mt_region_use_in_place(mt_pager_t *p, mt_region_t *r, mt_handle_t s, size_t *host_bytes) {
  if (r->kind == REG_SMALL || r->escaped) return 0;
  int rc = 0;
  for (uint32_t i = 0; i < r->nchunks && rc == 0; i++) {
    mt_chunk_t *c = &r->chunks[i];
    if (c->state == CH_DEVICE) {
      _mt_set_dev_order(p, c);
      p->pol_ops->touch(p->pol, &c->node);
      if (c->wb_batch != 0 && (rc = _mt_wb_fence(p, c, s)) < 0) break;
      _mt_set_dirty(p, c);
      continue;
    }
    if (c->state == CH_NONE || c->state == CH_NVME) {
      rc = _mt_chunk_host_back(p, c);
    } else if (p->nv != NULL) { /* HOST: used (and maybe written) where it lies */
      _mt_set_due(p, c);
      p->hpol_ops->touch(p->nv->hpol, &c->node);
      if (c->nv != NULL) _mt_nv_drop(p, c);
    }
    if (rc == 0) *host_bytes += p->chunk;
  }
  r->hostuse = true;
  _mt_check_region(p, r);
  return rc;
}

int _mt_region_escape(mt_pager_t *p, mt_region_t *r, mt_handle_t s) {
  if (r->escaped || r->kind == REG_SMALL) return 0;
  size_t bytes = (size_t)r->nchunks * p->chunk;
  if (p->pinned + bytes > p->budget) {
    mt_error("region of %zu bytes at %#lx has escaped (its address was copied to the device) "
             "but pinned memory would exceed MT_MAX_VRAM=%zu; it stays pageable, and a kernel "
             "reaching it through device memory may fault", r->size, (unsigned long)r->addr,
             p->budget);
    return -E2BIG;
  }
  r->epoch = ++p->epoch;
  int rc = _mt_region_resident(p, r, s, true);
  if (rc < 0) {
    _mt_fetch_flush(p);
    return rc;
  }
  r->escaped = true;
  p->pinned += bytes;
  p->escaped += bytes;
  mt_stat_add(escaped_regions, 1);
  return _mt_fetch_fence(p, s);
}

mt_region_t *_mt_region_of(mt_pager_t *p, uintptr_t addr) {
  if (!_mt_in_range(p, addr)) return NULL;
  return _mt_rmap_find(p->rmap, addr, NULL, NULL);
}
