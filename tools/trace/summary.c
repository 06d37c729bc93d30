/*
 * summary.c - `mt-trace summary TRACE [--json]`: totals and one row per
 * iteration, in one streaming pass over the trace (memory: the live chunks,
 * the sort window and one row per iteration, never the records).
 *
 * Rows. An ITER record starts a row that runs to the next ITER (the last to
 * the end of the trace). Records before the first ITER form a "setup" row;
 * a trace without ITER records is one row, iteration 0. A record belongs to
 * the row its start time falls in (a copy or stall is not split).
 *
 * Numbers, per row and in total:
 *   wall      from the row's start to the next row's start (total: first
 *             record to the last record's end);
 *   stall     the sum of STALL spans (several threads can stall at once, so
 *             the share can exceed 100% in principle);
 *   bytes     COPY records by direction, split into the application's and
 *             the pager's own (MT_TRF_PAGER);
 *   fetches / evictions  FETCH / EVICT records (dirty: MT_TRF_DIRTY);
 *   peak      the highest GPU / host / NVMe residency, from common.c's
 *             bookkeeping (chunks placed by FETCH, EVICT and first use in a
 *             launch; small regions on the GPU from ALLOC to FREE);
 *   prefetch  over fetches to the GPU: coverage = prefetches / fetches,
 *             accuracy = prefetched chunks used by a launch before they
 *             moved again / prefetches, timeliness = of those used, the ones
 *             whose FETCH time <= the launch's time. Used and timely count in
 *             the row the prefetch was issued in.
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "common.h"

enum { NDIR = MT_TR_NVME_WRITE + 1 }; /* indexed by the COPY dir; [0] unused */
static const char *const dir_key[NDIR] = {NULL, "h2d", "d2h", "d2d", "set", "nvme_read", "nvme_write"};
static const char *const dir_label[NDIR] = {NULL, "H2D", "D2H", "D2D", "memset", "NVMe read", "NVMe write"};

typedef struct row {
  bool has_iter;                 /* started by an ITER record */
  uint64_t iteration;            /* its number */
  uint64_t start_ns, end_ns;     /* trace clock */
  uint64_t stall_ns, stalls;
  uint64_t bytes[NDIR][2];       /* [dir][0 app, 1 pager] */
  uint64_t fetches, fetches_gpu, fetch_bytes;
  uint64_t prefetches, pf_used, pf_timely; /* to the GPU */
  uint64_t evictions, evict_dirty, evict_bytes;
  uint64_t spills, placements;   /* host -> NVMe moves; moves from no tier (no data moved) */
  uint64_t peak[MTT_NTIERS];     /* bytes, by MT_TIER_* */
  uint64_t launches, allocations, alloc_bytes, frees, opt_steps, opt_ns;
} row_t;

typedef struct summary {
  row_t *rows;
  size_t n, cap;
  row_t total;
  bool iters;                    /* any ITER record */
} summary_t;

static void on_prefetch_used(void *ctx, uint32_t tag, bool timely) {
  summary_t *s = ctx;
  row_t *rows[2] = {&s->rows[tag], &s->total};
  for (int i = 0; i < 2; i++) {
    rows[i]->pf_used++;
    rows[i]->pf_timely += timely;
  }
}

static void account(row_t *w, const mt_trace_rec_t *rec) {
  switch (rec->type) {
  case MT_TR_ALLOC:
    w->allocations++;
    w->alloc_bytes += ((const mt_trace_alloc_t *)(const void *)rec)->bytes;
    break;
  case MT_TR_FREE: w->frees++; break;
  case MT_TR_LAUNCH: w->launches++; break;
  case MT_TR_COPY: {
    const mt_trace_copy_t *c = (const void *)rec;
    if (c->dir >= 1 && c->dir < NDIR) w->bytes[c->dir][(rec->flags & MT_TRF_PAGER) != 0] += c->bytes;
    break;
  }
  case MT_TR_FETCH: {
    const mt_trace_move_t *m = (const void *)rec;
    if (m->from == MT_TIER_NONE) { /* placed where it is first used: nothing fetched */
      w->placements++;
      break;
    }
    w->fetches++;
    w->fetch_bytes += m->bytes;
    if (m->to == MT_TIER_GPU) {
      w->fetches_gpu++;
      w->prefetches += (rec->flags & MT_TRF_PREFETCH) != 0;
    }
    break;
  }
  case MT_TR_EVICT: {
    const mt_trace_move_t *m = (const void *)rec;
    if (m->from == MT_TIER_NONE) { /* a host copy for a never-touched chunk */
      w->placements++;
      break;
    }
    if (m->from != MT_TIER_GPU) { /* host -> NVMe */
      w->spills++;
      break;
    }
    w->evictions++;
    w->evict_dirty += (rec->flags & MT_TRF_DIRTY) != 0;
    w->evict_bytes += m->bytes;
    break;
  }
  case MT_TR_STALL:
    w->stalls++;
    w->stall_ns += mtt_rec_end(rec) - rec->t_ns;
    break;
  case MT_TR_OPT_STEP:
    w->opt_steps++;
    w->opt_ns += mtt_rec_end(rec) - rec->t_ns;
    break;
  default: break;
  }
}

