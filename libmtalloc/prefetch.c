/*
 * prefetch.c - the prefetch scheduler: after each launch, fetch what the
 * predictor says the next launches will use, while the GPU runs this one.
 *
 * Concept. Every launch is named by an identity (its function and the
 * stable keys of its footprint's regions, predictor/regionkey.h) and shown
 * to the predictor (MT_PREDICTOR). Its walk names the next launches
 * (MT_PREFETCH_DEPTH of them at most) and their footprints by key; a map
 * from key to the live region finds them. Then, nearest launch first:
 *   1. the window: every region the predicted launches use is marked with
 *      the current operation's epoch, so nothing the prefetch evicts is
 *      something they need (eligible() in pager.c skips the epoch);
 *   2. room without waiting: evictions only of chunks no work in flight
 *      holds (_mt_make_room); when that fails, the host waits for the
 *      oldest queued launch and looks again, while enough stay queued
 *      (runahead.c, "Waiting for room"), else prefetching stops here;
 *   3. the region's chunks in host memory or on NVMe are fetched by the
 *      pager's usual path (never-touched chunks stay untouched), and an
 *      event recorded after their copies is kept with the region.
 * A launch or copy that uses a prefetched region makes its stream wait for
 * that event only (_mt_prefetch_wait), not for every fetch in flight, so a
 * kernel does not wait for data meant for later kernels. A misprediction
 * costs link time and maybe an eviction, never correctness: the launch
 * makes its footprint resident as always.
 *
 * Keys. A region's key is fixed at its first use by a launch: the
 * identity of that launch and the argument slot (its place in the
 * footprint). Weights keep the key of the launch that first touched them
 * for their whole life; activations allocated every iteration get the same
 * key each iteration, because the launch that first touches them does not
 * change. The identity of the first toucher uses the provisional key of
 * its slot for regions not keyed yet, and goes on using it for the regions
 * it keyed (same function, same slot), so that a long-lived region, keyed
 * in the first iteration, does not change its first toucher's identity in
 * the second: two iterations are enough to learn from.
 *
 * Pacing (MT_PREFETCH_PACE, on by default): a prefetch starts only while
 * the h2d link is idle. Its mapping changes would otherwise wait for the
 * copies in flight (the unmap fence, unmapfence.c), holding the host --
 * and the kernels it has yet to issue -- behind data meant for later
 * launches; and a long queue on the link makes the next launch's own
 * mapping changes wait as long. In practice a launch's prefetch fetches
 * the nearest region its window lacks, and the next ones wait for a later
 * launch. Measured on the G10 traces
 * (README, Prefetching): BERT 98.0 -> 99.9% of ideal, Inception 94.2 ->
 * 95.8%, but SENet154 78.8 -> 77.5% and a link-bound synth trace slower
 * (the link idles while prefetches wait); batching a whole window's
 * fetches behind one fence lost to both.
 *
 * Write-behind: the window's missing bytes tell how much will be evicted
 * soon; as much of the coldest dirty chunks is copied to host memory now
 * (_mt_write_behind, writebehind.c), on the d2h link while the GPU
 * computes, so that those evictions later need no copy and no wait.
 *
 * Timeliness feedback (MT_PREFETCH_LEAD, predictor/lead.h): a region
 * whose use finds its fetch late -- its stream waits for the prefetch copy,
 * or chunks of it are still in host memory or on NVMe when its launch
 * begins -- gets a lead, remembered by key, and in later iterations it is
 * prefetched when it is predicted up to depth + lead launches ahead rather
 * than depth; a use on time shrinks the lead again. The walk asks the
 * predictor for depth + MT_PREFETCH_LEAD launches; beyond depth only
 * regions whose lead reaches that far join the window.
 *
 * Prefetches into free memory (MT_PREFETCH_FREE, 32 launches by default).
 * Beyond the depth, the regions of the next MT_PREFETCH_FREE predicted
 * launches are fetched too, but only into device memory no one holds: the
 * first that would need an eviction ends the pass. They join the window
 * (no eviction this pass makes takes them) but not its lack (write-behind
 * copies nothing out for them). As a backward pass frees its activations,
 * the memory fills with what the next launches read; their host copies
 * then make room for the NVMe reads ahead (readahead.c), which start
 * sooner: in ResNet152's second iteration (G10's parameters) the reads of
 * the last 113 GB on NVMe began 2.6 s earlier and the iteration went 96.5
 * -> 98.2% of ideal (docs/prefetching.md). Only while the handoff is on:
 * with it off a new tensor takes its memory from free memory or evictions,
 * and what a far prefetch put there is evicted again for it. And not while
 * NVMe holds chunks and host memory has room: the reads ahead are not
 * short of room then, and ResNet152 measured 97.2-97.8% from the second
 * iteration with far prefetches there too (98.1-98.2 without). While
 * NVMe holds chunks (so host memory is full whenever the pass runs) it
 * reaches FREE_NVME_MORE (8) launches further: more of the window's host
 * copies come to the GPU while the backward pass frees its memory, and
 * the reads ahead they make room for begin sooner. With the room wait
 * above, ResNet152's second iteration went 98.24 -> 98.49% of ideal
 * (G10: 98.40), SENet154's 93.87 -> 93.93 (third and later iterations
 * 94.83 -> 94.50); 2 more launches gave 98.26, 4 to 16 gave 98.40-98.66
 * (docs/prefetching.md). Counter: prefetches_free (chunks).
 *
 * Next-use estimates for eviction (_mt_prefetch_due, predictor/reuse.h)
 * also live here, with the keys: when the period is learned or changes,
 * the chunks the policies filed without an estimate are asked again
 * (redue); and a key late once the period is known is kept
 * (predictor/keep.h): its due counts nearer, so it is evicted after
 * regions that arrive on time.
 *
 * Counters: prefetches (chunks fetched ahead), prefetch_used (of those,
 * touched by a launch or copy before leaving the GPU), prefetch_late
 * (uses whose stream had to wait for the prefetch copy).
 *
 * Threading: under the pager lock, like the rest of the pager.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "demand.h"
#include "keep.h"
#include "lead.h"
#include "mix.h"
#include "pager_internal.h"
#include "predictor.h"
#include "regionkey.h"
#include "reuse.h"

#define SPENT_SOON 32       /* launches from last use to free: below, "freed soon" */
#define FREE_NVME_MORE 8    /* launches the free-memory pass reaches further while NVMe holds
                             * chunks (Prefetches into free memory, above) */
