/*
 * timeline.c - `mt-trace timeline TRACE -o out.json`: the trace as Chrome
 * trace-event JSON ({"traceEvents": [...]}), which ui.perfetto.dev and
 * chrome://tracing open. Streamed: events are written as records arrive.
 *
 * What becomes what (one process, one track - "thread" - per row):
 *   LAUNCH    an "X" event on "stream N kernels", named from NAME records;
 *             its duration is dur_ns, or when that is 0 (recorded traces) the
 *             time to the next launch on the same stream, capped at
 *             GAP_CAP_NS (the last launch on a stream: to the trace's end,
 *             capped alike); a recorded duration that runs into the next
 *             launch on its stream is cut there, so slices on a track never
 *             overlap (Perfetto drops slices that do not nest);
 *   COPY      an "X" event on "stream N DIR (app|pager)";
 *   STALL     an "X" event on "stalls (thread N)", the recording thread's
 *             (threads stall at the same time), named by its cause;
 *   OPT_STEP  an "X" event on "optimizer";
 *   ITER      a global instant event ("i") "iteration N";
 *   residency "C" counters "GPU resident", "host resident", "NVMe resident"
 *             and "allocated" (bytes; common.c's bookkeeping), at most one
 *             sample per microsecond.
 * ALLOC, FREE, FETCH and EVICT show only through the counters. Timestamps are
 * microseconds from the first record (the format's unit), with ns precision.
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commands.h"
#include "common.h"

#define GAP_CAP_NS 10000000ull   /* 10 ms: longest duration inferred for a recorded kernel */

typedef struct name {
  uint32_t len;
  char s[];
} name_t;

typedef struct pending {         /* the last launch on a stream, until its end is known */
  bool has;
  uint32_t tid;
  uint64_t t, dur, func, launch_id, foot_bytes;
  uint32_t nfoot;
  uint8_t flags;
} pending_t;

typedef struct tl {
  FILE *f;
  bool first_ev;
  uint64_t t0;
  uint32_t next_tid;
  mtt_map_t tracks;              /* track key -> tid */
  mtt_map_t names;               /* func id -> name_t */
  mtt_map_t launches;            /* stream -> pending_t */
  /* counters: the last values written and the sample waiting for its microsecond to end */
  uint64_t cnt_out[4], cnt_val[4], cnt_ns; /* cnt_ns: relative time of the waiting sample */
  bool cnt_pending;
  uint64_t events[4];            /* X, C, i, M written */
} tl_t;

enum { EV_X, EV_C, EV_I, EV_M };

static const char *const dir_name[] = {"?", "H2D", "D2H", "D2D", "memset", "NVMe read", "NVMe write"};
static const char *const stall_name[] = {"stall", "stall: fetch", "stall: evict", "stall: hold", "stall: optimizer"};

static void ev_begin(tl_t *tl, int kind) {
  fputs(tl->first_ev ? "\n" : ",\n", tl->f);
  tl->first_ev = false;
  tl->events[kind]++;
}

static void put_ts(FILE *f, const char *key, uint64_t ns) {
  fprintf(f, "\"%s\":%" PRIu64 ".%03u", key, ns / 1000, (unsigned)(ns % 1000));
}

static uint64_t rel(const tl_t *tl, uint64_t t) { return t >= tl->t0 ? t - tl->t0 : 0; }

/* The tid of the track with this key, announced with its name on first use;
 * 0 on ENOMEM. */
