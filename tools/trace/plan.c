/*
 * plan.c - `mt-trace plan`: what a machine can train, and how fast, before
 * anyone buys it.
 *
 * The search. Candidates are micro-batch (1, 2, 4, 8, 16), gradient
 * accumulation (1, or as many micro-batches as --max-step-tokens allows, at
 * most MAX_GA),
 * activation checkpointing (off, or every layer), optimizer placement
 * (host, gpu) and state compression (none, 8bit, 4bit, or only the one
 * --state-compression names). Each is written by `mt-trace synth` (this
 * executable, as a child), which gives its exact kernel time (roofline),
 * parameters, persistent and peak transient bytes. An analytic pass then
 * bounds each candidate's step time by its busiest resource, assuming
 * perfect overlap:
 *   GPU compute   the kernels' ideal time (recomputation included);
 *   h2d, d2h      bytes / --pcie-bw: the weights fetched twice per
 *                 micro-batch (forward, backward) when weights and
 *                 activations do not fit the GPU, else once per step;
 *                 activations past the GPU both ways; with the host
 *                 optimizer the gradients once per step (d2h), with
 *                 accumulation that does not fit, twice more per
 *                 micro-batch; the GPU optimizer's state that does not fit,
 *                 both ways once per step;
 *   NVMe          the host optimizer's state past host memory, read and
 *                 written once per step; what the pager must spill past
 *                 host memory, both ways per micro-batch;
 *   host pool     parameters / (--host-opt-gparams-per-s scaled by bytes
 *                 moved, hostopt.c).
 * The --top best by that bound, the best of each (checkpointing,
 * micro-batch) pair first, are replayed (`mt-trace replay`, the
 * library's pager, predictor and policies on the virtual clock: chunks
 * from 2 to 256 MiB (chunk_for), access-aware writes, --iterations
 * steps, the last one measured; each twice, with the correlation
 * predictor and with demand paging, see replay), and the fastest replay
 * wins; the winner is replayed again with other settings (tune: with
 * each predictor, the context one included, MT_POLICY=lru, MT_HANDOFF on
 * and off, and no run-ahead bound, MT_RUNAHEAD=0; with a predictor,
 * next-use spills, MT_SPILL_POLICY=nextuse, where the trace spills to
 * NVMe), and keeps the fastest. Host memory
 * is split: the pager's host tier gets the weights (plus spill and
 * accumulated gradients) and a margin, the optimizer's state the rest;
 * what does not fit goes through NVMe (--nvme-mem of it).
 *
 * Ideal. The compute-bound ideal is the step's tokens over the kernel time
 * of the same micro-batches without recomputation (checkpointing off) and
 * without an optimizer on the GPU: a GPU with memory for everything at
 * --gpu-tflops. Recomputation therefore counts against a configuration.
 *
 * Binding resource: of GPU compute, host link (h2d or d2h), NVMe and host
 * optimizer, the one busy the largest share of the replayed time.
 *
 * Single-threaded; children run one at a time.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commands.h"
#include "hostopt.h"
#include "internal.h"
#include "plan.h"

#define WHO "mt-trace plan"
#define MAXC 128
#define MAX_GA 64             /* the most micro-batches per step searched */

typedef struct cand {
  unsigned mb, ga, ckpt, comp;
  bool host;
  /* from synth */
  double ideal_s, ideal0_s;   /* per step: the trace's kernels; the compute-bound ideal */
  uint64_t params, dtype, persistent, transient, state;
  uint64_t tokens;            /* per step */
  uint64_t act;               /* bytes of one activation (micro-batch tokens x hidden x dtype) */
  /* analytic */
  double bound_s;            /* the analytic step time: its busiest resource, perfect overlap */
  int bound_res;              /* the resource that sets bound_s */
  uint64_t pager_host, opt_host, state_nvme;
  bool spills;                /* the pager's host tier needs NVMe behind it */
  /* replay */
  bool replayed, failed;
  char why[160];              /* a failed replay's last message */
  double step_s, busy[5];     /* per resource, share of the replayed time */
  int bind;
  uint64_t peak_host, peak_nvme;
  const char *pred;           /* MT_PREDICTOR: correlation, or none where demand paging replayed
                              * faster; tune() may pick context for the winner */
  double wall_s;              /* how long its (last) replay ran */
  char cut[512];              /* tune(): the settings whose replays were cut off ("" none) */
  double cut_s;               /* after this many seconds */
  const char *policy;         /* MT_POLICY, MT_HANDOFF: the library's defaults, or (the winner */
  const char *handoff;        /* only, tune()) a value that replayed faster */
  const char *spill;          /* MT_SPILL_POLICY, likewise */
  const char *runahead;       /* MT_RUNAHEAD, likewise ("24", the default, or "0") */
} cand_t;


typedef struct plan {
  const char *model, *self, *dir;
  uint64_t gpu, host, nvme, seq, max_tokens;
  double pcie, nrd, nwr, tflops, rate;
  int only_comp;              /* -1: any */
  unsigned top, iterations;
  cand_t c[MAXC];
  unsigned n;
} plan_t;