#define MIN_CONFIDENCE 0.25 /* below this a predicted launch is not prefetched for */
#define WINDOW_MAX 256      /* regions of the window looked at per launch */
#define LEAD_KEYS 4096      /* region keys with a lead, at most (predictor/lead.h) */
#define KEEP_KEYS 4096      /* region keys kept because they came late, at most (predictor/keep.h) */
#define KEEP_SHARE 4        /* ... holding at most this share of the GPU budget */
#define PRED_WINDOW 65536   /* launches over which the predictor's evictions are judged */

typedef struct kslot {
  uint64_t key;
  mt_region_t *r;
  uint32_t life;             /* launches that used the last region with this key before it
                              * was freed; 0 = none has died yet */
  uint32_t lag;              /* launches from that region's last use to its free */
  uint64_t fresh_epoch;      /* the pager epoch whose window counted it as allocated anew */
  uint64_t size;             /* the last region with this key's size (what a new one takes) */
  uint64_t seen;             /* launches begun when a region last took or left the key */
} kslot_t;

struct mt_prefetch {
  const mt_predictor_ops_t *ops;
  mt_predictor_t *pred;
  unsigned depth;
  kslot_t *map;              /* key -> live region, open addressing, power-of-two size */
  size_t cap, n;
  uint64_t *regs;            /* scratch: this launch's footprint as keys */
  size_t cap_regs;
  size_t nregs;              /* of them, this launch's (begin to launch) */
  uint64_t id;               /* this launch's identity */
  uint64_t launches;         /* launches begun (the clock of last_use and lag) */
  mt_pred_launch_t *out;     /* walk predictions */
  mt_reuse_t *reuse;         /* next-use estimates, when the policy reads them */
  mt_lead_t *lead;           /* timeliness feedback; NULL: none (MT_PREFETCH_LEAD=0) */
  unsigned walk;             /* launches asked of the predictor: depth + the largest lead or
                              * MT_PREFETCH_FREE, whichever is more */
  uint64_t pred_evictions;   /* the predictor's keys without room (evicted or refused) so far */
  uint64_t pred_window_ev;   /* ... at the start of the current PRED_WINDOW */
  uint64_t pred_fp;          /* footprints it dropped (no room in its ring) so far */
  uint64_t pred_window_fp;   /* ... at the start of the current PRED_WINDOW */
  uint64_t pred_observed;    /* launches observed */
  bool pred_warned;          /* the table-full warning was given */
  mt_demand_t *demand;       /* write-behind's schedule; NULL: none (MT_WRITEBEHIND_HORIZON=0,
                              * or no next-use estimates to learn the period from) */
  uint64_t redue_period;     /* the period the policies' unknown dues were last asked again at */
  uint64_t redue_clock;      /* and when */
  mt_keep_t *keep;           /* keys kept because their fetch came late (predictor/keep.h);
                              * NULL without next-use eviction */
};

