/*
 * Description: the correlation predictor learns a repeated launch stream,
 * walks it forward with footprints and a falling confidence, resynchronises
 * after a divergence, relearns a changed pattern within a few iterations,
 * tolerates an inserted eval pass, and stays inside its memory bound.
 * The context predictor (MT_PREDICTOR=context) passes the same stream
 * tests (suite "context") and tells recomputed layers apart.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "mix.h"
#include "predictor.h"

static const mt_predictor_ops_t *C(void) {
  const mt_predictor_ops_t *ops = _mt_predictor_find("correlation");
  cr_assert_not_null(ops);
  return ops;
}

/* Launch ids 1000+i; launch i has (i % 5) + 1 regions keyed 100*i + k. */
static size_t fp_of(uint64_t id, uint64_t *r) {
  size_t n = (size_t)(id % 5) + 1;
  for (size_t k = 0; k < n; k++) r[k] = id * 100 + k;
  return n;
}

static bool obs(const mt_predictor_ops_t *ops, mt_predictor_t *p, uint64_t id) {
  uint64_t r[8];
  size_t n = fp_of(id, r);
  return ops->observe(p, id, r, n);
}

/* Feeds seq (len ids) once; returns how many were predicted. */
static size_t feed(const mt_predictor_ops_t *ops, mt_predictor_t *p, const uint64_t *seq, size_t len) {
  size_t hits = 0;
  for (size_t i = 0; i < len; i++) hits += obs(ops, p, seq[i]);
  return hits;
}

Test(predictor, find) {
  cr_assert_not_null(_mt_predictor_find("none"));
  cr_assert_not_null(_mt_predictor_find("correlation"));
  cr_assert_null(_mt_predictor_find("oracle"));
}

Test(predictor, none_predicts_nothing) {
  const mt_predictor_ops_t *ops = _mt_predictor_find("none");
  mt_predictor_t *p = ops->create(NULL);
  for (int i = 0; i < 10; i++) cr_assert(!obs(ops, p, 1000 + (uint64_t)(i % 3)));
  mt_pred_launch_t out[4];
  cr_assert_eq(ops->predict(p, out, 4), 0);
  mt_predictor_stats_t st;
  ops->stats(p, &st);
  cr_assert_eq(st.observed, 10);
  cr_assert_eq(st.predicted, 0);
  ops->destroy(p);
}

Test(predictor, empty_predicts_nothing) {
  const mt_predictor_ops_t *ops = C();
  mt_predictor_t *p = ops->create(NULL);
  mt_pred_launch_t out[4];
  cr_assert_eq(ops->predict(p, out, 4), 0);
  cr_assert(!obs(ops, p, 1000));
  cr_assert_eq(ops->predict(p, out, 4), 0);
  ops->destroy(p);
}

/* A loop whose launches repeat inside one iteration (A B A C): first order
   alone cannot tell what follows A, second order can. */
Test(predictor, second_order_walk_with_footprints) {
  const mt_predictor_ops_t *ops = C();
  mt_predictor_t *p = ops->create(NULL);
  const uint64_t it[] = {1000, 1001, 1000, 1002, 1003};
  for (int r = 0; r < 3; r++) feed(ops, p, it, 5);
  /* the third iteration is fully predicted */
  cr_assert_eq(feed(ops, p, it, 5), 5);
  /* last two observed: 1002, 1003; the future is 1000 1001 1000 1002 1003 1000 ... */
  mt_pred_launch_t out[8];
  size_t n = ops->predict(p, out, 8);
  cr_assert_eq(n, 8);
  for (size_t i = 0; i < 8; i++) {
    cr_assert_eq(out[i].id, it[i % 5], "step %zu: %llu", i, (unsigned long long)out[i].id);
    uint64_t want[8];
    size_t wn = fp_of(out[i].id, want);
    cr_assert_eq(out[i].nkeys, wn);
    cr_assert(memcmp(out[i].keys, want, wn * sizeof(want[0])) == 0);
    cr_assert(out[i].confidence > 0.0 && out[i].confidence <= 1.0);
    if (i) cr_assert(out[i].confidence <= out[i - 1].confidence);
  }
  /* a perfectly repeated stream is predicted with certainty */
  cr_assert_float_eq(out[7].confidence, 1.0, 1e-12);
  ops->destroy(p);
}

