/*
 * tier_nvme.c - the NVMe tier's I/O for the pager.
 *
 * Concept: the store (nvme_store.c) keeps bytes in checksummed pages of
 * O_DIRECT files; the pager (pager.c) decides which chunk lives in which
 * tier. This file moves a chunk's bytes between the two, through what only
 * the pager has: its copy streams and its host copies.
 *
 *   spill  HOST -> NVMe. Host copies are written from where they lie when
 *          the CPU can read them (MT_HOST_MAP=off: cuMemHostAlloc slots);
 *          with host mappings a slot is host memory mapped at a device
 *          address, which the CPU need not be able to read, so it is first
 *          copied (by the GPU's copy engine, on the d2h stream) into a
 *          staging slot. A chunk whose NVMe copy is still valid is not
 *          written again.
 *   load   NVMe -> staging slot -> device, without a host slot: the fetch
 *          copy leaves from the staging slot with the operation's other
 *          fetch copies; the slot is free again once an event recorded
 *          after that copy has completed.
 *
 * Staging slots are chunk-sized, page-aligned, pinned (cuMemHostRegister)
 * buffers from the store (on MT_NUMA_NODE / the GPU's node), made once at
 * start and taken out of MT_MAX_HOST: pinned memory is counted in one
 * budget, never added on the side. States: FREE; BUSY (read done, the
 * caller has not issued its copy yet); LOADED (copy deferred, not issued);
 * INFLIGHT (issued, its event recorded).
 *
 * Spills ahead of need are asynchronous (spillwrite.c: a chunk with a
 * write in flight stays HOST; _mt_nv_drop settles that write first).
 * Every transfer here is synchronous under the pager lock, with the store's
 * bounded waits: simple and correct first. The overlap is readahead.c's:
 * asynchronous reads into host copies ahead of the prefetch window; a chunk
 * with one in flight stays NVME, and every path here that reads or drops
 * its NVMe copy cancels that read first. On the virtual clock (mt-trace
 * replay) the store is simulated and the device's nvme_io charges each
 * synchronous transfer's time to the host.
 *
 * Threading: under the pager lock.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pager_internal.h"
#include "trace.h"
#include "trace_io.h"

#define MIN_SLOTS 2

static void io_done(mt_pager_t *p, bool write, size_t bytes, uint64_t t0) {
  if (p->dev->ops->nvme_io) p->dev->ops->nvme_io(p->dev, write, bytes);
  if (write) mt_stat_add(bytes_nvme_write, bytes);
  else mt_stat_add(bytes_nvme_read, bytes);
  if (_mt_trace_on()) _mt_trace_copy(write ? MT_TR_NVME_WRITE : MT_TR_NVME_READ, true, 0, bytes, t0, _mt_trace_now());
}

int _mt_nv_open(mt_pager_t *p, const _mt_nvme_cfg_t *cfg_in) {
  _mt_nvme_cfg_t cfg = *cfg_in;
  /* Staging: the store's default bound (queue depth x request size), in
   * whole chunks, at least two (one being read while one is copied). */
  uint64_t req = cfg.request_bytes ? cfg.request_bytes : (uint64_t)1 << 20;
  uint64_t qd = cfg.queue_depth ? cfg.queue_depth : 32;
  uint64_t want = cfg.staging_bytes ? cfg.staging_bytes : qd * req;
  unsigned nslots = (unsigned)(want / p->chunk);
  if (nslots < MIN_SLOTS) nslots = MIN_SLOTS;
  size_t staging = (size_t)nslots * p->chunk + (size_t)qd * MT_NVME_PAGE;
  /* The host budget must keep room for host copies besides the staging:
   * at least as many slots as staging slots (spills write from them). */
  while (nslots > MIN_SLOTS && p->host_budget < staging + (size_t)2 * nslots * p->chunk) {
    nslots--;
    staging -= p->chunk;
  }
  if (p->host_budget < staging + (size_t)2 * MIN_SLOTS * p->chunk) {
    mt_error("MT_MAX_HOST=%zu is too small for the NVMe tier's staging (%zu bytes) and host copies; "
             "running without the NVMe tier", p->host_budget, staging);
    return -ENOMEM;
  }
  cfg.staging_bytes = (uint64_t)nslots * p->chunk;
  mt_nvtier_t *t = calloc(1, sizeof(*t));
  if (t == NULL) return -ENOMEM;
  t->simulated = cfg.simulate;
  t->slots = calloc(nslots, sizeof(*t->slots));
  t->hpol = p->hpol_ops->create(false); /* the spill order does not weigh: the
                                          * cheap chunks include those read ahead */
  int rc = t->slots && t->hpol ? _mt_nvme_open(&cfg, &t->store) : -ENOMEM;
  if (rc == 0) rc = p->dev->ops->event_create(p->dev, &t->ev_spill);
  for (unsigned i = 0; i < nslots && rc == 0; i++) {
    mt_nvslot_t *s = &t->slots[i];
    void *buf = NULL;
    if (t->simulated) {
      rc = p->dev->ops->host_alloc(p->dev, p->chunk, &buf);
    } else if ((rc = _mt_nvme_staging_alloc(t->store, p->chunk, &buf)) == 0 && p->dev->ops->host_register &&
               p->dev->ops->host_register(p->dev, buf, p->chunk) < 0) {
      mt_warn("nvme: cannot pin a staging buffer; copies from it will not overlap");
    }
    if (rc == 0) rc = p->dev->ops->event_create(p->dev, &s->ev);
    s->addr = (uintptr_t)buf;
    t->nslots = i + 1;
  }
  p->nv = t;
  if (rc < 0) {
    _mt_nv_close(p);
    mt_error("nvme: cannot set up the NVMe tier (%s); running without it", strerror(-rc));
    return rc;
  }
  _mt_nvme_stats_t st;
  _mt_nvme_get_stats(t->store, &st);
  t->cap_bytes = (size_t)(st.pages_total * MT_NVME_PAGE) / p->chunk * p->chunk;
  t->staging_bytes = staging;
  p->host_budget = (p->host_budget - staging) / p->chunk * p->chunk;
  return 0;
}

