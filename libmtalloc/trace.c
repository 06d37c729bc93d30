/*
 * trace.c - the recorder (MT_TRACE=path): per-thread rings, one flusher.
 *
 * Each thread that records owns a ring of RING_BYTES. The thread is the only
 * producer and the flusher thread the only consumer, so the hot path takes
 * no lock: it reserves space after its private copy of head, fills the
 * record in place and publishes head with a release store; the flusher reads
 * head with acquire, writes everything up to it to the file and publishes
 * tail with a release store, which the producer reads (acquire) only when its
 * cached tail says the ring looks full. A record never wraps: when it does
 * not fit before the end of the ring the producer pads the end with a SKIP
 * marker. Records larger than RING_BIG (launches with thousands of spans)
 * are built on the heap and the ring holds a HEAP marker pointing at them,
 * so per-thread order is kept without a huge ring. SKIP and HEAP are ring
 * types only; they never reach the file.
 *
 * The flusher wakes every FLUSH_PERIOD_NS, or when a producer's ring passes
 * half full (sem_post, once per crossing), drains every ring and flushes the
 * writer, so a crash loses at most about a second. When a ring is full the
 * producer wakes the flusher and waits for room (tracing keeps every event
 * rather than dropping under load); it gives up and drops the event only if
 * tracing is switched off meanwhile (a write error, _mt_trace_stop).
 *
 * Rings live in a push-only list for the life of the process: a thread that
 * exits marks its ring DEAD (pthread key destructor), the flusher drains it
 * and marks it FREE, and the next new thread claims it. Nothing is freed
 * while producers may still touch it, which keeps _mt_trace_stop safe
 * against threads that race with it (their last event is dropped).
 *
 * NAME records go through one locked queue. A launch of a function is
 * published only after its NAME is in the queue (the func-id set's DONE
 * state), and the flusher snapshots every ring's head before it drains the
 * queue, so a NAME always reaches the file before the first LAUNCH of its
 * function, whichever thread made either.
 *
 * File order: records of one thread are in the order it made them; records
 * of different threads interleave by flush, not by time (readers sort by
 * t_ns where they need one timeline).
 *
 * Iteration heuristic (when nobody calls mt_mark_iteration()): the anchor is
 * the first launch id that recurs at least ITER_MIN_GAP launches after its
 * previous occurrence (so a kernel repeated back to back, or an init kernel
 * run once, is not taken). Its recurrence emits ITER 0 (heuristic); every
 * later recurrence of the anchor at least ITER_MIN_GAP launches (all threads
 * together) after the previous boundary emits the next ITER. The first pass
 * through the loop, usually warm-up, is thus not marked: iteration 0 begins
 * at the first repetition. The search keeps the last occurrence of up to
 * ITER_WINDOW launch ids under a lock (search phase only); after
 * ITER_WINDOWS windows without a repetition the heuristic gives up. Once an
 * anchor is known, the hot path costs one compare. mt_mark_iteration() or
 * _mt_trace_iter(false) switch the heuristic off for the rest of the process.
 *
 * Fork: the child does not trace (its flusher did not survive the fork).
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "trace.h"
#include "trace_io.h"

#define RING_BYTES ((size_t)256 << 10)   /* per thread, a power of two */
#define RING_BIG (RING_BYTES / 4)        /* larger records go through the heap */
#define FLUSH_PERIOD_NS 500000000L      /* the flusher wakes at least this often */
#define RING_WAIT_NS 20000L             /* a producer on a full ring re-checks this often */
#define FUNC_SLOTS (1u << 16)           /* func ids whose NAME was emitted */
#define ITER_MIN_GAP 8                  /* launches between two iteration boundaries, at least */
#define ITER_WINDOW (1u << 16)          /* launch ids remembered while looking for an anchor */
#define ITER_WINDOWS 8                  /* windows searched before the heuristic gives up */

/* Ring-only record types (never written to the file). */
#define REC_SKIP 0x00   /* padding to the end of the ring; size covers it */
#define REC_HEAP 0xff   /* 16 bytes: the real record is on the heap */

