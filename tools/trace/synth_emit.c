/*
 * synth_emit.c - the trace emitter behind `mt-trace synth` and
 * `mt-trace import-g10`; the contract is in synth_emit.h.
 *
 * Each logical tensor is in one of three states: NEW (never allocated, or
 * renewed), LIVE (holds region id `region`), DEAD (freed; using it is a
 * bug). Duplicate tensors in one launch are dropped with a per-launch stamp,
 * their access kinds merged into the first listing's span, so a launch
 * costs O(footprint).
 */
#include "synth_emit.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "hash.h"

#include "trace_io.h"

enum { T_NEW = 0, T_LIVE = 1, T_DEAD = 2 };

typedef struct tensor {
  uint64_t key;
  uint64_t bytes;
  uint64_t region;            /* region id while LIVE, else 0 */
  uint64_t stamp;             /* launch number that last listed it (dedupe) */
  uint32_t slot;              /* its span in that launch */
  uint8_t state;
  bool persistent;
  bool held;                  /* transient, but may stay live across renew (synth_emit_hold) */
} tensor_t;

typedef struct func {
  char *name;
  bool named;                 /* NAME record written */
} func_t;

struct synth_emit {
  mt_trace_writer_t *w;
  int err;                    /* first error, -errno; 0 while fine */
  char msg[256];
  tensor_t *t;
  uint32_t nt, capt;
  func_t *f;
  uint32_t nf, capf;
  mt_trace_span_t *foot;      /* scratch for one launch */
  uint8_t *kinds;             /* scratch: the spans' MT_ACC_* */
  uint64_t *keys;             /* scratch: func + keys, hashed */
  uint32_t capfoot;
  uint64_t next_region;       /* next region id */
  uint64_t now;               /* virtual clock, ns */
  uint64_t live_transient;    /* bytes */
  synth_emit_stats_t st;
};

