/*
 * fake_event.c - events: markers in a stream's order that the host can
 * query and wait for, other streams can wait on, and that carry the time
 * at which the stream reached them.
 *
 * Concept: cuEventRecord bumps the event's record_gen and queues an
 * FC_OP_EVENT op carrying that generation; when the worker runs it, the op
 * takes a CLOCK_MONOTONIC timestamp and sets done_gen. The event is
 * complete when done_gen == record_gen (an event never recorded is
 * complete, as in CUDA). cuStreamWaitEvent turns the latest record into a
 * dependency (stream id, op seq) of a no-op queued on the waiting stream.
 *
 * Invariants: done_gen <= record_gen; pending counts queued record ops; a
 * destroyed event with pending records is freed by the last of them (the
 * real driver likewise lets pending work finish), and is gone from the
 * handle registry at once, so later calls with it answer
 * CUDA_ERROR_INVALID_HANDLE.
 *
 * Threading: all fields are under g_fc.mu.
 */
#include <stdlib.h>

#include "fake_internal.h"

/* cuda.h maps cuEventElapsedTime to cuEventElapsedTime_v2; the driver
 * exports both names with the same signature. */
#undef cuEventDestroy
CUresult cuEventDestroy(CUevent hEvent);
#undef cuEventElapsedTime
CUresult cuEventElapsedTime(float *pMilliseconds, CUevent hStart, CUevent hEnd);

static fc_event_t *event_get(CUevent h) {
  return fc_set_has(&g_fc.events, h) ? (fc_event_t *)h : NULL;
}