Test(predictor, footprint_follows_latest) {
  const mt_predictor_ops_t *ops = C();
  mt_predictor_t *p = ops->create(NULL);
  uint64_t a = 7, b = 8;
  for (int r = 0; r < 3; r++) {
    ops->observe(p, 1, &a, 1);
    ops->observe(p, 2, NULL, 0);
  }
  mt_pred_launch_t out[2];
  cr_assert_eq(ops->predict(p, out, 2), 2);
  cr_assert_eq(out[0].id, 1);
  cr_assert_eq(out[0].nkeys, 1);
  cr_assert_eq(out[0].keys[0], 7);
  cr_assert_eq(out[1].id, 2);
  cr_assert_eq(out[1].nkeys, 0);
  cr_assert_null(out[1].keys);
  ops->observe(p, 1, &b, 1); /* launch 1's footprint changed */
  ops->observe(p, 2, NULL, 0);
  cr_assert_eq(ops->predict(p, out, 1), 1);
  cr_assert_eq(out[0].nkeys, 1);
  cr_assert_eq(out[0].keys[0], 8);
  ops->destroy(p);
}

/* Hits over one iteration of seq, fed `iters` times; returns the last count. */
static size_t hits_last(const mt_predictor_ops_t *ops, mt_predictor_t *p, const uint64_t *seq, size_t len, int iters) {
  size_t h = 0;
  for (int i = 0; i < iters; i++) h = feed(ops, p, seq, len);
  return h;
}

#define LEN 200

/* A changed pattern (a new order for the same launches, the shape of a
   sequence-length change) is relearned within a few iterations. */
static void relearns_changed_pattern(const mt_predictor_ops_t *ops) {
  mt_predictor_t *p = ops->create(NULL);
  uint64_t a[LEN], b[LEN];
  for (size_t i = 0; i < LEN; i++) {
    a[i] = 1000 + i;
    b[i] = 1000 + (i * 7) % LEN; /* 7 is coprime with 200: a permutation */
  }
  cr_assert_geq(hits_last(ops, p, a, LEN, 20), LEN - 1, "old pattern learned");
  size_t h[6];
  for (int i = 0; i < 6; i++) h[i] = feed(ops, p, b, LEN);
  cr_assert_lt(h[0], LEN / 4, "first iteration of the new pattern mostly mispredicted: %zu", h[0]);
  /* within 4 iterations the new pattern is predicted (the seam between
     iterations may cost a launch or two) */
  cr_assert_geq(h[4], LEN - 2, "after relearning: %zu %zu %zu %zu %zu", h[0], h[1], h[2], h[3], h[4]);
  cr_assert_geq(h[5], LEN - 2);
  ops->destroy(p);
}
Test(predictor, relearns_changed_pattern) { relearns_changed_pattern(C()); }
Test(context, relearns_changed_pattern) { relearns_changed_pattern(_mt_predictor_find("context")); }

/* An eval pass (a different stream) every few iterations: the training
   pattern is predicted again right after it, and resynchronisation from
   the observed launch makes the walk right again within a few launches. */
