/*
 * recorder_check.h - a multi-threaded run of the recorder and the check of
 * what it wrote, shared by the criterion test (test_trace.c) and the plain
 * program that runs under ThreadSanitizer (recorder_threads.c).
 *
 * The includer defines RC_CHECK(cond, fmt, ...) (fail the test when cond is
 * false). Every event carries a tag (thread index + 1) << 32 | event number
 * in a field that round-trips, so the check can tell that each event is in
 * the file exactly once and in its thread's order.
 */
#ifndef MT_RECORDER_CHECK_H
#define MT_RECORDER_CHECK_H

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "trace.h"
#include "trace_io.h"

#define RC_MAX_THREADS 16
#define RC_FUNCS 7     /* distinct kernels */
#define RC_CYCLE 12    /* launches in the repeating sequence */

typedef struct rc_arg {
  uint32_t index;
  uint32_t events;
} rc_arg_t;

static void *rc_worker(void *p) {
  const rc_arg_t *a = p;
  uint32_t i = a->index;
  for (uint32_t k = 0; k < a->events; k++) {
    uint64_t tag = ((uint64_t)(i + 1) << 32) | k;
    switch (k % 4) {
      case 0: _mt_trace_alloc(tag, k, i, k & 1); break;
      case 1: {
        mt_trace_span_t foot[3] = {{tag, 1, 2}, {tag, 3, 4}, {tag, 5, 6}};
        uint32_t f = (k / 4) % RC_FUNCS;
        char name[32];
        snprintf(name, sizeof(name), "kernel_%u", f);
        _mt_trace_launch(1000 + (k / 4) % RC_CYCLE, f, name, i, foot, NULL, 1 + (k / 4) % 3, 0, false);
        break;
      }
      case 2: _mt_trace_copy(MT_TR_H2D, k & 2, i, tag, 10, 20); break;
      case 3: _mt_trace_free(tag, i, false); break;
    }
  }
  return NULL;
}

/* Records waves x threads x events events (each wave's threads exit before
 * the next wave starts, so rings get reused) into path. Returns 0. */
static int rc_record(const char *path, unsigned waves, unsigned threads, uint32_t events) {
  mt_trace_header_t h;
  mt_trace_header_init(&h, MT_TRACE_CLOCK_MONOTONIC, "mtalloc");
  h.chunk_bytes = 2 << 20;
  RC_CHECK(_mt_trace_start(path, &h, "MT_TRACE=test\n") == 0, "start on %s", path);
  RC_CHECK(_mt_trace_on(), "tracing is on after start");
  pthread_t th[RC_MAX_THREADS];
  rc_arg_t args[RC_MAX_THREADS];
  for (unsigned w = 0; w < waves; w++) {
    for (unsigned i = 0; i < threads; i++) {
      args[i] = (rc_arg_t){.index = w * threads + i, .events = events};
      RC_CHECK(pthread_create(&th[i], NULL, rc_worker, &args[i]) == 0, "pthread_create");
    }
    for (unsigned i = 0; i < threads; i++) pthread_join(th[i], NULL);
  }
  _mt_trace_stop();
  RC_CHECK(!_mt_trace_on(), "tracing is off after stop");
  return 0;
}

/* Reads path back and checks it against rc_record's events. Returns the
 * number of heuristic ITER records found. */
