/*
 * Description: `mt-trace import-g10` and `mt-trace synth` write traces that
 * `mt-trace replay` can trust, with the sizes, counts and times of their
 * sources.
 *
 * Each mode runs the mt-trace executable, reads the trace back through the
 * reader API (mt_trace_open / mt_trace_next) and checks:
 *
 *   every trace (walk()): header (virtual clock, 2 MiB chunks, source);
 *     region ids from 1 in allocation order; every span of a launch inside
 *     a region that is allocated and not yet freed; every FREE of a live
 *     region; NAME before a function's first launch; stream 0; time never
 *     goes back and each launch starts when the previous one ended; ITER
 *     numbered from 0; launch ids of iteration 1 equal to those of
 *     iteration 0 (same kernels over the same logical tensors).
 *
 *   g10 DIR MODEL: the G10 workload's kernel count, tensor count, global and
 *     intermediate bytes and ideal iteration time (cycles at 1.2 GHz, to the
 *     nanosecond) equal the table in shared/traces/g10/README.md; global
 *     tensors are never freed, all intermediate ones are; two iterations.
 *   g10-mini: a hand-written 3-kernel workload with known lifetimes,
 *     including Death -1 and a tensor both read and written.
 *   synth-tiny CONF: tests/gen/tiny.conf, whose numbers are worked out by
 *     hand below: parameters, persistent bytes, launches per iteration,
 *     three iterations.
 *   synth-params CONF EXPECTED TOLERANCE: the parameter count (from the
 *     persistent bytes, fp32: 16 bytes per parameter, and from the summary
 *     the command prints) within TOLERANCE (relative) of EXPECTED.
 *   fail PATTERN ARGS...: mt-trace ARGS exits 2 with PATTERN in its stderr.
 *   g10-bad: missing files and malformed lines in a G10 folder exit 2 with
 *     FILE:LINE.
 *
 * Usage: gen_check MT_TRACE MODE ARGS...   (exit 0 pass, 1 fail, 77 skip)
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "trace_io.h"

extern char **environ;

static const char *mt_trace;
static char tmpdir[256];

static _Noreturn void die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static _Noreturn void die(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("gen_check: FAIL: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  exit(1);
}

#define CHECK(cond, ...) \
  do {                   \
    if (!(cond)) die(__VA_ARGS__); \
  } while (0)

static void cleanup(void) {
  if (!tmpdir[0]) return;
  char cmd[400];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
  if (system(cmd) != 0) fprintf(stderr, "gen_check: could not remove %s\n", tmpdir);
}

static const char *tmp(const char *name) {
  static char buf[8][512];
  static int n;
  if (!tmpdir[0]) {
    const char *base = getenv("TMPDIR");
    snprintf(tmpdir, sizeof tmpdir, "%s/gen_check.XXXXXX", base && *base ? base : "/tmp");
    CHECK(mkdtemp(tmpdir), "mkdtemp: %s", strerror(errno));
    atexit(cleanup);
  }
  char *b = buf[n++ % 8];
  snprintf(b, 512, "%s/%s", tmpdir, name);
  return b;
}

/* Runs mt-trace with args (NULL-terminated), stdout and stderr to files;
 * returns the exit status. */
