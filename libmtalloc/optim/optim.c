/*
 * optim.c - the host optimizer object: registered parameters, their FP32
 * masters and Adam state, and the step that runs them on the pool.
 *
 * The concept: a step is one pool job. Every registered parameter stepped
 * is cut into tasks of TASK_ELEMS (64K) elements, a multiple of the codecs'
 * 128-element blocks and large enough (1.75 MiB of FP32 traffic) that
 * handing out a task costs nothing next to running it; inside a task the
 * kernel makes one fused pass per cache-sized block (adam_kernels.c,
 * 2048 elements, about 40 KiB of arrays) and writes the device copy from
 * that block while it is in L1. Workers take tasks in order.
 *
 * Invariants: parameters are only added while no step is in flight; the
 * per-step scalars (adam.c) are computed on the submitting thread for each
 * parameter from its own step count (a float, as torch keeps it), so
 * stepping one parameter alone advances only its count. Masters: F32
 * weights are their own master and are updated in place; bf16/fp16
 * weights get an FP32 master owned here, and the rounded result is written
 * back into the caller's array by the kernel, block by block. Gradients
 * stay the caller's, f32 or bf16/fp16 (widened as the kernel loads them).
 * The global gradient norm (_mt_optim_grad_norm) is one pool job of one
 * task per parameter: a tensor's reduction order is torch's only when one
 * thread walks it (gradnorm.c).
 *
 * Threading: one owner thread calls everything here; the pool's workers
 * touch only the arrays of the tasks they take, which are disjoint.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"
#include "optim.h"
#include "pool.h"

#define TASK_ELEMS ((size_t)1 << 16)

typedef struct param {
  void *weights;   /* caller's array, dtype */
  int dtype;       /* _MT_DT_* */
  size_t n;
  const void *grad; /* the caller's, grad_dtype */
  int grad_dtype;   /* _MT_DT_* */
  float *master;   /* == weights for F32 */
  float *m, *v, *vmax;  /* FP32 state; m, v NULL when quantised */
  _mt_qtensor_t qm, qv; /* quantised state (codec != none, n >= _MT_CODEC_MIN_ELEMS) */
  int quant;
  float step;      /* torch's float32 step count */
  _mt_adam_scalars_t sc; /* this step's scalars */
} param_t;

typedef struct task {
  uint32_t param;
  size_t begin, end;
} task_t;

struct _mt_optim {
  _mt_optim_cfg_t cfg;
  _mt_adam_kernel_fn kernel;
  _mt_adam_kernel_q_fn kernel_q; /* quantised state: scalar when isa is SCALAR, else AVX2 if any */
  _mt_pool_t *pool;
  param_t *params;
  int nparams, cap;
  task_t *tasks;
  size_t ntasks, tasks_cap;
  bool in_flight;
  float *norms; /* _mt_optim_grad_norm's per-parameter norms, cap entries */
};

static float *alloc_floats(size_t n) {
  size_t bytes = (n * sizeof(float) + 63) & ~(size_t)63;
  float *p = aligned_alloc(64, bytes ? bytes : 64);
  if (p != NULL)
    memset(p, 0, bytes);
  return p;
}

int _mt_optim_create(const _mt_optim_cfg_t *cfg, _mt_optim_t **out) {
  _mt_adam_scalars_t probe;
  if (_mt_adam_scalars(&cfg->hp, 1.0f, 1.0f, &probe) != 0)
    return -EINVAL;
  _mt_adam_kernel_fn k = _mt_adam_kernel(cfg->isa);
  if (k == NULL)
    return -ENOTSUP;
  if (cfg->codec != _MT_CODEC_NONE && cfg->hp.amsgrad)
    return -ENOTSUP; /* the quantised kernel keeps no AMSGrad maximum */
  if ((unsigned)cfg->codec > _MT_CODEC_2BIT)
    return -EINVAL;
  _mt_optim_t *o = calloc(1, sizeof(*o));
  if (o == NULL)
    return -ENOMEM;
  o->cfg = *cfg;
  o->kernel = k;
  o->kernel_q = _mt_codec_kernel_q(cfg->isa == _MT_ISA_SCALAR ? _MT_ISA_SCALAR : _MT_ISA_AUTO);
  int rc = _mt_pool_create(cfg->threads, cfg->node, &o->pool);
  if (rc != 0) {
    free(o);
    return rc;
  }
  *out = o;
  return 0;
}