/* Predicted launches beyond the depth the free-memory pass looks at:
 * MT_PREFETCH_FREE, and FREE_NVME_MORE more while NVMe holds chunks. */
static unsigned free_reach(const mt_pager_t *p, bool nvme_holds) {
  return p->pf_free > 0 ? p->pf_free + (nvme_holds ? FREE_NVME_MORE : 0) : 0;
}

int _mt_prefetch_open(mt_pager_t *p, const char *predictor, unsigned depth) {
  const mt_predictor_ops_t *ops = _mt_predictor_find(predictor ? predictor : "none");
  if (ops == NULL) return -EINVAL;
  bool prefetch = ops != &_mt_predictor_none && depth > 0;
  bool dues = p->pol_ops->uses_due || p->hpol_ops->uses_due; /* next-use eviction needs keys and their uses */
  if (!prefetch && !dues) return 0; /* demand fetching, LRU: nothing to do per launch */
  mt_prefetch_t *pf = calloc(1, sizeof(*pf));
  if (pf == NULL) return -ENOMEM;
  pf->ops = ops;
  pf->depth = prefetch ? depth : 0;
  pf->pred = ops->create(&(mt_predictor_config_t){.max_bytes = p->pf_mem});
  pf->reuse = dues ? _mt_reuse_create() : NULL;
  pf->cap = 1024;
  pf->map = calloc(pf->cap, sizeof(*pf->map));
  pf->lead = prefetch ? _mt_lead_create(LEAD_KEYS, p->pf_lead) : NULL;
  /* the walk covers the farthest reach: with a tier, NVMe may hold chunks */
  const unsigned lead = _mt_lead_max(pf->lead), spare = prefetch ? free_reach(p, p->nv != NULL) : 0;
  pf->walk = pf->depth + (lead > spare ? lead : spare);
  pf->out = calloc(pf->walk ? pf->walk : 1, sizeof(*pf->out));
  const bool sched = prefetch && dues && p->wb_horizon > 0;
  pf->demand = sched ? _mt_demand_create() : NULL;
  const bool keep = p->pol_ops->uses_due;
  pf->keep = keep ? _mt_keep_create(KEEP_KEYS, p->budget / KEEP_SHARE) : NULL;
  if (pf->pred == NULL || pf->map == NULL || pf->out == NULL || (dues && pf->reuse == NULL) ||
      (prefetch && p->pf_lead > 0 && pf->lead == NULL) || (sched && pf->demand == NULL) ||
      (keep && pf->keep == NULL)) {
    if (pf->pred) ops->destroy(pf->pred);
    _mt_keep_destroy(pf->keep);
    _mt_demand_destroy(pf->demand);
    _mt_lead_destroy(pf->lead);
    _mt_reuse_destroy(pf->reuse);
    free(pf->map);
    free(pf->out);
    free(pf);
    return -ENOMEM;
  }
  p->pf = pf;
  if (pf->reuse != NULL) _mt_handoff_trial_open(p);
  return 0;
}

void _mt_prefetch_close(mt_pager_t *p) {
  mt_prefetch_t *pf = p->pf;
  if (pf == NULL) return;
  pf->ops->destroy(pf->pred);
  _mt_reuse_destroy(pf->reuse);
  _mt_lead_destroy(pf->lead);
  _mt_demand_destroy(pf->demand);
  _mt_keep_destroy(pf->keep);
  free(pf->map);
  free(pf->regs);
  free(pf->out);
  free(pf);
  p->pf = NULL;
}

/* ---- key -> region ----------------------------------------------------------- */

static size_t home(const mt_prefetch_t *pf, uint64_t key) {
  return (size_t)_mt_mix64(key) & (pf->cap - 1);
}

static kslot_t *map_find(mt_prefetch_t *pf, uint64_t key) {
  for (size_t i = home(pf, key);; i = (i + 1) & (pf->cap - 1)) {
    if (pf->map[i].key == key) return &pf->map[i];
    if (pf->map[i].key == 0) return NULL;
  }
}

static void map_put(mt_prefetch_t *pf, uint64_t key, mt_region_t *r);

/* A dead key (no live region) keeps what its last region's life was for
 * the region born next in its place, one period later. Keys never born
 * again (new launch identities: new shapes, one-off kernels) would grow
 * the map for good: a dead key not born again within this many launches
 * is dropped when the map is rebuilt. */
#define KEY_FORGET_MIN 65536
static uint64_t key_horizon(const mt_prefetch_t *pf) {
  uint64_t period = pf->reuse != NULL ? _mt_reuse_period(pf->reuse) : 0;
  return 2 * period > KEY_FORGET_MIN ? 2 * period : KEY_FORGET_MIN;
}

