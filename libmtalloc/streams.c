/*
 * streams.c - which work on which application stream has completed.
 *
 * The pager must never evict or free a chunk while forwarded work that uses
 * it may still run. Recording an event after every launch would answer that
 * but costs a driver call per launch, so instead each stream entry counts
 * the operations the pager forwarded on it (seq) and keeps a small FIFO of
 * checkpoints: events recorded on the stream when someone asked about an
 * operation not yet covered by one. Stream order makes one checkpoint
 * answer for every operation before it. The legacy default stream (NULL or
 * CU_STREAM_LEGACY) is one entry. CU_STREAM_PER_THREAD names a different
 * stream on every thread, so it gets one entry per thread; since only the
 * owning thread can record an event on its per-thread stream, those entries
 * record a checkpoint after every operation (one cuEventRecord each) and
 * never need one later from another thread.
 *
 * A full ring does not wait for its oldest checkpoint: the newest is
 * recorded again at the current operation, and so answers, a little late,
 * for everything it covered before.
 *
 * A stream that is capturing a graph runs nothing, and recording an event on
 * it would add a node to the graph, so its holds are answered "not yet".
 * While any capture is active, on any thread, no event is queried or waited
 * for (both are illegal then under the default global capture mode, and
 * would invalidate the capture): holds not already known complete are
 * answered "not yet", and a wait for one fails with -EBUSY.
 *
 * Threading: under the pager lock.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>

#include "pager_internal.h"

#define RING 16
#define RETIRED_HANDLE ((mt_handle_t)-1)

struct mt_stream_ent {
  mt_handle_t h;
  pthread_t owner; /* CU_STREAM_PER_THREAD: the thread whose stream it is */
  uint64_t seq;    /* operations forwarded */
  uint64_t done;   /* operations known complete */
  unsigned head, count;
  struct { uint64_t seq; mt_handle_t ev; } cp[RING];
};

mt_handle_t _mt_event_get(mt_pager_t *p) {
  if (p->nevents > 0) return p->event_pool[--p->nevents];
  mt_handle_t e = 0;
  if (p->dev->ops->event_create(p->dev, &e) < 0) return 0;
  return e;
}

void _mt_event_put(mt_pager_t *p, mt_handle_t e) {
  if (p->nevents == p->cap_events) {
    size_t cap = p->cap_events ? p->cap_events * 2 : 64;
    mt_handle_t *np = realloc(p->event_pool, cap * sizeof(*np));
    if (np == NULL) {
      p->dev->ops->event_destroy(p->dev, e);
      return;
    }
    p->event_pool = np;
    p->cap_events = cap;
  }
  p->event_pool[p->nevents++] = e;
}

static mt_handle_t norm(mt_handle_t s) {
  return s == (mt_handle_t)(uintptr_t)CU_STREAM_LEGACY ? 0 : s;
}

static bool per_thread(mt_handle_t s) {
  return s == (mt_handle_t)(uintptr_t)CU_STREAM_PER_THREAD;
}

uint32_t _mt_stream_index(mt_pager_t *p, mt_handle_t s) {
  s = norm(s);
  pthread_t self = pthread_self();
  for (uint32_t i = 1; i < p->nstreams; i++)
    if (p->streams[i]->h == s && (!per_thread(s) || pthread_equal(p->streams[i]->owner, self))) return i;
  if (p->nstreams == 0) p->nstreams = 1; /* index 0 means "no stream" */
  if (p->nstreams >= p->cap_streams) {
    uint32_t cap = p->cap_streams ? p->cap_streams * 2 : 16;
    mt_stream_ent_t **ns = realloc(p->streams, cap * sizeof(*ns));
    if (ns == NULL) return 0;
    p->streams = ns;
    p->cap_streams = cap;
  }
  mt_stream_ent_t *e = calloc(1, sizeof(*e));
  if (e == NULL) return 0;
  e->h = s;
  e->owner = self;
  p->streams[p->nstreams] = e;
  return p->nstreams++;
}

static int checkpoint(mt_pager_t *p, mt_stream_ent_t *e);

uint64_t _mt_stream_next(mt_pager_t *p, uint32_t si) {
  if (si == 0) return 0;
  mt_stream_ent_t *e = p->streams[si];
  ++e->seq;
  /* A per-thread stream's work can be checked later only through an event
   * its own thread recorded. A failure leaves the hold to be waited for
   * the slow way (see _mt_hold_done). */
  if (per_thread(e->h) && !p->dev->ops->stream_capturing(p->dev, e->h)) checkpoint(p, e);
  return e->seq;
}

uint64_t _mt_stream_seq(mt_pager_t *p, uint32_t si) {
  return si == 0 ? 0 : p->streams[si]->seq;
}

/* Drops checkpoints up to and including position k (from head) and notes
 * their completion. */
static void pop_through(mt_pager_t *p, mt_stream_ent_t *e, unsigned k) {
  p->streams_gen++;
  for (unsigned i = 0; i <= k; i++) {
    unsigned at = (e->head + i) % RING;
    if (e->cp[at].seq > e->done) e->done = e->cp[at].seq;
    _mt_event_put(p, e->cp[at].ev);
  }
  e->head = (e->head + k + 1) % RING;
  e->count -= k + 1;
}