_Static_assert((RING_BYTES & (RING_BYTES - 1)) == 0, "ring size is a power of two");
_Static_assert(MT_TR__COUNT < REC_HEAP, "ring marker types are not record types");

enum { RING_OWNED = 1, RING_DEAD = 2, RING_FREE = 3 };

typedef struct ring {
  struct ring *next;        /* immutable once pushed */
  uint8_t *buf;             /* RING_BYTES, 8-aligned */
  _Atomic int state;        /* RING_OWNED / DEAD / FREE */
  /* the producer's line */
  _Alignas(64) _Atomic uint64_t head;   /* bytes ever published */
  uint64_t head_local;      /* head including a reserved record's padding */
  uint64_t tail_cache;      /* last tail seen */
  _Atomic uint64_t launches;            /* launches recorded by this ring's threads */
  uint16_t tid;             /* the owner's thread number, in every record */
  bool poked;               /* the flusher was woken for this half-fill */
  /* the flusher's line */
  _Alignas(64) _Atomic uint64_t tail;   /* bytes consumed */
  uint64_t snap;            /* head when this flush began */
  bool dead_seen;           /* the owner had exited when this flush began */
} ring_t;

typedef struct ring_heap_marker {
  uint8_t type;             /* REC_HEAP */
  uint8_t pad[3];
  uint32_t size;            /* 16 */
  void *rec;                /* malloc'ed record; the flusher frees it */
} ring_heap_marker_t;

_Atomic bool _mt_trace_enabled;

static _Atomic(ring_t *) rings;   /* push-only */
static _Atomic unsigned next_tid;
static __thread ring_t *my_ring __attribute__((tls_model("initial-exec")));
static pthread_key_t ring_key;
static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static sem_t flusher_wake;

/* Start/stop state, under ctl_mu. The writer and path belong to the
 * flusher while it runs, to start/stop otherwise. */
static pthread_mutex_t ctl_mu = PTHREAD_MUTEX_INITIALIZER;
static bool active, atexit_done;
static pid_t active_pid;
static pthread_t flusher;
static _Atomic bool flusher_run;
static mt_trace_writer_t *writer;
static char *trace_path;
static bool write_failed;

/* NAME queue and the set of func ids already named. */
static pthread_mutex_t names_mu = PTHREAD_MUTEX_INITIALIZER;
static uint8_t *names_buf;
static size_t names_len, names_cap;
enum { FUNC_EMPTY = 0, FUNC_CLAIMED = 1, FUNC_KEYED = 2, FUNC_DONE = 3 };
static _Atomic uint64_t func_key[FUNC_SLOTS];
static _Atomic uint8_t func_state[FUNC_SLOTS];

/* Iterations. */
typedef struct warm_slot {
  uint64_t id;
  uint64_t seen;            /* launch number + 1 of its last occurrence; 0 = empty */
} warm_slot_t;
static pthread_mutex_t iter_mu = PTHREAD_MUTEX_INITIALIZER;
static _Atomic bool heur_on;      /* the heuristic is looking */
static _Atomic bool marked;       /* mt_mark_iteration() was called: never again */
static _Atomic bool anchor_set;
static _Atomic uint64_t anchor;
static uint64_t next_iter;        /* under iter_mu */
static uint64_t last_boundary;    /* launches (all rings) at the last boundary */
static warm_slot_t *warm;         /* 2 * ITER_WINDOW slots while searching */
static uint64_t warm_n;           /* launches seen while searching */
static unsigned warm_windows;

uint64_t _mt_trace_now(void) {
  return _mt_now_ns();
}

/* ---- rings ------------------------------------------------------------------- */

static void ring_exit(void *p) {
  ring_t *t = p;
  my_ring = NULL;
  atomic_store_explicit(&t->state, RING_DEAD, memory_order_release);
}

static void child_after_fork(void) {
  atomic_store(&_mt_trace_enabled, false);
  active = false;
  pthread_mutex_init(&ctl_mu, NULL);
  pthread_mutex_init(&names_mu, NULL);
  pthread_mutex_init(&iter_mu, NULL);
}

