/*
 * perturb.c - `mt-trace perturb`: the same workload, less regular.
 *
 * The predictor learns a training loop's launch order; a real loop is not
 * perfectly periodic. This command rewrites a trace the way real runs
 * depart from it, so that `mt-trace replay` can show what a departure
 * costs (a misprediction may cost time, never correctness):
 *
 *   --jitter F        every launch's duration times a factor drawn
 *                     uniformly from [1 - F, 1 + F] (data-dependent
 *                     kernels, clocks); needs durations, so synthetic or
 *                     imported traces only
 *   --eval-every N    after every N-th iteration, an evaluation pass: the
 *                     forward half of that iteration (its first half of
 *                     launches) once more, with its own activations
 *                     (allocated at first use, freed at the end), no
 *                     backward and no ITER record of its own
 *   --branch-every N  every N-th iteration takes a different branch: a
 *                     tenth of its launches, a contiguous block in its
 *                     middle, does not run (a skipped layer, another route)
 *
 * Gradient accumulation is `mt-trace synth`'s (grad_accum in the model).
 *
 * What is kept, what is dropped. The output is a workload: allocations,
 * frees, launches (footprints and access kinds unchanged), the
 * application's copies, optimizer steps, iteration marks and names. The
 * pager's own records (FETCH, EVICT, STALL and the pager's copies) said
 * what one run's pager did and would be wrong for the new order: they are
 * dropped. Regions are renumbered in allocation order (the format's rule),
 * and times shift by what the perturbations add or remove, so every record
 * stays in time order. The draw is seeded (--seed): the same command
 * writes the same file.
 *
 * The whole input is held in memory (a trace is a few MiB per thousand
 * launches; a 100B synth trace of two iterations, some hundred MiB).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "common.h"
#include "trace_io.h"

#define WHO "mt-trace perturb"

typedef struct recs {
  uint8_t *buf;
  size_t len, cap;
  size_t *at; /* record offsets into buf */
  size_t n, capn;
} recs_t;

static int recs_add(recs_t *r, const mt_trace_rec_t *rec) {
  if (r->len + rec->size > r->cap) {
    size_t cap = r->cap ? r->cap : 1 << 20;
    while (cap < r->len + rec->size) cap *= 2;
    uint8_t *nb = realloc(r->buf, cap);
    if (nb == NULL) return -ENOMEM;
    r->buf = nb;
    r->cap = cap;
  }
  if (r->n == r->capn) {
    size_t capn = r->capn ? r->capn * 2 : 4096;
    size_t *na = realloc(r->at, capn * sizeof(*na));
    if (na == NULL) return -ENOMEM;
    r->at = na;
    r->capn = capn;
  }
  memcpy(r->buf + r->len, rec, rec->size);
  r->at[r->n++] = r->len;
  r->len += rec->size;
  return 0;
}

static const mt_trace_rec_t *rec_at(const recs_t *r, size_t i) {
  return (const mt_trace_rec_t *)(const void *)(r->buf + r->at[i]);
}

typedef struct pt {
  mt_trace_writer_t *w;
  mtt_map_t live;    /* input region id -> output id + 1 (while allocated) */
  mtt_map_t bytes;   /* input region id -> (size << 1 | small) + 1 */
  uint64_t next_id;  /* output ids, allocation order */
  int64_t shift;     /* added to every input time */
  uint64_t last_t;   /* output times never go back */
  uint64_t iter_out;
  uint64_t rng;
  double jitter;
  uint64_t launches_in, launches_out, dropped, eval_launches, pager_records;
  char err[256];
} pt_t;

static uint64_t rnd(pt_t *p) { /* xorshift64* */
  p->rng ^= p->rng >> 12;
  p->rng ^= p->rng << 25;
  p->rng ^= p->rng >> 27;
  return p->rng * 0x2545f4914f6cdd1dull;
}

static uint64_t out_time(pt_t *p, uint64_t t) {
  int64_t v = (int64_t)t + p->shift;
  uint64_t u = v < 0 ? 0 : (uint64_t)v;
  if (u < p->last_t) u = p->last_t;
  p->last_t = u;
  return u;
}

