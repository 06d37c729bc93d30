/*
 * plan_trace.c - `mt-trace plan --trace T`: the best mtalloc settings for a
 * workload someone recorded (python -m megatrain.record, MT_TRACE, or a
 * synth trace), on a machine that does not exist yet.
 *
 * A trace fixes the model, the batch, checkpointing, where the optimizer
 * runs and every kernel's time: those cannot change without recording
 * again. What can change is how mtalloc runs it, and the search is over
 * exactly that, one knob at a time (coordinate descent: each stage keeps
 * the best value of the stages before it):
 *   A. the paging unit, MT_CHUNK: 2, 8, 32, 128 MiB (at most GPU / 64);
 *   B. prefetching, MT_PREDICTOR and MT_PREFETCH_DEPTH: none, or
 *      correlation looking 4, 8 (stage A's), 16 or 32 launches ahead;
 *   C. only for a trace with host optimizer hand-offs (synth's
 *      optimizer_placement = host): MT_OPTIMIZER_COMPRESSION (none, 8bit,
 *      4bit; the state is the pool's alone, so its format is free) and
 *      how host memory is split between the pager's host tier and the
 *      optimizer's state (1/8, 1/4, 1/2, 3/4 of --host-mem to the state;
 *      what does not fit goes to NVMe).
 * GPU memory is always all of --gpu-mem (more never hurts the pager).
 * D. the runner-up paging unit, prefetching and compression again at the final
 *    settings (until that changes nothing, three rounds at most), so that
 *    each knob's alternative differs from the answer in that knob alone.
 * Each candidate is one `mt-trace replay` of the whole trace; the measured
 * step is its last iteration (a recorded trace has one: its cold start is
 * measured, and the predictor has nothing to learn from).
 *
 * Ideal: the measured iteration's kernel time (the trace's own, e.g. the
 * recorder's roofline), a GPU with memory for everything. With
 * --tokens-per-step the answer is in tokens/s, else in steps/s.
 *
 * Does not fit: the trace's peak of live allocations must fit GPU + host +
 * NVMe; when every replay fails, the last one's message says what is short.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commands.h"
#include "plan.h"

#define WHO "mt-trace plan"
#define MAXT 32

static const char *const KNOB[4] = {"paging unit (MT_CHUNK)", "prefetching (MT_PREDICTOR, MT_PREFETCH_DEPTH)",
                                    "state compression (MT_OPTIMIZER_COMPRESSION)",
                                    "host memory for the optimizer's state"};

typedef struct tcand {
  uint64_t chunk;             /* MT_CHUNK, bytes */
  unsigned depth;             /* MT_PREFETCH_DEPTH; 0: MT_PREDICTOR=none */
  int comp;                   /* -1: the trace's (or no host optimizer) */
  uint64_t opt_mem;           /* host bytes for the optimizer's state (0 without a host optimizer) */
  unsigned stage;             /* the knob it varies (A 0, B 1, C 2) */
  unsigned order;             /* when it was tried: ties go to the earlier */
  /* replay */
  bool failed;
  char why[200];
  double step_s, ideal_s;     /* the measured iteration: simulated, kernels only */
  double busy[R_COUNT];       /* share of the replay's simulated time */
  int bind;
  uint64_t peak_host, peak_nvme, nvme_read, state_bytes;
} tcand_t;

typedef struct tplan {
  const char *trace, *self, *dir;
  const plan_machine_t *m;
  uint64_t tokens;
  bool handoffs;              /* the trace hands gradients to a host optimizer */
  unsigned iterations;        /* the trace's ITER records (1 if none) */
  tcand_t c[MAXT];
  unsigned n;
} tplan_t;

static void describe(const tcand_t *c, char *buf, size_t n) {
  char pf[48], st[96] = "";
  if (c->depth) snprintf(pf, sizeof pf, "correlation, depth %u", c->depth);
  else snprintf(pf, sizeof pf, "none");
  if (c->opt_mem)
    snprintf(st, sizeof st, ", state %s, %.3g GB of host memory for it", c->comp < 0 ? "as traced" : PLAN_COMP[c->comp],
             (double)c->opt_mem / 1e9);
  snprintf(buf, n, "chunk %llu MiB, prefetch %s%s", (unsigned long long)(c->chunk >> 20), pf, st);
}