static void take_peak(row_t *w, const uint64_t *lv) {
  for (int t = 1; t < MTT_NTIERS; t++)
    if (lv[t] > w->peak[t]) w->peak[t] = lv[t];
}

static int new_row(summary_t *s, uint64_t t, const mt_trace_rec_t *iter, const uint64_t *lv) {
  if (s->n == s->cap) {
    size_t cap = s->cap ? s->cap * 2 : 16;
    row_t *r = realloc(s->rows, cap * sizeof *r);
    if (!r) return -1;
    s->rows = r;
    s->cap = cap;
  }
  row_t *w = &s->rows[s->n++];
  memset(w, 0, sizeof *w);
  w->start_ns = t;
  if (iter) {
    w->has_iter = true;
    w->iteration = ((const mt_trace_iter_t *)(const void *)iter)->iteration;
  }
  take_peak(w, lv); /* what is resident when the row starts counts */
  return 0;
}

static double ratio(uint64_t a, uint64_t b) { return b ? (double)a / (double)b : -1; }

/* JSON: a ratio, or null when its denominator is 0. */
static void json_ratio(FILE *f, const char *key, uint64_t a, uint64_t b) {
  if (b)
    fprintf(f, "\"%s\": %.6f", key, (double)a / (double)b);
  else
    fprintf(f, "\"%s\": null", key);
}

static void json_row(FILE *f, const row_t *w, bool with_iter) {
  fputs("{", f);
  if (with_iter) fprintf(f, "\"iteration\": %" PRIu64 ", ", w->iteration);
  uint64_t wall = w->end_ns - w->start_ns;
  fprintf(f, "\"start_ns\": %" PRIu64 ", \"wall_ns\": %" PRIu64 ", \"stall_ns\": %" PRIu64 ", ",
          w->start_ns, wall, w->stall_ns);
  json_ratio(f, "stall_share", w->stall_ns, wall);
  fprintf(f, ", \"stalls\": %" PRIu64 ",\n    \"bytes\": {", w->stalls);
  for (int d = 1; d < NDIR; d++)
    fprintf(f, "%s\"%s\": {\"app\": %" PRIu64 ", \"pager\": %" PRIu64 "}", d > 1 ? ", " : "",
            dir_key[d], w->bytes[d][0], w->bytes[d][1]);
  fprintf(f,
          "},\n    \"fetches\": %" PRIu64 ", \"fetches_to_gpu\": %" PRIu64 ", \"fetch_bytes\": %" PRIu64
          ", \"evictions\": %" PRIu64 ", \"evictions_dirty\": %" PRIu64 ", \"evictions_clean\": %" PRIu64
          ", \"evict_bytes\": %" PRIu64 ", \"spills\": %" PRIu64 ", \"placements\": %" PRIu64 ",\n",
          w->fetches, w->fetches_gpu, w->fetch_bytes, w->evictions, w->evict_dirty,
          w->evictions - w->evict_dirty, w->evict_bytes, w->spills, w->placements);
  fprintf(f,
          "    \"peak_gpu_bytes\": %" PRIu64 ", \"peak_host_bytes\": %" PRIu64
          ", \"peak_nvme_bytes\": %" PRIu64 ",\n",
          w->peak[MT_TIER_GPU], w->peak[MT_TIER_HOST], w->peak[MT_TIER_NVME]);
  fprintf(f,
          "    \"prefetches\": %" PRIu64 ", \"prefetch_used\": %" PRIu64 ", \"prefetch_timely\": %" PRIu64
          ", ",
          w->prefetches, w->pf_used, w->pf_timely);
  json_ratio(f, "prefetch_coverage", w->prefetches, w->fetches_gpu);
  fputs(", ", f);
  json_ratio(f, "prefetch_accuracy", w->pf_used, w->prefetches);
  fputs(", ", f);
  json_ratio(f, "prefetch_timeliness", w->pf_timely, w->pf_used);
  fprintf(f,
          ",\n    \"launches\": %" PRIu64 ", \"allocations\": %" PRIu64 ", \"alloc_bytes\": %" PRIu64
          ", \"frees\": %" PRIu64 ", \"opt_steps\": %" PRIu64 ", \"opt_ns\": %" PRIu64 "}",
          w->launches, w->allocations, w->alloc_bytes, w->frees, w->opt_steps, w->opt_ns);
}

