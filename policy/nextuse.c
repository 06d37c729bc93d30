/*
 * nextuse.c - evict the chunk whose next use is farthest away (Belady's
 * rule, on predicted next uses).
 *
 * The pager sets each node's `due` (the clock of its region's next use,
 * predictor/reuse.h; 0 = unknown) before it inserts or touches it, and
 * tells the clock and the period with advance(). Nodes are filed in one of:
 *  - a time wheel of NB buckets over the next NB << shift clock ticks,
 *    bucket (due >> shift) % NB; shift is chosen so that the wheel spans
 *    at least two periods, and nodes beyond it wait in the farthest bucket;
 *  - the unknown list, in LRU order: nodes with no estimate (the first
 *    iteration, a region never seen), and nodes whose due has passed
 *    without a use (the estimate was wrong: the iteration took another
 *    path, or the stream diverged).
 * A victim comes from the farthest nonempty bucket towards now, then from
 * the unknown list, coldest first. Within a bucket (the same 1 << shift
 * ticks) the order is LRU's. With no estimates at all it is exactly LRU.
 * The unknown list goes last because in a training loop a passed due is
 * mostly a late use, not a wrong one (measured: taking the unknown list
 * first cost ViT 2.9 points and BERT 0.5 with demand fetching, and gained
 * 2.4% on the synth 7B trace).
 *
 * advance() moves the wheel: buckets whose time has passed are emptied,
 * each node refiled (a node clamped into the farthest bucket goes where
 * its due now falls; a passed due goes to the unknown list, at its hot
 * end: it was expected just now, so it is likely needed soon). Each node
 * is refiled at most once per NB buckets of clock, so the work is O(1)
 * per node per wheel turn. A period that needs another shift refiles
 * everything once.
 *
 * Cost classes (policy.h, MT_COST_*): each class has its own wheel and
 * unknown list, and a victim is the first of the cheap class, in the
 * order above, then of the dirty class, then of the dead. A clean chunk
 * needed soon goes before a dirty one needed late: the dirty one costs a
 * copy out now and the same fetch back later (G10, write-aware: ViT
 * 78.11 -> 83.3% of ideal, BERT 99.87 -> 100%; docs/eviction.md
 * "Eviction weighs the copy out"). A node's class is the caller's, set
 * before insert and touch, and recost() refiles a node whose class changed
 * in between.
 * Created not weighing (the host tier's spill order), every node is filed
 * in the cheap class's wheel, and victim_in() filters by cost as it walks.
 * Filing by class keeps every step O(1): finding the farthest cheap node
 * by walking one order cost a walk of every resident chunk per dirty
 * eviction (ViT's replay 10x slower).
 *
 * Node fields: stamp = 0 on an unknown list, else 1 + cost * NB + bucket.
 * Threading: none of its own; the pager calls it under its lock.
 */
#include <stdlib.h>
#include <string.h>

#include "policy.h"

#define NB 4096                  /* buckets; a power of two */
#define NWORDS (NB / 64)

struct mt_policy {
  mt_policy_node_t unknown[MT_COST_N];   /* sentinels: unknown.next is the most recent */
  mt_policy_node_t wheel[MT_COST_N][NB]; /* sentinels, same order within a bucket */
  uint64_t bits[MT_COST_N][NWORDS];      /* nonempty buckets */
  uint64_t now;
  uint64_t base;                 /* slot (clock >> shift) of now: the wheel is [base, base + NB) */
  unsigned shift;
  bool weigh;                    /* classes filed apart (else all in class 0) */
};

static void list_init(mt_policy_node_t *h) {
  h->next = h->prev = h;
}

static bool list_empty(const mt_policy_node_t *h) {
  return h->next == h;
}

static void unlink_node(mt_policy_t *p, mt_policy_node_t *n) {
  n->prev->next = n->next;
  n->next->prev = n->prev;
  if (n->stamp != 0) {
    size_t c = (size_t)(n->stamp - 1) / NB, b = (size_t)(n->stamp - 1) % NB;
    if (list_empty(&p->wheel[c][b])) p->bits[c][b / 64] &= ~(1ull << (b % 64));
  }
  n->prev = n->next = NULL;
  n->linked = false;
}

