/* Description: the measured choice between two settings
 * (predictor/trial.c): arm A while the period is unknown and for one timed
 * period, then B for a period to settle and one timed, B until the times
 * are in; B is kept only when faster by more than the margin, so a tie
 * keeps A; a changed period times both afresh (after a period of A to
 * settle where B ran); a period lost again before a decision goes back to
 * learning, after one keeps the choice; timed periods that ran different
 * launches (an evaluation pass in one) are not compared: the timing starts
 * again, and a loop that never repeats its launches keeps A, untimed. */
#include <criterion/criterion.h>

#include "trial.h"

/* A loop on a clock where A costs ns_a a launch and B ns_b. The caller's
 * side of the trial: the time at each mark, and the decision as soon as
 * it awaits one (the times are known at once here). */
typedef struct loop {
  mt_trial_t t;
  uint64_t P;                  /* the loop's launches repeat with this period */
  uint64_t odd_from, odd_to;   /* launches in [from, to) are others (an evaluation pass) */
  uint64_t now, ns_a, ns_b;
  uint64_t at[MT_TRIAL_MARKS];
  int marks; /* how many marks were named */
} loop_t;

static uint64_t id_of(const loop_t *l, uint64_t clock) {
  return clock >= l->odd_from && clock < l->odd_to ? 1000000 + clock : clock % l->P + 1;
}

static mt_trial_arm_t step(loop_t *l, uint64_t clock, uint64_t period) {
  int mark;
  mt_trial_arm_t arm = _mt_trial_tick(&l->t, clock, period, id_of(l, clock), &mark);
  if (mark >= 0) {
    cr_assert_lt(mark, MT_TRIAL_MARKS);
    l->at[mark] = l->now;
    l->marks++;
  }
  if (l->t.stage == MT_TRIAL_AWAIT)
    _mt_trial_decide(&l->t, l->at[MT_TRIAL_A_ENDS] - l->at[MT_TRIAL_A_BEGINS],
                     l->at[MT_TRIAL_B_ENDS] - l->at[MT_TRIAL_B_BEGINS]);
  l->now += arm == MT_TRIAL_A ? l->ns_a : l->ns_b;
  return arm;
}

static void loop_init(loop_t *l, uint64_t P, uint64_t ns_a, uint64_t ns_b) {
  *l = (loop_t){.P = P, .ns_a = ns_a, .ns_b = ns_b};
  _mt_trial_init(&l->t, 2);
}

Test(trial, schedule_marks_and_a_clear_win_for_b) {
  loop_t l;
  loop_init(&l, 100, 1000, 800);
  const uint64_t P = 100;
  /* unknown until 50: A; then A timed 50..149, B settles 150..249, B timed 250..349 */
  for (uint64_t c = 0; c < 400; c++) {
    int mark;
    mt_trial_t before = l.t;
    mt_trial_arm_t want = c < 150 ? MT_TRIAL_A : MT_TRIAL_B;
    cr_assert_eq(_mt_trial_tick(&before, c, c >= 50 ? P : 0, c % P + 1, &mark), want, "launch %lu",
                 (unsigned long)c);
    int want_mark = c == 50 ? MT_TRIAL_A_BEGINS : c == 150 ? MT_TRIAL_A_ENDS : c == 250 ? MT_TRIAL_B_BEGINS
                  : c == 350 ? MT_TRIAL_B_ENDS : -1;
    cr_assert_eq(mark, want_mark, "launch %lu", (unsigned long)c);
    cr_assert_eq(step(&l, c, c >= 50 ? P : 0), want);
  }
  cr_assert_eq(l.marks, 4);
  cr_assert_eq(l.t.stage, MT_TRIAL_DECIDED);
  cr_assert_eq(l.t.a_ns, 100 * 1000);
  cr_assert_eq(l.t.b_ns, 100 * 800);
  cr_assert_eq(l.t.pick, MT_TRIAL_B);
  cr_assert_eq(l.t.decisions, 1);
}

