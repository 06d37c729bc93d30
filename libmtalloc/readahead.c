/*
 * readahead.c - NVMe -> host reads ahead of the prefetch window, so that
 * the host -> GPU prefetch finds the bytes in host memory.
 *
 * Concept. The GPU prefetch (prefetch.c) looks MT_PREFETCH_DEPTH launches
 * ahead; a chunk it finds on NVMe is read synchronously (the host waits
 * for the drive, several times slower than PCIe). After each launch's
 * prefetch, this stage asks the same predictor for MT_READAHEAD_DEPTH
 * launches and, nearest launch first, starts asynchronous reads of the
 * NVME chunks of their regions into host copies, which overlap the GPU's
 * work. Reads are completed (polled) at later launches, or, when a fetch
 * needs the chunk first, waited for (that read only: _mt_ra_claim).
 *
 * States. A chunk being read stays NVME (its NVMe copy is still the only
 * valid one) with c->ra naming its read; the host slot the read fills
 * belongs to the read, counted in host_used, until completion turns the
 * chunk HOST with that slot as its host copy. Its NVMe copy stays valid,
 * so a later spill of it writes nothing. Every path that reads or drops an
 * NVMe copy another way (a fetch, a host reach, a free, an overwrite)
 * cancels the read first (tier_nvme.c): the read is waited for and its
 * slot goes back to the pool, so no stale bytes ever reach a chunk. A read
 * that fails (I/O error, bad checksum) is dropped the same way: the chunk
 * stays NVME and the demand path meets and reports the error as before.
 *
 * Host room. The window's regions (all of them, nearest to farthest) are
 * marked with the current epoch first, so the host tier's spills (which
 * skip the epoch) never take a chunk inside the window to make room for
 * one further away; room comes from free host budget, then from retained
 * host copies of device chunks when no fetch copy may still read them (no
 * wait), then from spilling HOST chunks outside the window by the host
 * tier's policy (only when no spill write is in flight, spillwrite.c:
 * those free room without a wait). The window stays marked until the next
 * pass (ra_window, each region with the launch that uses it first): the
 * launches that follow spill, and spill ahead, chunks outside it, and
 * when only window chunks are left, those used farthest ahead first
 * (hosttier.c). Marked for its own launch only, a window larger than
 * host memory was read ahead and then spilled by the next launches' room
 * requests in LRU order, the nearest first. Reads in flight are bounded
 * (RA_INFLIGHT_DIV of the host budget): they queue on the drive ahead of
 * the synchronous transfers.
 *
 * Not done here: with host mappings (MT_HOST_MAP on a GPU that has them)
 * a HOST chunk's copy must be mapped at its address and may not be
 * readable by the CPU, so there is no read-ahead there (replay and
 * MT_HOST_MAP=off have it).
 *
 * Virtual clock (mt-trace replay): the device's nvme_issue queues the
 * read on the drive link without charging the host and returns its
 * completion time; a read counts as done only once the host clock has
 * passed it, and a claim waits for it there (device_virtual.c).
 *
 * Counters: readahead (chunks read ahead), readahead_used (of those,
 * fetched while HOST or in flight), readahead_late (fetches that waited
 * for the read), readahead_spilled (of those, spilled to NVMe unused).
 *
 * Threading: under the pager lock.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pager_internal.h"
#include "predictor.h"
#include "trace.h"
#include "trace_io.h"

#define RA_MIN_CONFIDENCE 0.25 /* as prefetch.c: below this a launch is not read ahead for */
#define RA_WINDOW_MAX 4096     /* regions of the window looked at per launch */
#define RA_INFLIGHT_DIV 16     /* reads in flight: at most host budget / 16 */
#define RA_INFLIGHT_MAX 16384  /* and at most this many chunks */

typedef struct mt_readahead mt_readahead_t;

typedef struct ra_read {
  _mt_nvme_op_t op;          /* the store's; its address stays fixed while busy */
  mt_chunk_t *c;             /* NULL: this entry is free (completed, claimed, cancelled) */
  mt_host_slot_t slot;       /* the host copy being filled */
  uint64_t done_at;          /* virtual clock: when the drive finishes it; 0 = the op says */
} ra_read_t;

struct mt_readahead {
  ra_read_t *reads;          /* ring, in issue order; entries freed out of order leave holes */
  unsigned cap, head, n;     /* n: entries from head, holes included */
  unsigned inflight;         /* entries with a chunk */
  unsigned depth;
  mt_region_t **win;         /* scratch: this launch's window */
};

