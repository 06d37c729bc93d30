/*
 * optim_spill_bench.c - the host optimizer's step with its state on NVMe
 * (libmtalloc/optim/statestore.c) against the same step with the state in
 * RAM, and how much of the NVMe step waited for the disk. Run by hand, not
 * a test.
 *
 *   optim_spill_bench --dir DIR [--params N] [--threads T] [--reps R]
 *                     [--codecs none,8bit,4bit] [--weights f32|bf16] [--json]
 *
 * DIR must be on a disk file system (O_DIRECT). For each codec, one
 * parameter of N elements (default 16M) is registered twice: state in RAM,
 * and state forced to a store opened on DIR. Reported, medians of R steps
 * (default 5) after one warm-up step:
 *   ram_gparams_per_s     the step with state in RAM
 *   nvme_gparams_per_s    the step with state on NVMe
 *   io_only_gparams_per_s the same stream with an update that does
 *                         nothing: the disk's own rate for this traffic,
 *                         the bound the NVMe step can reach
 *   wait_fraction         time the NVMe step spent waiting for I/O
 *                         (optim_nvme_wait_ns) over its wall time
 *   overlap               (ram step + io-only step) / nvme step: 1 when
 *                         update and I/O run one after the other, up to 2
 *                         when the shorter hides entirely under the longer
 *   state_bytes           bytes of state read and written per step
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "nvme_store.h"
#include "optim.h"
#include "statestore.h"
#include "stats.h"

static void noop(void *arg, _mt_ss_block_t *b) {
  (void)arg;
  (void)b;
}

typedef struct result {
  double ram, nvme, io_only, wait_frac;
  uint64_t bytes;
} result_t;

static double run(_mt_optim_t *o, int reps, double *wait_frac) {
  double secs[64];
  double fr[64];
  for (int r = 0; r < reps; r++) {
    uint64_t w0 = mt_stat_get(optim_nvme_wait_ns), t0 = bench_now_ns();
    if (_mt_optim_step(o, -1, 1.0f) != 0 || _mt_optim_wait(o) != 0) {
      fprintf(stderr, "optim_spill_bench: step failed\n");
      exit(1);
    }
    uint64_t t = bench_now_ns() - t0;
    secs[r] = (double)t * 1e-9;
    fr[r] = (double)(mt_stat_get(optim_nvme_wait_ns) - w0) / (double)t;
  }
  if (wait_frac) *wait_frac = bench_median(fr, (size_t)reps);
  return bench_median(secs, (size_t)reps);
}

static void one(_mt_ss_t *ss, size_t n, int threads, _mt_codec_t codec, int wdtype, int reps,
                result_t *res) {
  float *p = malloc(n * 4), *g = malloc(n * 4);
  uint16_t *p16 = malloc(n * 2);
  uint64_t seed = 1;
  for (size_t i = 0; i < n; i++) {
    p[i] = (float)(bench_rand(&seed) >> 40) * 0x1p-24f - 0.5f;
    g[i] = (float)(bench_rand(&seed) >> 40) * 0x1p-24f - 0.5f;
    p16[i] = _mt_f32_to_bf16(p[i]);
  }
  void *w = wdtype == _MT_DT_F32 ? (void *)p : (void *)p16;
  _mt_optim_cfg_t cfg = {.hp = {.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8,
                                .weight_decay = 1e-2, .decoupled = true},
                         .isa = _MT_ISA_AUTO, .codec = codec, .threads = threads, .node = -1};
  for (int spilled = 0; spilled < 2; spilled++) {
    _mt_optim_t *o;
    if (_mt_optim_create(&cfg, &o) != 0 || (spilled && _mt_optim_set_store(o, ss, 1) != 0) ||
        _mt_optim_add(o, w, n, wdtype, g) != 0) {
      fprintf(stderr, "optim_spill_bench: setup failed (state %s)\n", spilled ? "on NVMe" : "in RAM");
      exit(1);
    }
    run(o, 1, NULL); /* first touch */
    if (!spilled) {
      res->ram = run(o, reps, NULL);
    } else {
      /* steps and I/O-only passes alternate, so both see the same disk */
      uint64_t r0 = mt_stat_get(optim_nvme_read), w0 = mt_stat_get(optim_nvme_write), moved = 0;
      _mt_optim_view_t v;
      _mt_optim_view(o, 0, &v);
      double step[64], io[64], fr[64];
      for (int r = 0; r < reps; r++) {
        step[r] = run(o, 1, &fr[r]);
        moved = mt_stat_get(optim_nvme_read) - r0 + mt_stat_get(optim_nvme_write) - w0;
        uint64_t t0 = bench_now_ns();
        if (_mt_ss_step(v.ss, v.sp, noop, NULL) != 0) exit(1);
        io[r] = (double)(bench_now_ns() - t0) * 1e-9;
        r0 = mt_stat_get(optim_nvme_read);
        w0 = mt_stat_get(optim_nvme_write);
      }
      res->bytes = moved;
      res->nvme = bench_median(step, (size_t)reps);
      res->wait_frac = bench_median(fr, (size_t)reps);
      res->io_only = bench_median(io, (size_t)reps);
    }
    _mt_optim_destroy(o);
  }
  free(p);
  free(p16);
  free(g);
}