static int run(const char *out_path, const char *err_path, const char *const *args) {
  const char *argv[64];
  int n = 0;
  argv[n++] = mt_trace;
  for (; *args && n < 63; args++) argv[n++] = *args;
  argv[n] = NULL;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&fa, 2, err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid;
  int rc = posix_spawn(&pid, mt_trace, &fa, NULL, (char *const *)argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  CHECK(rc == 0, "cannot run %s: %s", mt_trace, strerror(rc));
  int st;
  CHECK(waitpid(pid, &st, 0) == pid, "waitpid: %s", strerror(errno));
  CHECK(WIFEXITED(st), "%s died with signal %d", mt_trace, WIFSIGNALED(st) ? WTERMSIG(st) : 0);
  return WEXITSTATUS(st);
}

static char *slurp(const char *path) {
  FILE *f = fopen(path, "r");
  CHECK(f, "%s: %s", path, strerror(errno));
  static char buf[1 << 16];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  buf[n] = '\0';
  fclose(f);
  return buf;
}

/* Runs a command that must succeed; returns its stdout. */
static char *run_ok(const char *const *args) {
  const char *o = tmp("stdout"), *e = tmp("stderr");
  int rc = run(o, e, args);
  if (rc != 0) {
    fputs(slurp(e), stderr);
    die("%s %s exited %d", mt_trace, args[0], rc);
  }
  return slurp(o);
}

/* ---- reading a trace back ------------------------------------------------ */

#define MAX_ITERS 8

typedef struct region {
  uint64_t bytes;
  int state;                  /* 1 live, 2 freed */
  int iter;                   /* iteration it was allocated in (-1 before ITER 0) */
} region_t;

typedef struct walk {
  region_t *r;                /* by region id */
  uint64_t nr, capr;
  uint64_t iters;
  uint64_t launches[MAX_ITERS];
  uint64_t dur[MAX_ITERS];    /* sum of dur_ns */
  uint64_t alloc_bytes[MAX_ITERS + 1]; /* [0] before ITER 0, [i+1] in iteration i */
  uint64_t *ids[2];           /* launch ids of iterations 0 and 1 */
  uint64_t nids[2], capids[2];
  uint64_t persistent_bytes, persistent_regions; /* never freed */
  uint64_t freed_regions, total_launches, max_live;
  uint64_t kind_spans[MT_ACC__COUNT]; /* spans by access kind */
  bool named[4096];
} walk_t;

static void walk(const char *path, const char *source, walk_t *w) {
  memset(w, 0, sizeof *w);
  mt_trace_reader_t *rd;
  char err[512];
  CHECK(mt_trace_open(path, &rd, err, sizeof err) == 0, "%s", err);
  const mt_trace_header_t *h = mt_trace_header(rd);
  CHECK(h->clock == MT_TRACE_CLOCK_VIRTUAL, "%s: clock %u, not virtual", path, h->clock);
  CHECK(h->chunk_bytes == 2u << 20, "%s: chunk_bytes %" PRIu64, path, h->chunk_bytes);
  CHECK(strncmp(h->source, source, sizeof h->source) == 0, "%s: source '%.32s'", path, h->source);
  const mt_trace_rec_t *rec;
  int rc;
  uint64_t last_t = 0, clock = 0, live = 0;
  int iter = -1;
  while ((rc = mt_trace_next(rd, &rec)) == 1) {
    uint64_t off = mt_trace_offset(rd);
    CHECK(rec->t_ns >= last_t, "byte %" PRIu64 ": time goes back (%" PRIu64 " < %" PRIu64 ")", off, rec->t_ns,
          last_t);
    last_t = rec->t_ns;
    switch (rec->type) {
    case MT_TR_ALLOC: {
      const mt_trace_alloc_t *a = (const void *)rec;
      CHECK(a->region == w->nr + 1, "byte %" PRIu64 ": region %" PRIu64 " allocated, expected %" PRIu64, off,
            a->region, w->nr + 1);
      CHECK(a->bytes > 0, "byte %" PRIu64 ": empty region", off);
      if (w->nr + 1 >= w->capr) {
        w->capr = w->capr ? 2 * w->capr : 4096;
        w->r = realloc(w->r, w->capr * sizeof *w->r);
        CHECK(w->r, "oom");
      }
      w->r[++w->nr] = (region_t){.bytes = a->bytes, .state = 1, .iter = iter};
      w->alloc_bytes[iter + 1 < MAX_ITERS + 1 ? iter + 1 : MAX_ITERS] += a->bytes;
      live += a->bytes;
      if (live > w->max_live) w->max_live = live;
      break;
    }
    case MT_TR_FREE: {
      const mt_trace_free_t *f = (const void *)rec;
      CHECK(f->region >= 1 && f->region <= w->nr && w->r[f->region].state == 1,
            "byte %" PRIu64 ": FREE of region %" PRIu64 " that is not live", off, f->region);
      w->r[f->region].state = 2;
      live -= w->r[f->region].bytes;
      w->freed_regions++;
      break;
    }
    case MT_TR_NAME: {
      const mt_trace_name_t *n = (const void *)rec;
      CHECK(n->id < 4096 && !w->named[n->id], "byte %" PRIu64 ": NAME %" PRIu64 " twice or too large", off,
            n->id);
      w->named[n->id] = true;
      break;
    }
    case MT_TR_ITER: {
      const mt_trace_iter_t *it = (const void *)rec;
      CHECK(it->iteration == (uint64_t)(iter + 1), "byte %" PRIu64 ": ITER %" PRIu64 " after %d", off,
            it->iteration, iter);
      iter++;
      w->iters++;
      break;
    }
    case MT_TR_LAUNCH: {
      const mt_trace_launch_t *l = (const void *)rec;
      const mt_trace_span_t *sp = (const void *)(l + 1);
      CHECK(iter >= 0, "byte %" PRIu64 ": launch before ITER 0", off);
      CHECK(l->func < 4096 && w->named[l->func], "byte %" PRIu64 ": func %" PRIu64 " has no NAME before it", off,
            l->func);
      CHECK(l->stream == 0, "byte %" PRIu64 ": stream %u", off, l->stream);
      CHECK(l->h.t_ns == clock, "byte %" PRIu64 ": launch at %" PRIu64 " ns, previous ended at %" PRIu64, off,
            l->h.t_ns, clock);
      clock += l->dur_ns;
      for (uint32_t i = 0; i < l->nfoot; i++) {
        CHECK(sp[i].region >= 1 && sp[i].region <= w->nr && w->r[sp[i].region].state == 1,
              "byte %" PRIu64 ": launch uses region %" PRIu64 " that is %s", off, sp[i].region,
              sp[i].region > w->nr || sp[i].region == 0 ? "not allocated" : "freed");
        CHECK(sp[i].offset + sp[i].bytes <= w->r[sp[i].region].bytes && sp[i].bytes > 0,
              "byte %" PRIu64 ": span outside region %" PRIu64, off, sp[i].region);
        for (uint32_t j = 0; j < i; j++)
          CHECK(sp[j].region != sp[i].region, "byte %" PRIu64 ": region %" PRIu64 " twice in one footprint",
                off, sp[i].region);
      }
      /* Generators know what each kernel does with each tensor: no span
       * may be left unknown. */
      const uint8_t *kind = mt_trace_launch_kinds(l);
      CHECK(l->nfoot == 0 || kind, "byte %" PRIu64 ": launch without access kinds", off);
      for (uint32_t i = 0; i < l->nfoot; i++) {
        CHECK(kind[i] != MT_ACC_UNKNOWN, "byte %" PRIu64 ": span %u (region %" PRIu64 ") has no access kind", off,
              i, sp[i].region);
        w->kind_spans[kind[i]]++;
      }
      if (iter < MAX_ITERS) {
        w->launches[iter]++;
        w->dur[iter] += l->dur_ns;
      }
      if (iter < 2) {
        if (w->nids[iter] == w->capids[iter]) {
          w->capids[iter] = w->capids[iter] ? 2 * w->capids[iter] : 1024;
          w->ids[iter] = realloc(w->ids[iter], w->capids[iter] * sizeof(uint64_t));
          CHECK(w->ids[iter], "oom");
        }
        w->ids[iter][w->nids[iter]++] = l->launch_id;
      }
      w->total_launches++;
      break;
    }
    default:
      die("byte %" PRIu64 ": unexpected record type %u in a generated trace", off, rec->type);
    }
  }
  CHECK(rc == 0, "%s", mt_trace_error(rd));
  mt_trace_close(rd);
  for (uint64_t i = 1; i <= w->nr; i++) {
    if (w->r[i].state == 1) {
      w->persistent_regions++;
      w->persistent_bytes += w->r[i].bytes;
      CHECK(w->r[i].iter == -1, "region %" PRIu64 " (iteration %d) is never freed", i, w->r[i].iter);
    }
  }
  if (w->iters >= 2) {
    CHECK(w->nids[0] == w->nids[1], "iterations 0 and 1 differ in launches");
    CHECK(memcmp(w->ids[0], w->ids[1], w->nids[0] * sizeof(uint64_t)) == 0,
          "launch ids of iteration 1 differ from iteration 0");
  }
  free(w->ids[0]);
  free(w->ids[1]);
  free(w->r);
}

/* ---- G10 ------------------------------------------------------------------ */

typedef struct g10_row {
  const char *model;
  uint64_t kernels, tensors, globals, global_bytes, inter_bytes, ideal_cycles;
} g10_row_t;

/* shared/traces/g10/README.md, the workload table. */
static const g10_row_t G10[] = {
    {"BERT_Base", 1369, 1463, 156, 17823494144ull, 141134852096ull, 8742558777ull},
    {"VIT", 1489, 1563, 157, 18252263424ull, 179791499264ull, 4459141336ull},
    {"Inceptionv3", 929, 2171, 378, 96358400ull, 845781843968ull, 71633241480ull},
    {"ResNet152", 1299, 3330, 622, 242307072ull, 1166032891904ull, 135107260924ull},
    {"SENet154", 2319, 4341, 730, 1394003968ull, 1835909935104ull, 159444570406ull},
};

static int mode_g10(const char *dir, const char *model) {
  const g10_row_t *row = NULL;
  for (size_t i = 0; i < sizeof G10 / sizeof G10[0]; i++)
    if (strcmp(G10[i].model, model) == 0) row = &G10[i];
  CHECK(row, "unknown model %s", model);
  if (!dir[0]) {
    printf("gen_check: SKIP: shared/traces/g10 not found\n");
    return 77;
  }
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", dir, model);
  struct stat sb;
  if (stat(path, &sb) != 0) {
    printf("gen_check: SKIP: %s not found\n", path);
    return 77;
  }
  const char *trace = tmp("g10.trace");
  run_ok((const char *const[]){"import-g10", path, "-o", trace, "--iterations", "2", NULL});
  walk_t w;
  walk(trace, "mt-trace import-g10", &w);
  CHECK(w.iters == 2, "%" PRIu64 " iterations", w.iters);
  CHECK(w.launches[0] == row->kernels && w.launches[1] == row->kernels,
        "%s: %" PRIu64 "/%" PRIu64 " launches per iteration, README says %" PRIu64, model, w.launches[0],
        w.launches[1], row->kernels);
  CHECK(w.persistent_regions == row->globals && w.persistent_bytes == row->global_bytes,
        "%s: %" PRIu64 " global tensors of %" PRIu64 " bytes, README says %" PRIu64 " of %" PRIu64, model,
        w.persistent_regions, w.persistent_bytes, row->globals, row->global_bytes);
  CHECK(w.alloc_bytes[0] == row->global_bytes, "%s: %" PRIu64 " bytes allocated before iteration 0", model,
        w.alloc_bytes[0]);
  CHECK(w.alloc_bytes[1] == row->inter_bytes && w.alloc_bytes[2] == row->inter_bytes,
        "%s: intermediate bytes %" PRIu64 "/%" PRIu64 " per iteration, README says %" PRIu64, model,
        w.alloc_bytes[1], w.alloc_bytes[2], row->inter_bytes);
  uint64_t tensors = w.nr - (w.nr - w.persistent_regions) / 2;
  CHECK(w.nr == row->globals + 2 * (row->tensors - row->globals) && tensors == row->tensors,
        "%s: %" PRIu64 " regions over two iterations", model, w.nr);
  CHECK(w.freed_regions == 2 * (row->tensors - row->globals), "%s: %" PRIu64 " frees", model, w.freed_regions);
  /* The ideal time in ns is cycles / 1.2; the first iteration to 1 ns, both to 1 ns. */
  double ideal = (double)row->ideal_cycles / 1.2;
  CHECK(fabs((double)w.dur[0] - ideal) <= 1.0 && fabs((double)(w.dur[0] + w.dur[1]) - 2 * ideal) <= 1.0,
        "%s: iteration time %" PRIu64 " + %" PRIu64 " ns, README ideal %.1f ns", model, w.dur[0], w.dur[1], ideal);
  CHECK(w.kind_spans[MT_ACC_READ] > 0 && w.kind_spans[MT_ACC_WRITE] > 0, "%s: no read or no written span", model);
  printf("%s: %" PRIu64 " kernels, %" PRIu64 " tensors, %" PRIu64 " + %" PRIu64 " bytes, %.3f s: as the README; "
         "spans read %" PRIu64 ", written %" PRIu64 ", read-written %" PRIu64 "\n",
         model, w.launches[0], tensors, w.persistent_bytes, w.alloc_bytes[1], (double)w.dur[0] / 1e9,
         w.kind_spans[MT_ACC_READ], w.kind_spans[MT_ACC_WRITE], w.kind_spans[MT_ACC_RW]);
  return 0;
}

static void write_file(const char *dir, const char *name, const char *text) {
  char p[600];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  FILE *f = fopen(p, "w");
  CHECK(f && fputs(text, f) >= 0 && fclose(f) == 0, "cannot write %s", p);
}

#define TL(id, g, size, a) "tensor" #id " Is weight (global)?: " #g ", Size in byte: " #size ", Range:" #a "--" 
#define SEP "________________\n"

/* Three kernels over four tensors: t0 global (8192 B), t1 input (4096,
 * born 0, read by 1 and 2: Death 3), t2 workspace (4096, born 1, never
 * read: Death -1), t3 (4096, born 1, read and written by 2: Death 3). */
static const char MINI_TENSORS[] = TL(0, 1, 8192, 0) "8192\n" TL(1, 0, 4096, 0) "4096\n" TL(2, 0, 4096, 4096) "8192\n"
    TL(3, 0, 4096, 8192) "12288\n";
static const char MINI_KERNELS[] =
    "Kernel ID: 0, Name: LoadData_A0\nParent Layer ID:0; Name:Conv2d\nExecution Time: 1200\n(1,1,1,1)\n"
    "Input Tensors:\nOutput Tensors:\n" TL(1, 0, 4096, 0) "4096\n" SEP
    "Kernel ID: 1, Name: Conv2d_Forward\nParent Layer ID:0; Name:Conv2d\nExecution Time: 7\n"
    "Input Tensors:\n" TL(0, 1, 8192, 0) "8192\n" TL(1, 0, 4096, 0) "4096\nOutput Tensors:\n"
    TL(2, 0, 4096, 4096) "8192\n" TL(3, 0, 4096, 8192) "12288\n" SEP
    "Kernel ID: 2, Name: Add_MultiGredient\nParent OP ID:3; Name: Add\nExecution Time: 5\n"
    "Input Tensors:\n" TL(3, 0, 4096, 8192) "12288\n" TL(1, 0, 4096, 0) "4096\nOutput Tensors:\n"
    TL(3, 0, 4096, 8192) "12288\n" SEP;
static const char MINI_INTERVALS[] =
    TL(0, 1, 8192, 0) "8192\nGlobal!\n" SEP TL(0, 1, 8192, 0) "8192\nHidding Intervals:\ninterval 0: 2--------1\n"
    "Estimated Time:1.00583\n" SEP
    TL(1, 0, 4096, 0) "4096\nLiveness: Birth: 0, Death: 3.\n" SEP TL(1, 0, 4096, 0) "4096\nHidding Intervals:\n" SEP
    TL(2, 0, 4096, 4096) "8192\nLiveness: Birth: 1, Death: -1.\n" SEP TL(2, 0, 4096, 4096) "8192\nHidding Intervals:\n" SEP
    TL(3, 0, 4096, 8192) "12288\nLiveness: Birth: 1, Death: 3.\n" SEP TL(3, 0, 4096, 8192) "12288\nHidding Intervals:\n" SEP;

static const char *mini_dir(const char *name) {
  const char *d = tmp(name);
  CHECK(mkdir(d, 0755) == 0 || errno == EEXIST, "mkdir %s", d);
  write_file(d, "tensors.config", MINI_TENSORS);
  write_file(d, "kernels.config", MINI_KERNELS);
  write_file(d, "interval.config", MINI_INTERVALS);
  return d;
}

/* The mini workload's records, exactly. */
static int mode_g10_mini(void) {
  const char *d = mini_dir("mini"), *trace = tmp("mini.trace");
  run_ok((const char *const[]){"import-g10", d, "-o", trace, NULL});
  mt_trace_reader_t *rd;
  char err[512];
  CHECK(mt_trace_open(trace, &rd, err, sizeof err) == 0, "%s", err);
  CHECK(mt_trace_header(rd)->gpu_total == 40ull << 30, "gpu_total");
  /* type, region/func, t_ns, bytes-or-dur, nfoot */
  static const uint64_t want[][5] = {
      {MT_TR_ALLOC, 1, 0, 8192, 0},       /* global t0 */
      {MT_TR_ITER, 0, 0, 0, 0},
      {MT_TR_ALLOC, 2, 0, 4096, 0},       /* t1 born at kernel 0 */
      {MT_TR_NAME, 1, 0, 0, 0},
      {MT_TR_LAUNCH, 1, 0, 1000, 1},      /* 1200 cycles = 1000 ns */
      {MT_TR_ALLOC, 3, 1000, 4096, 0},    /* t2 */
      {MT_TR_ALLOC, 4, 1000, 4096, 0},    /* t3 */
      {MT_TR_NAME, 2, 1000, 0, 0},
      {MT_TR_LAUNCH, 2, 1000, 5, 4},      /* cycles 1200..1207: 1000..1005 ns */
      {MT_TR_FREE, 3, 1005, 0, 0},        /* Death -1: freed after its birth kernel */
      {MT_TR_NAME, 3, 1005, 0, 0},
      {MT_TR_LAUNCH, 3, 1005, 5, 2},      /* cycles 1207..1212: 1005..1010 ns; t3 once */
      {MT_TR_FREE, 2, 1010, 0, 0},
      {MT_TR_FREE, 4, 1010, 0, 0},
  };
  const mt_trace_rec_t *rec;
  size_t i = 0;
  int rc;
  while ((rc = mt_trace_next(rd, &rec)) == 1) {
    CHECK(i < sizeof want / sizeof want[0], "more records than expected");
    const uint64_t *x = want[i];
    CHECK(rec->type == x[0] && rec->t_ns == x[2], "record %zu: type %u at %" PRIu64 ", expected %" PRIu64
          " at %" PRIu64, i, rec->type, rec->t_ns, x[0], x[2]);
    if (rec->type == MT_TR_ALLOC) {
      const mt_trace_alloc_t *a = (const void *)rec;
      CHECK(a->region == x[1] && a->bytes == x[3], "record %zu: ALLOC %" PRIu64 " of %" PRIu64, i, a->region,
            a->bytes);
    } else if (rec->type == MT_TR_FREE) {
      CHECK(((const mt_trace_free_t *)rec)->region == x[1], "record %zu: FREE region", i);
    } else if (rec->type == MT_TR_LAUNCH) {
      const mt_trace_launch_t *l = (const void *)rec;
      CHECK(l->func == x[1] && l->dur_ns == x[3] && l->nfoot == x[4],
            "record %zu: LAUNCH func %" PRIu64 " dur %" PRIu64 " nfoot %u", i, l->func, l->dur_ns, l->nfoot);
      /* inputs read, outputs written, t3 (input and output of kernel 2) read-write */
      static const char *const kinds[] = {"", "w", "rrww", "mr"};
      const uint8_t *k = mt_trace_launch_kinds(l);
      for (uint32_t j = 0; j < l->nfoot; j++) {
        char c = "?rwm"[k[j]];
        CHECK(c == kinds[x[1]][j], "record %zu: LAUNCH span %u kind '%c', want '%c'", i, j, c, kinds[x[1]][j]);
      }
    } else if (rec->type == MT_TR_NAME) {
      const mt_trace_name_t *n = (const void *)rec;
      static const char *const names[] = {"", "LoadData_A0", "Conv2d_Forward", "Add_MultiGredient"};
      CHECK(n->id == x[1] && n->len == strlen(names[x[1]]) && memcmp(n + 1, names[x[1]], n->len) == 0,
            "record %zu: NAME", i);
    }
    i++;
  }
  CHECK(rc == 0 && i == sizeof want / sizeof want[0], "%zu records, rc %d", i, rc);
  mt_trace_close(rd);
  printf("g10 mini: %zu records as expected\n", i);
  return 0;
}

/* Each bad G10 folder must give exit 2 and FILE:LINE (or FILE) in stderr. */
static int mode_g10_bad(void) {
  struct {
    const char *file, *from, *to, *expect;
  } cases[] = {
      {"interval.config", NULL, NULL, "interval.config: cannot open"},
      {"kernels.config", "Execution Time: 7", "Execution Time: seven", "kernels.config:11:"},
      {"kernels.config", "Input Tensors:\ntensor0", "Input Tensors:\nbogus line\ntensor0", "kernels.config:13:"},
      {"tensors.config", "Size in byte: 4096, Range:4096--8192", "Size in byte: 4096, Range:4096--9999",
       "tensors.config:3:"},
      {"kernels.config", "tensor0 Is weight (global)?: 1", "tensor0 Is weight (global)?: 0",
       "kernels.config:13: tensor0 disagrees"},
      {"interval.config", "Birth: 1, Death: 3.", "Birth: 2, Death: 3.", "kernels.config:17: kernel 1 uses tensor3"},
      {"interval.config", "Death: -1.", "Death: x.", "interval.config:16:"},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    char name[32];
    snprintf(name, sizeof name, "bad%zu", c);
    const char *d = mini_dir(name);
    char p[600];
    snprintf(p, sizeof p, "%s/%s", d, cases[c].file);
    if (!cases[c].from) {
      CHECK(unlink(p) == 0, "unlink %s", p);
    } else {
      const char *src = strcmp(cases[c].file, "tensors.config") == 0   ? MINI_TENSORS
                        : strcmp(cases[c].file, "kernels.config") == 0 ? MINI_KERNELS
                                                                       : MINI_INTERVALS;
      const char *at = strstr(src, cases[c].from);
      CHECK(at, "case %zu: pattern not in the mini workload", c);
      char text[8192];
      snprintf(text, sizeof text, "%.*s%s%s", (int)(at - src), src, cases[c].to, at + strlen(cases[c].from));
      write_file(d, cases[c].file, text);
    }
    const char *o = tmp("stdout"), *e = tmp("stderr");
    int rc = run(o, e, (const char *const[]){"import-g10", d, "-o", tmp("bad.trace"), NULL});
    char *msg = slurp(e);
    CHECK(rc == 2 && strstr(msg, cases[c].expect), "case %zu: exit %d, stderr '%s', expected exit 2 and '%s'", c,
          rc, msg, cases[c].expect);
    CHECK(strchr(msg, '\n') == msg + strlen(msg) - 1, "case %zu: more than one line: %s", c, msg);
    printf("bad G10 case %zu: %s", c, msg);
  }
  return 0;
}

/* ---- synth ---------------------------------------------------------------- */

static uint64_t printed_params(const char *out) {
  const char *p = strstr(out, "parameters: ");
  CHECK(p, "no 'parameters:' in the summary:\n%s", out);
  return strtoull(p + 12, NULL, 10);
}

/* tests/gen/tiny.conf: 2 layers, hidden h = 64, ffn f = 256, vocab 1000,
 * seq 32, learned positions, tied head, LayerNorm, GELU, biases, fp32,
 * micro_batch 2, grad_accum 2. */
static int mode_synth_tiny(const char *conf) {
  const uint64_t h = 64, f = 256, V = 1000, s = 32, L = 2;
  /* per layer: ln1 (2h) + qkv (3h^2 + 3h) + out (h^2 + h) + ln2 (2h) + up (hf + f) + down (fh + h) */
  const uint64_t per_layer = 4 * h * h + 2 * h * f + 9 * h + f; /* 49984 */
  const uint64_t params = L * per_layer + V * h + s * h + 2 * h; /* 166144 */
  /* tensors: per layer 12, wte, wpe, final norm weight and bias */
  const uint64_t ptensors = 12 * L + 4;
  /* launches per micro-batch: embedding, final norm, head, loss forward (4);
   * loss, head dgrad, head wgrad, final norm, embedding backward (5); per
   * layer 10 forward and 14 backward. */
  const uint64_t per_mb = 4 + 5 + L * (10 + 14);
  const uint64_t per_iter = 2 * per_mb + ptensors;
  const char *trace = tmp("tiny.trace");
  char *out = run_ok((const char *const[]){"synth", "--model", conf, "-o", trace, "--iterations", "3", NULL});
  CHECK(printed_params(out) == params, "summary says %" PRIu64 " parameters, expected %" PRIu64,
        printed_params(out), params);
  walk_t w;
  walk(trace, "mt-trace synth", &w);
  CHECK(w.iters == 3, "%" PRIu64 " iterations", w.iters);
  for (int i = 0; i < 3; i++)
    CHECK(w.launches[i] == per_iter, "iteration %d: %" PRIu64 " launches, expected %" PRIu64, i, w.launches[i],
          per_iter);
  CHECK(w.persistent_bytes == 16 * params, "persistent bytes %" PRIu64 ", expected 16 x %" PRIu64,
        w.persistent_bytes, params);
  CHECK(w.persistent_regions == 4 * ptensors, "%" PRIu64 " persistent regions, expected %" PRIu64,
        w.persistent_regions, 4 * ptensors);
  /* Transient tensors per micro-batch: 23 per layer + 10 at the ends. */
  uint64_t per_mb_tensors = 23 * L + 10;
  CHECK(w.freed_regions == 3 * 2 * per_mb_tensors, "%" PRIu64 " frees, expected %" PRIu64, w.freed_regions,
        3 * 2 * per_mb_tensors);
  CHECK(w.nr == w.persistent_regions + w.freed_regions, "allocs and frees do not match");
  CHECK(w.alloc_bytes[1] == w.alloc_bytes[2] && w.alloc_bytes[2] == w.alloc_bytes[3], "iterations differ in bytes");
  /* Access kinds: every transient tensor but the tokens and labels is
   * written once, by the kernel that makes it; with grad_accum 2 each
   * gradient listing is read-write (12 per layer in the backward pass, 5 at
   * the ends: head, final norm, embeddings), and so are Adam's weight, m
   * and v of every parameter tensor (fp32: no master). */
  const uint64_t writes = 3 * 2 * (per_mb_tensors - 2), rws = 3 * (2 * (12 * L + 5) + 3 * ptensors);
  CHECK(w.kind_spans[MT_ACC_WRITE] == writes, "%" PRIu64 " spans written, expected %" PRIu64,
        w.kind_spans[MT_ACC_WRITE], writes);
  CHECK(w.kind_spans[MT_ACC_RW] == rws, "%" PRIu64 " spans read-written, expected %" PRIu64, w.kind_spans[MT_ACC_RW],
        rws);
  CHECK(w.kind_spans[MT_ACC_READ] > w.kind_spans[MT_ACC_WRITE], "%" PRIu64 " spans read", w.kind_spans[MT_ACC_READ]);
  printf("tiny: %" PRIu64 " parameters, %" PRIu64 " launches per iteration, %" PRIu64 " persistent bytes\n", params,
         per_iter, w.persistent_bytes);
  return 0;
}

static int mode_synth_params(const char *conf, double expect, double tol) {
  const char *trace = tmp("model.trace");
  char *out = run_ok((const char *const[]){"synth", "--model", conf, "-o", trace, "--iterations", "2", NULL});
  uint64_t printed = printed_params(out);
  walk_t w;
  walk(trace, "mt-trace synth", &w);
  CHECK(w.persistent_bytes == 16 * printed, "persistent bytes %" PRIu64 " are not 16 x %" PRIu64 " (fp32 Adam)",
        w.persistent_bytes, printed);
  double rel = fabs((double)printed - expect) / expect;
  CHECK(rel <= tol, "%s: %" PRIu64 " parameters, %.2f%% from %.3g (allowed %.1f%%)", conf, printed, rel * 100,
        expect, tol * 100);
  CHECK(w.launches[0] == w.launches[1] && w.launches[0] < 5000, "%" PRIu64 " launches per iteration",
        w.launches[0]);
  printf("%s: %" PRIu64 " parameters (%.2f%% from %.3g), %" PRIu64 " launches per iteration\n", conf, printed,
         rel * 100, expect, w.launches[0]);
  return 0;
}

static int mode_fail(const char *pattern, int argc, char **argv) {
  const char *args[32];
  int n = 0;
  for (int i = 0; i < argc && n < 30; i++) args[n++] = strcmp(argv[i], "@OUT") == 0 ? tmp("fail.trace") : argv[i];
  args[n] = NULL;
  const char *o = tmp("stdout"), *e = tmp("stderr");
  int rc = run(o, e, args);
  char *msg = slurp(e);
  CHECK(rc == 2 && strstr(msg, pattern), "exit %d, stderr '%s', expected exit 2 and '%s'", rc, msg, pattern);
  printf("exit 2: %s", msg);
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: gen_check MT_TRACE MODE ARGS...\n");
    return 1;
  }
  mt_trace = argv[1];
  const char *mode = argv[2];
  if (strcmp(mode, "g10") == 0 && argc == 5) return mode_g10(argv[3], argv[4]);
  if (strcmp(mode, "g10-mini") == 0) return mode_g10_mini();
  if (strcmp(mode, "g10-bad") == 0) return mode_g10_bad();
  if (strcmp(mode, "synth-tiny") == 0 && argc == 4) return mode_synth_tiny(argv[3]);
  if (strcmp(mode, "synth-params") == 0 && argc == 6)
    return mode_synth_params(argv[3], strtod(argv[4], NULL), strtod(argv[5], NULL));
  if (strcmp(mode, "fail") == 0 && argc >= 5) return mode_fail(argv[3], argc - 4, argv + 4);
  fprintf(stderr, "gen_check: bad mode or arguments\n");
  return 1;
}