static int replay(tplan_t *p, tcand_t *c) {
  const plan_machine_t *m = p->m;
  char gpu[32], host[32], om[32], nv[32], pcie[32], rd[32], wr[32], rate[32], ch[32], dp[16];
  snprintf(gpu, sizeof gpu, "%llu", (unsigned long long)m->gpu);
  snprintf(host, sizeof host, "%llu", (unsigned long long)(m->host - c->opt_mem));
  snprintf(om, sizeof om, "%llu", (unsigned long long)c->opt_mem);
  snprintf(nv, sizeof nv, "%llu", (unsigned long long)m->nvme);
  snprintf(pcie, sizeof pcie, "%.0f", m->pcie);
  snprintf(rd, sizeof rd, "%.0f", m->nrd);
  snprintf(wr, sizeof wr, "%.0f", m->nwr);
  snprintf(rate, sizeof rate, "%.6g", m->rate);
  snprintf(ch, sizeof ch, "%llu", (unsigned long long)c->chunk);
  snprintf(dp, sizeof dp, "%u", c->depth ? c->depth : 8);
  const char *args[40] = {p->self, "replay", p->trace, "--gpu-mem", gpu, "--host-mem", host, "--chunk", ch,
                          "--pcie-bw", pcie, "--nvme-read-bw", rd, "--nvme-write-bw", wr,
                          "--host-opt-gparams-per-s", rate, "--predictor", c->depth ? "correlation" : "none",
                          "--prefetch-depth", dp, "--writes", "aware", "--no-belady", "--json"};
  int n = 25;
  /* the NVMe tier behind the pager's host memory, where its staging (a few
   * chunks) is a small part of that memory */
  if (m->host - c->opt_mem >= 64 * c->chunk) {
    args[n++] = "--nvme-mem";
    args[n++] = nv;
  }
  if (p->handoffs) {
    args[n++] = "--host-opt-mem";
    args[n++] = om;
    if (c->comp >= 0) {
      args[n++] = "--state-compression";
      args[n++] = PLAN_COMP[c->comp];
    }
  }
  args[n] = NULL;
  static char out[1 << 16];
  int rc = plan_child(p->self, p->dir, args, out, sizeof out);
  if (rc != 0) {
    c->failed = true;
    plan_last_error(p->dir, c->why, sizeof c->why);
    if (!c->why[0]) snprintf(c->why, sizeof c->why, "mt-trace replay exited %d", rc);
    return rc;
  }
  double sim = plan_num_after(out, "\"sim_s\""), step = plan_last_of(out, "\"iter_sim_s\"");
  double ideal = plan_last_of(out, "\"iter_ideal_s\"");
  if (isnan(step) || isnan(ideal)) step = sim, ideal = plan_num_after(out, "\"ideal_s\""); /* no ITER records */
  if (isnan(sim) || !(sim > 0) || !(step > 0)) {
    c->failed = true;
    snprintf(c->why, sizeof c->why, "the replay simulated no time (a trace without kernels?)");
    return 1;
  }
  c->step_s = step;
  c->ideal_s = ideal;
  c->bind = plan_busy(out, sim, c->busy);
  c->peak_host = (uint64_t)plan_num_after(out, "\"peak_host_bytes\"");
  c->peak_nvme = (uint64_t)plan_num_after(out, "\"peak_nvme_bytes\"");
  c->nvme_read = (uint64_t)plan_num_after(out, "\"bytes_nvme_read\"");
  c->state_bytes = (uint64_t)plan_num_after(out, "\"host_opt_state_bytes\"");
  if (plan_num_after(out, "\"host_opt_handoffs\"") > 0) p->handoffs = true;
  p->iterations = (unsigned)plan_num_after(out, "\"iterations\"");
  return 0;
}

/* Faster first; failed last; on a tie the one that gives the optimizer's
 * state less host memory (the pager keeps the rest), then the one tried
 * first (the simpler). */
