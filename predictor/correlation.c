/*
 * correlation.c - a second-order correlation predictor ("correlation"),
 * and the same with a context for recomputed runs ("context").
 *
 * Training repeats itself, so the launch that follows (previous, current)
 * is almost always the one that followed it last iteration. One hash table
 * holds two kinds of entry, 32 bytes each:
 *  - pair entries, keyed by hash(previous, current): the successors seen
 *    after that pair (second order, what the walk uses first);
 *  - launch entries, keyed by hash(current): the successors seen after
 *    that launch alone (the first-order fallback, for a pair never seen,
 *    e.g. right after a divergence) and where its last footprint lives.
 * Each entry keeps MT_CORR_SUCC (2) successors with small counts, most
 * frequent first.
 *
 * Relearning rule (recency-weighted counts): when a key is followed by s,
 * s's count rises by one (saturating at CNT_MAX, 7) and every other
 * successor's count falls by one; a successor at count 0 is replaced by the
 * next newcomer. So a successor that held for any number of iterations is
 * overtaken after at most 4 observations of its replacement (after k of
 * them the old count is at least 7 - k, the new one k): a changed pattern is relearned within 4 iterations, while a
 * one-off detour (an eval pass) costs the usual successor one count only.
 *
 * Confidence: one step's probability is its successor's share of the
 * key's counts, cnt[0] / (cnt[0] + cnt[1]); a first-order step (the pair
 * was unknown) is worth half of that, because a first-order guess ignores
 * context. A predicted launch's confidence is the product of the steps that
 * lead to it, so it never rises along a walk.
 *
 * Memory: capacity entries (a power of two) of 32 bytes, a ring of
 * footprint_regions * 16 bytes where footprints are appended when they
 * change, and the door (capacity / 2 slots of 2 bytes: Loops too long);
 * max_bytes (MT_PREDICTOR_MEM) splits a bound between them (size_for). A
 * stream of L distinct launches per iteration needs about 2L entries (one
 * launch entry, one pair entry each): 1,000,000 launches per iteration
 * fit in 2^21 entries = 64 MiB of table, but ~95% full, so the clock
 * evicts steadily (bench_predictor 6 1000000 2097152: hit rate 0.79
 * against 0.83 with 2^22 entries). Footprints come on top: (n + 1) * 16
 * bytes per launch of n regions, ~112 MB for a million launches of six
 * regions: 512M names such a loop in full. Lookups probe at most
 * PROBE (8) slots from the key's home; an insert that finds no free slot
 * there evicts with a clock: the first probed entry whose reference bit is
 * clear (each probed entry's bit is cleared on the way), so entries used
 * since the hand last passed survive. Nothing is ever deleted, only
 * replaced in place, so linear probing needs no tombstones.
 *
 * Loops too long. A loop of more launches than the table holds would, with
 * the clock alone, evict each entry before its launch came round again
 * (recency is no guide in a loop: every entry is as recent as the next
 * once a lap) and be predicted not at all (0.1% of a million-launch loop
 * in 64 MiB). So a window of `capacity` launches with more full
 * neighbourhoods than one for every eight launches turns the table to
 * overflowing for the next window, and clears every entry's reference
 * bit (from then on it means: used in this window). There a key takes the
 * place of the lowest-ranked entry of its PROBE slots not used in the
 * window, and only if it ranks higher; else it is refused (no entry; its
 * launch goes unpredicted). So the table settles on a fixed share of the
 * loop, the highest-ranked, and predicts that share every lap (34-42% of
 * that loop in 64 MiB). A rank (rank_of, 7 bits kept above the reference
 * bit) belongs to the launch whose successor an entry predicts: the pair
 * entry (prev, cur) and the launch entry of cur's successor, which holds
 * that successor's footprint, share cur's rank, so what is kept is kept
 * with its footprint. A refused key leaves a tag at the door (a 16-bit
 * slot for every two entries: 8 bits of the key, 8 of the time) that no
 * other key overwrites for half a window; refused again while it holds
 * (a short loop that came after a long one, whose keys rank low and whose
 * table is full of stale entries) it is let in, into an entry not used in
 * the window. A refused launch entry is not asked for again as the
 * previous launch's at the next observation (its own tag would let it
 * in). Footprints are kept only for launches with an entry. A window that
 * found room again turns the table back to the clock.
 *
 * Footprint ring: a footprint of n regions is a header slot {launch id, n}
 * followed by n region slots, contiguous (a footprint that would wrap round
 * the end starts over at the beginning). A launch entry remembers the header's
 * position (32-bit, wrapping); it is valid while the header still names the
 * launch and fewer than ring-size slots were appended since. An evicted or
 * overwritten footprint reads as unknown, never as someone else's.
 *
 * Context (a third kind of entry; MT_PREDICTOR=context only). A pair is
 * not always enough: with activation checkpointing a layer's forward runs
 * twice with the same launches (same function, same weights, same keys),
 * and the pair that ends it is followed by the next layer's forward in the
 * first pass and by the layer's own backward in the recomputation; the
 * recency rule then predicts the other branch every time (95.8% of
 * launches predicted on a checkpointed 100B synth trace, 100% without
 * checkpointing). The two
 * streams differ in how they entered the shared run: the launch before its
 * first one. So the predictor finds merge points -- launches seen after
 * more than one predecessor (a launch entry's `pad` keeps a 7-bit
 * fingerprint of its predecessor and a bit set once another came) -- and
 * carries a context: a hash of the last merge point passed and its
 * predecessor's fingerprint, in the observed stream and along every walk.
 * A pair whose best successor ever changed is branchy (a bit in its pad):
 * the walk then asks a context entry, keyed by hash(previous, current,
 * context), first. The change that makes a pair branchy learns both
 * branches at once: the old best successor under the context the last
 * merge point had with its first predecessor (kept in its entry), so the
 * next iteration is predicted in full. Context entries exist for branchy
 * pairs only: a stream without such branches costs nothing more.
 * It is not the default: predicted right, the read-ahead's window goes
 * as deep as asked through the recomputed layers, and where host memory
 * cannot hold it that costs more than the misses did (docs/predictor.md:
 * the 100B candidate at 256 GiB of host memory, and SENet154); `mt-trace
 * plan` replays its winner with it.
 *
 * Divergence: the walk always starts from the last two observed launches,
 * so when the stream departs from the prediction the next predict() walks
 * from what was observed; observe() says whether it was the expected one.
 *
 * Threading: none; the caller serialises.
 */
