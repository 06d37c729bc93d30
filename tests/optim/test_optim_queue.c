/*
 * Description: the optimizer API a framework's gradient hooks and
 * state_dict need (mtalloc.h): queued per-parameter steps, new gradient
 * pointers, per-parameter hyper-parameters that change between steps, and
 * state read and write.
 *
 * 1. Queued steps: 48 parameters in two "param groups" (different lr,
 *    weight_decay, betas; group 1 maximizes) are stepped one at a time in
 *    reverse order, as backward finalises their gradients, from a second
 *    thread (the hook thread) while other steps are in flight; each step
 *    points the parameter at a new gradient buffer (mt_optim_set_grad) and
 *    a scheduler changes lr between steps (mt_optim_set_hparams). After
 *    mt_optim_wait the weights equal the scalar kernel run serially with
 *    each parameter's own hyper-parameters and step count, bit for bit, on
 *    1, 2 and 3 workers; param_info reports the step counts; work_ns grew.
 * 2. FP32 state out of one optimizer (master, exp_avg, exp_avg_sq,
 *    max_exp_avg_sq, step) into a fresh one: both then step to the same
 *    bits. Bad field, count and a missing max_exp_avg_sq are refused.
 * 3. 4-bit and 8-bit state copied raw (codes, scales) with the master and
 *    step: both optimizers then step to the same bits; the raw calls refuse
 *    FP32 state and wrong sizes.
 * In the 'tsan' suite: ThreadSanitizer checks the queue's hand-over.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adam.h"
#include "mtalloc.h"

#define CHECK(c, ...)                                                    \
  do {                                                                   \
    if (!(c)) {                                                          \
      fprintf(stderr, "test_optim_queue: FAIL line %d: ", __LINE__);     \
      fprintf(stderr, __VA_ARGS__);                                      \
      fprintf(stderr, "\n");                                             \
      exit(1);                                                           \
    }                                                                    \
  } while (0)

static uint32_t rng = 777;
static float frand(void) {
  rng = rng * 1664525u + 1013904223u;
  return (float)((rng >> 8) & 0xffff) / 65536.0f - 0.5f;
}

#define NP 48
#define STEPS 4
static const size_t sizes[] = {3, 4096, 65537, 130000, 1, 200, 70001, 5000};

typedef struct hook_ctx {
  mt_optim_t *o;
  float *g[NP][2]; /* two gradient buffers per parameter, alternated */
  int step;        /* which buffer this backward filled */
  mt_optim_params_t hp[2];
} hook_ctx_t;

static int group_of(int i) { return i % 2; }

/* The hook thread: parameters in backward order, each stepped as soon as
 * "its gradient is final", with the steps of the others in flight. */
static void *backward_hooks(void *arg) {
  hook_ctx_t *c = arg;
  for (int i = NP - 1; i >= 0; i--) {
    CHECK(mt_optim_set_grad(c->o, i, c->g[i][c->step % 2]) == 0, "set_grad %d", i);
    CHECK(mt_optim_step(c->o, i, 1.0f) == 0, "queued step of %d", i);
  }
  return NULL;
}

static void make_params(mt_optim_params_t *g0, mt_optim_params_t *g1) {
  mt_optim_defaults(g0);
  g0->amsgrad = 1;
  g0->state = MT_OPTIM_STATE_FP32;
  *g1 = *g0;
  g1->lr = 3e-3;
  g1->weight_decay = 0.1;
  g1->beta1 = 0.8;
  g1->beta2 = 0.95;
  g1->eps = 1e-6;
  g1->maximize = 1;
}

static _mt_adam_hp_t hp_of(const mt_optim_params_t *p) {
  return (_mt_adam_hp_t){.lr = p->lr, .beta1 = p->beta1, .beta2 = p->beta2, .eps = p->eps,
                         .weight_decay = p->weight_decay, .decoupled = p->adamw != 0,
                         .amsgrad = p->amsgrad != 0, .maximize = p->maximize != 0};
}