static void usage(FILE *f) {
  fprintf(f,
          "usage: mt-trace plan --model CONF --gpu-mem SIZE --host-mem SIZE --pcie-bw B\n"
          "                     --nvme-read-bw B --nvme-write-bw B [--gpu-tflops T]\n"
          "                     [--host-opt-gparams-per-s P] [options] [--json]\n"
          "       mt-trace plan --trace TRACE --gpu-mem SIZE --host-mem SIZE --pcie-bw B\n"
          "                     --nvme-read-bw B --nvme-write-bw B [--tokens-per-step N]\n"
          "                     [--host-opt-gparams-per-s P] [--state-compression C] [--json]\n"
          "\n"
          "Finds the fastest way to train the model CONF (tools/models/*.conf) on one GPU\n"
          "of SIZE memory with SIZE host memory and an NVMe drive: searches micro-batch,\n"
          "gradient accumulation, activation checkpointing, optimizer placement and state\n"
          "compression, bounds each by its busiest resource, replays the best few through\n"
          "mtalloc's pager on the virtual clock (mt-trace replay; each with the correlation\n"
          "predictor and with demand paging, MT_PREDICTOR; the winner also with the\n"
          "context predictor and, with each predictor, with LRU eviction, the handoff on\n"
          "and off, next-use spills and no run-ahead bound: MT_POLICY, MT_HANDOFF,\n"
          "MT_SPILL_POLICY, MT_RUNAHEAD), and prints\n"
          "the winner as MT_* settings and training flags, its tokens/s and share of the\n"
          "compute-bound ideal, the resource that binds, and why the next best lose. A\n"
          "progress bar goes to stderr when it is a terminal.\n"
          "\n"
          "  --model CONF            the model (required)\n"
          "  --gpu-mem SIZE          GPU memory mtalloc may use (MT_MAX_VRAM; required)\n"
          "  --host-mem SIZE         host memory for the pager and the optimizer (required)\n"
          "  --pcie-bw B             host link, each direction, bytes/s (required)\n"
          "  --nvme-read-bw B, --nvme-write-bw B\n"
          "                          the NVMe drive (RAID), bytes/s (required)\n"
          "  --nvme-mem SIZE         NVMe space for spills and state (default 8T)\n"
          "  --gpu-tflops T          sustained matmul TFLOP/s (default 400)\n"
          "  --host-opt-gparams-per-s P\n"
          "                          host optimizer with FP32 state, 1e9 params/s (default 10)\n"
          "  --seq N                 sequence length (default: the config's)\n"
          "  --max-step-tokens N     tokens per optimizer step at most (default 1000000)\n"
          "  --state-compression none|8bit|4bit\n"
          "                          only this compression (default: search all three)\n"
          "  --top N                 candidates to replay (default 10)\n"
          "  --iterations N          steps per replay; the last is measured (default 2)\n"
          "  --json                  one JSON object: the replayed candidates, fastest first\n"
          "  -h, --help              this help\n"
          "\n"
          "With --trace TRACE (python -m megatrain.record, MT_TRACE or mt-trace synth) the\n"
          "model, batch, accumulation, checkpointing, optimizer placement and kernel times\n"
          "are the trace's; the search is over what mtalloc can change without recording\n"
          "again: the paging unit (MT_CHUNK 2, 8, 32, 128 MiB), prefetching (MT_PREDICTOR\n"
          "none or correlation, MT_PREFETCH_DEPTH 4, 8, 16, 32) and, for a trace that hands\n"
          "gradients to the host optimizer, its state compression and the split of host\n"
          "memory between the pager and that state. Each setting replays the whole trace;\n"
          "the last iteration is measured, against the trace's own kernel time (ideal).\n"
          "  --trace TRACE           plan from this trace instead of --model\n"
          "  --tokens-per-step N     the trace's tokens per step: answers in tokens/s (default:\n"
          "                          steps/s); --gpu-tflops, --seq, --max-step-tokens, --top\n"
          "                          and --iterations do not apply\n"
          "\n"
          "SIZE takes binary suffixes (128G = 128 GiB), B decimal ones (55G = 55e9).\n"
          "Exit: 0 a plan, 1 the model does not fit (the message names the short\n"
          "resource and by how much) or a replay failed, 2 bad input.\n");
}

static void trace_path(const plan_t *p, const cand_t *c, bool ideal, char *buf, size_t n) {
  snprintf(buf, n, "%s/mb%u_ga%u_ck%u_%s_%s%s.trace", p->dir, c->mb, c->ga, ideal ? 0 : c->ckpt,
           c->host ? "host" : "gpu", PLAN_COMP[c->comp], ideal ? "_ideal" : "");
}

/* Writes c's trace (and, with ideal, the one that defines the ideal) and
 * reads synth's summary. 0, or the child's failure. */