static void eval_pass_recovery(const mt_predictor_ops_t *ops) {
  mt_predictor_t *p = ops->create(NULL);
  uint64_t train[LEN], eval[LEN / 4];
  for (size_t i = 0; i < LEN; i++) train[i] = 1000 + i;
  for (size_t i = 0; i < LEN / 4; i++) eval[i] = 5000 + i;
  hits_last(ops, p, train, LEN, 10);
  size_t eval_hits[3], after[3];
  for (int r = 0; r < 3; r++) {
    eval_hits[r] = feed(ops, p, eval, LEN / 4);
    after[r] = feed(ops, p, train, LEN);
    hits_last(ops, p, train, LEN, 3);
  }
  /* the first eval pass is new; the later ones are remembered */
  cr_assert_lt(eval_hits[0], 5);
  cr_assert_geq(eval_hits[2], LEN / 4 - 3, "eval learned: %zu", eval_hits[2]);
  /* training after eval: everything but the seam is predicted */
  for (int r = 0; r < 3; r++) cr_assert_geq(after[r], LEN - 3, "after eval %d: %zu", r, after[r]);
  /* and plain training iterations are still fully predicted */
  cr_assert_geq(feed(ops, p, train, LEN), LEN - 1);
  ops->destroy(p);
}
Test(predictor, eval_pass_recovery) { eval_pass_recovery(C()); }
Test(context, eval_pass_recovery) { eval_pass_recovery(_mt_predictor_find("context")); }

/* Divergence mid-iteration: a launch jumps ahead; the prediction is wrong
   once, then the walk continues from the observed launch. */
static void resynchronises_after_divergence(const mt_predictor_ops_t *ops) {
  mt_predictor_t *p = ops->create(NULL);
  uint64_t train[LEN];
  for (size_t i = 0; i < LEN; i++) train[i] = 1000 + i;
  hits_last(ops, p, train, LEN, 5);
  for (size_t i = 0; i < 50; i++) obs(ops, p, train[i]);
  cr_assert(!obs(ops, p, train[120]), "a jump is a divergence");
  mt_pred_launch_t out[4];
  cr_assert_eq(ops->predict(p, out, 4), 4);
  /* the walk goes on from 120, which was only ever followed by 121: its
     launch entry is as sure as before the jump (no pair was ever needed;
     at a fork it would be worth half: one_off_detour_keeps_successor) */
  cr_assert_eq(out[0].id, train[121]);
  cr_assert_float_eq(out[0].confidence, 1.0, 1e-12);
  cr_assert_eq(out[3].id, train[124]);
  cr_assert(obs(ops, p, train[121]));
  ops->destroy(p);
}
Test(predictor, resynchronises_after_divergence) { resynchronises_after_divergence(C()); }
Test(context, resynchronises_after_divergence) { resynchronises_after_divergence(_mt_predictor_find("context")); }

/* A one-off detour keeps the learned successor first (its count drops by
   one only), while confidence shows the doubt. */
static void one_off_detour_keeps_successor(const mt_predictor_ops_t *ops) {
  mt_predictor_t *p = ops->create(NULL);
  const uint64_t s[] = {1, 2, 3, 4};
  hits_last(ops, p, s, 4, 10);
  const uint64_t d[] = {1, 2, 9, 4};
  feed(ops, p, d, 4);
  const uint64_t upto2[] = {1, 2};
  feed(ops, p, upto2, 2);
  mt_pred_launch_t out[1];
  cr_assert_eq(ops->predict(p, out, 1), 1);
  cr_assert_eq(out[0].id, 3);
  cr_assert_lt(out[0].confidence, 1.0);
  cr_assert_gt(out[0].confidence, 0.5);
  ops->destroy(p);
}
Test(predictor, one_off_detour_keeps_successor) { one_off_detour_keeps_successor(C()); }
Test(context, one_off_detour_keeps_successor) { one_off_detour_keeps_successor(_mt_predictor_find("context")); }

/* One training iteration with activation checkpointing every layer, as
   mt-trace synth writes it: each layer's forward (4 launches) runs in the
   first pass and again, the same launches, before that layer's backward
   (3 launches). Returns its length. */
#define CK_LAYERS 6
static size_t checkpointed(uint64_t *seq) {
  size_t n = 0;
  for (uint64_t l = 0; l < CK_LAYERS; l++)
    for (uint64_t k = 0; k < 4; k++) seq[n++] = 2000 + 10 * l + k;
  seq[n++] = 2999; /* the head */
  for (uint64_t l = CK_LAYERS; l-- > 0;) {
    for (uint64_t k = 0; k < 4; k++) seq[n++] = 2000 + 10 * l + k; /* recomputed */
    for (uint64_t k = 0; k < 3; k++) seq[n++] = 3000 + 10 * l + k;
  }
  seq[n++] = 3999; /* the optimizer */
  return n;
}

