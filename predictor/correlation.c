/*
 * correlation.c - a second-order correlation predictor ("correlation"),
 * and the same with a context for recomputed runs ("context").
 *
 * Training repeats itself, so the launch that follows (previous, current)
 * is almost always the one that followed it last iteration. One hash table
 * holds two kinds of entry, 32 bytes each:
 *  - launch entries, keyed by hash(current): the successors seen after
 *    that launch, and where its last footprint lives;
 *  - pair entries, keyed by hash(previous, current): the successors seen
 *    after that pair (second order). A launch entry that has seen a
 *    second successor is a fork, and only a fork's pairs get entries: a
 *    launch always followed by the same one needs no context to be
 *    predicted, and in a training step almost every launch is such (its
 *    identity names its regions). Pairs for every launch doubled the table
 *    for nothing on the G10 and synth traces (until the nineteenth
 *    session: two entries a launch; now one and a little).
 * Each entry keeps two successors with small counts, most frequent first:
 * the best one's launch id, and the rival's 32-bit fingerprint (the rival
 * is only ever promoted by an observation of it, which brings its id).
 *
 * Forks. Pairs are keyed by a 15-bit print of the previous launch, not its
 * id, and a launch entry keeps the print of the launch before it when it
 * last learned. So when a launch turns out a fork, the pair its earlier
 * successor came after is known too, and starts with what the launch
 * entry knew (as if pairs had been kept for it all along): a fork of two
 * branches is predicted in full from the next iteration, and a one-off
 * detour costs its pair one count, as it costs a launch entry. Two
 * predecessors of one fork with one print share a pair (a misprediction
 * at worst: 1 in 32,767 pairs of them).
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
 * entry's counts, cnt[0] / (cnt[0] + cnt[1]); at a fork whose pair is
 * unknown (never seen, or right after a divergence) the launch entry's
 * guess is worth half of that, because it ignores context. A predicted
 * launch's confidence is the product of the steps that lead to it, so it
 * never rises along a walk.
 *
 * Memory: capacity entries of 32 bytes, a ring of footprint_regions
 * region keys (8 bytes each) where footprints are appended when they
 * change, and the door (Loops too long). max_bytes (MT_PREDICTOR_MEM)
 * splits a bound between them (size_for): a stream of L distinct launches
 * an iteration of r paged regions each needs about L entries (a few more
 * at forks) and r L keys, 64 bytes a launch at the 2.4 regions a launch
 * of the 100B synth and the G10 traces: a million launches an iteration
 * are named in full in 64 MiB (docs/predictor.md, "A million launches in
 * 64 MiB"). Until
 * the nineteenth session (two entries a launch; 16 bytes a region, key
 * and size; a header a footprint; power-of-two tables) 34% of such a loop
 * was named there.
 *
 * Two buckets. The table is buckets of PROBE (8) entries, any number of
 * them (a key's bucket is a multiply-shift of its hash, so a bound is
 * used in full, not rounded down to a power of two). A key may live in
 * either of two buckets, from the two halves of its hash; a new one goes
 * to the emptier, which keeps them even: a million launches fill 74% of
 * the table in 64 MiB, and 3 of them find both buckets full (with linear
 * probing over 8 slots from one home: 7,411). A bucket fills from its
 * first slot and nothing is deleted, only replaced in place, so a lookup
 * stops at a bucket's first empty slot. An insert that finds both full
 * evicts with a clock over their 16 slots: the first whose reference bit
 * is clear (each passed entry's bit is cleared on the way), so entries
 * used since the hand last passed survive.
 *
 * Loops too long. A loop of more launches than the table holds would, with
 * the clock alone, evict each entry before its launch came round again
 * (recency is no guide in a loop: every entry is as recent as the next
 * once a lap) and be predicted not at all. So a window of `capacity`
 * launches with more full neighbourhoods than one for every eight
 * launches turns the table to overflowing for the next window, and clears
 * every entry's reference bit (from then on it means: used in this
 * window). There a key takes the place of the lowest-ranked entry of its
 * two buckets not used in the window, and only if it ranks higher; else
 * it is refused (no entry; its launch goes unpredicted). So the table
 * settles on a fixed share of the loop, the highest-ranked, and predicts
 * that share every lap (a million-launch loop in 32 MiB: 68% named from
 * the fourth lap). A rank (rank_of, 7 bits kept above the reference bit)
 * belongs to a run of launches: a run starts at each launch whose hash
 * says so (starts_run, one in 16, the same ones every lap), and an entry
 * has the rank of the run of the launch before the one whose successor it
 * predicts (cur's launch entry, which holds cur's successors and its
 * footprint, and the pair (prev, cur) have the rank of prev's run). So a
 * walk through a kept run finds each step and its footprint: 54% of that
 * loop is named with its footprint (the ring's share, Footprints too
 * many, is what bounds it). With a rank for each launch on its own, a
 * step and the footprint its successor's entry holds were kept apart:
 * 34-38%. A refused key leaves
 * a tag at the door (a 16-bit slot for about every two entries: 8 bits of
 * the key, 8 of the time) that no other key overwrites for half a window;
 * refused again while it holds (a short loop that came after a long one,
 * whose keys rank low and whose table is full of stale entries) it is let
 * in, into an entry not used in the window. A refused launch entry is not
 * asked for again as the previous launch's at the next observation (its
 * own tag would let it in). Footprints are kept only for launches with an
 * entry. A window that found room again turns the table back to the
 * clock.
 *
 * Footprint ring: a footprint of n regions is n keys, contiguous (one that
 * would wrap round the end starts over at the beginning). A launch entry
 * keeps its footprint's length and the low 32 bits of its position in
 * the ring's count of slots ever appended; it is valid while fewer than
 * ring-size slots were appended since. Every 2^30 slots appended, a sweep
 * forgets the positions that are no longer valid, so a stale one never
 * comes back into range when the 32 bits wrap. An evicted or overwritten
 * footprint reads as unknown, never as someone else's. A loop whose
 * footprints take more than the ring keeps a share of them whole
 * (fp_share, "Footprints too many"), not none.
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

#define PAD_PRED 0x7f   /* launch entries: predecessor fingerprint, 1..127; 0 = none yet */
#define PAD_MERGE 0x80  /* launch entries: a second predecessor was seen */
#define PAD_BRANCHY 0x01 /* pair entries: the best successor changed once */
#define LINK_FORK 0x01  /* launch entries: a second successor was seen (its pairs get entries) */
#define REF_USED 0x01
#define DOOR_TICKS 8    /* a tag at the door holds for this many 16ths of a window */
#define CNT_MAX 7
#define PROBE 8         /* entries a bucket; a key has two buckets (Two buckets) */
#define HOOD (2 * PROBE) /* a key's slots, both buckets */
#define DEFAULT_CAPACITY 65536
#define FP_MAX 65535    /* regions in a footprint kept, at most (fplen) */
#define SWEEP ((uint64_t)1 << 30) /* ring slots between sweeps of stale positions */
#define RING_MAX ((size_t)1 << 29) /* ring slots, at most: between sweeps a position moves
                                      by at most 2.5 RING_MAX + SWEEP < 2^32 slots */