static bool better(const tcand_t *a, const tcand_t *b) {
  if (a->failed != b->failed) return !a->failed;
  if (a->failed) return false;
  if (a->step_s < b->step_s * (1 - 1e-9)) return true;
  return a->step_s <= b->step_s * (1 + 1e-9) && a->opt_mem < b->opt_mem;
}

static int best_of(const tplan_t *p) {
  int b = 0;
  for (unsigned i = 1; i < p->n; i++)
    if (better(&p->c[i], &p->c[b])) b = (int)i;
  return b;
}

static int by_step(const void *x, const void *y) {
  const tcand_t *a = x, *b = y;
  return better(a, b) ? -1 : better(b, a) ? 1 : a->order < b->order ? -1 : a->order > b->order;
}

/* Adds a variant of base (unless the same settings were tried) and replays it. */
static void try(tplan_t *p, tcand_t base, unsigned stage, unsigned *done, unsigned total) {
  for (unsigned i = 0; i < p->n; i++) {
    const tcand_t *o = &p->c[i];
    if (o->chunk == base.chunk && o->depth == base.depth && o->comp == base.comp && o->opt_mem == base.opt_mem)
      return;
  }
  if (p->n == MAXT) return;
  tcand_t *c = &p->c[p->n++];
  *c = base;
  c->stage = stage;
  c->order = p->n;
  c->failed = false;
  c->why[0] = '\0';
  replay(p, c);
  mt_progress("plan: replay", ++*done, total);
}

static double rate_of(const tplan_t *p, const tcand_t *c) {
  return p->tokens ? (double)p->tokens / c->step_s : 1.0 / c->step_s;
}

/* A rate for reading: whole numbers from 100 up, else 4 digits. */
static const char *fmt(double v, char *buf, size_t n) {
  snprintf(buf, n, v >= 100 ? "%.0f" : "%.4g", v);
  return buf;
}