FC_API CUresult cuEventCreate(CUevent *phEvent, unsigned int flags) {
  CUresult r = fc_check_ctx();
  if (r) return r;
  unsigned ok = CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS;
  if (!phEvent || (flags & ~ok)) return CUDA_ERROR_INVALID_VALUE;
  if ((flags & CU_EVENT_INTERPROCESS) && !(flags & CU_EVENT_DISABLE_TIMING))
    return CUDA_ERROR_INVALID_VALUE;
  fc_event_t *ev = calloc(1, sizeof *ev);
  if (!ev) return CUDA_ERROR_OUT_OF_MEMORY;
  ev->flags = flags;
  fc_lock();
  bool added = fc_set_add(&g_fc.events, ev);
  fc_unlock();
  if (!added) {
    free(ev);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  *phEvent = (CUevent)ev;
  return CUDA_SUCCESS;
}

FC_API CUresult cuEventDestroy_v2(CUevent hEvent) {
  CUresult r = fc_check_init();
  if (r) return r;
  fc_lock();
  fc_event_t *ev = event_get(hEvent);
  if (!ev) {
    r = CUDA_ERROR_INVALID_HANDLE;
  } else {
    fc_set_del(&g_fc.events, ev);
    if (ev->pending)
      ev->destroyed = true;
    else
      free(ev);
  }
  fc_unlock();
  return r;
}

FC_API CUresult cuEventDestroy(CUevent hEvent) { return cuEventDestroy_v2(hEvent); }

static CUresult event_record(CUevent hEvent, CUstream hStream, unsigned flags) {
  CUresult r = fc_check_init();
  if (r) return r;
  if (flags & ~(unsigned)CU_EVENT_RECORD_EXTERNAL) return CUDA_ERROR_INVALID_VALUE;
  fc_op_t *op = fc_op_new(FC_OP_EVENT, 0);
  if (!op) return CUDA_ERROR_OUT_OF_MEMORY;
  op->handle = hStream;
  fc_lock();
  fc_event_t *ev = event_get(hEvent);
  fc_stream_t *s = fc_stream_get(hStream);
  if (!ev || !s) {
    fc_op_free(op);
    r = CUDA_ERROR_INVALID_HANDLE;
  } else if (s->capture) {
    fc_op_free(op);
    r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED; /* the fake captures no event nodes */
  } else {
    op->u.ev.ev = ev;
    op->u.ev.gen = ev->record_gen + 1;
    uint64_t seq;
    r = fc_submit(s, op, &seq);
    if (r == CUDA_SUCCESS) {
      ev->record_gen++;
      ev->pending++;
      ev->rec_stream = s->id;
      ev->rec_seq = seq;
    }
  }
  fc_unlock();
  return r;
}

FC_API CUresult cuEventRecord(CUevent hEvent, CUstream hStream) {
  return event_record(hEvent, hStream, 0);
}
FC_API CUresult cuEventRecord_ptsz(CUevent hEvent, CUstream hStream) {
  return event_record(hEvent, hStream, 0);
}
FC_API CUresult cuEventRecordWithFlags(CUevent hEvent, CUstream hStream, unsigned int flags) {
  return event_record(hEvent, hStream, flags);
}
FC_API CUresult cuEventRecordWithFlags_ptsz(CUevent hEvent, CUstream hStream,
                                            unsigned int flags) {
  return event_record(hEvent, hStream, flags);
}

FC_API CUresult cuEventQuery(CUevent hEvent) {
  CUresult r = fc_check_init();
  if (r) return r;
  fc_lock();
  fc_event_t *ev = event_get(hEvent);
  if (!ev)
    r = CUDA_ERROR_INVALID_HANDLE;
  else if ((r = fc_capture_unsafe_call()) != CUDA_SUCCESS) {
  } else if (ev->done_gen < ev->record_gen)
    r = CUDA_ERROR_NOT_READY;
  fc_unlock();
  return r;
}

FC_API CUresult cuEventSynchronize(CUevent hEvent) {
  CUresult r = fc_check_init();
  if (r) return r;
  fc_lock();
  fc_event_t *ev = event_get(hEvent);
  if (!ev) {
    r = CUDA_ERROR_INVALID_HANDLE;
  } else if ((r = fc_capture_unsafe_call()) != CUDA_SUCCESS) {
  } else {
    uint64_t want = ev->record_gen;
    /* the pending record ops keep ev allocated while we wait, even if
     * another thread destroys it meanwhile */
    while (ev->done_gen < want) pthread_cond_wait(&g_fc.done_cv, &g_fc.mu);
  }
  fc_unlock();
  return r;
}

static CUresult elapsed(float *ms, CUevent hStart, CUevent hEnd) {
  CUresult r = fc_check_init();
  if (r) return r;
  if (!ms) return CUDA_ERROR_INVALID_VALUE;
  fc_lock();
  fc_event_t *a = event_get(hStart), *b = event_get(hEnd);
  if (!a || !b || ((a->flags | b->flags) & CU_EVENT_DISABLE_TIMING) || !a->record_gen ||
      !b->record_gen) {
    r = CUDA_ERROR_INVALID_HANDLE;
  } else if (a->done_gen < a->record_gen || b->done_gen < b->record_gen) {
    r = CUDA_ERROR_NOT_READY;
  } else {
    double d = (double)(b->when.tv_sec - a->when.tv_sec) * 1e3 +
               (double)(b->when.tv_nsec - a->when.tv_nsec) / 1e6;
    *ms = (float)d;
  }
  fc_unlock();
  return r;
}

FC_API CUresult cuEventElapsedTime(float *pMilliseconds, CUevent hStart, CUevent hEnd) {
  return elapsed(pMilliseconds, hStart, hEnd);
}
FC_API_NEW CUresult cuEventElapsedTime_v2(float *pMilliseconds, CUevent hStart, CUevent hEnd) {
  return elapsed(pMilliseconds, hStart, hEnd);
}

static CUresult stream_wait_event(CUstream hStream, CUevent hEvent, unsigned flags) {
  CUresult r = fc_check_init();
  if (r) return r;
  if (flags & ~(unsigned)CU_EVENT_WAIT_EXTERNAL) return CUDA_ERROR_INVALID_VALUE;
  fc_lock();
  fc_event_t *ev = event_get(hEvent);
  fc_stream_t *s = fc_stream_get(hStream);
  if (!ev || !s) {
    r = CUDA_ERROR_INVALID_HANDLE;
  } else if (s->capture) {
    r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  } else if (ev->record_gen > 0) {
    fc_op_t *op = fc_op_new(FC_OP_NOP, 0);
    if (!op) {
      r = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
      op->handle = hStream;
      op->ndeps = 1;
      op->dep_inline[0] = (fc_dep_t){ev->rec_stream, ev->rec_seq};
      r = fc_submit(s, op, NULL);
    }
  }
  fc_unlock();
  return r;
}

FC_API CUresult cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags) {
  return stream_wait_event(hStream, hEvent, Flags);
}
FC_API CUresult cuStreamWaitEvent_ptsz(CUstream hStream, CUevent hEvent, unsigned int Flags) {
  return stream_wait_event(hStream, hEvent, Flags);
}
