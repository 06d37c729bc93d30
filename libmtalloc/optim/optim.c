/*
 * optim.c - the host optimizer object: registered parameters, their FP32
 * masters and Adam state, and the step that runs them on the pool.
 *
 * The concept: stepping a parameter is one pool job (pool.c). The job is
 * cut into tasks of TASK_ELEMS (64K) elements, a multiple of the codecs'
 * 128-element blocks and large enough (1.75 MiB of FP32 traffic) that
 * handing out a task costs nothing next to running it; inside a task the
 * kernel makes one fused pass per cache-sized block (adam_kernels.c,
 * 2048 elements, about 40 KiB of arrays) and writes the device copy from
 * that block while it is in L1. A step of all parameters queues one job
 * per parameter; workers flow from one job to the next, so it runs as one
 * stream of tasks. Steps of single parameters queue the same way while
 * others are in flight: a post-accumulate-grad hook can start parameter
 * i's update while backward still computes parameter i-1's gradient.
 *
 * Invariants: parameters are only added while nothing is in flight; a
 * parameter has at most one job in flight (its ticket `job`): stepping it
 * again, changing its gradient pointer or touching its state first waits
 * for that job, so a job's arrays and scalars are never written under it.
 * The per-step scalars (adam.c) are computed on the submitting thread for
 * each parameter from its own hyper-parameters (torch's param group) and
 * its own step count (a float, as torch keeps state['step']), so stepping
 * one parameter alone advances only its count. Masters: F32 weights are
 * their own master and are updated in place; bf16/fp16 weights get an FP32
 * master owned here, and the rounded result is written back into the
 * caller's array by the kernel, block by block. Gradients stay the
 * caller's, f32 or bf16/fp16 (widened as the kernel loads them). The global
 * gradient norm (_mt_optim_grad_norm) is one pool job of one task per
 * parameter: a tensor's reduction order is torch's only when one thread
 * walks it (gradnorm.c).
 *
 * Spilled state: a parameter whose state does not fit in what MT_MAX_HOST
 * has left is registered with its state in the NVMe store instead
 * (statestore.c), when there is one; its step is one pool job of one task
 * that streams the state block by block through the same kernels, so its
 * results are the bits host-resident state would give. The decision is
 * made once, at registration: a probe of the budget for the whole state
 * (_mt_host_try_reserve), so that a parameter is never half in each.
 *
 * Threading: one thread at a time calls everything here (the owner, or a
 * framework hook thread while the owner waits in backward); the pool's
 * workers touch only the arrays of the tasks they take, which are disjoint.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"
#include "hostmem.h"
#include "internal.h"
#include "optim.h"
#include "pager.h"
#include "pool.h"
#include "statestore.h"

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
  _mt_adam_hp_t hp;      /* this parameter's group's hyper-parameters */
  _mt_adam_scalars_t sc; /* the scalars of the step in flight */
  uint64_t job;          /* pool ticket of its last step (_MT_POOL_NO_TICKET: none) */
  _mt_ss_param_t *sp;    /* state on NVMe (statestore.c); NULL: in host memory */
  int io_err;            /* the spilled step's result, read after its job */
  struct _mt_optim *owner; /* for the pool's task function */
} param_t;

struct _mt_optim {
  _mt_optim_cfg_t cfg;
  _mt_adam_kernel_fn kernel;
  _mt_adam_kernel_q_fn kernel_q; /* quantised state: scalar when isa is SCALAR, else AVX2 if any */
  _mt_pool_t *pool;
  param_t *params;
  int nparams, cap;
  bool in_flight; /* a job queued since the last _mt_optim_wait */
  float *norms; /* _mt_optim_grad_norm's per-parameter norms, cap entries */
  _mt_ss_t *ss;  /* where state goes past MT_MAX_HOST; NULL until needed */
  bool ss_owned; /* ss is the pager's store's, opened here */
  bool spill_always;
  bool no_store; /* looked for the pager's NVMe tier: there is none */
  int err;       /* first failed spilled step since the last _mt_optim_wait */
};

