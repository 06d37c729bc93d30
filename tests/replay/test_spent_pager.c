/* Description: spent regions (prefetch.c, _mt_prefetch_spent): a live
 * region used by as many launches as the last region with its key was
 * before the application freed it holds probably dead data, so eviction
 * takes other chunks first (pager.c, eligible) and write-behind none of
 * it (writebehind.c), on the virtual-clock device.
 *
 * dead_data_is_evicted_last: three 2 MiB chunks of budget. Each iteration
 * a buffer T is born, written by one launch and read by a second, and
 * freed only after three long-lived weights W1..W3 have been used in turn.
 * No period is learned in three iterations, so next-use eviction is LRU:
 * at W3's launch T is the coldest chunk. In the first iteration nothing is
 * known of T's key and T is copied out; in later ones its key's last life
 * ended after two launches, T has had two, and W1 goes instead: T is
 * freed on the device, its dead bytes never copied.
 *
 * only_spent_chunks_left_still_go: when the spent chunk is the only one a
 * launch may evict, it is evicted (the preference never makes a footprint
 * fail to fit).
 *
 * a_clean_chunk_goes_before_a_dirty_one: next-use eviction weighs a
 * victim's cost (policy/nextuse.c, cost classes). A, B, C fill three
 * chunks, all written; D's launch evicts A, A's read-only launch brings it
 * back clean (its host copy current) and evicts B. For B's launch the
 * coldest chunk is C, dirty (a copy now, a fetch later); A, clean and
 * hotter, costs only the fetch: A goes, C stays.
 * lru_takes_the_coldest_clean_or_not: with MT_POLICY=lru, the unweighted
 * baseline, C goes. */
#include "vpager.h"

#define ITERS 3

/* One 1 ms launch on stream 0 writing (with read: only reading) every
 * region it names, then a wait for it, so that no chunk is held by queued
 * work when the next one needs room. */
static void launch_rw(mt_pager_t *p, mt_device_t *d, uintptr_t *a, size_t n, uint64_t func, bool read) {
  vp_kern_t k = {d, 0, 1 * MS};
  bool w[4] = {!read, !read, !read, !read};
  vp_launch(p, &k, a, w, n, func);
  mt_handle_t e;
  cr_assert_eq(d->ops->event_create(d, &e), 0);
  cr_assert_eq(d->ops->event_record(d, e, 0), 0);
  cr_assert_eq(d->ops->event_sync(d, e), 0);
  d->ops->event_destroy(d, e);
}

static void launch(mt_pager_t *p, mt_device_t *d, uintptr_t *a, size_t n, uint64_t func) {
  launch_rw(p, d, a, n, func, false);
}

static uint8_t state_of(mt_pager_t *p, uintptr_t a) {
  pthread_mutex_lock(&p->lock);
  mt_region_t *r = _mt_region_of(p, a);
  uint8_t st = r->chunks[0].state;
  pthread_mutex_unlock(&p->lock);
  return st;
}

/* A pager of `chunks` 2 MiB chunks, `policy` eviction (start: next use),
 * demand fetching, the handoff off. */
static mt_pager_t *start_policy(mt_device_t **d, size_t chunks, const char *policy) {
  mt_pager_config_t pc = {.budget = chunks * 2 * MiB, .host_budget = 64 * MiB, .chunk = 2 * MiB,
                          .small_limit = 4096, .policy = policy, .predictor = "none", .handoff = 2};
  return vp_start(&pc, d);
}

static mt_pager_t *start(mt_device_t **d, size_t chunks) {
  return start_policy(d, chunks, "nextuse");
}

