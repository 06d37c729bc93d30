/*
 * Description: optimizer state on NVMe (libmtalloc/optim/statestore.c).
 * The same parameters stepped with their state forced to the NVMe store
 * and in RAM give the same bits (weights, masters, moments, 8-bit codes
 * and scales; FP32 with AMSGrad, 8-bit, 4-bit with a bf16 gradient), over
 * several 256K-element blocks and a tail; an injected
 * I/O error (EIO, ENOSPC on write, a flipped bit on read) fails the step
 * with the count not advanced, leaves every block either at the new step
 * or at the previous one (weights included), and a second step finishes it
 * bit-identically; checkpoints do not depend on where the state lived
 * (the files are byte for byte the same, and load across); the public
 * state read/write API reads and writes spilled state; the stats count it.
 *
 * nvme_store.c is compiled into this program with -DMT_FAULT_INJECT (see
 * meson.build); files go under MT_NVME_TEST_DIR (O_DIRECT: not tmpfs).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "codec.h"
#include "internal.h"
#include "mtalloc.h"
#include "nvme_store.h"
#include "optim.h"
#include "statestore.h"
#include "stats.h"

#define NP 3
#define BIG ((size_t)600001) /* three blocks, the last 87,857 elements (not a multiple of 128) */
static const size_t sizes[NP] = {BIG, BIG, 7};
static const int dtypes[NP] = {_MT_DT_BF16, _MT_DT_F32, _MT_DT_F32};

static char dir[4096];
static _mt_nvme_t *store;
static _mt_ss_t *ss;

static void setup(void) {
  const char *base = getenv("MT_NVME_TEST_DIR");
  if (!base) base = ".";
  snprintf(dir, sizeof(dir), "%s/ss-test.XXXXXX", base);
  cr_assert_not_null(mkdtemp(dir), "mkdtemp in %s: %s", base, strerror(errno));
  char probe[4200];
  snprintf(probe, sizeof(probe), "%s/probe", dir);
  int fd = open(probe, O_RDWR | O_CREAT | O_DIRECT, 0600);
  if (fd >= 0) close(fd);
  unlink(probe);
  if (fd < 0) {
    rmdir(dir);
    cr_skip_test("%s has no O_DIRECT: set MT_NVME_TEST_DIR to a disk file system", base);
  }
  _mt_nvme_fault_reset();
  _mt_nvme_cfg_t cfg = {.dirs = dir, .max_bytes = (uint64_t)160 << 20, .queue_depth = 8,
                        .numa_node = -1, .wait_ms = 5000};
  cr_assert_eq(_mt_nvme_open(&cfg, &store), 0);
  cr_assert_eq(_mt_ss_open(store, NULL, &ss), 0);
}

static void teardown(void) {
  _mt_nvme_fault_reset();
  if (ss) _mt_ss_close(ss);
  if (store) _mt_nvme_close(store);
  ss = NULL;
  store = NULL;
  char path[4200];
  snprintf(path, sizeof(path), "%s/ck", dir);
  unlink(path);
  snprintf(path, sizeof(path), "%s/ck2", dir);
  unlink(path);
  rmdir(dir);
}

TestSuite(statestore, .init = setup, .fini = teardown, .timeout = 120);

static float val(size_t i, int salt) {
  uint32_t x = (uint32_t)(i * 2654435761u) ^ (uint32_t)(salt * 40503u);
  x ^= x >> 15;
  x *= 2246822519u;
  x ^= x >> 13;
  return (float)(x & 0xffff) / 65536.0f - 0.5f;
}

typedef struct model {
  _mt_optim_t *o;
  void *w[NP];
  float *g[NP];
} model_t;

