/*
 * bench_predictor.c - cost of the correlation predictor per launch.
 *
 * Description: feeds a synthetic stream shaped like the 100B synth trace
 * (by default 2,893 distinct launches per iteration, repeated, each with 1
 * to 4 region keys drawn from two regions a launch) and times one
 * observe() plus one predict() of depth 8 per launch (or of another depth:
 * the library asks for MT_PREFETCH_DEPTH + MT_PREFETCH_FREE, 40 by
 * default). Prints the median over iterations of ns per launch, the
 * prediction hit rate and the table bytes. Not a timed test: run it by hand
 *   build/predictor/bench_predictor [iterations [launches-per-iteration [entries [predictor [depth [LO-HI [predict|view]]]]]]]
 * (entries: table capacity, default 4 x launches-per-iteration, with room
 * for 16 regions a launch; or, with a K/M/G suffix, a bound on the
 * predictor's memory as MT_PREDICTOR_MEM sets it, e.g. 64M; predictor:
 * correlation, the default, or context; LO-HI: region keys a launch,
 * default 1-4). The shape: the library keeps in a launch's footprint the
 * regions it pages (not the small ones, always resident), 2.36 a launch in
 * the 100B synth trace and 2.2 to 2.7 in the five G10 traces, with 1.0 to
 * 2.6 distinct regions an iteration per launch (scratch count, nineteenth
 * session); 1-4 (2.5 on average) is that. Until the nineteenth session
 * the bench drew 4-8, which is 4-8 here. predict|view: how the
 * predictions are asked for: copied out (predict(), as prefetch.c asks
 * for its 40) or handed out in place (view(), as the NVMe read-ahead asks
 * for its 1,024).
 * For instructions per launch independent of machine load, run it under
 * callgrind at two iteration counts and divide the difference in Ir by the
 * difference in launches.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "predictor.h"

#define DEPTH 8       /* the default depth */
#define DEPTH_MAX 1024 /* as MT_PREFETCH_DEPTH's bound */

static uint64_t rng_state = 0x243f6a8885a308d3ULL;
static uint64_t rng(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  int iters = argc > 1 ? atoi(argv[1]) : 50;
  size_t per = argc > 2 ? (size_t)atol(argv[2]) : 2893;
  if (iters < 1 || per < 1) {
    fprintf(stderr, "usage: bench_predictor [iterations [launches-per-iteration [entries [predictor [depth [LO-HI "
                    "[predict|view]]]]]]]\n");
    return 2;
  }
  unsigned lo = 1, hi = 4;
  if (argc > 6 && (sscanf(argv[6], "%u-%u", &lo, &hi) != 2 || lo > hi || hi > 8)) {
    fprintf(stderr, "bench_predictor: regions '%s' is not LO-HI with LO <= HI <= 8\n", argv[6]);
    return 2;
  }
  const bool view = argc > 7 && strcmp(argv[7], "view") == 0;
  if (argc > 7 && !view && strcmp(argv[7], "predict") != 0) {
    fprintf(stderr, "bench_predictor: '%s' is neither predict nor view\n", argv[7]);
    return 2;
  }
  uint64_t *ids = malloc(per * sizeof(*ids));
  uint64_t *regs = malloc(per * 8 * sizeof(*regs));
  uint32_t *nreg = malloc(per * sizeof(*nreg));
  double *ns = malloc((size_t)iters * sizeof(*ns));
  if (!ids || !regs || !nreg || !ns) return 1;
  for (size_t i = 0; i < per; i++) {
    ids[i] = rng();
    nreg[i] = lo + (uint32_t)(rng() % (hi - lo + 1));
    for (uint32_t k = 0; k < nreg[i]; k++) regs[i * 8 + k] = rng() % (per * 2);
  }
  const mt_predictor_ops_t *ops = _mt_predictor_find(argc > 4 ? argv[4] : "correlation");
  if (ops == NULL || ops == &_mt_predictor_none) {
    fprintf(stderr, "bench_predictor: predictor must be correlation or context\n");
    return 2;
  }
  char *end = "";
  size_t cap = argc > 3 ? (size_t)strtoull(argv[3], &end, 10) : 4 * per;
  mt_predictor_config_t cfg = {.capacity = cap, .footprint_regions = 16 * per};
  if (*end != '\0') {
    int shift = *end == 'K' ? 10 : *end == 'M' ? 20 : *end == 'G' ? 30 : -1;
    if (shift < 0 || end[1] != '\0' || cap == 0) {
      fprintf(stderr, "bench_predictor: entries '%s' is neither a count nor a size (K, M or G)\n", argv[3]);
      return 2;
    }
    cfg = (mt_predictor_config_t){.max_bytes = cap << shift};
  }
  mt_predictor_t *p = ops->create(&cfg);
  if (p == NULL) return 1;
  const int depth = argc > 5 ? atoi(argv[5]) : DEPTH;
  if (depth < 1 || depth > DEPTH_MAX) {
    fprintf(stderr, "bench_predictor: depth '%s' is not 1..%d\n", argv[5], DEPTH_MAX);
    return 2;
  }
  mt_pred_launch_t *out = malloc((size_t)depth * sizeof(*out));
  if (out == NULL) return 1;
  uint64_t sink = 0, with_fp = 0, want = 0;
  bool fp_next = false; /* the last prediction's first launch came with a footprint */
  uint64_t next_id = 0;
  for (int it = 0; it < iters; it++) {
    double t0 = now_ns();
    for (size_t i = 0; i < per; i++) {
      with_fp += ops->observe(p, ids[i], &regs[i * 8], nreg[i]) && next_id == ids[i] && fp_next;
      if (view) {
        mt_pred_view_t v;
        size_t n = ops->view(p, (size_t)depth, &v);
        const mt_pred_launch_t *first = v.n[0] ? &v.run[0][0] : NULL,
                               *last = v.n[1] ? &v.run[1][v.n[1] - 1] : v.n[0] ? &v.run[0][v.n[0] - 1] : NULL;
        sink += n ? last->nkeys : 0;
        next_id = n ? first->id : 0;
        fp_next = n && first->keys != NULL;
        continue;
      }
      size_t n = ops->predict(p, out, (size_t)depth);
      sink += n ? out[n - 1].nkeys : 0;
      next_id = n ? out[0].id : 0;
      fp_next = n && out[0].keys != NULL;
    }
    want += it > 0 ? per : 0;
    ns[it] = (now_ns() - t0) / (double)per;
  }
  mt_predictor_stats_t st;
  ops->stats(p, &st);
  qsort(ns, (size_t)iters, sizeof(*ns), cmp_double);
  printf("launches/iteration %zu, iterations %d, depth %d (%s), regions %u-%u\n", per, iters, depth,
         view ? "view" : "predict", lo, hi);
  printf("median ns per observe+predict: %.1f (min %.1f, max %.1f)\n", ns[iters / 2], ns[0], ns[iters - 1]);
  printf("hit rate %.4f (with the footprint: %.4f; of the iterations after the first: %.4f), evictions %llu, "
         "footprints dropped %llu, table bytes %zu (%.2f MiB)\n",
         st.observed ? (double)st.predicted / (double)st.observed : 0.0,
         st.observed ? (double)with_fp / (double)st.observed : 0.0, want ? (double)with_fp / (double)want : 0.0,
         (unsigned long long)st.evictions, (unsigned long long)st.fp_dropped,
         st.table_bytes, (double)st.table_bytes / (1024.0 * 1024.0));
  if (sink == 42) puts("");
  ops->destroy(p);
  free(ids), free(regs), free(nreg), free(ns), free(out);
  return 0;
}
