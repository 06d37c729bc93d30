/* Description: per-key prefetch leads (predictor/lead.c): a late key gets
 * a lead that doubles with each late use up to the bound, on-time uses take
 * it back one launch per eight uses until the key is forgotten, keys are
 * independent, a full table replaces its weakest entries and stays
 * findable, and no table (bound 0) means no feedback. */
#include <criterion/criterion.h>

#include "lead.h"

Test(lead, doubles_when_late_up_to_the_bound) {
  mt_lead_t *l = _mt_lead_create(64, 8);
  cr_assert_not_null(l);
  cr_assert_eq(_mt_lead_max(l), 8);
  cr_assert_eq(_mt_lead_get(l, 7), 0, "unknown key: no lead");
  unsigned want[] = {1, 2, 4, 8, 8};
  for (int i = 0; i < 5; i++) {
    _mt_lead_late(l, 7);
    cr_assert_eq(_mt_lead_get(l, 7), want[i], "late use %d", i);
  }
  cr_assert_eq(_mt_lead_get(l, 8), 0, "another key is untouched");
  cr_assert_eq(_mt_lead_count(l), 1);
  _mt_lead_destroy(l);
}

Test(lead, decays_when_on_time_and_is_forgotten) {
  mt_lead_t *l = _mt_lead_create(64, 16);
  for (int i = 0; i < 3; i++) _mt_lead_late(l, 5); /* 4 */
  cr_assert_eq(_mt_lead_get(l, 5), 4);
  for (int i = 0; i < 7; i++) _mt_lead_on_time(l, 5);
  cr_assert_eq(_mt_lead_get(l, 5), 4, "seven on-time uses are not enough");
  _mt_lead_on_time(l, 5);
  cr_assert_eq(_mt_lead_get(l, 5), 3);
  _mt_lead_late(l, 5);
  cr_assert_eq(_mt_lead_get(l, 5), 6, "late again: doubles from where it was");
  for (int i = 0; i < 48; i++) _mt_lead_on_time(l, 5);
  cr_assert_eq(_mt_lead_get(l, 5), 0, "48 on-time uses take six launches off");
  cr_assert_eq(_mt_lead_count(l), 0, "a key with no lead is not kept");
  _mt_lead_on_time(l, 99); /* unknown key: nothing happens */
  cr_assert_eq(_mt_lead_count(l), 0);
  _mt_lead_destroy(l);
}

Test(lead, bounded_table_keeps_working) {
  mt_lead_t *l = _mt_lead_create(16, 4);
  /* key 1 is late three times (lead 4); then many keys once each (lead 1) */
  for (int i = 0; i < 3; i++) _mt_lead_late(l, 1);
  for (uint64_t k = 100; k < 1100; k++) {
    _mt_lead_late(l, k);
    cr_assert_eq(_mt_lead_get(l, k), 1, "the newest key is always kept (%lu)", (unsigned long)k);
    cr_assert_leq(_mt_lead_count(l), 13, "at most three quarters of 16, plus the new one");
  }
  /* every key still in the table is found with its lead after the churn */
  size_t found = 0;
  for (uint64_t k = 100; k < 1100; k++) found += _mt_lead_get(l, k) == 1;
  cr_assert_eq(found + (_mt_lead_get(l, 1) == 4), _mt_lead_count(l), "every stored key is findable");
  /* decaying removes entries (backward shift) without losing the others */
  size_t before = _mt_lead_count(l);
  for (uint64_t k = 100; k < 1100; k++)
    for (int i = 0; i < 8; i++) _mt_lead_on_time(l, k);
  cr_assert_eq(_mt_lead_count(l), before - found);
  _mt_lead_destroy(l);
}

Test(lead, no_table_means_no_feedback) {
  cr_assert_null(_mt_lead_create(64, 0));
  _mt_lead_late(NULL, 3);
  _mt_lead_on_time(NULL, 3);
  cr_assert_eq(_mt_lead_get(NULL, 3), 0);
  cr_assert_eq(_mt_lead_max(NULL), 0);
  mt_lead_t *l = _mt_lead_create(64, 1000);
  cr_assert_eq(_mt_lead_max(l), 255, "leads fit a byte");
  _mt_lead_late(l, 0);
  cr_assert_eq(_mt_lead_count(l), 0, "key 0 means none");
  _mt_lead_destroy(l);
}