static void global_init(void) {
  pthread_key_create(&ring_key, ring_exit);
  sem_init(&flusher_wake, 0, 0);
  pthread_atfork(NULL, NULL, child_after_fork);
}

static __attribute__((noinline)) ring_t *ring_claim(void) {
  pthread_once(&init_once, global_init);
  ring_t *t;
  for (t = atomic_load_explicit(&rings, memory_order_acquire); t; t = t->next) {
    int want = RING_FREE;
    if (atomic_load_explicit(&t->state, memory_order_relaxed) == RING_FREE &&
        atomic_compare_exchange_strong_explicit(&t->state, &want, RING_OWNED, memory_order_acquire,
                                                memory_order_relaxed))
      break;
  }
  if (!t) {
    t = aligned_alloc(64, sizeof(*t));
    uint8_t *buf = aligned_alloc(64, RING_BYTES);
    if (!t || !buf) {
      free(t);
      free(buf);
      return NULL;
    }
    memset(t, 0, sizeof(*t));
    t->buf = buf;
    atomic_init(&t->state, RING_OWNED);
    ring_t *old = atomic_load_explicit(&rings, memory_order_relaxed);
    do t->next = old;
    while (!atomic_compare_exchange_weak_explicit(&rings, &old, t, memory_order_release, memory_order_relaxed));
  }
  t->head_local = atomic_load_explicit(&t->head, memory_order_relaxed);
  t->tail_cache = atomic_load_explicit(&t->tail, memory_order_acquire);
  t->poked = false;
  t->tid = (uint16_t)(atomic_fetch_add_explicit(&next_tid, 1, memory_order_relaxed) + 1);
  my_ring = t;
  pthread_setspecific(ring_key, t);
  return t;
}

static inline ring_t *ring_mine(void) {
  ring_t *t = my_ring;
  return __builtin_expect(t != NULL, 1) ? t : ring_claim();
}

/* The ring is full: wake the flusher and wait until end - tail fits.
 * Returns false (drop the event) when tracing stops meanwhile. */
static __attribute__((noinline)) bool ring_wait(ring_t *t, uint64_t end) {
  for (;;) {
    sem_post(&flusher_wake);
    struct timespec ts = {0, RING_WAIT_NS};
    nanosleep(&ts, NULL);
    t->tail_cache = atomic_load_explicit(&t->tail, memory_order_acquire);
    if (end - t->tail_cache <= RING_BYTES) return true;
    if (!_mt_trace_on()) return false;
  }
}

/* Room for n bytes (a multiple of 8, <= RING_BIG) at the returned address,
 * 8-aligned and contiguous, or NULL (drop). Publish with ring_commit. */
static inline void *ring_reserve(ring_t *t, size_t n) {
  uint64_t head = t->head_local;
  size_t pos = head & (RING_BYTES - 1);
  size_t pad = RING_BYTES - pos < n ? RING_BYTES - pos : 0;
  uint64_t end = head + pad + n;
  if (__builtin_expect(end - t->tail_cache > RING_BYTES, 0)) {
    t->tail_cache = atomic_load_explicit(&t->tail, memory_order_acquire);
    if (end - t->tail_cache > RING_BYTES && !ring_wait(t, end)) return NULL;
  }
  if (__builtin_expect(pad != 0, 0)) {
    uint8_t *p = t->buf + pos;
    uint32_t size = (uint32_t)pad;
    p[0] = REC_SKIP;
    memcpy(p + 4, &size, sizeof(size));
    t->head_local = head + pad;
    pos = 0;
  }
  return t->buf + pos;
}

static __attribute__((noinline)) void ring_poke(ring_t *t) {
  t->tail_cache = atomic_load_explicit(&t->tail, memory_order_acquire);
  if (t->head_local - t->tail_cache < RING_BYTES / 2) {
    t->poked = false;
  } else if (!t->poked) {
    t->poked = true;
    sem_post(&flusher_wake);
  }
}