/* spilled: every parameter's state to the store (the 7-element one too) */
static void make(model_t *m, _mt_codec_t codec, bool amsgrad, bool spilled) {
  _mt_optim_cfg_t cfg = {.hp = {.lr = 1e-2, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8,
                                .weight_decay = 0.01, .decoupled = true, .amsgrad = amsgrad},
                         .isa = _MT_ISA_AUTO, .codec = codec, .threads = 2, .node = -1};
  cr_assert_eq(_mt_optim_create(&cfg, &m->o), 0);
  if (spilled) cr_assert_eq(_mt_optim_set_store(m->o, ss, 1), 0);
  for (int i = 0; i < NP; i++) {
    m->w[i] = calloc(sizes[i], 4);
    m->g[i] = calloc(sizes[i], 4);
    for (size_t k = 0; k < sizes[i]; k++) {
      float x = val(k, i);
      if (dtypes[i] == _MT_DT_F32) ((float *)m->w[i])[k] = x;
      else ((uint16_t *)m->w[i])[k] = _mt_f32_to_bf16(x);
    }
    cr_assert_eq(_mt_optim_add(m->o, m->w[i], sizes[i], dtypes[i], m->g[i]), i);
    cr_assert_eq(_mt_optim_spilled(m->o, i), spilled);
  }
}

static void grads(model_t *m, int step) {
  for (int i = 0; i < NP; i++)
    for (size_t k = 0; k < sizes[i]; k++) m->g[i][k] = val(k, 100 + 7 * step + i);
}

static void destroy(model_t *m) {
  _mt_optim_destroy(m->o);
  for (int i = 0; i < NP; i++) {
    free(m->w[i]);
    free(m->g[i]);
  }
}

static size_t wbytes(int i) {
  return sizes[i] * (dtypes[i] == _MT_DT_F32 ? 4 : 2);
}

/* Field f of parameter i as n floats, wherever it lives. */
static float *field(model_t *m, int i, _mt_ss_field_t f) {
  _mt_optim_view_t v;
  _mt_optim_view(m->o, i, &v);
  float *out = malloc(v.n * 4);
  if (v.sp != NULL && !(f == _MT_SS_MASTER && v.dtype == _MT_DT_F32)) {
    cr_assert_eq(_mt_ss_floats(v.ss, v.sp, f, out, false), 0);
    return out;
  }
  _mt_qtensor_t *q = f == _MT_SS_M ? v.qm : v.qv;
  if (v.quant && f != _MT_SS_MASTER) _mt_codec_decode(q, out, 0, v.n);
  else memcpy(out, f == _MT_SS_MASTER ? v.master : f == _MT_SS_M ? v.m : f == _MT_SS_V ? v.v : v.vmax,
              v.n * 4);
  return out;
}

static void same_state(model_t *a, model_t *b, bool amsgrad) {
  for (int i = 0; i < NP; i++) {
    cr_assert_eq(memcmp(a->w[i], b->w[i], wbytes(i)), 0, "parameter %d: weights differ", i);
    _mt_optim_view_t va, vb;
    _mt_optim_view(a->o, i, &va);
    _mt_optim_view(b->o, i, &vb);
    cr_assert_eq(*va.step, *vb.step);
    for (int f = _MT_SS_MASTER; f <= (amsgrad ? _MT_SS_VMAX : _MT_SS_V); f++) {
      float *x = field(a, i, (_mt_ss_field_t)f), *y = field(b, i, (_mt_ss_field_t)f);
      cr_assert_eq(memcmp(x, y, sizes[i] * 4), 0, "parameter %d: field %d differs", i, f);
      free(x);
      free(y);
    }
  }
}

static void step_all(model_t *m, int s) {
  grads(m, s);
  cr_assert_eq(_mt_optim_step(m->o, -1, 0.75f), 0);
  cr_assert_eq(_mt_optim_wait(m->o), 0);
}

Test(statestore, fp32_amsgrad_bit_identical) {
  model_t a, b;
  make(&a, _MT_CODEC_NONE, true, false);
  make(&b, _MT_CODEC_NONE, true, true);
  for (int s = 0; s < 4; s++) {
    step_all(&a, s);
    step_all(&b, s);
  }
  /* one parameter alone, queued behind another */
  grads(&a, 9);
  grads(&b, 9);
  cr_assert_eq(_mt_optim_step(a.o, 0, 1.0f), 0);
  cr_assert_eq(_mt_optim_step(b.o, 0, 1.0f), 0);
  cr_assert_eq(_mt_optim_step(a.o, 0, 1.0f), 0);
  cr_assert_eq(_mt_optim_step(b.o, 0, 1.0f), 0);
  cr_assert_eq(_mt_optim_wait(a.o), 0);
  cr_assert_eq(_mt_optim_wait(b.o), 0);
  same_state(&a, &b, true);
  destroy(&a);
  destroy(&b);
}