#include <stdlib.h>
#include <string.h>

#include "predictor.h"
#include "mix.h"

#define MT_CORR_SUCC 2
#define PAD_PRED 0x7f   /* launch entries: predecessor fingerprint, 1..127; 0 = none yet */
#define PAD_MERGE 0x80  /* launch entries: a second predecessor was seen */
#define PAD_BRANCHY 0x01 /* pair entries: the best successor changed once */
#define REF_USED 0x01
#define DOOR_TICKS 8    /* a tag at the door holds for this many 16ths of a window */
#define CNT_MAX 7
#define PROBE 8
#define DEFAULT_CAPACITY 65536

typedef struct entry {
  uint64_t key;                  /* 0 = empty slot */
  uint64_t succ[MT_CORR_SUCC];   /* successor launch ids, most frequent first */
  uint8_t cnt[MT_CORR_SUCC];     /* recency-weighted counts, 0..CNT_MAX */
  uint8_t ref;                   /* REF_USED: the clock's reference bit; above it, the
                                    entry's rank (Loops too long) */
  uint8_t pad;                   /* PAD_* flags, by entry kind */
  uint32_t fp;                   /* launch entries: footprint header position;
                                    pair entries: the context of the last learn */
} entry_t;

_Static_assert(sizeof(entry_t) == 32, "an entry is documented as 32 bytes");

