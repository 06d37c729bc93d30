/*
 * spillwrite.c - host -> NVMe spill writes ahead of need, on the drive's
 * own time: host memory is freed when a write completes, not waited for
 * when room is needed.
 *
 * Concept. The host tier (hosttier.c) spills HOST chunks to NVMe when the
 * host budget is full; that write is synchronous: the host waits for the
 * drive, several times slower than PCIe, right when it needs the room. On
 * G10's NVMe-bound workloads those waits were what bound the replay. Here,
 * after each launch, the host tier's own policy picks HOST chunks (the
 * ones it would spill next) until the host budget's free part plus the
 * writes in flight reaches a headroom (SW_HEADROOM_DIV of the budget), and
 * their host copies are written to NVMe asynchronously while the GPU
 * computes. A completed write turns its chunk NVME and frees its host
 * copy; a room request (_mt_host_room) that finds the budget full first
 * takes completed writes, then waits for the oldest ones in flight (they
 * are ahead of any new write on the drive anyway), and only then spills
 * synchronously as before.
 *
 * Copies written ahead. The drive idles in phases where the host has room
 * (SENet154's forward pass begins with 11 s of idle drive, G10's
 * parameters) and is the bottleneck later, when the spills come. Once the
 * host tier has spilled, and while the read-ahead runs, whenever fewer than `ahead` transfers (reads
 * ahead and writes) are queued, the next chunks in the spill order, not
 * used by the operation being prepared and without a valid NVMe copy,
 * are written too, but stay HOST in their place in the order (keep): the
 * write leaves a valid NVMe copy, so their spill, when it comes, writes
 * nothing and frees the host copy at once. A copy made stale meanwhile (a
 * write, a retained host copy given back) is dropped as any NVMe copy is;
 * only its drive time is lost. It waits behind nothing that matters: the
 * queue was (nearly) empty.
 *
 * States. A chunk being written stays HOST (its host copy is valid and
 * the drive reads it), off the host tier's policy (never picked twice; if
 * it comes back to HOST meanwhile, fetched and evicted clean, the policy
 * has it again but no spill takes it while c->sw is set),
 * with c->sw naming its write and c->nv its pages (not valid until the
 * write completes). While it is in flight:
 *   - a fetch reads its host copy as for any HOST chunk (both only read;
 *     no wait); the chunk becomes DEVICE and clean, its host copy retained;
 *   - every path that makes its NVMe copy stale (_mt_nv_drop: a write by a
 *     kernel, the host or the optimizer, a free) or gives its host copy
 *     back (_mt_host_release) settles the write first (_mt_sw_settle:
 *     waits for it, without changing the chunk's state); so nothing writes
 *     the host copy under the drive, and no page is freed under it.
 * At completion a chunk still HOST, and not used by the operation being
 * prepared, becomes NVME (the spill hosttier.c would have made); one that
 * left HOST meanwhile keeps a valid NVMe copy (DEVICE and clean: evicted
 * later for free), or, when the operation being prepared uses it, stays
 * HOST with a valid copy (a later spill writes nothing).
 *
 * Errors. A write that fails (-EIO after the store's retries, -ENOSPC)
 * loses nothing: the host copy is still the chunk's, the chunk stays HOST
 * and goes back to the host tier's policy (or, having left HOST, drops its
 * invalid pages); the error is counted (nvme_errors) and logged once per
 * kind. A write that does not finish within the store's bound (-ETIMEDOUT)
 * is abandoned: the store gives its op up and frees the pages once the
 * drive answers (never read meanwhile), the chunk keeps its host copy (the
 * drive only reads it).
 *
 * Not done here: with host mappings (MT_HOST_MAP on a GPU that has them) a
 * host copy need not be CPU-readable and spills go through staging slots
 * (tier_nvme.c), synchronously; replay and MT_HOST_MAP=off have this.
 *
 * Virtual clock (mt-trace replay): the device's nvme_issue queues the
 * write on the drive link (in issue order with every other transfer) and
 * returns its completion time; a write counts as done only once the host
 * clock has passed it, and a wait for it moves the host clock there
 * (device_virtual.c). The store is simulated: its op completes at once.
 *
 * Counters: nvme_spills (chunks that became NVME, either way),
 * spill_async (writes started here), spill_async_waits (room requests
 * that waited for one), spill_ahead_copies (copies written ahead).
 *
 * Threading: under the pager lock.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pager_internal.h"
#include "trace.h"
#include "trace_io.h"

/* Free host budget kept ahead: budget / 64. More headroom is a smaller
 * host cache: chunks spilled early come back from NVMe; less made
 * Inception-v3 with eval passes collapse (below). It was / 16, measured when spills were
 * the only writes (ResNet152 at G10's parameters: / 8 89.5%, / 16 89.8%,
 * / 4 88.5%, / 2 85.8% of ideal). Re-measured 2026-12-01, with copies
 * written ahead (SW_AHEAD_DIV) and make_room_ex's waits (the defaults,
 * writes aware; docs/prefetching.md, "Spill headroom"), at / 16, 64, 256, 1024:
 *   Inception-v3, 2nd iteration: 95.84, 95.64, 95.77, 95.77% of ideal;
 *   SENet154: 93.17, 93.17, 93.23, 91.62%; ResNet152 95.35% at each;
 *   Inception-v3 with an eval pass every third iteration (robust_table.py),
 *   worst iteration: 78.9, 77.4, 57.1, 46.8%;
 *   a 100B step (plan_table.py) at / 16, 64, 256, one NVMe drive: 284,
 *   318, 340 tokens/s (/ 16 kept 26 GB of its 421 GB host tier free);
 *   four drives: 424, 433, 434.
 * / 64 takes most of the 100B gain without the collapse under eval
 * passes. */
