/*
 * optim_bench.c - the host optimizer's step rate against the memory
 * roofline and against torch's CPU AdamW. Run by hand, not a test.
 *
 *   optim_bench [--params N] [--threads 1,2] [--reps 5] [--codecs none,8bit,4bit]
 *               [--weights f32|bf16|f16] [--no-torch] [--no-deepspeed]
 *               [--ds-python PY] [--json]
 *
 * For each thread count: the STREAM triad over three arrays of doubles at
 * least 4x the last-level cache (best of reps; bytes counted as STREAM
 * does, 24 per element) gives a bandwidth; dividing by 28 bytes per
 * parameter (FP32 AdamW reads g, p, m, v and writes p, m, v) gives the
 * roofline in G params/s. STREAM's count leaves out the write-allocate
 * read of a[] (the triad really moves 32 bytes per element), while AdamW
 * updates p, m, v in place and moves its 28 bytes with no such read, so
 * the kernel can exceed that roofline; roofline_write_allocate_gparams_per_s
 * counts the triad's 32 bytes. Then one AdamW step over N FP32 parameters (one
 * tensor, FP32 masters updated in place) per state codec (none, 8bit,
 * 4bit; --codecs picks some), the median of reps steps (and the best);
 * --weights bf16|f16 registers narrow weights (FP32 masters inside, the
 * rounded copy written back every step, 2 more bytes per parameter), and torch.optim.AdamW (foreach off and on) on the
 * same N at the same thread count via tools/bench/optim_torch.py.
 * And DeepSpeed's DeepSpeedCPUAdam (FP32 state, AdamW mode) on the same N
 * at the same thread count via tools/bench/optim_deepspeed.py, run with
 * --ds-python (default python3; deepspeed builds its cpu_adam op on first
 * use, minutes): where it cannot be imported or built,
 * deepspeed_gparams_per_s is null and the "deepspeed" object's "reason"
 * says why.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "optim.h"

void optim_bench_triad(double *restrict a, const double *restrict b, const double *restrict c,
                       double s, size_t begin, size_t end);

typedef struct triad_arg {
  double *a, *b, *c;
  size_t begin, end;
} triad_arg_t;

static void *triad_thread(void *p) {
  triad_arg_t *t = p;
  optim_bench_triad(t->a, t->b, t->c, 3.0, t->begin, t->end);
  return NULL;
}

static size_t llc_bytes(void) {
  size_t best = 32u << 20;
  for (int i = 0; i < 5; i++) {
    char path[96], buf[64];
    snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
    FILE *f = fopen(path, "r");
    if (f == NULL)
      continue;
    if (fgets(buf, sizeof(buf), f) != NULL) {
      char *e;
      size_t v = strtoul(buf, &e, 10);
      if (*e == 'K')
        v <<= 10;
      else if (*e == 'M')
        v <<= 20;
      if (i == 0 || v > best)
        best = v > best ? v : best;
    }
    fclose(f);
  }
  return best;
}

/* Best-of-reps triad bandwidth in bytes/s with `threads` threads. */
static double triad(int threads, int reps, size_t *elems) {
  size_t n = 4 * llc_bytes() / sizeof(double);
  if (n < ((size_t)32 << 20))
    n = (size_t)32 << 20; /* 256 MiB per array */
  *elems = n;
  double *a = malloc(n * 8), *b = malloc(n * 8), *c = malloc(n * 8);
  if (!a || !b || !c) {
    fprintf(stderr, "optim_bench: out of memory for the triad\n");
    exit(1);
  }
  /* first touch by the threads that will run it */
  for (size_t i = 0; i < n; i++) {
    a[i] = 0;
    b[i] = 1;
    c[i] = 2;
  }
  double best = 1e30;
  for (int r = 0; r < reps; r++) {
    pthread_t th[64];
    triad_arg_t args[64];
    uint64_t t0 = bench_now_ns();
    for (int t = 0; t < threads; t++) {
      args[t] = (triad_arg_t){a, b, c, n * (size_t)t / (size_t)threads,
                              n * (size_t)(t + 1) / (size_t)threads};
      pthread_create(&th[t], NULL, triad_thread, &args[t]);
    }
    for (int t = 0; t < threads; t++)
      pthread_join(th[t], NULL);
    double s = (double)(bench_now_ns() - t0) * 1e-9;
    best = s < best ? s : best;
  }
  free(a);
  free(b);
  free(c);
  return 24.0 * (double)n / best;
}

/* Runs cmd and keeps the first line it prints in buf ("null" if none). */
static void run_line(const char *cmd, char *buf, size_t len) {
  snprintf(buf, len, "null");
  FILE *f = popen(cmd, "r");
  if (f == NULL)
    return;
  if (fgets(buf, (int)len, f) == NULL)
    snprintf(buf, len, "null");
  buf[strcspn(buf, "\n")] = '\0';
  pclose(f);
}