Test(trial, b_runs_until_the_times_are_in) {
  mt_trial_t t;
  _mt_trial_init(&t, 2);
  int mark;
  for (uint64_t c = 0; c < 1000; c++) (void)_mt_trial_tick(&t, c, 100, c % 100 + 1, &mark);
  cr_assert_eq(t.stage, MT_TRIAL_AWAIT);
  cr_assert_eq(_mt_trial_tick(&t, 1000, 100, 1, &mark), MT_TRIAL_B);
  cr_assert_eq(mark, -1, "no mark while it awaits");
  _mt_trial_decide(&t, 5000, 5000);
  cr_assert_eq(t.stage, MT_TRIAL_DECIDED);
  cr_assert_eq(_mt_trial_tick(&t, 1001, 100, 2, &mark), MT_TRIAL_A, "a tie keeps A");
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
  for (uint64_t c = 0; c < 400; c++) (void)step(&l, c, 100);
  cr_assert_eq(l.t.pick, MT_TRIAL_B);
  /* the loop grows to 300 launches, and now A is the faster */
  l.ns_b = 2000;
  l.P = 300;
  cr_assert_eq(step(&l, 400, 300), MT_TRIAL_A, "timing again, A first");
  cr_assert_eq(l.t.stage, MT_TRIAL_SETTLE_A, "B ran last: a period of A to settle");
  for (uint64_t c = 401; c < 400 + 4 * 300 + 1; c++) (void)step(&l, c, 300);
  cr_assert_eq(l.t.stage, MT_TRIAL_DECIDED);
  cr_assert_eq(l.t.pick, MT_TRIAL_A);
  cr_assert_eq(l.t.a_ns, 300 * 1000);
  cr_assert_eq(l.t.b_ns, 300 * 2000);
  cr_assert_eq(l.t.decisions, 2);
}

Test(trial, a_period_lost_before_a_decision_learns_again_after_one_keeps_it) {
  loop_t l;
  loop_init(&l, 100, 1000, 500);
  for (uint64_t c = 0; c < 200; c++) (void)step(&l, c, 100);
  cr_assert_eq(l.t.stage, MT_TRIAL_SETTLE_B);
  cr_assert_eq(step(&l, 200, 0), MT_TRIAL_A, "unknown again: A");
  cr_assert_eq(l.t.stage, MT_TRIAL_LEARN);
  cr_assert_eq(step(&l, 201, 100), MT_TRIAL_A);
  cr_assert_eq(l.t.stage, MT_TRIAL_MEASURE_A, "known again: A timed from here");
  for (uint64_t c = 202; c < 600; c++) (void)step(&l, c, 100);
  cr_assert_eq(l.t.stage, MT_TRIAL_DECIDED);
  cr_assert_eq(l.t.pick, MT_TRIAL_B);
  cr_assert_eq(step(&l, 600, 0), MT_TRIAL_B, "decided: kept while the period is unknown");
  cr_assert_eq(step(&l, 601, 100), MT_TRIAL_B, "the same period again: still decided");
  cr_assert_eq(l.t.decisions, 1);
}

Test(trial, periods_that_ran_different_launches_are_not_compared) {
  loop_t l;
  loop_init(&l, 100, 1000, 500);
  /* an evaluation pass (other launches, and slow) in B's timed period,
   * 250..349: without the check B would look slower and A be kept */
  l.odd_from = 280;
  l.odd_to = 300;
  l.ns_b = 500;
  uint64_t c = 0;
  for (; c < 350; c++) (void)step(&l, c, 100);
  cr_assert_eq(l.t.stage, MT_TRIAL_SETTLE_A, "different launches: timing again, after A settles");
  cr_assert_eq(l.t.restarts, 1);
  cr_assert_eq(step(&l, c++, 100), MT_TRIAL_A);
  for (; c < 350 + 400 + 1; c++) (void)step(&l, c, 100);
  cr_assert_eq(l.t.stage, MT_TRIAL_DECIDED);
  cr_assert_eq(l.t.pick, MT_TRIAL_B, "timed on the same launches: B, twice as fast");
  cr_assert_eq(l.t.b_ns, 100 * 500);
  cr_assert_not(l.t.irregular);
}

Test(trial, a_loop_that_never_repeats_keeps_a_untimed) {
  loop_t l;
  loop_init(&l, 100, 1000, 500);
  l.odd_from = 0;
  l.odd_to = UINT64_MAX; /* every launch new */
  uint64_t c = 0;
  for (; c < 5000 && l.t.stage != MT_TRIAL_DECIDED; c++) (void)step(&l, c, 100);
  cr_assert_eq(l.t.stage, MT_TRIAL_DECIDED);
  cr_assert(l.t.irregular);
  cr_assert_eq(l.t.pick, MT_TRIAL_A);
  cr_assert_eq(l.marks, 3 * (MT_TRIAL_MAX_RETRIES + 1), "A_BEGINS, A_ENDS, B_BEGINS per try, no B_ENDS");
  cr_assert_eq(step(&l, c, 100), MT_TRIAL_A);
}