static inline void ring_commit(ring_t *t, size_t n) {
  uint64_t head = t->head_local + n;
  t->head_local = head;
  atomic_store_explicit(&t->head, head, memory_order_release);
  if (__builtin_expect(head - t->tail_cache >= RING_BYTES / 2, 0)) ring_poke(t);
}

static inline mt_trace_rec_t rec_hdr(const ring_t *t, uint8_t type, uint8_t flags, size_t size, uint64_t t_ns) {
  return (mt_trace_rec_t){.type = type, .flags = flags, .thread = t->tid, .size = (uint32_t)size, .t_ns = t_ns};
}

/* ---- the flusher ------------------------------------------------------------------ */

static void trace_failed(int rc) {
  if (write_failed) return;
  write_failed = true;
  atomic_store(&_mt_trace_enabled, false);
  mt_error("MT_TRACE=%s: writing the trace failed: %s; tracing stopped (the file holds what was written "
           "before; free space or choose another path)",
           trace_path, strerror(-rc));
}

static void out_rec(const void *rec) {
  if (write_failed) return;
  int rc = mt_trace_write(writer, rec);
  if (rc) trace_failed(rc);
}

static void drain_ring(ring_t *t, uint64_t upto) {
  uint64_t tail = atomic_load_explicit(&t->tail, memory_order_relaxed);
  while (tail < upto) {
    const uint8_t *p = t->buf + (tail & (RING_BYTES - 1));
    uint32_t size;
    memcpy(&size, p + 4, sizeof(size));
    mt_assert(size >= 8 && size % 8 == 0 && size <= RING_BYTES);
    if (p[0] == REC_HEAP) {
      void *rec;
      memcpy(&rec, p + offsetof(ring_heap_marker_t, rec), sizeof(rec));
      out_rec(rec);
      free(rec);
    } else if (p[0] != REC_SKIP) {
      out_rec(p);
    }
    tail += size;
  }
  atomic_store_explicit(&t->tail, tail, memory_order_release);
}

/* One pass: every ring up to the head it had when the pass began, NAMEs
 * first (see the essay), then the writer's buffer to the file. Run by the
 * flusher, or by _mt_trace_stop once the flusher has ended. */
static void flush_once(void) {
  ring_t *list = atomic_load_explicit(&rings, memory_order_acquire);
  for (ring_t *t = list; t; t = t->next) {
    t->dead_seen = atomic_load_explicit(&t->state, memory_order_acquire) == RING_DEAD;
    t->snap = atomic_load_explicit(&t->head, memory_order_acquire);
  }
  pthread_mutex_lock(&names_mu);
  uint8_t *nb = names_buf;
  size_t nlen = names_len;
  names_buf = NULL;
  names_len = names_cap = 0;
  pthread_mutex_unlock(&names_mu);
  for (size_t off = 0; off < nlen;) {
    const mt_trace_rec_t *r = (const void *)(nb + off);
    out_rec(r);
    off += r->size;
  }
  free(nb);
  for (ring_t *t = list; t; t = t->next) {
    drain_ring(t, t->snap);
    if (t->dead_seen) atomic_store_explicit(&t->state, RING_FREE, memory_order_release);
  }
  if (!write_failed) {
    int rc = mt_trace_writer_flush(writer);
    if (rc) trace_failed(rc);
  }
}

static void *flusher_main(void *arg) {
  (void)arg;
  while (atomic_load(&flusher_run)) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_nsec += FLUSH_PERIOD_NS;
    if (ts.tv_nsec >= 1000000000L) {
      ts.tv_sec++;
      ts.tv_nsec -= 1000000000L;
    }
    while (sem_clockwait(&flusher_wake, CLOCK_MONOTONIC, &ts) != 0 && errno == EINTR) continue;
    flush_once();
  }
  return NULL;
}

/* ---- start and stop ------------------------------------------------------------------ */

