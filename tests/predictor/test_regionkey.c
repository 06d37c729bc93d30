/*
 * Description: region keys are deterministic, distinct across ordinals,
 * slots and first-touching launches, and the kinds do not collide for the
 * inputs a real program produces.
 */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "regionkey.h"

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return (x > y) - (x < y);
}

Test(regionkey, deterministic) {
  cr_assert_eq(_mt_regionkey_long_lived(17), _mt_regionkey_long_lived(17));
  cr_assert_eq(_mt_regionkey_per_iteration(0xabcdef, 3), _mt_regionkey_per_iteration(0xabcdef, 3));
  cr_assert_eq(_mt_regionkey_unborn(2), _mt_regionkey_unborn(2));
}

/* 10,000 ordinals, 100 launches x 32 slots, 32 unborn slots: all distinct. */
Test(regionkey, distinct) {
  enum { NL = 10000, NI = 100 * 32, NU = 32 };
  uint64_t *k = malloc((NL + NI + NU) * sizeof(*k));
  size_t n = 0;
  for (uint64_t i = 0; i < NL; i++) k[n++] = _mt_regionkey_long_lived(i);
  for (uint64_t l = 0; l < 100; l++)
    for (uint32_t s = 0; s < 32; s++) k[n++] = _mt_regionkey_per_iteration(l * 0x9e3779b97f4a7c15ULL, s);
  for (uint32_t s = 0; s < NU; s++) k[n++] = _mt_regionkey_unborn(s);
  qsort(k, n, sizeof(*k), cmp_u64);
  for (size_t i = 1; i < n; i++) cr_assert_neq(k[i], k[i - 1], "collision at %zu", i);
  free(k);
}

/* The same launch and slot in two iterations give the same key: that is
   what makes a per-iteration region recognisable. Slot and launch both
   matter. */
Test(regionkey, per_iteration_depends_on_launch_and_slot) {
  uint64_t a = _mt_regionkey_per_iteration(42, 0);
  cr_assert_eq(a, _mt_regionkey_per_iteration(42, 0));
  cr_assert_neq(a, _mt_regionkey_per_iteration(42, 1));
  cr_assert_neq(a, _mt_regionkey_per_iteration(43, 0));
}

/* Alternatives of a per-iteration key (for a second live region born by
   the same launch identity and slot): deterministic, nonzero, distinct
   from the key, from each other and from other launches' keys. */
Test(regionkey, alternatives_are_distinct) {
  enum { NA = 64, NI = 100 };
  uint64_t *k = malloc((size_t)NI * (NA + 1) * sizeof(*k));
  size_t n = 0;
  for (uint64_t l = 0; l < NI; l++) {
    uint64_t base = _mt_regionkey_per_iteration(l * 0x9e3779b97f4a7c15ULL, 0);
    k[n++] = base;
    for (uint32_t a = 1; a <= NA; a++) {
      uint64_t alt = _mt_regionkey_alternative(base, a);
      cr_assert_neq(alt, 0);
      cr_assert_eq(alt, _mt_regionkey_alternative(base, a));
      k[n++] = alt;
    }
  }
  qsort(k, n, sizeof(*k), cmp_u64);
  for (size_t i = 1; i < n; i++) cr_assert_neq(k[i], k[i - 1], "collision at %zu", i);
  free(k);
}
