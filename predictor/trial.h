/*
 * trial.h - which of two settings runs a training loop faster, measured:
 * each runs whole periods (iterations) and the faster one is kept.
 *
 * MT_HANDOFF=auto asks it where nothing else decides (handoff.c). The
 * handoff (freed memory reused in stream order) saves bytes on every
 * workload, but where the link has room it costs time on some and not on
 * others, and which is which shows only by running: on G10's traces, ViT
 * ran at 79.3% of ideal with it against 93.8% without, BERT at 100% both
 * ways (with 5.4x fewer bytes). So the loop runs with arm A (the handoff
 * on: fewer bytes, kept on a tie), then with arm B, and keeps B only if B
 * was clearly faster.
 *
 * Windows: once the period P is known (predictor/reuse.h learns it), the
 * launch clock is cut into windows of P launches, and each window keeps a
 * signature of its launch identities (a sum of their mixes: the same
 * launches in any order give the same sum; in a loop that repeats, any P
 * consecutive launches are one of each). A window is timed, and counts,
 * only if the window before it ran the same launches under the same arm:
 *   - that window settles what the other arm, or an odd stretch, left
 *     queued and resident (on ViT the first iteration after the switch
 *     ran at 83.4% of ideal, the next at 94.1%);
 *   - an evaluation pass, a skipped branch or an optimizer step every few
 *     iterations, and the iteration after it (the predictor expected the
 *     usual one), fall outside it. Compared whatever they held, ViT's
 *     off window with an evaluation pass every third iteration took
 *     5.25 s against 4.49 s on, and BERT's, after one, 7.87 against
 *     7.29 s, though both run at the same speed when nothing is odd.
 * Schedule:
 *   LEARN   period unknown: A;
 *   TIME_A  A, window after window, until one counts (and the one before
 *           it matched);
 *   TIME_B  B, the same, until one counts and ran the same launches as
 *           A's;
 *   AWAIT   B, until the caller has both times (_mt_trial_decide);
 *   DECIDED B if it took less than (100 - margin)% of A's time, else A.
 * With no count after MT_TRIAL_MAX_WINDOWS windows the loop is taken as
 * too irregular to time, and A is kept (irregular). A different period
 * (the loop changed: a longer sequence, gradient accumulation) starts the
 * timing again, A first; while it is unknown again, the current choice
 * stays (LEARN only before the first decision).
 *
 * Timing is the caller's: at each window boundary the tick names a slot,
 * and the caller records the time there (handoff.c: an event on the
 * launch's stream, timed on the GPU). Not the host's clock: it runs ahead
 * of the GPU by an amount that changes with the setting (with the handoff
 * on at most MT_RUNAHEAD launches, off up to seconds), and in the periods
 * after a switch that lead grows or shrinks. Timed on the host, BERT's
 * period with the handoff off looked 2.1% faster (7.129 against 7.285 s)
 * while the GPU took 7.285 s both ways.
 *
 * Pure logic: no CUDA, no pager; one caller at a time.
 */
#ifndef MT_TRIAL_H
#define MT_TRIAL_H

#include <stdbool.h>
#include <stdint.h>

typedef enum { MT_TRIAL_A = 0, MT_TRIAL_B = 1 } mt_trial_arm_t;

typedef enum {
  MT_TRIAL_LEARN,
  MT_TRIAL_TIME_A,
  MT_TRIAL_TIME_B,
  MT_TRIAL_AWAIT,
  MT_TRIAL_DECIDED,
} mt_trial_stage_t;

/* Time slots the caller records into: 0-1 alternate for A's windows, 2-3
 * for B's. */
#define MT_TRIAL_SLOTS 4
/* Windows timed without one counting, then it gives up (irregular). */
#define MT_TRIAL_MAX_WINDOWS 12

typedef struct mt_trial {
  mt_trial_stage_t stage;
  mt_trial_arm_t pick;    /* DECIDED: the arm kept */
  unsigned margin_pct;    /* B must be this much faster, percent */
  uint64_t period;        /* the window, in launches */
  uint64_t mark;          /* the clock where the current window began */
  unsigned k;             /* boundaries in this arm so far (its first begins window 0) */
  unsigned windows;       /* windows timed, this decision */
  uint64_t sig, sig_prev; /* this window's launches so far; the one before it's */
  uint64_t sig_a;         /* the launches of A's window that counted */
  int a_from, a_to;       /* its slots */
  int b_from, b_to;       /* B's, in AWAIT */
  uint64_t a_ns, b_ns;    /* one window of each, as measured last */
  unsigned decisions;     /* how many times it decided */
  bool irregular;         /* decided A without a timing: no windows matched */
} mt_trial_t;

void _mt_trial_init(mt_trial_t *t, unsigned margin_pct);
/* A launch of identity id at clock (launches so far, increasing) begins,
 * the period now known (0: unknown): returns the arm to run it with.
 * *slot is where to record the time before it (0..MT_TRIAL_SLOTS-1), or
 * -1. */
mt_trial_arm_t _mt_trial_tick(mt_trial_t *t, uint64_t clock, uint64_t period, uint64_t id, int *slot);
/* AWAIT: A's window time (slot a_from to a_to) and B's (b_from to b_to),
 * ns. Decides; else (another stage) nothing. */
void _mt_trial_decide(mt_trial_t *t, uint64_t a_ns, uint64_t b_ns);

#endif