static void reset_state(void) {
  for (ring_t *t = atomic_load_explicit(&rings, memory_order_acquire); t; t = t->next)
    atomic_store_explicit(&t->tail, atomic_load_explicit(&t->head, memory_order_acquire), memory_order_release);
  for (uint32_t i = 0; i < FUNC_SLOTS; i++) {
    atomic_store_explicit(&func_state[i], FUNC_EMPTY, memory_order_relaxed);
    atomic_store_explicit(&func_key[i], 0, memory_order_relaxed);
  }
  pthread_mutex_lock(&names_mu);
  free(names_buf);
  names_buf = NULL;
  names_len = names_cap = 0;
  pthread_mutex_unlock(&names_mu);
  pthread_mutex_lock(&iter_mu);
  free(warm);
  warm = NULL;
  warm_n = 0;
  warm_windows = 0;
  next_iter = 0;
  last_boundary = 0;
  atomic_store(&anchor_set, false);
  atomic_store(&heur_on, !atomic_load(&marked));
  pthread_mutex_unlock(&iter_mu);
  write_failed = false;
}

int _mt_trace_start(const char *path, const mt_trace_header_t *h, const char *options) {
  pthread_once(&init_once, global_init);
  pthread_mutex_lock(&ctl_mu);
  if (active) {
    pthread_mutex_unlock(&ctl_mu);
    mt_error("MT_TRACE=%s: a trace is already being recorded", path);
    return -EBUSY;
  }
  mt_trace_header_t hdr = *h;
  if (!hdr.start_ns) hdr.start_ns = _mt_trace_now();
  int rc = mt_trace_writer_open(path, &hdr, options, &writer);
  if (rc) {
    pthread_mutex_unlock(&ctl_mu);
    mt_error("MT_TRACE=%s: cannot create the trace: %s; tracing is off", path, strerror(-rc));
    return rc;
  }
  trace_path = strdup(path);
  reset_state();
  atomic_store(&flusher_run, true);
  /* The flusher takes no signals meant for the program. */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  rc = -pthread_create(&flusher, NULL, flusher_main, NULL);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (rc) {
    mt_trace_writer_close(writer);
    writer = NULL;
    pthread_mutex_unlock(&ctl_mu);
    mt_error("MT_TRACE=%s: cannot start the trace thread: %s; tracing is off", path, strerror(-rc));
    free(trace_path);
    trace_path = NULL;
    return rc;
  }
  active = true;
  active_pid = getpid();
  if (!atexit_done) atexit_done = atexit(_mt_trace_stop) == 0;
  atomic_store(&_mt_trace_enabled, true);
  pthread_mutex_unlock(&ctl_mu);
  return 0;
}

void _mt_trace_stop(void) {
  pthread_mutex_lock(&ctl_mu);
  if (!active || getpid() != active_pid) {
    pthread_mutex_unlock(&ctl_mu);
    return;
  }
  atomic_store(&_mt_trace_enabled, false);
  atomic_store(&flusher_run, false);
  sem_post(&flusher_wake);
  pthread_join(flusher, NULL);
  flush_once();
  int rc = mt_trace_writer_close(writer);
  if (rc && !write_failed)
    mt_error("MT_TRACE=%s: closing the trace failed: %s; its end may be missing", trace_path, strerror(-rc));
  writer = NULL;
  free(trace_path);
  trace_path = NULL;
  active = false;
  pthread_mutex_unlock(&ctl_mu);
}

/* ---- names ------------------------------------------------------------------ */

static void names_push(const ring_t *t, uint64_t func, const char *name) {
  size_t len = strnlen(name, MT_TRACE_NAME_MAX);
  size_t size = (sizeof(mt_trace_name_t) + len + 7) & ~(size_t)7;
  pthread_mutex_lock(&names_mu);
  if (names_cap - names_len < size) {
    size_t cap = names_cap ? names_cap * 2 : 4096;
    while (cap - names_len < size) cap *= 2;
    uint8_t *nb = realloc(names_buf, cap);
    if (!nb) {
      pthread_mutex_unlock(&names_mu);
      return;
    }
    names_buf = nb;
    names_cap = cap;
  }
  uint8_t *p = names_buf + names_len;
  mt_trace_name_t n = {.h = rec_hdr(t, MT_TR_NAME, 0, size, _mt_trace_now()), .id = func, .len = (uint32_t)len};
  memcpy(p, &n, sizeof(n));
  memcpy(p + sizeof(n), name, len);
  memset(p + sizeof(n) + len, 0, size - sizeof(n) - len);
  names_len += size;
  pthread_mutex_unlock(&names_mu);
}