/* One AdamW step over n FP32 parameters, reps times: the median and the
 * best step rate in G params/s (*best). */
static int wdtype = _MT_DT_F32; /* --weights: the registered weights' dtype */

static double adamw(size_t n, int threads, _mt_codec_t codec, int reps, double *best_rate) {
  float *p = malloc(n * 4), *g = malloc(n * 4);
  uint16_t *p16 = wdtype == _MT_DT_F32 ? NULL : malloc(n * 2);
  if (!p || !g || (wdtype != _MT_DT_F32 && !p16)) {
    fprintf(stderr, "optim_bench: out of memory for %zu parameters\n", n);
    exit(1);
  }
  uint64_t seed = 1;
  for (size_t i = 0; i < n; i++) {
    p[i] = (float)(bench_rand(&seed) >> 40) * 0x1p-24f - 0.5f;
    g[i] = (float)(bench_rand(&seed) >> 40) * 0x1p-24f - 0.5f;
  }
  _mt_optim_cfg_t cfg = {.hp = {.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8,
                                .weight_decay = 1e-2, .decoupled = true},
                         .isa = _MT_ISA_AUTO, .codec = codec, .threads = threads, .node = -1};
  _mt_optim_t *o;
  int rc = _mt_optim_create(&cfg, &o);
  if (p16 != NULL) /* narrow device weights: the optimizer keeps FP32 masters */
    for (size_t i = 0; i < n; i++)
      p16[i] = wdtype == _MT_DT_BF16 ? _mt_f32_to_bf16(p[i]) : _mt_f32_to_f16(p[i]);
  if (rc != 0 || _mt_optim_add(o, p16 ? (void *)p16 : p, n, wdtype, g) != 0) {
    fprintf(stderr, "optim_bench: optimizer setup failed (%d)\n", rc);
    exit(1);
  }
  _mt_optim_step(o, -1, 1.0f); /* first touch of the state */
  _mt_optim_wait(o);
  double secs[64];
  reps = reps > 64 ? 64 : reps;
  for (int r = 0; r < reps; r++) {
    uint64_t t0 = bench_now_ns();
    _mt_optim_step(o, -1, 1.0f);
    _mt_optim_wait(o);
    secs[r] = (double)(bench_now_ns() - t0) * 1e-9;
  }
  _mt_optim_destroy(o);
  free(p);
  free(p16);
  free(g);
  qsort(secs, (size_t)reps, sizeof(double), bench_cmp_double);
  *best_rate = (double)n / secs[0] / 1e9;
  return (double)n / secs[reps / 2] / 1e9;
}