static int synth(plan_t *p, cand_t *c, bool ideal) {
  char path[512], mb[16], ga[16], ck[16], seq[32], tf[48], it[16];
  trace_path(p, c, ideal, path, sizeof path);
  snprintf(mb, sizeof mb, "%u", c->mb);
  snprintf(ga, sizeof ga, "%u", c->ga);
  snprintf(ck, sizeof ck, "%u", ideal ? 0 : c->ckpt);
  snprintf(seq, sizeof seq, "seq=%llu", (unsigned long long)p->seq);
  snprintf(tf, sizeof tf, "tflops=%.6g", p->tflops);
  snprintf(it, sizeof it, "%u", ideal ? 1 : p->iterations);
  const char *args[40] = {p->self, "synth", "--model", p->model, "-o", path, "--iterations", it,
                          "--micro-batch", mb, "--grad-accum", ga, "--checkpoint", ck, "--set", tf,
                          "--optimizer-placement", ideal || c->host ? "host" : "gpu",
                          "--state-compression", PLAN_COMP[c->comp]};
  int n = 20;
  if (p->seq) {
    args[n++] = "--set";
    args[n++] = seq;
  }
  args[n] = NULL;
  static char out[8192];
  int rc = plan_child(p->self, p->dir, args, out, sizeof out);
  if (rc != 0) return rc < 0 ? 1 : rc;
  double t = plan_num_after(out, "ideal iteration time");
  if (ideal) {
    c->ideal0_s = t;
    return 0;
  }
  c->ideal_s = t;
  c->params = (uint64_t)plan_num_after(out, "parameters");
  c->persistent = (uint64_t)plan_num_after(out, "persistent bytes");
  c->transient = (uint64_t)plan_num_after(out, "peak transient bytes");
  double st = plan_num_after(out, "host optimizer state");
  c->state = isnan(st) ? 0 : (uint64_t)st;
  uint64_t s = p->seq ? p->seq : (uint64_t)plan_num_after(out, "seq");
  c->tokens = (uint64_t)c->mb * c->ga * s;
  const char *d = strstr(out, "16-bit weights");
  c->dtype = d ? 2 : 4;
  c->act = (uint64_t)c->mb * s * (uint64_t)plan_num_after(out, "hidden") * c->dtype;
  return isnan(t) ? 1 : 0;
}

/* The analytic bound (see the opening comment) and the host memory split. */
static void bound(const plan_t *p, cand_t *c) {
  double W = (double)c->params * (double)c->dtype, mb = c->ga;
  double gpu = (double)p->gpu * 0.95, t[R_COUNT] = {0};
  bool fits = (double)c->persistent + (double)c->transient <= gpu;
  double spill = fmax(0, (double)c->transient - gpu); /* activations that cannot stay */
  double h2d = 0, d2h = 0, nvme = 0;
  if (c->host) {
    h2d = fits ? W : mb * 2 * W;
    d2h = W;
    if (c->ga > 1 && !fits) h2d += mb * W, d2h += mb * W;
  } else if (!fits) {
    h2d = mb * 2 * W + ((double)c->persistent - W);
    d2h = (double)c->persistent - W;
  }
  h2d += mb * spill;
  d2h += mb * spill;
  /* the pager's host tier: the weights (3% margin), spilled activations,
   * gradients accumulated off the GPU; or, with the GPU optimizer, all it pages */
  double pager = c->host ? W * 1.03 + spill + (c->ga > 1 && !fits ? W : 0) : (double)c->persistent + spill;
  double host = (double)p->host;
  pager += fmin(4.0 * (1 << 30), 0.05 * host); /* staging and headroom */
  if (pager > host) {
    nvme += mb * 2 * (pager - host) / p->nrd; /* the pager's own spills, roughly both ways */
    pager = host;
    c->spills = true;
  }
  c->pager_host = (uint64_t)pager;
  c->opt_host = c->host ? (uint64_t)(host - pager) : 0;
  c->state_nvme = c->host && c->state > c->opt_host ? c->state - c->opt_host : 0;
  nvme += (double)c->state_nvme / p->nrd + (double)c->state_nvme / p->nwr;
  t[R_GPU] = c->ideal_s;
  t[R_H2D] = h2d / p->pcie;
  t[R_D2H] = d2h / p->pcie;
  t[R_NVME] = nvme;
  if (c->host) {
    double rate = p->rate * 1e9 * 28.0 / hostopt_moved_per_param((unsigned)c->dtype, c->comp);
    t[R_POOL] = (double)c->params / rate;
  }
  c->bound_s = 0;
  for (int r = 0; r < R_COUNT; r++)
    if (t[r] > c->bound_s) c->bound_s = t[r], c->bound_res = r;
}

/* The paging unit: a power of two from 2 MiB to 256 MiB, at most 1/64 of
 * the GPU and a quarter of one activation tensor (act), so that rounding
 * tensors up to whole chunks wastes little (large chunks keep a 100B replay
 * to seconds; small GPUs and small tensors need small ones). */
static uint64_t chunk_for(uint64_t gpu, uint64_t act) {
  uint64_t c = 2ull << 20;
  while (c < (256ull << 20) && c * 2 <= gpu / 64 && c * 2 <= act / 4) c *= 2;
  return c;
}

/* The NVMe tier behind the pager's host memory, where its staging (a few
 * chunks) is a small part of that memory. */
static bool tiered(const plan_t *p, const cand_t *c) {
  return c->spills || c->pager_host >= 64 * chunk_for(p->gpu, c->act);
}

/* One replay of c's trace with MT_PREDICTOR=pred and c's policy, handoff
 * and spill order; fills c's replay fields (step_s < 0: the replay failed,
 * why in c->why). */