Test(statestore, q8_bit_identical_and_stats) {
  uint64_t bytes0 = mt_stat_get(optim_nvme_bytes), r0 = mt_stat_get(optim_nvme_read),
           w0 = mt_stat_get(optim_nvme_write);
  model_t a, b;
  make(&a, _MT_CODEC_8BIT, false, false);
  make(&b, _MT_CODEC_8BIT, false, true);
  /* two copies of: bf16's master (4) + 8-bit codes (1+1) + scales; F32's codes + scales; 7 FP32 */
  uint64_t on = mt_stat_get(optim_nvme_bytes) - bytes0;
  cr_assert_gt(on, 2 * (BIG * 6 + BIG * 2), "%llu bytes on NVMe", (unsigned long long)on);
  cr_assert_lt(on, 2 * (BIG * 6 + BIG * 2) + (1u << 20));
  for (int s = 0; s < 5; s++) {
    step_all(&a, s);
    step_all(&b, s);
  }
  same_state(&a, &b, false);
  /* the raw codes and scales too */
  for (int i = 0; i < 2; i++) {
    _mt_optim_view_t va, vb;
    _mt_optim_view(a.o, i, &va);
    _mt_optim_view(b.o, i, &vb);
    cr_assert(va.quant && vb.quant);
    size_t cb = _mt_qtensor_code_bytes(va.qm), nb = _mt_qtensor_blocks(va.qm);
    cr_assert_eq(_mt_ss_field_bytes(vb.sp, _MT_SS_QM_CODES), cb);
    uint8_t *c = malloc(cb);
    float *sc = malloc(nb * 4);
    cr_assert_eq(_mt_ss_field(vb.ss, vb.sp, _MT_SS_QV_CODES, 0, cb, c, false), 0);
    cr_assert_eq(_mt_ss_field(vb.ss, vb.sp, _MT_SS_QV_SCALES, 0, nb * 4, sc, false), 0);
    cr_assert_eq(memcmp(c, va.qv->codes, cb), 0);
    cr_assert_eq(memcmp(sc, va.qv->scales, nb * 4), 0);
    free(c);
    free(sc);
  }
  /* every step read and wrote each block once (plus the registration's writes) */
  cr_assert_geq(mt_stat_get(optim_nvme_read) - r0, 5 * on / 2);
  cr_assert_geq(mt_stat_get(optim_nvme_write) - w0, 5 * on / 2 + on / 2);
  destroy(&a);
  destroy(&b);
  cr_assert_eq(mt_stat_get(optim_nvme_bytes), bytes0);
}

Test(statestore, q4_bf16_gradients_bit_identical) {
  model_t a, b;
  _mt_optim_cfg_t cfg = {.hp = {.lr = 1e-2, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8,
                                .weight_decay = 0.01, .decoupled = true},
                         .isa = _MT_ISA_AUTO, .codec = _MT_CODEC_4BIT, .threads = 2, .node = -1};
  model_t *ms[2] = {&a, &b};
  uint16_t *g16 = malloc(BIG * 2);
  for (size_t k = 0; k < BIG; k++) g16[k] = _mt_f32_to_bf16(val(k, 77));
  for (int s = 0; s < 2; s++) { /* one bf16-weight parameter with a bf16 gradient */
    model_t *m = ms[s];
    memset(m, 0, sizeof(*m));
    cr_assert_eq(_mt_optim_create(&cfg, &m->o), 0);
    if (s) cr_assert_eq(_mt_optim_set_store(m->o, ss, 1), 0);
    m->w[0] = malloc(BIG * 2);
    for (size_t k = 0; k < BIG; k++) ((uint16_t *)m->w[0])[k] = _mt_f32_to_bf16(val(k, 5));
    cr_assert_eq(_mt_optim_add_grad(m->o, m->w[0], BIG, _MT_DT_BF16, g16, _MT_DT_BF16), 0);
    for (int t = 0; t < 4; t++) {
      cr_assert_eq(_mt_optim_step(m->o, -1, 1.0f), 0);
      cr_assert_eq(_mt_optim_wait(m->o), 0);
    }
  }
  cr_assert_eq(memcmp(a.w[0], b.w[0], BIG * 2), 0, "weights differ");
  for (int f = _MT_SS_MASTER; f <= _MT_SS_V; f++) {
    float *x = field(&a, 0, (_mt_ss_field_t)f), *y = field(&b, 0, (_mt_ss_field_t)f);
    cr_assert_eq(memcmp(x, y, BIG * 4), 0, "field %d differs", f);
    free(x);
    free(y);
  }
  for (int s = 0; s < 2; s++) {
    _mt_optim_destroy(ms[s]->o);
    free(ms[s]->w[0]);
  }
  free(g16);
}