/* Records a checkpoint at the stream's current operation number. */
static int checkpoint(mt_pager_t *p, mt_stream_ent_t *e) {
  if (e->count == RING) { /* full: move the newest up to now (see above) */
    unsigned at = (e->head + e->count - 1) % RING;
    int rc = p->dev->ops->event_record(p->dev, e->cp[at].ev, e->h);
    if (rc == 0) e->cp[at].seq = e->seq;
    return rc;
  }
  mt_handle_t ev = _mt_event_get(p);
  if (ev == 0) return -ENOMEM;
  int rc = p->dev->ops->event_record(p->dev, ev, e->h);
  if (rc < 0) {
    _mt_event_put(p, ev);
    return rc;
  }
  unsigned at = (e->head + e->count) % RING;
  e->cp[at].seq = e->seq;
  e->cp[at].ev = ev;
  e->count++;
  return 0;
}

int _mt_hold_done(mt_pager_t *p, const mt_hold_t *h, bool wait) {
  if (h->stream == 0 || h->stream >= p->nstreams) return 1;
  mt_stream_ent_t *e = p->streams[h->stream];
  if (h->seq <= e->done) return 1;
  if (_mt_capture_active(p)) return wait ? -EBUSY : 0;
  for (int pass = 0; pass < 2; pass++) {
    for (unsigned k = 0; k < e->count; k++) {
      unsigned at = (e->head + k) % RING;
      if (e->cp[at].seq < h->seq) continue;
      int q = p->dev->ops->event_query(p->dev, e->cp[at].ev);
      if (q < 0) return q;
      if (q == 0) {
        if (!wait) return 0;
        int rc = p->dev->ops->event_sync(p->dev, e->cp[at].ev);
        if (rc < 0) return rc;
      }
      pop_through(p, e, k);
      return 1;
    }
    /* No checkpoint covers it yet: record one now (after all forwarded work). */
    if (e->h == RETIRED_HANDLE) return 1; /* retire() left a final checkpoint, now popped */
    if (p->dev->ops->stream_capturing(p->dev, e->h)) return wait ? -EBUSY : 0;
    /* Another thread's per-thread stream cannot be named from here; its
     * checkpoint was not recorded (an event failed): assume the worst. */
    if (per_thread(e->h) && !pthread_equal(e->owner, pthread_self())) return wait ? -EBUSY : 0;
    int rc = checkpoint(p, e);
    if (rc < 0) return rc;
  }
  return 0;
}

bool _mt_stream_recordable(mt_pager_t *p, uint32_t si, mt_handle_t *h) {
  if (si == 0 || si >= p->nstreams) return false;
  mt_stream_ent_t *e = p->streams[si];
  if (e->h == RETIRED_HANDLE || (per_thread(e->h) && !pthread_equal(e->owner, pthread_self())) ||
      p->dev->ops->stream_capturing(p->dev, e->h))
    return false;
  *h = e->h;
  return true;
}

void _mt_stream_mark(mt_pager_t *p, uint32_t si) {
  if (si == 0 || _mt_capture_active(p)) return;
  mt_stream_ent_t *e = p->streams[si];
  if (per_thread(e->h) || e->h == RETIRED_HANDLE || p->dev->ops->stream_capturing(p->dev, e->h)) return;
  /* drop the checkpoints already passed, so the ring keeps recent ones */
  while (e->count > 0 && p->dev->ops->event_query(p->dev, e->cp[e->head].ev) == 1) pop_through(p, e, 0);
  if (e->count > 0 && e->cp[(e->head + e->count - 1) % RING].seq == e->seq) return;
  (void)checkpoint(p, e); /* a failure: holds are answered the slow way */
}

void _mt_stream_retire(mt_pager_t *p, mt_handle_t s) {
  s = norm(s);
  for (uint32_t i = 1; i < p->nstreams; i++) {
    mt_stream_ent_t *e = p->streams[i];
    if (e->h != s || per_thread(s)) continue;
    if (e->seq > e->done && (e->count == 0 || e->cp[(e->head + e->count - 1) % RING].seq < e->seq))
      checkpoint(p, e);
    e->h = RETIRED_HANDLE;
    return;
  }
}

void _mt_streams_fini(mt_pager_t *p) {
  for (uint32_t i = 1; i < p->nstreams; i++) {
    mt_stream_ent_t *e = p->streams[i];
    for (unsigned k = 0; k < e->count; k++) p->dev->ops->event_destroy(p->dev, e->cp[(e->head + k) % RING].ev);
    free(e);
  }
  free(p->streams);
  for (size_t i = 0; i < p->nevents; i++) p->dev->ops->event_destroy(p->dev, p->event_pool[i]);
  free(p->event_pool);
}

uint64_t _mt_streams_progress(mt_pager_t *p) {
  uint64_t sig = p->streams_gen;
  for (uint32_t si = 1; si < p->nstreams; si++) {
    mt_stream_ent_t *e = p->streams[si];
    unsigned k = 0; /* checkpoints passed, oldest first (they pass in order) */
    while (k < e->count && p->dev->ops->event_query(p->dev, e->cp[(e->head + k) % RING].ev) == 1) k++;
    sig = sig * 0x9e3779b97f4a7c15ull + k;
  }
  return sig;
}

int _mt_stream_step(mt_pager_t *p) {
  if (_mt_capture_active(p)) return 0;
  for (uint32_t si = 1; si < p->nstreams; si++) {
    mt_stream_ent_t *e = p->streams[si];
    if (e->h == RETIRED_HANDLE || per_thread(e->h)) continue;
    while (e->count > 0) { /* the ones already passed first */
      int q = p->dev->ops->event_query(p->dev, e->cp[e->head].ev);
      if (q < 0) return q;
      if (q == 0) break;
      pop_through(p, e, 0);
    }
    if (e->count < 2) continue; /* its newest answers for all its work: not a step */
    int rc = p->dev->ops->event_sync(p->dev, e->cp[e->head].ev);
    if (rc < 0) return rc;
    pop_through(p, e, 0);
    return 1;
  }
  return 0;
}