int main(int argc, char **argv) {
  const char *dir = NULL, *codecs = "none,8bit";
  size_t n = (size_t)16 << 20;
  int threads = 2, reps = 5, json = 0, wdtype = _MT_DT_BF16;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--dir") && i + 1 < argc) dir = argv[++i];
    else if (!strcmp(argv[i], "--params") && i + 1 < argc) n = strtoull(argv[++i], NULL, 10);
    else if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--codecs") && i + 1 < argc) codecs = argv[++i];
    else if (!strcmp(argv[i], "--weights") && i + 1 < argc)
      wdtype = !strcmp(argv[++i], "f32") ? _MT_DT_F32 : _MT_DT_BF16;
    else if (!strcmp(argv[i], "--json")) json = 1;
    else {
      fprintf(stderr, "usage: optim_spill_bench --dir DIR [--params N] [--threads T] [--reps R] "
                      "[--codecs none,8bit,4bit] [--weights f32|bf16] [--json]\n");
      return 2;
    }
  }
  if (dir == NULL || reps < 1 || reps > 64 || n == 0) {
    fprintf(stderr, "optim_spill_bench: --dir DIR is required (a disk file system); reps 1..64\n");
    return 2;
  }
  /* two copies of at most 16 bytes an element, and room to spare */
  _mt_nvme_cfg_t cfg = {.dirs = dir, .max_bytes = 32 * (uint64_t)n + ((uint64_t)64 << 20),
                        .numa_node = -1};
  _mt_nvme_t *store;
  _mt_ss_t *ss;
  int rc = _mt_nvme_open(&cfg, &store);
  if (rc != 0 || _mt_ss_open(store, NULL, &ss) != 0) {
    fprintf(stderr, "optim_spill_bench: cannot open the store in %s (%s)\n", dir, strerror(-rc));
    return 1;
  }
  if (json) printf("{\"params\": %zu, \"threads\": %d, \"weights\": \"%s\", \"codecs\": {", n, threads,
                   wdtype == _MT_DT_F32 ? "f32" : "bf16");
  static const char *names[] = {"none", "8bit", "4bit"};
  int first = 1;
  for (int c = 0; c < 3; c++) {
    if (strstr(codecs, names[c]) == NULL) continue;
    result_t r;
    one(ss, n, threads, (_mt_codec_t)c, wdtype, reps, &r);
    double gr = (double)n / r.ram / 1e9, gn = (double)n / r.nvme / 1e9, gi = (double)n / r.io_only / 1e9;
    double overlap = (r.ram + r.io_only) / r.nvme;
    if (json) {
      printf("%s\"%s\": {\"ram_gparams_per_s\": %.4f, \"nvme_gparams_per_s\": %.4f, "
             "\"io_only_gparams_per_s\": %.4f, \"wait_fraction\": %.3f, \"overlap\": %.3f, "
             "\"state_bytes\": %llu, \"nvme_gbytes_per_s\": %.3f}",
             first ? "" : ", ", names[c], gr, gn, gi, r.wait_frac, overlap, (unsigned long long)r.bytes,
             (double)r.bytes / r.nvme / 1e9);
    } else {
      printf("%-5s RAM %.4f G params/s   NVMe %.4f (%.2f GB/s of state)   I/O alone %.4f   "
             "waiting %.0f%%   overlap %.2f\n",
             names[c], gr, gn, (double)r.bytes / r.nvme / 1e9, gi, 100 * r.wait_frac, overlap);
    }
    first = 0;
  }
  if (json) printf("}}\n");
  _mt_ss_close(ss);
  _mt_nvme_close(store);
  return 0;
}