static void replay_with(plan_t *p, cand_t *c, const char *pred, double limit_s) {
  char path[512], gpu[32], host[32], om[32], nv[32], pcie[32], rd[32], wr[32], rate[32], ch[32];
  trace_path(p, c, false, path, sizeof path);
  snprintf(gpu, sizeof gpu, "%llu", (unsigned long long)p->gpu);
  snprintf(host, sizeof host, "%llu", (unsigned long long)c->pager_host);
  snprintf(om, sizeof om, "%llu", (unsigned long long)c->opt_host);
  snprintf(nv, sizeof nv, "%llu", (unsigned long long)p->nvme);
  snprintf(pcie, sizeof pcie, "%.0f", p->pcie);
  snprintf(rd, sizeof rd, "%.0f", p->nrd);
  snprintf(wr, sizeof wr, "%.0f", p->nwr);
  snprintf(rate, sizeof rate, "%.6g", p->rate);
  snprintf(ch, sizeof ch, "%llu", (unsigned long long)chunk_for(p->gpu, c->act));
  bool tier = tiered(p, c);
  const char *args[] = {p->self, "replay", path, "--gpu-mem", gpu, "--host-mem", host, "--host-opt-mem", om,
                        "--chunk", ch, "--pcie-bw", pcie, "--nvme-read-bw", rd,
                        "--nvme-write-bw", wr, "--host-opt-gparams-per-s", rate, "--predictor", pred,
                        "--writes", "aware", "--no-belady", "--json", "--policy", c->policy,
                        "--handoff", c->handoff, "--spill-policy", c->spill, "--runahead", c->runahead,
                        tier ? "--nvme-mem" : NULL, nv, NULL};
  static char out[1 << 16];
  int rc = plan_child_timed(p->self, p->dir, args, out, sizeof out, limit_s, &c->wall_s);
  c->step_s = -1;
  if (rc == -2) {
    snprintf(c->why, sizeof c->why, "the replay ran past %.0f s", limit_s);
    return;
  }
  if (rc != 0) {
    plan_last_error(p->dir, c->why, sizeof c->why);
    return;
  }
  double sim = plan_num_after(out, "\"sim_s\""), step = plan_last_of(out, "\"iter_sim_s\"");
  if (isnan(sim) || isnan(step) || sim <= 0) {
    snprintf(c->why, sizeof c->why, "the replay printed no step time");
    return;
  }
  c->step_s = step;
  c->bind = plan_busy(out, sim, c->busy);
  c->peak_host = (uint64_t)plan_num_after(out, "\"peak_host_bytes\"");
  c->peak_nvme = (uint64_t)plan_num_after(out, "\"peak_nvme_bytes\"");
}

/* c replayed with the correlation predictor (the library's default) and
 * with demand paging (MT_PREDICTOR=none); the faster one stays. The
 * predictor wins on the G10 workloads, but not everywhere: on the 100B
 * row of tools/bench/plan_table.py the best demand-paged candidate
 * replayed at 424 tokens/s, the best with the predictor at 385. */
static int replay(plan_t *p, cand_t *c) {
  c->replayed = true;
  c->policy = "nextuse";
  c->handoff = "auto";
  c->spill = "auto";
  c->runahead = "24";
  c->pred = "correlation";
  replay_with(p, c, "correlation", 0);
  cand_t d = *c;
  replay_with(p, &d, "none", 0);
  if (d.step_s > 0 && (c->step_s <= 0 || d.step_s < c->step_s)) {
    *c = d;
    c->pred = "none";
  }
  c->failed = c->step_s <= 0;
  return 0;
}

/* The winner's MT_PREDICTOR, MT_POLICY, MT_HANDOFF and MT_SPILL_POLICY:
 * other values replayed (replay() measured correlation and none at the
 * defaults only), the fastest kept. Only the winner: for every candidate
 * it would be fifteen more replays each, and the defaults are what the G10
 * table measured best (README). Where the defaults lose: on the 7B row of
 * plan_table.py the candidate demand-paged with the handoff on was 4
 * tokens/s faster than its predictor at the defaults; the context
 * predictor (checkpointed layers told apart) with its read-ahead took the
 * 100B candidate from 73.80 s a step (demand paging) to 71.76; next-use
 * spills (auto is LRU with the read-ahead: SENet154 loses 4.9 points of
 * ideal with next-use spills) win elsewhere. */
static void tune(plan_t *p, cand_t *c) {
  /* each predictor with each setting; the defaults with correlation and
   * none were replayed already (replay()), next-use spills need the
   * read-ahead (a predictor, and an NVMe tier: tiered()) */
  static const char *const preds[] = {"correlation", "none", "context"};
  static const struct { const char *policy, *handoff, *spill, *runahead, *name; } var[] = {
      {"nextuse", "auto", "auto", "24", ""},
      {"lru", "auto", "auto", "24", "MT_POLICY=lru"},
      {"nextuse", "on", "auto", "24", "MT_HANDOFF=on"},
      {"nextuse", "off", "auto", "24", "MT_HANDOFF=off"},
      {"nextuse", "auto", "nextuse", "24", "MT_SPILL_POLICY=nextuse"},
      {"nextuse", "auto", "auto", "0", "MT_RUNAHEAD=0"}};
  /* A setting can make the replay itself slow: with the handoff on the
   * host is never held back by a freed buffer, and on the virtual clock
   * (no launch queue to fill) it runs a whole trace ahead with every
   * freed region pending (7B, 64 micro-batches: 349 s before the pending
   * walk was gated, alloc.c; 0.7 s now). Such a replay is cut off and its
   * setting not chosen, though its virtual step might have been faster:
   * the plan says so. */
  double limit = fmax(30, 4 * c->wall_s);
  cand_t best = *c;
  for (size_t i = 0; i < sizeof preds / sizeof preds[0]; i++)
    for (size_t v = 0; v < sizeof var / sizeof var[0]; v++) {
      bool other = strcmp(preds[i], "correlation") != 0; /* named in the settings */
      if (v == 0 && strcmp(preds[i], "context") != 0) continue;
      if (strcmp(var[v].spill, "auto") != 0 && (strcmp(preds[i], "none") == 0 || !tiered(p, c))) continue;
      cand_t t = *c;
      t.pred = preds[i];
      t.policy = var[v].policy;
      t.handoff = var[v].handoff;
      t.spill = var[v].spill;
      t.runahead = var[v].runahead;
      replay_with(p, &t, t.pred, limit);
      if (t.step_s <= 0 && t.wall_s >= limit) {
        size_t k = strlen(c->cut);
        snprintf(c->cut + k, sizeof c->cut - k, "%s%s%s%s%s", k ? ", " : "", other ? "MT_PREDICTOR=" : "",
                 other ? preds[i] : "", other && v > 0 ? " " : "", var[v].name);
        c->cut_s = limit;
      }
      if (t.step_s > 0 && t.step_s < best.step_s) best = t;
    }
  memcpy(best.cut, c->cut, sizeof best.cut);
  best.cut_s = c->cut_s;
  *c = best;
}

