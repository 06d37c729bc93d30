/*
 * writebehind.c - dirty chunks copied to their host copies ahead of their
 * eviction, while the GPU computes (prefetch.c asks for it after each
 * prefetch).
 *
 * Concept. An eviction of a dirty chunk copies it out and waits for the
 * copy before the device memory can go. Write-behind starts those copies
 * early, for the coldest dirty chunks no work in flight holds, on the d2h
 * link, and remembers them in batches (an event each, a ring of
 * MT_CLEAN_RING). Once a batch is known done, its chunks are clean
 * (wbclean): the policy files them with the cheap ones, so the next
 * eviction takes them, no copy, no wait, before a dirty chunk that would
 * need one. (Left dirty until their eviction, they were passed over for
 * farther dirty chunks, whose copies the host then waited for: with the
 * handoff on and MT_WRITEBEHIND_HORIZON=512, six iterations, ViT 79.1
 * against 89.8% of ideal a step, BERT 97.9 against 99.9; README.)
 * A write to one in between cancels (set_dirty in pager.c; r->nwb keeps
 * the region off the launch fast path, which skips set_dirty); its copy may
 * still be in flight, so wb_batch stays until it is known done, and
 * nothing reuses the chunk's device memory or host slot before
 * (_mt_wb_settle).
 *
 * The stock (p->wb_stock): chunks copied and not used by an eviction yet,
 * in flight or done. prefetch.c asks for copies beyond it.
 *
 * Threading: under the pager lock.
 */
#include <string.h>

#include "pager_internal.h"
#include "trace.h"
#include "trace_io.h"

/* c's copy is done: c is clean, its host copy holds its bytes. It stays
 * in the stock (wbclean) until an eviction uses the copy. */
static void clean_now(mt_pager_t *p, mt_chunk_t *c) {
  c->clean_batch = 0;
  c->wbclean = true;
  _mt_wb_clear(c);
  if (c->dirty) {
    c->dirty = false;
    c->region->nclean++;
    _mt_recost(p, c);
  }
}

/* True when write-behind batch id is done (events queried oldest first;
 * none during a capture); with wait, the host waits for it. Each batch
 * found done cleans the chunks it still names. */
static bool wb_done(mt_pager_t *p, uint32_t id, bool wait) {
  if (id == 0 || id <= p->clean_done_id) return true;
  while (p->clean_n > 0) {
    struct mt_clean_batch *b = &p->clean_ring[p->clean_head];
    if (_mt_capture_active(p)) return false;
    int q = p->dev->ops->event_query(p->dev, b->ev);
    if (q != 1 && (!wait || b->id > id || p->dev->ops->event_sync(p->dev, b->ev) < 0)) break;
    if (b->id > p->clean_done_id) p->clean_done_id = b->id;
    for (int i = 0; i < EVICT_BATCH; i++) {
      if (b->cs[i] == NULL) continue;
      mt_assert(b->cs[i]->clean_batch == b->id); /* _mt_wb_cancel takes it out */
      clean_now(p, b->cs[i]);
    }
    _mt_event_put(p, b->ev);
    p->clean_head = (p->clean_head + 1) % MT_CLEAN_RING;
    p->clean_n--;
  }
  return id <= p->clean_done_id;
}

void _mt_wb_poll(mt_pager_t *p) {
  if (p->clean_n > 0) wb_done(p, p->clean_done_id + 1, false);
}

void _mt_wb_unstock(mt_pager_t *p, mt_chunk_t *c) {
  if (c->clean_batch != 0) {
    /* its batch is still in the ring (done batches clean their chunks as
     * they leave it): it no longer names c */
    for (unsigned k = 0; k < p->clean_n; k++) {
      struct mt_clean_batch *b = &p->clean_ring[(p->clean_head + k) % MT_CLEAN_RING];
      if (b->id == c->clean_batch && b->cs[c->wb_slot] == c) b->cs[c->wb_slot] = NULL;
    }
    c->clean_batch = 0;
    p->wb_stock--;
  } else if (c->wbclean) {
    p->wb_stock--;
  }
  c->wbclean = false;
}

void _mt_wb_settle(mt_pager_t *p, mt_chunk_t *c) {
  if (c->wb_batch != 0 && wb_done(p, c->wb_batch, true)) _mt_wb_clear(c);
}

int _mt_wb_fence(mt_pager_t *p, mt_chunk_t *c, mt_handle_t s) {
  _mt_wb_cancel(p, c);
  if (c->wb_batch == 0) return 0;
  /* A stream that captures runs nothing now: its graph's launch waits. */
  if (_mt_capturing(p, s)) return 0;
  /* While another stream captures no event may be queried (graph.c), but
   * this stream's work runs now: it waits, done or not. */
  if (!_mt_capture_active(p) && wb_done(p, c->wb_batch, false)) {
    _mt_wb_clear(c);
    return 0;
  }
  /* Still in the ring (wb_done retires batches only once done). Other
   * streams may write c too, so wb_batch stays until the batch is known
   * done: each writer waits. */
  for (unsigned k = 0; k < p->clean_n; k++) {
    struct mt_clean_batch *b = &p->clean_ring[(p->clean_head + k) % MT_CLEAN_RING];
    if (b->id == c->wb_batch) return p->dev->ops->stream_wait(p->dev, s, b->ev);
  }
  return 0;
}