/* The pair that ends a recomputed forward is followed by the next layer
   in the first pass and by the backward in the recomputation: the context
   (how the shared run was entered; MT_PREDICTOR=context) tells them
   apart, so from the third iteration on every launch is predicted, walks
   included; the second misses the seam and the first layer's two
   branches, whose merge point the first iteration's first launch (no
   predecessor) could not show. The pairs alone ("correlation", the
   recency rule) miss two launches per layer in every iteration (13 of 68
   in the second, 12 in the third: checked below too). */
Test(predictor, checkpointed_recompute_is_told_apart) {
  const mt_predictor_ops_t *ops = _mt_predictor_find("context");
  cr_assert_not_null(ops);
  mt_predictor_t *p = ops->create(NULL);
  uint64_t seq[128];
  size_t n = checkpointed(seq);
  feed(ops, p, seq, n);
  size_t h2 = feed(ops, p, seq, n), h3 = feed(ops, p, seq, n);
  cr_assert_geq(h2, n - 3, "second iteration: %zu of %zu predicted", h2, n);
  cr_assert_eq(h3, n, "third iteration: %zu of %zu predicted", h3, n);
  /* walks through both branches: from the end of layer 2's first forward,
     and from the end of its recomputed one */
  mt_pred_launch_t out[8];
  for (size_t i = 0; i < n; i++) {
    obs(ops, p, seq[i]);
    size_t m = ops->predict(p, out, 8);
    for (size_t k = 0; k < m && i + 1 + k < n; k++)
      cr_assert_eq(out[k].id, seq[i + 1 + k], "after launch %zu, step %zu", i, k);
  }
  ops->destroy(p);
  /* the plain correlation predictor, same stream */
  const mt_predictor_ops_t *c = C();
  p = c->create(NULL);
  for (int it = 0; it < 3; it++) h2 = feed(c, p, seq, n);
  cr_assert_eq(h2, n - 12, "correlation: %zu of %zu", h2, n);
  c->destroy(p);
}

/* A table far smaller than the stream stays within its bytes, evicts, and
   still predicts a small hot loop that runs after it: the stream made the
   table overflow (Loops too long), so the loop's keys come in through the
   door once the stream's tags there have expired (half a window, 512
   launches: some ten laps) and are named in full from then on. */
Test(predictor, bounded_memory_and_eviction) {
  const mt_predictor_ops_t *ops = C();
  mt_predictor_config_t cfg = {.capacity = 1024, .footprint_regions = 4096};
  mt_predictor_t *p = ops->create(&cfg);
  mt_predictor_stats_t st;
  ops->stats(p, &st);
  size_t bytes0 = st.table_bytes;
  cr_assert_leq(bytes0, 1024 * 32 + 4096 * 16 + 8192, "32 B/entry + 16 B/region: %zu", bytes0);
  for (uint64_t i = 0; i < 100000; i++) obs(ops, p, 1000000 + i);
  ops->stats(p, &st);
  cr_assert_eq(st.table_bytes, bytes0, "no growth");
  /* one key a launch (a launch entry; no launch here is a fork) */
  cr_assert_geq(st.evictions + st.refused, 100000 - 1024, "cold keys found no room: %llu evicted, %llu refused",
               (unsigned long long)st.evictions, (unsigned long long)st.refused);
  uint64_t hot[50];
  for (size_t i = 0; i < 50; i++) hot[i] = 7000 + i;
  cr_assert_geq(hits_last(ops, p, hot, 50, 14), 49);
  mt_pred_launch_t out[8];
  cr_assert_eq(ops->predict(p, out, 8), 8);
  for (size_t i = 0; i < 8; i++) cr_assert_eq(out[i].nkeys, fp_of(out[i].id, (uint64_t[8]){0}));
  ops->destroy(p);
}