static void test_queue(int threads) {
  hook_ctx_t c = {0};
  make_params(&c.hp[0], &c.hp[1]);
  c.hp[0].threads = threads;
  CHECK(mt_optim_create(&c.hp[0], &c.o) == 0, "create");
  float *w[NP], *rp[NP], *rm[NP], *rv[NP], *rvm[NP];
  size_t n[NP];
  rng = 777;
  for (int i = 0; i < NP; i++) {
    n[i] = sizes[i % 8];
    w[i] = malloc(n[i] * 4);
    rp[i] = malloc(n[i] * 4);
    rm[i] = calloc(n[i], 4);
    rv[i] = calloc(n[i], 4);
    rvm[i] = calloc(n[i], 4);
    c.g[i][0] = malloc(n[i] * 4);
    c.g[i][1] = malloc(n[i] * 4);
    for (size_t k = 0; k < n[i]; k++) rp[i][k] = w[i][k] = frand();
    CHECK(mt_optim_register(c.o, w[i], n[i], MT_DTYPE_F32, c.g[i][1]) == i, "register %d", i);
    CHECK(mt_optim_set_hparams(c.o, i, &c.hp[group_of(i)]) == 0, "group hparams %d", i);
  }
  mt_optim_params_t bad = c.hp[0];
  bad.amsgrad = 0;
  CHECK(mt_optim_set_hparams(c.o, 0, &bad) == -EINVAL, "amsgrad changed after creation");
  bad = c.hp[0];
  bad.beta1 = 1.0;
  CHECK(mt_optim_set_hparams(c.o, 0, &bad) == -EINVAL, "beta1 = 1 accepted");
  CHECK(mt_optim_set_grad(c.o, NP, c.g[0][0]) == -EINVAL, "set_grad of a missing param");
  uint64_t ns0 = mt_optim_work_ns(c.o);
  _mt_adam_kernel_fn k = _mt_adam_kernel(_MT_ISA_SCALAR);
  for (int s = 0; s < STEPS; s++) {
    c.step = s;
    for (int i = 0; i < NP; i++)
      for (size_t e = 0; e < n[i]; e++) c.g[i][s % 2][e] = frand();
    pthread_t t;
    CHECK(pthread_create(&t, NULL, backward_hooks, &c) == 0, "hook thread");
    CHECK(pthread_join(t, NULL) == 0, "join");
    CHECK(mt_optim_wait(c.o) == 0, "wait");
    for (int i = 0; i < NP; i++) {
      _mt_adam_scalars_t sc;
      _mt_adam_hp_t hp = hp_of(&c.hp[group_of(i)]);
      CHECK(_mt_adam_scalars(&hp, (float)(s + 1), 1.0f, &sc) == 0, "scalars");
      _mt_adam_args_t a = {.p = rp[i], .g = c.g[i][s % 2], .m = rm[i], .v = rv[i], .vmax = rvm[i]};
      k(&sc, &a, 0, n[i]);
    }
    /* the scheduler: every group's lr decays before the next step */
    for (int gi = 0; gi < 2; gi++) c.hp[gi].lr *= 0.5;
    for (int i = 0; i < NP; i++)
      CHECK(mt_optim_set_hparams(c.o, i, &c.hp[group_of(i)]) == 0, "scheduler");
  }
  for (int i = 0; i < NP; i++) {
    CHECK(memcmp(w[i], rp[i], n[i] * 4) == 0, "threads %d param %d differs from the serial kernel",
          threads, i);
    mt_optim_param_info_t info;
    CHECK(mt_optim_param_info(c.o, i, &info) == 0 && info.step == STEPS && info.count == n[i] &&
              info.amsgrad == 1 && info.state_bits == 0,
          "info of %d: step %g", i, (double)info.step);
  }
  CHECK(mt_optim_work_ns(c.o) > ns0, "work_ns did not grow");
  mt_optim_destroy(c.o);
  for (int i = 0; i < NP; i++) {
    free(w[i]), free(rp[i]), free(rm[i]), free(rv[i]), free(rvm[i]);
    free(c.g[i][0]), free(c.g[i][1]);
  }
}

