/*
 * fake_stream.c - streams: FIFO queues of operations, each drained by its
 * own worker thread, and the dependency rules between them.
 *
 * Concept: every asynchronous API call becomes an fc_op_t appended to one
 * stream. The stream's worker runs its ops one at a time, in order. An op
 * may carry dependencies "stream X has completed op #n"; the worker waits
 * for them before running the op. Dependencies come from cuStreamWaitEvent
 * and from the legacy default stream rules, which the fake enforces as the
 * real driver does:
 *   - an op on the legacy stream waits for all work queued before it on
 *     every blocking stream (created without CU_STREAM_NON_BLOCKING);
 *   - an op on a blocking stream waits for all work queued before it on the
 *     legacy stream.
 * Non-blocking streams are ordered with nothing but their own past, so two
 * of them really race; FAKECUDA_JITTER_US makes every op sleep a random
 * 0..N us first, so a missing synchronisation shows as a wrong answer.
 *
 * Invariants: a dependency always names an op queued earlier (submission
 * is serialised by g_fc.mu), so the wait graph is acyclic and no worker can
 * deadlock. s->completed <= s->submitted; the op at s->head is the one
 * running or next to run and stays queued until it finished.
 * NULL and CU_STREAM_LEGACY name the legacy stream. CU_STREAM_PER_THREAD
 * names the calling thread's own per-thread default stream, as in CUDA: a
 * blocking stream created on the thread's first use of the handle, so two
 * threads using it really run on two streams. (The _ptsz entry points
 * given NULL still use the legacy stream.)
 *
 * Threading: queues and counters are under g_fc.mu; op bodies run on the
 * worker without it. cuStreamDestroy drains the stream and joins its
 * worker before returning (the real driver returns at once and frees the
 * stream later); the library destructor joins every worker. A fork child
 * has no workers (see fake_core.c: CUDA is unusable there).
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "fake_internal.h"

#undef cuStreamDestroy
CUresult cuStreamDestroy(CUstream hStream); /* the pre-4.0 name, same signature */

fc_op_t *fc_op_new(fc_op_kind_t kind, size_t extra) {
  fc_op_t *op = calloc(1, sizeof *op + extra);
  if (!op) return NULL;
  op->kind = kind;
  op->deps = op->dep_inline;
  op->alloc_size = sizeof *op + extra;
  return op;
}

void fc_op_free(fc_op_t *op) {
  if (!op) return;
  if (op->deps != op->dep_inline) free(op->deps);
  free(op);
}

static bool op_add_dep(fc_op_t *op, uint64_t stream_id, uint64_t seq) {
  if (op->ndeps < FC_MAX_DEPS) {
    op->dep_inline[op->ndeps++] = (fc_dep_t){stream_id, seq};
    return true;
  }
  fc_dep_t *d;
  if (op->deps == op->dep_inline) {
    d = malloc((op->ndeps + 1) * sizeof *d);
    if (d) memcpy(d, op->dep_inline, op->ndeps * sizeof *d);
  } else {
    d = realloc(op->deps, (op->ndeps + 1) * sizeof *d);
  }
  if (!d) return false;
  op->deps = d;
  op->deps[op->ndeps++] = (fc_dep_t){stream_id, seq};
  return true;
}

static fc_stream_t *stream_by_id(uint64_t id) {
  for (size_t i = 0; i < g_fc.nstreams; i++)
    if (g_fc.streams[i]->id == id) return g_fc.streams[i];
  return NULL;
}

static bool dep_done(const fc_dep_t *d) {
  fc_stream_t *t = stream_by_id(d->stream_id);
  return !t || t->completed >= d->seq;
}

static bool deps_done(const fc_op_t *op) {
  for (size_t i = 0; i < op->ndeps; i++)
    if (!dep_done(&op->deps[i])) return false;
  return true;
}

static fc_stream_t *stream_new(unsigned flags, int priority, bool legacy);

/* This thread's per-thread default stream; it lives until shutdown (its
 * worker is joined with the others), never in the handle registry. */
static __thread fc_stream_t *per_thread;
static __thread unsigned per_thread_gen; /* fork generation it belongs to */
static unsigned fork_gen;

