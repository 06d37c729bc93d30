/* Description: the measured choice between two settings
 * (predictor/trial.c): arm A while the period is unknown, then each arm
 * runs window after window (P launches) until a window counts, one that
 * ran the same launches as the window before it (and, for B, as A's); B
 * until the times are in; B is kept only when faster by more than the
 * margin, so a tie keeps A; a changed period times both afresh, A first;
 * a period lost again before a decision goes back to learning, after one
 * keeps the choice; a window with other launches (an evaluation pass) and
 * the one after it do not count; a loop that never repeats keeps A,
 * untimed. */
#include <criterion/criterion.h>

#include "trial.h"

/* A loop on a clock where A costs ns_a a launch and B ns_b, except odd
 * launches (another pass) which cost ns_odd. The caller's side of the
 * trial: the time at each slot it names, and the decision as soon as it
 * awaits one (the times are known at once here). */
typedef struct loop {
  mt_trial_t t;
  uint64_t P;                /* the loop's launches repeat with this period */
  uint64_t odd_from, odd_to; /* launches in [from, to) are others */
  uint64_t now, ns_a, ns_b, ns_odd;
  uint64_t at[MT_TRIAL_SLOTS];
  int slots; /* how many times a slot was named */
} loop_t;

static uint64_t id_of(const loop_t *l, uint64_t clock) {
  return clock >= l->odd_from && clock < l->odd_to ? 1000000 + clock : clock % l->P + 1;
}

static mt_trial_arm_t step(loop_t *l, uint64_t clock, uint64_t period) {
  int slot;
  mt_trial_arm_t arm = _mt_trial_tick(&l->t, clock, period, id_of(l, clock), &slot);
  if (slot >= 0) {
    cr_assert_lt(slot, MT_TRIAL_SLOTS);
    l->at[slot] = l->now;
    l->slots++;
  }
  if (l->t.stage == MT_TRIAL_AWAIT)
    _mt_trial_decide(&l->t, l->at[l->t.a_to] - l->at[l->t.a_from], l->at[l->t.b_to] - l->at[l->t.b_from]);
  bool odd = clock >= l->odd_from && clock < l->odd_to;
  l->now += odd ? l->ns_odd : arm == MT_TRIAL_A ? l->ns_a : l->ns_b;
  return arm;
}

static void loop_init(loop_t *l, uint64_t P, uint64_t ns_a, uint64_t ns_b) {
  *l = (loop_t){.P = P, .ns_a = ns_a, .ns_b = ns_b, .ns_odd = ns_a};
  _mt_trial_init(&l->t, 2);
}

Test(trial, schedule_slots_and_a_clear_win_for_b) {
  loop_t l;
  loop_init(&l, 100, 1000, 800);
  const uint64_t P = 100;
  /* unknown until 50: A; A's windows 50..149 (settles), 150..249 (counts);
   * B's 250..349 (settles), 350..449 (counts) */
  for (uint64_t c = 0; c < 500; c++) {
    int slot;
    mt_trial_t before = l.t;
    mt_trial_arm_t want = c < 250 ? MT_TRIAL_A : MT_TRIAL_B;
    cr_assert_eq(_mt_trial_tick(&before, c, c >= 50 ? P : 0, c % P + 1, &slot), want, "launch %lu",
                 (unsigned long)c);
    int want_slot = c == 150 ? 1 : c == 250 ? 0 : c == 350 ? 3 : c == 450 ? 2 : -1;
    cr_assert_eq(slot, want_slot, "launch %lu: slot %d", (unsigned long)c, slot);
    cr_assert_eq(step(&l, c, c >= 50 ? P : 0), want);
  }
  cr_assert_eq(l.slots, 4);
  cr_assert_eq(l.t.stage, MT_TRIAL_DECIDED);
  cr_assert_eq(l.t.a_ns, 100 * 1000);
  cr_assert_eq(l.t.b_ns, 100 * 800);
  cr_assert_eq(l.t.pick, MT_TRIAL_B);
  cr_assert_eq(l.t.decisions, 1);
  cr_assert_not(l.t.irregular);
}

Test(trial, b_runs_until_the_times_are_in) {
  mt_trial_t t;
  _mt_trial_init(&t, 2);
  int slot;
  for (uint64_t c = 0; c < 1000; c++) (void)_mt_trial_tick(&t, c, 100, c % 100 + 1, &slot);
  cr_assert_eq(t.stage, MT_TRIAL_AWAIT);
  cr_assert_eq(_mt_trial_tick(&t, 1000, 100, 1, &slot), MT_TRIAL_B);
  cr_assert_eq(slot, -1, "no slot while it awaits");
  _mt_trial_decide(&t, 5000, 5000);
  cr_assert_eq(t.stage, MT_TRIAL_DECIDED);
  cr_assert_eq(_mt_trial_tick(&t, 1001, 100, 2, &slot), MT_TRIAL_A, "a tie keeps A");
  _mt_trial_decide(&t, 9000, 1000);
  cr_assert_eq(t.pick, MT_TRIAL_A, "decided: a late answer changes nothing");
  cr_assert_eq(t.decisions, 1);
}