static void *id_val(uint64_t v) { return (void *)(uintptr_t)(v + 1); }
static uint64_t val_id(void *v) { return (uint64_t)(uintptr_t)v - 1; }

static int new_region(pt_t *p, uint64_t bytes, uint64_t t, uint32_t stream, uint8_t flags, uint64_t *id) {
  mt_trace_alloc_t a = {.h = {.type = MT_TR_ALLOC, .flags = flags, .size = sizeof a, .t_ns = t},
                        .region = ++p->next_id, .bytes = bytes, .stream = stream};
  *id = a.region;
  return mt_trace_write(p->w, &a.h);
}

static int write_free(pt_t *p, uint64_t id, uint64_t t) {
  mt_trace_free_t f = {.h = {.type = MT_TR_FREE, .size = sizeof f, .t_ns = t}, .region = id};
  return mt_trace_write(p->w, &f.h);
}

/* A launch with its spans renamed by `map` first, then the live regions;
 * a region in neither gets a temporary one (eval passes) when tmp is set,
 * else the input is bad. dur: the output duration. */
static int write_launch(pt_t *p, const mt_trace_launch_t *l, uint64_t t, uint64_t dur, mtt_map_t *tmp) {
  const mt_trace_span_t *in = mt_trace_launch_spans(l);
  mt_trace_span_t *foot = l->nfoot ? malloc(l->nfoot * sizeof(*foot)) : NULL;
  if (l->nfoot && foot == NULL) return -ENOMEM;
  int rc = 0;
  for (uint32_t i = 0; i < l->nfoot && rc == 0; i++) {
    foot[i] = in[i];
    void *v = tmp ? mtt_map_get(tmp, in[i].region) : NULL;
    if (v == NULL) v = mtt_map_get(&p->live, in[i].region);
    if (v == NULL && tmp != NULL) {
      void *b = mtt_map_get(&p->bytes, in[i].region);
      uint64_t id;
      if (b == NULL) {
        rc = -EINVAL;
        break;
      }
      if ((rc = new_region(p, val_id(b) >> 1, t, 0, (val_id(b) & 1) ? MT_TRF_SMALL : 0, &id)) < 0) break;
      if ((rc = mtt_map_put(tmp, in[i].region, id_val(id))) < 0) break;
      v = id_val(id);
    }
    if (v == NULL) {
      snprintf(p->err, sizeof p->err, "a launch uses region %" PRIu64 ", which is not allocated", in[i].region);
      rc = -EINVAL;
      break;
    }
    foot[i].region = val_id(v);
  }
  if (rc == 0) {
    mt_trace_launch_t o = *l;
    o.h.t_ns = t;
    o.dur_ns = dur;
    rc = mt_trace_write_launch(p->w, &o, foot, mt_trace_launch_kinds(l));
    p->launches_out++;
  }
  free(foot);
  return rc;
}