static inline uint32_t hash64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  return (uint32_t)x;
}

/* Queues func's NAME unless it was queued already; returns once it is. */
static void name_once(const ring_t *t, uint64_t func, const char *name) {
  uint32_t i = hash64(func) & (FUNC_SLOTS - 1);
  for (uint32_t probe = 0; probe < FUNC_SLOTS; probe++, i = (i + 1) & (FUNC_SLOTS - 1)) {
    uint8_t s = atomic_load_explicit(&func_state[i], memory_order_acquire);
    if (s == FUNC_EMPTY) {
      if (atomic_compare_exchange_strong_explicit(&func_state[i], &s, FUNC_CLAIMED, memory_order_acquire,
                                                  memory_order_acquire)) {
        atomic_store_explicit(&func_key[i], func, memory_order_relaxed);
        atomic_store_explicit(&func_state[i], FUNC_KEYED, memory_order_release);
        names_push(t, func, name);
        atomic_store_explicit(&func_state[i], FUNC_DONE, memory_order_release);
        return;
      }
    }
    while (s == FUNC_CLAIMED) {
      sched_yield();
      s = atomic_load_explicit(&func_state[i], memory_order_acquire);
    }
    if (atomic_load_explicit(&func_key[i], memory_order_relaxed) == func) {
      while (s != FUNC_DONE) {
        sched_yield();
        s = atomic_load_explicit(&func_state[i], memory_order_acquire);
      }
      return;
    }
  }
  names_push(t, func, name); /* set full: a repeated NAME beats a missing one */
}

/* ---- iterations ------------------------------------------------------------------ */

static void emit_iter(ring_t *t, uint64_t n, uint8_t flags) {
  mt_trace_iter_t *r = ring_reserve(t, sizeof(*r));
  if (!r) return;
  *r = (mt_trace_iter_t){.h = rec_hdr(t, MT_TR_ITER, flags, sizeof(*r), _mt_trace_now()), .iteration = n};
  ring_commit(t, sizeof(*r));
}

static uint64_t launches_total(void) {
  uint64_t n = 0;
  for (ring_t *t = atomic_load_explicit(&rings, memory_order_acquire); t; t = t->next)
    n += atomic_load_explicit(&t->launches, memory_order_relaxed);
  return n;
}

/* Search phase: remember each launch id's last occurrence until one recurs
 * far enough from it; that one is the anchor. Under iter_mu. */
static __attribute__((noinline)) void iter_search(ring_t *t, uint64_t launch_id) {
  pthread_mutex_lock(&iter_mu);
  if (!atomic_load(&heur_on) || atomic_load(&anchor_set)) goto out;
  const uint32_t slots = 2 * ITER_WINDOW;
  if (!warm && !(warm = calloc(slots, sizeof(*warm)))) goto out;
  uint64_t seen = ++warm_n;
  uint32_t i = hash64(launch_id) & (slots - 1);
  while (warm[i].seen && warm[i].id != launch_id) i = (i + 1) & (slots - 1);
  if (warm[i].seen && seen - warm[i].seen >= ITER_MIN_GAP) {
    atomic_store_explicit(&anchor, launch_id, memory_order_relaxed);
    atomic_store_explicit(&anchor_set, true, memory_order_release);
    last_boundary = launches_total();
    free(warm);
    warm = NULL;
    emit_iter(t, next_iter++, MT_TRF_HEURISTIC);
    goto out;
  }
  warm[i].id = launch_id;
  warm[i].seen = seen;
  if (seen % ITER_WINDOW == 0) { /* start a fresh window: the table stays at most half full */
    memset(warm, 0, slots * sizeof(*warm));
    if (++warm_windows >= ITER_WINDOWS) {
      atomic_store(&heur_on, false);
      free(warm);
      warm = NULL;
      mt_debug("trace: no repeating launch sequence in %u launches; no iterations inferred",
               ITER_WINDOWS * ITER_WINDOW);
    }
  }
out:
  pthread_mutex_unlock(&iter_mu);
}

