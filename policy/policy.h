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
 * Threading: none of its own; the pager calls it under its lock.
 */
#ifndef MT_POLICY_H
#define MT_POLICY_H

#include <stdbool.h>
#include <stdint.h>

typedef struct mt_policy_node {
  struct mt_policy_node *prev, *next;
  uint64_t stamp;       /* policy-private (LRU: last use, in touches) */
  bool linked;
} mt_policy_node_t;

typedef bool (*mt_policy_eligible_fn)(mt_policy_node_t *n, void *arg);

typedef struct mt_policy mt_policy_t;

typedef struct mt_policy_ops {
  const char *name;
  /* Returns a new policy state, or NULL when out of memory. */
  mt_policy_t *(*create)(void);
  void (*destroy)(mt_policy_t *p);
  void (*insert)(mt_policy_t *p, mt_policy_node_t *n);  /* became resident */
  void (*remove)(mt_policy_t *p, mt_policy_node_t *n);  /* left the device */
  void (*touch)(mt_policy_t *p, mt_policy_node_t *n);   /* used by a launch or copy */
  /* The node to evict first among those eligible() accepts, or NULL. */
  mt_policy_node_t *(*victim)(mt_policy_t *p, mt_policy_eligible_fn eligible, void *arg);
} mt_policy_ops_t;

/* The policy named name ("lru"), or NULL. */
const mt_policy_ops_t *_mt_policy_find(const char *name);

#endif