static uint32_t track(tl_t *tl, uint64_t key, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static uint32_t track(tl_t *tl, uint64_t key, const char *fmt, ...) {
  void *v = mtt_map_get(&tl->tracks, key);
  if (v) return (uint32_t)(uintptr_t)v;
  uint32_t tid = ++tl->next_tid;
  if (mtt_map_put(&tl->tracks, key, (void *)(uintptr_t)tid) < 0) return 0;
  char name[128];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(name, sizeof name, fmt, ap);
  va_end(ap);
  ev_begin(tl, EV_M);
  fprintf(tl->f, "{\"ph\":\"M\",\"pid\":1,\"tid\":%u,\"name\":\"thread_name\",\"args\":{\"name\":", tid);
  mtt_json_str(tl->f, name, strlen(name));
  fputs("}}", tl->f);
  ev_begin(tl, EV_M);
  fprintf(tl->f, "{\"ph\":\"M\",\"pid\":1,\"tid\":%u,\"name\":\"thread_sort_index\",\"args\":{\"sort_index\":%u}}",
          tid, tid);
  return tid;
}

/* Track keys: kind in the top byte, the rest identifies the row. */
#define K_KERNEL(s) ((1ull << 56) | (s))
#define K_COPY(s, dir, pager) ((2ull << 56) | ((uint64_t)(dir) << 40) | ((uint64_t)(pager) << 32) | (s))
#define K_STALLS(thread) ((3ull << 56) | (thread))
#define K_OPT (4ull << 56)

static void emit_launch(tl_t *tl, const pending_t *p, uint64_t dur, bool inferred) {
  ev_begin(tl, EV_X);
  FILE *f = tl->f;
  fprintf(f, "{\"ph\":\"X\",\"pid\":1,\"tid\":%u,\"cat\":\"kernel\",", p->tid);
  put_ts(f, "ts", rel(tl, p->t));
  fputc(',', f);
  put_ts(f, "dur", dur);
  fputs(",\"name\":", f);
  const name_t *n = mtt_map_get(&tl->names, p->func);
  if (n) {
    mtt_json_str(f, n->s, n->len);
  } else {
    fprintf(f, "\"func 0x%" PRIx64 "\"", p->func);
  }
  fprintf(f,
          ",\"args\":{\"launch_id\":\"0x%016" PRIx64 "\",\"func\":\"0x%" PRIx64 "\",\"spans\":%u,"
          "\"footprint_bytes\":%" PRIu64 ",\"graph\":%s,\"dur_ns\":%" PRIu64 ",\"duration\":\"%s\"}}",
          p->launch_id, p->func, p->nfoot, p->foot_bytes, (p->flags & MT_TRF_GRAPH) ? "true" : "false", p->dur,
          inferred ? "gap to the next launch (capped)" : "recorded");
}

static int on_launch(tl_t *tl, const mt_trace_launch_t *l) {
  pending_t *p = mtt_map_get(&tl->launches, l->stream);
  if (!p) {
    p = calloc(1, sizeof *p);
    if (!p || mtt_map_put(&tl->launches, l->stream, p) < 0) {
      free(p);
      return -1;
    }
  }
  if (p->has) {
    uint64_t gap = l->h.t_ns > p->t ? l->h.t_ns - p->t : 0;
    emit_launch(tl, p, p->dur ? (p->dur < gap ? p->dur : gap) : gap < GAP_CAP_NS ? gap : GAP_CAP_NS, !p->dur);
  }
  uint32_t tid = track(tl, K_KERNEL(l->stream), "stream %u kernels", l->stream);
  if (!tid) return -1;
  const mt_trace_span_t *foot = (const void *)(l + 1);
  uint64_t bytes = 0;
  for (uint32_t i = 0; i < l->nfoot; i++) bytes += foot[i].bytes;
  *p = (pending_t){.has = true, .tid = tid, .t = l->h.t_ns, .dur = l->dur_ns, .func = l->func,
                   .launch_id = l->launch_id, .foot_bytes = bytes, .nfoot = l->nfoot, .flags = l->h.flags};
  return 0;
}

static int on_span(tl_t *tl, uint32_t tid, const char *cat, const char *name, const mt_trace_rec_t *rec) {
  if (!tid) return -1;
  ev_begin(tl, EV_X);
  FILE *f = tl->f;
  fprintf(f, "{\"ph\":\"X\",\"pid\":1,\"tid\":%u,\"cat\":\"%s\",\"name\":\"%s\",", tid, cat, name);
  put_ts(f, "ts", rel(tl, rec->t_ns));
  fputc(',', f);
  put_ts(f, "dur", mtt_rec_end(rec) - rec->t_ns);
  return 0;
}

static int on_record(tl_t *tl, const mt_trace_rec_t *rec) {
  FILE *f = tl->f;
  switch (rec->type) {
  case MT_TR_NAME: {
    const mt_trace_name_t *n = (const void *)rec;
    name_t *nm = malloc(sizeof *nm + n->len);
    if (!nm) return -1;
    nm->len = n->len;
    memcpy(nm->s, n + 1, n->len);
    name_t *old = mtt_map_get(&tl->names, n->id); /* a later NAME for the same id wins */
    if (mtt_map_put(&tl->names, n->id, nm) < 0) {
      free(nm);
      return -1;
    }
    free(old);
    return 0;
  }
  case MT_TR_LAUNCH: return on_launch(tl, (const void *)rec);
  case MT_TR_COPY: {
    const mt_trace_copy_t *c = (const void *)rec;
    unsigned dir = c->dir < sizeof dir_name / sizeof dir_name[0] ? c->dir : 0;
    bool pager = rec->flags & MT_TRF_PAGER;
    uint32_t tid = track(tl, K_COPY(c->stream, dir, pager), "stream %u %s (%s)", c->stream, dir_name[dir],
                         pager ? "pager" : "app");
    if (on_span(tl, tid, "copy", dir_name[dir], rec) < 0) return -1;
    uint64_t dur = mtt_rec_end(rec) - rec->t_ns;
    fprintf(f, ",\"args\":{\"bytes\":%" PRIu64 ",\"pager\":%s,\"GB/s\":%.3f}}", c->bytes, pager ? "true" : "false",
            dur ? (double)c->bytes / (double)dur : 0.0);
    return 0;
  }
  case MT_TR_STALL: {
    const mt_trace_stall_t *s = (const void *)rec;
    unsigned cause = s->cause < sizeof stall_name / sizeof stall_name[0] ? s->cause : 0;
    if (on_span(tl, track(tl, K_STALLS(rec->thread), "stalls (thread %u)", rec->thread), "stall", stall_name[cause],
                rec) < 0)
      return -1;
    fprintf(f, ",\"args\":{\"cause\":%u}}", s->cause);
    return 0;
  }
  case MT_TR_OPT_STEP: {
    const mt_trace_opt_step_t *o = (const void *)rec;
    if (on_span(tl, track(tl, K_OPT, "optimizer"), "optimizer", "optimizer step", rec) < 0) return -1;
    fprintf(f, ",\"args\":{\"bytes\":%" PRIu64 "}}", o->bytes);
    return 0;
  }
  case MT_TR_ITER: {
    const mt_trace_iter_t *it = (const void *)rec;
    ev_begin(tl, EV_I);
    fprintf(f, "{\"ph\":\"i\",\"s\":\"g\",\"pid\":1,\"tid\":0,\"cat\":\"iteration\",\"name\":\"iteration %" PRIu64 "\",",
            it->iteration);
    put_ts(f, "ts", rel(tl, rec->t_ns));
    fprintf(f, ",\"args\":{\"heuristic\":%s}}", (rec->flags & MT_TRF_HEURISTIC) ? "true" : "false");
    return 0;
  }
  default: return 0;
  }
}

static void counters_write(tl_t *tl) {
  static const char *const names[4] = {"GPU resident", "host resident", "NVMe resident", "allocated"};
  for (int i = 0; i < 4; i++) {
    if (tl->cnt_val[i] == tl->cnt_out[i] && tl->events[EV_C] >= 4) continue;
    ev_begin(tl, EV_C);
    fprintf(tl->f, "{\"ph\":\"C\",\"pid\":1,\"name\":\"%s\",", names[i]);
    put_ts(tl->f, "ts", tl->cnt_ns);
    fprintf(tl->f, ",\"args\":{\"bytes\":%" PRIu64 "}}", tl->cnt_val[i]);
    tl->cnt_out[i] = tl->cnt_val[i];
  }
  tl->cnt_pending = false;
}

/* Samples the bookkeeping after a record at time t. */
static void counters_sample(tl_t *tl, const mtt_book_t *b, uint64_t t) {
  const uint64_t *lv = mtt_book_levels(b);
  uint64_t v[4] = {lv[MT_TIER_GPU], lv[MT_TIER_HOST], lv[MT_TIER_NVME], mtt_book_allocated(b)};
  if (memcmp(v, tl->cnt_val, sizeof v) == 0) return;
  uint64_t ns = rel(tl, t);
  if (tl->cnt_pending && ns / 1000 != tl->cnt_ns / 1000) counters_write(tl);
  memcpy(tl->cnt_val, v, sizeof v);
  if (!tl->cnt_pending) tl->cnt_ns = ns;
  tl->cnt_pending = true;
}

static void help(FILE *f) {
  fputs("usage: mt-trace timeline TRACE -o OUT.json\n"
        "\n"
        "Writes the trace as Chrome trace-event JSON, for ui.perfetto.dev or\n"
        "chrome://tracing: kernels per stream, copies per stream and direction (app\n"
        "and pager apart), stalls, optimizer steps, iteration marks, and counters of\n"
        "GPU, host and NVMe residency and allocated bytes. Kernels recorded without a\n"
        "duration last until the next launch on their stream, at most 10 ms.\n"
        "\n"
        "  -o, --output FILE   where to write the JSON ('-': standard output)\n"
        "  -h, --help          show this help and exit\n",
        f);
}

static void free_ptr(void *p) { free(p); }

int mt_cmd_timeline(int argc, char **argv) {
  const char *path, *out;
  int code = mtt_trace_to_file_args("timeline", argc, argv, help, "OUT.json", &path, &out);
  if (code >= 0) return code;

  mtt_stream_t *st;
  int rc = mtt_open("timeline", path, &st);
  if (rc) return rc;
  bool to_stdout = strcmp(out, "-") == 0;
  tl_t tl = {.first_ev = true};
  tl.f = to_stdout ? stdout : fopen(out, "w");
  if (!tl.f) {
    perror(out);
    mtt_close(st);
    return 1;
  }
  setvbuf(tl.f, NULL, _IOFBF, 1 << 20);
  const mt_trace_header_t *h = mtt_header(st);
  mtt_book_t *book = mtt_book_new(h->chunk_bytes, NULL, NULL);

  fputs("{\"displayTimeUnit\":\"ns\",\"otherData\":{\"source\":", tl.f);
  mtt_json_str(tl.f, h->source, mtt_strnlen(h->source, sizeof h->source));
  fputs(",\"device\":", tl.f);
  mtt_json_str(tl.f, h->device, mtt_strnlen(h->device, sizeof h->device));
  fprintf(tl.f, ",\"gpu_budget\":%" PRIu64 ",\"host_budget\":%" PRIu64 ",\"chunk_bytes\":%" PRIu64 "},\"traceEvents\":[",
          h->gpu_budget, h->host_budget, h->chunk_bytes);
  ev_begin(&tl, EV_M);
  fputs("{\"ph\":\"M\",\"pid\":1,\"name\":\"process_name\",\"args\":{\"name\":", tl.f);
  char pname[128];
  snprintf(pname, sizeof pname, "mtalloc %.*s", (int)mtt_strnlen(h->device, sizeof h->device), h->device);
  mtt_json_str(tl.f, pname, strlen(pname));
  fputs("}}", tl.f);

  const mt_trace_rec_t *rec;
  uint64_t off, end = 0;
  bool first = true, oom = !book;
  while (!oom && (rc = mtt_next(st, &rec, &off)) == 1) {
    if (first) {
      tl.t0 = end = rec->t_ns;
      first = false;
      counters_write(&tl); /* all four start at 0 */
    }
    if (on_record(&tl, rec) < 0 || mtt_book_apply(book, rec, off) < 0) {
      oom = true;
      break;
    }
    counters_sample(&tl, book, rec->t_ns);
    uint64_t e = mtt_rec_end(rec);
    if (e > end) end = e;
  }
  int ret = 0;
  if (oom) {
    fprintf(stderr, "mt-trace timeline: out of memory\n");
    ret = 1;
  } else if (rc < 0) {
    ret = 2;
  } else {
    if (tl.cnt_pending) counters_write(&tl);
    for (size_t i = 0; i < tl.launches.cap; i++) {
      pending_t *p = tl.launches.vals[i];
      if (!p || !p->has) continue;
      uint64_t gap = end - p->t;
      emit_launch(&tl, p, p->dur ? p->dur : gap < GAP_CAP_NS ? gap : GAP_CAP_NS, !p->dur);
    }
    fputs("\n]}\n", tl.f);
    mtt_book_warn(book, "timeline");
  }
  if (fflush(tl.f) != 0 || ferror(tl.f)) {
    if (!ret) fprintf(stderr, "mt-trace timeline: %s: write failed\n", out);
    ret = ret ? ret : 1;
  }
  if (!to_stdout) {
    fclose(tl.f);
    if (ret) unlink(out);
  }
  mtt_book_free(book);
  mtt_map_free(&tl.tracks, NULL);
  mtt_map_free(&tl.names, free_ptr);
  mtt_map_free(&tl.launches, free_ptr);
  mtt_close(st);
  return ret;
}
