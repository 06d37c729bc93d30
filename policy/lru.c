/*
 * lru.c - least-recently-used eviction.
 *
 * The baseline the predictor-driven policy must beat: a doubly linked list,
 * most recently used at the head; a touch moves a node to the head, a
 * victim is the first eligible node from the tail. All O(1) except victim,
 * which skips ineligible (in-flight) nodes at the cold end.
 */
#include <stdlib.h>
#include <string.h>

#include "policy.h"

struct mt_policy {
  mt_policy_node_t head; /* sentinel: head.next is the most recent */
  uint64_t clock;
};

static mt_policy_t *lru_create(void) {
  mt_policy_t *p = calloc(1, sizeof(*p));
  if (p == NULL) return NULL;
  p->head.next = p->head.prev = &p->head;
  return p;
}

static void lru_destroy(mt_policy_t *p) {
  free(p);
}

static void unlink_node(mt_policy_node_t *n) {
  n->prev->next = n->next;
  n->next->prev = n->prev;
  n->prev = n->next = NULL;
  n->linked = false;
}

static void link_head(mt_policy_t *p, mt_policy_node_t *n) {
  n->next = p->head.next;
  n->prev = &p->head;
  p->head.next->prev = n;
  p->head.next = n;
  n->linked = true;
  n->stamp = ++p->clock;
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
    return;
  }
  unlink_node(n);
  link_head(p, n);
}

static mt_policy_node_t *lru_victim(mt_policy_t *p, mt_policy_eligible_fn eligible, void *arg) {
  for (mt_policy_node_t *n = p->head.prev; n != &p->head; n = n->prev)
    if (eligible == NULL || eligible(n, arg)) return n;
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
};