/* The walk from (prev, cur) as last computed: steps [start, start + n) of a
   ring. The walk is a function of the table and (prev, cur) only, so while
   nothing in the table changed (epoch) and the observed launch was the
   walk's first step, the rest of it is still the walk from the new state:
   predict() then extends it by a step or two instead of redoing eight. */
#define WALK 64
typedef struct walk {
  uint64_t id[WALK];
  double prob[WALK];   /* that step's probability */
  const mt_pred_region_t *fp[WALK]; /* its footprint (ring), NULL if unknown */
  uint32_t fpn[WALK];  /* regions in fp */
  uint32_t ctx[WALK];  /* the context with that step as the current launch */
  uint32_t start, n;
  bool ended;          /* the walk cannot go past its last step */
  bool valid;
  uint64_t epoch;
} walk_t;

struct mt_predictor {
  entry_t *tab;
  size_t mask;            /* capacity - 1 */
  mt_pred_region_t *ring; /* footprint ring */
  uint32_t ring_mask;     /* ring slots - 1 */
  uint32_t ring_head;     /* next slot to write, wrapping */
  uint64_t prev, cur;     /* last two observed launches; 0 = none yet */
  uint32_t ctx;           /* the context at cur (see Context); 0 = none yet */
  uint64_t merge;         /* the last merge point observed (ctx's), 0 = none */
  bool context;           /* "context": merge points, contexts, branchy pairs */
  size_t cur_slot;        /* cur's launch entry, if tab[cur_slot] still holds it; SIZE_MAX:
                             none, or refused (Loops too long: not asked again at once) */
  uint64_t expected;      /* the walk's first step from (prev, cur), if has_expected */
  bool has_expected;
  uint64_t epoch;         /* bumped by every change a walk could see */
  walk_t walk;            /* the last walk, reused while epoch holds */
  mt_predictor_stats_t st;
  uint64_t win_obs, win_full; /* this window's observations, and inserts that found no room */
  uint16_t *door;         /* keys refused while overflowing, and when (Loops too long) */
  size_t door_mask;
  bool overflow;          /* the last window overflowed (Loops too long) */
};

static inline uint64_t nonzero(uint64_t k) {
  return k ? k : 1;
}

static inline uint64_t launch_key(uint64_t id) {
  return nonzero(_mt_mix64(id ^ 0x6c61756e6368ULL));
}

static inline uint64_t pair_key(uint64_t prev, uint64_t cur) {
  return nonzero(_mt_mix64(prev * 0x9e3779b97f4a7c15ULL ^ _mt_mix64(cur)));
}

static inline uint64_t ctx_key(uint64_t prev, uint64_t cur, uint32_t ctx) {
  return nonzero(_mt_mix64(pair_key(prev, cur) ^ ((uint64_t)ctx << 32 | 0x637478u)));
}

/* pred's fingerprint as a predecessor, 1..PAD_PRED */
static inline uint8_t pred_print(uint64_t pred) {
  return (uint8_t)(1 + _mt_mix64(pred ^ 0x70726564ULL) % PAD_PRED);
}

/* The context that merge point m, reached from a predecessor with
   fingerprint f, starts. */
static inline uint32_t ctx_of(uint64_t m, uint8_t f) {
  return (uint32_t)(_mt_mix64(m ^ (uint64_t)f << 56 ^ 0x6d65726765ULL) >> 32) | 1u;
}

/* The context after stepping from cur to next, whose entry is slot i. */
static inline uint32_t ctx_next(const mt_predictor_t *p, size_t i, uint64_t cur, uint64_t next, uint32_t ctx) {
  return i != SIZE_MAX && (p->tab[i].pad & PAD_MERGE) ? ctx_of(next, pred_print(cur)) : ctx;
}

static size_t pow2_at_least(size_t n) {
  size_t p = 1;
  while (p < n) p <<= 1;
  return p;
}