/* Masters and moments: zeroed, aligned, on the GPU's node, in MT_MAX_HOST
 * (hostmem.c). */
static float *alloc_floats(size_t n) {
  return _mt_optim_mem_alloc(n * sizeof(float));
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
      _mt_optim_mem_free(p->master);
    _mt_optim_mem_free(p->m);
    _mt_optim_mem_free(p->v);
    _mt_optim_mem_free(p->vmax);
    if (p->sp != NULL) {
      _mt_ss_drop(o->ss, p->sp); /* qm, qv: shells without memory */
      continue;
    }
    _mt_qtensor_free(&p->qm);
    _mt_qtensor_free(&p->qv);
  }
  if (o->ss_owned)
    _mt_ss_close(o->ss);
  free(o->params);
  free(o->norms);
  free(o);
}

static bool dtype_ok(int dtype) {
  return dtype == _MT_DT_F32 || dtype == _MT_DT_BF16 || dtype == _MT_DT_F16;
}

/* Bytes of host memory p's masters and state take. */
static size_t state_bytes(const _mt_optim_t *o, const param_t *p) {
  size_t b = p->dtype == _MT_DT_F32 ? 0 : p->n * sizeof(float);
  if (p->quant) {
    static const int bits[] = {0, 8, 4, 2};
    _mt_qtensor_t q = {.n = p->n, .bits = bits[o->cfg.codec]};
    return b + 2 * (_mt_qtensor_code_bytes(&q) + _mt_qtensor_blocks(&q) * sizeof(float));
  }
  return b + (o->cfg.hp.amsgrad ? 3 : 2) * p->n * sizeof(float);
}

/* Whether p's state goes to NVMe: always (tests), or when there is a store
 * and the budget has no room for the whole state. */
static bool wants_spill(_mt_optim_t *o, const param_t *p) {
  if (o->spill_always)
    return o->ss != NULL;
  if (o->ss == NULL && o->no_store)
    return false; /* the host allocation says why it failed */
  size_t bytes = state_bytes(o, p);
  if (_mt_host_try_reserve(bytes) == 0) {
    _mt_host_unreserve(bytes); /* the room is made: the allocations take it */
    return false;
  }
  if (o->ss == NULL) {
    if (_mt_ss_from_pager(&o->ss) != 0) {
      o->no_store = true;
      return false;
    }
    o->ss_owned = true;
  }
  return true;
}

static int spill(_mt_optim_t *o, param_t *p) {
  static const int bits[] = {0, 8, 4, 2};
  _mt_ss_layout_t l = {.n = p->n, .dtype = p->dtype, .bits = p->quant ? bits[o->cfg.codec] : 0,
                       .amsgrad = o->cfg.hp.amsgrad};
  int rc = _mt_ss_add(o->ss, &l, p->weights, (uint64_t)o->nparams, &p->sp);
  if (rc != 0) {
    mt_error("host optimizer: parameter %d (%zu elements) has no room in MT_MAX_HOST and could "
             "not go to the NVMe store (MT_OFFLOAD_DIR): raise MT_MAX_HOST or MT_MAX_NVME",
             o->nparams, p->n);
    return rc == -ENOSPC ? -ENOMEM : rc;
  }
  if (p->quant) { /* shells: n and bits for the checkpoint and param_info */
    p->qm = (_mt_qtensor_t){.n = p->n, .bits = l.bits, .is_signed = 1};
    p->qv = (_mt_qtensor_t){.n = p->n, .bits = l.bits, .is_signed = 0};
  }
  p->master = p->dtype == _MT_DT_F32 ? p->weights : NULL;
  o->params[o->nparams] = *p;
  return o->nparams++;
}

int _mt_optim_set_store(_mt_optim_t *o, _mt_ss_t *ss, int always) {
  if (o->in_flight || o->ss_owned)
    return -EBUSY;
  for (int i = 0; i < o->nparams; i++)
    if (o->params[i].sp != NULL && ss != o->ss)
      return -EBUSY; /* spilled parameters stay in their store */
  o->ss = ss;
  o->spill_always = always != 0;
  return 0;
}

