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
 * Schedule, in whole periods of the launch clock once the period is known
 * (predictor/reuse.h learns it):
 *   LEARN      period unknown: A;
 *   SETTLE_A   one period of A, not timed (only when B ran before);
 *   MEASURE_A  one period of A, timed;
 *   SETTLE_B   one period of B, not timed: what A left queued and resident
 *              is not B's (on ViT the first iteration after the switch
 *              ran at 83.4% of ideal, the next at 94.1%);
 *   MEASURE_B  one period of B, timed;
 *   AWAIT      B, until the caller has both times (_mt_trial_decide);
 *   DECIDED    B if it took less than (100 - margin)% of A's time, else A.
 * A different period (the loop changed: a longer sequence, gradient
 * accumulation) starts the timing again; while it is unknown again, the
 * current choice stays (LEARN only before the first decision).
 *
 * The two timed periods must have run the same launches, or their times
 * say nothing about the settings: an evaluation pass, a skipped branch or
 * an optimizer step every few iterations falls into one of them (on G10's
 * ViT with an evaluation pass every third iteration, the off period took
 * 8.35 s against 4.74 s on, and auto kept the handoff on; on BERT the
 * other way round). So each timed period keeps a signature of its launch
 * identities (a sum of their mixes: the same launches in any order give
 * the same sum), and where the two differ the timing starts again, A first
 * (SETTLE_A, MEASURE_A, ...). After MT_TRIAL_MAX_RETRIES such restarts
 * the loop is taken as too irregular to time and A is kept (irregular).
 *
 * Timing is the caller's: at each mark the tick names, it records the
 * time (handoff.c: an event on the launch's stream, timed on the GPU).
 * Not the host's clock: it runs ahead of the GPU by an amount that
 * changes with the setting (with the handoff on at most MT_RUNAHEAD
 * launches, off up to seconds), and in the periods after a switch that
 * lead grows or shrinks. Timed on the host, BERT's period with the
 * handoff off looked 2.1% faster (7.129 against 7.285 s) while the GPU
 * took 7.285 s both ways.
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
  MT_TRIAL_SETTLE_A,
  MT_TRIAL_MEASURE_A,
  MT_TRIAL_SETTLE_B,
  MT_TRIAL_MEASURE_B,
  MT_TRIAL_AWAIT,
  MT_TRIAL_DECIDED,
} mt_trial_stage_t;

/* The marks: the caller records the time at each (see _mt_trial_tick). */
enum { MT_TRIAL_A_BEGINS, MT_TRIAL_A_ENDS, MT_TRIAL_B_BEGINS, MT_TRIAL_B_ENDS, MT_TRIAL_MARKS };

typedef struct mt_trial {
  mt_trial_stage_t stage;
  mt_trial_arm_t pick;   /* DECIDED: the arm kept */
  mt_trial_arm_t ran;    /* the arm the last launch ran with */
  unsigned margin_pct;   /* B must be this much faster, percent */
  uint64_t period;       /* the period being measured, in launches */
  uint64_t mark;         /* the clock where the current stage began */
  uint64_t a_ns, b_ns;   /* one period of each, as measured last */
  uint64_t sig, sig_a;   /* launch identities of the timed period so far, of A's */
  unsigned decisions;    /* how many times it decided */
  unsigned restarts;     /* timings started again for different launches, this decision */
  bool irregular;        /* decided A without a timing: the periods never matched */
} mt_trial_t;

#define MT_TRIAL_MAX_RETRIES 3

void _mt_trial_init(mt_trial_t *t, unsigned margin_pct);
/* A launch of identity id at clock (launches so far, increasing) begins,
 * the period now known (0: unknown): returns the arm to run it with.
 * *mark is the mark to record before it (MT_TRIAL_*_BEGINS/ENDS), or -1.
 * A_BEGINS again means the timing started afresh: earlier marks are
 * void. */
mt_trial_arm_t _mt_trial_tick(mt_trial_t *t, uint64_t clock, uint64_t period, uint64_t id, int *mark);
/* AWAIT: the times from A_BEGINS to A_ENDS and from B_BEGINS to B_ENDS,
 * ns. Decides; else (another stage) nothing. */
void _mt_trial_decide(mt_trial_t *t, uint64_t a_ns, uint64_t b_ns);

#endif