typedef struct entry {
  uint64_t key;      /* 0 = empty slot */
  uint64_t succ;     /* the best successor's launch id (when cnt[0] > 0) */
  uint32_t rival;    /* the second successor's fingerprint (when cnt[1] > 0) */
  uint32_t fp;       /* launch entries: footprint position (low 32 bits);
                        pair entries: the context of the last learn */
  uint16_t fplen;    /* launch entries: regions in the footprint, 0 = none */
  uint8_t cnt[2];    /* recency-weighted counts of succ and rival, 0..CNT_MAX */
  uint8_t ref;       /* REF_USED: the clock's reference bit; above it, the
                        entry's rank (Loops too long) */
  uint8_t pad;       /* PAD_* flags, by entry kind */
  uint16_t link;     /* launch entries: LINK_FORK, and above it the predecessor's
                        print (prev_print) when the entry last learned */
} entry_t;

_Static_assert(sizeof(entry_t) == 32, "an entry is documented as 32 bytes");

/* The walk from (prev, cur) as last computed: steps [start, start + n) of a
   ring. The walk is a function of the table and (prev, cur) only, so while
   nothing in the table changed (epoch) and the observed launch was the
   walk's first step, the rest of it is still the walk from the new state:
   predict() then extends it by a step or two instead of redoing all of it.
   The ring grows to the deepest prediction asked (the NVMe read-ahead asks
   for MT_READAHEAD_DEPTH, 1,024 launches, at every launch: walked anew
   each time that cost 13 us a launch), up to walk_max; deeper ones are
   walked anew. The read-ahead takes the walk where it lies (view(): a
   copy of 1,024 launches took 1.0 us; in place, 41 ns with the rest).
   36 bytes a step: the first 64 inside MT_PREDICTOR_MEM, a deeper ring
   on top of it (36 KiB at 1,024; table_bytes counts it). */
#define WALK_MIN 64
#define WALK_MAX 4096 /* walk_max's default: MT_READAHEAD_DEPTH's bound */
#define WALK_STEP (sizeof(mt_pred_launch_t) + sizeof(uint32_t)) /* bytes a step */

/* A step is handed out as it is kept (view()): its confidence is the
   product of the probabilities from the walk's start over, and a launch's
   own is that divided by base, the product up to the last launch
   observed. */
typedef struct walk {
  mt_pred_launch_t *l; /* a ring of size steps, a power of two */
  uint32_t *ctx;       /* the context with that step as the current launch */
  uint32_t size;
  uint32_t start, n;
  double base;
  size_t tail;         /* the launch entry of the last step's launch (n > 0), SIZE_MAX: none;
                          slots hold while the epoch does (only evictions replace a key) */
  bool ended;          /* the walk cannot go past its last step */
  bool valid;
  uint64_t epoch;
} walk_t;