static bool key_kept(const mt_prefetch_t *pf, const kslot_t *k, uint64_t horizon) {
  return k->key != 0 && (k->r != NULL || (k->life != 0 && pf->launches - k->seen <= horizon));
}

/* Rebuilds the map without the keys past their horizon: at the same size
 * when that leaves it at most half full, else at twice the size. */
static int map_grow(mt_prefetch_t *pf) {
  kslot_t *old = pf->map;
  size_t oc = pf->cap, kept = 0;
  const uint64_t horizon = key_horizon(pf);
  for (size_t i = 0; i < oc; i++) kept += key_kept(pf, &old[i], horizon);
  size_t cap = (kept + 1) * 8 > oc * 3 ? oc * 2 : oc;
  kslot_t *nm = calloc(cap, sizeof(*nm));
  if (nm == NULL) return -ENOMEM;
  pf->map = nm;
  pf->cap = cap;
  pf->n = 0;
  for (size_t i = 0; i < oc; i++)
    if (key_kept(pf, &old[i], horizon)) {
      size_t j = home(pf, old[i].key);
      while (nm[j].key != 0) j = (j + 1) & (cap - 1);
      nm[j] = old[i];
      pf->n++;
    }
  free(old);
  return 0;
}

/* The latest region with the key wins: two regions that share a key (same
 * first toucher and slot) are one to the predictor. */
static void map_put(mt_prefetch_t *pf, uint64_t key, mt_region_t *r) {
  if ((pf->n + 1) * 4 > pf->cap * 3 && map_grow(pf) < 0) return; /* no prefetch for it: harmless */
  size_t i = home(pf, key);
  while (pf->map[i].key != 0 && pf->map[i].key != key) i = (i + 1) & (pf->cap - 1);
  if (pf->map[i].key == 0) {
    pf->n++;
    pf->map[i] = (kslot_t){key, r, 0, 0, 0, r != NULL ? r->size : 0, pf->launches};
  } else {
    pf->map[i].r = r; /* the life of its predecessor stays */
    pf->map[i].seen = pf->launches;
    if (r != NULL) pf->map[i].size = r->size;
  }
}

#define KEY_ALTERNATIVES 64 /* live regions of one identity and slot told apart; more share the last */

/* The key of a region born now whose per-iteration key is key: key
 * itself, unless a live region holds it (another launch of the same
 * identity made it, earlier in this iteration); then the first
 * alternative no live region holds (regionkey.h). A region that died
 * leaves its key free for the region born next in its place, so each
 * region gets the same key in every iteration. */
static uint64_t born_key(mt_prefetch_t *pf, uint64_t key) {
  uint64_t k = key;
  for (uint32_t n = 1; n <= KEY_ALTERNATIVES; n++) {
    kslot_t *s = map_find(pf, k);
    if (s == NULL || s->r == NULL || s->r->freed) return k;
    k = _mt_regionkey_alternative(key, n);
  }
  return k;
}

void _mt_prefetch_forget(mt_pager_t *p, mt_region_t *r) {
  if (r->pf_event != 0) {
    _mt_event_put(p, r->pf_event);
    r->pf_event = 0;
  }
  mt_prefetch_t *pf = p->pf;
  if (pf == NULL || r->key == 0) return;
  kslot_t *k = map_find(pf, r->key);
  /* the slot stays (no tombstones needed): a NULL region is "unknown" */
  if (k != NULL && k->r == r) {
    k->r = NULL;
    k->seen = pf->launches;
    /* (called as the application frees r, before r->freed is set) */
    if (r->uses > 0) { /* the region born next in its place lives as long */
      k->life = r->uses;
      uint64_t lag = pf->launches - r->last_use;
      k->lag = lag < UINT32_MAX ? (uint32_t)lag : UINT32_MAX;
    }
  }
}

/* ---- the wait ---------------------------------------------------------------- */

int _mt_prefetch_wait(mt_pager_t *p, mt_region_t *r, mt_handle_t s) {
  /* A stream that captures runs nothing now: its graph's launch waits. */
  if (_mt_capturing(p, s)) return 0;
  /* While another stream captures no event may be queried (graph.c), but
   * this stream's work runs now: it waits, done or not. */
  if (_mt_capture_active(p)) return p->dev->ops->stream_wait(p->dev, s, r->pf_event);
  int q = p->dev->ops->event_query(p->dev, r->pf_event);
  if (q == 1) {
    _mt_event_put(p, r->pf_event);
    r->pf_event = 0;
    if (p->pf != NULL) _mt_lead_on_time(p->pf->lead, r->key);
    return 0;
  }
  mt_stat_add(prefetch_late, 1);
  if (p->pf != NULL) _mt_lead_late(p->pf->lead, r->key);
  return p->dev->ops->stream_wait(p->dev, s, r->pf_event);
}