static const char *clock_name(uint32_t c) {
  return c == MT_TRACE_CLOCK_MONOTONIC ? "monotonic" : c == MT_TRACE_CLOCK_VIRTUAL ? "virtual" : "unknown";
}

static void print_json(FILE *f, const summary_t *s, const char *path, const mt_trace_header_t *h,
                       uint64_t records) {
  fputs("{\"trace\": {\"file\": ", f);
  mtt_json_str(f, path, strlen(path));
  fputs(", \"source\": ", f);
  mtt_json_str(f, h->source, mtt_strnlen(h->source, sizeof h->source));
  fputs(", \"device\": ", f);
  mtt_json_str(f, h->device, mtt_strnlen(h->device, sizeof h->device));
  fprintf(f,
          ", \"clock\": \"%s\", \"chunk_bytes\": %" PRIu64 ", \"gpu_budget\": %" PRIu64
          ", \"host_budget\": %" PRIu64 ", \"gpu_total\": %" PRIu64 ", \"records\": %" PRIu64 "},\n",
          clock_name(h->clock), h->chunk_bytes, h->gpu_budget, h->host_budget, h->gpu_total, records);
  fputs("\"total\": ", f);
  json_row(f, &s->total, false);
  bool setup = s->iters && s->n && !s->rows[0].has_iter;
  fputs(",\n\"setup\": ", f);
  if (setup)
    json_row(f, &s->rows[0], false);
  else
    fputs("null", f);
  fputs(",\n\"iterations\": [", f);
  for (size_t i = setup; i < s->n; i++) {
    fputs(i > (size_t)setup ? ",\n  " : "\n  ", f);
    json_row(f, &s->rows[i], true);
  }
  fputs("\n]}\n", f);
}

static void fmt_ratio(char *buf, size_t len, uint64_t a, uint64_t b) {
  if (b)
    snprintf(buf, len, "%.1f%% (%" PRIu64 "/%" PRIu64 ")", 100 * ratio(a, b), a, b);
  else
    snprintf(buf, len, "-");
}

