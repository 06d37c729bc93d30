/* Description: the pager's pure parts: the LRU and next-use policies' order
 * and veto, and
 * the address-space allocator's first fit, merging and exhaustion, against
 * hand-computed expectations. */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "pager_internal.h"
#include "policy.h"

static bool odd_only(mt_policy_node_t *n, void *arg) {
  mt_policy_node_t *base = arg;
  return (n - base) % 2 == 1;
}

Test(lru, order_touch_and_veto) {
  const mt_policy_ops_t *ops = _mt_policy_find("lru");
  cr_assert_not_null(ops);
  cr_assert_null(_mt_policy_find("nope"));
  mt_policy_t *p = ops->create(true);
  mt_policy_node_t n[5] = {0};
  cr_assert_null(ops->victim(p, NULL, NULL));
  for (int i = 0; i < 5; i++) ops->insert(p, &n[i]);
  cr_assert_eq(ops->victim(p, NULL, NULL), &n[0], "least recently inserted first");
  ops->touch(p, &n[0]);
  cr_assert_eq(ops->victim(p, NULL, NULL), &n[1]);
  cr_assert_eq(ops->victim(p, odd_only, n), &n[1]);
  ops->touch(p, &n[1]);
  cr_assert_eq(ops->victim(p, odd_only, n), &n[3], "vetoed nodes are skipped");
  ops->remove(p, &n[2]);
  ops->remove(p, &n[2]); /* twice is harmless */
  cr_assert_eq(ops->victim(p, NULL, NULL), &n[3]);
  ops->touch(p, &n[2]); /* not resident: no effect */
  ops->remove(p, &n[3]);
  ops->remove(p, &n[4]);
  cr_assert_eq(ops->victim(p, NULL, NULL), &n[0]);
  ops->destroy(p);
}

static void due(const mt_policy_ops_t *ops, mt_policy_t *p, mt_policy_node_t *n, uint64_t d, bool insert) {
  n->due = d;
  if (insert) ops->insert(p, n);
  else ops->touch(p, n);
}

Test(nextuse, farthest_first_then_unknown) {
  const mt_policy_ops_t *ops = _mt_policy_find("nextuse");
  cr_assert_not_null(ops);
  cr_assert(ops->uses_due);
  cr_assert(!_mt_policy_find("lru")->uses_due);
  mt_policy_t *p = ops->create(true);
  mt_policy_node_t n[6] = {0};
  cr_assert_null(ops->victim(p, NULL, NULL));
  ops->advance(p, 10, 1000); /* clock 10, period 1000: the wheel spans 4096 ticks */
  due(ops, p, &n[0], 500, true);
  due(ops, p, &n[1], 3000, true);
  due(ops, p, &n[2], 20, true);
  due(ops, p, &n[3], 0, true);   /* unknown */
  due(ops, p, &n[4], 9000, true); /* beyond the wheel: the farthest bucket */
  cr_assert_eq(ops->victim(p, NULL, NULL), &n[4], "farthest next use first");
  ops->remove(p, &n[4]);
  cr_assert_eq(ops->victim(p, NULL, NULL), &n[1]);
  cr_assert_eq(ops->victim(p, odd_only, n), &n[1]);
  cr_assert_eq(ops->victim(p, (mt_policy_eligible_fn)NULL, NULL), &n[1]);
  due(ops, p, &n[1], 15, false); /* used again, next use soon */
  cr_assert_eq(ops->victim(p, NULL, NULL), &n[0]);
  cr_assert_eq(ops->victim(p, odd_only, n), &n[1], "vetoed nodes are skipped");
  ops->remove(p, &n[0]);
  ops->remove(p, &n[0]); /* twice is harmless */
  cr_assert_eq(ops->victim(p, NULL, NULL), &n[2]);
  ops->remove(p, &n[2]);
  ops->remove(p, &n[1]);
  cr_assert_eq(ops->victim(p, NULL, NULL), &n[3], "unknown ones last");
  ops->destroy(p);
}