/* Steps a and b once more with the same gradient and compares weights. */
static void step_both_same(mt_optim_t *a, mt_optim_t *b, float *wa, float *wb, float *g, size_t n) {
  for (size_t e = 0; e < n; e++) g[e] = frand();
  CHECK(mt_optim_step(a, -1, 1.0f) == 0 && mt_optim_step(b, -1, 1.0f) == 0, "step");
  CHECK(mt_optim_wait(a) == 0 && mt_optim_wait(b) == 0, "wait");
  CHECK(memcmp(wa, wb, n * 4) == 0, "resumed optimizer differs");
}

static void test_state_fp32(void) {
  enum { N = 70000 };
  mt_optim_params_t p;
  mt_optim_defaults(&p);
  p.amsgrad = 1;
  p.state = MT_OPTIM_STATE_FP32;
  p.threads = 2;
  mt_optim_t *a, *b;
  CHECK(mt_optim_create(&p, &a) == 0 && mt_optim_create(&p, &b) == 0, "create");
  float *wa = malloc(N * 4), *wb = calloc(N, 4), *g = malloc(N * 4), *buf = malloc(N * 4);
  for (int i = 0; i < N; i++) wa[i] = frand();
  CHECK(mt_optim_register(a, wa, N, MT_DTYPE_F32, g) == 0, "register a");
  CHECK(mt_optim_register(b, wb, N, MT_DTYPE_F32, g) == 0, "register b");
  for (int s = 0; s < 3; s++) {
    for (int i = 0; i < N; i++) g[i] = frand();
    CHECK(mt_optim_step(a, 0, 1.0f) == 0, "step");
    CHECK(mt_optim_wait(a) == 0, "wait"); /* before g is refilled */
  }
  for (int f = MT_OPTIM_FIELD_MASTER; f <= MT_OPTIM_FIELD_MAX_EXP_AVG_SQ; f++) {
    CHECK(mt_optim_state_read(a, 0, (mt_optim_field_t)f, buf, N) == 0, "read field %d", f);
    CHECK(mt_optim_state_write(b, 0, (mt_optim_field_t)f, buf, N) == 0, "write field %d", f);
  }
  mt_optim_param_info_t info;
  CHECK(mt_optim_param_info(a, 0, &info) == 0 && info.step == 3.0f, "step count 3");
  CHECK(mt_optim_set_step(b, 0, info.step) == 0, "set_step");
  CHECK(memcmp(wa, wb, N * 4) == 0, "master write did not set the weights");
  CHECK(mt_optim_state_read(a, 0, MT_OPTIM_FIELD_EXP_AVG, buf, N - 1) == -EINVAL, "short count");
  CHECK(mt_optim_state_read(a, 0, (mt_optim_field_t)7, buf, N) == -EINVAL, "bad field");
  CHECK(mt_optim_state_read(a, 1, MT_OPTIM_FIELD_EXP_AVG, buf, N) == -EINVAL, "bad param");
  CHECK(mt_optim_state_raw_read(a, 0, MT_OPTIM_FIELD_EXP_AVG, buf, 4, buf, 1) == -ENOTSUP,
        "raw read of FP32 state");
  step_both_same(a, b, wa, wb, g, N);
  step_both_same(a, b, wa, wb, g, N);
  mt_optim_destroy(a);
  mt_optim_destroy(b);

  p.amsgrad = 0; /* no max_exp_avg_sq to read */
  CHECK(mt_optim_create(&p, &a) == 0, "create");
  CHECK(mt_optim_register(a, wa, N, MT_DTYPE_F32, g) == 0, "register");
  CHECK(mt_optim_state_read(a, 0, MT_OPTIM_FIELD_MAX_EXP_AVG_SQ, buf, N) == -ENOENT,
        "max_exp_avg_sq without amsgrad");
  mt_optim_destroy(a);
  free(wa), free(wb), free(g), free(buf);
}

