/*
 * hosttier.c - the host tier: host copies of chunks inside MT_MAX_HOST, and
 * their spill to NVMe when it is full.
 *
 * Concept: the pager (pager.c) moves chunks between the device and host
 * copies; this file keeps the host copies' budget. A host copy comes from
 * the pool (physpool.c). When the budget is full, the copies that DEVICE
 * chunks keep only to be evicted for free ("retained", newest first on
 * p->retained) give way first, oldest first (their chunks become dirty);
 * then, with an NVMe tier, HOST chunks chosen by the host tier's own
 * policy instance (the pager's policy over HOST chunks, sharing each
 * chunk's node: a chunk is in at most one of the two) move to NVMe in
 * batches (tier_nvme.c writes them). Most spills happen ahead of need,
 * asynchronously (spillwrite.c); a room request here first takes what
 * those freed or waits for them, and spills synchronously only when none
 * is in flight.
 *
 * Threading: under the pager lock.
 */
#include <errno.h>

#include "pager_internal.h"
#include "trace.h"
#include "trace_io.h"

/* A HOST chunk may go to NVMe unless the operation being prepared uses it,
 * or a kernel in flight may reach its host copy through its mapping; one
 * of the last read-ahead window only on a second pass (readahead.c). */
static bool host_eligible(mt_policy_node_t *n, void *arg) {
  mt_pager_t *p = arg;
  mt_chunk_t *c = _mt_chunk_of(n);
  mt_region_t *r = c->region;
  if (r->freed || r->epoch == p->epoch || c->epoch == p->epoch) return false;
  if (!p->spill_window && _mt_ra_windowed(p, r)) return false;
  if (c->sw != 0) return false; /* its write is in flight already (spillwrite.c) */
  return !(r->hostuse && _mt_region_held(p, r, false));
}

/* When only chunks of the read-ahead window are left, the spill takes
 * those used farthest ahead (LRU order would take the ones read first,
 * for the nearest launches): a walk over the whole spill order that keeps
 * the `max` farthest, farthest first. On the 100B candidate with the
 * context predictor (plan's best, checkpointing every layer) the step
 * went 78.19 -> 71.76 s. */
typedef struct far {
  mt_pager_t *p;
  mt_chunk_t **out;
  int n, max;
} far_t;

static uint32_t far_pos(const mt_pager_t *p, const mt_chunk_t *c) {
  return _mt_ra_windowed(p, c->region) ? c->region->ra_pos : UINT32_MAX;
}

static bool far_pick(mt_policy_node_t *nd, void *arg) {
  far_t *f = arg;
  if (!host_eligible(nd, f->p)) return false;
  mt_chunk_t *c = _mt_chunk_of(nd);
  uint32_t pos = far_pos(f->p, c);
  if (f->n == f->max && pos <= far_pos(f->p, f->out[f->max - 1])) return false;
  int i = f->n < f->max ? f->n++ : f->max - 1;
  while (i > 0 && far_pos(f->p, f->out[i - 1]) < pos) {
    f->out[i] = f->out[i - 1];
    i--;
  }
  f->out[i] = c;
  return false;
}

#define SPILL_BATCH 8 /* chunks written together: the drive's queue stays busy */

/* Moves at least `need` HOST chunks (SPILL_BATCH when fewer are asked) to
 * NVMe, freeing their host copies: the host tier's eviction. A chunk whose
 * write fails stays HOST (nothing lost). 0, -ENOMEM (none can move now) or
 * the store's error (-ENOSPC, -EIO) when none moved. quiet: none movable
 * is no error to report (a caller that only wants room ahead). */
static int host_spill(mt_pager_t *p, size_t need, bool quiet) {
  if (_mt_capture_active(p)) return -ENOMEM; /* no unmap or wait during a capture */
  mt_chunk_t *batch[EVICT_BATCH];
  bool ok[EVICT_BATCH];
  size_t want = need < SPILL_BATCH ? SPILL_BATCH : need > EVICT_BATCH ? EVICT_BATCH : need;
  mt_collect_t k = {host_eligible, p, batch, 0, (int)want};
  (void)p->hpol_ops->victim(p->nv->hpol, _mt_collect, &k);
  if (k.n == 0 && p->ra_window != 0) { /* nothing outside the read-ahead window */
    p->spill_window = true;
    far_t f = {p, batch, 0, (int)want};
    (void)p->hpol_ops->victim(p->nv->hpol, far_pick, &f);
    k.n = f.n;
    p->spill_window = false;
  }
  int n = k.n;
  for (int i = 0; i < n; i++) p->hpol_ops->remove(p->nv->hpol, &batch[i]->node);
  if (n == 0) {
    if (quiet) return -ENOMEM;
    mt_error("host memory budget MT_MAX_HOST=%zu is full and no host chunk can move to NVMe now (the "
             "operation being prepared uses them all): raise MT_MAX_HOST", p->host_budget);
    return -ENOMEM;
  }
  int rc = _mt_nv_write(p, batch, n, ok);
  int moved = 0;
  if (rc > 0 && p->host_mapped && (rc = _mt_unmap_fence(p)) < 0) {
    for (int i = 0; i < n; i++) ok[i] = false; /* written, still HOST: the NVMe copy stays valid */
  }
  for (int i = 0; i < n; i++) {
    mt_chunk_t *c = batch[i];
    if (!ok[i]) {
      _mt_host_tier_in(p, c);
      continue;
    }
    if (p->host_mapped) p->dev->ops->unmap(p->dev, _mt_chunk_va(p, c), p->chunk);
    _mt_host_release(p, c);
    c->state = CH_NVME;
    _mt_live_move(p, c, CH_HOST, CH_NVME, false);
    moved++;
    mt_stat_add(nvme_spills, 1);
    if (_mt_trace_on())
      _mt_trace_move(MT_TR_EVICT, c->region->id, c->index, MT_TIER_HOST, MT_TIER_NVME, true, false, _mt_chunk_data(p, c));
  }
  _mt_pool_check(p);
  if (moved == 0) return rc < 0 ? rc : -ENOMEM;
  return 0;
}

