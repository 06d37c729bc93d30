/*
 * trial.c - two settings, each timed over one period; the faster is kept
 * (trial.h states the schedule).
 */
#include "mix.h"
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
  t->sig = 0;
  return mark;
}

/* Time afresh from clock: A at once where A ran last, else after a
 * period of A to settle. */
static int restart(mt_trial_t *t, uint64_t clock) {
  if (t->ran == MT_TRIAL_A) return begin(t, MT_TRIAL_MEASURE_A, clock, MT_TRIAL_A_BEGINS);
  return begin(t, MT_TRIAL_SETTLE_A, clock, -1);
}

static void decide(mt_trial_t *t, mt_trial_arm_t pick) {
  t->pick = pick;
  t->decisions++;
  t->restarts = 0;
  t->irregular = false;
  t->stage = MT_TRIAL_DECIDED;
}

static mt_trial_arm_t step(mt_trial_t *t, uint64_t clock, uint64_t period, int *mark) {
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
    t->restarts = 0;
    *mark = restart(t, clock);
    return arm_of(t);
  }
  if (t->stage == MT_TRIAL_DECIDED || t->stage == MT_TRIAL_AWAIT || clock - t->mark < period) return arm_of(t);
  switch (t->stage) {
  case MT_TRIAL_SETTLE_A:
    *mark = begin(t, MT_TRIAL_MEASURE_A, clock, MT_TRIAL_A_BEGINS);
    break;
  case MT_TRIAL_MEASURE_A:
    t->sig_a = t->sig;
    *mark = begin(t, MT_TRIAL_SETTLE_B, clock, MT_TRIAL_A_ENDS);
    break;
  case MT_TRIAL_SETTLE_B:
    *mark = begin(t, MT_TRIAL_MEASURE_B, clock, MT_TRIAL_B_BEGINS);
    break;
  case MT_TRIAL_MEASURE_B:
    if (t->sig == t->sig_a) {
      *mark = begin(t, MT_TRIAL_AWAIT, clock, MT_TRIAL_B_ENDS);
    } else if (++t->restarts > MT_TRIAL_MAX_RETRIES) { /* never the same launches twice */
      decide(t, MT_TRIAL_A);
      t->irregular = true;
    } else {
      *mark = restart(t, clock); /* different launches: their times say nothing */
    }
    break;
  default: /* LEARN with the same period known: not reached (the period check began the timing) */
    *mark = begin(t, MT_TRIAL_MEASURE_A, clock, MT_TRIAL_A_BEGINS);
    break;
  }
  return arm_of(t);
}

/* the launch joins the signature of the period it falls in (a timed one) */
mt_trial_arm_t _mt_trial_tick(mt_trial_t *t, uint64_t clock, uint64_t period, uint64_t id, int *mark) {
  mt_trial_arm_t arm = step(t, clock, period, mark);
  if (t->stage == MT_TRIAL_MEASURE_A || t->stage == MT_TRIAL_MEASURE_B) t->sig += _mt_mix64(id);
  t->ran = arm;
  return arm;
}

void _mt_trial_decide(mt_trial_t *t, uint64_t a_ns, uint64_t b_ns) {
  if (t->stage != MT_TRIAL_AWAIT) return;
  t->a_ns = a_ns;
  t->b_ns = b_ns;
  /* b < a (100 - margin) / 100; doubles are exact to 104 days in ns */
  decide(t, (double)b_ns * 100.0 < (double)a_ns * (100.0 - t->margin_pct) ? MT_TRIAL_B : MT_TRIAL_A);
}