void _mt_optim_destroy(_mt_optim_t *o) {
  if (o == NULL)
    return;
  _mt_pool_destroy(o->pool);
  for (int i = 0; i < o->nparams; i++) {
    param_t *p = &o->params[i];
    if (p->master != p->weights)
      free(p->master);
    free(p->m);
    free(p->v);
    free(p->vmax);
    _mt_qtensor_free(&p->qm);
    _mt_qtensor_free(&p->qv);
  }
  free(o->params);
  free(o->norms);
  free(o->tasks);
  free(o);
}

static bool dtype_ok(int dtype) {
  return dtype == _MT_DT_F32 || dtype == _MT_DT_BF16 || dtype == _MT_DT_F16;
}

int _mt_optim_add(_mt_optim_t *o, void *weights, size_t count, int dtype, const float *grad) {
  return _mt_optim_add_grad(o, weights, count, dtype, grad, _MT_DT_F32);
}

int _mt_optim_add_grad(_mt_optim_t *o, void *weights, size_t count, int dtype, const void *grad,
                       int grad_dtype) {
  if (o->in_flight)
    return -EBUSY;
  if (weights == NULL || grad == NULL || count == 0 || !dtype_ok(dtype) || !dtype_ok(grad_dtype))
    return -EINVAL;
  if (o->nparams == o->cap) {
    int cap = o->cap ? 2 * o->cap : 16;
    param_t *np = realloc(o->params, (size_t)cap * sizeof(*np));
    if (np == NULL)
      return -ENOMEM;
    o->params = np;
    float *nn = realloc(o->norms, (size_t)cap * sizeof(*nn));
    if (nn == NULL)
      return -ENOMEM; /* params grew, cap did not: the next add retries */
    o->norms = nn;
    o->cap = cap;
  }
  param_t p = {.weights = weights, .dtype = dtype, .n = count, .grad = grad,
               .grad_dtype = grad_dtype};
  static const int bits[] = {0, 8, 4, 2};
  p.quant = o->cfg.codec != _MT_CODEC_NONE && count >= _MT_CODEC_MIN_ELEMS;
  bool ok;
  if (p.quant) {
    ok = _mt_qtensor_alloc(&p.qm, count, bits[o->cfg.codec], 1) == 0 &&
         _mt_qtensor_alloc(&p.qv, count, bits[o->cfg.codec], 0) == 0;
  } else {
    p.m = alloc_floats(count);
    p.v = alloc_floats(count);
    p.vmax = o->cfg.hp.amsgrad ? alloc_floats(count) : NULL;
    ok = p.m != NULL && p.v != NULL && (!o->cfg.hp.amsgrad || p.vmax != NULL);
  }
  p.master = dtype == _MT_DT_F32 ? weights : alloc_floats(count);
  if (!ok || p.master == NULL) {
    free(p.m);
    free(p.v);
    free(p.vmax);
    _mt_qtensor_free(&p.qm);
    _mt_qtensor_free(&p.qv);
    if (p.master != weights)
      free(p.master);
    return -ENOMEM;
  }
  if (dtype != _MT_DT_F32)
    for (size_t i = 0; i < count; i++)
      p.master[i] = dtype == _MT_DT_BF16 ? _mt_bf16_to_f32(((uint16_t *)weights)[i])
                                        : _mt_f16_to_f32(((uint16_t *)weights)[i]);
  o->params[o->nparams] = p;
  return o->nparams++;
}

int _mt_optim_count(const _mt_optim_t *o) {
  return o->nparams;
}

int _mt_optim_threads(const _mt_optim_t *o) {
  return _mt_pool_threads(o->pool);
}

static void run_task(void *arg, size_t t) {
  _mt_optim_t *o = arg;
  const task_t *tk = &o->tasks[t];
  param_t *p = &o->params[tk->param];
  _mt_adam_args_t a = {.p = p->master, .m = p->m, .v = p->v, .vmax = p->vmax,
                       .g = p->grad_dtype == _MT_DT_F32 ? p->grad : NULL,
                       .g16 = p->grad_dtype == _MT_DT_F32 ? NULL : p->grad,
                       .g_dtype = p->grad_dtype,
                       .out = p->dtype == _MT_DT_F32 ? NULL : p->weights,
                       .out_dtype = p->dtype};
  if (p->quant)
    o->kernel_q(&p->sc, &a, &p->qm, &p->qv, tk->begin, tk->end);
  else
    o->kernel(&p->sc, &a, tk->begin, tk->end);
}