static void link_after(mt_policy_node_t *h, mt_policy_node_t *n) {
  n->next = h->next;
  n->prev = h;
  h->next->prev = n;
  h->next = n;
  n->linked = true;
}

/* Files n by its cost and due: the wheel when due lies ahead, else the
 * unknown list. */
static void file(mt_policy_t *p, mt_policy_node_t *n) {
  size_t c = !p->weigh ? 0 : n->cost < MT_COST_N ? n->cost : MT_COST_DIRTY;
  if (n->due <= p->now) {
    n->stamp = 0;
    link_after(&p->unknown[c], n);
    return;
  }
  uint64_t slot = n->due >> p->shift;
  if (slot >= p->base + NB) slot = p->base + NB - 1; /* beyond the wheel: the farthest bucket */
  size_t b = (size_t)(slot & (NB - 1));
  n->stamp = 1 + c * NB + b;
  link_after(&p->wheel[c][b], n);
  p->bits[c][b / 64] |= 1ull << (b % 64);
}

static mt_policy_t *nu_create(bool weigh) {
  mt_policy_t *p = calloc(1, sizeof(*p));
  if (p == NULL) return NULL;
  p->weigh = weigh;
  for (size_t c = 0; c < MT_COST_N; c++) {
    list_init(&p->unknown[c]);
    for (size_t i = 0; i < NB; i++) list_init(&p->wheel[c][i]);
  }
  return p;
}

static void nu_destroy(mt_policy_t *p) {
  free(p);
}

static void nu_insert(mt_policy_t *p, mt_policy_node_t *n) {
  if (n->linked) unlink_node(p, n);
  file(p, n);
}

static void nu_remove(mt_policy_t *p, mt_policy_node_t *n) {
  if (n->linked) unlink_node(p, n);
}

static void nu_touch(mt_policy_t *p, mt_policy_node_t *n) {
  if (!n->linked) return;
  unlink_node(p, n);
  file(p, n);
}

/* Its class changed, its use did not: it goes to the hot end of its
 * bucket in the new class, as a touch would put it. */
static void nu_recost(mt_policy_t *p, mt_policy_node_t *n) {
  if (p->weigh) nu_touch(p, n);
}

/* Takes every node off list h (so that nodes refiled into h itself are
 * not seen twice) and files it again, oldest first so that the refiled
 * keep their relative order; with due_of, by a due asked anew. */
static void refile_list(mt_policy_t *p, mt_policy_node_t *h, uint64_t (*due_of)(mt_policy_node_t *n, void *arg),
                        void *arg) {
  if (list_empty(h)) return;
  mt_policy_node_t *first = h->next, *last = h->prev;
  list_init(h);
  last->next = NULL;
  for (mt_policy_node_t *n = last; n != NULL;) {
    mt_policy_node_t *prev = n == first ? NULL : n->prev;
    n->linked = false;
    if (due_of != NULL) n->due = due_of(n, arg);
    file(p, n);
    n = prev;
  }
}

/* Refiles every node of bucket b of class c. */
static void refile_bucket(mt_policy_t *p, size_t c, size_t b) {
  p->bits[c][b / 64] &= ~(1ull << (b % 64));
  refile_list(p, &p->wheel[c][b], NULL, NULL);
}

static unsigned shift_for(uint64_t period) {
  unsigned s = 0;
  while (((uint64_t)NB << s) < 2 * period && s < 40) s++;
  return s;
}

static void nu_advance(mt_policy_t *p, uint64_t now, uint64_t period) {
  if (now < p->now) return;
  p->now = now;
  unsigned s = shift_for(period);
  if (s != p->shift) { /* a new scale: every bucket refiled in the new frame */
    mt_policy_node_t all;
    list_init(&all);
    for (size_t c = 0; c < MT_COST_N; c++)
      for (size_t b = 0; b < NB; b++) {
        mt_policy_node_t *h = &p->wheel[c][b];
        if (list_empty(h)) continue;
        h->next->prev = all.prev; /* splice h's nodes at all's tail */
        all.prev->next = h->next;
        h->prev->next = &all;
        all.prev = h->prev;
        list_init(h);
      }
    memset(p->bits, 0, sizeof(p->bits));
    p->shift = s;
    p->base = now >> s;
    while (!list_empty(&all)) {
      mt_policy_node_t *n = all.prev;
      n->prev->next = &all;
      all.prev = n->prev;
      n->linked = false;
      file(p, n);
    }
    return;
  }
  uint64_t nb = now >> p->shift;
  if (nb == p->base) return;
  uint64_t from = p->base, to = nb;
  if (to - from > NB) from = to - NB; /* each bucket once */
  p->base = nb;
  for (uint64_t slot = from; slot < to; slot++)
    for (size_t c = 0; c < MT_COST_N; c++) refile_bucket(p, c, (size_t)(slot & (NB - 1)));
}