/* ---- after a launch ---------------------------------------------------------- */

/* Fetches r's chunks that are in host memory or on NVMe, if room can be
 * made without waiting; spare (beyond the depth: Prefetches into free
 * memory): only into free memory, no eviction. Returns false when it could
 * not (stop prefetching). */
static bool prefetch_region(mt_pager_t *p, mt_region_t *r, mt_handle_t s, bool spare) {
  if (spare && p->used + (size_t)(r->nchunks - r->ndevice) * p->chunk > p->budget) return false;
  size_t lack = 0;
  for (uint32_t i = 0; i < r->nchunks; i++)
    lack += r->chunks[i].state == CH_HOST || r->chunks[i].state == CH_NVME;
  if (lack == 0) return true;
  /* Every fetch changes mappings, and a mapping change waits for the
   * fetch copies in flight (unmapfence.c): a prefetch issued while the
   * link is still busy would hold the host until the link drains, and the
   * GPU runs dry behind it. So one is put off to a later launch instead
   * (MT_PREFETCH_PACE). */
  if (p->pf_pace && p->dev->info.unmap_syncs && !_mt_h2d_idle(p)) return false;
  /* Nor while a read ahead of one of its chunks is still on the drive:
   * the fetch would hold the host until the read ends (_mt_ra_claim), and
   * the GPU runs dry behind it. The launch's own fetch waits, if it must. */
  if (r->nra > 0 && _mt_ra_reading(p, r)) return false;
  p->prefetching = true; /* no waits: not even for freed regions (pager.c) */
  while (_mt_make_room(p, lack * p->chunk) < 0) {
    p->prefetching = false;
    /* No room free of queued launches: the host waits for the oldest and
     * looks again (runahead.c, "Waiting for room"); not for a region with
     * chunks on NVMe while reads ahead are in flight, where the drive
     * binds, not the room. A region all in host memory waits like any
     * other: the reads are not its (ResNet152 98.04 -> 98.49% of ideal with
     * the reach below; docs/prefetching.md). Not with MT_PREFETCH_FREE=0:
     * there those waits stand in for the late fetches the keep learns
     * from (predictor/keep.h), and ResNet152 stayed at 96.5% from the third
     * iteration on, against 98.1-98.3 without them. */
    if (p->pf_nowait || (_mt_ra_inflight(p) > 0 && (r->nnvme > 0 || p->pf_free == 0)) || !_mt_runahead_yield(p))
      return false;
    p->prefetching = true;
  }
  int rc = 0;
  bool any = false;
  for (uint32_t i = 0; i < r->nchunks && rc == 0;) {
    uint8_t st = r->chunks[i].state;
    if (st != CH_HOST && st != CH_NVME) {
      i++;
      continue;
    }
    uint32_t j = i + 1;
    while (j < r->nchunks && (r->chunks[j].state == CH_HOST || r->chunks[j].state == CH_NVME)) j++;
    uintptr_t a = r->addr + (uintptr_t)i * p->chunk;
    size_t len = (size_t)(j - i) * p->chunk;
    if (a + len > r->addr + r->size) len = r->addr + r->size - a;
    rc = _mt_range_resident(p, r, a, len, s, false, false);
    any = true;
    i = j;
  }
  p->prefetching = false;
  int fl = _mt_fetch_flush(p); /* a failure marks the region lost (pager.c) */
  if (any && fl == 0) {
    mt_handle_t e = _mt_event_get(p);
    if (e != 0 && p->dev->ops->event_record(p->dev, e, p->h2d) == 0) {
      if (r->pf_event != 0) _mt_event_put(p, r->pf_event); /* the new one comes later on h2d */
      r->pf_event = e;
    } else {
      if (e != 0) _mt_event_put(p, e);
      /* no event of its own: its users wait for every fetch, as before */
      return false;
    }
  }
  if (spare && any && rc == 0 && fl == 0) mt_stat_add(prefetches_free, lack);
  return rc == 0 && fl == 0;
}

/* r was used again: whether it is spent now (pager_internal.h,
 * _mt_prefetch_spent), and when its memory comes back. Its dirty device
 * chunks change cost class with it (the policy files dead data apart). */
static void spent_update(mt_pager_t *p, mt_region_t *r) {
  kslot_t *k = r->key != 0 ? map_find(p->pf, r->key) : NULL;
  uint8_t sp = MT_SPENT_NO;
  if (k != NULL && k->life > 0 && r->uses >= k->life) sp = k->lag < SPENT_SOON ? MT_SPENT_SOON : MT_SPENT_LATE;
  if (sp == r->spent) return;
  r->spent = sp;
  if (r->ndevice > r->nclean)
    for (uint32_t i = 0; i < r->nchunks; i++) _mt_recost(p, &r->chunks[i]);
}