void _mt_nv_close(mt_pager_t *p) {
  mt_nvtier_t *t = p->nv;
  if (t == NULL) return;
  _mt_sw_close(p); /* its writes use the store */
  for (unsigned i = 0; i < t->nslots; i++) {
    mt_nvslot_t *s = &t->slots[i];
    if (s->ev) p->dev->ops->event_destroy(p->dev, s->ev);
    if (s->addr && !t->simulated && p->dev->ops->host_unregister) p->dev->ops->host_unregister(p->dev, (void *)s->addr);
  }
  if (t->ev_spill) p->dev->ops->event_destroy(p->dev, t->ev_spill);
  if (t->store) _mt_nvme_close(t->store); /* frees staging and chunk pages */
  if (t->hpol) p->hpol_ops->destroy(t->hpol);
  free(t->slots);
  free(t);
  p->nv = NULL;
}

size_t _mt_nv_capacity(const mt_pager_t *p) {
  if (p->nv == NULL) return 0;
  return p->nv->cap_bytes > p->budget ? p->nv->cap_bytes - p->budget : 0;
}

/* A free staging slot: one never used or whose copy has run; the host
 * waits for the oldest copy only when none is. -EBUSY during a capture
 * (no event may be waited for) when none is free. */
static int slot_get(mt_pager_t *p) {
  mt_nvtier_t *t = p->nv;
  for (int pass = 0; pass < 3; pass++) {
    for (unsigned i = 0; i < t->nslots; i++) {
      mt_nvslot_t *s = &t->slots[i];
      if (s->state == NV_SLOT_INFLIGHT && !_mt_capture_active(p) && p->dev->ops->event_query(p->dev, s->ev) == 1)
        s->state = NV_SLOT_FREE;
      if (s->state == NV_SLOT_FREE) return (int)i;
    }
    if (pass == 0) {
      /* copies deferred out of every slot: issue them (their events follow) */
      int rc = _mt_fetch_flush(p);
      if (rc < 0) return rc;
      continue;
    }
    if (_mt_capture_active(p)) {
      mt_error("nvme: every staging buffer is in use while a stream is being captured: cannot bring "
               "a chunk back from NVMe now (raise MT_NVME_QUEUE_DEPTH, or capture after a warm-up step)");
      return -EBUSY;
    }
    for (unsigned i = 0; i < t->nslots; i++) {
      mt_nvslot_t *s = &t->slots[i];
      if (s->state != NV_SLOT_INFLIGHT) continue;
      int rc = p->dev->ops->event_sync(p->dev, s->ev);
      if (rc < 0) return rc;
      s->state = NV_SLOT_FREE;
      return (int)i;
    }
    break;
  }
  mt_error("nvme: no staging buffer is free (%u, all holding chunks of the operation being prepared)", t->nslots);
  return -ENOBUFS;
}