static double tps(const cand_t *c) { return c->replayed && !c->failed ? (double)c->tokens / c->step_s : 0; }
static double ideal_tps(const cand_t *c) { return (double)c->tokens / c->ideal0_s; }

static int by_bound(const void *a, const void *b) {
  const cand_t *x = a, *y = b;
  double tx = (double)x->tokens / x->bound_s, ty = (double)y->tokens / y->bound_s;
  return tx > ty ? -1 : tx < ty;
}

static int by_replay(const void *a, const void *b) {
  double x = tps(a), y = tps(b);
  return x > y ? -1 : x < y;
}

/* Reorders the bound-sorted candidates so that the first ones are the best
 * bound of each (checkpointing, micro-batch) pair, best first, then the
 * rest in bound order: the bound assumes perfect overlap and cannot see
 * the pager's stalls, which differ most with checkpointing and the
 * micro-batch's size, so the replays must see each of those. */
static void diversify(plan_t *p) {
  static cand_t tmp[MAXC];
  static bool used[MAXC];
  bool seen[2][32] = {{false}};
  unsigned k = 0;
  memset(used, 0, sizeof used);
  for (unsigned i = 0; i < p->n; i++) {
    unsigned side = p->c[i].ckpt != 0, mb = p->c[i].mb < 32 ? p->c[i].mb : 31;
    if (seen[side][mb]) continue;
    seen[side][mb] = true;
    used[i] = true;
    tmp[k++] = p->c[i];
  }
  for (unsigned i = 0; i < p->n; i++)
    if (!used[i]) tmp[k++] = p->c[i];
  memcpy(p->c, tmp, p->n * sizeof tmp[0]);
}

static void describe(const cand_t *c, char *buf, size_t n) {
  int k = snprintf(buf, n, "micro_batch %u x grad_accum %u (%llu tokens/step), checkpoint %s, optimizer %s, "
                   "state %s, predictor %s", c->mb, c->ga, (unsigned long long)c->tokens,
                   c->ckpt ? "every layer" : "off", c->host ? "host" : "gpu", PLAN_COMP[c->comp],
                   c->pred);
  if (k > 0 && (size_t)k < n && (strcmp(c->policy, "nextuse") != 0 || strcmp(c->handoff, "auto") != 0))
    k += snprintf(buf + k, n - (size_t)k, ", policy %s, handoff %s", c->policy, c->handoff);
  if (k > 0 && (size_t)k < n && strcmp(c->spill, "auto") != 0)
    k += snprintf(buf + k, n - (size_t)k, ", spill order %s", c->spill);
  if (k > 0 && (size_t)k < n && strcmp(c->runahead, "24") != 0)
    snprintf(buf + k, n - (size_t)k, ", run-ahead %s", c->runahead);
}

