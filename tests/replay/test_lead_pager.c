/* Description: timeliness feedback (predictor/lead.c, prefetch.c) inside
 * the pager, on the virtual-clock device of mt-trace replay. A loop of
 * eight launches per iteration alternates a kernel that reads a large
 * region (four of them, B0..B3, 8 MiB each) with a short one that uses a
 * small region S; the GPU budget holds two large regions and S. A
 * large region's copy (8.4 ms at 1 GB/s) takes longer than the short
 * kernel before its use (5 ms), so a prefetch issued one launch ahead
 * (MT_PREFETCH_DEPTH=1) comes late: the stream waits for it. Without
 * feedback every iteration stays late. With MT_PREFETCH_LEAD=4 each late
 * use doubles the region's lead until its prefetch starts early enough,
 * and from then on every use is on time: in the next iteration, or within
 * three with MT_PREFETCH_PACE (see the second test). The host synchronises
 * after each launch (a training loop reading its loss), so "on time" means
 * the copy was done when the host issued the kernel that uses it. */
#include <criterion/criterion.h>
#include <string.h>

#include "device_virtual.h"
#include "internal.h"
#include "pager.h"
#include "pager_internal.h"
#include "stats.h"

#define MiB ((size_t)1 << 20)
#define NBIG 4
#define ITERS 8

typedef struct kern {
  mt_device_t *d;
  uint64_t dur;
} kern_t;

static int run(void *ctx) {
  kern_t *k = ctx;
  return _mt_vdev_kernel(k->d, 0, k->dur);
}

static mt_pager_t *kept[4];
static int nkept;

/* Runs the loop with the given lead; late[i] = prefetch_late in iteration i. */
static void loop(unsigned lead, bool pace, uint64_t late[ITERS], uint64_t wait_ns[ITERS]) {
  memset(&_mt_stats, 0, sizeof(_mt_stats));
  mt_vdev_config_t vc = {.gpu_mem = 64 * MiB, .h2d_bw = 1e9, .d2h_bw = 1e9, .unmap_syncs = true};
  mt_device_t *d = _mt_vdev_new(&vc);
  cr_assert_not_null(d);
  mt_pager_config_t pc = {.budget = 2 * 8 * MiB + 2 * MiB + 2 * MiB, .host_budget = 256 * MiB,
                          .chunk = 2 * MiB, .small_limit = 4096, .policy = "nextuse",
                          .predictor = "correlation", .prefetch_depth = 1, .prefetch_lead = lead,
                          .prefetch_pace = pace, .handoff = 2};
  mt_pager_t *p;
  cr_assert_eq(_mt_pager_create(d, &pc, &p), 0);
  _mt_pager_install(p);
  uintptr_t big[NBIG], small;
  for (int i = 0; i < NBIG; i++) cr_assert_eq(_mt_alloc(8 * MiB, &big[i]), 0);
  cr_assert_eq(_mt_alloc(2 * MiB, &small), 0);
  mt_handle_t ev;
  cr_assert_eq(d->ops->event_create(d, &ev), 0);
  for (int it = 0; it < ITERS; it++) {
    uint64_t late0 = mt_stat_get(prefetch_late);
    mt_vdev_totals_t t0, t1;
    _mt_vdev_totals(d, &t0);
    for (int k = 0; k < 2 * NBIG; k++) {
      bool first = it == 0; /* the first iteration writes everything; the rest only read */
      uintptr_t a = k % 2 == 0 ? big[k / 2] : small;
      kern_t kc = {d, k % 2 == 0 ? 10000000 : 5000000};
      bool w = first || a == small;
      pthread_mutex_lock(&p->lock);
      int rc = _mt_launch_regions(p, &a, &w, 1, 0, 100 + (uint64_t)k, run, &kc, "test launch");
      pthread_mutex_unlock(&p->lock);
      cr_assert_eq(rc, 0, "launch %d of iteration %d", k, it);
      /* the host reads a result: it catches up with the stream */
      cr_assert_eq(d->ops->event_record(d, ev, 0), 0);
      cr_assert_eq(d->ops->event_sync(d, ev), 0);
    }
    _mt_vdev_totals(d, &t1);
    late[it] = mt_stat_get(prefetch_late) - late0;
    wait_ns[it] = t1.stream_wait_ns - t0.stream_wait_ns;
  }
  /* A pager lives for the process (there is no destroy, as in the
   * library): kept reachable here, not leaked. */
  kept[nkept++] = p;
  __atomic_store_n(&_mt_pager, NULL, __ATOMIC_RELEASE);
}

/* Without feedback: once the predictor knows the loop, every large
 * region's prefetch is late, every iteration. */
static void stays_late(bool pace) {
  uint64_t late[ITERS], wait[ITERS];
  loop(0, pace, late, wait);
  for (int it = 2; it < ITERS; it++) {
    cr_log_info("lead 0, pace %d, iteration %d: %lu late, %lu ns waited", pace, it, (unsigned long)late[it],
                (unsigned long)wait[it]);
    cr_assert_geq(late[it], NBIG - 1, "lead 0, iteration %d: late uses", it);
    cr_assert_gt(wait[it], 0);
  }
}

/* With MT_PREFETCH_LEAD=4: late first, then on time for good from
 * `after` iterations after the first late one on. */
static void becomes_on_time(bool pace, int after) {
  uint64_t late[ITERS], wait[ITERS];
  loop(4, pace, late, wait);
  int first = -1;
  for (int it = 0; it < ITERS; it++) {
    cr_log_info("lead 4, pace %d, iteration %d: %lu late, %lu ns waited", pace, it, (unsigned long)late[it],
                (unsigned long)wait[it]);
    if (first < 0 && late[it] > 0) first = it;
  }
  cr_assert_geq(first, 0, "some prefetch comes late before the feedback acts");
  cr_assert_lt(first, 3, "late as soon as the predictor knows the loop");
  for (int it = first + after; it < ITERS; it++) {
    cr_assert_eq(late[it], 0, "lead 4, pace %d, iteration %d: the late fetches start earlier, on time", pace, it);
    cr_assert_eq(wait[it], 0, "lead 4, pace %d, iteration %d: the stream waits for no copy", pace, it);
  }
}

Test(lead_pager, late_fetch_is_on_time_next_iteration) {
  stays_late(false);
  becomes_on_time(false, 1);
}

/* With MT_PREFETCH_PACE it takes a few iterations, not one: a late copy
 * still holds the link when the next launch's prefetch runs, so the pacing
 * puts off the fetch a lead of one or two launches asks for there. */
Test(lead_pager, late_fetch_is_on_time_within_three_iterations_paced) {
  stays_late(true);
  becomes_on_time(true, 3);
}