/* The slot holding key, or SIZE_MAX. */
static size_t find(const mt_predictor_t *p, uint64_t key) {
  size_t i = (size_t)key & p->mask;
  for (int k = 0; k < PROBE; k++, i = (i + 1) & p->mask) {
    if (p->tab[i].key == key) return i;
    if (p->tab[i].key == 0) return SIZE_MAX;
  }
  return SIZE_MAX;
}

/* The rank, for a place in an overflowing table, of the entries that
   predict the launch after `id` (Loops too long), 0..127. */
static inline uint8_t rank_of(uint64_t id) {
  return (uint8_t)(_mt_mix64(id ^ 0x72616e6bULL) >> 57);
}

static inline uint8_t rank(const entry_t *e) {
  return (uint8_t)(e->ref >> 1);
}

/* The slot holding key, inserting it (empty successors) with the rank of
   the launch `of` (rank_of: computed only then) if absent; may evict, or,
   while the table overflows, refuse (SIZE_MAX). */
static size_t find_or_insert(mt_predictor_t *p, uint64_t key, uint64_t of) {
  size_t home = (size_t)key & p->mask, i = home;
  for (int k = 0; k < PROBE; k++, i = (i + 1) & p->mask) {
    if (p->tab[i].key == key) {
      p->tab[i].ref |= REF_USED;
      return i;
    }
    if (p->tab[i].key == 0) goto claim;
  }
  p->win_full++;
  if (p->overflow) {
    /* Loops too long: the lowest-ranked entry of the PROBE slots not used
       in this window goes, for a key ranked higher, or for one refused not
       long ago (its tag still at the door: a short loop after a long one). */
    size_t low = SIZE_MAX;
    for (int k = 0; k < PROBE; k++) {
      size_t j = (home + (size_t)k) & p->mask;
      if (!(p->tab[j].ref & REF_USED) && (low == SIZE_MAX || rank(&p->tab[j]) < rank(&p->tab[low]))) low = j;
    }
    uint16_t *d = &p->door[(size_t)(key >> 24) & p->door_mask];
    const uint8_t now = (uint8_t)(p->st.observed / (p->mask / 16 + 1)), kb = (uint8_t)(key >> 56);
    const bool recent = (uint8_t)(now - (uint8_t)*d) < DOOR_TICKS, known = recent && (*d >> 8) == kb;
    if (low == SIZE_MAX || (rank_of(of) <= rank(&p->tab[low]) && !known)) {
      if (!recent) *d = (uint16_t)(kb << 8 | now); /* a recent tag stays: its key comes first */
      p->st.refused++;
      return SIZE_MAX;
    }
    if (known) *d = (uint8_t)(now - DOOR_TICKS); /* used: expired */
    i = low;
  } else {
    /* A clock over the PROBE slots. Two passes at most: the first clears
       every bit it passes. */
    i = home;
    for (int k = 0; k < 2 * PROBE; k++, i = (i + 1) & p->mask) {
      if (k == PROBE) i = home;
      if (!(p->tab[i].ref & REF_USED)) break;
      p->tab[i].ref &= (uint8_t)~REF_USED;
    }
  }
  p->st.evictions++;
  p->epoch++;
claim:
  p->tab[i] = (entry_t){.key = key, .ref = (uint8_t)(REF_USED | rank_of(of) << 1), .fp = p->ring_head - p->ring_mask - 2}; /* no footprint */
  return i;
}

/* Whether e's best successor or its probability (cnt[0] / (cnt[0] + cnt[1]),
   compared exactly) differs from what (s0, c0, c1) gave. */
static inline bool walk_visible(const entry_t *e, uint64_t s0, uint8_t c0, uint8_t c1) {
  unsigned n0 = e->cnt[0], n1 = e->cnt[1];
  if ((c0 == 0) != (n0 == 0)) return true;
  if (n0 == 0) return false; /* no successor before or after */
  return e->succ[0] != s0 || (unsigned)c0 * (n0 + n1) != n0 * ((unsigned)c0 + c1);
}

