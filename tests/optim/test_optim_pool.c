/*
 * Description: the optimizer's thread pool and multi-parameter step.
 *
 * 1. The pool runs every task of a job exactly once, over 2000 back-to-back
 *    jobs of varying size (the hand-over between jobs is where a pool
 *    races), with 1, 2 and 3 workers, and an empty job returns at once.
 * 2. A step over 40 parameters of mixed sizes (1 ... 300,001) and dtypes
 *    (f32, bf16, fp16) on 1, 2 and 3 workers gives the same bits as the
 *    scalar kernel run serially over each parameter; stepping one
 *    parameter alone advances only its step count; a second step queued
 *    while the first is in flight runs after it.
 * Built into the 'tsan' suite: ThreadSanitizer checks the hand-over.
 */
#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "optim.h"
#include "pool.h"

#define CHECK(c, ...)                                                   \
  do {                                                                  \
    if (!(c)) {                                                         \
      fprintf(stderr, "test_optim_pool: FAIL line %d: ", __LINE__);     \
      fprintf(stderr, __VA_ARGS__);                                     \
      fprintf(stderr, "\n");                                            \
      exit(1);                                                          \
    }                                                                   \
  } while (0)

static atomic_uint hits[512];

static void count_task(void *arg, size_t t) {
  (void)arg;
  atomic_fetch_add(&hits[t], 1);
}

static void test_pool(int threads) {
  _mt_pool_t *pool;
  CHECK(_mt_pool_create(threads, -1, &pool) == 0, "pool create");
  CHECK(_mt_pool_threads(pool) == threads, "threads %d", _mt_pool_threads(pool));
  for (int j = 0; j < 2000; j++) {
    size_t n = (size_t)(j * 7919) % 512;
    for (size_t t = 0; t < 512; t++)
      atomic_store(&hits[t], 0);
    _mt_pool_submit(pool, n, count_task, NULL);
    _mt_pool_wait(pool);
    for (size_t t = 0; t < 512; t++)
      CHECK(atomic_load(&hits[t]) == (t < n), "job %d task %zu ran %u times", j, t,
            atomic_load(&hits[t]));
  }
  _mt_pool_destroy(pool);
}

static uint32_t rng = 12345;
static float frand(void) {
  rng = rng * 1664525u + 1013904223u;
  return (float)((rng >> 8) & 0xffff) / 65536.0f - 0.5f;
}

#define NP 40

static void test_step(int threads) {
  static const size_t sizes[] = {1, 7, 4097, 65536, 65537, 300001, 128, 129};
  _mt_optim_cfg_t cfg = {.hp = {.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8,
                                .weight_decay = 0.01, .decoupled = true, .amsgrad = true},
                         .isa = _MT_ISA_AUTO, .codec = _MT_CODEC_NONE, .threads = threads,
                         .node = -1};
  _mt_optim_t *o;
  CHECK(_mt_optim_create(&cfg, &o) == 0, "create");
  void *w[NP];
  float *g[NP], *ref_p[NP], *ref_m[NP], *ref_v[NP], *ref_vm[NP];
  int dt[NP];
  size_t n[NP];
  rng = 12345;
  for (int i = 0; i < NP; i++) {
    n[i] = sizes[i % 8];
    dt[i] = i % 3; /* f32, bf16, fp16 */
    g[i] = malloc(n[i] * 4);
    ref_p[i] = calloc(n[i], 4);
    ref_m[i] = calloc(n[i], 4);
    ref_v[i] = calloc(n[i], 4);
    ref_vm[i] = calloc(n[i], 4);
    w[i] = calloc(n[i], 4);
    for (size_t k = 0; k < n[i]; k++) {
      float x = frand();
      if (dt[i] == _MT_DT_F32)
        ((float *)w[i])[k] = x;
      else if (dt[i] == _MT_DT_BF16)
        ((uint16_t *)w[i])[k] = _mt_f32_to_bf16(x);
      else
        ((uint16_t *)w[i])[k] = _mt_f32_to_f16(x);
      /* the master starts from the widened device weight */
      uint16_t h = ((uint16_t *)w[i])[k];
      ref_p[i][k] = dt[i] == _MT_DT_F32    ? x
                    : dt[i] == _MT_DT_BF16 ? _mt_bf16_to_f32(h)
                                           : _mt_f16_to_f32(h);
    }
    CHECK(_mt_optim_add(o, w[i], n[i], dt[i], g[i]) == i, "add %d", i);
  }
  float steps[NP] = {0};
  for (int s = 0; s < 4; s++) {
    int one = s == 2 ? 5 : -1; /* step 3 updates parameter 5 only */
    for (int i = 0; i < NP; i++)
      for (size_t k = 0; k < n[i]; k++)
        g[i][k] = frand();
    CHECK(_mt_optim_step(o, one, 0.75f) == 0, "step");
    /* a second step of the same parameters queues behind the first */
    CHECK(_mt_optim_step(o, one, 0.75f) == 0, "second step while in flight");
    _mt_optim_wait(o);
    _mt_adam_kernel_fn k = _mt_adam_kernel(_MT_ISA_SCALAR);
    for (int i = 0; i < NP; i++) {
      if (one >= 0 && i != one)
        continue;
      for (int twice = 0; twice < 2; twice++) {
        steps[i] += 1;
        _mt_adam_scalars_t sc;
        CHECK(_mt_adam_scalars(&cfg.hp, steps[i], 0.75f, &sc) == 0, "scalars");
        _mt_adam_args_t a = {.p = ref_p[i], .g = g[i], .m = ref_m[i], .v = ref_v[i],
                             .vmax = ref_vm[i]};
        k(&sc, &a, 0, n[i]);
      }
    }
  }
  for (int i = 0; i < NP; i++) {
    for (size_t k = 0; k < n[i]; k++) {
      if (dt[i] == _MT_DT_F32)
        CHECK(((float *)w[i])[k] == ref_p[i][k], "threads %d param %d [%zu]", threads, i, k);
      else if (dt[i] == _MT_DT_BF16)
        CHECK(((uint16_t *)w[i])[k] == _mt_f32_to_bf16(ref_p[i][k]), "threads %d bf16 param %d [%zu]",
              threads, i, k);
      else
        CHECK(((uint16_t *)w[i])[k] == _mt_f32_to_f16(ref_p[i][k]), "threads %d f16 param %d [%zu]",
              threads, i, k);
    }
  }
  _mt_optim_destroy(o);
  for (int i = 0; i < NP; i++) {
    free(g[i]);
    free(ref_p[i]);
    free(ref_m[i]);
    free(ref_v[i]);
    free(ref_vm[i]);
    free(w[i]);
  }
}

int main(void) {
  CHECK(_mt_pool_default_threads(-1) >= 1, "default threads");
  printf("default threads on this node: %d\n", _mt_pool_default_threads(-1));
  for (int t = 1; t <= 3; t++) {
    test_pool(t);
    test_step(t);
    printf("threads %d: pool and step ok\n", t);
  }
  return 0;
}