fc_stream_t *fc_stream_get(CUstream h) {
  if (h == NULL || h == CU_STREAM_LEGACY) return g_fc.legacy;
  if (h == CU_STREAM_PER_THREAD) {
    if (per_thread == NULL || per_thread_gen != fork_gen) {
      per_thread = stream_new(0, 0, false);
      per_thread_gen = fork_gen;
    }
    return per_thread;
  }
  return fc_set_has(&g_fc.streams_set, h) ? (fc_stream_t *)h : NULL;
}

/* ---- the worker ----------------------------------------------------------- */

static void run_op(fc_op_t *op) {
  switch (op->kind) {
    case FC_OP_KERNEL:
      fc_fault_enter(op);
      op->u.k.fn->fn(op->u.k.params, &op->u.k.launch);
      fc_fault_leave();
      break;
    case FC_OP_COPY:
      fc_fault_enter(op);
      if (op->u.copy.n) memmove(op->u.copy.dst, op->u.copy.src, op->u.copy.n);
      fc_fault_leave();
      if (g_fc.bw > 0) fc_sleep_ns((uint64_t)((double)op->u.copy.n / g_fc.bw * 1e9));
      break;
    case FC_OP_MEMSET: {
      fc_fault_enter(op);
      size_t n = op->u.set.count;
      if (op->u.set.width == 1) {
        memset(op->u.set.dst, (int)op->u.set.value, n);
      } else if (op->u.set.width == 2) {
        uint16_t *p = op->u.set.dst, v = (uint16_t)op->u.set.value;
        for (size_t i = 0; i < n; i++) p[i] = v;
      } else {
        uint32_t *p = op->u.set.dst, v = op->u.set.value;
        for (size_t i = 0; i < n; i++) p[i] = v;
      }
      fc_fault_leave();
      break;
    }
    case FC_OP_EVENT:
      clock_gettime(CLOCK_MONOTONIC, &op->u.ev.when);
      break;
    case FC_OP_HOSTFN:
      op->u.host.fn(op->u.host.user);
      break;
    case FC_OP_NOP:
    case FC_OP_FREE:
      break;
  }
}

/* The part of an op that touches driver state; caller holds mu. */
static void finish_op(fc_op_t *op) {
  switch (op->kind) {
    case FC_OP_KERNEL:
      g_fc.launches++;
      break;
    case FC_OP_COPY:
      g_fc.launches++;
      g_fc.copies_inflight--;
      break;
    case FC_OP_EVENT: {
      fc_event_t *ev = op->u.ev.ev;
      if (op->u.ev.gen > ev->done_gen) {
        ev->done_gen = op->u.ev.gen;
        ev->when = op->u.ev.when;
      }
      if (--ev->pending == 0 && ev->destroyed) free(ev);
      break;
    }
    case FC_OP_FREE:
      fc_mem_free_now(op->u.free.ptr);
      break;
    default:
      break;
  }
}

static void *worker_main(void *arg) {
  fc_stream_t *s = arg;
  void *altstack = NULL;
  fc_fault_thread_init(&altstack);
  fc_lock();
  for (;;) {
    while (!s->head && !s->stop) pthread_cond_wait(&s->work_cv, &g_fc.mu);
    if (!s->head) break;
    fc_op_t *op = s->head;
    while (!deps_done(op)) pthread_cond_wait(&g_fc.done_cv, &g_fc.mu);
    unsigned jitter = g_fc.jitter_us;
    fc_unlock();
    if (jitter) fc_sleep_ns((uint64_t)(rand_r(&s->seed) % (jitter + 1)) * 1000u);
    run_op(op);
    fc_lock();
    finish_op(op);
    s->head = op->next;
    if (!s->head) s->tail = NULL;
    s->completed = op->seq;
    pthread_cond_broadcast(&g_fc.done_cv);
    fc_op_free(op);
  }
  fc_unlock();
  fc_fault_thread_fini(altstack);
  return NULL;
}

/* Starts s's worker if it is not running (new stream, or after fork).
 * Caller holds mu. */
static CUresult ensure_worker(fc_stream_t *s) {
  if (s->worker_alive) return CUDA_SUCCESS;
  /* Workers must not take signals meant for the process's own threads. */
  sigset_t all, old;
  sigfillset(&all);
  sigdelset(&all, SIGSEGV);
  sigdelset(&all, SIGBUS);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int rc = pthread_create(&s->thread, NULL, worker_main, s);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (rc != 0) return CUDA_ERROR_OUT_OF_MEMORY;
  s->worker_alive = true;
  return CUDA_SUCCESS;
}