#define SW_HEADROOM_DIV 64
#define SW_INFLIGHT_MAX 16384 /* writes in flight at most */
/* Copies written ahead (write_ahead) while the drive has fewer than this
 * many chunks' worth of host budget (budget / 256) queued. Measured on
 * G10's parameters, the defaults, writes aware, second iteration (README),
 * with make_room_ex's shorter waits: SENet154 92.23% of ideal at / 512,
 * 93.17% at / 256, / 128 and / 64, 92.22% at / 32, 90.10% at / 16;
 * ResNet152 95.353% at / 512 to / 32; Inception-v3 95.835% down to / 64,
 * 95.700% at / 32 and / 16 (copies of chunks written or fetched again
 * before their spill are wasted drive time). / 256 is the smallest
 * amount with the whole gain. Before make_room_ex's change / 128 cost
 * ResNet152 0.3 points; now nothing moves but SENet154. */
#define SW_AHEAD_DIV 256

typedef struct sw_write {
  _mt_nvme_op_t op;          /* the store's; its address stays fixed while busy */
  mt_chunk_t *c;             /* NULL: free (completed, settled) */
  uint64_t done_at;          /* virtual clock: when the drive finishes it; 0 = the op says */
  bool keep;                 /* a copy written ahead (write_ahead): the chunk stays HOST */
} sw_write_t;

struct mt_spillwrite {
  sw_write_t *w;             /* ring, in issue order; entries settled out of order leave holes */
  unsigned cap, head, n;     /* n: entries from head, holes included */
  unsigned inflight;         /* entries with a chunk */
  unsigned keeping;          /* of them, copies written ahead: they free no host memory */
  size_t headroom;           /* bytes of the host budget kept free or being freed */
  unsigned ahead;            /* copies written ahead while the drive is idle, at most (0: none) */
  bool spilled;              /* a spill was started here: the host tier is over-committed */
  bool warned_eio, warned_nospc;
};

static struct mt_spillwrite *sw_open(mt_pager_t *p) {
  struct mt_spillwrite *s = calloc(1, sizeof(*s));
  if (s == NULL) return NULL;
  size_t cap = p->host_budget / SW_HEADROOM_DIV / p->chunk;
  if (cap < 2) cap = 2;
  if (cap > SW_INFLIGHT_MAX) cap = SW_INFLIGHT_MAX;
  s->cap = (unsigned)cap;
  s->headroom = cap * p->chunk;
  s->ahead = (unsigned)(p->host_budget / SW_AHEAD_DIV / p->chunk);
  s->w = calloc(cap, sizeof(*s->w));
  if (s->w == NULL) {
    free(s);
    return NULL;
  }
  return s;
}

/* Async spills need the CPU to read host copies and an open tier. */
static bool sw_usable(mt_pager_t *p) {
  return p->nv != NULL && !p->host_mapped && !_mt_capture_active(p);
}

static sw_write_t *write_of(mt_pager_t *p, const mt_chunk_t *c) {
  return &p->sw->w[c->sw - 1];
}

static bool write_done(mt_pager_t *p, const sw_write_t *e) {
  if (e->op.busy) return false;
  return e->done_at == 0 || p->dev->ops->nvme_done(p->dev, e->done_at) == 1;
}