/* One input record, in order. */
static int emit(pt_t *p, const mt_trace_rec_t *rec, bool drop_launch) {
  switch (rec->type) {
    case MT_TR_ALLOC: {
      mt_trace_alloc_t a = *(const mt_trace_alloc_t *)rec;
      uint64_t id;
      int rc = mtt_map_put(&p->bytes, a.region, id_val(a.bytes << 1 | (a.h.flags & MT_TRF_SMALL ? 1 : 0)));
      if (rc == 0) rc = new_region(p, a.bytes, out_time(p, a.h.t_ns), a.stream, a.h.flags, &id);
      if (rc == 0) rc = mtt_map_put(&p->live, a.region, id_val(id));
      return rc;
    }
    case MT_TR_FREE: {
      mt_trace_free_t f = *(const mt_trace_free_t *)rec;
      void *v = mtt_map_del(&p->live, f.region);
      if (v == NULL) {
        snprintf(p->err, sizeof p->err, "free of region %" PRIu64 ", which is not allocated", f.region);
        return -EINVAL;
      }
      f.region = val_id(v);
      f.h.t_ns = out_time(p, f.h.t_ns);
      return mt_trace_write(p->w, &f.h);
    }
    case MT_TR_LAUNCH: {
      const mt_trace_launch_t *l = (const mt_trace_launch_t *)rec;
      p->launches_in++;
      if (drop_launch) {
        p->shift -= (int64_t)l->dur_ns;
        p->dropped++;
        return 0;
      }
      uint64_t dur = l->dur_ns;
      if (p->jitter > 0 && dur > 0) {
        double u = (double)(rnd(p) >> 11) / (double)(1ull << 53); /* [0, 1) */
        dur = (uint64_t)((double)dur * (1.0 - p->jitter + 2.0 * p->jitter * u) + 0.5);
      }
      uint64_t t = out_time(p, l->h.t_ns);
      p->shift += (int64_t)dur - (int64_t)l->dur_ns;
      return write_launch(p, l, t, dur, NULL);
    }
    case MT_TR_ITER: {
      mt_trace_iter_t it = *(const mt_trace_iter_t *)rec;
      it.iteration = p->iter_out++;
      it.h.t_ns = out_time(p, it.h.t_ns);
      return mt_trace_write(p->w, &it.h);
    }
    case MT_TR_COPY:
      if (rec->flags & MT_TRF_PAGER) {
        p->pager_records++;
        return 0;
      } else {
        mt_trace_copy_t c = *(const mt_trace_copy_t *)rec;
        uint64_t len = c.end_ns - c.h.t_ns;
        c.h.t_ns = out_time(p, c.h.t_ns);
        c.end_ns = c.h.t_ns + len;
        return mt_trace_write(p->w, &c.h);
      }
    case MT_TR_FETCH:
    case MT_TR_EVICT:
    case MT_TR_STALL:
      p->pager_records++;
      return 0;
    default: { /* NAME, OPT_STEP: as they are, in time */
      mt_trace_rec_t *c = malloc(rec->size);
      if (c == NULL) return -ENOMEM;
      memcpy(c, rec, rec->size);
      c->t_ns = out_time(p, rec->t_ns);
      if (rec->type == MT_TR_OPT_STEP) {
        mt_trace_opt_step_t *o = (mt_trace_opt_step_t *)(void *)c;
        o->end_ns = o->h.t_ns + (((const mt_trace_opt_step_t *)rec)->end_ns - rec->t_ns);
      }
      int rc = mt_trace_write(p->w, c);
      free(c);
      return rc;
    }
  }
}

static void no_free(void *v) { (void)v; }

/* The evaluation pass after iteration records [b, e): its first half of
 * launches again, forward only, at the current end of the output. */
static int eval_pass(pt_t *p, const recs_t *r, size_t b, size_t e) {
  size_t nl = 0;
  for (size_t i = b; i < e; i++) nl += rec_at(r, i)->type == MT_TR_LAUNCH;
  size_t half = nl / 2, seen = 0;
  mtt_map_t tmp = {0};
  uint64_t t = p->last_t;
  int rc = 0;
  for (size_t i = b; i < e && seen < half && rc == 0; i++) {
    const mt_trace_rec_t *rec = rec_at(r, i);
    if (rec->type != MT_TR_LAUNCH) continue;
    const mt_trace_launch_t *l = (const mt_trace_launch_t *)rec;
    seen++;
    /* What is still allocated (weights, and whatever the iteration left)
     * is used as it is; an activation the iteration freed gets the pass's
     * own copy at its first use (write_launch). */
    rc = write_launch(p, l, t, l->dur_ns, &tmp);
    if (rc == -EINVAL && p->err[0] == 0)
      snprintf(p->err, sizeof p->err, "an evaluation launch uses a region the trace never allocated");
    t += l->dur_ns;
    p->eval_launches++;
  }
  /* the pass's activations are freed at its end */
  for (size_t i = 0; i < tmp.cap && rc == 0; i++)
    if (tmp.vals != NULL && tmp.vals[i] != NULL) rc = write_free(p, val_id(tmp.vals[i]), t);
  mtt_map_free(&tmp, no_free);
  p->shift += (int64_t)(t - p->last_t);
  p->last_t = t;
  return rc;
}