/* The sizing: a loop of 1,000,000 distinct launches, each with 1
   to 4 region keys (the library's 2.4 a launch on the 100B synth trace
   and the G10 traces) drawn from two regions a launch, is named in full,
   with its footprints, from its second iteration in 64 MiB. */
Test(predictor, a_million_launches_in_64_MiB) {
  const mt_predictor_ops_t *ops = C();
  const size_t L = 1000000;
  mt_predictor_t *p = ops->create(&(mt_predictor_config_t){.max_bytes = (size_t)64 << 20});
  cr_assert_not_null(p);
  mt_predictor_stats_t st;
  ops->stats(p, &st);
  cr_assert_leq(st.table_bytes, (size_t)64 << 20, "%zu", st.table_bytes);
  uint64_t *keys = malloc(L * 4 * sizeof(*keys)), x = 0x243f6a8885a308d3ULL;
  cr_assert_not_null(keys);
  for (size_t i = 0; i < 4 * L; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    keys[i] = x % (2 * L);
  }
  mt_pred_launch_t out[8];
  size_t hits = 0, with_fp = 0;
  bool fp_next = false;
  for (int it = 0; it < 2; it++) {
    hits = with_fp = 0;
    for (size_t i = 0; i < L; i++) {
      const size_t n = 1 + (size_t)(_mt_mix64(i) % 4);
      bool hit = ops->observe(p, 0x100000000ULL + i, &keys[4 * i], n);
      hits += hit;
      with_fp += hit && fp_next;
      size_t m = ops->predict(p, out, 8);
      fp_next = m > 0 && out[0].nkeys == 1 + _mt_mix64(out[0].id - 0x100000000ULL) % 4 &&
                memcmp(out[0].keys, &keys[4 * (out[0].id - 0x100000000ULL)], out[0].nkeys * sizeof(*keys)) == 0;
    }
  }
  ops->stats(p, &st);
  cr_assert_geq(hits, L - L / 100, "second iteration: %zu of %zu named", hits, L);
  cr_assert_geq(with_fp, L - L / 100, "second iteration: %zu of %zu named with their footprint", with_fp, L);
  cr_assert_eq(st.fp_dropped, 0);
  free(keys);
  ops->destroy(p);
}

/* Footprints too many: a loop whose footprints take more than the ring
   holds keeps a share of them whole (not none: each lap would overwrite
   them before their launches came round), and says how many it dropped. */
Test(predictor, footprints_too_many_keep_a_share) {
  const mt_predictor_ops_t *ops = C();
  mt_predictor_t *p = ops->create(&(mt_predictor_config_t){.capacity = 8192, .footprint_regions = 2048});
  uint64_t r[8];
  size_t named = 0;
  for (int lap = 0; lap < 6; lap++) {
    named = 0;
    for (uint64_t i = 0; i < 2000; i++) {
      uint64_t id = 1000 + i;
      size_t n = fp_of(id, r); /* 3 keys a launch on average: 6,000 a lap */
      ops->observe(p, id, r, n);
      mt_pred_launch_t out[1];
      if (ops->predict(p, out, 1) == 1 && out[0].nkeys > 0) {
        uint64_t want[8];
        cr_assert_eq(out[0].nkeys, fp_of(out[0].id, want));
        cr_assert(memcmp(out[0].keys, want, out[0].nkeys * sizeof(*want)) == 0);
        named++;
      }
    }
  }
  mt_predictor_stats_t st;
  ops->stats(p, &st);
  cr_assert_geq(named, 400, "the last lap: %zu of 2000 named with their footprint", named);
  cr_assert_leq(named, 1000, "no more than the ring holds: %zu", named);
  cr_assert_gt(st.fp_dropped, 0);
  ops->destroy(p);
}

/* Loops too long: a loop of 2,000 launches on a table of 1,024 entries
   is predicted in part, with footprints, every lap once the table has
   settled on its share; with the clock alone it was not at all (every
   entry evicted before its launch came round). Ranks by runs of launches
   keep a step and its footprint together: 929 of the 1,023 named come
   with it (520 with a rank for each launch). */