static void print_text(const tplan_t *p, uint64_t peak_live) {
  const plan_machine_t *m = p->m;
  const tcand_t *b = &p->c[0];
  const char *unit = p->tokens ? "tokens/s" : "steps/s";
  char d[256];
  describe(b, d, sizeof d);
  printf("plan for the trace %s: peak %.3g GB allocated; GPU %.3g GiB, host %.4g GiB, PCIe %.3g GB/s, "
         "NVMe %.3g/%.3g GB/s%s\n", p->trace, (double)peak_live / 1e9, (double)m->gpu / (1 << 30),
         (double)m->host / (1 << 30), m->pcie / 1e9, m->nrd / 1e9, m->nwr / 1e9,
         p->handoffs ? ", host optimizer" : "");
  printf("  fixed by the trace: the model, batch, checkpointing, optimizer placement, kernel times\n");
  printf("  %u settings replayed (the whole trace each, its last iteration measured)\n", p->n);
  if (p->iterations <= 1)
    printf("  note: the trace has one step, so its cold start is measured (every tensor's first placement)\n"
           "  and the predictor has nothing to learn from: a trace of two or more steps plans better\n");
  printf("best: %s\n", d);
  char r1[32], r2[32];
  printf("  predicted %s %s (step %.4g s), %.1f%% of the ideal (%s %s: the trace's kernels with\n"
         "  memory for everything); binding: %s (busy %.0f%% of the time)%s\n", fmt(rate_of(p, b), r1, sizeof r1),
         unit, b->step_s, 100 * b->ideal_s / b->step_s,
         fmt(p->tokens ? (double)p->tokens / b->ideal_s : 1 / b->ideal_s, r2, sizeof r2), unit, PLAN_RES[b->bind],
         100 * b->busy[b->bind],
         b->busy[b->bind] < 0.5 ? ";\n  nothing is busy half the time: the step waits on transfers one at a time (latency)" : "");
  printf("  busy: GPU %.0f%%, h2d %.0f%%, d2h %.0f%%, NVMe %.0f%%, host optimizer %.0f%%; peak host %.2f GB, "
         "NVMe %.2f GB\n", 100 * b->busy[R_GPU], 100 * b->busy[R_H2D], 100 * b->busy[R_D2H], 100 * b->busy[R_NVME],
         100 * b->busy[R_POOL], (double)b->peak_host / 1e9, (double)b->peak_nvme / 1e9);
  printf("settings:\n  MT_MAX_VRAM=%llu MT_MAX_HOST=%llu MT_CHUNK=%llu MT_PREDICTOR=%s", (unsigned long long)m->gpu,
         (unsigned long long)m->host, (unsigned long long)b->chunk, b->depth ? "correlation" : "none");
  if (b->depth) printf(" MT_PREFETCH_DEPTH=%u", b->depth);
  if (p->handoffs) printf(" MT_OPTIMIZER=host%s%s", b->comp >= 0 ? " MT_OPTIMIZER_COMPRESSION=" : "",
                          b->comp >= 0 ? PLAN_COMP[b->comp] : "");
  if (b->peak_nvme > 0) printf(" MT_OFFLOAD_DIR=<the NVMe drive's folder>");
  printf("\n");
  if (p->handoffs && b->opt_mem >= b->state_bytes)
    printf("  (MT_MAX_HOST holds the host optimizer's state too: %.3g GB of it, all of the state)\n",
           (double)b->opt_mem / 1e9);
  else if (p->handoffs)
    printf("  (MT_MAX_HOST holds the host optimizer's memory too: %.3g GB of it here; the rest of its state,\n"
           "  %.3g GB, goes to MT_OFFLOAD_DIR, streamed through staging buffers at each step)\n",
           (double)b->opt_mem / 1e9, (double)(b->state_bytes - b->opt_mem) / 1e9);
  printf("training flags:\n  as recorded (re-record the trace to change micro-batch, accumulation or checkpointing)\n");
  printf("why the others lose (the best other value of each knob, everything else as above):\n");
  for (unsigned k = 0; k < 4; k++) {
    const tcand_t *o = NULL;
    for (unsigned i = 1; i < p->n && !o; i++) {
      const tcand_t *c = &p->c[i];
      bool same[4] = {c->chunk == b->chunk, c->depth == b->depth, c->comp == b->comp, c->opt_mem == b->opt_mem};
      bool only = !same[k];
      for (unsigned q = 0; q < 4; q++)
        if (q != k && !same[q] && !(k == 2 && q == 3)) only = false; /* a format has its own size */
      if (only) o = c; /* sorted: the first is the best */
    }
    if (!o) continue;
    describe(o, d, sizeof d);
    if (o->failed)
      printf("  %s: %s: its replay failed: %s\n", KNOB[k], d, o->why);
    else if (o->step_s <= b->step_s * (1 + 5e-4)) /* what prints as 0.0% slower */
      printf("  %s: %s: as fast (a tie: the plan keeps %s)\n", KNOB[k], d,
             k == 3 ? "less memory for the state, more for the pager" : "the one tried first, the simpler");
    else
      printf("  %s: %s: %s %s (%.1f%% slower); binding %s (%.0f%%)\n", KNOB[k], d,
             fmt(rate_of(p, o), r1, sizeof r1), unit, 100 * (1 - b->step_s / o->step_s), PLAN_RES[o->bind],
             100 * o->busy[o->bind]);
  }
}