static int add_tasks(_mt_optim_t *o, int i) {
  param_t *p = &o->params[i];
  size_t need = o->ntasks + (p->n + TASK_ELEMS - 1) / TASK_ELEMS;
  if (need > o->tasks_cap) {
    size_t cap = need * 2;
    task_t *nt = realloc(o->tasks, cap * sizeof(*nt));
    if (nt == NULL)
      return -ENOMEM;
    o->tasks = nt;
    o->tasks_cap = cap;
  }
  for (size_t b = 0; b < p->n; b += TASK_ELEMS)
    o->tasks[o->ntasks++] =
        (task_t){.param = (uint32_t)i, .begin = b, .end = p->n - b < TASK_ELEMS ? p->n : b + TASK_ELEMS};
  return 0;
}

int _mt_optim_step(_mt_optim_t *o, int param, float clip) {
  if (o->in_flight)
    return -EBUSY;
  if (param < -1 || param >= o->nparams || !(clip >= 0))
    return -EINVAL;
  int lo = param < 0 ? 0 : param, hi = param < 0 ? o->nparams : param + 1;
  o->ntasks = 0;
  for (int i = lo; i < hi; i++) {
    param_t *p = &o->params[i];
    int rc = _mt_adam_scalars(&o->cfg.hp, p->step + 1.0f, clip, &p->sc);
    if (rc == 0)
      rc = add_tasks(o, i);
    if (rc != 0)
      return rc; /* nothing submitted, no step count advanced */
  }
  for (int i = lo; i < hi; i++)
    o->params[i].step += 1.0f;
  o->in_flight = true;
  _mt_pool_submit(o->pool, o->ntasks, run_task, o);
  return 0;
}

static void norm_task(void *arg, size_t i) {
  _mt_optim_t *o = arg;
  const param_t *p = &o->params[i];
  o->norms[i] = _mt_grad_norm2(p->grad, p->grad_dtype, p->n, o->cfg.isa);
}

int _mt_optim_grad_norm(_mt_optim_t *o, float *total) {
  if (o->in_flight)
    return -EBUSY;
  if (o->nparams == 0) {
    *total = 0.0f; /* torch: the norm of no gradients is tensor(0.) */
    return 0;
  }
  /* one task per parameter: a tensor's lanes run through it in order */
  _mt_pool_submit(o->pool, (size_t)o->nparams, norm_task, o);
  _mt_pool_wait(o->pool);
  *total = _mt_grad_norm2(o->norms, _MT_DT_F32, (size_t)o->nparams, o->cfg.isa);
  return 0;
}

void _mt_optim_wait(_mt_optim_t *o) {
  if (!o->in_flight)
    return;
  _mt_pool_wait(o->pool);
  o->in_flight = false;
}

const _mt_optim_cfg_t *_mt_optim_cfg(const _mt_optim_t *o) {
  return &o->cfg;
}

int _mt_optim_busy(const _mt_optim_t *o) {
  return o->in_flight;
}

void _mt_optim_view(_mt_optim_t *o, int param, _mt_optim_view_t *out) {
  param_t *p = &o->params[param];
  *out = (_mt_optim_view_t){.n = p->n, .dtype = p->dtype, .quant = p->quant, .step = &p->step,
                            .master = p->master, .m = p->m, .v = p->v, .vmax = p->vmax,
                            .qm = &p->qm, .qv = &p->qv};
}

void _mt_optim_refresh_weights(_mt_optim_t *o, int param) {
  param_t *p = &o->params[param];
  if (p->dtype == _MT_DT_F32)
    return;
  uint16_t *w = p->weights;
  for (size_t i = 0; i < p->n; i++)
    w[i] = p->dtype == _MT_DT_BF16 ? _mt_f32_to_bf16(p->master[i]) : _mt_f32_to_f16(p->master[i]);
}