int _mt_optim_spilled(const _mt_optim_t *o, int param) {
  return o->params[param].sp != NULL;
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
               .grad_dtype = grad_dtype, .hp = o->cfg.hp, .job = _MT_POOL_NO_TICKET,
               .owner = o};
  static const int bits[] = {0, 8, 4, 2};
  p.quant = o->cfg.codec != _MT_CODEC_NONE && count >= _MT_CODEC_MIN_ELEMS;
  if (wants_spill(o, &p))
    return spill(o, &p);
  bool ok;
  if (p.quant) {
    ok = _mt_qtensor_alloc(&p.qm, count, bits[o->cfg.codec], 1) == 0 &&
         _mt_qtensor_alloc(&p.qv, count, bits[o->cfg.codec], 0) == 0;
  } else {
    /* each after the one before succeeded: a full budget says so once */
    p.m = alloc_floats(count);
    p.v = p.m ? alloc_floats(count) : NULL;
    p.vmax = p.v && o->cfg.hp.amsgrad ? alloc_floats(count) : NULL;
    ok = p.m != NULL && p.v != NULL && (!o->cfg.hp.amsgrad || p.vmax != NULL);
  }
  p.master = !ok || dtype == _MT_DT_F32 ? weights : alloc_floats(count);
  if (!ok || p.master == NULL) {
    _mt_optim_mem_free(p.m);
    _mt_optim_mem_free(p.v);
    _mt_optim_mem_free(p.vmax);
    _mt_qtensor_free(&p.qm);
    _mt_qtensor_free(&p.qv);
    if (p.master != weights)
      _mt_optim_mem_free(p.master);
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

/* Task t of a parameter's job: elements [t * TASK_ELEMS, ...) of it. */
static void run_task(void *arg, size_t t) {
  param_t *p = arg;
  _mt_optim_t *o = p->owner;
  size_t begin = t * TASK_ELEMS, end = p->n - begin < TASK_ELEMS ? p->n : begin + TASK_ELEMS;
  _mt_adam_args_t a = {.p = p->master, .m = p->m, .v = p->v, .vmax = p->vmax,
                       .g = p->grad_dtype == _MT_DT_F32 ? p->grad : NULL,
                       .g16 = p->grad_dtype == _MT_DT_F32 ? NULL : p->grad,
                       .g_dtype = p->grad_dtype,
                       .out = p->dtype == _MT_DT_F32 ? NULL : p->weights,
                       .out_dtype = p->dtype};
  if (p->quant)
    o->kernel_q(&p->sc, &a, &p->qm, &p->qv, begin, end);
  else
    o->kernel(&p->sc, &a, begin, end);
}

/* One block of a spilled parameter (statestore.c): the same kernels on
 * the block's staging arrays, as if they were a tensor of their own. */
static void update_block(void *arg, _mt_ss_block_t *b) {
  param_t *p = arg;
  _mt_optim_t *o = p->owner;
  bool g32 = p->grad_dtype == _MT_DT_F32;
  _mt_adam_args_t a = {.p = b->master, .m = b->m, .v = b->v, .vmax = b->vmax,
                       .g = g32 ? (const float *)p->grad + b->begin : NULL,
                       .g16 = g32 ? NULL : (const uint16_t *)p->grad + b->begin,
                       .g_dtype = p->grad_dtype, .out = b->out, .out_dtype = p->dtype};
  if (p->quant)
    o->kernel_q(&p->sc, &a, &b->qm, &b->qv, 0, b->len);
  else
    o->kernel(&p->sc, &a, 0, b->len);
}

static void run_spilled(void *arg, size_t t) {
  (void)t;
  param_t *p = arg;
  p->io_err = _mt_ss_step(p->owner->ss, p->sp, update_block, p);
}

/* After p's job: a failed spilled step did not happen, as far as the
 * count goes (its committed blocks are remembered by the store). */
static void settle(_mt_optim_t *o, param_t *p) {
  p->job = _MT_POOL_NO_TICKET;
  if (p->io_err == 0)
    return;
  p->step -= 1.0f;
  if (o->err == 0)
    o->err = p->io_err;
  p->io_err = 0;
}

void _mt_optim_wait_param(_mt_optim_t *o, int param) {
  param_t *p = &o->params[param];
  _mt_pool_wait_ticket(o->pool, p->job);
  settle(o, p);
}

int _mt_optim_step(_mt_optim_t *o, int param, float clip) {
  if (param < -1 || param >= o->nparams || !(clip >= 0))
    return -EINVAL;
  int lo = param < 0 ? 0 : param, hi = param < 0 ? o->nparams : param + 1;
  /* every scalar first: a bad hyper-parameter submits nothing and
   * advances no step count */
  for (int i = lo; i < hi; i++) {
    param_t *p = &o->params[i];
    _mt_optim_wait_param(o, i); /* its previous step reads p->sc */
    int rc = _mt_adam_scalars(&p->hp, p->step + 1.0f, clip, &p->sc);
    if (rc != 0)
      return rc;
  }
  for (int i = lo; i < hi; i++) {
    param_t *p = &o->params[i];
    p->step += 1.0f;
    p->job = p->sp != NULL ? _mt_pool_enqueue(o->pool, 1, run_spilled, p)
                           : _mt_pool_enqueue(o->pool, (p->n + TASK_ELEMS - 1) / TASK_ELEMS, run_task, p);
  }
  o->in_flight = true;
  return 0;
}

int _mt_optim_set_grad(_mt_optim_t *o, int param, const void *grad) {
  if (param < 0 || param >= o->nparams || grad == NULL)
    return -EINVAL;
  _mt_optim_wait_param(o, param); /* its step in flight reads the old one */
  o->params[param].grad = grad;
  return 0;
}

int _mt_optim_set_hp(_mt_optim_t *o, int param, const _mt_adam_hp_t *hp) {
  _mt_adam_scalars_t probe;
  if (param < -1 || param >= o->nparams || _mt_adam_scalars(hp, 1.0f, 1.0f, &probe) != 0)
    return -EINVAL;
  /* which optimizer it is, and whether state has the AMSGrad maximum, were
   * fixed at creation */
  if (hp->decoupled != o->cfg.hp.decoupled || hp->amsgrad != o->cfg.hp.amsgrad)
    return -EINVAL;
  /* read only when a step is submitted: no wait needed */
  if (param < 0) {
    o->cfg.hp = *hp;
    for (int i = 0; i < o->nparams; i++)
      o->params[i].hp = *hp;
  } else {
    o->params[param].hp = *hp;
  }
  return 0;
}

const _mt_adam_hp_t *_mt_optim_hp(const _mt_optim_t *o, int param) {
  return param < 0 ? &o->cfg.hp : &o->params[param].hp;
}

uint64_t _mt_optim_work_ns(const _mt_optim_t *o) {
  return _mt_pool_work_ns(o->pool);
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
  _mt_pool_wait_ticket(o->pool, _mt_pool_enqueue(o->pool, (size_t)o->nparams, norm_task, o));
  *total = _mt_grad_norm2(o->norms, _MT_DT_F32, (size_t)o->nparams, o->cfg.isa);
  return 0;
}

int _mt_optim_wait(_mt_optim_t *o) {
  if (o->in_flight) {
    _mt_pool_wait(o->pool);
    for (int i = 0; i < o->nparams; i++)
      settle(o, &o->params[i]);
    o->in_flight = false;
  }
  int rc = o->err;
  o->err = 0;
  return rc;
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
                            .qm = &p->qm, .qv = &p->qv, .ss = o->ss, .sp = p->sp};
}

int _mt_optim_refresh_weights(_mt_optim_t *o, int param) {
  param_t *p = &o->params[param];
  if (p->dtype == _MT_DT_F32)
    return 0;
  if (p->sp != NULL)
    return _mt_ss_refresh_weights(o->ss, p->sp);
  uint16_t *w = p->weights;
  for (size_t i = 0; i < p->n; i++)
    w[i] = p->dtype == _MT_DT_BF16 ? _mt_f32_to_bf16(p->master[i]) : _mt_f32_to_f16(p->master[i]);
  return 0;
}