static void print_json(const tplan_t *p, uint64_t peak_live) {
  printf("{\"trace\":\"%s\",\"tokens_per_step\":", p->trace);
  if (p->tokens) printf("%llu", (unsigned long long)p->tokens);
  else printf("null");
  printf(",\"peak_live_bytes\":%llu,\"host_optimizer\":%s,\"replayed\":%u,\"plans\":[",
         (unsigned long long)peak_live, p->handoffs ? "true" : "false", p->n);
  for (unsigned i = 0; i < p->n; i++) {
    const tcand_t *c = &p->c[i];
    printf("%s{\"chunk\":%llu,\"predictor\":\"%s\",\"prefetch_depth\":%u,\"state\":\"%s\",\"host_opt_mem\":%llu,"
           "\"mt_max_host\":%llu,\"failed\":%s", i ? "," : "", (unsigned long long)c->chunk,
           c->depth ? "correlation" : "none", c->depth, !p->handoffs ? "" : c->comp < 0 ? "traced" : PLAN_COMP[c->comp],
           (unsigned long long)c->opt_mem, (unsigned long long)p->m->host, c->failed ? "true" : "false");
    if (c->failed) {
      printf(",\"why\":\"");
      for (const char *s = c->why; *s; s++)
        if (*s == '"' || *s == '\\') printf("\\%c", *s);
        else if ((unsigned char)*s >= 0x20) putchar(*s);
      printf("\"}");
      continue;
    }
    printf(",\"step_s\":%.6f,\"ideal_step_s\":%.6f,\"steps_per_s\":%.6f,\"tokens_per_s\":", c->step_s, c->ideal_s,
           1 / c->step_s);
    if (p->tokens) printf("%.3f", (double)p->tokens / c->step_s);
    else printf("null");
    printf(",\"pct_of_ideal\":%.2f,\"binding\":\"%s\",\"busy_gpu\":%.4f,\"busy_h2d\":%.4f,\"busy_d2h\":%.4f,"
           "\"busy_nvme\":%.4f,\"busy_host_opt\":%.4f,\"peak_host_bytes\":%llu,\"peak_nvme_bytes\":%llu,"
           "\"host_opt_state_bytes\":%llu}", 100 * c->ideal_s / c->step_s, PLAN_RES[c->bind], c->busy[R_GPU],
           c->busy[R_H2D], c->busy[R_D2H], c->busy[R_NVME], c->busy[R_POOL], (unsigned long long)c->peak_host,
           (unsigned long long)c->peak_nvme, (unsigned long long)c->state_bytes);
  }
  printf("]}\n");
}