static inline uint32_t slot_of(const walk_t *w, uint32_t k) {
  return (w->start + k) & (w->size - 1);
}

static inline void walk_reset(walk_t *w, uint64_t epoch) {
  w->start = w->n = 0;
  w->base = 1.0;
  w->ended = false;
  w->valid = true;
  w->epoch = epoch;
}

/* The walk's first step was observed: the rest of it is the walk from
   there. Confidences are rescaled before the products underflow; one that
   did (a deep walk of unsure steps) starts the walk over. */
static void walk_shift(walk_t *w, uint64_t epoch) {
  w->base = w->l[slot_of(w, 0)].confidence;
  w->start++, w->n--;
  if (w->base > 1e-200) return;
  if (w->base == 0.0) {
    walk_reset(w, epoch);
    return;
  }
  for (uint32_t k = 0; k < w->n; k++) w->l[slot_of(w, k)].confidence /= w->base;
  w->base = 1.0;
}

struct mt_predictor {
  entry_t *tab;
  size_t cap;             /* entries */
  uint64_t *ring;         /* footprint ring: region keys */
  size_t ring_size;       /* its slots */
  uint64_t ring_head;     /* slots ever appended (skipped ones included) */
  size_t head_slot;       /* ring_head % ring_size */
  uint64_t sweep_at;      /* ring_head at which stale positions are next forgotten */
  uint8_t fp_floor;       /* footprints of entries ranked below it are not kept (Footprints
                             too many); 0: all are kept */
  uint64_t win_keys;      /* region keys observed in this window */
  size_t ranked[128];     /* the table's entries of each rank */
  uint64_t prev, cur;     /* last two observed launches; 0 = none yet */
  uint64_t run_cur, run_prev; /* the run (Loops too long) cur is in, and prev */
  uint32_t ctx;           /* the context at cur (see Context); 0 = none yet */
  uint64_t merge;         /* the last merge point observed (ctx's), 0 = none */
  bool context;           /* "context": merge points, contexts, branchy pairs */
  size_t cur_slot;        /* cur's launch entry, if tab[cur_slot] still holds it; SIZE_MAX:
                             none, or refused (Loops too long: not asked again at once) */
  uint64_t expected;      /* the walk's first step from (prev, cur), if has_expected */
  bool has_expected;
  uint64_t epoch;         /* bumped by every change a walk could see */
  walk_t walk;            /* the last walk, reused while epoch holds */
  uint32_t walk_max;      /* the deepest walk cached */
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

/* prev's print as the first of a pair, 1..32767: pairs are keyed by it,
   not by prev's id, so that a launch entry can name the pair its last
   successor came after (Forks) in the 15 bits it has for it. Two
   predecessors of one fork with one print share a pair: a misprediction
   at worst. */
static inline uint16_t prev_print(uint64_t prev) {
  return (uint16_t)(1 + _mt_mix64(prev ^ 0x70726576ULL) % 32767);
}

static inline uint64_t pair_key_print(uint16_t pp, uint64_t cur) {
  return nonzero(_mt_mix64((uint64_t)pp * 0x9e3779b97f4a7c15ULL ^ _mt_mix64(cur)));
}

static inline uint64_t pair_key(uint64_t prev, uint64_t cur) {
  return pair_key_print(prev_print(prev), cur);
}

static inline uint64_t ctx_key(uint64_t prev, uint64_t cur, uint32_t ctx) {
  return nonzero(_mt_mix64(pair_key(prev, cur) ^ ((uint64_t)ctx << 32 | 0x637478u)));
}

/* A rival's fingerprint. Two successors with one fingerprint count as one
   (the second is taken for the first): a misprediction, never more. */
static inline uint32_t rival_print(uint64_t id) {
  return (uint32_t)(_mt_mix64(id ^ 0x726976616cULL) >> 32);
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

/* A key's first slot: keys are mixed, so their high bits scaled to the
   capacity spread as well as a mask would, for any capacity. */
static inline size_t home_of(const mt_predictor_t *p, uint64_t key) {
  return (size_t)(((unsigned __int128)key * (p->cap / PROBE)) >> 64) * PROBE;
}

/* The two buckets' first slots: the second from the key's other half. */
static inline void homes(const mt_predictor_t *p, uint64_t key, size_t *h1, size_t *h2) {
  *h1 = home_of(p, key);
  *h2 = home_of(p, key << 32 | key >> 32);
}

/* Slot k (0..HOOD) of the neighbourhood of buckets h1 and h2. */
static inline size_t hood(size_t h1, size_t h2, int k) {
  return k < PROBE ? h1 + (size_t)k : h2 + (size_t)(k - PROBE);
}

/* The slot holding key in the bucket starting at h, or SIZE_MAX; *fill: the
   bucket's entries. A bucket fills from its first slot, and nothing leaves
   a slot empty again, so its first empty slot ends the search. */
static inline size_t in_bucket(const mt_predictor_t *p, size_t h, uint64_t key, size_t *fill) {
  size_t k = 0;
  for (; k < PROBE && p->tab[h + k].key != 0; k++)
    if (p->tab[h + k].key == key) return h + k;
  *fill = k;
  return SIZE_MAX;
}

/* The slot holding key, or SIZE_MAX. */
static size_t find(const mt_predictor_t *p, uint64_t key) {
  size_t h1, h2, fill, i;
  homes(p, key, &h1, &h2);
  if ((i = in_bucket(p, h1, key, &fill)) != SIZE_MAX) return i;
  return in_bucket(p, h2, key, &fill);
}

/* The rank, for a place in an overflowing table, of the entries of run
   `run` (Loops too long), 0..127. */
static inline uint8_t rank_of(uint64_t run) {
  return (uint8_t)(_mt_mix64(run ^ 0x72616e6bULL) >> 57);
}

/* Whether id starts a run: one launch in RUN (16), the same ones every
   lap. */
#define RUN 16
static inline bool starts_run(uint64_t id) {
  return (_mt_mix64(id ^ 0x72756eULL) & (RUN - 1)) == 0;
}

static inline uint8_t rank(const entry_t *e) {
  return (uint8_t)(e->ref >> 1);
}

/* Windows of table-sized launches, in 16ths: the door's clock. */
static inline uint8_t door_now(const mt_predictor_t *p) {
  return (uint8_t)(p->st.observed / ((p->cap - 1) / 16 + 1));
}

/* The slot holding key, inserting it (empty successors) with the rank of
   run `of` (rank_of: computed only then) if absent; may evict, or, while
   the table overflows, refuse (SIZE_MAX). */
static size_t find_or_insert(mt_predictor_t *p, uint64_t key, uint64_t of) {
  size_t h1, h2, f1, f2, i;
  homes(p, key, &h1, &h2);
  if ((i = in_bucket(p, h1, key, &f1)) != SIZE_MAX || (i = in_bucket(p, h2, key, &f2)) != SIZE_MAX) {
    p->tab[i].ref |= REF_USED;
    return i;
  }
  if (f1 < PROBE || f2 < PROBE) { /* the emptier bucket: two choices keep them even */
    i = f1 <= f2 ? h1 + f1 : h2 + f2;
    goto claim;
  }
  p->win_full++;
  if (p->overflow) {
    /* Loops too long: the lowest-ranked entry of the neighbourhood not
       used in this window goes, for a key ranked higher, or for one
       refused not long ago (its tag still at the door: a short loop after
       a long one). */
    size_t low = SIZE_MAX;
    for (int k = 0; k < HOOD; k++) {
      i = hood(h1, h2, k);
      if (!(p->tab[i].ref & REF_USED) && (low == SIZE_MAX || rank(&p->tab[i]) < rank(&p->tab[low]))) low = i;
    }
    uint16_t *d = &p->door[(size_t)(key >> 24) & p->door_mask];
    const uint8_t now = door_now(p), kb = (uint8_t)(key >> 56);
    const bool recent = (uint8_t)(now - (uint8_t)*d) < DOOR_TICKS, known = recent && (*d >> 8) == kb;
    if (low == SIZE_MAX || (rank_of(of) <= rank(&p->tab[low]) && !known)) {
      if (!recent) *d = (uint16_t)(kb << 8 | now); /* a recent tag stays: its key comes first */
      p->st.refused++;
      return SIZE_MAX;
    }
    if (known) *d = (uint8_t)(now - DOOR_TICKS); /* used: expired */
    i = low;
  } else {
    /* A clock over the neighbourhood. Two passes at most: the first
       clears every bit it passes. */
    for (int k = 0; k < 2 * HOOD; k++) {
      i = hood(h1, h2, k % HOOD);
      if (!(p->tab[i].ref & REF_USED)) break;
      p->tab[i].ref &= (uint8_t)~REF_USED;
    }
  }
  p->st.evictions++;
  p->epoch++;
  p->ranked[rank(&p->tab[i])]--;
claim:
  p->tab[i] = (entry_t){.key = key, .ref = (uint8_t)(REF_USED | rank_of(of) << 1)}; /* no footprint */
  p->ranked[rank(&p->tab[i])]++;
  return i;
}

/* Whether e's best successor or its probability (cnt[0] / (cnt[0] + cnt[1]),
   compared exactly) differs from what (s0, c0, c1) gave. */
static inline bool walk_visible(const entry_t *e, uint64_t s0, uint8_t c0, uint8_t c1) {
  unsigned n0 = e->cnt[0], n1 = e->cnt[1];
  if ((c0 == 0) != (n0 == 0)) return true;
  if (n0 == 0) return false; /* no successor before or after */
  return e->succ != s0 || (unsigned)c0 * (n0 + n1) != n0 * ((unsigned)c0 + c1);
}

/* Records that e was followed by next (the relearning rule above); returns
   whether a walk could tell: its best successor or that one's probability
   changed (a count rising from 2 to 3 with no rival changes neither, so a
   warming table does not keep invalidating the cached walk). The counts
   keep cnt[0] >= cnt[1], so a rival is promoted only when it is observed,
   and its id is at hand then. */
static bool learn(entry_t *e, uint64_t next) {
  const uint8_t c0 = e->cnt[0], c1 = e->cnt[1];
  const uint64_t s0 = e->succ;
  const uint32_t f = rival_print(next);
  int hit = c0 && e->succ == next ? 0 : c1 && e->rival == f ? 1 : -1;
  if (hit != 0 && e->cnt[0]) e->cnt[0]--;
  if (hit != 1 && e->cnt[1]) e->cnt[1]--;
  if (hit < 0) {
    /* Replace the weakest slot if it has died out. */
    int w = e->cnt[0] <= e->cnt[1] ? 0 : 1;
    if (e->cnt[w] != 0) return walk_visible(e, s0, c0, c1);
    if (w == 0) e->succ = next;
    else e->rival = f;
    e->cnt[w] = 1;
    hit = w;
  } else if (e->cnt[hit] < CNT_MAX) {
    e->cnt[hit]++;
  }
  if (hit == 1 && e->cnt[1] > e->cnt[0]) {
    const uint8_t c = e->cnt[0];
    e->rival = rival_print(e->succ), e->succ = next;
    e->cnt[0] = e->cnt[1], e->cnt[1] = c;
  }
  return walk_visible(e, s0, c0, c1);
}

/* The best successor of slot i and its step probability; false when none. */
static bool best(const mt_predictor_t *p, size_t i, uint64_t *next, double *prob) {
  if (i == SIZE_MAX) return false;
  const entry_t *e = &p->tab[i];
  if (e->cnt[0] == 0) return false;
  *next = e->succ;
  *prob = (double)e->cnt[0] / (double)(e->cnt[0] + e->cnt[1]);
  return true;
}

/* One step of the walk from (prev, cur) in context ctx, cur's launch
   entry being slot l: the next launch and its probability. */
static bool step(const mt_predictor_t *p, uint64_t prev, uint64_t cur, size_t l, uint32_t ctx, uint64_t *next,
                 double *prob) {
  if (l == SIZE_MAX) return false;
  if (!(p->tab[l].link & LINK_FORK)) return best(p, l, next, prob);
  size_t i = find(p, pair_key(prev, cur));
  if (i != SIZE_MAX && (p->tab[i].pad & PAD_BRANCHY) && best(p, find(p, ctx_key(prev, cur, ctx)), next, prob))
    return true;
  if (best(p, i, next, prob)) return true;
  if (best(p, l, next, prob)) {
    *prob *= 0.5;
    return true;
  }
  return false;
}

/* The footprint of launch entry i (NULL with *n = 0 when it has none, or
   it was overwritten since). */
static const uint64_t *footprint(const mt_predictor_t *p, size_t i, uint32_t *n) {
  *n = 0;
  if (i == SIZE_MAX || p->tab[i].fplen == 0) return NULL;
  const uint32_t dist = (uint32_t)p->ring_head - p->tab[i].fp;
  if (dist > p->ring_size) return NULL;
  *n = p->tab[i].fplen;
  return &p->ring[p->head_slot >= dist ? p->head_slot - dist : p->head_slot + p->ring_size - dist];
}

/* Forgets the footprint positions no longer valid, before the 32 bits
   kept of them wrap (Footprint ring). Once every SWEEP slots appended. */
static void sweep(mt_predictor_t *p) {
  for (size_t j = 0; j < p->cap; j++)
    if (p->tab[j].fplen != 0 && (uint32_t)p->ring_head - p->tab[j].fp > p->ring_size) p->tab[j].fplen = 0;
  p->sweep_at = p->ring_head + SWEEP;
}

/* Appends launch entry i's footprint to the ring unless the stored one is
   the same. */
static void store_footprint(mt_predictor_t *p, size_t i, const uint64_t *keys, size_t n) {
  uint32_t have;
  const uint64_t *old = footprint(p, i, &have);
  if (have == n && (n == 0 || memcmp(old, keys, n * sizeof(*keys)) == 0)) return;
  entry_t *e = &p->tab[i];
  const bool low = rank(e) < p->fp_floor;
  if (n > FP_MAX || n > p->ring_size / 2 || low) { /* too big to keep, or not its turn: unknown */
    p->st.fp_dropped += low && n > 0; /* an empty footprint drops nothing */
    if (e->fplen != 0) p->epoch++;
    e->fplen = 0;
    return;
  }
  if (p->head_slot + n > p->ring_size) { /* a footprint is handed out as one array: never wrap it */
    p->ring_head += p->ring_size - p->head_slot;
    p->head_slot = 0;
  }
  /* memmove: keys may be a footprint predict() handed out, in this ring */
  if (n > 0) memmove(&p->ring[p->head_slot], keys, n * sizeof(*keys));
  e->fp = (uint32_t)p->ring_head;
  e->fplen = (uint16_t)n;
  p->ring_head += n;
  p->head_slot += n;
  if (p->head_slot == p->ring_size) p->head_slot = 0;
  if (p->ring_head >= p->sweep_at) sweep(p);
  p->epoch++; /* cached footprint pointers may now be overwritten */
}

/* Footprints too many: at the end of a window, the keys its launches'
   footprints would take, one footprint for each entry in the table (a
   launch entry, most of them). More than the ring holds, and each lap
   would overwrite footprints before their launches came round again, none
   found; so only entries ranked at or above a floor keep theirs, as many
   as fill 7/8 of the ring, and those stay whole from lap to lap. The
   floor is read off the table's ranks (an overflowing table holds the
   highest-ranked: Loops too long). Fewer than the ring holds, all are
   kept: each is written once and is still there a lap later. */
static void fp_share(mt_predictor_t *p) {
  const double per = (double)p->win_keys / (double)p->win_obs; /* keys a launch */
  size_t entries = 0;
  for (int r = 0; r < 128; r++) entries += p->ranked[r];
  uint8_t floor = 0;
  if ((double)entries * per > (double)p->ring_size) {
    const double room = (double)p->ring_size * 7 / 8 / per; /* footprints */
    size_t kept = 0;
    for (floor = 128; floor > 0 && (double)(kept + p->ranked[floor - 1]) <= room; floor--) kept += p->ranked[floor - 1];
  }
  if (floor != p->fp_floor) p->epoch++;
  p->fp_floor = floor;
}

/* Extends the cached walk w to at least want steps (or until it ends);
   returns whether it has one step at least. */
static bool extend(const mt_predictor_t *p, walk_t *w, uint32_t want) {
  if (want > w->size) want = w->size;
  while (w->n < want && !w->ended) {
    uint64_t prev, cur, next;
    uint32_t ctx = w->n >= 1 ? w->ctx[slot_of(w, w->n - 1)] : p->ctx;
    double prob, conf = w->n >= 1 ? w->l[slot_of(w, w->n - 1)].confidence : w->base;
    size_t lc = w->tail; /* cur's launch entry: the last step found it */
    if (w->n >= 2) {
      prev = w->l[slot_of(w, w->n - 2)].id, cur = w->l[slot_of(w, w->n - 1)].id;
    } else if (w->n == 1) {
      prev = p->cur, cur = w->l[slot_of(w, 0)].id;
    } else {
      prev = p->prev, cur = p->cur;
      lc = p->cur_slot != SIZE_MAX && p->tab[p->cur_slot].key == launch_key(cur) ? p->cur_slot
                                                                              : find(p, launch_key(cur));
    }
    if (!step(p, prev, cur, lc, ctx, &next, &prob)) {
      w->ended = true;
      break;
    }
    const uint32_t j = slot_of(w, w->n);
    size_t li = find(p, launch_key(next));
    w->l[j].id = next;
    w->l[j].confidence = conf * prob;
    w->l[j].keys = footprint(p, li, &w->l[j].nkeys);
    w->ctx[j] = ctx_next(p, li, cur, next, ctx);
    w->tail = li;
    w->n++;
  }
  return w->n > 0;
}

/* Grows p's walk ring to hold want steps (a power of two; the walk starts
   over; table_bytes counts it); false when out of memory. */
static bool walk_grow(mt_predictor_t *p, size_t want) {
  walk_t *w = &p->walk;
  uint32_t size = w->size;
  while (size < want) size *= 2;
  mt_pred_launch_t *l = malloc(size * sizeof(*l));
  uint32_t *ctx = malloc(size * sizeof(*ctx));
  if (l == NULL || ctx == NULL) {
    free(l);
    free(ctx);
    return false;
  }
  p->st.table_bytes += (size - w->size) * WALK_STEP;
  free(w->l);
  free(w->ctx);
  w->l = l, w->ctx = ctx;
  w->size = size;
  w->valid = false;
  return true;
}

/* The door's slots for a table of cap entries: about one for every two,
   a power of two. */
static size_t door_slots(size_t cap) {
  size_t d = 16;
  while (d * 4 <= cap) d <<= 1;
  return d;
}

/* A memory bound: 11/16 to the table and its door (a slot of 2 bytes for
   about every two entries), the rest to the footprints. At the 100B synth
   trace's 2.4 regions a launch, a launch takes an entry (32 bytes, at
   most 3/4 of the table full: 43) and 2.4 keys (19 bytes): 64M holds
   1,400,000 entries and 2,600,000 keys, room for a million launches an
   iteration; 32M (the default) for about half a million. */
static void size_for(size_t bytes, size_t *cap, size_t *rs) {
  if (bytes < MT_PREDICTOR_MEM_MIN) bytes = MT_PREDICTOR_MEM_MIN;
  bytes -= sizeof(mt_predictor_t) + WALK_MIN * WALK_STEP;
  const size_t table = bytes / 16 * 11;
  *cap = table / (sizeof(entry_t) + sizeof(uint16_t)) / PROBE * PROBE;
  while (*cap * sizeof(entry_t) + door_slots(*cap) * sizeof(uint16_t) > table) *cap -= PROBE;
  *rs = (bytes - *cap * sizeof(entry_t) - door_slots(*cap) * sizeof(uint16_t)) / sizeof(uint64_t);
}

static mt_predictor_t *create(const mt_predictor_config_t *cfg, bool context) {
  size_t cap, rs;
  if (cfg && cfg->max_bytes) {
    size_for(cfg->max_bytes, &cap, &rs);
  } else {
    cap = cfg && cfg->capacity ? cfg->capacity : DEFAULT_CAPACITY;
    if (cap > SIZE_MAX / 2 / sizeof(entry_t)) return NULL; /* no such memory: as out of memory */
    cap = cap < PROBE ? PROBE : (cap + PROBE - 1) / PROBE * PROBE; /* whole buckets */
    rs = cfg && cfg->footprint_regions ? cfg->footprint_regions : 4 * cap;
    if (rs < 64) rs = 64;
  }
  if (rs > RING_MAX) rs = RING_MAX;
  mt_predictor_t *p = calloc(1, sizeof(*p));
  if (p == NULL) return NULL;
  p->tab = calloc(cap, sizeof(entry_t));
  p->ring = calloc(rs, sizeof(uint64_t));
  p->door = calloc(door_slots(cap), sizeof(uint16_t));
  p->walk.l = malloc(WALK_MIN * sizeof(mt_pred_launch_t));
  p->walk.ctx = malloc(WALK_MIN * sizeof(uint32_t));
  if (p->tab == NULL || p->ring == NULL || p->door == NULL || p->walk.l == NULL || p->walk.ctx == NULL) {
    free(p->tab);
    free(p->ring);
    free(p->door);
    free(p->walk.l);
    free(p->walk.ctx);
    free(p);
    return NULL;
  }
  p->walk.size = WALK_MIN;
  p->walk_max = !cfg || !cfg->walk_max       ? WALK_MAX
                : cfg->walk_max < WALK_MIN ? WALK_MIN
                : cfg->walk_max > (1u << 20) ? 1u << 20
                                            : (uint32_t)cfg->walk_max;
  p->cap = cap;
  p->door_mask = door_slots(cap) - 1;
  p->ring_size = rs;
  p->sweep_at = SWEEP;
  p->cur_slot = SIZE_MAX;
  p->context = context;
  p->st.table_bytes = sizeof(*p) + cap * sizeof(entry_t) + rs * sizeof(uint64_t) + door_slots(cap) * sizeof(uint16_t) +
                      WALK_MIN * WALK_STEP;
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
  free(p->walk.l);
  free(p->walk.ctx);
  free(p);
}

/* Slot i (SIZE_MAX: none, no room) learns that next followed. */
static void learn_at(mt_predictor_t *p, size_t i, uint64_t next) {
  if (i != SIZE_MAX) p->epoch += learn(&p->tab[i], next);
}

/* A new pair entry e starts with the successors of seed, a launch entry. */
static inline void seed_from(entry_t *e, const entry_t *seed) {
  e->succ = seed->succ, e->rival = seed->rival;
  e->cnt[0] = seed->cnt[0], e->cnt[1] = seed->cnt[1];
}

/* A fork was found at cur: the pair its earlier successors came after
   (print last) starts with what cur's launch entry knew then (seed), as
   if pairs had been kept for cur all along. */
static void seed_pair(mt_predictor_t *p, uint16_t last, const entry_t *seed) {
  size_t i = find_or_insert(p, pair_key_print(last, p->cur), p->run_prev);
  if (i == SIZE_MAX || p->tab[i].cnt[0] > 0) return; /* no room, or it knows better */
  seed_from(&p->tab[i], seed);
  p->epoch++;
}

/* (prev, cur) was followed by id, and cur is a fork: the pair entry learns
   it and, once branchy, so does the context entry (Context above). seed:
   cur was found a fork just now after the pair its earlier successors
   came after too (a detour): the pair starts from what cur knew, so one
   detour costs the usual successor one count, as anywhere else. */
static void learn_pair(mt_predictor_t *p, uint64_t id, const entry_t *seed) {
  size_t i = find_or_insert(p, pair_key(p->prev, p->cur), p->run_prev); /* as cur's launch entry */
  if (i == SIZE_MAX) return; /* no room (Loops too long) */
  entry_t *e = &p->tab[i];
  if (seed != NULL && e->cnt[0] == 0) seed_from(e, seed);
  uint64_t top = e->succ;
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
  if (first && top_ctx != p->ctx) learn_at(p, find_or_insert(p, ctx_key(p->prev, p->cur, top_ctx), p->run_prev), top);
  learn_at(p, find_or_insert(p, ctx_key(p->prev, p->cur, p->ctx), p->run_prev), id);
}

static bool corr_observe(mt_predictor_t *p, uint64_t id, const uint64_t *keys, size_t n) {
  bool hit = p->has_expected && p->expected == id;
  p->st.observed++;
  p->win_keys += n;
  if (++p->win_obs >= p->cap) { /* a window of `capacity` launches: did it overflow? */
    p->overflow = p->win_full * 8 > p->win_obs;
    fp_share(p);
    p->win_obs = p->win_full = p->win_keys = 0;
    if (p->overflow) /* from now on, used means used in this window */
      for (size_t j = 0; j < p->cap; j++) p->tab[j].ref &= (uint8_t)~REF_USED;
  }
  p->st.predicted += hit;
  if (p->st.observed > 1) {
    /* cur -> id; the cached slot may have been evicted since */
    uint64_t ck = launch_key(p->cur);
    size_t cs = p->cur_slot == SIZE_MAX            ? SIZE_MAX
                : p->tab[p->cur_slot].key == ck ? p->cur_slot
                                                : find_or_insert(p, ck, p->run_prev);
    if (cs != SIZE_MAX) {
      entry_t *c = &p->tab[cs];
      const uint16_t pp = prev_print(p->prev), last = c->link >> 1;
      const bool was_fork = c->link & LINK_FORK, fork = !was_fork && c->cnt[0] > 0 && c->succ != id;
      entry_t seed = {0}; /* at a new fork: what the launch knew before this turn (Forks) */
      if (fork) {
        seed = *c; /* from now on its pairs tell its successors apart */
        p->epoch++;
      }
      p->epoch += learn(c, id);
      c->link = (uint16_t)(pp << 1 | (fork || was_fork));
      /* the pairs learn after the launch entry: their inserts may evict it */
      if (fork && last != 0 && last != pp) seed_pair(p, last, &seed);
      if ((fork || was_fork) && p->st.observed > 2) learn_pair(p, id, fork && last == pp ? &seed : NULL);
    }
  }
  /* its entry has the rank of the run of the launch before it, as the
     pairs after it will (Loops too long) */
  size_t s = find_or_insert(p, launch_key(id), p->run_cur);
  if (s != SIZE_MAX) store_footprint(p, s, keys, n);
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
  p->run_prev = p->run_cur;
  if (starts_run(id)) p->run_cur = id;
  walk_t *w = &p->walk;
  if (w->valid && w->epoch == p->epoch && w->n > 0 && w->l[slot_of(w, 0)].id == id) {
    walk_shift(w, p->epoch);
  } else {
    walk_reset(w, p->epoch);
  }
  p->has_expected = extend(p, w, 1);
  if (p->has_expected) p->expected = w->l[slot_of(w, 0)].id;
  return hit;
}

/* The cached walk extended to max steps; false when max is deeper than
   it may grow. */
static bool walk_to(mt_predictor_t *p, size_t max) {
  walk_t *w = &p->walk;
  if (max > p->walk_max || (max > w->size && !walk_grow(p, max))) return false;
  if (!w->valid || w->epoch != p->epoch) walk_reset(w, p->epoch);
  extend(p, w, (uint32_t)max);
  return true;
}

static size_t corr_predict(mt_predictor_t *p, mt_pred_launch_t *out, size_t max) {
  if (p->st.observed == 0) return 0;
  size_t k = 0;
  if (walk_to(p, max)) {
    const walk_t *w = &p->walk;
    for (; k < max && k < w->n; k++) {
      out[k] = w->l[slot_of(w, (uint32_t)k)];
      out[k].confidence /= w->base;
    }
    return k;
  }
  uint64_t prev = p->prev, cur = p->cur, next;
  uint32_t ctx = p->ctx;
  double prob, conf = 1.0;
  size_t lc = find(p, launch_key(cur));
  while (k < max && step(p, prev, cur, lc, ctx, &next, &prob)) {
    size_t li = find(p, launch_key(next));
    conf *= prob;
    out[k].id = next;
    out[k].confidence = conf;
    out[k].keys = footprint(p, li, &out[k].nkeys);
    ctx = ctx_next(p, li, cur, next, ctx);
    prev = cur, cur = next, lc = li;
    k++;
  }
  return k;
}

static size_t corr_view(mt_predictor_t *p, size_t max, mt_pred_view_t *v) {
  *v = (mt_pred_view_t){.scale = 1.0};
  if (p->st.observed == 0 || !walk_to(p, max < p->walk_max ? max : p->walk_max)) return 0;
  const walk_t *w = &p->walk;
  const size_t n = max < w->n ? max : w->n, first = (w->start & (w->size - 1));
  v->run[0] = &w->l[first];
  v->n[0] = n < w->size - first ? n : w->size - first;
  v->run[1] = w->l;
  v->n[1] = n - v->n[0];
  v->scale = w->base;
  return n;
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
  .view = corr_view,
  .stats = corr_stats,
};

const mt_predictor_ops_t _mt_predictor_context = {
  .name = "context",
  .create = ctx_create,
  .destroy = corr_destroy,
  .observe = corr_observe,
  .predict = corr_predict,
  .view = corr_view,
  .stats = corr_stats,
};
