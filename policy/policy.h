/*
 * policy.h - eviction policies behind one interface.
 *
 * A policy orders the chunks that are resident on the device and names the
 * one to evict next. It is pure logic: it sees only the node embedded in
 * each chunk, never the chunk, the device or CUDA, so `mt-trace replay` can
 * run it unchanged. The pager tells it when a chunk arrives on the device,
 * is used, and leaves; when memory is needed it asks for victims, and the
 * eligible() callback lets the pager veto chunks it cannot evict now (held
 * by an in-flight launch, part of the launch being prepared, pinned).
 *
 * Policies: lru (lru.c), the baseline; nextuse (nextuse.c), farthest
 * predicted next use first, which needs the caller to set each node's due.
 *
 * Threading: none of its own; the pager calls it under its lock.
 */
#ifndef MT_POLICY_H
#define MT_POLICY_H

#include <stdbool.h>
#include <stdint.h>

typedef struct mt_policy_node {
  struct mt_policy_node *prev, *next;
  struct mt_policy_node *dprev, *dnext; /* policy-private (LRU: the dirty sub-list) */
  uint64_t stamp;       /* policy-private (LRU: last use, in touches) */
  uint64_t due;         /* set by the caller before insert/touch: the clock of the
                           next use expected (predictor/reuse.h), 0 = unknown;
                           read by policies that look ahead (nextuse) */
  bool linked;
  uint8_t cost;         /* set by the caller before insert/touch, and before recost()
                           when it changes in between: MT_COST_* */
} mt_policy_node_t;

/* What evicting a node costs, cheapest first. A policy created weighing
 * (nextuse) offers every CHEAP node before any DIRTY one and DEAD nodes
 * last, each class in its own order; otherwise victim() ignores cost, and
 * cost only selects nodes for victim_in(). */
enum {
  MT_COST_CHEAP = 0, /* no copy out: clean, or data dead long before its free */
  MT_COST_DIRTY = 1, /* a copy out now, and a fetch back at its next use */
  MT_COST_DEAD = 2,  /* dead data freed soon: its memory comes back for nothing */
  MT_COST_N = 3,
};
#define MT_COST_BIT(c) (1u << (c))
#define MT_COST_ALL ((1u << MT_COST_N) - 1)

typedef bool (*mt_policy_eligible_fn)(mt_policy_node_t *n, void *arg);

typedef struct mt_policy mt_policy_t;

typedef struct mt_policy_ops {
  const char *name;
  /* Returns a new policy state, or NULL when out of memory. weigh: victim()
     offers cheaper cost classes first (where the policy can, `weighs`). */
  mt_policy_t *(*create)(bool weigh);
  void (*destroy)(mt_policy_t *p);
  void (*insert)(mt_policy_t *p, mt_policy_node_t *n);  /* became resident */
  void (*remove)(mt_policy_t *p, mt_policy_node_t *n);  /* left the device */
  void (*touch)(mt_policy_t *p, mt_policy_node_t *n);   /* used by a launch or copy */
  /* The node to evict first among those eligible() accepts, or NULL. */
  mt_policy_node_t *(*victim)(mt_policy_t *p, mt_policy_eligible_fn eligible, void *arg);
  /* The same among the nodes whose cost is in mask (MT_COST_BIT), in
     victim()'s order; without walking other classes' nodes where the
     policy files them apart (nextuse weighing; LRU for MT_COST_DIRTY). */
  mt_policy_node_t *(*victim_in)(mt_policy_t *p, unsigned mask, mt_policy_eligible_fn eligible, void *arg);
  /* n's cost changed since it was filed (n linked): refiled, its place
     in the order kept where the policy does not weigh. */
  void (*recost)(mt_policy_t *p, mt_policy_node_t *n);
  /* The clock (the due's unit) is now now, the stream's period is period
     (0 = unknown). NULL for policies that do not look ahead. */
  void (*advance)(mt_policy_t *p, uint64_t now, uint64_t period);
  /* Estimates changed for nodes filed without one (the period became
     known, or changed): each such node gets due_of(n, arg) as its due and
     is refiled by it. NULL for policies that do not look ahead. */
  void (*redue)(mt_policy_t *p, uint64_t (*due_of)(mt_policy_node_t *n, void *arg), void *arg);
  /* Whether it reads `due`: the caller need not compute dues otherwise. */
  bool uses_due;
  /* Whether create(true) makes victim() weigh cost (nextuse; LRU never:
     it is the baseline). */
  bool weighs;
} mt_policy_ops_t;

extern const mt_policy_ops_t _mt_policy_lru;
extern const mt_policy_ops_t _mt_policy_nextuse;

/* The policy named name ("lru", "nextuse"), or NULL. */
const mt_policy_ops_t *_mt_policy_find(const char *name);

#endif
