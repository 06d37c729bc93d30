/* Description: next-use estimates (predictor/reuse.c) on hand-built launch
 * streams: the period is found without being told, the next use of a weight
 * (forward and backward) and of a per-iteration activation is one period on
 * from its use in the last period, a region used more often than the ring
 * holds is expected one mean gap on, a changed loop is relearned, and
 * unknown stays unknown. */
#include <criterion/criterion.h>

#include "reuse.h"

/* One iteration of a toy loop of L launches: launch i has identity 100 + i
 * and uses key 1000 + i ("its output"); key 1 (a weight) is used at launch
 * 2 and at launch L - 3 (its backward); key 2 by every launch. */
static void iteration(mt_reuse_t *r, int L) {
  for (int i = 0; i < L; i++) {
    _mt_reuse_launch(r, 100 + (uint64_t)i);
    cr_assert_eq(_mt_reuse_use(r, 1000 + (uint64_t)i), 0);
    cr_assert_eq(_mt_reuse_use(r, 2), 0);
    if (i == 2 || i == L - 3) cr_assert_eq(_mt_reuse_use(r, 1), 0);
  }
}

Test(reuse, period_and_next_uses) {
  mt_reuse_t *r = _mt_reuse_create();
  cr_assert_not_null(r);
  cr_assert_eq(_mt_reuse_period(r), 0);
  cr_assert_eq(_mt_reuse_next(r, 1), 0, "nothing known yet");
  const int L = 100;
  iteration(r, L);
  cr_assert_eq(_mt_reuse_period(r), 0, "no identity has recurred yet");
  iteration(r, L);
  cr_assert_eq(_mt_reuse_period(r), L);
  /* now = 2L: the last launch of iteration 2 */
  uint64_t now = _mt_reuse_now(r);
  cr_assert_eq(now, 2 * L);
  /* key 1 was used at L+3 and 2L-2 (clocks start at 1): next at 2L+3 */
  cr_assert_eq(_mt_reuse_next(r, 1), (uint64_t)(2 * L + 3));
  /* the output of launch 10 (clock L+11): next at 2L+11 */
  cr_assert_eq(_mt_reuse_next(r, 1010), (uint64_t)(2 * L + 11));
  /* key 2 is used by every launch: one gap on */
  cr_assert_eq(_mt_reuse_next(r, 2), now + 1);
  cr_assert_eq(_mt_reuse_next(r, 777), 0, "never used");
  /* into iteration 3: at launch 5 (clock 2L+6) key 1's next is its backward */
  for (int i = 0; i < 6; i++) {
    _mt_reuse_launch(r, 100 + (uint64_t)i);
    if (i == 2) _mt_reuse_use(r, 1);
  }
  cr_assert_eq(_mt_reuse_next(r, 1), (uint64_t)(3 * L - 2));
  _mt_reuse_destroy(r);
}

Test(reuse, overdue_is_unknown_and_loops_are_relearned) {
  mt_reuse_t *r = _mt_reuse_create();
  iteration(r, 50);
  iteration(r, 50);
  iteration(r, 50);
  cr_assert_eq(_mt_reuse_period(r), 50);
  /* key 1010's last use was one period ago plus some: after more than a
   * period without it, its expectation has passed */
  for (int i = 0; i < 60; i++) _mt_reuse_launch(r, 5000 + (uint64_t)i);
  cr_assert_eq(_mt_reuse_next(r, 1010), 0);
  /* a longer loop (80 launches) takes over within a few iterations */
  for (int k = 0; k < 6; k++) iteration(r, 80);
  cr_assert_eq(_mt_reuse_period(r), 80);
  cr_assert_gt(_mt_reuse_bytes(r), 0);
  _mt_reuse_destroy(r);
}

Test(reuse, many_keys_grow_the_table) {
  mt_reuse_t *r = _mt_reuse_create();
  for (int it = 0; it < 3; it++)
    for (uint64_t i = 1; i <= 5000; i++) {
      _mt_reuse_launch(r, i);
      cr_assert_eq(_mt_reuse_use(r, 100000 + i), 0);
    }
  cr_assert_eq(_mt_reuse_period(r), 5000);
  cr_assert_eq(_mt_reuse_next(r, 100001), 15001);
  cr_assert_eq(_mt_reuse_next(r, 105000), 20000);
  _mt_reuse_destroy(r);
}