/* Records that e was followed by next (the relearning rule above); returns
   whether a walk could tell: its best successor or that one's probability
   changed (a count rising from 2 to 3 with no rival changes neither, so a
   warming table does not keep invalidating the cached walk). */
static bool learn(entry_t *e, uint64_t next) {
  uint8_t c0 = e->cnt[0], c1 = e->cnt[1];
  uint64_t s0 = e->succ[0];
  int hit = -1;
  for (int j = 0; j < MT_CORR_SUCC; j++) {
    if (e->cnt[j] && e->succ[j] == next) hit = j;
    else if (e->cnt[j]) e->cnt[j]--;
  }
  if (hit < 0) {
    /* Replace the weakest slot if it has died out. */
    int w = e->cnt[0] <= e->cnt[1] ? 0 : 1;
    if (e->cnt[w] != 0) return walk_visible(e, s0, c0, c1);
    e->succ[w] = next;
    e->cnt[w] = 1;
    hit = w;
  } else if (e->cnt[hit] < CNT_MAX) {
    e->cnt[hit]++;
  }
  if (hit == 1 && e->cnt[1] > e->cnt[0]) {
    uint64_t s = e->succ[0];
    uint8_t c = e->cnt[0];
    e->succ[0] = e->succ[1], e->cnt[0] = e->cnt[1];
    e->succ[1] = s, e->cnt[1] = c;
  }
  return walk_visible(e, s0, c0, c1);
}

/* The best successor of slot i and its step probability; false when none. */
static bool best(const mt_predictor_t *p, size_t i, uint64_t *next, double *prob) {
  if (i == SIZE_MAX) return false;
  const entry_t *e = &p->tab[i];
  if (e->cnt[0] == 0) return false;
  *next = e->succ[0];
  *prob = (double)e->cnt[0] / (double)(e->cnt[0] + e->cnt[1]);
  return true;
}

/* One step of the walk from (prev, cur) in context ctx: the next launch and
   its probability. */
static bool step(const mt_predictor_t *p, uint64_t prev, uint64_t cur, uint32_t ctx, uint64_t *next,
                 double *prob) {
  size_t i = find(p, pair_key(prev, cur));
  if (i != SIZE_MAX && (p->tab[i].pad & PAD_BRANCHY) && best(p, find(p, ctx_key(prev, cur, ctx)), next, prob))
    return true;
  if (best(p, i, next, prob)) return true;
  if (best(p, find(p, launch_key(cur)), next, prob)) {
    *prob *= 0.5;
    return true;
  }
  return false;
}

/* Whether launch entry i holds a live footprint for id; its length in *len. */
static bool fp_valid(const mt_predictor_t *p, size_t i, uint64_t id, uint32_t *len) {
  if (i == SIZE_MAX) return false;
  uint32_t pos = p->tab[i].fp, dist = p->ring_head - pos;
  const mt_pred_region_t *h = &p->ring[pos & p->ring_mask];
  /* the header names id, and neither it nor its regions were overwritten */
  if (h->key != id || h->bytes >= dist || dist > p->ring_mask + 1u) return false;
  *len = (uint32_t)h->bytes;
  return true;
}

/* The footprint stored for launch entry i (id), or NULL with *n = 0. */
static const mt_pred_region_t *footprint(const mt_predictor_t *p, size_t i, uint64_t id, uint32_t *n) {
  uint32_t len;
  *n = 0;
  if (!fp_valid(p, i, id, &len) || len == 0) return NULL;
  *n = len;
  return &p->ring[(p->tab[i].fp + 1) & p->ring_mask];
}

static bool same_footprint(const mt_predictor_t *p, uint32_t pos, const mt_pred_region_t *r, size_t n) {
  for (size_t k = 0; k < n; k++) {
    const mt_pred_region_t *s = &p->ring[(pos + 1 + (uint32_t)k) & p->ring_mask];
    if (s->key != r[k].key || s->bytes != r[k].bytes) return false;
  }
  return true;
}