int main(int argc, char **argv) {
  size_t n = 100000000;
  int reps = 5, json = 0, run_torch = 1, threads[8] = {1, 2}, nthreads = 2;
  unsigned codec_mask = 7; /* none, 8bit, 4bit */
  int run_ds = 1;
  const char *ds_python = "python3";
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--params") && i + 1 < argc) {
      n = strtoull(argv[++i], NULL, 10);
    } else if (!strcmp(argv[i], "--reps") && i + 1 < argc) {
      reps = atoi(argv[++i]);
    } else if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
      nthreads = 0;
      for (char *s = argv[++i]; *s && nthreads < 8; s += *s == ',')
        threads[nthreads++] = (int)strtol(s, &s, 10);
    } else if (!strcmp(argv[i], "--codecs") && i + 1 < argc) {
      codec_mask = 0;
      const char *c = argv[++i];
      codec_mask |= strstr(c, "none") ? 1u : 0;
      codec_mask |= strstr(c, "8bit") ? 2u : 0;
      codec_mask |= strstr(c, "4bit") ? 4u : 0;
    } else if (!strcmp(argv[i], "--weights") && i + 1 < argc) {
      const char *w = argv[++i];
      wdtype = !strcmp(w, "bf16") ? _MT_DT_BF16 : !strcmp(w, "f16") ? _MT_DT_F16 : _MT_DT_F32;
    } else if (!strcmp(argv[i], "--no-deepspeed")) {
      run_ds = 0;
    } else if (!strcmp(argv[i], "--ds-python") && i + 1 < argc) {
      ds_python = argv[++i];
    } else if (!strcmp(argv[i], "--json")) {
      json = 1;
    } else if (!strcmp(argv[i], "--no-torch")) {
      run_torch = 0;
    } else {
      fprintf(stderr, "usage: optim_bench [--params N] [--threads 1,2] [--reps 5] [--codecs none,8bit,4bit] "
                      "[--weights f32|bf16|f16] [--no-torch] [--no-deepspeed] [--ds-python PY] [--json]\n");
      return 2;
    }
  }
  static const char *codec_names[] = {"none", "8bit", "4bit"};
  if (json)
    printf("{\"params\": %zu, \"reps\": %d, \"weights\": \"%s\", \"kernel\": \"%s\", "
           "\"bytes_per_param\": 28, \"runs\": [\n",
           n, reps, wdtype == _MT_DT_BF16 ? "bf16" : wdtype == _MT_DT_F16 ? "f16" : "f32", _mt_adam_kernel(_MT_ISA_AVX512) ? "avx512" : _mt_adam_kernel(_MT_ISA_AVX2) ? "avx2" : "scalar");
  for (int t = 0; t < nthreads; t++) {
    size_t te;
    double bw = triad(threads[t], reps, &te);
    double roof = bw / 28.0 / 1e9;
    double rate[3] = {0, 0, 0}, best[3] = {0, 0, 0};
    for (int c = 0; c < 3; c++)
      if (codec_mask & (1u << c))
        rate[c] = adamw(n, threads[t], (_mt_codec_t)c, reps, &best[c]);
    char torch_json[1024] = "null";
    double tf_off = -1, tf_on = -1;
    char cmd[4096];
    if (run_torch) {
      snprintf(cmd, sizeof(cmd), "python3 %s/optim_torch.py %zu %d %d 2>/dev/null", MT_BENCH_DIR,
               n, threads[t], reps);
      run_line(cmd, torch_json, sizeof(torch_json));
      char *s = strstr(torch_json, "\"foreach_off\": ");
      if (s)
        tf_off = strtod(s + 15, NULL);
      s = strstr(torch_json, "\"foreach_on\": ");
      if (s)
        tf_on = strtod(s + 14, NULL);
    }
    char ds_json[2048] = "{\"deepspeed_gparams_per_s\": null, \"reason\": \"not run (--no-deepspeed)\"}";
    double ds = -1;
    if (run_ds) {
      snprintf(cmd, sizeof(cmd), "%s %s/optim_deepspeed.py %zu %d %d 2>/dev/null", ds_python,
               MT_BENCH_DIR, n, threads[t], reps);
      run_line(cmd, ds_json, sizeof(ds_json));
      if (strcmp(ds_json, "null") == 0)
        snprintf(ds_json, sizeof(ds_json),
                 "{\"deepspeed_gparams_per_s\": null, \"reason\": \"%s printed nothing\"}",
                 ds_python);
      char *s = strstr(ds_json, "\"deepspeed_gparams_per_s\": ");
      if (s && strncmp(s + 27, "null", 4) != 0)
        ds = strtod(s + 27, NULL);
    }
    char ds_rate[32] = "null";
    if (ds > 0)
      snprintf(ds_rate, sizeof(ds_rate), "%.4f", ds);
    if (json) {
      printf("  {\"threads\": %d, \"triad_bytes_per_s\": %.4g, \"triad_array_bytes\": %zu, "
             "\"roofline_gparams_per_s\": %.4f, \"roofline_write_allocate_gparams_per_s\": %.4f,\n",
             threads[t], bw, te * 8, roof, roof * 32 / 24);
      for (int c = 0; c < 3; c++)
        if (codec_mask & (1u << c))
          printf("   \"%s\": {\"gparams_per_s\": %.4f, \"best_gparams_per_s\": %.4f, "
                 "\"of_roofline\": %.3f},\n",
                 codec_names[c], rate[c], best[c], rate[c] / roof);
      printf("   \"torch_gparams_per_s\": {\"foreach_off\": %.4f, \"foreach_on\": %.4f}, "
             "\"torch\": %s,\n   \"deepspeed_gparams_per_s\": %s, \"deepspeed\": %s}%s\n",
             tf_off, tf_on, torch_json, ds_rate, ds_json, t + 1 < nthreads ? "," : "");
    } else {
      printf("threads %d: triad %.2f GB/s -> roofline %.3f Gparam/s\n", threads[t], bw / 1e9, roof);
      for (int c = 0; c < 3; c++)
        if (codec_mask & (1u << c))
          printf("  mtalloc AdamW state=%s: median %.3f, best %.3f Gparam/s (median %.0f%% of "
                 "roofline)\n",
                 codec_names[c], rate[c], best[c], 100 * rate[c] / roof);
      printf("  torch AdamW foreach off %.3f, on %.3f Gparam/s\n", tf_off, tf_on);
      printf("  DeepSpeedCPUAdam %s Gparam/s (%s)\n", ds_rate, ds_json);
    }
  }
  if (json)
    printf("]}\n");
  return 0;
}
