/* Description: chunks filed before the period was known get an estimate
 * once it is (prefetch.c, redue; policy/nextuse.c, nu_redue), on the
 * virtual-clock device.
 *
 * a_first_iteration_chunk_gets_its_due: three 2 MiB chunks of budget and
 * an 80-launch loop, each launch a function of its own over one region:
 *   A (launches 0..39)   R0 and R1 in turn;
 *   B (40..69)           R0, R1 and N in turn;
 *   C (70..79)           T four times, then R0 and R1 in turn.
 * No period is known in the first iteration, so every chunk is filed
 * without a due, in LRU order: T's first use evicts N, the coldest, and
 * the second iteration's phase A finds R0, R1 and T resident. The period
 * (80) is learned 32 launches into it: R0 and R1, used again, are filed
 * by their dues; T is not used until phase C. Before this was mended, T
 * stayed on the unknown list, which goes last, so phase B's N evicted R0
 * or R1, each needed again within three launches, and the three took
 * turns in two chunks. Now T is asked for its due when the period is
 * learned (phase C: farther than any other), it goes for N, and R0, R1
 * and N stay on the device through phase B: one fetch there, N's.
 *
 * lru_keeps_its_order: the same loop with MT_POLICY=lru, which has no
 * dues: T also goes in phase B (the coldest), but R0, R1 and N still take
 * turns (the baseline is untouched by the change).
 *
 * a_late_region_is_filed_nearer (predictor/keep.h): eight chunks of
 * budget, an 80-launch loop of eight filler regions in turn and a region L
 * used by the last four launches. L is evicted after its use (the
 * farthest) and fetched on demand at the end of each iteration. The
 * second iteration's demand fetch, with the period known, keeps it: from
 * then on its next use counts a quarter as far (MT_KEEP_DIV; none in the
 * first iteration, with no period yet).
 * a_region_on_time_is_not: the same loop on nine chunks, room for all: L
 * is never fetched, and its next use counts as it is. */
#include "keep.h"
#include "vpager.h"

#define P 80

static uint8_t state_of(mt_pager_t *p, uintptr_t a) {
  pthread_mutex_lock(&p->lock);
  uint8_t st = _mt_region_of(p, a)->chunks[0].state;
  pthread_mutex_unlock(&p->lock);
  return st;
}

/* One 1 ms launch writing the region at a, as function func, then a wait
 * for it: no chunk is held by queued work when the next one needs room. */
static void launch(mt_pager_t *p, mt_device_t *d, uintptr_t a, uint64_t func) {
  vp_kern_t k = {d, 0, 1 * MS};
  bool w = true;
  vp_launch(p, &k, &a, &w, 1, func);
  mt_handle_t e;
  cr_assert_eq(d->ops->event_create(d, &e), 0);
  cr_assert_eq(d->ops->event_record(d, e, 0), 0);
  cr_assert_eq(d->ops->event_sync(d, e), 0);
  d->ops->event_destroy(d, e);
}

static void loop(const char *policy) {
  mt_pager_config_t pc = {.budget = 3 * 2 * MiB, .host_budget = 64 * MiB, .chunk = 2 * MiB, .small_limit = 4096,
                          .policy = policy, .predictor = "none", .handoff = 2};
  mt_device_t *d;
  mt_pager_t *p = vp_start(&pc, &d);
  uintptr_t r0, r1, n, t;
  cr_assert_eq(_mt_alloc(2 * MiB, &r0), 0);
  cr_assert_eq(_mt_alloc(2 * MiB, &r1), 0);
  cr_assert_eq(_mt_alloc(2 * MiB, &n), 0);
  cr_assert_eq(_mt_alloc(2 * MiB, &t), 0);
  const bool nextuse = policy[0] == 'n';
  for (int it = 0; it < 2; it++) {
    uint64_t before_b = 0, in_b = 0;
    for (uint64_t i = 0; i < P; i++) {
      if (i == 40) before_b = mt_stat_get(fetches);
      if (i == 70) in_b = mt_stat_get(fetches) - before_b;
      uintptr_t a = i < 40 ? (i % 2 ? r1 : r0) : i < 70 ? (i % 3 == 0 ? r0 : i % 3 == 1 ? r1 : n) : i < 74 ? t : i % 2 ? r1 : r0;
      launch(p, d, a, 1000 + i);
      if (it == 1 && i >= 43 && i < 70) {
        if (nextuse) {
          cr_assert_eq(state_of(p, t), CH_HOST, "launch %lu of the second iteration: T (next used in phase C) "
                       "went for N", (unsigned long)i);
          cr_assert_eq(state_of(p, r0), CH_DEVICE, "launch %lu: R0 stays", (unsigned long)i);
          cr_assert_eq(state_of(p, r1), CH_DEVICE, "launch %lu: R1 stays", (unsigned long)i);
        } else {
          cr_assert_eq(state_of(p, t), CH_HOST, "lru, launch %lu: T, the coldest, went", (unsigned long)i);
        }
      }
    }
    if (it == 1 && nextuse)
      cr_assert_eq(in_b, 1, "second iteration: one fetch in phase B, N's (%lu)", (unsigned long)in_b);
    if (it == 1 && !nextuse) cr_assert_gt(in_b, 1, "lru: R0, R1 and N take turns in two chunks");
  }
  vp_stop(p);
}

Test(redue_pager, a_first_iteration_chunk_gets_its_due) {
  loop("nextuse");
}

Test(redue_pager, lru_keeps_its_order) {
  loop("lru");
}

/* L's due, less the clock, after each of four iterations of the loop
 * below on a budget of `chunks` chunks. */
static void late_loop(size_t chunks, uint64_t ahead[4]) {
  mt_pager_config_t pc = {.budget = chunks * 2 * MiB, .host_budget = 64 * MiB, .chunk = 2 * MiB, .small_limit = 4096,
                          .policy = "nextuse", .predictor = "none", .handoff = 2};
  mt_device_t *d;
  mt_pager_t *p = vp_start(&pc, &d);
  uintptr_t f[8], l;
  for (int i = 0; i < 8; i++) cr_assert_eq(_mt_alloc(2 * MiB, &f[i]), 0);
  cr_assert_eq(_mt_alloc(2 * MiB, &l), 0);
  for (int it = 0; it < 4; it++) {
    for (uint64_t i = 0; i < P; i++) launch(p, d, i < P - 4 ? f[i % 8] : l, 2000 + i);
    pthread_mutex_lock(&p->lock);
    uint64_t due = _mt_prefetch_due(p, _mt_region_of(p, l));
    ahead[it] = due > p->clock ? due - p->clock : 0;
    pthread_mutex_unlock(&p->lock);
  }
  vp_stop(p);
}

Test(redue_pager, a_late_region_is_filed_nearer) {
  uint64_t ahead[4];
  late_loop(8, ahead);
  cr_assert_eq(ahead[0], 0, "first iteration: no period, no due");
  for (int it = 1; it < 4; it++)
    cr_assert_eq(ahead[it], (P - 3) / MT_KEEP_DIV, "iteration %d: L came late, kept: a quarter as far (%lu)", it,
                 (unsigned long)ahead[it]);
}

Test(redue_pager, a_region_on_time_is_not) {
  uint64_t ahead[4];
  late_loop(9, ahead); /* room for all: L is never fetched */
  for (int it = 1; it < 4; it++)
    cr_assert_eq(ahead[it], P - 3, "iteration %d: L stayed, next used a period after its first use (%lu)", it,
                 (unsigned long)ahead[it]);
}