Test(predictor, a_loop_too_long_is_predicted_in_part) {
  const mt_predictor_ops_t *ops = C();
  mt_predictor_t *p = ops->create(&(mt_predictor_config_t){.capacity = 1024, .footprint_regions = 32768});
  mt_pred_launch_t out[8];
  size_t hits = 0, with_fp = 0;
  bool fp_next = false;
  for (int lap = 0; lap < 12; lap++) {
    hits = with_fp = 0;
    for (uint64_t i = 0; i < 2000; i++) {
      bool hit = obs(ops, p, 0x9000 + i);
      hits += hit;
      with_fp += hit && fp_next;
      size_t n = ops->predict(p, out, 1);
      fp_next = n == 1 && out[0].nkeys == fp_of(out[0].id, (uint64_t[8]){0});
    }
  }
  mt_predictor_stats_t st;
  ops->stats(p, &st);
  cr_assert_geq(hits, 500, "the last lap: %zu of 2000 named", hits);
  cr_assert_geq(with_fp, 750, "the last lap: %zu of 2000 named with their footprint", with_fp);
  cr_assert_gt(st.refused, 0, "the table refused keys");
  ops->destroy(p);
}

/* A memory bound (MT_PREDICTOR_MEM) sizes the table and the footprints to
   fit, using at least half of it; below the least it is raised to it. A
   loop of 2,000 launches fits in 1 MiB and is named in full from its second
   iteration; in 64 KiB (1,270 entries) it is not, and the table evicts
   (Loops too long: named in part). */
Test(predictor, a_memory_bound_sizes_the_tables) {
  const mt_predictor_ops_t *ops = C();
  mt_predictor_stats_t st;
  const size_t bounds[] = {MT_PREDICTOR_MEM_MIN, (size_t)1 << 20, MT_PREDICTOR_MEM_DEFAULT, (size_t)64 << 20};
  for (size_t b = 0; b < 4; b++) {
    mt_predictor_t *p = ops->create(&(mt_predictor_config_t){.max_bytes = bounds[b]});
    cr_assert_not_null(p);
    ops->stats(p, &st);
    cr_assert_leq(st.table_bytes, bounds[b], "within %zu: %zu", bounds[b], st.table_bytes);
    cr_assert_geq(st.table_bytes, bounds[b] / 2, "at least half of %zu: %zu", bounds[b], st.table_bytes);
    ops->destroy(p);
  }
  mt_predictor_t *p = ops->create(&(mt_predictor_config_t){.max_bytes = 1000});
  ops->stats(p, &st);
  size_t least = st.table_bytes;
  ops->destroy(p);
  p = ops->create(&(mt_predictor_config_t){.max_bytes = MT_PREDICTOR_MEM_MIN});
  ops->stats(p, &st);
  cr_assert_eq(least, st.table_bytes, "below the least: the least");
  ops->destroy(p);
  uint64_t loop[2000];
  for (size_t i = 0; i < 2000; i++) loop[i] = 0x5000 + i;
  const size_t mem[] = {(size_t)1 << 20, MT_PREDICTOR_MEM_MIN};
  for (int m = 0; m < 2; m++) {
    p = ops->create(&(mt_predictor_config_t){.max_bytes = mem[m]});
    size_t hits = 0;
    for (int it = 0; it < 3; it++) hits = feed(ops, p, loop, 2000);
    ops->stats(p, &st);
    if (m == 0) {
      cr_assert_geq(hits, 1998, "1 MiB: the loop named in full (%zu of 2000)", hits);
      cr_assert_lt(st.evictions, 100, "a few full neighbourhoods (PROBE) at most: %llu", (unsigned long long)st.evictions);
    } else {
      cr_assert_lt(hits, 1900, "64 KiB: the loop does not fit (%zu of 2000)", hits);
      cr_assert_gt(st.evictions + st.refused, 2000);
    }
    ops->destroy(p);
  }
}

/* The cached walk (depth <= walk_max, here 64) and a full walk (depth 65,
   not cached) agree at every launch of a stream that learns, diverges,
   relearns and evicts. */