static fc_stream_t *stream_new(unsigned flags, int priority, bool legacy) {
  fc_stream_t *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  if (g_fc.nstreams == g_fc.cap_streams) {
    size_t ncap = g_fc.cap_streams ? g_fc.cap_streams * 2 : 16;
    fc_stream_t **n = realloc(g_fc.streams, ncap * sizeof *n);
    if (!n) {
      free(s);
      return NULL;
    }
    g_fc.streams = n;
    g_fc.cap_streams = ncap;
  }
  s->id = ++g_fc.next_stream_id;
  s->flags = flags;
  s->priority = priority;
  s->legacy = legacy;
  s->seed = (unsigned)(s->id * 2654435761u) ^ (unsigned)time(NULL);
  pthread_cond_init(&s->work_cv, NULL);
  if (ensure_worker(s) != CUDA_SUCCESS || (!legacy && !fc_set_add(&g_fc.streams_set, s))) {
    if (s->worker_alive) {
      s->stop = true;
      pthread_cond_signal(&s->work_cv);
      /* cannot join under mu; the worker exits on its own */
      pthread_detach(s->thread);
      return NULL; /* s leaks deliberately: the detached worker owns it */
    }
    pthread_cond_destroy(&s->work_cv);
    free(s);
    return NULL;
  }
  g_fc.streams[g_fc.nstreams++] = s;
  return s;
}