/* A launch begins and r still has chunks in host memory or on NVMe: they
 * will be fetched on demand, so whatever fetch was meant for them (if any)
 * came too late. Never-touched chunks do not count: nothing fetches them. */
static bool fetched_late(const mt_region_t *r) {
  for (uint32_t i = 0; i < r->nchunks; i++)
    if (r->chunks[i].state == CH_HOST || r->chunks[i].state == CH_NVME) return true;
  return false;
}

static uint64_t due_of(mt_policy_node_t *n, void *arg) {
  return _mt_prefetch_due(arg, _mt_chunk_of(n)->region);
}

/* The period is known now, or changed: the chunks the policies filed
 * without an estimate (before it was known: the whole first iteration)
 * are asked for one again (policy/nextuse.c, redue). A walk of those
 * chunks, once per change, and at most once a period: a period that
 * wavers between two values costs no walk per launch. */
static void redue(mt_pager_t *p, uint64_t period) {
  mt_prefetch_t *pf = p->pf;
  if (period == 0 || (pf->redue_period != 0 && p->clock - pf->redue_clock < pf->redue_period)) return;
  if (pf->redue_period != 0) _mt_keep_clear(pf->keep); /* another loop: what came late in the old one */
  pf->redue_period = period;
  pf->redue_clock = p->clock;
  if (p->pol_ops->redue) p->pol_ops->redue(p->pol, due_of, p);
  if (p->nv != NULL && p->hpol_ops->redue) p->hpol_ops->redue(p->nv->hpol, due_of, p);
}

void _mt_prefetch_begin(mt_pager_t *p, uint64_t func, mt_region_t **rs, size_t n) {
  mt_prefetch_t *pf = p->pf;
  pf->nregs = 0;
  pf->id = 0;
  if (n > pf->cap_regs) {
    size_t cap = pf->cap_regs ? pf->cap_regs : 16;
    while (cap < n) cap *= 2;
    uint64_t *nr = realloc(pf->regs, cap * sizeof(*nr));
    if (nr == NULL) return;
    pf->regs = nr;
    pf->cap_regs = cap;
  }
  pf->launches++;
  /* the identity: function, then each slot's key (provisional when unborn) */
  uint64_t id = _mt_mix64(func ^ 0x6c61756e6368ull);
  for (size_t i = 0; i < n; i++) {
    /* The launch that gave a region its key sees it unborn every time, so
     * that its identity is the same in the iteration where the region was
     * born and in later ones (where a long-lived region already has it). */
    mt_region_t *r = rs[i];
    bool born_here = r->key == 0 || (r->key_func == func && r->key_slot == i);
    uint64_t k = born_here ? _mt_regionkey_unborn((uint32_t)i) : r->key;
    id = _mt_mix64(id ^ k) + i;
  }
  if (id == 0) id = 1;
  pf->id = id;
  if (pf->reuse != NULL) {
    p->clock = _mt_reuse_launch(pf->reuse, id);
    uint64_t period = _mt_reuse_period(pf->reuse);
    _mt_handoff_tick(p, period, id);
    if (p->pol_ops->advance) p->pol_ops->advance(p->pol, p->clock, period);
    if (p->nv != NULL && p->hpol_ops->advance) p->hpol_ops->advance(p->nv->hpol, p->clock, period);
    if (period != pf->redue_period) redue(p, period);
  }
  /* late uses join the keep once the period is known: before it, every use
   * of a region evicted once is late, and the first ones would fill the set;
   * without the lead or the keep no footprint's chunks are walked for it */
  const bool keep = pf->keep != NULL && pf->redue_period != 0;
  size_t m = 0;
  for (size_t i = 0; i < n; i++) {
    mt_region_t *r = rs[i];
    if (r->key == 0) {
      r->key = born_key(pf, _mt_regionkey_per_iteration(id, (uint32_t)i));
      r->key_func = func;
      r->key_slot = (uint32_t)i;
      map_put(pf, r->key, r);
    }
    /* its use now, before the residency that follows asks for its next */
    if (pf->reuse != NULL) (void)_mt_reuse_use(pf->reuse, r->key);
    r->uses++;
    r->last_use = pf->launches;
    if (r->kind == REG_SMALL) continue; /* always resident: nothing to prefetch */
    spent_update(p, r);
    if ((pf->lead != NULL || keep) && r->ndevice < r->nchunks && fetched_late(r)) {
      if (pf->lead != NULL) _mt_lead_late(pf->lead, r->key);
      if (keep) _mt_keep_late(pf->keep, r->key, r->size);
    }
    pf->regs[m++] = r->key;
  }
  pf->nregs = m;
}