/* The unknown lists hold the nodes filed before the period was known (the
 * first iteration's: no estimate then) as well as those whose due passed.
 * Nothing refiles them until they are used again, and they go last: a
 * region used once in the first iteration's last launches and next in
 * the second's stayed resident while chunks needed far sooner were
 * evicted around it (Inception: 27.6 GB of the 40 on these lists a third
 * of the way into the second iteration). So when the estimates change,
 * each is asked for its due again; those still unknown keep their order. */
static void nu_redue(mt_policy_t *p, uint64_t (*due_of)(mt_policy_node_t *n, void *arg), void *arg) {
  for (size_t c = 0; c < MT_COST_N; c++) refile_list(p, &p->unknown[c], due_of, arg);
}

static mt_policy_node_t *scan(mt_policy_node_t *h, mt_policy_eligible_fn eligible, void *arg) {
  for (mt_policy_node_t *n = h->prev; n != h; n = n->prev)
    if (eligible == NULL || eligible(n, arg)) return n;
  return NULL;
}

/* The first eligible node of class cost: the farthest bucket first. */
static mt_policy_node_t *victim_of(mt_policy_t *p, int cost, mt_policy_eligible_fn eligible, void *arg) {
  mt_policy_node_t *n;
  const size_t c = (size_t)cost;
  /* farthest first: slots base + NB - 1 down to base, skipping empty words */
  for (uint64_t k = NB; k-- > 0;) {
    size_t b = (size_t)((p->base + k) & (NB - 1));
    if (p->bits[c][b / 64] == 0) {
      uint64_t skip = b % 64; /* the rest of this word lies below b */
      if (skip > k) break;
      k -= skip;
      continue;
    }
    if (!(p->bits[c][b / 64] & (1ull << (b % 64)))) continue;
    if ((n = scan(&p->wheel[c][b], eligible, arg)) != NULL) return n;
  }
  return scan(&p->unknown[c], eligible, arg);
}

/* Not weighing: the caller's veto, and a node of a class in mask. */
typedef struct masked {
  unsigned mask;
  mt_policy_eligible_fn eligible;
  void *arg;
} masked_t;

static bool masked_ok(mt_policy_node_t *n, void *arg) {
  masked_t *m = arg;
  unsigned c = n->cost < MT_COST_N ? n->cost : MT_COST_DIRTY;
  return (m->mask & MT_COST_BIT(c)) && (m->eligible == NULL || m->eligible(n, m->arg));
}

static mt_policy_node_t *nu_victim_in(mt_policy_t *p, unsigned mask, mt_policy_eligible_fn eligible, void *arg) {
  if (!p->weigh) {
    if ((mask & MT_COST_ALL) == MT_COST_ALL) return victim_of(p, 0, eligible, arg);
    masked_t m = {mask, eligible, arg};
    return victim_of(p, 0, masked_ok, &m);
  }
  for (int c = 0; c < MT_COST_N; c++) {
    if (!(mask & MT_COST_BIT(c))) continue;
    mt_policy_node_t *n = victim_of(p, c, eligible, arg);
    if (n != NULL) return n;
  }
  return NULL;
}

static mt_policy_node_t *nu_victim(mt_policy_t *p, mt_policy_eligible_fn eligible, void *arg) {
  return nu_victim_in(p, MT_COST_ALL, eligible, arg);
}

const mt_policy_ops_t _mt_policy_nextuse = {
  .name = "nextuse",
  .create = nu_create,
  .destroy = nu_destroy,
  .insert = nu_insert,
  .remove = nu_remove,
  .touch = nu_touch,
  .victim = nu_victim,
  .victim_in = nu_victim_in,
  .recost = nu_recost,
  .advance = nu_advance,
  .redue = nu_redue,
  .uses_due = true,
  .weighs = true,
};