static __attribute__((noinline)) void iter_anchor_hit(ring_t *t) {
  pthread_mutex_lock(&iter_mu);
  if (atomic_load(&heur_on)) {
    uint64_t total = launches_total();
    if (total - last_boundary >= ITER_MIN_GAP) {
      last_boundary = total;
      emit_iter(t, next_iter++, MT_TRF_HEURISTIC);
    }
  }
  pthread_mutex_unlock(&iter_mu);
}

void _mt_trace_iter(bool heuristic) {
  if (!heuristic) {
    atomic_store(&marked, true);
    atomic_store(&heur_on, false);
  }
  if (!_mt_trace_on()) return;
  ring_t *t = ring_mine();
  if (!t) return;
  pthread_mutex_lock(&iter_mu);
  emit_iter(t, next_iter++, heuristic ? MT_TRF_HEURISTIC : 0);
  pthread_mutex_unlock(&iter_mu);
}

MT_API void mt_mark_iteration(void) {
  _mt_trace_iter(false);
}

/* ---- events ------------------------------------------------------------------ */

void _mt_trace_alloc(uint64_t region, uint64_t bytes, uint32_t stream, bool small) {
  if (!_mt_trace_on()) return;
  ring_t *t = ring_mine();
  mt_trace_alloc_t *r = t ? ring_reserve(t, sizeof(*r)) : NULL;
  if (!r) return;
  *r = (mt_trace_alloc_t){.h = rec_hdr(t, MT_TR_ALLOC, small ? MT_TRF_SMALL : 0, sizeof(*r), _mt_trace_now()),
                          .region = region, .bytes = bytes, .stream = stream};
  ring_commit(t, sizeof(*r));
}

void _mt_trace_free(uint64_t region, uint32_t stream, bool async) {
  if (!_mt_trace_on()) return;
  ring_t *t = ring_mine();
  mt_trace_free_t *r = t ? ring_reserve(t, sizeof(*r)) : NULL;
  if (!r) return;
  *r = (mt_trace_free_t){.h = rec_hdr(t, MT_TR_FREE, async ? MT_TRF_ASYNC : 0, sizeof(*r), _mt_trace_now()),
                         .region = region, .stream = stream};
  ring_commit(t, sizeof(*r));
}