Test(nextuse, passed_dues_become_unknown_and_far_ones_are_refiled) {
  const mt_policy_ops_t *ops = _mt_policy_find("nextuse");
  mt_policy_t *p = ops->create(true);
  mt_policy_node_t n[4] = {0};
  ops->advance(p, 1, 100); /* the wheel spans 4096 ticks */
  due(ops, p, &n[0], 50, true);
  due(ops, p, &n[1], 60, true);
  due(ops, p, &n[2], 100000, true); /* clamped into the farthest bucket */
  due(ops, p, &n[3], 0, true);
  ops->advance(p, 55, 100);
  /* n[0]'s use has passed: it joins the unknown list (hot end) */
  cr_assert_eq(ops->victim(p, NULL, NULL), &n[2]);
  ops->remove(p, &n[2]);
  cr_assert_eq(ops->victim(p, NULL, NULL), &n[1]);
  ops->remove(p, &n[1]);
  cr_assert_eq(ops->victim(p, NULL, NULL), &n[3], "the older unknown first");
  ops->remove(p, &n[3]);
  cr_assert_eq(ops->victim(p, NULL, NULL), &n[0]);
  /* a whole wheel turn later, the clamped node is still the farthest */
  due(ops, p, &n[2], 100000, true);
  due(ops, p, &n[1], 9000, true);
  ops->advance(p, 8000, 100);
  cr_assert_eq(ops->victim(p, NULL, NULL), &n[2]);
  ops->remove(p, &n[2]);
  cr_assert_eq(ops->victim(p, NULL, NULL), &n[1]);
  /* a new period rescales the wheel; order is kept */
  due(ops, p, &n[2], 200000, true);
  ops->advance(p, 8001, 50000);
  cr_assert_eq(ops->victim(p, NULL, NULL), &n[2]);
  ops->remove(p, &n[2]);
  cr_assert_eq(ops->victim(p, NULL, NULL), &n[1]);
  ops->destroy(p);
}

/* redue(): nodes filed without a due are asked for one again and refiled
 * by it; those still without one keep their LRU order; the wheel's nodes
 * are not asked. */
typedef struct redue_arg {
  mt_policy_node_t *base; /* the test's nodes */
  uint64_t due[5];        /* the new estimate of each */
  int asked;
} redue_arg_t;

static uint64_t due_of_index(mt_policy_node_t *n, void *arg) {
  redue_arg_t *a = arg;
  a->asked++;
  return a->due[n - a->base];
}

Test(nextuse, redue_files_the_unknown_by_their_new_dues) {
  const mt_policy_ops_t *ops = _mt_policy_find("nextuse");
  mt_policy_t *p = ops->create(false);
  mt_policy_node_t n[5] = {0};
  for (int i = 0; i < 5; i++) due(ops, p, &n[i], 0, true); /* n[0] the coldest */
  ops->advance(p, 10, 100);
  due(ops, p, &n[4], 30, true); /* the only one on the wheel */
  cr_assert_eq(ops->victim(p, NULL, NULL), &n[4], "the wheel before the unknown");
  /* the new estimates, by node: n[1] far, n[2] near, n[0] and n[3] unknown */
  redue_arg_t a = {n, {0, 90, 20, 0, 12345}, 0};
  ops->redue(p, due_of_index, &a);
  cr_assert_eq(a.asked, 4, "only the unknown are asked");
  cr_assert_eq(n[4].due, 30);
  mt_policy_node_t *order[5] = {&n[1], &n[4], &n[2], &n[0], &n[3]};
  for (int i = 0; i < 5; i++) {
    cr_assert_eq(ops->victim(p, NULL, NULL), order[i], "victim %d", i);
    ops->remove(p, order[i]);
  }
  ops->destroy(p);
}

/* Cost classes: every cheap node before any dirty one, dead ones last,
 * each class farthest first; recost() refiles; victim_in() looks in the
 * classes asked for; a rescale keeps the classes; created not weighing,
 * the order is by next use alone. */