/* Waits for the write (bounded). 0, or -ETIMEDOUT: the store gave the op
 * up (abandon, below); the drive still owns the chunk's pages. */
static int write_wait(mt_pager_t *p, sw_write_t *e) {
  if (e->op.busy) {
    int rc = _mt_nvme_wait(p->nv->store, &e->op, 0);
    if (rc == -ETIMEDOUT) return rc;
  }
  if (e->done_at != 0) p->dev->ops->nvme_wait(p->dev, true, e->done_at);
  return 0;
}

static void entry_free(struct mt_spillwrite *s, sw_write_t *e) {
  e->c = NULL;
  s->inflight--;
  if (e->keep) s->keeping--;
  /* the ring's head moves past the entries no longer in use */
  while (s->n > 0 && s->w[s->head].c == NULL) {
    s->head = (s->head + 1) % s->cap;
    s->n--;
  }
}

/* A chunk the host tier may not move now (hosttier.c's rule): the
 * operation being prepared uses it, or a kernel in flight may reach its
 * host copy. */
static bool in_use(mt_pager_t *p, mt_chunk_t *c) {
  mt_region_t *r = c->region;
  if (r->freed || r->epoch == p->epoch || c->epoch == p->epoch) return true;
  return r->hostuse && _mt_region_held(p, r, false);
}

/* The write's outcome, known (done or waited for). move: a successful
 * write of a HOST chunk not in use turns it NVME (false: settle, whose
 * caller is in the middle of using the chunk). */
static void finish(mt_pager_t *p, sw_write_t *e, bool move) {
  mt_chunk_t *c = e->c;
  struct mt_spillwrite *s = p->sw;
  int res = e->op.result;
  c->sw = 0;
  bool keep = e->keep;
  entry_free(s, e);
  if (keep && res >= 0) {
    /* a copy written ahead: the chunk stays where it is (HOST in the
     * spill order, or fetched meanwhile), its NVMe copy now valid, so its
     * spill, or its eviction while clean, writes nothing; that use, or a
     * write that makes it stale first, is scored (_mt_ahead_outcome) */
    c->ahead = true;
    _mt_recost(p, c); /* its copy valid now: still no write needed */
    mt_stat_add(bytes_nvme_write, p->chunk);
    return;
  }
  /* fetched and evicted clean again meanwhile, it is back in the spill
   * order: out, so that each path below puts it where it belongs once */
  if (c->state == CH_HOST) _mt_host_tier_out(p, c);
  if (res < 0) {
    /* nothing lost: the host copy is still the chunk's */
    mt_stat_add(nvme_errors, 1);
    bool *warned = res == -ENOSPC ? &s->warned_nospc : &s->warned_eio;
    if (!*warned) {
      *warned = true;
      mt_error("nvme: a spill write of chunk %u of the region at %#lx failed (%s); it stays in host memory "
               "(further such failures are counted in nvme_errors)", c->index, (unsigned long)c->region->addr,
               strerror(-res));
    }
    if (c->state == CH_HOST) {
      if (!c->region->freed) _mt_host_tier_in(p, c);
    } else if (c->nv != NULL) {
      _mt_nv_drop(p, c); /* invalid pages: never taken for a copy */
    }
    return;
  }
  mt_stat_add(bytes_nvme_write, p->chunk);
  if (c->state != CH_HOST) return; /* DEVICE and clean: its NVMe copy is valid */
  if (!move || in_use(p, c)) {
    if (!c->region->freed) _mt_host_tier_in(p, c); /* a later spill writes nothing */
    return;
  }
  _mt_host_release(p, c);
  c->state = CH_NVME;
  _mt_live_move(p, c, CH_HOST, CH_NVME, false);
  mt_stat_add(nvme_spills, 1);
  if (_mt_trace_on())
    _mt_trace_move(MT_TR_EVICT, c->region->id, c->index, MT_TIER_HOST, MT_TIER_NVME, true, false, _mt_chunk_data(p, c));
}

/* Abandons a write that does not finish (the store gave its op up,
 * _mt_nvme_abandon): its pages go back once the drive answers, the entry
 * is free now, the chunk keeps its host copy (the drive only reads it). */
