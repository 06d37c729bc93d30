/* Description: per-iteration region keys inside the pager (prefetch.c's
 * born_key, predictor/regionkey.h), on the virtual-clock device. Each
 * iteration, two launches of one identity (the same function, their one
 * slot a region born there) make two regions A and B; a third launch reads
 * both; both are freed at the iteration's end. Their per-iteration key is
 * the same: B gets the first alternative while A lives, so the predictor
 * can still find A (before, B took the key over and A, still alive, was
 * named by nothing: never prefetched nor read ahead). Every iteration's
 * A and B get the same two keys as the first iteration's. */
#include <string.h>

#include "regionkey.h"
#include "vpager.h"

#define ITERS 3

Test(regionkey_pager, two_births_of_one_identity_keep_two_names) {
  mt_pager_config_t pc = {.budget = 32 * MiB, .host_budget = 256 * MiB, .chunk = 2 * MiB, .small_limit = 4096,
                          .policy = "nextuse", .predictor = "correlation", .prefetch_depth = 8, .handoff = 2};
  mt_device_t *d;
  mt_pager_t *p = vp_start(&pc, &d);
  vp_kern_t kc = {d, 0, 1 * MS};
  uint64_t key_a[ITERS], key_b[ITERS];
  for (int it = 0; it < ITERS; it++) {
    uintptr_t ab[2];
    bool w[2] = {true, true};
    for (int i = 0; i < 2; i++) {
      cr_assert_eq(_mt_alloc(4 * MiB, &ab[i]), 0);
      vp_launch(p, &kc, &ab[i], w, 1, 200); /* the same identity twice: function 200, one unborn slot */
    }
    bool rd[2] = {false, false};
    vp_launch(p, &kc, ab, rd, 2, 300);
    mt_region_t *ra = _mt_region_of(p, ab[0]), *rb = _mt_region_of(p, ab[1]);
    key_a[it] = ra->key;
    key_b[it] = rb->key;
    cr_assert_neq(key_a[it], 0);
    cr_assert_neq(key_a[it], key_b[it], "iteration %d: two live regions, two keys", it);
    cr_assert_eq(key_b[it], _mt_regionkey_alternative(key_a[it], 1), "the second one born takes the first alternative");
    pthread_mutex_lock(&p->lock);
    cr_assert_eq(_mt_prefetch_region(p, key_a[it]), ra, "iteration %d: the first region is still found", it);
    cr_assert_eq(_mt_prefetch_region(p, key_b[it]), rb, "iteration %d: the second region is found", it);
    pthread_mutex_unlock(&p->lock);
    for (int i = 0; i < 2; i++) cr_assert_eq(_mt_free(ab[i], 0, false), 0);
    if (it > 0) {
      cr_assert_eq(key_a[it], key_a[0], "iteration %d: A's key is the first iteration's", it);
      cr_assert_eq(key_b[it], key_b[0], "iteration %d: B's key is the first iteration's", it);
    }
  }
  vp_stop(p);
}

/* Keys never born again (a new launch identity each time: new shapes,
 * one-off kernels) leave the key map once they are KEY_FORGET_MIN (65,536)
 * launches old: 300,000 such launches, one live region at a time, keep it
 * at 262,144 slots or fewer (it grew to 524,288 before, and on without
 * bound). A key born again every iteration keeps what its last region's
 * life was: the spent test (test_spent_pager.c) holds that. */
Test(regionkey_pager, keys_never_born_again_are_forgotten) {
  mt_pager_config_t pc = {.budget = 16 * MiB, .host_budget = 64 * MiB, .chunk = 2 * MiB, .small_limit = 4096,
                          .policy = "nextuse", .predictor = "correlation", .prefetch_depth = 2, .handoff = 2};
  mt_device_t *d;
  mt_pager_t *p = vp_start(&pc, &d);
  vp_kern_t k = {d, 0, 1000};
  bool w = true;
  for (uint64_t i = 0; i < 300000; i++) {
    uintptr_t a;
    cr_assert_eq(_mt_alloc(2 * MiB, &a), 0);
    vp_launch(p, &k, &a, &w, 1, 0x100000 + i);
    cr_assert_eq(_mt_free(a, 0, false), 0);
  }
  size_t slots = _mt_prefetch_keys(p);
  cr_assert_leq(slots, 262144, "the key map holds %zu slots", slots);
  vp_stop(p);
}