uint64_t _mt_prefetch_due(mt_pager_t *p, mt_region_t *r) {
  mt_prefetch_t *pf = p->pf;
  if (pf == NULL || pf->reuse == NULL || r->key == 0) return 0;
  if (r->due_clock != p->clock || r->due_clock == 0) {
    r->due = _mt_reuse_next(pf->reuse, r->key);
    r->due_clock = p->clock;
    if (_mt_keep_has(pf->keep, r->key)) r->due = _mt_keep_due(p->clock, r->due); /* came late: weighs more */
  }
  return r->due;
}

/* The predictor's hits and the keys its table had no room for, counted;
 * and once, a warning when the table keeps overflowing: a loop of more
 * launches than MT_PREDICTOR_MEM holds is predicted only in part (the
 * table keeps a fixed share of it: correlation.c, "Loops too long"), and
 * nothing else would say why prefetching covers less. Judged over
 * PRED_WINDOW launches: a loop that fits finds room for next to every key
 * once learned; one that does not, for few. */
static void pred_count(mt_pager_t *p, bool hit) {
  mt_prefetch_t *pf = p->pf;
  mt_predictor_stats_t st;
  pf->ops->stats(pf->pred, &st);
  if (hit) mt_stat_add(predictor_hits, 1); /* atomics: none when nothing changed */
  uint64_t full = st.evictions + st.refused; /* keys the table had no room for */
  if (full != pf->pred_evictions) mt_stat_add(predictor_evictions, full - pf->pred_evictions);
  pf->pred_evictions = full;
  if (st.fp_dropped != pf->pred_fp) mt_stat_add(predictor_fp_dropped, st.fp_dropped - pf->pred_fp);
  pf->pred_fp = st.fp_dropped;
  if (++pf->pred_observed % PRED_WINDOW != 0) return;
  uint64_t ev = full - pf->pred_window_ev, dropped = st.fp_dropped - pf->pred_window_fp;
  pf->pred_window_ev = full;
  pf->pred_window_fp = st.fp_dropped;
  if (pf->pred_warned || ev + dropped < PRED_WINDOW / 8) return;
  pf->pred_warned = true;
  mt_warn("the predictor had no room for %llu table entries and %llu footprints in the last %u launches: "
          "MT_PREDICTOR_MEM=%zu holds fewer launches than the loop has, so prefetching covers less; raise it "
          "(its entry in the options table says how much a launch takes)",
          (unsigned long long)ev, (unsigned long long)dropped, PRED_WINDOW, p->pf_mem);
}

/* Whether the launches beyond the depth are prefetched into free memory
 * now (Prefetches into free memory, above). */
static bool spare_wanted(const mt_pager_t *p, bool handoff) {
  if (p->pf_free == 0 || !handoff) return false;
  return p->nv == NULL || p->live[CH_NVME] == 0 || p->host_used + p->chunk > p->host_budget;
}

