/*
 * lru.c - least-recently-used eviction.
 *
 * The baseline the predictor-driven policy must beat: a doubly linked list,
 * most recently used at the head; a touch moves a node to the head, a
 * victim is the first eligible node from the tail. All O(1) except victim,
 * which skips ineligible (in-flight) nodes at the cold end.
 *
 * It never weighs cost (policy.h): the order is LRU's alone. But the nodes
 * of cost MT_COST_DIRTY are also on a second list (dprev/dnext), in the
 * same order, so that victim_in() for dirty nodes alone walks no others:
 * write-behind on the device, and the host tier's copies written ahead,
 * which look for the coldest chunk that still needs a write and used to
 * walk past every chunk already written (most of a replay's time on
 * Inception-v3). The sub-list keeps the main list's order because a node
 * joins it at the head when it is linked at the head, and recost() puts
 * one that turned dirty in place by its stamp (stamps grow towards the
 * head), walking from both ends: a node turns dirty as it is used, or
 * long after.
 */
#include <stdlib.h>
#include <string.h>

#include "policy.h"

struct mt_policy {
  mt_policy_node_t head;  /* sentinel: head.next is the most recent */
  mt_policy_node_t dhead; /* sentinel of the dirty sub-list (dnext/dprev) */
  uint64_t clock;
};

static mt_policy_t *lru_create(bool weigh) {
  (void)weigh; /* the baseline never weighs */
  mt_policy_t *p = calloc(1, sizeof(*p));
  if (p == NULL) return NULL;
  p->head.next = p->head.prev = &p->head;
  p->dhead.dnext = p->dhead.dprev = &p->dhead;
  return p;
}

static void lru_destroy(mt_policy_t *p) {
  free(p);
}

static bool is_dirty(const mt_policy_node_t *n) {
  return n->cost == MT_COST_DIRTY || n->cost >= MT_COST_N; /* as nextuse files an unknown cost */
}

static void d_unlink(mt_policy_node_t *n) {
  if (n->dnext == NULL) return;
  n->dprev->dnext = n->dnext;
  n->dnext->dprev = n->dprev;
  n->dprev = n->dnext = NULL;
}

/* n goes into the sub-list right after `at` (towards the tail). */
static void d_link_after(mt_policy_node_t *at, mt_policy_node_t *n) {
  n->dnext = at->dnext;
  n->dprev = at;
  at->dnext->dprev = n;
  at->dnext = n;
}

static void unlink_node(mt_policy_node_t *n) {
  n->prev->next = n->next;
  n->next->prev = n->prev;
  n->prev = n->next = NULL;
  n->linked = false;
  d_unlink(n);
}

static void link_head(mt_policy_t *p, mt_policy_node_t *n) {
  n->next = p->head.next;
  n->prev = &p->head;
  p->head.next->prev = n;
  p->head.next = n;
  n->linked = true;
  n->stamp = ++p->clock;
  d_unlink(n);
  if (is_dirty(n)) d_link_after(&p->dhead, n);
}

static void lru_insert(mt_policy_t *p, mt_policy_node_t *n) {
  if (n->linked) unlink_node(n);
  link_head(p, n);
}

static void lru_remove(mt_policy_t *p, mt_policy_node_t *n) {
  (void)p;
  if (n->linked) unlink_node(n);
}

static void lru_touch(mt_policy_t *p, mt_policy_node_t *n) {
  if (!n->linked) return;
  if (p->head.next == n) {
    n->stamp = ++p->clock;
    /* the most recent node: the sub-list's head too, if dirty */
    if (is_dirty(n) && p->dhead.dnext != n) {
      d_unlink(n);
      d_link_after(&p->dhead, n);
    } else if (!is_dirty(n)) {
      d_unlink(n);
    }
    return;
  }
  unlink_node(n);
  link_head(p, n);
}

/* Its place in the order stays; only its membership of the sub-list. */
static void lru_recost(mt_policy_t *p, mt_policy_node_t *n) {
  if (!n->linked) return;
  if (!is_dirty(n)) {
    d_unlink(n);
    return;
  }
  if (n->dnext != NULL) return;
  /* In place by stamp, from both ends at once: a chunk used just now, or
   * one long cold (a retained host copy given back, a host write), costs
   * a step or two. h: the first from the head older than n (n goes before
   * it); t: the first from the tail newer than n (n goes after it). */
  mt_policy_node_t *h = p->dhead.dnext, *t = p->dhead.dprev;
  for (;;) {
    if (h == &p->dhead || h->stamp < n->stamp) {
      d_link_after(h->dprev, n);
      return;
    }
    if (t == &p->dhead || t->stamp > n->stamp) {
      d_link_after(t, n);
      return;
    }
    h = h->dnext;
    t = t->dprev;
  }
}

static mt_policy_node_t *lru_victim(mt_policy_t *p, mt_policy_eligible_fn eligible, void *arg) {
  for (mt_policy_node_t *n = p->head.prev; n != &p->head; n = n->prev)
    if (eligible == NULL || eligible(n, arg)) return n;
  return NULL;
}

static mt_policy_node_t *lru_victim_in(mt_policy_t *p, unsigned mask, mt_policy_eligible_fn eligible, void *arg) {
  if ((mask & MT_COST_ALL) == MT_COST_ALL) return lru_victim(p, eligible, arg);
  if ((mask & MT_COST_ALL) == MT_COST_BIT(MT_COST_DIRTY)) {
    for (mt_policy_node_t *n = p->dhead.dprev; n != &p->dhead; n = n->dprev)
      if (eligible == NULL || eligible(n, arg)) return n;
    return NULL;
  }
  for (mt_policy_node_t *n = p->head.prev; n != &p->head; n = n->prev) {
    unsigned c = is_dirty(n) ? MT_COST_DIRTY : n->cost;
    if ((mask & MT_COST_BIT(c)) && (eligible == NULL || eligible(n, arg))) return n;
  }
  return NULL;
}

const mt_policy_ops_t _mt_policy_lru = {
  .name = "lru",
  .create = lru_create,
  .destroy = lru_destroy,
  .insert = lru_insert,
  .remove = lru_remove,
  .touch = lru_touch,
  .victim = lru_victim,
  .victim_in = lru_victim_in,
  .recost = lru_recost,
};