static void usage(FILE *f) {
  fprintf(f,
          "usage: mt-trace perturb TRACE -o OUT [--jitter F] [--eval-every N] [--branch-every N] [--seed S]\n"
          "\n"
          "Writes TRACE's workload less regularly, to see with `mt-trace replay`\n"
          "what a departure from the learned order costs.\n"
          "\n"
          "  -o, --output OUT     the trace to write\n"
          "  --jitter F           each launch's duration times a factor drawn from\n"
          "                       [1-F, 1+F], 0 <= F < 1 (synthetic or imported traces)\n"
          "  --eval-every N       after every N-th iteration, an evaluation pass: the\n"
          "                       first half of its launches again, forward only\n"
          "  --branch-every N     every N-th iteration skips a contiguous tenth of its\n"
          "                       launches (another branch)\n"
          "  --seed S             the draw (default 1)\n"
          "  -h, --help           show this help and exit\n"
          "\n"
          "The pager's own records (fetches, evictions, stalls) are dropped: they\n"
          "described another order. Regions are renumbered in allocation order.\n"
          "At least one perturbation must be asked for. Exit status: 0, 2 bad input\n"
          "(an option, or a trace that is not well formed), 1 any other failure.\n");
}

static bool parse_u64(const char *v, uint64_t *out) {
  char *end;
  errno = 0;
  unsigned long long x = strtoull(v, &end, 10);
  if (v[0] < '0' || v[0] > '9' || *end || errno || x < 1 || x > 1000000) return false;
  *out = x;
  return true;
}

