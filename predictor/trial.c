/*
 * trial.c - two settings, each timed over one window of a period that
 * repeated the one before it; the faster is kept (trial.h states the rule).
 */
#include "mix.h"
#include "trial.h"

void _mt_trial_init(mt_trial_t *t, unsigned margin_pct) {
  *t = (mt_trial_t){.stage = MT_TRIAL_LEARN, .pick = MT_TRIAL_A, .margin_pct = margin_pct < 100 ? margin_pct : 99};
}

static mt_trial_arm_t arm_of(const mt_trial_t *t) {
  switch (t->stage) {
  case MT_TRIAL_TIME_B:
  case MT_TRIAL_AWAIT:
    return MT_TRIAL_B;
  case MT_TRIAL_DECIDED:
    return t->pick;
  default:
    return MT_TRIAL_A;
  }
}

static void decide(mt_trial_t *t, mt_trial_arm_t pick, bool irregular) {
  t->pick = pick;
  t->decisions++;
  t->irregular = irregular;
  t->stage = MT_TRIAL_DECIDED;
}

/* An arm's first boundary: its window 0 begins (a settling window only:
 * no window before it to match, so no slot either). */
static void arm_begins(mt_trial_t *t, mt_trial_stage_t stage, uint64_t clock) {
  t->stage = stage;
  t->mark = clock;
  t->k = 0;
  t->sig = 0;
}

/* The slot of boundary k of the arm whose slots start at base. */
static int slot_of(int base, unsigned k) {
  return base + (int)(k % 2);
}

/* A window of the timed arm ended at clock: whether it counts. */
static int boundary(mt_trial_t *t, uint64_t clock) {
  const bool a = t->stage == MT_TRIAL_TIME_A;
  const int base = a ? 0 : 2;
  t->k++;
  int slot = slot_of(base, t->k);
  /* window k-1 just ended; it counts if window k-2 ran the same launches
   * (and, for B, A's window did) */
  bool counts = t->k >= 2 && t->sig == t->sig_prev && (a || t->sig == t->sig_a);
  t->windows += t->k >= 2;
  t->sig_prev = t->sig;
  t->sig = 0;
  t->mark = clock;
  if (counts && a) {
    t->sig_a = t->sig_prev;
    t->a_from = slot_of(base, t->k - 1);
    t->a_to = slot;
    t->windows = 0;
    arm_begins(t, MT_TRIAL_TIME_B, clock);
  } else if (counts) {
    t->b_from = slot_of(base, t->k - 1);
    t->b_to = slot;
    t->stage = MT_TRIAL_AWAIT;
  } else if (t->windows >= MT_TRIAL_MAX_WINDOWS) {
    decide(t, MT_TRIAL_A, true); /* nothing repeats long enough to time */
  }
  return slot;
}

static mt_trial_arm_t step(mt_trial_t *t, uint64_t clock, uint64_t period, int *slot) {
  *slot = -1;
  if (period == 0) { /* unknown (again): nothing to time against */
    if (t->stage != MT_TRIAL_DECIDED) {
      t->stage = MT_TRIAL_LEARN;
      t->period = 0; /* its return starts the timing afresh */
    }
    return arm_of(t);
  }
  if (period != t->period) { /* a first, or a changed, loop: time it afresh, A first */
    t->period = period;
    t->windows = 0;
    arm_begins(t, MT_TRIAL_TIME_A, clock);
    return arm_of(t);
  }
  if ((t->stage == MT_TRIAL_TIME_A || t->stage == MT_TRIAL_TIME_B) && clock - t->mark >= period)
    *slot = boundary(t, clock);
  return arm_of(t);
}

/* the launch joins the signature of the window it falls in */
mt_trial_arm_t _mt_trial_tick(mt_trial_t *t, uint64_t clock, uint64_t period, uint64_t id, int *slot) {
  mt_trial_arm_t arm = step(t, clock, period, slot);
  t->sig += _mt_mix64(id);
  return arm;
}

void _mt_trial_decide(mt_trial_t *t, uint64_t a_ns, uint64_t b_ns) {
  if (t->stage != MT_TRIAL_AWAIT) return;
  t->a_ns = a_ns;
  t->b_ns = b_ns;
  /* b < a (100 - margin) / 100; doubles are exact to 104 days in ns */
  decide(t, (double)b_ns * 100.0 < (double)a_ns * (100.0 - t->margin_pct) ? MT_TRIAL_B : MT_TRIAL_A, false);
}