static void print_text(const plan_t *p, unsigned replayed) {
  const cand_t *b = &p->c[0];
  char d[256];
  describe(b, d, sizeof d);
  printf("plan for %s: %.4g parameters; GPU %.3g GiB, host %.4g GiB, PCIe %.3g GB/s, NVMe %.3g/%.3g GB/s, "
         "%.4g TFLOP/s, host optimizer %.3g G params/s (FP32)\n",
         p->model, (double)b->params, (double)p->gpu / (1 << 30), (double)p->host / (1 << 30), p->pcie / 1e9,
         p->nrd / 1e9, p->nwr / 1e9, p->tflops, p->rate);
  printf("  %u candidates, %u replayed (%u steps each, the last measured)\n", p->n, replayed, p->iterations);
  printf("best: %s\n", d);
  printf("  predicted %.0f tokens/s, %.1f%% of the compute-bound ideal (%.0f tokens/s: its kernels without\n"
         "  recomputation at %.4g TFLOP/s); binding: %s (busy %.0f%% of the time)\n",
         tps(b), 100 * tps(b) / ideal_tps(b), ideal_tps(b), p->tflops, PLAN_RES[b->bind], 100 * b->busy[b->bind]);
  printf("  busy: GPU %.0f%%, h2d %.0f%%, d2h %.0f%%, NVMe %.0f%%, host optimizer %.0f%%; peak host %.1f GB, "
         "NVMe %.1f GB\n", 100 * b->busy[R_GPU], 100 * b->busy[R_H2D], 100 * b->busy[R_D2H], 100 * b->busy[R_NVME],
         100 * b->busy[R_POOL], (double)b->peak_host / 1e9, (double)b->peak_nvme / 1e9);
  printf("settings:\n  MT_MAX_VRAM=%llu MT_MAX_HOST=%llu MT_CHUNK=%llu MT_PREDICTOR=%s",
         (unsigned long long)p->gpu, (unsigned long long)(b->pager_host + (b->host ? b->opt_host : 0)),
         (unsigned long long)chunk_for(p->gpu, b->act), b->pred);
  if (strcmp(b->policy, "nextuse") != 0) printf(" MT_POLICY=%s", b->policy);
  if (strcmp(b->handoff, "auto") != 0) printf(" MT_HANDOFF=%s", b->handoff);
  if (strcmp(b->spill, "auto") != 0) printf(" MT_SPILL_POLICY=%s", b->spill);
  if (strcmp(b->runahead, "24") != 0) printf(" MT_RUNAHEAD=%s", b->runahead);
  if (b->host) printf(" MT_OPTIMIZER=host MT_OPTIMIZER_COMPRESSION=%s", PLAN_COMP[b->comp]);
  if (b->spills || b->state_nvme) printf(" MT_OFFLOAD_DIR=<the NVMe RAID's folder>");
  printf("\n");
  if (b->cut[0])
    printf("  (not measured: %s, whose replay ran past %.0f s and was stopped)\n", b->cut, b->cut_s);
  if (b->host)
    printf("  (MT_MAX_HOST holds the host optimizer's memory too: %.1f GB of it here; the state that does\n"
           "  not fit goes to MT_OFFLOAD_DIR, streamed through staging buffers at each step)\n",
           (double)b->opt_host / 1e9);
  printf("training flags:\n  micro-batch %u, gradient accumulation %u, sequence %llu, %s\n", b->mb, b->ga,
         (unsigned long long)(b->tokens / b->mb / b->ga),
         b->ckpt ? "activation checkpointing on every layer (recompute in backward)" : "no activation checkpointing");
  printf("next best:\n");
  for (unsigned i = 1; i < replayed && i < 4; i++) {
    const cand_t *c = &p->c[i];
    describe(c, d, sizeof d);
    if (c->failed)
      printf("  %s: its replay failed: %s\n", d, c->why);
    else
      printf("  %s: %.0f tokens/s (%.1f%% slower), %.1f%% of its ideal; binding %s (%.0f%%)\n", d, tps(c),
             100 * (1 - tps(c) / tps(b)), 100 * tps(c) / ideal_tps(c), PLAN_RES[c->bind], 100 * c->busy[c->bind]);
  }
}

static void print_json(const plan_t *p, unsigned replayed) {
  printf("{\"model\":\"%s\",\"candidates\":%u,\"replayed\":%u,\"plans\":[", p->model, p->n, replayed);
  for (unsigned i = 0; i < replayed; i++) {
    const cand_t *c = &p->c[i];
    printf("%s{\"micro_batch\":%u,\"grad_accum\":%u,\"checkpoint\":%u,\"optimizer\":\"%s\",\"state\":\"%s\","
           "\"tokens_per_step\":%llu,\"failed\":%s,\"tokens_per_s\":%.3f,\"ideal_tokens_per_s\":%.3f,"
           "\"pct_of_ideal\":%.2f,\"binding\":\"%s\",\"busy_gpu\":%.4f,\"busy_h2d\":%.4f,\"busy_d2h\":%.4f,"
           "\"busy_nvme\":%.4f,\"busy_host_opt\":%.4f,\"peak_host_bytes\":%llu,\"peak_nvme_bytes\":%llu,"
           "\"mt_max_host\":%llu,\"host_opt_mem\":%llu,\"params\":%llu,\"step_s\":%.6f,\"bound_s\":%.6f,"
           "\"bound_binding\":\"%s\",\"predictor\":\"%s\",\"policy\":\"%s\",\"handoff\":\"%s\",\"spill_policy\":\"%s\","
           "\"runahead\":%s,\"not_measured\":\"%s\"}",
           i ? "," : "", c->mb, c->ga, c->ckpt, c->host ? "host" : "gpu", PLAN_COMP[c->comp],
           (unsigned long long)c->tokens, c->failed ? "true" : "false", tps(c), ideal_tps(c),
           100 * tps(c) / ideal_tps(c), PLAN_RES[c->bind], c->busy[R_GPU], c->busy[R_H2D], c->busy[R_D2H],
           c->busy[R_NVME], c->busy[R_POOL], (unsigned long long)c->peak_host, (unsigned long long)c->peak_nvme,
           (unsigned long long)c->pager_host, (unsigned long long)c->opt_host, (unsigned long long)c->params,
           c->step_s, c->bound_s, PLAN_RES[c->bound_res], c->pred, c->policy,
           c->handoff, c->spill, c->runahead, c->cut);
  }
  printf("]}\n");
}

/* Does the model fit at all? The smallest candidate's weights and state
 * must fit host memory and NVMe together, and its peak transient bytes
 * (micro-batch 1, checkpointing) the GPU with room to spare: the pager
 * could page activations, but their peak is what one step keeps for its
 * backward, and paging all of it each step is not a plan). Prints
 * the short resource and returns 1, or 0. */