static void cached_walk_equals_full_walk(const mt_predictor_ops_t *ops) {
  mt_predictor_config_t cfg = {.capacity = 256, .footprint_regions = 256, .walk_max = 64};
  mt_predictor_t *p = ops->create(&cfg);
  uint64_t x = 88172645463325252ULL;
  mt_pred_launch_t a[8], b[65];
  for (int i = 0; i < 20000; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    /* mostly a 40-launch loop, sometimes a jump, later a second loop */
    uint64_t id = i < 10000 ? 100 + (uint64_t)(i % 40) : 500 + (uint64_t)(i % 30);
    if (x % 50 == 0) id = 900 + x % 7;
    obs(ops, p, id);
    size_t na = ops->predict(p, a, 8);
    size_t nb = ops->predict(p, b, 65);
    cr_assert_eq(na, nb < 8 ? nb : 8, "launch %d", i);
    for (size_t k = 0; k < na; k++) {
      cr_assert_eq(a[k].id, b[k].id, "launch %d step %zu", i, k);
      cr_assert_float_eq(a[k].confidence, b[k].confidence, 1e-12);
      cr_assert_eq(a[k].nkeys, b[k].nkeys);
      cr_assert(a[k].nkeys == 0 || memcmp(a[k].keys, b[k].keys, a[k].nkeys * sizeof(uint64_t)) == 0);
    }
  }
  mt_predictor_stats_t st;
  ops->stats(p, &st);
  cr_assert_gt(st.evictions, 0);
  cr_assert_gt(st.predicted, 15000);
  ops->destroy(p);
}
Test(predictor, cached_walk_equals_full_walk) { cached_walk_equals_full_walk(C()); }

/* A deep walk (the read-ahead's 1,024 launches) is cached too: the same,
   launch for launch, as one walked anew (walk_max 64), on a loop of 1,500
   launches with jumps, while it costs a step or two a launch (checked by
   bench_predictor's depth argument, not here); and view() hands out the
   same launches without the copy. */
Test(predictor, deep_walks_are_cached_and_the_same) {
  const mt_predictor_ops_t *ops = C();
  mt_predictor_t *a = ops->create(&(mt_predictor_config_t){.capacity = 8192, .footprint_regions = 32768});
  mt_predictor_t *b = ops->create(&(mt_predictor_config_t){.capacity = 8192, .footprint_regions = 32768, .walk_max = 64});
  static mt_pred_launch_t x[1024], y[1024];
  uint64_t z = 88172645463325252ULL;
  size_t deep = 0;
  for (int i = 0; i < 6000; i++) {
    z ^= z << 13, z ^= z >> 7, z ^= z << 17;
    uint64_t id = 10000 + (uint64_t)(i % 1500);
    if (z % 400 == 0) id = 90000 + z % 5;
    obs(ops, a, id);
    obs(ops, b, id);
    size_t na = ops->predict(a, x, 1024), nb = ops->predict(b, y, 1024);
    cr_assert_eq(na, nb, "launch %d", i);
    deep += na == 1024;
    mt_pred_view_t v;
    cr_assert_eq(ops->view(a, 1024, &v), na);
    cr_assert_eq(v.n[0] + v.n[1], na);
    for (size_t k = 0; k < na; k++) {
      const mt_pred_launch_t *l = k < v.n[0] ? &v.run[0][k] : &v.run[1][k - v.n[0]];
      cr_assert_eq(l->id, x[k].id, "view: launch %d step %zu", i, k);
      cr_assert_float_eq(l->confidence / v.scale, x[k].confidence, 1e-12);
      cr_assert(l->keys == x[k].keys && l->nkeys == x[k].nkeys);
    }
    for (size_t k = 0; k < na; k++) {
      cr_assert_eq(x[k].id, y[k].id, "launch %d step %zu", i, k);
      cr_assert_float_eq(x[k].confidence, y[k].confidence, 1e-12);
      cr_assert_eq(x[k].nkeys, y[k].nkeys);
      cr_assert(x[k].nkeys == 0 || memcmp(x[k].keys, y[k].keys, x[k].nkeys * sizeof(uint64_t)) == 0);
    }
  }
  cr_assert_gt(deep, 2000, "walks 1,024 deep: %zu", deep);
  ops->destroy(a);
  ops->destroy(b);
}
Test(context, cached_walk_equals_full_walk) { cached_walk_equals_full_walk(_mt_predictor_find("context")); }