static void abandon(mt_pager_t *p, sw_write_t *e) {
  mt_chunk_t *c = e->c;
  mt_error("nvme: a spill write of chunk %u of the region at %#lx does not finish; its NVMe pages are given "
           "up, its host copy stays", c->index, (unsigned long)c->region->addr);
  mt_stat_add(nvme_errors, 1);
  (void)_mt_nvme_chunk_free(p->nv->store, c->nv); /* takes effect when the drive answers */
  c->nv = NULL;
  c->sw = 0;
  entry_free(p->sw, e);
  if (c->state == CH_HOST) _mt_host_tier_out(p, c);
  if (c->state == CH_HOST && !c->region->freed) _mt_host_tier_in(p, c);
}

void _mt_sw_poll(mt_pager_t *p) {
  struct mt_spillwrite *s = p->sw;
  if (s == NULL || s->inflight == 0) return;
  if (!p->nv->simulated) (void)_mt_nvme_poll(p->nv->store, 0, 0);
  /* oldest first, up to the first not done: on the virtual clock the drive
   * finishes them in order; the store may finish a later one first, which
   * then waits for the next poll */
  while (s->inflight > 0 && write_done(p, &s->w[s->head])) finish(p, &s->w[s->head], true);
}

void _mt_sw_settle(mt_pager_t *p, mt_chunk_t *c) {
  if (c->sw == 0) return;
  sw_write_t *e = write_of(p, c);
  if (write_wait(p, e) < 0) abandon(p, e);
  else finish(p, e, false);
}

bool _mt_sw_room(mt_pager_t *p, size_t bytes) {
  struct mt_spillwrite *s = p->sw;
  if (s == NULL || s->inflight == 0) return p->host_used + bytes <= p->host_budget;
  _mt_sw_poll(p);
  /* copies written ahead free nothing: only spills are waited for (an older
   * copy ahead of one on the drive is waited for with it) */
  while (p->host_used + bytes > p->host_budget && s->inflight > s->keeping && !_mt_capture_active(p)) {
    sw_write_t *e = &s->w[s->head]; /* the oldest: the head is never a hole */
    mt_stat_add(spill_async_waits, 1);
    if (write_wait(p, e) < 0) abandon(p, e);
    else finish(p, e, true);
  }
  return p->host_used + bytes <= p->host_budget;
}

/* Starts the write of HOST chunk c: a spill (off the host tier's policy),
 * or with keep a copy written ahead (c stays in the policy). false: this
 * chunk cannot go now (a spill's goes back to the policy). */
static bool issue(mt_pager_t *p, mt_chunk_t *c, bool keep) {
  struct mt_spillwrite *s = p->sw;
  int rc = 0;
  if (c->nv == NULL)
    rc = _mt_nvme_chunk_alloc(p->nv->store, p->chunk, c->region->id, (uint64_t)c->index * p->chunk, &c->nv);
  if (rc < 0) return false; /* -ENOSPC: logged by the store; a synchronous spill will say it again */
  if (_mt_nvme_chunk_valid(c->nv)) { /* its NVMe copy holds these bytes: no write */
    if (keep) return true;
    _mt_host_release(p, c);
    c->state = CH_NVME;
    _mt_live_move(p, c, CH_HOST, CH_NVME, false);
    mt_stat_add(nvme_spills, 1);
    if (_mt_trace_on())
      _mt_trace_move(MT_TR_EVICT, c->region->id, c->index, MT_TIER_HOST, MT_TIER_NVME, false, false,
                     _mt_chunk_data(p, c));
    return true;
  }
  sw_write_t *e = &s->w[(s->head + s->n) % s->cap];
  memset(e, 0, sizeof(*e));
  if ((rc = _mt_nvme_write(p->nv->store, c->nv, (const void *)c->host_addr, &e->op)) < 0) return false;
  if (p->dev->ops->nvme_issue) e->done_at = p->dev->ops->nvme_issue(p->dev, true, p->chunk);
  e->c = c;
  e->keep = keep;
  s->keeping += keep;
  s->n++;
  s->inflight++;
  c->sw = (uint32_t)(e - s->w) + 1;
  _mt_recost(p, c); /* written ahead, it stays in the spill order: written */
  if (keep) mt_stat_add(spill_ahead_copies, 1);
  else mt_stat_add(spill_async, 1);
  if (_mt_trace_on()) _mt_trace_copy(MT_TR_NVME_WRITE, true, 0, p->chunk, _mt_trace_now(), _mt_trace_now());
  return true;
}

/* Spills ahead take nothing of the last read-ahead window (readahead.c):
 * they are optional, and such a chunk is wanted soon. */