/* Appends id's footprint to the ring unless the stored one is the same. */
static void store_footprint(mt_predictor_t *p, size_t i, uint64_t id, const mt_pred_region_t *r, size_t n) {
  uint32_t have;
  if (fp_valid(p, i, id, &have) && have == n && same_footprint(p, p->tab[i].fp, r, n)) return;
  if (n + 1 > (size_t)p->ring_mask / 2) return; /* too big to keep: reads as unknown */
  uint32_t pos = p->ring_head, off = pos & p->ring_mask;
  /* a footprint is handed out as one array: never wrap it round the end */
  if (off + n + 1 > (size_t)p->ring_mask + 1) pos += p->ring_mask + 1 - off;
  p->ring[pos & p->ring_mask] = (mt_pred_region_t){.key = id, .bytes = n};
  for (size_t k = 0; k < n; k++) p->ring[(pos + 1 + (uint32_t)k) & p->ring_mask] = r[k];
  p->ring_head = pos + 1 + (uint32_t)n;
  p->tab[i].fp = pos;
  p->epoch++; /* cached footprint pointers may now be overwritten */
}

/* Extends the cached walk w to at least want steps (or until it ends);
   returns whether it has one step at least. */
static bool extend(const mt_predictor_t *p, walk_t *w, uint32_t want) {
  while (w->n < want && !w->ended) {
    uint64_t prev, cur, next;
    uint32_t ctx = w->n >= 1 ? w->ctx[(w->start + w->n - 1) % WALK] : p->ctx;
    double prob;
    if (w->n >= 2) {
      prev = w->id[(w->start + w->n - 2) % WALK], cur = w->id[(w->start + w->n - 1) % WALK];
    } else if (w->n == 1) {
      prev = p->cur, cur = w->id[w->start % WALK];
    } else {
      prev = p->prev, cur = p->cur;
    }
    if (!step(p, prev, cur, ctx, &next, &prob)) {
      w->ended = true;
      break;
    }
    uint32_t j = (w->start + w->n) % WALK;
    size_t li = find(p, launch_key(next));
    w->id[j] = next, w->prob[j] = prob;
    w->fp[j] = footprint(p, li, next, &w->fpn[j]);
    w->ctx[j] = ctx_next(p, li, cur, next, ctx);
    w->n++;
  }
  return w->n > 0;
}

/* The door's slots for a table of cap entries: one for every two. */
static size_t door_slots(size_t cap) {
  return cap / 2 > 16 ? cap / 2 : 16;
}

static size_t pow2_at_most(size_t n) {
  size_t p = 1;
  while (p <= n / 2) p <<= 1;
  return p;
}

/* A memory bound: a third to the table (two entries a launch), its door
   (a 32nd of the table's bytes), the rest to the footprints (a launch of
   six regions takes seven slots), each the largest power of two that
   fits. 32 MiB: 262,144 entries (8 MiB), 256 KiB of door and 1,048,576
   region slots (16 MiB), room for some 100,000 launches an iteration. */
static void size_for(size_t bytes, size_t *cap, size_t *rs) {
  if (bytes < MT_PREDICTOR_MEM_MIN) bytes = MT_PREDICTOR_MEM_MIN;
  bytes -= sizeof(mt_predictor_t);
  *cap = pow2_at_most(bytes / 3 / sizeof(entry_t));
  *rs = pow2_at_most((bytes - *cap * sizeof(entry_t) - door_slots(*cap) * sizeof(uint16_t)) /
                     sizeof(mt_pred_region_t));
}