CUresult fc_streams_init(void) {
  if (g_fc.legacy) return CUDA_SUCCESS;
  g_fc.legacy = stream_new(0, 0, true);
  return g_fc.legacy ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

void fc_streams_atfork_child(void) {
  fork_gen++;
  /* the workers did not survive the fork; nothing may wait for them */
  for (size_t i = 0; i < g_fc.nstreams; i++) {
    g_fc.streams[i]->worker_alive = false;
    pthread_cond_init(&g_fc.streams[i]->work_cv, NULL);
  }
}

void fc_streams_shutdown(void) {
  fc_lock();
  size_t n = g_fc.nstreams;
  pthread_t *threads = calloc(n ? n : 1, sizeof *threads);
  size_t nt = 0;
  for (size_t i = 0; i < n; i++) {
    fc_stream_t *s = g_fc.streams[i];
    s->stop = true;
    pthread_cond_signal(&s->work_cv);
    if (s->worker_alive && threads && !pthread_equal(s->thread, pthread_self()))
      threads[nt++] = s->thread;
    s->worker_alive = false;
  }
  fc_unlock();
  for (size_t i = 0; i < nt; i++) pthread_join(threads[i], NULL);
  free(threads);
}

CUresult fc_submit_to(CUstream h, fc_op_t *op) {
  CUresult r;
  fc_lock();
  fc_stream_t *s = fc_stream_get(h);
  if (s) {
    r = fc_submit(s, op, NULL);
  } else {
    fc_op_free(op);
    r = CUDA_ERROR_INVALID_HANDLE;
  }
  fc_unlock();
  return r;
}

CUresult fc_submit(fc_stream_t *s, fc_op_t *op, uint64_t *seq_out) {
  if (seq_out) *seq_out = 0;
  if (s->capture && s->capture_invalid) {
    fc_op_free(op);
    return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  }
  if (s->capture) {
    bool capturable = op->kind == FC_OP_KERNEL || op->kind == FC_OP_COPY ||
                      op->kind == FC_OP_MEMSET || op->kind == FC_OP_HOSTFN;
    if (!capturable || op->ndeps || !fc_graph_append(s->capture, op)) {
      fc_op_free(op);
      return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    return CUDA_SUCCESS;
  }
  CUresult r = ensure_worker(s);
  if (r != CUDA_SUCCESS) {
    fc_op_free(op);
    return r;
  }
  bool ok = true;
  if (s->legacy) {
    for (size_t i = 0; i < g_fc.nstreams; i++) {
      fc_stream_t *t = g_fc.streams[i];
      if (t == s || t->legacy || (t->flags & CU_STREAM_NON_BLOCKING)) continue;
      if (t->submitted > t->completed) ok = ok && op_add_dep(op, t->id, t->submitted);
    }
  } else if (!(s->flags & CU_STREAM_NON_BLOCKING)) {
    fc_stream_t *l = g_fc.legacy;
    if (l->submitted > l->completed) ok = op_add_dep(op, l->id, l->submitted);
  }
  if (!ok) {
    fc_op_free(op);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  op->seq = ++s->submitted;
  if (op->kind == FC_OP_COPY) g_fc.copies_inflight++;
  op->next = NULL;
  if (s->tail)
    s->tail->next = op;
  else
    s->head = op;
  s->tail = op;
  pthread_cond_signal(&s->work_cv);
  if (seq_out) *seq_out = op->seq;
  return CUDA_SUCCESS;
}

void fc_wait_seq(uint64_t stream_id, uint64_t seq) {
  fc_dep_t d = {stream_id, seq};
  while (!dep_done(&d)) pthread_cond_wait(&g_fc.done_cv, &g_fc.mu);
}

CUresult fc_run_sync(fc_op_t *op) {
  fc_lock();
  uint64_t seq;
  fc_stream_t *l = g_fc.legacy;
  CUresult r = fc_submit(l, op, &seq);
  if (r == CUDA_SUCCESS) fc_wait_seq(l->id, seq);
  fc_unlock();
  return r;
}

void fc_sync_all(void) {
  size_t n = g_fc.nstreams;
  fc_dep_t *want = malloc((n ? n : 1) * sizeof *want);
  if (!want) {
    /* no memory for a snapshot: wait until everything is idle instead */
    for (size_t i = 0; i < g_fc.nstreams; i++) {
      fc_stream_t *s = g_fc.streams[i];
      fc_wait_seq(s->id, s->submitted);
    }
    return;
  }
  for (size_t i = 0; i < n; i++) want[i] = (fc_dep_t){g_fc.streams[i]->id, g_fc.streams[i]->submitted};
  for (size_t i = 0; i < n; i++) fc_wait_seq(want[i].stream_id, want[i].seq);
  free(want);
}

/* ---- the stream API -------------------------------------------------------- */

FC_API CUresult cuStreamCreateWithPriority(CUstream *phStream, unsigned int flags, int priority) {
  CUresult r = fc_check_ctx();
  if (r) return r;
  if (!phStream || (flags & ~(unsigned)CU_STREAM_NON_BLOCKING)) return CUDA_ERROR_INVALID_VALUE;
  if (priority < -5) priority = -5; /* clamped to cuCtxGetStreamPriorityRange */
  if (priority > 0) priority = 0;
  fc_lock();
  fc_stream_t *s = stream_new(flags, priority, false);
  fc_unlock();
  if (!s) return CUDA_ERROR_OUT_OF_MEMORY;
  *phStream = (CUstream)s;
  return CUDA_SUCCESS;
}

FC_API CUresult cuStreamCreate(CUstream *phStream, unsigned int flags) {
  return cuStreamCreateWithPriority(phStream, flags, 0);
}

FC_API CUresult cuCtxGetStreamPriorityRange(int *leastPriority, int *greatestPriority) {
  CUresult r = fc_check_ctx();
  if (r) return r;
  if (leastPriority) *leastPriority = 0;
  if (greatestPriority) *greatestPriority = -5;
  return CUDA_SUCCESS;
}

FC_API CUresult cuStreamDestroy_v2(CUstream hStream) {
  CUresult r = fc_check_init();
  if (r) return r;
  fc_lock();
  if (!fc_set_has(&g_fc.streams_set, hStream)) {
    fc_unlock();
    return CUDA_ERROR_INVALID_HANDLE;
  }
  fc_stream_t *s = (fc_stream_t *)hStream;
  fc_set_del(&g_fc.streams_set, s);
  if (s->capture) {
    fc_graph_free(s->capture);
    s->capture = NULL;
  }
  if (s->head) ensure_worker(s);
  s->stop = true;
  pthread_cond_signal(&s->work_cv);
  bool join = s->worker_alive;
  pthread_t t = s->thread;
  fc_unlock();
  if (join) pthread_join(t, NULL);
  fc_lock();
  for (size_t i = 0; i < g_fc.nstreams; i++) {
    if (g_fc.streams[i] == s) {
      g_fc.streams[i] = g_fc.streams[--g_fc.nstreams];
      break;
    }
  }
  /* wake anyone whose dependency on s is now satisfied by its absence */
  pthread_cond_broadcast(&g_fc.done_cv);
  fc_unlock();
  pthread_cond_destroy(&s->work_cv);
  free(s);
  return CUDA_SUCCESS;
}

FC_API CUresult cuStreamDestroy(CUstream hStream) { return cuStreamDestroy_v2(hStream); }

static CUresult stream_sync(CUstream hStream) {
  CUresult r = fc_check_init();
  if (r) return r;
  fc_lock();
  fc_stream_t *s = fc_stream_get(hStream);
  if (!s) {
    r = CUDA_ERROR_INVALID_HANDLE;
  } else if ((r = fc_capture_unsafe_call()) != CUDA_SUCCESS) {
  } else if (s->capture) {
    r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  } else if (s->legacy) {
    /* a barrier on the legacy stream also waits for the blocking streams */
    fc_op_t *op = fc_op_new(FC_OP_NOP, 0);
    uint64_t seq = 0;
    r = op ? fc_submit(s, op, &seq) : CUDA_ERROR_OUT_OF_MEMORY;
    if (r == CUDA_SUCCESS) fc_wait_seq(s->id, seq);
  } else {
    fc_wait_seq(s->id, s->submitted);
  }
  fc_unlock();
  return r;
}

FC_API CUresult cuStreamSynchronize(CUstream hStream) { return stream_sync(hStream); }
FC_API CUresult cuStreamSynchronize_ptsz(CUstream hStream) { return stream_sync(hStream); }

static CUresult stream_query(CUstream hStream) {
  CUresult r = fc_check_init();
  if (r) return r;
  fc_lock();
  fc_stream_t *s = fc_stream_get(hStream);
  if (!s)
    r = CUDA_ERROR_INVALID_HANDLE;
  else if ((r = fc_capture_unsafe_call()) != CUDA_SUCCESS) {
  } else if (s->capture)
    r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  else if (s->completed < s->submitted)
    r = CUDA_ERROR_NOT_READY;
  fc_unlock();
  return r;
}

FC_API CUresult cuStreamQuery(CUstream hStream) { return stream_query(hStream); }
FC_API CUresult cuStreamQuery_ptsz(CUstream hStream) { return stream_query(hStream); }

static CUresult stream_get_flags(CUstream hStream, unsigned int *flags) {
  CUresult r = fc_check_init();
  if (r) return r;
  if (!flags) return CUDA_ERROR_INVALID_VALUE;
  fc_lock();
  fc_stream_t *s = fc_stream_get(hStream);
  if (s)
    *flags = s->flags;
  else
    r = CUDA_ERROR_INVALID_HANDLE;
  fc_unlock();
  return r;
}

FC_API CUresult cuStreamGetFlags(CUstream hStream, unsigned int *flags) {
  return stream_get_flags(hStream, flags);
}
FC_API CUresult cuStreamGetFlags_ptsz(CUstream hStream, unsigned int *flags) {
  return stream_get_flags(hStream, flags);
}

FC_API CUresult cuStreamGetPriority(CUstream hStream, int *priority) {
  CUresult r = fc_check_init();
  if (r) return r;
  if (!priority) return CUDA_ERROR_INVALID_VALUE;
  fc_lock();
  fc_stream_t *s = fc_stream_get(hStream);
  if (s)
    *priority = s->priority;
  else
    r = CUDA_ERROR_INVALID_HANDLE;
  fc_unlock();
  return r;
}

FC_API CUresult cuStreamGetCtx(CUstream hStream, CUcontext *pctx) {
  CUresult r = fc_check_init();
  if (r) return r;
  if (!pctx) return CUDA_ERROR_INVALID_VALUE;
  fc_lock();
  if (!fc_stream_get(hStream)) r = CUDA_ERROR_INVALID_HANDLE;
  fc_unlock();
  if (r == CUDA_SUCCESS) *pctx = fc_primary_ctx;
  return r;
}

static CUresult launch_host_func(CUstream hStream, CUhostFn fn, void *userData) {
  CUresult r = fc_check_ctx();
  if (r) return r;
  if (!fn) return CUDA_ERROR_INVALID_VALUE;
  fc_op_t *op = fc_op_new(FC_OP_HOSTFN, 0);
  if (!op) return CUDA_ERROR_OUT_OF_MEMORY;
  op->u.host.fn = fn;
  op->u.host.user = userData;
  op->handle = hStream;
  return fc_submit_to(hStream, op);
}

FC_API CUresult cuLaunchHostFunc(CUstream hStream, CUhostFn fn, void *userData) {
  return launch_host_func(hStream, fn, userData);
}
FC_API CUresult cuLaunchHostFunc_ptsz(CUstream hStream, CUhostFn fn, void *userData) {
  return launch_host_func(hStream, fn, userData);
}