static int fits(const plan_t *p) {
  const cand_t *best = NULL;
  for (unsigned i = 0; i < p->n; i++) {
    const cand_t *c = &p->c[i];
    if (c->host && c->mb == 1 && c->ckpt && (!best || c->state < best->state)) best = c;
  }
  if (!best) return 0;
  double need = (double)best->params * (double)best->dtype + (double)best->state;
  double have = (double)p->host + (double)p->nvme;
  if (need > have) {
    fprintf(stderr, WHO ": does not fit: weights and the smallest optimizer state need %.3g GB of host memory "
            "and NVMe together, %.3g GB short (--host-mem + --nvme-mem)\n", need / 1e9, (need - have) / 1e9);
    return 1;
  }
  double gneed = (double)best->transient;
  if (gneed > (double)p->gpu) {
    fprintf(stderr, WHO ": does not fit: micro-batch 1 with checkpointing needs %.1f GB of GPU memory for its "
            "activations, %.3g GB short (--gpu-mem)\n", gneed / 1e9,
            (gneed - (double)p->gpu) / 1e9);
    return 1;
  }
  return 0;
}

int mt_cmd_plan(int argc, char **argv) {
  static const struct option opts[] = {
      {"model", required_argument, 0, 'm'},        {"gpu-mem", required_argument, 0, 'g'},
      {"host-mem", required_argument, 0, 'H'},     {"pcie-bw", required_argument, 0, 'b'},
      {"nvme-read-bw", required_argument, 0, 'r'}, {"nvme-write-bw", required_argument, 0, 'w'},
      {"nvme-mem", required_argument, 0, 'N'},     {"gpu-tflops", required_argument, 0, 't'},
      {"host-opt-gparams-per-s", required_argument, 0, 'O'}, {"seq", required_argument, 0, 's'},
      {"max-step-tokens", required_argument, 0, 'T'}, {"state-compression", required_argument, 0, 'C'},
      {"top", required_argument, 0, 'k'},          {"iterations", required_argument, 0, 'i'},
      {"trace", required_argument, 0, 'X'},        {"tokens-per-step", required_argument, 0, 'K'},
      {"json", no_argument, 0, 'j'},               {"help", no_argument, 0, 'h'},
      {0, 0, 0, 0},
  };
  static plan_t p;
  memset(&p, 0, sizeof p);
  p.nvme = 8ull << 40;
  p.tflops = 400;
  p.rate = 10;
  p.max_tokens = 1000000;
  p.only_comp = -1;
  p.top = 10;
  p.iterations = 2;
  bool json = false;
  const char *trace = NULL, *model_only = NULL; /* an option that needs --model */
  uint64_t tokens = 0;
  optind = 1;
  int c;
  while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    int bad = 0;
    int64_t iv = 0;
    char *end;
    switch (c) {
      case 'm': p.model = optarg; break;
      case 'g': bad = _mt_parse_size(optarg, &p.gpu) || p.gpu == 0; break;
      case 'H': bad = _mt_parse_size(optarg, &p.host) || p.host == 0; break;
      case 'N': bad = _mt_parse_size(optarg, &p.nvme); break;
      case 'b': bad = plan_parse_bw(optarg, &p.pcie); break;
      case 'r': bad = plan_parse_bw(optarg, &p.nrd); break;
      case 'w': bad = plan_parse_bw(optarg, &p.nwr); break;
      case 't':
        p.tflops = strtod(optarg, &end);
        bad = end == optarg || *end || !(p.tflops > 0) || p.tflops > 1e6;
        break;
      case 'O':
        p.rate = strtod(optarg, &end);
        bad = end == optarg || *end || !(p.rate > 0) || p.rate > 1e6;
        break;
      case 's': bad = _mt_parse_int(optarg, 1, 1 << 24, &iv); p.seq = (uint64_t)iv; break;
      case 'T': bad = _mt_parse_int(optarg, 1, INT64_MAX, &iv); p.max_tokens = (uint64_t)iv; break;
      case 'C':
        p.only_comp = strcmp(optarg, "none") == 0 ? 0 : strcmp(optarg, "8bit") == 0 ? 1
                      : strcmp(optarg, "4bit") == 0 ? 2 : -2;
        bad = p.only_comp == -2;
        break;
      case 'k': bad = _mt_parse_int(optarg, 1, 32, &iv); p.top = (unsigned)iv; break;
      case 'i': bad = _mt_parse_int(optarg, 2, 100, &iv); p.iterations = (unsigned)iv; break;
      case 'X': trace = optarg; break;
      case 'K': bad = _mt_parse_int(optarg, 1, INT64_MAX, &iv); tokens = (uint64_t)iv; break;
      case 'j': json = true; break;
      case 'h': usage(stdout); return 0;
      default: usage(stderr); return 2;
    }
    const char *name = "?";
    for (const struct option *o = opts; o->name; o++)
      if (o->val == c) name = o->name;
    if (bad) {
      fprintf(stderr, WHO ": bad value '%s' for --%s (see --help)\n", optarg, name);
      return 2;
    }
    if (strchr("tsTki", c)) model_only = name;
  }
  if (optind != argc) {
    fprintf(stderr, WHO ": unexpected argument '%s' (see --help)\n", argv[optind]);
    return 2;
  }
  if (trace || tokens) {
    if (!trace) {
      fprintf(stderr, WHO ": --tokens-per-step needs --trace (a model config knows its tokens)\n");
      return 2;
    }
    if (p.model) {
      fprintf(stderr, WHO ": --model and --trace exclude each other (see --help)\n");
      return 2;
    }
    if (model_only) {
      fprintf(stderr, WHO ": --%s does not apply with --trace: the trace fixes it (see --help)\n", model_only);
      return 2;
    }
    const char *missing = !p.gpu ? "--gpu-mem" : !p.host ? "--host-mem" : !p.pcie ? "--pcie-bw"
                          : !p.nrd ? "--nvme-read-bw" : !p.nwr ? "--nvme-write-bw" : NULL;
    if (missing) {
      fprintf(stderr, WHO ": %s is required (see --help)\n", missing);
      return 2;
    }
    plan_machine_t m = {.gpu = p.gpu, .host = p.host, .nvme = p.nvme, .pcie = p.pcie, .nrd = p.nrd, .nwr = p.nwr,
                        .rate = p.rate};
    return plan_trace(trace, &m, tokens, p.only_comp, json);
  }
  const char *missing = !p.model ? "--model or --trace" : !p.gpu ? "--gpu-mem" : !p.host ? "--host-mem" : !p.pcie ? "--pcie-bw"
                        : !p.nrd ? "--nvme-read-bw" : !p.nwr ? "--nvme-write-bw" : NULL;
  if (missing) {
    fprintf(stderr, WHO ": %s is required (see --help)\n", missing);
    return 2;
  }
  if (access(p.model, R_OK) != 0) {
    fprintf(stderr, WHO ": %s: cannot open: %s\n", p.model, strerror(errno));
    return 2;
  }
  static char self[4096];
  char dir[] = "/tmp/mt-plan.XXXXXX";
  if (plan_setup(self, sizeof self, dir) != 0) return 1;
  p.self = self;
  p.dir = dir;

  /* the candidates; synth checks the model (a bad config is its message, exit 2) */
  static const unsigned mbs[] = {1, 2, 4, 8, 16};
  for (unsigned a = 0; a < 5; a++)
    for (unsigned ck = 0; ck < 2; ck++)
      for (unsigned h = 0; h < 2; h++)
        for (unsigned cm = 0; cm < 3; cm++)
          for (unsigned g = 0; g < 2; g++) {
            if (p.only_comp >= 0 && cm != (unsigned)p.only_comp) continue;
            if (p.n == MAXC) break;
            cand_t *x = &p.c[p.n];
            *x = (cand_t){.mb = mbs[a], .ckpt = ck, .host = h == 0, .comp = cm, .ga = 1};
            x->ga = g == 0 ? 1 : 0; /* 0: the most micro-batches the step allows, set once seq is known */
            p.n++;
          }
  int rc = 0;
  unsigned total = p.n + p.top, done = 0; /* tune()'s replays at the end are not counted */
  uint64_t seq = p.seq;
  for (unsigned i = 0; i < p.n && rc == 0; i++) {
    cand_t *x = &p.c[i];
    if (x->ga == 0) {
      if (!seq) {
        cand_t probe = *x;
        probe.ga = 1;
        if ((rc = synth(&p, &probe, false)) != 0) break;
        seq = probe.tokens / probe.mb;
      }
      uint64_t g = p.max_tokens / (x->mb * seq);
      if (g <= 1) { /* the same as ga 1: drop it */
        p.c[i] = p.c[--p.n];
        i--;
        continue;
      }
      x->ga = (unsigned)(g > MAX_GA ? MAX_GA : g);
    }
    if ((uint64_t)x->mb * seq > p.max_tokens) {
      p.c[i] = p.c[--p.n];
      i--;
      continue;
    }
    if ((rc = synth(&p, x, false)) == 0) rc = synth(&p, x, true);
    mt_progress("plan: synth", ++done, total);
  }
  if (rc != 0) {
    mt_progress_end();
    fprintf(stderr, WHO ": mt-trace synth failed for %s (run it alone to see why)\n", p.model);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) {}
    return rc == 2 ? 2 : 1;
  }
  if (fits(&p)) {
    mt_progress_end();
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) {}
    return 1;
  }
  for (unsigned i = 0; i < p.n; i++) bound(&p, &p.c[i]);
  qsort(p.c, p.n, sizeof p.c[0], by_bound);
  diversify(&p);
  unsigned nr = p.top < p.n ? p.top : p.n;
  for (unsigned i = 0; i < nr; i++) {
    replay(&p, &p.c[i]);
    mt_progress("plan: replay", ++done, total);
  }
  mt_progress_end();
  qsort(p.c, nr, sizeof p.c[0], by_replay);
  if (!p.c[0].failed && p.c[0].replayed) tune(&p, &p.c[0]);
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, WHO ": could not remove %s\n", dir);
  if (p.c[0].failed || !p.c[0].replayed) {
    fprintf(stderr, WHO ": does not fit: none of the %u best candidates runs in GPU %.1f GiB, host %.1f GiB, "
            "NVMe %.1f GiB; the best one's replay says: %s\n", nr, (double)p.gpu / (1 << 30),
            (double)p.host / (1 << 30), (double)p.nvme / (1 << 30), p.c[0].why);
    return 1;
  }
  if (json) print_json(&p, nr);
  else print_text(&p, nr);
  return 0;
}
