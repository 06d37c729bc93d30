/* Description: the set of region keys kept on the device because their
 * fetch came late (predictor/keep.c): keys are kept while their bytes fit
 * the cap, stay kept, and are forgotten together; a kept key's due is
 * nearer but still ahead. */
#include <criterion/criterion.h>

#include "keep.h"

Test(keep, kept_while_the_bytes_fit) {
  mt_keep_t *k = _mt_keep_create(64, 100);
  cr_assert_not_null(k);
  cr_assert(!_mt_keep_has(k, 7));
  cr_assert(_mt_keep_late(k, 7, 60));
  cr_assert(_mt_keep_has(k, 7));
  cr_assert(!_mt_keep_late(k, 8, 50), "60 + 50 bytes exceed the cap of 100");
  cr_assert(!_mt_keep_has(k, 8));
  cr_assert(_mt_keep_late(k, 9, 40), "60 + 40 fit exactly");
  cr_assert(_mt_keep_late(k, 7, 60), "late again: kept already, counted once");
  cr_assert_eq(_mt_keep_bytes(k), 100);
  cr_assert(!_mt_keep_late(k, 0, 0), "key 0 is no key");
  _mt_keep_clear(k);
  cr_assert(!_mt_keep_has(k, 7) && !_mt_keep_has(k, 9));
  cr_assert_eq(_mt_keep_bytes(k), 0);
  cr_assert(_mt_keep_late(k, 8, 50), "room again after a clear");
  _mt_keep_destroy(k);
  cr_assert(!_mt_keep_has(NULL, 8) && !_mt_keep_late(NULL, 8, 1) && _mt_keep_bytes(NULL) == 0);
}

Test(keep, the_table_stops_at_three_quarters) {
  mt_keep_t *k = _mt_keep_create(16, UINT64_MAX);
  int kept = 0;
  for (uint64_t key = 1; key <= 40; key++) kept += _mt_keep_late(k, key, 1);
  cr_assert_eq(kept, 12, "16 slots, 12 keys at most (%d)", kept);
  for (uint64_t key = 1; key <= 12; key++) cr_assert(_mt_keep_has(k, key), "key %lu", (unsigned long)key);
  cr_assert(!_mt_keep_has(k, 13));
  _mt_keep_destroy(k);
}

Test(keep, a_kept_due_is_nearer_and_still_ahead) {
  cr_assert_eq(_mt_keep_due(100, 500), 100 + 400 / MT_KEEP_DIV);
  cr_assert_eq(_mt_keep_due(100, 101), 101, "one launch ahead stays one launch ahead");
  cr_assert_eq(_mt_keep_due(100, 102), 101);
  cr_assert_eq(_mt_keep_due(100, 0), 0, "unknown stays unknown");
  cr_assert_eq(_mt_keep_due(100, 90), 90, "a passed due is left as it is");
}