static mt_readahead_t *ra_open(mt_pager_t *p) {
  mt_readahead_t *ra = calloc(1, sizeof(*ra));
  if (ra == NULL) return NULL;
  size_t cap = p->host_budget / RA_INFLIGHT_DIV / p->chunk;
  if (cap < 2) cap = 2;
  if (cap > RA_INFLIGHT_MAX) cap = RA_INFLIGHT_MAX;
  ra->cap = (unsigned)cap;
  ra->depth = p->ra_depth ? p->ra_depth : 1; /* tests read ahead by region with depth 0 */
  ra->reads = calloc(cap, sizeof(*ra->reads));
  ra->win = calloc(RA_WINDOW_MAX, sizeof(*ra->win));
  if (ra->reads == NULL || ra->win == NULL) {
    free(ra->reads);
    free(ra->win);
    free(ra);
    return NULL;
  }
  return ra;
}

static ra_read_t *read_of(mt_pager_t *p, const mt_chunk_t *c) {
  return &p->ra->reads[c->ra - 1];
}

/* The read finished: on the drive (its op) and, on the virtual clock, by
 * the host's time. */
static bool read_done(mt_pager_t *p, const ra_read_t *e) {
  if (e->op.busy) return false;
  return e->done_at == 0 || p->dev->ops->nvme_done(p->dev, e->done_at) == 1;
}

/* Waits for the read (bounded). 0, or -ETIMEDOUT: the drive may still
 * write into the slot and the chunk's pages (the store gave the op up:
 * give_up, below). */
static int read_wait(mt_pager_t *p, ra_read_t *e) {
  if (e->op.busy) {
    int rc = _mt_nvme_wait(p->nv->store, &e->op, 0);
    if (rc == -ETIMEDOUT) return rc;
  }
  if (e->done_at != 0) p->dev->ops->nvme_wait(p->dev, false, e->done_at);
  return 0;
}

static void entry_free(mt_readahead_t *ra, ra_read_t *e) {
  e->c = NULL;
  ra->inflight--;
  /* the ring's head moves past the entries no longer in use */
  while (ra->n > 0 && ra->reads[ra->head].c == NULL) {
    ra->head = (ra->head + 1) % ra->cap;
    ra->n--;
  }
}

/* The read is over (done or waited for): throw it away. */
static void drop(mt_pager_t *p, ra_read_t *e) {
  mt_chunk_t *c = e->c;
  _mt_pool_host_put(p, &e->slot);
  p->host_used -= p->chunk;
  c->ra = 0;
  c->region->nra--;
  entry_free(p->ra, e);
}

/* The read is over: the chunk becomes HOST with the slot as its host copy,
 * its NVMe copy still valid; a failed read (or a region freed meanwhile)
 * is dropped. */
static void complete(mt_pager_t *p, ra_read_t *e) {
  mt_chunk_t *c = e->c;
  if (e->op.result < 0 || c->region->freed) {
    if (e->op.result < 0) {
      /* the demand read meets the same chunk again and reports what it finds */
      mt_stat_add(nvme_errors, 1);
      mt_debug("nvme: read-ahead of chunk %u of the region at %#lx failed (%s); dropped", c->index,
               (unsigned long)c->region->addr, strerror(-e->op.result));
    }
    drop(p, e);
    return;
  }
  c->host = e->slot.h;
  c->host_off = e->slot.off;
  c->host_addr = e->slot.addr;
  c->ra = MT_RA_READY;
  c->dirty = false;
  _mt_live_move(p, c, CH_NVME, CH_HOST, false);
  if (_mt_trace_on())
    _mt_trace_move(MT_TR_FETCH, c->region->id, c->index, MT_TIER_NVME, MT_TIER_HOST, false, true, _mt_chunk_data(p, c));
  c->state = CH_HOST;
  _mt_host_tier_in(p, c);
  mt_stat_add(bytes_nvme_read, p->chunk);
  entry_free(p->ra, e);
}

unsigned _mt_ra_inflight(const mt_pager_t *p) {
  return p->ra != NULL ? p->ra->inflight : 0;
}

bool _mt_ra_windowed(const mt_pager_t *p, const mt_region_t *r) {
  return p->ra_window != 0 && r->ra_epoch == p->ra_window;
}

void _mt_ra_spilled(mt_chunk_t *c) {
  if (c->ra != MT_RA_READY) return;
  c->ra = 0; /* read ahead for nothing: the flag would only go stale */
  c->region->nra--;
  mt_stat_add(readahead_spilled, 1);
}