Test(nextuse, cheap_before_dirty_before_dead) {
  const mt_policy_ops_t *ops = _mt_policy_find("nextuse");
  cr_assert(ops->weighs);
  cr_assert(!_mt_policy_find("lru")->weighs, "the baseline does not weigh");
  mt_policy_t *p = ops->create(true);
  mt_policy_node_t n[6] = {0};
  ops->advance(p, 10, 1000);
  n[0].cost = MT_COST_DIRTY;
  due(ops, p, &n[0], 3000, true); /* the farthest, dirty */
  n[1].cost = MT_COST_CHEAP;
  due(ops, p, &n[1], 20, true);   /* clean, needed soon */
  n[2].cost = MT_COST_CHEAP;
  due(ops, p, &n[2], 0, true);    /* clean, unknown */
  n[3].cost = MT_COST_DEAD;
  due(ops, p, &n[3], 4000, true); /* dead data, the farthest of all */
  n[4].cost = MT_COST_DIRTY;
  due(ops, p, &n[4], 500, true);
  cr_assert_eq(ops->victim(p, NULL, NULL), &n[1], "a clean chunk before any dirty one");
  cr_assert_eq(ops->victim_in(p, MT_COST_BIT(MT_COST_DIRTY), NULL, NULL), &n[0], "the farthest dirty one");
  cr_assert_eq(ops->victim_in(p, MT_COST_BIT(MT_COST_DEAD), NULL, NULL), &n[3]);
  ops->remove(p, &n[1]);
  cr_assert_eq(ops->victim(p, NULL, NULL), &n[2], "then the cheap unknown ones");
  ops->remove(p, &n[2]);
  cr_assert_eq(ops->victim(p, NULL, NULL), &n[0], "then dirty, farthest first");
  cr_assert_eq(ops->victim(p, odd_only, n), &n[3], "vetoed dirty ones: the dead go last");
  n[4].cost = MT_COST_CHEAP; /* written back: clean now */
  ops->recost(p, &n[4]);
  cr_assert_eq(ops->victim(p, NULL, NULL), &n[4], "refiled as cheap");
  cr_assert_null(ops->victim_in(p, MT_COST_BIT(MT_COST_CHEAP), odd_only, n));
  ops->advance(p, 11, 50000); /* a new scale: classes kept */
  cr_assert_eq(ops->victim(p, NULL, NULL), &n[4]);
  ops->remove(p, &n[4]);
  cr_assert_eq(ops->victim(p, NULL, NULL), &n[0]);
  ops->remove(p, &n[0]);
  cr_assert_eq(ops->victim(p, NULL, NULL), &n[3]);
  ops->remove(p, &n[3]);
  cr_assert_null(ops->victim(p, NULL, NULL));
  ops->destroy(p);
  /* not weighing: farthest first whatever the cost; victim_in filters */
  memset(n, 0, sizeof(n));
  p = ops->create(false);
  ops->advance(p, 10, 1000);
  n[0].cost = MT_COST_CHEAP;
  due(ops, p, &n[0], 3000, true);
  n[1].cost = MT_COST_DIRTY;
  due(ops, p, &n[1], 4000, true);
  n[2].cost = MT_COST_CHEAP;
  due(ops, p, &n[2], 0, true);
  cr_assert_eq(ops->victim(p, NULL, NULL), &n[1]);
  cr_assert_eq(ops->victim_in(p, MT_COST_BIT(MT_COST_CHEAP), NULL, NULL), &n[0]);
  n[1].cost = MT_COST_CHEAP;
  ops->recost(p, &n[1]);
  cr_assert_eq(ops->victim(p, NULL, NULL), &n[1], "recost keeps its place");
  ops->destroy(p);
}

/* LRU never weighs: the order is by use alone, whatever the cost; its
 * dirty sub-list gives victim_in(DIRTY) the same order without walking
 * the others, through touches, recosts (in place by stamp) and removals. */
Test(lru, dirty_sublist_keeps_the_order) {
  const mt_policy_ops_t *lru = _mt_policy_find("lru");
  mt_policy_t *p = lru->create(true);
  mt_policy_node_t n[6] = {0};
  for (int i = 0; i < 6; i++) {
    n[i].cost = i % 2 ? MT_COST_DIRTY : MT_COST_CHEAP;
    lru->insert(p, &n[i]);
  }
  const unsigned dirty = MT_COST_BIT(MT_COST_DIRTY);
  cr_assert_eq(lru->victim(p, NULL, NULL), &n[0], "cost ignored");
  cr_assert_eq(lru->victim_in(p, dirty, NULL, NULL), &n[1]);
  cr_assert_eq(lru->victim_in(p, MT_COST_BIT(MT_COST_CHEAP), NULL, NULL), &n[0]);
  lru->touch(p, &n[1]);
  cr_assert_eq(lru->victim_in(p, dirty, NULL, NULL), &n[3], "touched: the hot end");
  n[2].cost = MT_COST_DIRTY; /* written, not used: in place */
  lru->recost(p, &n[2]);
  cr_assert_eq(lru->victim_in(p, dirty, NULL, NULL), &n[2], "in place by its stamp");
  cr_assert_eq(lru->victim(p, NULL, NULL), &n[0], "the order unchanged");
  n[2].cost = MT_COST_CHEAP;
  lru->recost(p, &n[2]);
  cr_assert_eq(lru->victim_in(p, dirty, NULL, NULL), &n[3]);
  n[0].cost = MT_COST_DIRTY;
  lru->touch(p, &n[0]); /* written by a use: dirty at the hot end */
  lru->remove(p, &n[3]);
  cr_assert_eq(lru->victim_in(p, dirty, NULL, NULL), &n[5]);
  cr_assert_eq(lru->victim_in(p, dirty, odd_only, n), &n[5]);
  lru->remove(p, &n[5]);
  cr_assert_eq(lru->victim_in(p, dirty, NULL, NULL), &n[1]);
  lru->remove(p, &n[1]);
  cr_assert_eq(lru->victim_in(p, dirty, NULL, NULL), &n[0]);
  cr_assert_null(lru->victim_in(p, dirty, odd_only, n));
  lru->touch(p, &n[0]); /* at the head already: still the sub-list's */
  cr_assert_eq(lru->victim_in(p, dirty, NULL, NULL), &n[0]);
  lru->remove(p, &n[0]);
  cr_assert_null(lru->victim_in(p, dirty, NULL, NULL));
  cr_assert_eq(lru->victim(p, NULL, NULL), &n[2]);
  lru->destroy(p);
}

