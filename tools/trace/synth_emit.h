/*
 * synth_emit.h - writes a replayable trace from a program of kernels over
 * logical tensors. Shared by `mt-trace synth` and `mt-trace import-g10`.
 *
 * A generator declares logical tensors (a stable key and a size), then plays
 * the program: launches, frees, iteration marks. The emitter turns that into
 * the records `mt-trace replay` needs, with the invariants a recorded trace
 * would have:
 *
 *   - a tensor gets a region id (allocation order, from 1) and an ALLOC
 *     record when it is allocated: explicitly (persistent tensors, at the
 *     start) or implicitly, just before the first launch that uses it;
 *   - a launch names every tensor of its footprint; each one must be live
 *     (a tensor used after its free is the generator's bug, reported as an
 *     error, never written);
 *   - a freed transient tensor becomes allocatable again only after
 *     synth_emit_renew(), which also checks that every transient tensor was
 *     freed (no leak across a micro-batch or iteration); it then gets a new
 *     region id, as a re-allocation in a real run would;
 *   - NAME records come just before a function's first launch;
 *   - time is a virtual clock from 0: each launch starts when the previous
 *     one ends (stream 0, ideal speed); ALLOC and ITER are stamped with the
 *     start of the next launch, FREE with the end of the previous one.
 *
 * launch_id is XXH3_64bits over (func, keys of the footprint in order), so
 * the same kernel over the same logical tensors has the same id in every
 * iteration even though transient tensors get new region ids.
 *
 * Errors are sticky: after the first failure every call does nothing and
 * synth_emit_close() returns it, with the reason in synth_emit_error().
 * Single-threaded.
 */
#ifndef MT_SYNTH_EMIT_H
#define MT_SYNTH_EMIT_H

#include <stdbool.h>
#include <stdint.h>

#include "trace_format.h"

typedef struct synth_emit synth_emit_t;

typedef struct synth_emit_stats {
  uint64_t launches;          /* LAUNCH records written */
  uint64_t allocs, frees;     /* ALLOC / FREE records written */
  uint64_t persistent_bytes;  /* bytes of persistent tensors allocated */
  uint64_t transient_peak;    /* most bytes of transient tensors live at once */
  uint64_t end_ns;            /* virtual clock after the last launch */
} synth_emit_stats_t;

/* Creates path and writes the header h (filled by the caller: clock,
 * source, chunk and memory sizes). Returns 0 or -errno; *out is NULL on
 * failure. */
int synth_emit_open(synth_emit_t **out, const char *path, const mt_trace_header_t *h);

/* Declares a logical tensor; returns its handle (index, from 0), or
 * UINT32_MAX on failure (sticky error). key: stable across iterations,
 * used in launch ids. persistent tensors are never freed. */
uint32_t synth_emit_tensor(synth_emit_t *e, uint64_t key, uint64_t bytes, bool persistent);
uint64_t synth_emit_tensor_bytes(const synth_emit_t *e, uint32_t t);

/* Returns the function id (from 1) for name, the same id for the same name.
 * The name is copied. 0 on failure (sticky error). */
uint64_t synth_emit_func(synth_emit_t *e, const char *name);

/* Allocates tensor t now (it must not be live). */
void synth_emit_alloc(synth_emit_t *e, uint32_t t);
/* One kernel of dur_ns over the tensors t[0..n), t[i] accessed as kinds[i]
 * (MT_ACC_*; kinds NULL: all unknown). A tensor listed twice is one span
 * whose kind is the union of its listings (read + write = read-write; any
 * unknown listing makes it unknown). */
void synth_emit_launch(synth_emit_t *e, uint64_t func, const uint32_t *t, const uint8_t *kinds, uint32_t n,
                       uint64_t dur_ns);
/* Frees transient tensor t (it must be live). */
void synth_emit_free(synth_emit_t *e, uint32_t t);
/* Marks transient tensor t as held: it may stay live across renew (a
 * gradient that micro-batches accumulate into and the host optimizer
 * takes at the end of the step); freed, it is renewed like any other. */
void synth_emit_hold(synth_emit_t *e, uint32_t t);
/* Checks that no transient tensor is live (held ones excepted) and makes
 * the freed ones allocatable again. */
void synth_emit_renew(synth_emit_t *e);
/* Writes ITER n at the current time. */
void synth_emit_iter(synth_emit_t *e, uint64_t n);

uint64_t synth_emit_now(const synth_emit_t *e);
/* Bytes of transient tensors live now. */
uint64_t synth_emit_live_transient(const synth_emit_t *e);

/* The first error's message, or "" (valid until close). */
const char *synth_emit_error(const synth_emit_t *e);

/* Flushes and closes; fills st when not NULL. Returns 0 or the first error
 * (-errno). e is freed in every case; a message, if any, is printed to
 * stderr prefixed with who. */
int synth_emit_close(synth_emit_t *e, synth_emit_stats_t *st, const char *who);

#endif