void _mt_prefetch_launch(mt_pager_t *p, mt_handle_t s) {
  mt_prefetch_t *pf = p->pf;
  uint64_t id = pf->id;
  if (id == 0 || pf->depth == 0) return; /* no identity (out of memory), or no prefetching */
  pred_count(p, pf->ops->observe(pf->pred, id, pf->regs, pf->nregs));
  if (_mt_capture_active(p)) return; /* no waits, queries or mapping changes now */
  size_t np = pf->ops->predict(pf->pred, pf->out, pf->walk);
  /* 1. the window: the regions the predicted launches use, each looked up
   * once (launches predicted again, and the current one, whose regions are
   * resident, are skipped), marked so that no eviction made for them
   * takes one of them. Nearest launch first. */
  mt_region_t *win[WINDOW_MAX];
  bool spare[WINDOW_MAX]; /* beyond the depth for free memory only (Prefetches into free memory) */
  size_t nwin = 0, lack = 0, fresh = 0;
  const bool handoff = _mt_handoff_on(p), spare_ok = spare_wanted(p, handoff);
  const unsigned spare_reach = free_reach(p, p->nv != NULL && p->live[CH_NVME] > 0);
  for (size_t j = 0; j < np && pf->out[j].confidence >= MIN_CONFIDENCE; j++) {
    bool seen = pf->out[j].id == id;
    for (size_t k = 0; k < j && !seen; k++) seen = pf->out[k].id == pf->out[j].id;
    for (uint32_t k = 0; k < pf->out[j].nkeys && !seen && nwin < WINDOW_MAX; k++) {
      kslot_t *ks = map_find(pf, pf->out[j].keys[k]);
      mt_region_t *r = ks ? ks->r : NULL;
      if (ks != NULL && (r == NULL || r->freed) && !handoff && j < pf->depth && ks->fresh_epoch != p->epoch) {
        fresh += ks->size; /* allocated anew: once, however many launches use it */
        ks->fresh_epoch = p->epoch;
      }
      if (r == NULL || r->freed || r->epoch == p->epoch) continue; /* unknown, dead, or already in */
      /* beyond the depth: regions whose lead reaches this far, and within
       * MT_PREFETCH_FREE the rest, for free memory only */
      bool led = j < pf->depth || _mt_lead_get(pf->lead, r->key) >= j - pf->depth + 1;
      if (!led && (!spare_ok || j >= pf->depth + spare_reach)) continue;
      r->epoch = p->epoch;
      spare[nwin] = !led;
      win[nwin++] = r;
      if (r->kind != REG_SMALL && led) lack += (size_t)(r->nchunks - r->ndevice) * p->chunk;
    }
  }
  /* What the evictions of the next launches copied one period ago, where
   * that period is recorded (write-behind's schedule, below). */
  size_t want = 0;
  uint64_t first = 0;
  const uint64_t period = pf->demand != NULL ? _mt_reuse_period(pf->reuse) : 0;
  const unsigned h = period > 0 && p->wb_horizon >= period ? (unsigned)(period - 1) : p->wb_horizon;
  const bool sched = pf->demand != NULL && _mt_demand_window(pf->demand, p->clock, period, h, &want, &first);
  /* Under memory pressure, a checkpoint after this launch: the room
   * below and the write-behind depend on which holds have ended, and an
   * exact answer needs an event behind each launch (one driver call, so
   * only when the window lacks something, or evictions are due). */
  if (lack + fresh + want > 0) _mt_stream_mark(p, _mt_stream_index(p, s));
  /* 2-3. room without waiting, then the fetches, until room runs out */
  for (size_t i = 0; i < nwin; i++) {
    mt_region_t *r = win[i];
    if (r->kind == REG_SMALL || r->escaped || r->hostuse || r->ndevice == r->nchunks) continue;
    if (!prefetch_region(p, r, s, spare[i])) break;
  }
  /* Write-behind, after the prefetch: dirty chunks copied out now, on the
   * d2h link, so that the evictions that take them later copy nothing.
   * How many:
   *  - With a schedule (a period recorded; predictor/demand.h): the
   *    chunks the evictions of the next MT_WRITEBEHIND_HORIZON launches
   *    copied one period ago, less the stock (copies made and not used
   *    yet). Those evictions make room for regions not allocated yet (a
   *    forward pass's activations), which no window of regions shows, and
   *    their copies must start well before: the link carries one launch's
   *    demand in several launches' time. BERT with the handoff on: 95.97
   *    -> 100% of ideal, bytes 1.14 -> 1.01x the Belady bound (README,
   *    "Write-behind on a schedule").
   *  - Else (the first period): the window's lack, as many bytes as the
   *    predicted launches lack on the GPU. Not more: a write-behind copy
   *    sits in the d2h queue ahead of the eviction copies a demand miss
   *    waits for, and one whose chunk is written again was wasted (twice
   *    the lack measured 8% slower than demand paging on a link-bound
   *    synth trace). With the handoff off the lack counts the regions the
   *    predicted launches will allocate anew: their room comes from
   *    evictions as much as a fetch's does (ViT 83.27 -> 86.50%,
   *    tests/replay/test_freshroom_pager.c); with it on, freed memory
   *    goes to them in stream order. */
  size_t ask = lack + fresh;
  if (sched) {
    _mt_wb_poll(p); /* the copies done are stock that is clean now */
    ask = want > p->wb_stock ? (want - p->wb_stock) * p->chunk : 0;
  }
  if (ask > 0) _mt_write_behind(p, ask < p->budget / 4 ? ask : p->budget / 4, first);
  /* NVMe -> host further ahead, so that the fetches above find host copies */
  _mt_ra_launch(p, pf->ops, pf->pred, id);
}

void _mt_prefetch_evicting(mt_pager_t *p) {
  if (p->pf != NULL && p->pf->demand != NULL) (void)_mt_demand_record(p->pf->demand, p->clock, 1);
}

size_t _mt_prefetch_keys(const mt_pager_t *p) {
  return p->pf != NULL ? p->pf->cap : 0;
}

mt_region_t *_mt_prefetch_region(mt_pager_t *p, uint64_t key) {
  kslot_t *k = p->pf != NULL && key != 0 ? map_find(p->pf, key) : NULL;
  return k != NULL ? k->r : NULL;
}