bool _mt_wb_cleaned(mt_pager_t *p, mt_chunk_t *c, bool wait) {
  if (!c->dirty || c->clean_batch == 0 || !wb_done(p, c->clean_batch, wait)) return false;
  return !c->dirty; /* wb_done cleaned it with its batch */
}

typedef struct wb_ctx {
  mt_pager_t *p;
  mt_chunk_t **out;
  int n, max;
  uint64_t walk;  /* _mt_region_held_in */
  uint64_t after; /* skip chunks expected in use up to this launch clock (0: none) */
} wb_ctx_t;

/* The walk from the coldest chunk: collects dirty chunks free to copy. */
static bool wb_pick(mt_policy_node_t *nd, void *arg) {
  wb_ctx_t *w = arg;
  mt_chunk_t *c = _mt_chunk_of(nd);
  mt_region_t *r = c->region;
  if (!c->dirty || c->clean_batch != 0 || r->escaped || r->freed || r->epoch == w->p->epoch ||
      c->epoch == w->p->epoch || _mt_region_held_in(w->p, r, w->walk) || _mt_prefetch_spent(w->p, r))
    return false;
  if (w->after != 0) { /* used before the eviction the copy is for: freed or written by then, mostly */
    uint64_t due = _mt_prefetch_due(w->p, r);
    if (due > w->p->clock && due <= w->after) return false;
  }
  w->out[w->n++] = c;
  return w->n >= w->max; /* true ends the walk */
}

size_t _mt_write_behind(mt_pager_t *p, size_t bytes, uint64_t after) {
  if (_mt_capture_active(p)) return 0;
  wb_done(p, p->clean_done_id + 1, false); /* retire finished batches */
  if (p->clean_n == MT_CLEAN_RING) return 0;
  size_t free_slots = p->host_budget > p->host_used ? (p->host_budget - p->host_used) / p->chunk : 0;
  size_t max = bytes / p->chunk;
  if (max > free_slots) max = free_slots;
  if (max > EVICT_BATCH) max = EVICT_BATCH;
  if (max == 0) return 0;
  mt_chunk_t *cs[EVICT_BATCH];
  wb_ctx_t w = {p, cs, 0, (int)max, ++p->walks, after};
  /* dirty chunks only, in eviction order (filed apart: no walk over the
   * clean ones) */
  (void)p->pol_ops->victim_in(p->pol, MT_COST_BIT(MT_COST_DIRTY), wb_pick, &w);
  if (w.n == 0) return 0;
  mt_handle_t ev = _mt_event_get(p);
  if (ev == 0) return 0;
  uint32_t id = ++p->clean_next_id;
  int started = 0;
  uint64_t t = _mt_trace_on() ? _mt_trace_now() : 0;
  unsigned at = (p->clean_head + p->clean_n) % MT_CLEAN_RING;
  struct mt_clean_batch *b = &p->clean_ring[at];
  for (int i = 0; i < w.n; i++) {
    mt_chunk_t *c = cs[i];
    if (c->host_addr == 0 && _mt_host_get_ex(p, c, false) < 0) break;
    if (p->dev->ops->copy(p->dev, c->host_addr, _mt_chunk_va(p, c), p->chunk, p->d2h) < 0) break;
    if (c->wb_batch == 0) c->region->nwb++; /* an older copy of it may be in flight: this one is later */
    c->clean_batch = c->wb_batch = id;
    c->wb_slot = (uint8_t)i;
    b->cs[i] = c;
    p->wb_stock++;
    _mt_retained_link(p, c);
    started++;
    mt_stat_add(write_behind, 1);
    mt_stat_add(bytes_d2h, p->chunk);
    if (_mt_trace_on()) _mt_trace_copy(MT_TR_D2H, true, 0, p->chunk, t, t);
  }
  /* a host slot for a later chunk may have dropped an earlier one's
   * retained copy (hosttier.c), cancelling its cleaning: not named */
  for (int i = 0; i < EVICT_BATCH; i++)
    if (i >= started || b->cs[i]->clean_batch != id) b->cs[i] = NULL;
  if (started > 0 && p->dev->ops->event_record(p->dev, ev, p->d2h) == 0) {
    b->id = id;
    b->ev = ev;
    p->clean_n++;
    return (size_t)started * p->chunk;
  }
  _mt_event_put(p, ev);
  if (started == 0) return 0;
  /* no event to tell when: wait now (rare); what the wait covers is done */
  int rc = p->dev->ops->event_record(p->dev, p->ev_evict, p->d2h);
  if (rc == 0) rc = p->dev->ops->event_sync(p->dev, p->ev_evict);
  if (rc < 0)
    mt_error("write-behind: no event can be recorded after %d copies (%s): nothing can tell when they are "
             "done, so the host slots they write stay out of use", started, strerror(-rc));
  for (int i = 0; i < started; i++) {
    mt_chunk_t *c = cs[i];
    if (rc == 0 && b->cs[i] != NULL) {
      clean_now(p, c);
    } else if (rc == 0) {
      _mt_wb_clear(c); /* cancelled meanwhile; its copy is done */
    } else {
      /* Not in the ring, so no settle would wait for it: the copy may
       * still write the slot, which leaves the chunk for good (counted in
       * host_used, never back in the pool); the chunk stays dirty. */
      _mt_wb_cancel(p, c);
      _mt_wb_clear(c);
      _mt_host_abandon(c);
    }
  }
  return 0;
}