static mt_predictor_t *create(const mt_predictor_config_t *cfg, bool context) {
  size_t cap, rs;
  if (cfg && cfg->max_bytes) {
    size_for(cfg->max_bytes, &cap, &rs);
  } else {
    cap = cfg && cfg->capacity ? cfg->capacity : DEFAULT_CAPACITY;
    cap = pow2_at_least(cap < PROBE ? PROBE : cap);
    rs = cfg && cfg->footprint_regions ? cfg->footprint_regions : 4 * cap;
    rs = pow2_at_least(rs < 64 ? 64 : rs);
  }
  if (rs > ((size_t)1 << 31)) rs = (size_t)1 << 31;
  mt_predictor_t *p = calloc(1, sizeof(*p));
  if (p == NULL) return NULL;
  p->tab = calloc(cap, sizeof(entry_t));
  p->ring = calloc(rs, sizeof(mt_pred_region_t));
  p->door = calloc(door_slots(cap), sizeof(uint16_t));
  if (p->tab == NULL || p->ring == NULL || p->door == NULL) {
    free(p->tab);
    free(p->ring);
    free(p->door);
    free(p);
    return NULL;
  }
  p->mask = cap - 1;
  p->door_mask = door_slots(cap) - 1;
  p->ring_mask = (uint32_t)(rs - 1);
  p->cur_slot = SIZE_MAX;
  p->context = context;
  p->st.table_bytes = sizeof(*p) + cap * sizeof(entry_t) + rs * sizeof(mt_pred_region_t) +
                      door_slots(cap) * sizeof(uint16_t);
  return p;
}

static mt_predictor_t *corr_create(const mt_predictor_config_t *cfg) {
  return create(cfg, false);
}

static mt_predictor_t *ctx_create(const mt_predictor_config_t *cfg) {
  return create(cfg, true);
}

static void corr_destroy(mt_predictor_t *p) {
  if (p == NULL) return;
  free(p->tab);
  free(p->ring);
  free(p->door);
  free(p);
}

/* Slot i (SIZE_MAX: none, no room) learns that next followed. */
static void learn_at(mt_predictor_t *p, size_t i, uint64_t next) {
  if (i != SIZE_MAX) p->epoch += learn(&p->tab[i], next);
}

/* (prev, cur) was followed by id: the pair entry learns it and, once
   branchy, so does the context entry (Context above). */
static void learn_pair(mt_predictor_t *p, uint64_t id) {
  size_t i = find_or_insert(p, pair_key(p->prev, p->cur), p->cur); /* it predicts the launch after cur */
  if (i == SIZE_MAX) return; /* no room (Loops too long) */
  entry_t *e = &p->tab[i];
  uint64_t top = e->succ[0];
  uint32_t top_ctx = e->fp; /* the context of its last learn */
  bool had = e->cnt[0] > 0;
  p->epoch += learn(e, id);
  if (!p->context) return;
  e->fp = p->ctx;
  bool first = had && top != id && !(e->pad & PAD_BRANCHY);
  if (first) {
    e->pad |= PAD_BRANCHY;
    p->epoch++;
  }
  if (!(e->pad & PAD_BRANCHY)) return;
  if (first && p->merge != 0) {
    /* The old branch came, most likely, from the merge point's first
       predecessor: the context it has from there from now on. */
    size_t m = find(p, launch_key(p->merge));
    if (m != SIZE_MAX && (p->tab[m].pad & PAD_PRED) != 0) {
      uint32_t c = ctx_of(p->merge, p->tab[m].pad & PAD_PRED);
      if (c != p->ctx) top_ctx = c;
    }
  }
  /* the inserts below may evict e itself: it is not touched again */
  if (first && top_ctx != p->ctx) learn_at(p, find_or_insert(p, ctx_key(p->prev, p->cur, top_ctx), p->cur), top);
  learn_at(p, find_or_insert(p, ctx_key(p->prev, p->cur, p->ctx), p->cur), id);
}