/* Random inserts, touches, removals and cost changes: every seventh, the
 * dirty nodes victim_in() walks come in exactly victim()'s order (a veto
 * that rejects every node records the whole walk). */
typedef struct {
  mt_policy_node_t *v[64];
  int n;
  bool dirty_only;
} order_t;

static bool collect_order(mt_policy_node_t *n, void *arg) {
  order_t *o = arg;
  if (!o->dirty_only || n->cost == MT_COST_DIRTY) o->v[o->n++] = n;
  return false;
}

Test(lru, dirty_sublist_matches_the_order_under_random_operations) {
  const mt_policy_ops_t *lru = _mt_policy_find("lru");
  mt_policy_t *p = lru->create(true);
  mt_policy_node_t n[64];
  memset(n, 0, sizeof(n));
  uint32_t x = 12345;
  for (int step = 0; step < 20000; step++) {
    x = x * 1103515245u + 12345u;
    mt_policy_node_t *m = &n[(x >> 8) % 64];
    switch ((x >> 20) % 4) {
    case 0: m->cost = (uint8_t)((x >> 24) % 3); lru->insert(p, m); break;
    case 1: m->cost = (uint8_t)((x >> 24) % 3); lru->touch(p, m); break;
    case 2: lru->remove(p, m); break;
    default:
      if (m->linked) {
        m->cost = (uint8_t)((x >> 24) % 3);
        lru->recost(p, m);
      }
    }
    if (step % 7) continue;
    order_t all = {.n = 0, .dirty_only = true}, sub = {.n = 0, .dirty_only = false};
    (void)lru->victim(p, collect_order, &all);
    (void)lru->victim_in(p, MT_COST_BIT(MT_COST_DIRTY), collect_order, &sub);
    cr_assert_eq(sub.n, all.n, "step %d: %d dirty nodes on the sub-list, %d in the order", step, sub.n, all.n);
    for (int i = 0; i < all.n; i++) cr_assert_eq(sub.v[i], all.v[i], "step %d: position %d", step, i);
  }
  lru->destroy(p);
}

Test(vaspace, first_fit_merge_and_exhaustion) {
  mt_vaspace_t v;
  const size_t C = 1 << 21;
  uintptr_t base = (uintptr_t)1 << 40, a, b, c, d;
  cr_assert_eq(_mt_va_init(&v, base, 10), 0);
  cr_assert_eq(_mt_va_alloc(&v, 3, C, &a), 0);
  cr_assert_eq(a, base);
  cr_assert_eq(_mt_va_alloc(&v, 2, C, &b), 0);
  cr_assert_eq(b, base + 3 * C);
  cr_assert_eq(_mt_va_alloc(&v, 4, C, &c), 0);
  cr_assert_eq(c, base + 5 * C);
  cr_assert_eq(_mt_va_alloc(&v, 2, C, &d), -ENOMEM, "only one chunk left");
  cr_assert_eq(_mt_va_free(&v, a, 3, C), 0);
  cr_assert_eq(_mt_va_alloc(&v, 2, C, &d), 0);
  cr_assert_eq(d, base, "first fit reuses the freed extent");
  cr_assert_eq(_mt_va_free(&v, d, 2, C), 0);
  cr_assert_eq(_mt_va_free(&v, b, 2, C), 0); /* merges with [0,3) into [0,5) */
  cr_assert_eq(_mt_va_alloc(&v, 5, C, &d), 0);
  cr_assert_eq(d, base);
  cr_assert_eq(_mt_va_free(&v, c, 4, C), 0); /* back to the tail */
  cr_assert_eq(_mt_va_free(&v, d, 5, C), 0);
  cr_assert_eq(_mt_va_alloc(&v, 10, C, &d), 0, "everything merged back");
  cr_assert_eq(d, base);
  _mt_va_fini(&v);
}