void _mt_nv_slot_put(mt_pager_t *p, int slot) {
  p->nv->slots[slot].state = NV_SLOT_FREE;
}

void _mt_nv_slot_used(mt_pager_t *p, int slot, bool issued) {
  p->nv->slots[slot].state = NV_SLOT_LOADED;
  if (!issued) return;
  mt_nvslot_t *s = &p->nv->slots[slot];
  if (p->dev->ops->event_record(p->dev, s->ev, p->h2d) == 0) s->state = NV_SLOT_INFLIGHT;
  else if (p->dev->ops->event_record(p->dev, p->nv->ev_spill, p->h2d) == 0 &&
           p->dev->ops->event_sync(p->dev, p->nv->ev_spill) == 0)
    s->state = NV_SLOT_FREE;
}

void _mt_nv_flushed(mt_pager_t *p) {
  mt_nvtier_t *t = p->nv;
  if (t == NULL) return;
  for (unsigned i = 0; i < t->nslots; i++) {
    mt_nvslot_t *s = &t->slots[i];
    if (s->state != NV_SLOT_LOADED) continue;
    /* If the record fails the slot is waited for as a whole stream would
     * be: by syncing the copy stream now. */
    if (p->dev->ops->event_record(p->dev, s->ev, p->h2d) == 0) {
      s->state = NV_SLOT_INFLIGHT;
    } else {
      int q = p->dev->ops->event_record(p->dev, t->ev_spill, p->h2d);
      if (q == 0) p->dev->ops->event_sync(p->dev, t->ev_spill);
      s->state = NV_SLOT_FREE;
    }
  }
}

static bool ra_inflight(const mt_chunk_t *c) {
  return c->ra != 0 && c->ra != MT_RA_READY;
}

void _mt_nv_drop(mt_pager_t *p, mt_chunk_t *c) {
  _mt_sw_settle(p, c); /* a spill write of it in flight finishes first */
  if (c->nv == NULL) return;
  if (c->ahead) _mt_ahead_outcome(p, c, false); /* written ahead for nothing */
  /* a read-ahead still reading it is waited for and thrown away first
   * (readahead.c): its bytes must not land in a host slot given to
   * someone else, nor the pages be reused under it */
  if (ra_inflight(c)) _mt_ra_cancel(p, c);
  /* every other transfer is waited for under the lock: never busy here */
  int rc = _mt_nvme_chunk_free(p->nv->store, c->nv);
  mt_assert(rc == 0);
  c->nv = NULL;
  _mt_recost(p, c); /* its spill must write it now */
}

static int pages_for(mt_pager_t *p, mt_chunk_t *c) {
  if (c->nv != NULL) return 0;
  return _mt_nvme_chunk_alloc(p->nv->store, p->chunk, c->region->id, (uint64_t)c->index * p->chunk, &c->nv);
}

