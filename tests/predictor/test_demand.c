/* Description: eviction demand by launch, one period back
 * (predictor/demand.c): the window sums what the next launches recorded a
 * period ago, no answer until a whole period is recorded, records of one
 * launch add up, old entries are dropped so memory stays one entry per
 * evicting launch of a period, a longer period than the one kept answers
 * nothing, and a run of thousands of launches gives the same sums as a
 * brute-force count. */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "demand.h"

Test(demand, window_sums_the_next_launches_one_period_back) {
  mt_demand_t *d = _mt_demand_create();
  cr_assert_not_null(d);
  size_t n;
  uint64_t first;
  /* period 10, from clock 0: evictions at 3 (2 chunks) and 5 (4 chunks) */
  for (uint64_t t = 0; t < 10; t++) {
    bool ok = _mt_demand_window(d, t, 10, 4, &n, &first);
    cr_assert_eq(ok, t == 9, "clock %lu: a window answers once a period back is recorded", (unsigned long)t);
    if (t == 3) cr_assert_eq(_mt_demand_record(d, t, 2), 0);
    if (t == 5) {
      cr_assert_eq(_mt_demand_record(d, t, 1), 0);
      cr_assert_eq(_mt_demand_record(d, t, 3), 0); /* the same launch */
    }
  }
  /* at 10 the window is 11..14, one period back 1..4: the 2 at 3 */
  cr_assert(_mt_demand_window(d, 10, 10, 4, &n, &first));
  cr_assert_eq(n, 2);
  cr_assert_eq(first, 13, "for launch 13, as 3 was");
  cr_assert(_mt_demand_window(d, 11, 10, 4, &n, &first)); /* 2..5 */
  cr_assert_eq(n, 6);
  cr_assert_eq(first, 13);
  cr_assert(_mt_demand_window(d, 13, 10, 4, &n, &first)); /* 4..7 */
  cr_assert_eq(n, 4);
  cr_assert_eq(first, 15);
  cr_assert(_mt_demand_window(d, 15, 10, 4, &n, &first)); /* 6..9 */
  cr_assert_eq(n, 0);
  cr_assert_eq(first, 0, "nothing due: no first launch");
  cr_assert_not(_mt_demand_window(d, 15, 10, 10, &n, &first), "a window of a whole period is refused");
  cr_assert_not(_mt_demand_window(d, 15, 0, 4, &n, &first), "no period, no answer");
  _mt_demand_destroy(d);
}

Test(demand, drops_what_no_window_needs_and_refuses_a_longer_period) {
  mt_demand_t *d = _mt_demand_create();
  size_t n;
  uint64_t first;
  for (uint64_t t = 0; t < 1000; t++) {
    (void)_mt_demand_window(d, t, 100, 8, &n, &first);
    if (t % 2 == 0) cr_assert_eq(_mt_demand_record(d, t, 1), 0);
  }
  /* a period back from 999: 900..999, every other launch */
  cr_assert_leq(_mt_demand_entries(d), 51, "%zu entries kept", _mt_demand_entries(d));
  cr_assert(_mt_demand_window(d, 999, 100, 8, &n, &first)); /* 900..907 */
  cr_assert_eq(n, 4);
  cr_assert_not(_mt_demand_window(d, 999, 200, 8, &n, &first), "launches a longer period back were dropped");
  _mt_demand_destroy(d);
}

/* The same sums as counting the records by hand, over a long irregular run
 * whose entries grow the ring several times. */
Test(demand, matches_a_brute_force_count) {
  enum { T = 20000, P = 1500, H = 64 };
  static uint32_t rec[T];
  srand(7);
  mt_demand_t *d = _mt_demand_create();
  size_t n;
  uint64_t first;
  for (uint64_t t = 0; t < T; t++) {
    bool ok = _mt_demand_window(d, t, P, H, &n, &first);
    cr_assert_eq(ok, t + 1 >= P, "clock %lu", (unsigned long)t);
    if (ok) {
      size_t want = 0;
      uint64_t want_first = 0;
      for (uint64_t x = t + 1 - P; x <= t + H - P; x++) {
        if (rec[x] > 0 && want_first == 0) want_first = x + P;
        want += rec[x];
      }
      cr_assert_eq(n, want, "clock %lu: %zu, counted %zu", (unsigned long)t, n, want);
      cr_assert_eq(first, want_first, "clock %lu", (unsigned long)t);
    }
    if (rand() % 3 == 0) {
      rec[t] = 1 + (uint32_t)(rand() % 40);
      cr_assert_eq(_mt_demand_record(d, t, rec[t]), 0);
    } else if (rand() % 5 == 0) {
      cr_assert_eq(_mt_demand_record(d, t, 0), 0, "nothing recorded");
    }
  }
  cr_assert_leq(_mt_demand_entries(d), P);
  _mt_demand_destroy(d);
}