static void fail(synth_emit_t *e, int err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void fail(synth_emit_t *e, int err, const char *fmt, ...) {
  if (e->err) return;
  e->err = err;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(e->msg, sizeof e->msg, fmt, ap);
  va_end(ap);
}

static void put(synth_emit_t *e, const mt_trace_rec_t *rec) {
  int rc = mt_trace_write(e->w, rec);
  if (rc < 0) fail(e, rc, "write failed: %s", strerror(-rc));
}

int synth_emit_open(synth_emit_t **out, const char *path, const mt_trace_header_t *h) {
  *out = NULL;
  synth_emit_t *e = calloc(1, sizeof *e);
  if (!e) return -ENOMEM;
  int rc = mt_trace_writer_open(path, h, NULL, &e->w);
  if (rc < 0) {
    free(e);
    return rc;
  }
  e->next_region = 1;
  *out = e;
  return 0;
}

uint32_t synth_emit_tensor(synth_emit_t *e, uint64_t key, uint64_t bytes, bool persistent) {
  if (e->err) return UINT32_MAX;
  if (e->nt == e->capt) {
    uint32_t cap = e->capt ? e->capt * 2 : 1024;
    tensor_t *t = realloc(e->t, (size_t)cap * sizeof *t);
    if (!t) {
      fail(e, -ENOMEM, "out of memory");
      return UINT32_MAX;
    }
    e->t = t;
    e->capt = cap;
  }
  e->t[e->nt] = (tensor_t){.key = key, .bytes = bytes, .persistent = persistent};
  return e->nt++;
}

uint64_t synth_emit_tensor_bytes(const synth_emit_t *e, uint32_t t) {
  return t < e->nt ? e->t[t].bytes : 0;
}

uint64_t synth_emit_func(synth_emit_t *e, const char *name) {
  if (e->err) return 0;
  for (uint32_t i = 0; i < e->nf; i++)
    if (strcmp(e->f[i].name, name) == 0) return i + 1;
  if (e->nf == e->capf) {
    uint32_t cap = e->capf ? e->capf * 2 : 64;
    func_t *f = realloc(e->f, (size_t)cap * sizeof *f);
    if (!f) {
      fail(e, -ENOMEM, "out of memory");
      return 0;
    }
    e->f = f;
    e->capf = cap;
  }
  char *copy = strdup(name);
  if (!copy) {
    fail(e, -ENOMEM, "out of memory");
    return 0;
  }
  e->f[e->nf] = (func_t){.name = copy};
  return ++e->nf;
}

static bool valid(synth_emit_t *e, uint32_t t) {
  if (t < e->nt) return true;
  fail(e, -EINVAL, "tensor handle %u out of range", t);
  return false;
}

static void do_alloc(synth_emit_t *e, tensor_t *x) {
  x->state = T_LIVE;
  x->region = e->next_region++;
  if (x->persistent) {
    e->st.persistent_bytes += x->bytes;
  } else {
    e->live_transient += x->bytes;
    if (e->live_transient > e->st.transient_peak) e->st.transient_peak = e->live_transient;
  }
  mt_trace_alloc_t a = {
      .h = {.type = MT_TR_ALLOC, .size = sizeof a, .t_ns = e->now},
      .region = x->region,
      .bytes = x->bytes,
  };
  put(e, &a.h);
  e->st.allocs++;
}

void synth_emit_alloc(synth_emit_t *e, uint32_t t) {
  if (e->err || !valid(e, t)) return;
  tensor_t *x = &e->t[t];
  if (x->state != T_NEW) {
    fail(e, -EINVAL, "tensor key %llu allocated twice without renew", (unsigned long long)x->key);
    return;
  }
  do_alloc(e, x);
}

static bool grow_foot(synth_emit_t *e, uint32_t n) {
  if (n <= e->capfoot) return true;
  uint32_t cap = e->capfoot ? e->capfoot : 16;
  while (cap < n) cap *= 2;
  mt_trace_span_t *f = realloc(e->foot, (size_t)cap * sizeof *f);
  if (!f) goto oom;
  e->foot = f;
  uint64_t *k = realloc(e->keys, ((size_t)cap + 1) * sizeof *k);
  if (!k) goto oom;
  e->keys = k;
  uint8_t *kd = realloc(e->kinds, cap);
  if (!kd) goto oom;
  e->kinds = kd;
  e->capfoot = cap;
  return true;
oom:
  fail(e, -ENOMEM, "out of memory");
  return false;
}

void synth_emit_launch(synth_emit_t *e, uint64_t func, const uint32_t *t, const uint8_t *kinds, uint32_t n,
                       uint64_t dur_ns) {
  if (e->err) return;
  if (func == 0 || func > e->nf) {
    fail(e, -EINVAL, "function id %llu was not declared", (unsigned long long)func);
    return;
  }
  if (n > MT_TRACE_FOOT_MAX) {
    fail(e, -EINVAL, "a launch of %u tensors exceeds the format's %u", n, MT_TRACE_FOOT_MAX);
    return;
  }
  if (!grow_foot(e, n)) return;
  uint64_t stamp = e->st.launches + 1;
  uint32_t nfoot = 0;
  e->keys[0] = func;
  for (uint32_t i = 0; i < n; i++) {
    if (!valid(e, t[i])) return;
    tensor_t *x = &e->t[t[i]];
    uint8_t kind = kinds ? kinds[i] : MT_ACC_UNKNOWN;
    if (kind >= MT_ACC__COUNT) {
      fail(e, -EINVAL, "access kind %u of tensor key %llu is not an MT_ACC_* value", kind,
           (unsigned long long)x->key);
      return;
    }
    if (x->stamp == stamp) {
      /* Listed twice (input and output): read-write. Unknown stays unknown. */
      uint8_t *k = &e->kinds[x->slot];
      if (*k != MT_ACC_UNKNOWN && kind != MT_ACC_UNKNOWN) *k |= kind;
      else *k = MT_ACC_UNKNOWN;
      continue;
    }
    x->stamp = stamp;
    x->slot = nfoot;
    if (x->state == T_DEAD) {
      fail(e, -EINVAL, "tensor key %llu used by %s after its free", (unsigned long long)x->key,
           e->f[func - 1].name);
      return;
    }
    if (x->state == T_NEW) do_alloc(e, x);
    e->foot[nfoot] = (mt_trace_span_t){.region = x->region, .offset = 0, .bytes = x->bytes};
    e->kinds[nfoot] = kind;
    e->keys[++nfoot] = x->key;
  }
  func_t *f = &e->f[func - 1];
  if (!f->named) {
    int rc = mt_trace_write_name(e->w, e->now, func, f->name);
    if (rc < 0) fail(e, rc, "write failed: %s", strerror(-rc));
    f->named = true;
  }
  mt_trace_launch_t l = {
      .h = {.type = MT_TR_LAUNCH, .t_ns = e->now},
      .launch_id = XXH3_64bits(e->keys, ((size_t)nfoot + 1) * sizeof *e->keys),
      .func = func,
      .dur_ns = dur_ns,
      .stream = 0,
      .nfoot = nfoot,
  };
  int rc = mt_trace_write_launch(e->w, &l, e->foot, e->kinds);
  if (rc < 0) fail(e, rc, "write failed: %s", strerror(-rc));
  e->st.launches++;
  e->now += dur_ns;
}

void synth_emit_free(synth_emit_t *e, uint32_t t) {
  if (e->err || !valid(e, t)) return;
  tensor_t *x = &e->t[t];
  if (x->persistent || x->state != T_LIVE) {
    fail(e, -EINVAL, "tensor key %llu freed while %s", (unsigned long long)x->key,
         x->persistent ? "persistent" : x->state == T_NEW ? "not allocated" : "already freed");
    return;
  }
  /* Stream-ordered, as a framework frees a tensor (PyTorch's caching
   * allocator, cuMemFreeAsync): the memory is reusable once the work
   * queued before the free has run, and the host does not wait. */
  mt_trace_free_t fr = {
      .h = {.type = MT_TR_FREE, .flags = MT_TRF_ASYNC, .size = sizeof fr, .t_ns = e->now},
      .region = x->region,
  };
  put(e, &fr.h);
  e->st.frees++;
  e->live_transient -= x->bytes;
  x->state = T_DEAD;
  x->region = 0;
}

void synth_emit_renew(synth_emit_t *e) {
  if (e->err) return;
  for (uint32_t i = 0; i < e->nt; i++) {
    tensor_t *x = &e->t[i];
    if (x->persistent) continue;
    if (x->state == T_LIVE && x->held) continue;
    if (x->state == T_LIVE) {
      fail(e, -EINVAL, "transient tensor key %llu still live at renew (never freed)",
           (unsigned long long)x->key);
      return;
    }
    x->state = T_NEW;
  }
}

void synth_emit_hold(synth_emit_t *e, uint32_t t) {
  if (e->err || !valid(e, t)) return;
  if (e->t[t].persistent) {
    fail(e, -EINVAL, "tensor key %llu is persistent; only a transient tensor can be held",
         (unsigned long long)e->t[t].key);
    return;
  }
  e->t[t].held = true;
}

void synth_emit_iter(synth_emit_t *e, uint64_t n) {
  if (e->err) return;
  mt_trace_iter_t it = {
      .h = {.type = MT_TR_ITER, .size = sizeof it, .t_ns = e->now},
      .iteration = n,
  };
  put(e, &it.h);
}

uint64_t synth_emit_now(const synth_emit_t *e) { return e->now; }

uint64_t synth_emit_live_transient(const synth_emit_t *e) { return e->live_transient; }

const char *synth_emit_error(const synth_emit_t *e) { return e->msg; }

int synth_emit_close(synth_emit_t *e, synth_emit_stats_t *st, const char *who) {
  int rc = mt_trace_writer_close(e->w);
  if (rc < 0) fail(e, rc, "closing the trace failed: %s", strerror(-rc));
  e->st.end_ns = e->now;
  if (st) *st = e->st;
  if (e->err) fprintf(stderr, "%s: %s\n", who, e->msg);
  rc = e->err;
  for (uint32_t i = 0; i < e->nf; i++) free(e->f[i].name);
  free(e->f);
  free(e->t);
  free(e->foot);
  free(e->kinds);
  free(e->keys);
  free(e);
  return rc;
}