int _mt_nv_write(mt_pager_t *p, mt_chunk_t **cs, int n, bool *ok) {
  mt_nvtier_t *t = p->nv;
  bool staged = p->host_mapped && !t->simulated;
  _mt_nvme_op_t ops[32];
  int slot[32];
  int written = 0, first_err = 0;
  mt_assert(n <= 32);
  for (int i = 0; i < n; i++) ok[i] = false;
  for (int g = 0; g < n;) {
    /* a group: as many chunks as there are staging slots (when staged) */
    int m = 0, issued[32], nissued = 0;
    bool copied = false;
    for (; g + m < n && (!staged || m < (int)t->nslots); m++) {
      int i = g + m;
      mt_chunk_t *c = cs[i];
      slot[i] = -1;
      int rc = pages_for(p, c);
      if (rc == 0 && _mt_nvme_chunk_valid(c->nv)) {
        ok[i] = true; /* the NVMe copy is the host copy's bytes already */
        written++;
        continue;
      }
      if (rc == 0 && staged) {
        if ((rc = slot_get(p)) >= 0) {
          slot[i] = rc;
          t->slots[rc].state = NV_SLOT_BUSY;
          rc = p->dev->ops->copy(p->dev, t->slots[rc].addr, c->host_addr, p->chunk, p->d2h);
          copied |= rc == 0;
        }
      }
      if (rc < 0) {
        if (first_err == 0) first_err = rc;
        if (slot[i] >= 0) _mt_nv_slot_put(p, slot[i]);
        slot[i] = -1;
        continue;
      }
      issued[nissued++] = i;
    }
    int rc = 0;
    if (copied) {
      rc = p->dev->ops->event_record(p->dev, t->ev_spill, p->d2h);
      if (rc == 0) rc = p->dev->ops->event_sync(p->dev, t->ev_spill);
    }
    uint64_t t0 = _mt_trace_on() ? _mt_trace_now() : 0;
    size_t bytes = 0;
    int started[32], nstarted = 0;
    for (int k = 0; k < nissued && rc == 0; k++) {
      int i = issued[k];
      const void *src = slot[i] >= 0 ? (const void *)t->slots[slot[i]].addr : (const void *)cs[i]->host_addr;
      ops[i] = (_mt_nvme_op_t){0};
      int w = _mt_nvme_write(t->store, cs[i]->nv, src, &ops[i]);
      if (w < 0) {
        if (first_err == 0) first_err = w;
        continue;
      }
      started[nstarted++] = i;
    }
    if (rc < 0 && first_err == 0) first_err = rc;
    for (int k = 0; k < nstarted; k++) {
      int i = started[k];
      int w = _mt_nvme_wait(t->store, &ops[i], 0);
      if (w == 0) {
        ok[i] = true;
        written++;
        bytes += p->chunk;
      } else {
        mt_stat_add(nvme_errors, 1);
        if (first_err == 0) first_err = w;
        if (w == -ETIMEDOUT) {
          /* The drive still owns the source: a staging slot stays busy for
           * good (so it is never reused under the DMA); a host copy stays
           * with its chunk, which stays HOST. */
          slot[i] = -1;
        }
      }
    }
    for (int k = 0; k < nissued; k++)
      if (slot[issued[k]] >= 0) _mt_nv_slot_put(p, slot[issued[k]]);
    if (bytes) io_done(p, true, bytes, t0);
    g += m;
  }
  return written > 0 ? written : first_err ? first_err : 0;
}

int _mt_nv_read_slot(mt_pager_t *p, mt_chunk_t *c) {
  mt_nvtier_t *t = p->nv;
  if (ra_inflight(c)) _mt_ra_cancel(p, c); /* a fetch claims it first (_mt_ra_claim); else read again */
  int i = slot_get(p);
  if (i < 0) return i;
  t->slots[i].state = NV_SLOT_BUSY;
  uint64_t t0 = _mt_trace_on() ? _mt_trace_now() : 0;
  _mt_nvme_op_t op = {0};
  int rc = _mt_nvme_read(t->store, c->nv, (void *)t->slots[i].addr, &op);
  if (rc == 0) rc = _mt_nvme_wait(t->store, &op, 0);
  if (rc < 0) {
    mt_stat_add(nvme_errors, 1);
    if (rc != -ETIMEDOUT) _mt_nv_slot_put(p, i); /* else the drive may still write into it */
    mt_error("nvme: cannot bring back chunk %u of the %zu-byte region at %#lx from NVMe (%s)", c->index,
             c->region->size, (unsigned long)c->region->addr, strerror(-rc));
    return rc;
  }
  io_done(p, false, p->chunk, t0);
  return i;
}

int _mt_nv_read_host(mt_pager_t *p, mt_chunk_t *c) {
  mt_nvtier_t *t = p->nv;
  if (ra_inflight(c)) _mt_ra_cancel(p, c);
  if (!p->host_mapped || t->simulated) {
    uint64_t t0 = _mt_trace_on() ? _mt_trace_now() : 0;
    _mt_nvme_op_t op = {0};
    int rc = _mt_nvme_read(t->store, c->nv, (void *)c->host_addr, &op);
    if (rc == 0) rc = _mt_nvme_wait(t->store, &op, 0);
    if (rc < 0) {
      mt_stat_add(nvme_errors, 1);
      if (rc == -ETIMEDOUT) {
        /* The drive may still write into the host copy: its slot stays
         * out of use for good (counted in host_used), so no other chunk
         * gets it; the chunk stays NVME, its copy there still valid. */
        mt_error("nvme: a read of chunk %u of the region at %#lx does not finish; its host slot is given up",
                 c->index, (unsigned long)c->region->addr);
        _mt_host_abandon(c);
      }
      return rc;
    }
    io_done(p, false, p->chunk, t0);
    return 0;
  }
  int i = _mt_nv_read_slot(p, c);
  if (i < 0) return i;
  int rc = _mt_copy_wait(p, c->host_addr, t->slots[i].addr, p->chunk, p->h2d);
  _mt_nv_slot_put(p, i);
  return rc;
}
