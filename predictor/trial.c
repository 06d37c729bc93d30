/*
 * trial.c - two settings, each timed over one period; the faster is kept
 * (trial.h states the schedule).
 */
#include "trial.h"

void _mt_trial_init(mt_trial_t *t, unsigned margin_pct) {
  *t = (mt_trial_t){.stage = MT_TRIAL_LEARN, .pick = MT_TRIAL_A, .margin_pct = margin_pct < 100 ? margin_pct : 99};
}

static mt_trial_arm_t arm_of(const mt_trial_t *t) {
  switch (t->stage) {
  case MT_TRIAL_SETTLE_B:
  case MT_TRIAL_MEASURE_B:
  case MT_TRIAL_AWAIT:
    return MT_TRIAL_B;
  case MT_TRIAL_DECIDED:
    return t->pick;
  default:
    return MT_TRIAL_A;
  }
}

static int begin(mt_trial_t *t, mt_trial_stage_t stage, uint64_t clock, int mark) {
  t->stage = stage;
  t->mark = clock;
  return mark;
}

mt_trial_arm_t _mt_trial_tick(mt_trial_t *t, uint64_t clock, uint64_t period, int *mark) {
  *mark = -1;
  if (period == 0) { /* unknown (again): nothing to time against */
    if (t->stage != MT_TRIAL_DECIDED) {
      t->stage = MT_TRIAL_LEARN;
      t->period = 0; /* its return starts the timing afresh */
    }
    return arm_of(t);
  }
  if (period != t->period) { /* a first, or a changed, loop: time it afresh */
    t->period = period;
    *mark = begin(t, MT_TRIAL_MEASURE_A, clock, MT_TRIAL_A_BEGINS);
    return arm_of(t);
  }
  if (t->stage == MT_TRIAL_DECIDED || t->stage == MT_TRIAL_AWAIT || clock - t->mark < period) return arm_of(t);
  switch (t->stage) {
  case MT_TRIAL_MEASURE_A:
    *mark = begin(t, MT_TRIAL_SETTLE_B, clock, MT_TRIAL_A_ENDS);
    break;
  case MT_TRIAL_SETTLE_B:
    *mark = begin(t, MT_TRIAL_MEASURE_B, clock, MT_TRIAL_B_BEGINS);
    break;
  case MT_TRIAL_MEASURE_B:
    *mark = begin(t, MT_TRIAL_AWAIT, clock, MT_TRIAL_B_ENDS);
    break;
  default: /* LEARN with the same period known: not reached (the period check began MEASURE_A) */
    *mark = begin(t, MT_TRIAL_MEASURE_A, clock, MT_TRIAL_A_BEGINS);
    break;
  }
  return arm_of(t);
}

void _mt_trial_decide(mt_trial_t *t, uint64_t a_ns, uint64_t b_ns) {
  if (t->stage != MT_TRIAL_AWAIT) return;
  t->a_ns = a_ns;
  t->b_ns = b_ns;
  /* b < a (100 - margin) / 100; doubles are exact to 104 days in ns */
  t->pick = (double)b_ns * 100.0 < (double)a_ns * (100.0 - t->margin_pct) ? MT_TRIAL_B : MT_TRIAL_A;
  t->decisions++;
  t->stage = MT_TRIAL_DECIDED;
}