/* Footprints in a small ring wrap round its end many times: every one that
   is handed out is whole and right (regression: one wrapping round the end
   was returned as if contiguous). */
Test(predictor, footprints_never_wrap) {
  const mt_predictor_ops_t *ops = C();
  mt_predictor_config_t cfg = {.capacity = 1024, .footprint_regions = 64};
  mt_predictor_t *p = ops->create(&cfg);
  mt_pred_launch_t out[4];
  size_t known = 0;
  for (uint64_t i = 0; i < 3000; i++) {
    uint64_t id = 1000 + i % 7;
    uint64_t r[9];
    size_t n = fp_of(id, r);
    r[n++] = i; /* changes every time: always appended */
    ops->observe(p, id, r, n);
    size_t m = ops->predict(p, out, 4);
    for (size_t j = 0; j < m; j++) {
      if (out[j].nkeys == 0) continue;
      known++;
      uint64_t want[8];
      cr_assert_eq(out[j].nkeys, fp_of(out[j].id, want) + 1);
      for (size_t k = 0; k + 1 < out[j].nkeys; k++) cr_assert_eq(out[j].keys[k], want[k]);
    }
  }
  cr_assert_gt(known, 1000);
  ops->destroy(p);
}

/* Edges of the API, found by review: a launch that had a footprint
 * observed with none (keys NULL, as predictor.h allows); a footprint
 * passed in straight from a prediction (keys that lie in the predictor's
 * own ring); a capacity no memory holds. UBSan and ASan run this test. */
Test(predictor, footprint_edges) {
  const mt_predictor_ops_t *ops = C();
  mt_predictor_t *p = ops->create(&(mt_predictor_config_t){.capacity = 256, .footprint_regions = 64});
  cr_assert_not_null(p);
  for (int it = 0; it < 3; it++)
    for (uint64_t i = 0; i < 10; i++) obs(ops, p, 1000 + i);
  /* launch 1001 comes next, with its footprint handed back as a later one's */
  mt_pred_launch_t out[4];
  cr_assert_geq(ops->predict(p, out, 4), 2);
  cr_assert_eq(out[0].id, 1000);
  cr_assert_not_null(out[1].keys);
  uint64_t want[8];
  size_t n = out[1].nkeys;
  memcpy(want, out[1].keys, n * sizeof(*want));
  ops->observe(p, 1000, out[1].keys, n);
  cr_assert_geq(ops->predict(p, out, 1), 1);
  cr_assert_eq(out[0].id, 1001);
  /* 1000 now holds 1001's old keys */
  for (int k = 0; k < 9; k++) obs(ops, p, 1001 + (uint64_t)k);
  cr_assert_geq(ops->predict(p, out, 1), 1);
  cr_assert_eq(out[0].id, 1000);
  cr_assert_eq(out[0].nkeys, n);
  cr_assert_eq(memcmp(out[0].keys, want, n * sizeof(*want)), 0, "the footprint copied from the ring is intact");
  /* and then none at all */
  ops->observe(p, 1000, NULL, 0);
  for (int k = 0; k < 9; k++) obs(ops, p, 1001 + (uint64_t)k);
  cr_assert_geq(ops->predict(p, out, 1), 1);
  cr_assert_eq(out[0].id, 1000);
  cr_assert_eq(out[0].nkeys, 0);
  ops->destroy(p);
  cr_assert_null(ops->create(&(mt_predictor_config_t){.capacity = SIZE_MAX}), "no such table: out of memory");
  cr_assert_null(ops->create(&(mt_predictor_config_t){.capacity = SIZE_MAX - 3}));
}