int mt_cmd_perturb(int argc, char **argv) {
  const char *in = NULL, *out = NULL;
  double jitter = 0;
  uint64_t eval_every = 0, branch_every = 0, seed = 1;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      usage(stdout);
      return 0;
    }
    if (a[0] != '-') {
      if (in != NULL) {
        fprintf(stderr, WHO ": one trace at a time ('%s' and '%s')\n", in, a);
        return 2;
      }
      in = a;
      continue;
    }
    if (i + 1 == argc) {
      fprintf(stderr, WHO ": %s needs a value (see --help)\n", a);
      return 2;
    }
    const char *v = argv[++i];
    if (strcmp(a, "-o") == 0 || strcmp(a, "--output") == 0) {
      out = v;
    } else if (strcmp(a, "--jitter") == 0) {
      char *end;
      errno = 0;
      jitter = strtod(v, &end);
      if (*v == 0 || *end || errno || !(jitter >= 0 && jitter < 1)) {
        fprintf(stderr, WHO ": --jitter '%s': expected a fraction from 0 to below 1 (0.25: +-25%%)\n", v);
        return 2;
      }
    } else if (strcmp(a, "--eval-every") == 0 || strcmp(a, "--branch-every") == 0 || strcmp(a, "--seed") == 0) {
      uint64_t *dst = a[2] == 'e' ? &eval_every : a[2] == 'b' ? &branch_every : &seed;
      if (!parse_u64(v, dst)) {
        fprintf(stderr, WHO ": %s '%s': expected a whole number from 1 to 1000000\n", a, v);
        return 2;
      }
    } else {
      fprintf(stderr, WHO ": unexpected argument '%s' (see --help)\n", a);
      return 2;
    }
  }
  if (in == NULL || out == NULL) {
    fprintf(stderr, WHO ": %s is missing (see --help)\n", in == NULL ? "TRACE" : "-o OUT");
    return 2;
  }
  if (jitter == 0 && eval_every == 0 && branch_every == 0) {
    fprintf(stderr, WHO ": nothing to do: ask for --jitter, --eval-every or --branch-every\n");
    return 2;
  }
  mtt_stream_t *s;
  int ec = mtt_open("perturb", in, &s);
  if (ec) return ec;
  mt_trace_header_t h = *mtt_header(s);
  if (jitter > 0 && h.clock != MT_TRACE_CLOCK_VIRTUAL) {
    fprintf(stderr, WHO ": %s: --jitter needs launch durations, which only synthetic and imported traces "
            "have (this one was recorded)\n", in);
    mtt_close(s);
    return 2;
  }
  /* the prologue (before the first ITER) and each iteration, in time order */
  recs_t r = {0};
  size_t *iter_at = NULL, niter = 0, cap_iter = 0;
  const mt_trace_rec_t *rec;
  uint64_t off;
  int rc;
  while ((rc = mtt_next(s, &rec, &off)) == 1) {
    if (rec->type == MT_TR_ITER) {
      if (niter == cap_iter) {
        cap_iter = cap_iter ? cap_iter * 2 : 64;
        size_t *na = realloc(iter_at, cap_iter * sizeof(*na));
        if (na == NULL) {
          rc = -ENOMEM;
          break;
        }
        iter_at = na;
      }
      iter_at[niter++] = r.n;
    }
    if (recs_add(&r, rec) < 0) {
      rc = -ENOMEM;
      break;
    }
  }
  mtt_close(s);
  if (rc == -1) {
    free(r.buf), free(r.at), free(iter_at);
    return 2; /* the reader said why */
  }
  if (rc < 0) {
    fprintf(stderr, WHO ": out of memory reading %s\n", in);
    free(r.buf), free(r.at), free(iter_at);
    return 1;
  }
  if (niter == 0 && (eval_every || branch_every)) {
    fprintf(stderr, WHO ": %s has no iteration marks: --eval-every and --branch-every need them\n", in);
    free(r.buf), free(r.at), free(iter_at);
    return 2;
  }
  snprintf(h.source, sizeof h.source, "mt-trace perturb");
  pt_t p = {.jitter = jitter, .rng = seed * 0x9e3779b97f4a7c15ull + 1};
  rc = mt_trace_writer_open(out, &h, NULL, &p.w);
  if (rc < 0) {
    fprintf(stderr, WHO ": cannot create %s: %s\n", out, strerror(-rc));
    free(r.buf), free(r.at), free(iter_at);
    return 1;
  }
  size_t first = niter ? iter_at[0] : r.n;
  for (size_t i = 0; i < first && rc == 0; i++) rc = emit(&p, rec_at(&r, i), false);
  for (size_t k = 0; k < niter && rc == 0; k++) {
    size_t b = iter_at[k], e = k + 1 < niter ? iter_at[k + 1] : r.n;
    size_t nl = 0;
    for (size_t i = b; i < e; i++) nl += rec_at(&r, i)->type == MT_TR_LAUNCH;
    /* the branch: a contiguous tenth of the launches, inside the middle 80% */
    size_t skip_a = SIZE_MAX, skip_b = 0;
    if (branch_every && (k + 1) % branch_every == 0 && nl >= 10) {
      size_t len = nl / 10, span = nl * 8 / 10 - len;
      skip_a = nl / 10 + (span ? (size_t)(rnd(&p) % span) : 0);
      skip_b = skip_a + len;
    }
    size_t li = 0;
    for (size_t i = b; i < e && rc == 0; i++) {
      const mt_trace_rec_t *x = rec_at(&r, i);
      bool drop = x->type == MT_TR_LAUNCH && li >= skip_a && li < skip_b;
      li += x->type == MT_TR_LAUNCH;
      rc = emit(&p, x, drop);
    }
    if (rc == 0 && eval_every && (k + 1) % eval_every == 0) rc = eval_pass(&p, &r, b, e);
  }
  int cl = mt_trace_writer_close(p.w);
  if (rc == 0) rc = cl;
  mtt_map_free(&p.live, no_free);
  mtt_map_free(&p.bytes, no_free);
  free(r.buf), free(r.at), free(iter_at);
  if (rc == -EINVAL) {
    fprintf(stderr, WHO ": %s: %s\n", in, p.err[0] ? p.err : "not a well-formed workload");
    remove(out);
    return 2;
  }
  if (rc < 0) {
    fprintf(stderr, WHO ": cannot write %s: %s\n", out, strerror(-rc));
    remove(out);
    return 1;
  }
  printf("%s: %zu iterations, %" PRIu64 " launches in, %" PRIu64 " out (%" PRIu64 " skipped by branches, %" PRIu64
         " in evaluation passes), %" PRIu64 " regions, %" PRIu64 " pager records dropped\n",
         out, niter, p.launches_in, p.launches_out, p.dropped, p.eval_launches, p.next_id, p.pager_records);
  return 0;
}