int plan_trace(const char *trace, const plan_machine_t *m, uint64_t tokens, int only_comp, bool json) {
  static tplan_t p;
  memset(&p, 0, sizeof p);
  p.trace = trace;
  p.m = m;
  p.tokens = tokens;
  if (access(trace, R_OK) != 0) {
    fprintf(stderr, WHO ": %s: cannot open: %s\n", trace, strerror(errno));
    return 2;
  }
  static char self[4096];
  char dir[] = "/tmp/mt-plan.XXXXXX";
  if (plan_setup(self, sizeof self, dir) != 0) return 1;
  p.self = self;
  p.dir = dir;
  int rc = 0;

  /* summary reads the whole trace: a corrupt or truncated one is its
   * message (with the byte offset), before any replay */
  static char out[1 << 16];
  const char *sargs[] = {self, "summary", trace, "--json", NULL};
  int src = plan_child(self, dir, sargs, out, sizeof out);
  double launches = plan_num_after(out, "\"launches\""), peak = plan_num_after(out, "\"peak_gpu_bytes\"");
  if (src != 0 || isnan(launches) || isnan(peak)) {
    char why[300];
    plan_last_error(dir, why, sizeof why);
    fprintf(stderr, WHO ": %s is not a trace mt-trace can read: %s\n", trace, why[0] ? why : "no summary");
    rc = 2;
    goto out;
  }
  if (launches == 0) {
    fprintf(stderr, WHO ": %s has no kernel launches: nothing to plan\n", trace);
    rc = 2;
    goto out;
  }
  uint64_t peak_live = (uint64_t)peak;
  double have = (double)m->gpu + (double)m->host + (double)m->nvme;
  if (peak > have) {
    fprintf(stderr, WHO ": does not fit: the trace has %.3g GB allocated at its peak, GPU + host + NVMe hold "
            "%.3g GB: %.3g GB short (--gpu-mem, --host-mem, --nvme-mem)\n", peak / 1e9, have / 1e9,
            (peak - have) / 1e9);
    rc = 1;
    goto out;
  }

  /* how many replays at most: A, the probe redone, B, C and D (the bar's total) */
  uint64_t chunks[4];
  unsigned nch = 0;
  for (uint64_t c = 2ull << 20; c <= 128ull << 20 && nch < 4; c *= 4)
    if (c == 2ull << 20 || c <= m->gpu / 64) chunks[nch++] = c;
  unsigned done = 0, total = nch + 4 + 1 + 3 * 4 + 9;

  /* A: the paging unit, with the library's default prefetching */
  uint64_t opt0 = 0;          /* the state's host memory in stages A and B */
  for (unsigned i = 0; i < nch; i++) {
    tcand_t c = {.chunk = chunks[i], .depth = 8, .comp = opt0 ? (only_comp >= 0 ? only_comp : 0) : -1,
                 .opt_mem = opt0};
    try(&p, c, 0, &done, total);
    if (i == 0 && p.handoffs && opt0 == 0) {
      /* the first replay found hand-offs: give the state up to half of host
       * memory from now on, and redo this one so that all compare alike */
      opt0 = m->host / 2;
      if (!p.c[0].failed && p.c[0].state_bytes && p.c[0].state_bytes < opt0) opt0 = p.c[0].state_bytes;
      p.n = 0;
      c.opt_mem = opt0;
      c.comp = only_comp >= 0 ? only_comp : 0; /* full precision unless stage C finds better */
      try(&p, c, 0, &done, total);
    }
  }
  if (!p.handoffs && only_comp >= 0)
    fprintf(stderr, WHO ": note: --state-compression does not apply: the trace has no host optimizer hand-offs\n");
  tcand_t best = p.c[best_of(&p)];
  /* B: prefetching */
  static const unsigned depths[] = {0, 4, 16, 32};
  for (unsigned i = 0; i < 4; i++) {
    tcand_t c = best;
    c.depth = depths[i];
    try(&p, c, 1, &done, total);
  }
  best = p.c[best_of(&p)];
  /* C: the optimizer's state format and its share of host memory; a share
   * past the state's size is the state's size (the rest goes to the pager) */
  if (p.handoffs) {
    static const double share[] = {0.5, 0.125, 0.25, 0.75};
    for (int cm = 0; cm < 3; cm++) {
      if (only_comp >= 0 && cm != only_comp) continue;
      uint64_t state = 0;
      for (unsigned i = 0; i < 4; i++) {
        tcand_t c = best;
        c.comp = cm;
        c.opt_mem = (uint64_t)((double)m->host * share[i]);
        if (state && c.opt_mem > state) c.opt_mem = state;
        try(&p, c, 2, &done, total);
        for (unsigned k = 0; k < p.n && !state; k++)
          if (p.c[k].comp == cm && !p.c[k].failed) state = p.c[k].state_bytes;
      }
    }
  }
  /* D: each stage chose under the others' earlier values: the runner-up
   * of each knob, again at the best settings so far, until that changes
   * nothing, so that each knob's alternative differs in it alone */
  for (unsigned round = 0; round < 3; round++) {
    best = p.c[best_of(&p)];
    unsigned before = p.n;
    for (unsigned k = 0; k < 3; k++) {
      const tcand_t *o = NULL;
      for (unsigned i = 0; i < p.n; i++) {
        const tcand_t *c = &p.c[i];
        bool differs = k == 0 ? c->chunk != best.chunk : k == 1 ? c->depth != best.depth : c->comp != best.comp;
        if (c->stage == k && differs && (!o || better(c, o))) o = c;
      }
      if (!o) continue;
      tcand_t c = best;
      if (k == 0) c.chunk = o->chunk;
      else if (k == 1) c.depth = o->depth;
      else c.comp = o->comp, c.opt_mem = o->opt_mem;
      try(&p, c, k, &done, total);
    }
    if (p.n == before) break; /* each knob's runner-up was already tried at the best settings */
  }
  mt_progress_end();
  qsort(p.c, p.n, sizeof p.c[0], by_step);
  if (p.c[0].failed) {
    fprintf(stderr, WHO ": does not fit: none of the %u settings runs the trace in GPU %.3g GiB, host %.4g GiB, "
            "NVMe %.4g GiB; the replay says: %s\n", p.n, (double)m->gpu / (1 << 30), (double)m->host / (1 << 30),
            (double)m->nvme / (1 << 30), p.c[0].why);
    rc = 1;
    goto out;
  }
  if (json) print_json(&p, peak_live);
  else print_text(&p, peak_live);
out:
  mt_progress_end();
  {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, WHO ": could not remove %s\n", dir);
  }
  return rc;
}