static void print_text(FILE *f, const summary_t *s, const char *path, const mt_trace_header_t *h,
                       uint64_t records) {
  char b1[32], b2[32], b3[32], b4[48], b5[48], b6[48];
  const row_t *t = &s->total;
  fprintf(f, "trace      %s\n", path);
  fprintf(f, "source     %.*s on \"%.*s\", %s clock, chunk %s\n", (int)mtt_strnlen(h->source, 32),
          h->source, (int)mtt_strnlen(h->device, 64), h->device, clock_name(h->clock),
          mtt_fmt_bytes(b1, sizeof b1, h->chunk_bytes));
  fprintf(f, "budgets    GPU %s, host %s\n", h->gpu_budget ? mtt_fmt_bytes(b1, sizeof b1, h->gpu_budget) : "unknown",
          h->host_budget ? mtt_fmt_bytes(b2, sizeof b2, h->host_budget) : "unknown");
  fprintf(f, "records    %" PRIu64 "\n\ntotal\n", records);
  uint64_t wall = t->end_ns - t->start_ns;
  fprintf(f, "  wall          %s\n", mtt_fmt_ns(b1, sizeof b1, wall));
  fprintf(f, "  stall         %s (%.1f%% of wall, %" PRIu64 " stalls)\n", mtt_fmt_ns(b2, sizeof b2, t->stall_ns),
          wall ? 100.0 * (double)t->stall_ns / (double)wall : 0.0, t->stalls);
  fprintf(f, "  launches      %" PRIu64 "\n", t->launches);
  fprintf(f, "  allocations   %" PRIu64 " (%s), frees %" PRIu64 "\n", t->allocations,
          mtt_fmt_bytes(b1, sizeof b1, t->alloc_bytes), t->frees);
  if (t->opt_steps)
    fprintf(f, "  optimizer     %" PRIu64 " steps, %s\n", t->opt_steps, mtt_fmt_ns(b1, sizeof b1, t->opt_ns));
  fprintf(f, "  %-22s %12s %12s\n", "bytes moved", "app", "pager");
  for (int d = 1; d < NDIR; d++)
    fprintf(f, "    %-20s %12s %12s\n", dir_label[d], mtt_fmt_bytes(b1, sizeof b1, t->bytes[d][0]),
            mtt_fmt_bytes(b2, sizeof b2, t->bytes[d][1]));
  fprintf(f, "  fetches       %" PRIu64 " (to GPU %" PRIu64 ", %s)\n", t->fetches, t->fetches_gpu,
          mtt_fmt_bytes(b1, sizeof b1, t->fetch_bytes));
  fprintf(f, "  evictions     %" PRIu64 " (dirty %" PRIu64 ", clean %" PRIu64 ", %s)\n", t->evictions,
          t->evict_dirty, t->evictions - t->evict_dirty, mtt_fmt_bytes(b1, sizeof b1, t->evict_bytes));
  if (t->spills) fprintf(f, "  spills        %" PRIu64 " (host to NVMe)\n", t->spills);
  fprintf(f, "  peak          GPU %s, host %s, NVMe %s\n", mtt_fmt_bytes(b1, sizeof b1, t->peak[MT_TIER_GPU]),
          mtt_fmt_bytes(b2, sizeof b2, t->peak[MT_TIER_HOST]), mtt_fmt_bytes(b3, sizeof b3, t->peak[MT_TIER_NVME]));
  fmt_ratio(b4, sizeof b4, t->prefetches, t->fetches_gpu);
  fmt_ratio(b5, sizeof b5, t->pf_used, t->prefetches);
  fmt_ratio(b6, sizeof b6, t->pf_timely, t->pf_used);
  fprintf(f, "  prefetch      coverage %s, accuracy %s, timeliness %s\n", b4, b5, b6);

  fprintf(f, "\nper iteration\n  %-6s %11s %11s %6s %10s %10s %8s %13s %10s %10s %9s\n", "iter", "wall ms",
          "stall ms", "stall", "H2D", "D2H", "fetches", "evict d/c", "peak GPU", "peak host", "launches");
  for (size_t i = 0; i < s->n; i++) {
    const row_t *w = &s->rows[i];
    char it[24], ev[32], sh[16];
    if (w->has_iter || !s->iters)
      snprintf(it, sizeof it, "%" PRIu64, w->iteration);
    else
      snprintf(it, sizeof it, "setup");
    uint64_t rw = w->end_ns - w->start_ns;
    snprintf(ev, sizeof ev, "%" PRIu64 "/%" PRIu64, w->evict_dirty, w->evictions - w->evict_dirty);
    if (rw)
      snprintf(sh, sizeof sh, "%.1f%%", 100.0 * (double)w->stall_ns / (double)rw);
    else
      snprintf(sh, sizeof sh, "-");
    fprintf(f, "  %-6s %11.3f %11.3f %6s %10s %10s %8" PRIu64 " %13s %10s %10s %9" PRIu64 "\n", it,
            (double)rw / 1e6, (double)w->stall_ns / 1e6, sh,
            mtt_fmt_bytes(b1, sizeof b1, w->bytes[MT_TR_H2D][0] + w->bytes[MT_TR_H2D][1]),
            mtt_fmt_bytes(b2, sizeof b2, w->bytes[MT_TR_D2H][0] + w->bytes[MT_TR_D2H][1]), w->fetches, ev,
            mtt_fmt_bytes(b3, sizeof b3, w->peak[MT_TIER_GPU]), mtt_fmt_bytes(b4, sizeof b4, w->peak[MT_TIER_HOST]),
            w->launches);
  }
}