Test(trial, a_tie_or_a_win_inside_the_margin_keeps_a) {
  const uint64_t b_ns[] = {1000, 990, 981, 1200};
  for (unsigned i = 0; i < sizeof(b_ns) / sizeof(b_ns[0]); i++) {
    loop_t l;
    loop_init(&l, 100, 1000, b_ns[i]);
    for (uint64_t c = 0; c < 500; c++) (void)step(&l, c, 100);
    cr_assert_eq(l.t.stage, MT_TRIAL_DECIDED);
    cr_assert_eq(l.t.pick, MT_TRIAL_A, "B at %lu ns against 1000: within 2%% or slower", (unsigned long)b_ns[i]);
    cr_assert_eq(step(&l, 500, 100), MT_TRIAL_A);
  }
  loop_t l;
  loop_init(&l, 100, 1000, 979);
  for (uint64_t c = 0; c < 500; c++) (void)step(&l, c, 100);
  cr_assert_eq(l.t.pick, MT_TRIAL_B, "2.1%% faster: B");
}

Test(trial, a_changed_period_times_both_afresh) {
  loop_t l;
  loop_init(&l, 100, 1000, 500);
  for (uint64_t c = 0; c < 500; c++) (void)step(&l, c, 100);
  cr_assert_eq(l.t.pick, MT_TRIAL_B);
  /* the loop grows to 300 launches, and now A is the faster */
  l.ns_b = 2000;
  l.P = 300;
  cr_assert_eq(step(&l, 500, 300), MT_TRIAL_A, "timing again, A first");
  cr_assert_eq(l.t.stage, MT_TRIAL_TIME_A);
  for (uint64_t c = 501; c < 500 + 4 * 300 + 1; c++) (void)step(&l, c, 300);
  cr_assert_eq(l.t.stage, MT_TRIAL_DECIDED);
  cr_assert_eq(l.t.pick, MT_TRIAL_A);
  cr_assert_eq(l.t.a_ns, 300 * 1000);
  cr_assert_eq(l.t.b_ns, 300 * 2000);
  cr_assert_eq(l.t.decisions, 2);
}

Test(trial, a_period_lost_before_a_decision_learns_again_after_one_keeps_it) {
  loop_t l;
  loop_init(&l, 100, 1000, 500);
  for (uint64_t c = 0; c < 300; c++) (void)step(&l, c, 100);
  cr_assert_eq(l.t.stage, MT_TRIAL_TIME_B);
  cr_assert_eq(step(&l, 300, 0), MT_TRIAL_A, "unknown again: A");
  cr_assert_eq(l.t.stage, MT_TRIAL_LEARN);
  cr_assert_eq(step(&l, 301, 100), MT_TRIAL_A);
  cr_assert_eq(l.t.stage, MT_TRIAL_TIME_A, "known again: A timed from here");
  for (uint64_t c = 302; c < 800; c++) (void)step(&l, c, 100);
  cr_assert_eq(l.t.stage, MT_TRIAL_DECIDED);
  cr_assert_eq(l.t.pick, MT_TRIAL_B);
  cr_assert_eq(step(&l, 800, 0), MT_TRIAL_B, "decided: kept while the period is unknown");
  cr_assert_eq(step(&l, 801, 100), MT_TRIAL_B, "the same period again: still decided");
  cr_assert_eq(l.t.decisions, 1);
}

Test(trial, a_window_with_other_launches_and_the_one_after_it_do_not_count) {
  loop_t l;
  loop_init(&l, 100, 1000, 500);
  /* an evaluation pass (other launches, slow) in B's first timed window,
   * 350..449: compared, B would look slower and A be kept */
  l.odd_from = 380;
  l.odd_to = 400;
  l.ns_odd = 20000;
  uint64_t c = 0;
  for (; c < 451; c++) (void)step(&l, c, 100);
  cr_assert_eq(l.t.stage, MT_TRIAL_TIME_B, "that window did not count");
  for (; c < 551; c++) (void)step(&l, c, 100);
  cr_assert_eq(l.t.stage, MT_TRIAL_TIME_B, "nor the one after it (the one before it differs)");
  for (; c < 651; c++) (void)step(&l, c, 100);
  cr_assert_eq(l.t.stage, MT_TRIAL_DECIDED, "the next does");
  cr_assert_eq(l.t.pick, MT_TRIAL_B, "timed on the usual launches: B, twice as fast");
  cr_assert_eq(l.t.b_ns, 100 * 500);
  cr_assert_not(l.t.irregular);
}

Test(trial, a_loop_that_never_repeats_keeps_a_untimed) {
  loop_t l;
  loop_init(&l, 100, 1000, 500);
  l.odd_from = 0;
  l.odd_to = UINT64_MAX; /* every launch new */
  uint64_t c = 0;
  for (; c < 5000 && l.t.stage != MT_TRIAL_DECIDED; c++) cr_assert_eq(step(&l, c, 100), MT_TRIAL_A);
  cr_assert_eq(l.t.stage, MT_TRIAL_DECIDED);
  cr_assert(l.t.irregular);
  cr_assert_eq(l.t.pick, MT_TRIAL_A);
  cr_assert_eq(c, 1 + 100 * (MT_TRIAL_MAX_WINDOWS + 1), "given up after %d windows (decided at launch %lu)",
               MT_TRIAL_MAX_WINDOWS, (unsigned long)c - 1);
  cr_assert_eq(step(&l, c, 100), MT_TRIAL_A);
}
