/*
 * trace.h - the recorder's entry points, called by the pager (MT_TRACE).
 *
 * Every call is cheap when tracing is off (one load) and under 100 ns when
 * on: records go to a per-thread buffer, which a flusher writes out at
 * least once a second and at exit, so a crash loses at most the last
 * second. Safe from any thread; never blocks on I/O in the caller.
 */
#ifndef MT_TRACE_H
#define MT_TRACE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "trace_format.h"

extern _Atomic bool _mt_trace_enabled;
static inline bool _mt_trace_on(void) {
  return atomic_load_explicit(&_mt_trace_enabled, memory_order_relaxed);
}

/* Starts recording to path with header fields filled by the caller
 * (mt_trace_header_init + budgets); 0 or -errno (logged). */
int _mt_trace_start(const char *path, const mt_trace_header_t *h, const char *options);
/* Flushes everything and closes the file (also run at exit). */
void _mt_trace_stop(void);
uint64_t _mt_trace_now(void);

void _mt_trace_alloc(uint64_t region, uint64_t bytes, uint32_t stream, bool small);
void _mt_trace_free(uint64_t region, uint32_t stream, bool async);
/* name: the function's name, recorded once per func id (NULL: unknown).
 * kinds: nfoot MT_ACC_* values, or NULL when nothing is known (all
 * MT_ACC_UNKNOWN). */
void _mt_trace_launch(uint64_t launch_id, uint64_t func, const char *name, uint32_t stream,
                      const mt_trace_span_t *foot, const uint8_t *kinds, uint32_t nfoot, uint64_t dur_ns,
                      bool graph);
void _mt_trace_copy(uint32_t dir, bool pager, uint32_t stream, uint64_t bytes, uint64_t t0, uint64_t t1);
/* type: MT_TR_FETCH or MT_TR_EVICT */
void _mt_trace_move(uint8_t type, uint64_t region, uint32_t chunk, uint8_t from, uint8_t to, bool dirty,
                    bool prefetch, uint64_t bytes);
void _mt_trace_stall(uint32_t cause, uint64_t t0, uint64_t t1);
/* A host optimizer step over bytes of parameters, from t0 to t1. */
void _mt_trace_opt_step(uint64_t bytes, uint64_t t0, uint64_t t1);
/* heuristic: inferred by the recorder rather than mt_mark_iteration(). */
void _mt_trace_iter(bool heuristic);

#endif