void _mt_trace_launch(uint64_t launch_id, uint64_t func, const char *name, uint32_t stream,
                      const mt_trace_span_t *foot, const uint8_t *kinds, uint32_t nfoot, uint64_t dur_ns,
                      bool graph) {
  if (!_mt_trace_on()) return;
  ring_t *t = ring_mine();
  if (!t) return;
  if (name) name_once(t, func, name);
  atomic_store_explicit(&t->launches, atomic_load_explicit(&t->launches, memory_order_relaxed) + 1,
                        memory_order_relaxed);
  if (__builtin_expect(atomic_load_explicit(&heur_on, memory_order_relaxed), 1)) {
    if (!atomic_load_explicit(&anchor_set, memory_order_acquire))
      iter_search(t, launch_id);
    else if (launch_id == atomic_load_explicit(&anchor, memory_order_relaxed))
      iter_anchor_hit(t);
  }
  if (nfoot > MT_TRACE_FOOT_MAX) nfoot = MT_TRACE_FOOT_MAX; /* what readers accept; the rest is lost */
  size_t fb = (size_t)nfoot * sizeof(*foot), kb = (size_t)MT_TRACE_KINDS_BYTES(nfoot);
  size_t size = sizeof(mt_trace_launch_t) + fb + kb;
  mt_trace_launch_t l = {.h = rec_hdr(t, MT_TR_LAUNCH, graph ? MT_TRF_GRAPH : 0, size, _mt_trace_now()),
                         .launch_id = launch_id, .func = func, .dur_ns = dur_ns, .stream = stream, .nfoot = nfoot};
  uint8_t *p = NULL, *rec = NULL;
  if (__builtin_expect(size <= RING_BIG, 1)) {
    if (!(p = ring_reserve(t, size))) return;
  } else if (!(p = rec = malloc(size))) {
    return;
  }
  memcpy(p, &l, sizeof(l));
  if (fb) memcpy(p + sizeof(l), foot, fb);
  /* Unknown (0) unless the caller knows, and the padding zero as readers expect. */
  memset(p + sizeof(l) + fb, 0, kb);
  if (kinds && nfoot) memcpy(p + sizeof(l) + fb, kinds, nfoot);
  if (!rec) {
    ring_commit(t, size);
    return;
  }
  ring_heap_marker_t *m = ring_reserve(t, sizeof(*m));
  if (!m) {
    free(rec);
    return;
  }
  *m = (ring_heap_marker_t){.type = REC_HEAP, .size = sizeof(*m), .rec = rec};
  ring_commit(t, sizeof(*m));
}

void _mt_trace_copy(uint32_t dir, bool pager, uint32_t stream, uint64_t bytes, uint64_t t0, uint64_t t1) {
  if (!_mt_trace_on()) return;
  ring_t *t = ring_mine();
  mt_trace_copy_t *r = t ? ring_reserve(t, sizeof(*r)) : NULL;
  if (!r) return;
  *r = (mt_trace_copy_t){.h = rec_hdr(t, MT_TR_COPY, pager ? MT_TRF_PAGER : 0, sizeof(*r), t0),
                         .end_ns = t1, .bytes = bytes, .dir = dir, .stream = stream};
  ring_commit(t, sizeof(*r));
}

void _mt_trace_move(uint8_t type, uint64_t region, uint32_t chunk, uint8_t from, uint8_t to, bool dirty,
                    bool prefetch, uint64_t bytes) {
  if (!_mt_trace_on() || (type != MT_TR_FETCH && type != MT_TR_EVICT)) return;
  ring_t *t = ring_mine();
  mt_trace_move_t *r = t ? ring_reserve(t, sizeof(*r)) : NULL;
  if (!r) return;
  uint8_t flags = (uint8_t)((dirty ? MT_TRF_DIRTY : 0) | (prefetch ? MT_TRF_PREFETCH : 0));
  *r = (mt_trace_move_t){.h = rec_hdr(t, type, flags, sizeof(*r), _mt_trace_now()),
                         .region = region, .chunk = chunk, .from = from, .to = to, .bytes = bytes};
  ring_commit(t, sizeof(*r));
}

void _mt_trace_stall(uint32_t cause, uint64_t t0, uint64_t t1) {
  if (!_mt_trace_on()) return;
  ring_t *t = ring_mine();
  mt_trace_stall_t *r = t ? ring_reserve(t, sizeof(*r)) : NULL;
  if (!r) return;
  *r = (mt_trace_stall_t){.h = rec_hdr(t, MT_TR_STALL, 0, sizeof(*r), t0), .end_ns = t1, .cause = cause};
  ring_commit(t, sizeof(*r));
}

void _mt_trace_opt_step(uint64_t bytes, uint64_t t0, uint64_t t1) {
  if (!_mt_trace_on()) return;
  ring_t *t = ring_mine();
  mt_trace_opt_step_t *r = t ? ring_reserve(t, sizeof(*r)) : NULL;
  if (!r) return;
  *r = (mt_trace_opt_step_t){.h = rec_hdr(t, MT_TR_OPT_STEP, 0, sizeof(*r), t0), .end_ns = t1, .bytes = bytes};
  ring_commit(t, sizeof(*r));
}