static bool eligible(mt_policy_node_t *n, void *arg) {
  mt_pager_t *p = arg;
  mt_chunk_t *c = _mt_chunk_of(n);
  return c->sw == 0 && !in_use(p, c) && !_mt_ra_windowed(p, c->region);
}

/* The spill order's next chunk not written yet (nor being written), which
 * the operation being prepared does not use (walked among the chunks
 * filed DIRTY, _mt_host_cost: not those of regions whose copies ahead
 * went stale). */
static bool copy_eligible(mt_policy_node_t *n, void *arg) {
  mt_pager_t *p = arg;
  mt_chunk_t *c = _mt_chunk_of(n);
  if (c->sw != 0 || in_use(p, c)) return false;
  return c->nv == NULL || !_mt_nvme_chunk_valid(c->nv);
}

/* While the drive has fewer than s->ahead transfers queued (reads ahead
 * and writes together) and the host tier has spilled before, copies of the
 * next chunks in the spill order are written now, the chunks staying
 * HOST and in the order: their spills later write nothing. */
static void write_ahead(mt_pager_t *p) {
  struct mt_spillwrite *s = p->sw;
  /* Without the read-ahead every NVMe read is a demand read the host
   * waits for, and it would queue behind these copies (demand-paged,
   * ResNet152 went 75.8 -> 70.7% of ideal) */
  if (s->ahead == 0 || !s->spilled || p->ra == NULL) return;
  unsigned busy = s->inflight + _mt_ra_inflight(p);
  if (busy >= s->ahead) return;
  for (unsigned want = s->ahead - busy; want > 0 && s->n < s->cap; want--) {
    mt_policy_node_t *node = p->hpol_ops->victim_in(p->nv->hpol, MT_COST_BIT(MT_COST_DIRTY), copy_eligible, p);
    if (node == NULL || !issue(p, _mt_chunk_of(node), true) || _mt_chunk_of(node)->sw == 0) break;
  }
}

void _mt_sw_launch(mt_pager_t *p) {
  if (!sw_usable(p)) return;
  if (p->sw == NULL && (p->sw = sw_open(p)) == NULL) return;
  struct mt_spillwrite *s = p->sw;
  _mt_sw_poll(p);
  /* bytes free once the spills in flight are done */
  size_t pending = (size_t)(s->inflight - s->keeping) * p->chunk;
  /* Each spill takes one chunk off the excess (its write pending, or its
   * copy given back when its NVMe copy was valid): that many victims, in
   * one walk, at most a batch at a time. */
  while (s->n < s->cap && p->host_used > pending && p->host_used - pending + s->headroom > p->host_budget) {
    size_t want = (p->host_used - pending + s->headroom - p->host_budget + p->chunk - 1) / p->chunk;
    if (want > s->cap - s->n) want = s->cap - s->n;
    if (want > EVICT_BATCH) want = EVICT_BATCH;
    mt_chunk_t *cs[EVICT_BATCH];
    mt_collect_t k = {eligible, p, cs, 0, (int)want};
    (void)p->hpol_ops->victim(p->nv->hpol, _mt_collect, &k);
    if (k.n == 0) break;
    for (int i = 0; i < k.n; i++) {
      mt_chunk_t *c = cs[i];
      p->hpol_ops->remove(p->nv->hpol, &c->node);
      if (!issue(p, c, false)) {
        _mt_host_tier_in(p, c);
        write_ahead(p);
        return;
      }
      if (c->sw != 0) pending += p->chunk;
      s->spilled = true;
    }
  }
  write_ahead(p);
}

void _mt_sw_set_ahead(mt_pager_t *p, unsigned chunks) {
  if (!sw_usable(p)) return;
  if (p->sw == NULL && (p->sw = sw_open(p)) == NULL) return;
  p->sw->ahead = chunks;
}

unsigned _mt_sw_inflight(const mt_pager_t *p) {
  return p->sw != NULL ? p->sw->inflight : 0;
}

unsigned _mt_sw_spilling(const mt_pager_t *p) {
  return p->sw != NULL ? p->sw->inflight - p->sw->keeping : 0;
}

void _mt_sw_close(mt_pager_t *p) {
  struct mt_spillwrite *s = p->sw;
  if (s == NULL) return;
  for (unsigned i = 0; i < s->cap; i++)
    if (s->w[i].c != NULL) _mt_sw_settle(p, s->w[i].c);
  free(s->w);
  free(s);
  p->sw = NULL;
}