static void test_state_raw(int state, int bits) {
  enum { N = 70001 };
  mt_optim_params_t p;
  mt_optim_defaults(&p);
  p.state = state;
  p.threads = 2;
  mt_optim_t *a, *b;
  CHECK(mt_optim_create(&p, &a) == 0 && mt_optim_create(&p, &b) == 0, "create");
  float *wa = malloc(N * 4), *wb = calloc(N, 4), *g = malloc(N * 4), *buf = malloc(N * 4);
  for (int i = 0; i < N; i++) wa[i] = frand();
  CHECK(mt_optim_register(a, wa, N, MT_DTYPE_F32, g) == 0, "register a");
  CHECK(mt_optim_register(b, wb, N, MT_DTYPE_F32, g) == 0, "register b");
  for (int s = 0; s < 3; s++) {
    for (int i = 0; i < N; i++) g[i] = frand();
    CHECK(mt_optim_step(a, 0, 1.0f) == 0, "step");
    CHECK(mt_optim_wait(a) == 0, "wait"); /* before g is refilled */
  }
  mt_optim_param_info_t info;
  CHECK(mt_optim_param_info(a, 0, &info) == 0, "info");
  size_t blocks = (N + 127) / 128;
  CHECK(info.state_bits == bits && info.blocks == blocks &&
            info.code_bytes == blocks * 128 * (size_t)bits / 8,
        "info: bits %d blocks %zu code_bytes %zu", info.state_bits, info.blocks, info.code_bytes);
  uint8_t *codes = malloc(info.code_bytes);
  float *scales = malloc(info.blocks * 4);
  for (int f = MT_OPTIM_FIELD_EXP_AVG; f <= MT_OPTIM_FIELD_EXP_AVG_SQ; f++) {
    CHECK(mt_optim_state_raw_read(a, 0, (mt_optim_field_t)f, codes, info.code_bytes, scales,
                                  info.blocks) == 0,
          "raw read %d", f);
    CHECK(mt_optim_state_raw_write(b, 0, (mt_optim_field_t)f, codes, info.code_bytes, scales,
                                   info.blocks) == 0,
          "raw write %d", f);
  }
  CHECK(mt_optim_state_raw_read(a, 0, MT_OPTIM_FIELD_EXP_AVG, codes, info.code_bytes - 1, scales,
                                info.blocks) == -EINVAL,
        "wrong code_bytes");
  CHECK(mt_optim_state_raw_read(a, 0, MT_OPTIM_FIELD_MASTER, codes, info.code_bytes, scales,
                                info.blocks) == -EINVAL,
        "raw master");
  CHECK(mt_optim_state_read(a, 0, MT_OPTIM_FIELD_MASTER, buf, N) == 0, "read master");
  CHECK(mt_optim_state_write(b, 0, MT_OPTIM_FIELD_MASTER, buf, N) == 0, "write master");
  CHECK(mt_optim_set_step(b, 0, info.step) == 0, "set_step");
  /* the decoded view is readable too */
  CHECK(mt_optim_state_read(a, 0, MT_OPTIM_FIELD_EXP_AVG_SQ, buf, N) == 0, "decode v");
  for (int i = 0; i < N; i++) CHECK(buf[i] >= 0, "decoded v[%d] = %g < 0", i, (double)buf[i]);
  step_both_same(a, b, wa, wb, g, N);
  step_both_same(a, b, wa, wb, g, N);
  mt_optim_destroy(a);
  mt_optim_destroy(b);
  free(codes), free(scales), free(wa), free(wb), free(g), free(buf);
}

int main(void) {
  for (int t = 1; t <= 3; t++) {
    test_queue(t);
    printf("threads %d: queued steps from a hook thread ok\n", t);
  }
  test_state_fp32();
  printf("fp32 state read/write ok\n");
  test_state_raw(MT_OPTIM_STATE_8BIT, 8);
  test_state_raw(MT_OPTIM_STATE_4BIT, 4);
  printf("8/4-bit raw state ok\n");
  return 0;
}