static uint64_t rc_verify(const char *path, unsigned nthreads, uint32_t events) {
  char err[512];
  mt_trace_reader_t *r;
  RC_CHECK(mt_trace_open(path, &r, err, sizeof(err)) == 0, "open: %s", err);
  RC_CHECK(strcmp(mt_trace_options(r), "MT_TRACE=test\n") == 0, "options text");
  RC_CHECK(mt_trace_header(r)->chunk_bytes == 2 << 20, "header field");
  RC_CHECK(mt_trace_header(r)->start_ns != 0, "start_ns set");
  uint32_t next[RC_MAX_THREADS] = {0};
  int tid_of[RC_MAX_THREADS];
  for (unsigned i = 0; i < RC_MAX_THREADS; i++) tid_of[i] = -1;
  unsigned names[RC_FUNCS] = {0};
  static uint8_t iter_seen[1u << 16];
  memset(iter_seen, 0, sizeof(iter_seen));
  uint64_t iters = 0;
  const mt_trace_rec_t *rec;
  int rc;
  while ((rc = mt_trace_next(r, &rec)) == 1) {
    uint64_t tag = 0;
    switch (rec->type) {
      case MT_TR_ALLOC: tag = ((const mt_trace_alloc_t *)rec)->region; break;
      case MT_TR_FREE: tag = ((const mt_trace_free_t *)rec)->region; break;
      case MT_TR_COPY: tag = ((const mt_trace_copy_t *)rec)->bytes; break;
      case MT_TR_LAUNCH: {
        const mt_trace_launch_t *l = (const void *)rec;
        const mt_trace_span_t *foot = (const void *)(l + 1);
        RC_CHECK(l->nfoot >= 1 && l->nfoot <= 3, "nfoot %u", l->nfoot);
        tag = foot[0].region;
        for (uint32_t s = 0; s < l->nfoot; s++)
          RC_CHECK(foot[s].region == tag && foot[s].offset == 2 * s + 1 && foot[s].bytes == 2 * s + 2, "span");
        RC_CHECK(l->func < RC_FUNCS && names[l->func] == 1, "NAME of func %llu before its launch",
                 (unsigned long long)l->func);
        break;
      }
      case MT_TR_NAME: {
        const mt_trace_name_t *n = (const void *)rec;
        char want[32];
        RC_CHECK(n->id < RC_FUNCS, "NAME id %llu", (unsigned long long)n->id);
        snprintf(want, sizeof(want), "kernel_%u", (unsigned)n->id);
        RC_CHECK(n->len == strlen(want) && memcmp(n + 1, want, n->len) == 0, "NAME text");
        names[n->id]++;
        continue;
      }
      case MT_TR_ITER: {
        const mt_trace_iter_t *it = (const void *)rec;
        RC_CHECK(rec->flags == MT_TRF_HEURISTIC, "ITER flags %u", rec->flags);
        RC_CHECK(it->iteration < sizeof(iter_seen) && !iter_seen[it->iteration], "ITER %llu once",
                 (unsigned long long)it->iteration);
        iter_seen[it->iteration] = 1;
        iters++;
        continue;
      }
      default: RC_CHECK(0, "unexpected record type %u", rec->type);
    }
    uint32_t i = (uint32_t)(tag >> 32) - 1, k = (uint32_t)tag;
    RC_CHECK(i < nthreads, "thread index %u", i);
    if (tid_of[i] < 0) tid_of[i] = rec->thread;
    RC_CHECK(tid_of[i] == rec->thread, "thread field %u of thread %u", rec->thread, i);
    RC_CHECK(k == next[i], "thread %u: event %u where %u was due (type %u)", i, k, next[i], rec->type);
    RC_CHECK(k % 4 == (uint32_t)(rec->type == MT_TR_ALLOC ? 0 : rec->type == MT_TR_LAUNCH ? 1
                                 : rec->type == MT_TR_COPY ? 2 : 3), "type of event %u", k);
    next[i]++;
  }
  RC_CHECK(rc == 0, "read: %s", mt_trace_error(r));
  for (unsigned i = 0; i < nthreads; i++)
    RC_CHECK(next[i] == events, "thread %u: %u events of %u", i, next[i], events);
  for (unsigned f = 0; f < RC_FUNCS; f++) RC_CHECK(names[f] == 1, "func %u named %u times", f, names[f]);
  for (uint64_t n = 0; n < iters; n++) RC_CHECK(iter_seen[n], "ITER numbers are 0..%llu", (unsigned long long)iters - 1);
  for (unsigned i = 0; i < nthreads; i++)
    for (unsigned j = 0; j < i; j++) RC_CHECK(tid_of[i] != tid_of[j], "threads %u and %u share a number", i, j);
  mt_trace_close(r);
  return iters;
}

#endif