/* After a failed step: block by block, b's weights are a1's (the previous
 * step) or a2's (the new one), the new ones a prefix of resume blocks. */
static void check_failed(model_t *b, const void *a1[NP], const void *a2[NP]) {
  for (int i = 0; i < NP; i++) {
    _mt_optim_view_t v;
    _mt_optim_view(b->o, i, &v);
    size_t r = _mt_ss_resume(v.sp) * _MT_SS_BLOCK, es = dtypes[i] == _MT_DT_F32 ? 4 : 2;
    if (r > sizes[i]) r = sizes[i];
    cr_assert_eq(memcmp(b->w[i], a2[i], r * es), 0, "parameter %d: committed blocks", i);
    cr_assert_eq(memcmp((char *)b->w[i] + r * es, (const char *)a1[i] + r * es, (sizes[i] - r) * es), 0,
                 "parameter %d: blocks not committed must keep the previous weights", i);
  }
}

static void fault_case(_mt_nvme_fault_t f, uint32_t skip, int want) {
  model_t a, b;
  make(&a, _MT_CODEC_NONE, false, false);
  make(&b, _MT_CODEC_NONE, false, true);
  step_all(&a, 0);
  step_all(&b, 0);
  void *a1[NP];
  for (int i = 0; i < NP; i++) {
    a1[i] = malloc(wbytes(i));
    memcpy(a1[i], a.w[i], wbytes(i));
  }
  step_all(&a, 1);
  grads(&b, 1);
  _mt_nvme_fault_arm(f, skip, 1000);
  cr_assert_eq(_mt_optim_step(b.o, -1, 0.75f), 0);
  int rc = _mt_optim_wait(b.o);
  cr_assert_eq(rc, want, "the step reports %d (%s)", rc, strerror(-rc));
  cr_assert_gt(_mt_nvme_fault_injected(f), 0);
  _mt_nvme_fault_reset();
  _mt_optim_view_t v;
  _mt_optim_view(b.o, 0, &v);
  cr_assert_eq(*v.step, 1.0f, "a failed step does not count");
  check_failed(&b, (const void **)a1, (const void **)a.w);
  /* a checkpoint of a parameter half-way through a step is refused */
  char path[4200], err[512];
  snprintf(path, sizeof(path), "%s/ck", dir);
  bool partial = false;
  for (int i = 0; i < NP; i++) {
    _mt_optim_view(b.o, i, &v);
    partial |= _mt_ss_resume(v.sp) != 0;
  }
  if (partial) cr_assert_eq(_mt_optim_save(b.o, path, err, sizeof(err)), -EAGAIN);
  /* the same step again finishes it */
  cr_assert_eq(_mt_optim_step(b.o, -1, 0.75f), 0);
  cr_assert_eq(_mt_optim_wait(b.o), 0);
  same_state(&a, &b, false);
  for (int i = 0; i < NP; i++) free(a1[i]);
  destroy(&a);
  destroy(&b);
}

Test(statestore, eio_loses_nothing) {
  fault_case(MT_NVME_FAULT_EIO, 9, -EIO);
}

Test(statestore, eio_first_request) {
  fault_case(MT_NVME_FAULT_EIO, 0, -EIO);
}

