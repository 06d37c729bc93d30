/*
 * fake_graph.c - CUDA graphs, the small part that stream capture needs.
 *
 * Concept: while a (non-legacy) stream captures, fc_submit appends each
 * capturable op -- kernel launches with their copied parameters, copies,
 * sets, host functions -- to the stream's graph instead of queueing it.
 * cuStreamEndCapture hands the graph out; instantiation copies its ops into
 * an executable graph; cuGraphLaunch queues a fresh copy of each op, in
 * capture order, on the launch stream. Graphs are linear here: the fake
 * keeps capture order, which is one valid order of any captured DAG.
 * Events and cross-stream waits inside a capture are not supported
 * (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED), nor is capturing the legacy
 * stream (as in CUDA).
 *
 * Capture rules, as cuThreadExchangeStreamCaptureMode documents them: a
 * thread whose own mode is not RELAXED may not make potentially unsafe
 * calls (event and stream queries and synchronisations, cuCtxSynchronize,
 * cuMemFree) while it has a capture of its own that is not RELAXED, or,
 * when its mode is GLOBAL (the default), while any other thread has a
 * GLOBAL capture. Such a call fails with
 * CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and invalidates those captures:
 * their cuStreamEndCapture returns CUDA_ERROR_STREAM_CAPTURE_INVALIDATED.
 * (PyTorch's caching allocator defers its cudaEventQuery calls while any
 * capture is underway for exactly this reason.)
 *
 * Threading: graph and exec registries and capture state are under
 * g_fc.mu. A graph is owned by its creator; an exec is independent of the
 * graph it came from (the graph may be destroyed first).
 */
#include <stdlib.h>
#include <string.h>

#include "fake_internal.h"

#undef cuGraphInstantiate
CUresult cuGraphInstantiate(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode,
                            char *logBuffer, size_t bufferSize);

bool fc_graph_append(fc_graph_t *g, fc_op_t *op) {
  if (g->n == g->cap) {
    size_t ncap = g->cap ? g->cap * 2 : 16;
    fc_op_t **n = realloc(g->ops, ncap * sizeof *n);
    if (!n) return false;
    g->ops = n;
    g->cap = ncap;
  }
  g->ops[g->n++] = op;
  return true;
}

void fc_graph_free(fc_graph_t *g) {
  if (!g) return;
  for (size_t i = 0; i < g->n; i++) fc_op_free(g->ops[i]);
  free(g->ops);
  free(g);
}

fc_op_t *fc_op_clone(const fc_op_t *op) {
  fc_op_t *c = malloc(op->alloc_size);
  if (!c) return NULL;
  memcpy(c, op, op->alloc_size);
  c->next = NULL;
  c->ndeps = 0;
  c->deps = c->dep_inline;
  if (c->kind == FC_OP_KERNEL) fc_kernel_op_fixup(c); /* values were copied; repoint */
  if (c->kind == FC_OP_COPY && op->u.copy.src == (const void *)op->buf) c->u.copy.src = c->buf; /* staged */
  return c;
}

static fc_graph_t *graph_copy(const fc_graph_t *g) {
  fc_graph_t *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  for (size_t i = 0; i < g->n; i++) {
    fc_op_t *op = fc_op_clone(g->ops[i]);
    if (!op || !fc_graph_append(c, op)) {
      fc_op_free(op);
      fc_graph_free(c);
      return NULL;
    }
  }
  return c;
}

/* The calling thread's capture interaction mode (cuThreadExchangeStreamCaptureMode). */
static __thread CUstreamCaptureMode thread_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;

FC_API CUresult cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode *mode) {
  if (!mode) return CUDA_ERROR_INVALID_VALUE;
  CUstreamCaptureMode m = *mode;
  if (m != CU_STREAM_CAPTURE_MODE_GLOBAL && m != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
      m != CU_STREAM_CAPTURE_MODE_RELAXED)
    return CUDA_ERROR_INVALID_VALUE;
  *mode = thread_mode;
  thread_mode = m;
  return CUDA_SUCCESS;
}