void _mt_ra_poll(mt_pager_t *p) {
  mt_readahead_t *ra = p->ra;
  if (ra == NULL || ra->inflight == 0) return;
  if (!p->nv->simulated) (void)_mt_nvme_poll(p->nv->store, 0, 0);
  /* entries stay where they are; completing one only moves the head */
  unsigned start = ra->head, count = ra->n;
  for (unsigned k = 0; k < count && ra->inflight > 0; k++) {
    ra_read_t *e = &ra->reads[(start + k) % ra->cap];
    if (e->c == NULL) continue;
    if (read_done(p, e)) complete(p, e);
    else if (e->done_at != 0) break; /* one drive link, in issue order: later ones are not done either */
  }
}

/* A read past the store's wait bound: the store has given its op up
 * (_mt_nvme_abandon), so the entry is free for another read; the slot the
 * drive may still write into stays out of use for good (counted in
 * host_used); the chunk stays NVME, its pages the drive's until it
 * answers (a read of it meanwhile fails with -EBUSY, saying so). */
static void give_up(mt_pager_t *p, ra_read_t *e) {
  mt_chunk_t *c = e->c;
  mt_error("nvme: a read-ahead of chunk %u of the region at %#lx does not finish; its host slot is "
           "given up", c->index, (unsigned long)c->region->addr);
  mt_stat_add(nvme_errors, 1);
  c->ra = 0;
  c->region->nra--;
  entry_free(p->ra, e);
}

void _mt_ra_cancel(mt_pager_t *p, mt_chunk_t *c) {
  ra_read_t *e = read_of(p, c);
  if (read_wait(p, e) < 0) give_up(p, e);
  else drop(p, e);
}

bool _mt_ra_reading(mt_pager_t *p, const mt_region_t *r) {
  bool polled = p->nv->simulated;
  for (uint32_t i = 0; i < r->nchunks && r->nra > 0; i++) {
    const mt_chunk_t *c = &r->chunks[i];
    if (c->ra == 0 || c->ra == MT_RA_READY || read_done(p, read_of(p, c))) continue;
    /* The store marks an op done only when it reaps its completion, which
     * happens at the next poll (_mt_ra_poll runs after the prefetch): a
     * read long finished looked in flight and stopped the prefetch pass. */
    if (!polled) {
      (void)_mt_nvme_poll(p->nv->store, 0, 0);
      polled = true;
      if (read_done(p, read_of(p, c))) continue;
    }
    return true;
  }
  return false;
}

void _mt_ra_claim(mt_pager_t *p, mt_region_t *r, size_t first, size_t last) {
  for (size_t i = first; i <= last && i < r->nchunks && r->nra > 0; i++) {
    mt_chunk_t *c = &r->chunks[i];
    if (c->ra == 0) continue;
    if (c->ra != MT_RA_READY) {
      ra_read_t *e = read_of(p, c);
      bool late = !read_done(p, e);
      if (late && read_wait(p, e) < 0) {
        give_up(p, e); /* the demand read will say what the drive does */
        continue;
      }
      complete(p, e);
      if (c->state != CH_HOST) continue; /* failed: dropped, NVME as before */
      if (late) mt_stat_add(readahead_late, 1);
    }
    /* MT_RA_READY: used when it is still HOST (else it left meanwhile) */
    if (c->state == CH_HOST) mt_stat_add(readahead_used, 1);
    c->ra = 0;
    r->nra--;
  }
}

/* One host slot for a read, without evicting anything inside the window
 * (marked with the epoch) and without waiting for the GPU. */
static int room(mt_pager_t *p) {
  if (p->host_used + p->chunk <= p->host_budget) return 0;
  _mt_sw_poll(p); /* spill writes done free their host copies (spillwrite.c) */
  if (p->host_used + p->chunk <= p->host_budget) return 0;
  /* retained copies (of device chunks) first, as _mt_host_room would, but
   * only when no fetch copy may still read one: that would be a wait */
  if (p->retained.rprev != &p->retained && _mt_h2d_idle(p)) return _mt_host_room(p, p->chunk, true);
  /* spill writes in flight will free room on the drive's time: no
   * synchronous spill for a read that can start at a later launch (it
   * would wait behind them anyway; ResNet152 went 84.9% -> 89.8% of ideal
   * with this) */
  if (_mt_sw_spilling(p) > 0) return -ENOMEM;
  if (_mt_host_spill(p, 1) < 0) return -ENOMEM;
  return p->host_used + p->chunk <= p->host_budget ? 0 : -ENOMEM;
}