static void help(FILE *f) {
  fputs("usage: mt-trace summary TRACE [--json]\n"
        "\n"
        "Totals and a per-iteration table for a trace. Iterations start at ITER\n"
        "records; records before the first one form a 'setup' row; a trace without\n"
        "ITER records is one iteration (0). The trace is streamed: any size works.\n"
        "\n"
        "  --json       print one JSON object instead of the tables\n"
        "  -h, --help   show this help and exit\n"
        "\n"
        "JSON keys (stable):\n"
        "  trace: file, source, device, clock (monotonic|virtual|unknown), chunk_bytes,\n"
        "         gpu_budget, host_budget, gpu_total, records\n"
        "  total, setup (null when there is none), iterations[]: one object each with\n"
        "    iteration (iterations[] only), start_ns, wall_ns, stall_ns, stall_share\n"
        "      (stall_ns / wall_ns), stalls,\n"
        "    bytes: {h2d, d2h, d2d, set, nvme_read, nvme_write} each {app, pager}\n"
        "      (COPY records; pager = flagged as the pager's own),\n"
        "    fetches, fetches_to_gpu, fetch_bytes (FETCH records from a tier),\n"
        "      evictions, evictions_dirty, evictions_clean, evict_bytes (EVICT records\n"
        "      from the GPU), spills (EVICT from host to NVMe), placements (FETCH or\n"
        "      EVICT from no tier: a chunk placed without moving data),\n"
        "    peak_gpu_bytes, peak_host_bytes, peak_nvme_bytes (residency replayed per\n"
        "      chunk: FETCH/EVICT place a chunk, first use in a launch puts it on\n"
        "      the GPU, small regions count on the GPU from ALLOC to FREE),\n"
        "    prefetches (prefetch-flagged fetches to the GPU), prefetch_used,\n"
        "      prefetch_timely, prefetch_coverage (prefetches / fetches_to_gpu),\n"
        "      prefetch_accuracy (used / prefetches: touched by a launch before\n"
        "      moving again), prefetch_timeliness (timely / used: FETCH time <=\n"
        "      the launch's time),\n"
        "    launches, allocations, alloc_bytes, frees, opt_steps, opt_ns.\n"
        "  Ratios are null when their denominator is 0. Times are ns on the trace's\n"
        "  clock; bytes are bytes.\n",
        f);
}

int mt_cmd_summary(int argc, char **argv) {
  static const struct option opts[] = {
      {"json", no_argument, NULL, 'j'}, {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
  bool json = false;
  int c;
  optind = 0;
  while ((c = mtt_getopt("summary", argc, argv, "h", opts)) != -1) {
    if (c == 'h') {
      help(stdout);
      return 0;
    }
    if (c == 'j')
      json = true;
    else
      return 2;
  }
  if (optind != argc - 1)
    return mtt_usage_error("summary", optind >= argc ? "no trace given" : "one trace at a time");
  const char *path = argv[optind];

  mtt_stream_t *st;
  int rc = mtt_open("summary", path, &st);
  if (rc) return rc;
  summary_t s = {0};
  mtt_book_t *book = mtt_book_new(mtt_header(st)->chunk_bytes, on_prefetch_used, &s);
  const mt_trace_rec_t *rec;
  uint64_t off, end = 0;
  bool first = true;
  rc = 0;
  while (book && (rc = mtt_next(st, &rec, &off)) == 1) {
    const uint64_t *lv = mtt_book_levels(book);
    if (first) {
      s.total.start_ns = rec->t_ns;
      end = rec->t_ns;
      first = false;
    }
    if (rec->type == MT_TR_ITER || s.n == 0) {
      if (rec->type == MT_TR_ITER) s.iters = true;
      if (new_row(&s, rec->t_ns, rec->type == MT_TR_ITER ? rec : NULL, lv) < 0) {
        rc = -2;
        break;
      }
      mtt_book_set_tag(book, (uint32_t)(s.n - 1));
    }
    account(&s.rows[s.n - 1], rec);
    account(&s.total, rec);
    if (mtt_book_apply(book, rec, off) < 0) {
      rc = -2;
      break;
    }
    take_peak(&s.rows[s.n - 1], lv);
    take_peak(&s.total, lv);
    uint64_t e = mtt_rec_end(rec);
    if (e > end) end = e;
  }
  int ret = 0;
  if (!book || rc == -2) {
    fprintf(stderr, "mt-trace summary: out of memory\n");
    ret = 1;
  } else if (rc < 0) {
    ret = 2;
  } else {
    s.total.end_ns = end;
    for (size_t i = 0; i < s.n; i++) {
      s.rows[i].end_ns = i + 1 < s.n ? s.rows[i + 1].start_ns : end;
      if (s.rows[i].end_ns < s.rows[i].start_ns) s.rows[i].end_ns = s.rows[i].start_ns;
    }
    if (json)
      print_json(stdout, &s, path, mtt_header(st), mtt_count(st));
    else
      print_text(stdout, &s, path, mtt_header(st), mtt_count(st));
    mtt_book_warn(book, "summary");
    if (fflush(stdout) != 0 || ferror(stdout)) {
      fprintf(stderr, "mt-trace summary: cannot write the output\n");
      ret = 1;
    }
  }
  mtt_book_free(book);
  mtt_close(st);
  free(s.rows);
  return ret;
}