static bool corr_observe(mt_predictor_t *p, uint64_t id, const mt_pred_region_t *r, size_t n) {
  bool hit = p->has_expected && p->expected == id;
  p->st.observed++;
  if (++p->win_obs > p->mask) { /* a window of `capacity` launches: did it overflow? */
    p->overflow = p->win_full * 8 > p->win_obs;
    p->win_obs = p->win_full = 0;
    if (p->overflow) /* from now on, used means used in this window */
      for (size_t j = 0; j <= p->mask; j++) p->tab[j].ref &= (uint8_t)~REF_USED;
  }
  p->st.predicted += hit;
  if (p->st.observed > 1) {
    /* first order: cur -> id; the cached slot may have been evicted since */
    uint64_t ck = launch_key(p->cur);
    size_t cs = p->cur_slot == SIZE_MAX            ? SIZE_MAX
                : p->tab[p->cur_slot].key == ck ? p->cur_slot
                                                : find_or_insert(p, ck, p->prev);
    learn_at(p, cs, id);
  }
  if (p->st.observed > 2) learn_pair(p, id);
  /* its footprint is wanted where the launch before it is predicted from:
     the same rank as that launch's pair entry */
  size_t s = find_or_insert(p, launch_key(id), p->cur);
  if (s != SIZE_MAX) store_footprint(p, s, id, r, n);
  if (p->context && p->st.observed > 1 && s != SIZE_MAX) { /* a merge point: the context is who led here */
    entry_t *e = &p->tab[s];
    uint8_t f = pred_print(p->cur);
    if ((e->pad & PAD_PRED) == 0) e->pad |= f;
    else if ((e->pad & PAD_PRED) != f && !(e->pad & PAD_MERGE)) e->pad |= PAD_MERGE, p->epoch++;
    if (e->pad & PAD_MERGE) p->ctx = ctx_of(id, f), p->merge = id;
  }
  p->prev = p->cur;
  p->cur = id;
  p->cur_slot = s;
  walk_t *w = &p->walk;
  if (w->valid && w->epoch == p->epoch && w->n > 0 && w->id[w->start % WALK] == id) {
    w->start++, w->n--; /* the rest of the walk is the walk from here */
  } else {
    *w = (walk_t){.valid = true, .epoch = p->epoch};
  }
  p->has_expected = extend(p, w, 1);
  if (p->has_expected) p->expected = w->id[w->start % WALK];
  return hit;
}

static size_t corr_predict(mt_predictor_t *p, mt_pred_launch_t *out, size_t max) {
  if (p->st.observed == 0) return 0;
  walk_t *w = &p->walk;
  if (!w->valid || w->epoch != p->epoch) *w = (walk_t){.valid = true, .epoch = p->epoch};
  size_t k = 0;
  double conf = 1.0;
  if (max <= WALK) {
    extend(p, w, (uint32_t)max);
    for (; k < max && k < w->n; k++) {
      uint32_t j = (w->start + (uint32_t)k) % WALK;
      conf *= w->prob[j];
      out[k].id = w->id[j];
      out[k].confidence = conf;
      out[k].regions = w->fp[j];
      out[k].nregions = w->fpn[j];
    }
    return k;
  }
  uint64_t prev = p->prev, cur = p->cur, next;
  uint32_t ctx = p->ctx;
  double prob;
  while (k < max && step(p, prev, cur, ctx, &next, &prob)) {
    size_t li = find(p, launch_key(next));
    conf *= prob;
    out[k].id = next;
    out[k].confidence = conf;
    out[k].regions = footprint(p, li, next, &out[k].nregions);
    ctx = ctx_next(p, li, cur, next, ctx);
    prev = cur, cur = next;
    k++;
  }
  return k;
}

static void corr_stats(const mt_predictor_t *p, mt_predictor_stats_t *out) {
  *out = p->st;
}

const mt_predictor_ops_t _mt_predictor_correlation = {
  .name = "correlation",
  .create = corr_create,
  .destroy = corr_destroy,
  .observe = corr_observe,
  .predict = corr_predict,
  .stats = corr_stats,
};

const mt_predictor_ops_t _mt_predictor_context = {
  .name = "context",
  .create = ctx_create,
  .destroy = corr_destroy,
  .observe = corr_observe,
  .predict = corr_predict,
  .stats = corr_stats,
};