int _mt_host_spill(mt_pager_t *p, size_t need) {
  return p->nv == NULL ? -ENOMEM : host_spill(p, need, true);
}

/* The host tier's policy (spill order) holds exactly the HOST chunks, when
 * there is an NVMe tier. A chunk is in at most one of the two policies:
 * they share its node. */
void _mt_host_tier_in(mt_pager_t *p, mt_chunk_t *c) {
  if (p->nv == NULL) return;
  _mt_set_due(p, c);
  c->node.cost = _mt_host_cost(c);
  p->hpol_ops->insert(p->nv->hpol, &c->node);
}

void _mt_host_tier_out(mt_pager_t *p, mt_chunk_t *c) {
  if (p->nv != NULL && c->node.linked) p->hpol_ops->remove(p->nv->hpol, &c->node);
}

/* ---- host copies ------------------------------------------------------------ */

void _mt_retained_unlink(mt_chunk_t *c) {
  if (!c->retained) return;
  c->rprev->rnext = c->rnext;
  c->rnext->rprev = c->rprev;
  c->retained = false;
}

void _mt_retained_link(mt_pager_t *p, mt_chunk_t *c) {
  if (c->retained) return;
  c->rnext = p->retained.rnext;
  c->rprev = &p->retained;
  p->retained.rnext->rprev = c;
  p->retained.rnext = c;
  c->retained = true;
}

/* Gives c's host copy back to the pool; c must not be HOST (its address
 * would still map the slot). No driver call. */
void _mt_host_release(mt_pager_t *p, mt_chunk_t *c) {
  if (c->host_addr == 0) return;
  _mt_wb_settle(p, c);
  _mt_wb_cancel(p, c); /* the copy it made goes with the slot: it cannot clean c */
  _mt_sw_settle(p, c); /* the drive may still read it */
  _mt_retained_unlink(c);
  mt_host_slot_t sl = {c->host, c->host_off, c->host_addr};
  _mt_pool_host_put(p, &sl);
  c->host = 0;
  c->host_off = 0;
  c->host_addr = 0;
  p->host_used -= p->chunk;
}

void _mt_host_abandon(mt_chunk_t *c) {
  if (c->host_addr == 0) return;
  _mt_retained_unlink(c);
  c->host = 0;
  c->host_off = 0;
  c->host_addr = 0;
}

int _mt_host_room(mt_pager_t *p, size_t bytes, bool spill) {
  if (p->host_used + bytes <= p->host_budget) return 0;
  if (p->nv != NULL) p->host_filled = true; /* the tiers are all in use now (handoff.c) */
  _mt_sw_poll(p); /* spill writes done free their host copies (spillwrite.c) */
  if (p->host_used + bytes <= p->host_budget) return 0;
  if (p->retained.rprev != &p->retained && (p->h2d_unsynced || p->ndefer > 0)) {
    /* A retained copy may be the source of a fetch still on the h2d
     * stream, or of one deferred and not issued yet (ndefer: it would copy
     * whatever the slot holds by then); its slot goes back to the pool and
     * is written at once by whoever asked for the room: the fetches must be
     * issued and done first. The host waits, only when the host budget is
     * full (with an NVMe tier, whenever host memory is). */
    int rc = _mt_fetch_flush(p);
    if (rc == 0) rc = _mt_h2d_drain(p, false);
    if (rc < 0) return rc;
  }
  while (p->host_used + bytes > p->host_budget && p->retained.rprev != &p->retained) {
    mt_chunk_t *old = p->retained.rprev; /* the oldest retained copy */
    _mt_host_release(p, old);
    _mt_set_dirty(p, old);
  }
  /* spill writes in flight are ahead of any new one on the drive: wait
   * for those first */
  if (p->host_used + bytes > p->host_budget && spill && _mt_sw_room(p, bytes)) return 0;
  if (p->host_used + bytes > p->host_budget && spill && p->nv != NULL) {
    /* A spill that fails (no space, I/O error: the store said which, with
     * the directory, file and offset) leaves its chunks in host memory;
     * the operation that needed the room fails out-of-memory. */
    (void)host_spill(p, (p->host_used + bytes - p->host_budget + p->chunk - 1) / p->chunk, false);
  }
  return p->host_used + bytes > p->host_budget ? -ENOMEM : 0;
}

/* Gives c a host copy (contents undefined) from the pool, making the room
 * first (_mt_host_room). */
int _mt_host_get_ex(mt_pager_t *p, mt_chunk_t *c, bool spill) {
  if (c->host_addr != 0) return 0;
  int rc = _mt_host_room(p, p->chunk, spill);
  if (rc == -ENOMEM && p->nv == NULL)
    mt_error("host memory budget MT_MAX_HOST=%zu is full: cannot evict a %zu-byte chunk "
             "(raise MT_MAX_HOST, or lower the model's memory)", p->host_budget, p->chunk);
  if (rc < 0) return rc; /* with an NVMe tier, host_spill said why */
  mt_host_slot_t sl;
  if ((rc = _mt_pool_host_get(p, &sl)) < 0) return rc;
  c->host = sl.h;
  c->host_off = sl.off;
  c->host_addr = sl.addr;
  p->host_used += p->chunk;
  return 0;
}