Test(spent_pager, dead_data_is_evicted_last) {
  mt_device_t *d;
  mt_pager_t *p = start(&d, 3);
  uintptr_t w[3];
  for (int i = 0; i < 3; i++) cr_assert_eq(_mt_alloc(2 * MiB, &w[i]), 0);
  for (int it = 0; it < ITERS; it++) {
    uintptr_t t;
    cr_assert_eq(_mt_alloc(2 * MiB, &t), 0);
    launch(p, d, &t, 1, 100); /* T written */
    launch(p, d, &t, 1, 101); /* T read: its last use */
    for (int i = 0; i < 3; i++) launch(p, d, &w[i], 1, 200 + (uint64_t)i);
    pthread_mutex_lock(&p->lock);
    bool spent = _mt_prefetch_spent(p, _mt_region_of(p, t));
    pthread_mutex_unlock(&p->lock);
    if (it == 0) {
      cr_assert(!spent, "no region with T's key has died yet");
      cr_assert_eq(state_of(p, t), CH_HOST, "iteration 0: T, the coldest, was evicted");
      cr_assert_eq(state_of(p, w[0]), CH_DEVICE);
    } else {
      cr_assert(spent, "iteration %d: T has had as many uses as its key's last life", it);
      cr_assert_eq(state_of(p, t), CH_DEVICE, "iteration %d: T (spent) stays, its bytes not copied", it);
      cr_assert_eq(state_of(p, w[0]), CH_HOST, "iteration %d: W1 went instead", it);
    }
    cr_assert_eq(_mt_free(t, 0, false), 0);
  }
  vp_stop(p);
}

Test(spent_pager, only_spent_chunks_left_still_go) {
  mt_device_t *d;
  mt_pager_t *p = start(&d, 2);
  uintptr_t w[2];
  for (int i = 0; i < 2; i++) cr_assert_eq(_mt_alloc(2 * MiB, &w[i]), 0);
  for (int it = 0; it < 2; it++) {
    uintptr_t t;
    cr_assert_eq(_mt_alloc(2 * MiB, &t), 0);
    launch(p, d, &t, 1, 100);
    launch(p, d, &w[0], 1, 200);
    /* W1 and W2 at once: W1 is resident and in the footprint, so the only
     * chunk to evict is T, spent from the second iteration on */
    launch(p, d, w, 2, 201);
    cr_assert_eq(state_of(p, t), CH_HOST, "iteration %d: T went, spent or not", it);
    cr_assert_eq(_mt_free(t, 0, false), 0);
  }
  vp_stop(p);
}

static void clean_before_dirty(const char *policy, bool weighed) {
  mt_device_t *d;
  mt_pager_t *p = start_policy(&d, 3, policy);
  uintptr_t a[4];
  for (int i = 0; i < 4; i++) cr_assert_eq(_mt_alloc(2 * MiB, &a[i]), 0);
  for (int i = 0; i < 4; i++) launch(p, d, &a[i], 1, 300 + (uint64_t)i); /* A, B, C written; D evicts A */
  cr_assert_eq(state_of(p, a[0]), CH_HOST);
  launch_rw(p, d, &a[0], 1, 310, true); /* A read: back, clean; B goes */
  cr_assert_eq(state_of(p, a[1]), CH_HOST);
  launch(p, d, &a[1], 1, 311); /* B: room for one chunk */
  if (weighed) {
    cr_assert_eq(state_of(p, a[0]), CH_HOST, "%s: A (clean) went", policy);
    cr_assert_eq(state_of(p, a[2]), CH_DEVICE, "%s: C (dirty, colder) stayed", policy);
  } else {
    cr_assert_eq(state_of(p, a[2]), CH_HOST, "%s: C (the coldest) went", policy);
    cr_assert_eq(state_of(p, a[0]), CH_DEVICE, "%s: A stayed", policy);
  }
  for (int i = 0; i < 4; i++) cr_assert_eq(_mt_free(a[i], 0, false), 0);
  vp_stop(p);
}

/* (one pager per test: each test is its own process, and a pager lives
 * for the process, vpager.h) */
Test(spent_pager, a_clean_chunk_goes_before_a_dirty_one) {
  clean_before_dirty("nextuse", true);
}

Test(spent_pager, lru_takes_the_coldest_clean_or_not) {
  clean_before_dirty("lru", false);
}