/* Starts the read of c (NVME) into a new host slot. false: no room, or the
 * ring is full (stop for this launch). */
static bool issue(mt_pager_t *p, mt_chunk_t *c) {
  mt_readahead_t *ra = p->ra;
  if (ra->n == ra->cap) return false;
  if (room(p) < 0) return false;
  ra_read_t *e = &ra->reads[(ra->head + ra->n) % ra->cap];
  memset(e, 0, sizeof(*e));
  if (_mt_pool_host_get(p, &e->slot) < 0) return false;
  p->host_used += p->chunk;
  int rc = _mt_nvme_read(p->nv->store, c->nv, (void *)e->slot.addr, &e->op);
  if (rc < 0) {
    _mt_pool_host_put(p, &e->slot);
    p->host_used -= p->chunk;
    return rc != -ENOMEM; /* -EBUSY, -ENODATA: not this chunk; the next may go */
  }
  if (p->dev->ops->nvme_issue) e->done_at = p->dev->ops->nvme_issue(p->dev, false, p->chunk);
  e->c = c;
  ra->n++;
  ra->inflight++;
  c->ra = (uint32_t)((e - ra->reads) + 1);
  c->region->nra++;
  mt_stat_add(readahead, 1);
  if (_mt_trace_on()) _mt_trace_copy(MT_TR_NVME_READ, true, 0, p->chunk, _mt_trace_now(), _mt_trace_now());
  return true;
}

void _mt_ra_launch(mt_pager_t *p, const mt_predictor_ops_t *ops, mt_predictor_t *pred, uint64_t id) {
  if (p->nv == NULL || p->ra_depth == 0 || p->host_mapped || _mt_capture_active(p)) return;
  if (p->ra == NULL && (p->ra = ra_open(p)) == NULL) return;
  mt_readahead_t *ra = p->ra;
  _mt_ra_poll(p);
  if (p->live[CH_NVME] == 0) { /* nothing on NVMe: no walk (it costs a deep prediction) */
    p->ra_window = 0;
    return;
  }
  /* the predictor's walk where it lies (a copy of 1,024 launches at
   * every launch cost more than the walk: docs/predictor.md) */
  mt_pred_view_t v;
  ops->view(pred, ra->depth, &v);
  /* 1. the window, nearest launch first, each region once; all of it is
   * marked before any room is made, so that no spill takes a chunk the
   * window needs for one it needs later */
  size_t nwin = 0, j = 0;
  const double least = RA_MIN_CONFIDENCE * v.scale;
  for (int run = 0; run < 2 && nwin < RA_WINDOW_MAX; run++) {
    const mt_pred_launch_t *l = v.run[run];
    for (size_t i = 0; i < v.n[run] && l[i].confidence >= least && nwin < RA_WINDOW_MAX; i++) {
      j++;
      if (l[i].id == id) continue; /* the current one: its regions are resident */
      for (uint32_t k = 0; k < l[i].nkeys && nwin < RA_WINDOW_MAX; k++) {
        mt_region_t *r = _mt_prefetch_region(p, l[i].keys[k]);
        if (r == NULL || r->freed || r->kind == REG_SMALL || r->ra_epoch == p->epoch) continue;
        r->ra_epoch = p->epoch;
        r->ra_pos = (uint32_t)j;
        r->epoch = p->epoch; /* the host tier's spills skip it (host_eligible, hosttier.c) */
        ra->win[nwin++] = r;
      }
    }
  }
  p->ra_window = p->epoch;
  /* 2. reads of their NVME chunks, nearest first, while room and ring last */
  for (size_t i = 0; i < nwin; i++)
    if (!_mt_ra_region(p, ra->win[i])) break;
}

bool _mt_ra_region(mt_pager_t *p, mt_region_t *r) {
  if (p->nv == NULL || p->host_mapped || _mt_capture_active(p)) return false;
  if (p->ra == NULL && (p->ra = ra_open(p)) == NULL) return false;
  if (r->freed || r->kind == REG_SMALL || r->nnvme == 0 || r->hostuse) return true;
  r->epoch = p->epoch; /* its own HOST chunks are not spilled for it */
  for (uint32_t k = 0; k < r->nchunks; k++) {
    mt_chunk_t *c = &r->chunks[k];
    if (c->state != CH_NVME) continue;
    if (c->ra == MT_RA_READY) { /* stale: it went back to NVMe unused */
      c->ra = 0;
      r->nra--;
    }
    if (c->ra != 0) continue; /* in flight already */
    if (!issue(p, c)) return false;
  }
  return true;
}