Test(statestore, nospace_on_write_loses_nothing) {
  fault_case(MT_NVME_FAULT_NOSPC, 2, -ENOSPC);
}

Test(statestore, bit_flip_is_caught) {
  fault_case(MT_NVME_FAULT_FLIP, 5, -EBADMSG);
}

Test(statestore, checkpoint_does_not_depend_on_place) {
  model_t a, b, c;
  make(&a, _MT_CODEC_8BIT, false, false);
  make(&b, _MT_CODEC_8BIT, false, true);
  for (int s = 0; s < 3; s++) {
    step_all(&a, s);
    step_all(&b, s);
  }
  char pa[4200], pb[4200], err[512];
  snprintf(pa, sizeof(pa), "%s/ck", dir);
  snprintf(pb, sizeof(pb), "%s/ck2", dir);
  cr_assert_eq(_mt_optim_save(a.o, pa, err, sizeof(err)), 0, "%s", err);
  cr_assert_eq(_mt_optim_save(b.o, pb, err, sizeof(err)), 0, "%s", err);
  FILE *fa = fopen(pa, "rb"), *fb = fopen(pb, "rb");
  int x, y;
  size_t n = 0;
  do {
    x = fgetc(fa);
    y = fgetc(fb);
    cr_assert_eq(x, y, "the checkpoints differ at byte %zu", n);
    n++;
  } while (x != EOF);
  fclose(fa);
  fclose(fb);
  /* a RAM checkpoint into spilled state, then both go on */
  make(&c, _MT_CODEC_8BIT, false, true);
  cr_assert_eq(_mt_optim_load(c.o, pa, err, sizeof(err)), 0, "%s", err);
  same_state(&a, &c, false);
  step_all(&a, 3);
  step_all(&c, 3);
  same_state(&a, &c, false);
  destroy(&a);
  destroy(&b);
  destroy(&c);
}

Test(statestore, public_state_api) {
  mt_optim_params_t p;
  mt_optim_defaults(&p);
  p.state = MT_OPTIM_STATE_FP32;
  p.threads = 2;
  mt_optim_t *h;
  cr_assert_eq(mt_optim_create(&p, &h), 0);
  cr_assert_eq(_mt_optim_set_store(_mt_optim_of(h), ss, 1), 0);
  size_t n = BIG;
  uint16_t *w = calloc(n, 2);
  float *g = calloc(n, 4), *x = malloc(n * 4), *y = malloc(n * 4);
  for (size_t k = 0; k < n; k++) {
    w[k] = _mt_f32_to_bf16(val(k, 1));
    g[k] = val(k, 2);
    x[k] = val(k, 3) * val(k, 3);
  }
  cr_assert_eq(mt_optim_register(h, w, n, MT_DTYPE_BF16, g), 0);
  cr_assert_eq(mt_optim_state_write(h, 0, MT_OPTIM_FIELD_EXP_AVG_SQ, x, n), 0);
  cr_assert_eq(mt_optim_state_read(h, 0, MT_OPTIM_FIELD_EXP_AVG_SQ, y, n), 0);
  cr_assert_eq(memcmp(x, y, n * 4), 0);
  cr_assert_eq(mt_optim_state_read(h, 0, MT_OPTIM_FIELD_MAX_EXP_AVG_SQ, y, n), -ENOENT);
  /* a master written is the weights' source */
  for (size_t k = 0; k < n; k++) x[k] = (float)k / 1024.0f;
  cr_assert_eq(mt_optim_state_write(h, 0, MT_OPTIM_FIELD_MASTER, x, n), 0);
  for (size_t k = 0; k < n; k += 4099) cr_assert_eq(w[k], _mt_f32_to_bf16(x[k]));
  cr_assert_eq(mt_optim_step(h, -1, 1.0f), 0);
  cr_assert_eq(mt_optim_wait(h), 0);
  mt_optim_param_info_t info;
  cr_assert_eq(mt_optim_param_info(h, 0, &info), 0);
  cr_assert_eq(info.step, 1.0f);
  mt_optim_destroy(h);
  free(w);
  free(g);
  free(x);
  free(y);
}