/* Does capture s forbid unsafe calls on this thread? */
static bool prohibits(const fc_stream_t *s) {
  if (!s->capture || thread_mode == CU_STREAM_CAPTURE_MODE_RELAXED) return false;
  if (pthread_equal(s->capture_thread, pthread_self())) return s->capture_mode != CU_STREAM_CAPTURE_MODE_RELAXED;
  return thread_mode == CU_STREAM_CAPTURE_MODE_GLOBAL && s->capture_mode == CU_STREAM_CAPTURE_MODE_GLOBAL;
}

CUresult fc_capture_unsafe_call(void) {
  CUresult r = CUDA_SUCCESS;
  for (size_t i = 0; i < g_fc.nstreams; i++) {
    fc_stream_t *s = g_fc.streams[i];
    if (prohibits(s)) {
      s->capture_invalid = true;
      r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
  }
  return r;
}

static CUresult begin_capture(CUstream hStream, CUstreamCaptureMode mode) {
  CUresult r = fc_check_init();
  if (r) return r;
  if (mode != CU_STREAM_CAPTURE_MODE_GLOBAL && mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
      mode != CU_STREAM_CAPTURE_MODE_RELAXED)
    return CUDA_ERROR_INVALID_VALUE;
  fc_lock();
  fc_stream_t *s = fc_stream_get(hStream);
  if (!s) {
    r = CUDA_ERROR_INVALID_HANDLE;
  } else if (s->legacy) {
    r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  } else if (s->capture) {
    r = CUDA_ERROR_ILLEGAL_STATE;
  } else {
    s->capture = calloc(1, sizeof *s->capture);
    if (!s->capture) r = CUDA_ERROR_OUT_OF_MEMORY;
    s->capture_mode = mode;
    s->capture_thread = pthread_self();
    s->capture_invalid = false;
  }
  fc_unlock();
  return r;
}

FC_API CUresult cuStreamBeginCapture_v2(CUstream hStream, CUstreamCaptureMode mode) {
  return begin_capture(hStream, mode);
}
FC_API CUresult cuStreamBeginCapture_v2_ptsz(CUstream hStream, CUstreamCaptureMode mode) {
  return begin_capture(hStream, mode);
}

static CUresult end_capture(CUstream hStream, CUgraph *phGraph) {
  CUresult r = fc_check_init();
  if (r) return r;
  if (!phGraph) return CUDA_ERROR_INVALID_VALUE;
  fc_lock();
  fc_stream_t *s = fc_stream_get(hStream);
  if (!s) {
    r = CUDA_ERROR_INVALID_HANDLE;
  } else if (!s->capture) {
    r = CUDA_ERROR_ILLEGAL_STATE;
  } else if (s->capture_invalid) {
    /* the capture ends either way; the graph is lost */
    fc_graph_free(s->capture);
    s->capture = NULL;
    s->capture_invalid = false;
    *phGraph = NULL;
    r = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  } else if (!fc_set_add(&g_fc.graphs, s->capture)) {
    r = CUDA_ERROR_OUT_OF_MEMORY;
  } else {
    *phGraph = (CUgraph)s->capture;
    s->capture = NULL;
  }
  fc_unlock();
  return r;
}

FC_API CUresult cuStreamEndCapture(CUstream hStream, CUgraph *phGraph) {
  return end_capture(hStream, phGraph);
}
FC_API CUresult cuStreamEndCapture_ptsz(CUstream hStream, CUgraph *phGraph) {
  return end_capture(hStream, phGraph);
}

static CUresult is_capturing(CUstream hStream, CUstreamCaptureStatus *st) {
  CUresult r = fc_check_init();
  if (r) return r;
  if (!st) return CUDA_ERROR_INVALID_VALUE;
  fc_lock();
  fc_stream_t *s = fc_stream_get(hStream);
  if (s)
    *st = !s->capture         ? CU_STREAM_CAPTURE_STATUS_NONE
          : s->capture_invalid ? CU_STREAM_CAPTURE_STATUS_INVALIDATED
                               : CU_STREAM_CAPTURE_STATUS_ACTIVE;
  else
    r = CUDA_ERROR_INVALID_HANDLE;
  /* cuda.h, cuStreamIsCapturing: called on the legacy stream while a
   * blocking stream in the same context is capturing, it returns
   * CUDA_ERROR_STREAM_CAPTURE_IMPLICIT (the capture is not invalidated) */
  for (size_t i = 0; s && s->legacy && r == CUDA_SUCCESS && i < g_fc.nstreams; i++) {
    fc_stream_t *t = g_fc.streams[i];
    if (t != s && !t->legacy && !(t->flags & CU_STREAM_NON_BLOCKING) && t->capture) r = CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
  }
  fc_unlock();
  return r;
}

FC_API CUresult cuStreamIsCapturing(CUstream hStream, CUstreamCaptureStatus *captureStatus) {
  return is_capturing(hStream, captureStatus);
}
FC_API CUresult cuStreamIsCapturing_ptsz(CUstream hStream, CUstreamCaptureStatus *captureStatus) {
  return is_capturing(hStream, captureStatus);
}

FC_API CUresult cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph,
                                            unsigned long long flags) {
  CUresult r = fc_check_init();
  if (r) return r;
  (void)flags;
  if (!phGraphExec) return CUDA_ERROR_INVALID_VALUE;
  fc_lock();
  if (!fc_set_has(&g_fc.graphs, hGraph)) {
    r = CUDA_ERROR_INVALID_VALUE;
  } else {
    fc_graph_t *e = graph_copy((fc_graph_t *)hGraph);
    if (!e || !fc_set_add(&g_fc.execs, e)) {
      fc_graph_free(e);
      r = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
      *phGraphExec = (CUgraphExec)e;
    }
  }
  fc_unlock();
  return r;
}

FC_API CUresult cuGraphInstantiate(CUgraphExec *phGraphExec, CUgraph hGraph,
                                   CUgraphNode *phErrorNode, char *logBuffer, size_t bufferSize) {
  (void)phErrorNode;
  if (logBuffer && bufferSize) logBuffer[0] = 0;
  return cuGraphInstantiateWithFlags(phGraphExec, hGraph, 0);
}

FC_API CUresult cuGraphInstantiate_v2(CUgraphExec *phGraphExec, CUgraph hGraph,
                                      CUgraphNode *phErrorNode, char *logBuffer,
                                      size_t bufferSize) {
  return cuGraphInstantiate(phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize);
}

static CUresult graph_launch(CUgraphExec hExec, CUstream hStream) {
  CUresult r = fc_check_init();
  if (r) return r;
  fc_lock();
  fc_stream_t *s = fc_stream_get(hStream);
  if (!fc_set_has(&g_fc.execs, hExec)) {
    r = CUDA_ERROR_INVALID_VALUE;
  } else if (!s) {
    r = CUDA_ERROR_INVALID_HANDLE;
  } else {
    fc_graph_t *e = (fc_graph_t *)hExec;
    for (size_t i = 0; i < e->n && r == CUDA_SUCCESS; i++) {
      fc_op_t *op = fc_op_clone(e->ops[i]);
      if (!op) {
        r = CUDA_ERROR_OUT_OF_MEMORY;
        break;
      }
      op->handle = hStream;
      if (op->kind == FC_OP_KERNEL) op->u.k.launch.stream = hStream;
      r = fc_submit(s, op, NULL);
    }
  }
  fc_unlock();
  return r;
}

FC_API CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream) {
  return graph_launch(hGraphExec, hStream);
}
FC_API CUresult cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream) {
  return graph_launch(hGraphExec, hStream);
}

FC_API CUresult cuGraphExecDestroy(CUgraphExec hGraphExec) {
  CUresult r = fc_check_init();
  if (r) return r;
  fc_lock();
  if (fc_set_has(&g_fc.execs, hGraphExec)) {
    fc_set_del(&g_fc.execs, hGraphExec);
    fc_graph_free((fc_graph_t *)hGraphExec);
  } else {
    r = CUDA_ERROR_INVALID_VALUE;
  }
  fc_unlock();
  return r;
}

FC_API CUresult cuGraphDestroy(CUgraph hGraph) {
  CUresult r = fc_check_init();
  if (r) return r;
  fc_lock();
  if (fc_set_has(&g_fc.graphs, hGraph)) {
    fc_set_del(&g_fc.graphs, hGraph);
    fc_graph_free((fc_graph_t *)hGraph);
  } else {
    r = CUDA_ERROR_INVALID_VALUE;
  }
  fc_unlock();
  return r;
}
