/*
 * api.c - the public host-optimizer API of mtalloc.h (mt_optim_*), a thin
 * layer over optim.c: it maps public enums and defaults to the internal
 * ones, reads MT_THREADS, MT_OPTIMIZER_COMPRESSION and MT_OPTIM_KERNEL from
 * the one options table, and keeps the last save/load error text for
 * mt_optim_error. Device parameters (devparam.c) are ordered here: a
 * parameter's gradient buffer is refilled, and its state read or written,
 * only after its own step in flight is over.
 *
 * Threading: as optim.c, one thread at a time per optimizer.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "mtalloc.h"
#include "codec.h"
#include "devparam.h"
#include "optim.h"
#include "statestore.h"

_Static_assert((int)MT_OPTIM_KERNEL_SCALAR == (int)_MT_ISA_SCALAR &&
                   (int)MT_OPTIM_KERNEL_AVX2 == (int)_MT_ISA_AVX2 &&
                   (int)MT_OPTIM_KERNEL_AVX512 == (int)_MT_ISA_AVX512 &&
                   (int)MT_OPTIM_KERNEL_TORCH_MKL == (int)_MT_ISA_MKL,
               "public kernel ids, MT_OPTIM_KERNEL's choices and _mt_adam_isa_t agree");

struct mt_optim {
  _mt_optim_t *o;
  _mt_devparams_t dev; /* parameters in GPU memory (devparam.c) */
  char err[512];
};

_mt_optim_t *_mt_optim_of(mt_optim_t *h) {
  return h->o;
}

static size_t dtype_bytes(mt_dtype_t t) {
  return t == MT_DTYPE_F32 ? 4 : 2;
}

MT_API void mt_optim_defaults(mt_optim_params_t *p) {
  *p = (mt_optim_params_t){.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8,
                           .weight_decay = 1e-2, .adamw = 1, .kernel = MT_OPTIM_KERNEL_AUTO,
                           .state = MT_OPTIM_STATE_DEFAULT, .threads = 0};
}

MT_API int mt_optim_create(const mt_optim_params_t *p, mt_optim_t **out) {
  _mt_options_init();
  if (p->kernel < MT_OPTIM_KERNEL_AUTO || p->kernel > MT_OPTIM_KERNEL_TORCH_MKL ||
      p->state < MT_OPTIM_STATE_DEFAULT || p->state > MT_OPTIM_STATE_2BIT || p->threads < 0)
    return -EINVAL;
  /* the option's choice index is none|8bit|4bit|2bit, the same order */
  int state = p->state == MT_OPTIM_STATE_DEFAULT ? (int)_mt_opt_int(MT_OPT_OPTIMIZER_COMPRESSION)
                                                 : p->state;
  if (state != MT_OPTIM_STATE_FP32 && p->amsgrad)
    return -EINVAL;
  _mt_optim_cfg_t cfg = {
      .hp = {.lr = p->lr, .beta1 = p->beta1, .beta2 = p->beta2, .eps = p->eps,
             .weight_decay = p->weight_decay, .decoupled = p->adamw != 0,
             .amsgrad = p->amsgrad != 0, .maximize = p->maximize != 0},
      /* the option's choice index is auto|scalar|avx2|avx512|mkl, the
       * enum's order: a caller's AUTO leaves the choice to the environment,
       * so a test or a user can force one kernel without a rebuild */
      .isa = (_mt_adam_isa_t)(p->kernel == MT_OPTIM_KERNEL_AUTO
                                  ? (int)_mt_opt_int(MT_OPT_OPTIM_KERNEL)
                                  : p->kernel),
      .codec = (_mt_codec_t)state,
      .threads = p->threads ? p->threads : (int)_mt_opt_int(MT_OPT_THREADS),
      .node = (int)_mt_opt_int(MT_OPT_NUMA_NODE),
  };
  mt_optim_t *h = calloc(1, sizeof(*h));
  if (h == NULL)
    return -ENOMEM;
  int rc = _mt_optim_create(&cfg, &h->o);
  if (rc != 0) {
    free(h);
    return rc;
  }
  *out = h;
  return 0;
}

MT_API void mt_optim_destroy(mt_optim_t *o) {
  if (o == NULL)
    return;
  _mt_optim_wait(o->o);
  _mt_optim_destroy(o->o);
  _mt_devparam_free(&o->dev);
  free(o);
}

MT_API int mt_optim_register(mt_optim_t *o, void *weights, size_t count, mt_dtype_t dtype,
                             const float *grad) {
  return _mt_optim_add(o->o, weights, count, (int)dtype, grad);
}

MT_API int mt_optim_register_grad(mt_optim_t *o, void *weights, size_t count, mt_dtype_t dtype,
                                  const void *grad, mt_dtype_t grad_dtype) {
  return _mt_optim_add_grad(o->o, weights, count, (int)dtype, grad, (int)grad_dtype);
}

MT_API int mt_optim_register_device(mt_optim_t *o, void *weights, size_t count, mt_dtype_t dtype,
                                    const void *grad, mt_dtype_t grad_dtype) {
  if (count == 0 || dtype > MT_DTYPE_F16 || grad_dtype > MT_DTYPE_F16) return -EINVAL;
  _mt_devparam_t *d;
  int rc = _mt_devparam_new(&o->dev, (uintptr_t)weights, count * dtype_bytes(dtype), (uintptr_t)grad,
                            count * dtype_bytes(grad_dtype), &d);
  if (rc < 0) return rc;
  /* the weights are the optimizer's from now on: their host copy gets the
   * values just read and the device copy is dropped, so they start clean
   * (a copy or memset that wrote them left them dirty) and no eviction of
   * them copies anything back. Before the registration: a failure leaves
   * nothing registered (the values written are the ones already there). */
  rc = _mt_devparam_write(d);
  if (rc < 0) {
    _mt_devparam_drop_last(&o->dev);
    return rc;
  }
  rc = _mt_optim_add_grad(o->o, d->hw, count, (int)dtype, d->hg, (int)grad_dtype);
  if (rc < 0) {
    _mt_devparam_drop_last(&o->dev);
    return rc;
  }
  d->index = rc;
  return rc;
}

/* The device parameter behind optimizer index param, or NULL. */
static _mt_devparam_t *devparam_of(mt_optim_t *o, int param) {
  for (size_t i = 0; i < o->dev.n; i++)
    if (o->dev.v[i].index == param) return &o->dev.v[i];
  return NULL;
}

MT_API int mt_optim_step(mt_optim_t *o, int param, float clip_coef) {
  if (param < -1 || param >= _mt_optim_count(o->o)) return -EINVAL;
  /* a step in flight reads its gradient buffer: wait before refilling it */
  for (size_t i = 0; i < o->dev.n; i++)
    if (param < 0 || o->dev.v[i].index == param) _mt_optim_wait_param(o->o, o->dev.v[i].index);
  int rc = _mt_devparam_pull(&o->dev, param); /* device gradients into their buffers */
  if (rc < 0) return rc;
  return _mt_optim_step(o->o, param, clip_coef);
}

MT_API int mt_optim_wait(mt_optim_t *o) {
  int rc = _mt_optim_wait(o->o); /* a failed step of state on NVMe */
  int pr = _mt_devparam_push(&o->dev, false);
  return rc != 0 ? rc : pr;
}

MT_API int mt_optim_set_grad(mt_optim_t *o, int param, const void *grad) {
  if (param < 0 || param >= _mt_optim_count(o->o) || grad == NULL) return -EINVAL;
  _mt_devparam_t *d = devparam_of(o, param);
  if (d == NULL) return _mt_optim_set_grad(o->o, param, grad);
  _mt_optim_wait_param(o->o, param); /* its step reads the buffer, not the address */
  d->grad = (uintptr_t)grad;
  o->dev.grads_fresh = false; /* grad_norm read the old gradient */
  return 0;
}

MT_API int mt_optim_set_hparams(mt_optim_t *o, int param, const mt_optim_params_t *p) {
  _mt_adam_hp_t hp = {.lr = p->lr, .beta1 = p->beta1, .beta2 = p->beta2, .eps = p->eps,
                      .weight_decay = p->weight_decay, .decoupled = p->adamw != 0,
                      .amsgrad = p->amsgrad != 0, .maximize = p->maximize != 0};
  return _mt_optim_set_hp(o->o, param, &hp);
}

MT_API int mt_optim_param_info(mt_optim_t *o, int param, mt_optim_param_info_t *info) {
  if (param < 0 || param >= _mt_optim_count(o->o)) return -EINVAL;
  _mt_optim_wait_param(o->o, param); /* the step count moves with the step */
  _mt_optim_view_t v;
  _mt_optim_view(o->o, param, &v);
  *info = (mt_optim_param_info_t){.count = v.n, .dtype = (mt_dtype_t)v.dtype, .step = *v.step,
                                  .amsgrad = v.vmax != NULL ||
                                             (v.sp != NULL && _mt_optim_cfg(o->o)->hp.amsgrad)};
  if (v.quant) {
    info->state_bits = v.qm->bits;
    info->code_bytes = _mt_qtensor_code_bytes(v.qm);
    info->blocks = _mt_qtensor_blocks(v.qm);
  }
  return 0;
}

MT_API int mt_optim_set_step(mt_optim_t *o, int param, float step) {
  if (param < 0 || param >= _mt_optim_count(o->o) || !(step >= 0)) return -EINVAL;
  _mt_optim_wait_param(o->o, param);
  _mt_optim_view_t v;
  _mt_optim_view(o->o, param, &v);
  *v.step = step;
  return 0;
}

/* The FP32 array of field, or NULL (quantised moment, or no AMSGrad max). */
static float *field_array(const _mt_optim_view_t *v, mt_optim_field_t field) {
  switch (field) {
    case MT_OPTIM_FIELD_MASTER: return v->master;
    case MT_OPTIM_FIELD_EXP_AVG: return v->m;
    case MT_OPTIM_FIELD_EXP_AVG_SQ: return v->v;
    case MT_OPTIM_FIELD_MAX_EXP_AVG_SQ: return v->vmax;
  }
  return NULL;
}

/* Checks param, field and count (SIZE_MAX: any), waits for param's step; fills *v and *q
 * (the quantised moment, or NULL). 0 or -EINVAL / -ENOENT (no such state). */
static int state_access(mt_optim_t *o, int param, mt_optim_field_t field, size_t count,
                        _mt_optim_view_t *v, _mt_qtensor_t **q) {
  if (param < 0 || param >= _mt_optim_count(o->o) || (unsigned)field > MT_OPTIM_FIELD_MAX_EXP_AVG_SQ)
    return -EINVAL;
  _mt_optim_wait_param(o->o, param);
  _mt_optim_view(o->o, param, v);
  if (count != SIZE_MAX && count != v->n) return -EINVAL;
  *q = !v->quant ? NULL : field == MT_OPTIM_FIELD_EXP_AVG ? v->qm
                        : field == MT_OPTIM_FIELD_EXP_AVG_SQ ? v->qv : NULL;
  if (v->sp != NULL) /* on NVMe: what exists is what the layout holds */
    return field == MT_OPTIM_FIELD_MAX_EXP_AVG_SQ && !_mt_optim_cfg(o->o)->hp.amsgrad ? -ENOENT : 0;
  if (*q == NULL && field_array(v, field) == NULL) return -ENOENT;
  return 0;
}

/* The statestore field of a public one (spilled parameters). */
static _mt_ss_field_t ss_field(mt_optim_field_t field) {
  return field == MT_OPTIM_FIELD_MASTER ? _MT_SS_MASTER : field == MT_OPTIM_FIELD_EXP_AVG ? _MT_SS_M
         : field == MT_OPTIM_FIELD_EXP_AVG_SQ ? _MT_SS_V : _MT_SS_VMAX;
}

/* Whether field of v lives on NVMe (the master of F32 weights is the weights). */
static bool on_nvme(const _mt_optim_view_t *v, mt_optim_field_t field) {
  return v->sp != NULL && !(field == MT_OPTIM_FIELD_MASTER && v->dtype == MT_DTYPE_F32);
}

MT_API int mt_optim_state_read(mt_optim_t *o, int param, mt_optim_field_t field, float *out,
                               size_t count) {
  _mt_optim_view_t v;
  _mt_qtensor_t *q;
  int rc = state_access(o, param, field, count, &v, &q);
  if (rc < 0) return rc;
  if (on_nvme(&v, field)) return _mt_ss_floats(v.ss, v.sp, ss_field(field), out, false);
  if (q != NULL)
    _mt_codec_decode(q, out, 0, v.n);
  else
    memcpy(out, field_array(&v, field), v.n * sizeof(float));
  return 0;
}

MT_API int mt_optim_state_write(mt_optim_t *o, int param, mt_optim_field_t field, const float *in,
                                size_t count) {
  _mt_optim_view_t v;
  _mt_qtensor_t *q;
  int rc = state_access(o, param, field, count, &v, &q);
  if (rc < 0) return rc;
  if (on_nvme(&v, field)) {
    /* (float *): the store writes from the buffer, it does not change it */
    rc = _mt_ss_floats(v.ss, v.sp, ss_field(field), (float *)(uintptr_t)in, true);
  } else if (q != NULL) {
    _mt_codec_encode(q, in, 0, v.n);
    return 0;
  } else {
    memcpy(field_array(&v, field), in, v.n * sizeof(float));
  }
  if (rc != 0 || field != MT_OPTIM_FIELD_MASTER) return rc;
  /* the weights follow the master: the caller's array, or the device's */
  rc = _mt_optim_refresh_weights(o->o, param);
  if (rc != 0) return rc;
  return _mt_devparam_push_one(&o->dev, param);
}

/* The quantised moment for a raw access with these sizes, or NULL with *rc. */
static _mt_qtensor_t *raw_access(mt_optim_t *o, int param, mt_optim_field_t field, size_t code_bytes,
                                 size_t blocks, int *rc) {
  if (field != MT_OPTIM_FIELD_EXP_AVG && field != MT_OPTIM_FIELD_EXP_AVG_SQ) {
    *rc = -EINVAL;
    return NULL;
  }
  _mt_optim_view_t v;
  _mt_qtensor_t *q = NULL;
  *rc = state_access(o, param, field, SIZE_MAX, &v, &q);
  if (*rc == 0 && q == NULL) *rc = -ENOTSUP; /* FP32 state: use mt_optim_state_read */
  if (*rc == 0 && (code_bytes != _mt_qtensor_code_bytes(q) || blocks != _mt_qtensor_blocks(q)))
    *rc = -EINVAL;
  return *rc == 0 ? q : NULL;
}

MT_API int mt_optim_state_raw_read(mt_optim_t *o, int param, mt_optim_field_t field, void *codes,
                                   size_t code_bytes, float *scales, size_t blocks) {
  int rc;
  _mt_qtensor_t *q = raw_access(o, param, field, code_bytes, blocks, &rc);
  if (q == NULL) return rc;
  _mt_optim_view_t v;
  _mt_optim_view(o->o, param, &v);
  if (v.sp != NULL) {
    bool m = field == MT_OPTIM_FIELD_EXP_AVG;
    rc = _mt_ss_field(v.ss, v.sp, m ? _MT_SS_QM_CODES : _MT_SS_QV_CODES, 0, code_bytes, codes, false);
    if (rc == 0)
      rc = _mt_ss_field(v.ss, v.sp, m ? _MT_SS_QM_SCALES : _MT_SS_QV_SCALES, 0, blocks * sizeof(float),
                        scales, false);
    return rc;
  }
  memcpy(codes, q->codes, code_bytes);
  memcpy(scales, q->scales, blocks * sizeof(float));
  return 0;
}

MT_API int mt_optim_state_raw_write(mt_optim_t *o, int param, mt_optim_field_t field,
                                    const void *codes, size_t code_bytes, const float *scales,
                                    size_t blocks) {
  int rc;
  _mt_qtensor_t *q = raw_access(o, param, field, code_bytes, blocks, &rc);
  if (q == NULL) return rc;
  _mt_optim_view_t v;
  _mt_optim_view(o->o, param, &v);
  if (v.sp != NULL) {
    bool m = field == MT_OPTIM_FIELD_EXP_AVG;
    rc = _mt_ss_field(v.ss, v.sp, m ? _MT_SS_QM_CODES : _MT_SS_QV_CODES, 0, code_bytes,
                      (void *)(uintptr_t)codes, true);
    if (rc == 0)
      rc = _mt_ss_field(v.ss, v.sp, m ? _MT_SS_QM_SCALES : _MT_SS_QV_SCALES, 0, blocks * sizeof(float),
                        (void *)(uintptr_t)scales, true);
    return rc;
  }
  memcpy(q->codes, codes, code_bytes);
  memcpy(q->scales, scales, blocks * sizeof(float));
  return 0;
}

MT_API uint64_t mt_optim_work_ns(const mt_optim_t *o) {
  return _mt_optim_work_ns(o->o);
}

MT_API int mt_optim_grad_norm(mt_optim_t *o, float *total_norm) {
  _mt_optim_wait(o->o); /* a step in flight owns the gradient buffers */
  int rc = _mt_devparam_pull(&o->dev, -1);
  if (rc < 0) return rc;
  for (size_t i = 0; i < o->dev.n; i++) o->dev.v[i].stepped = false; /* read, not stepped */
  o->dev.grads_fresh = o->dev.n > 0;
  return _mt_optim_grad_norm(o->o, total_norm);
}

MT_API float mt_optim_clip_coef(float total_norm, double max_norm) {
  return _mt_adam_clip_coef(total_norm, max_norm);
}

MT_API int mt_optim_threads(const mt_optim_t *o) {
  return _mt_optim_threads(o->o);
}

MT_API int mt_optim_save(mt_optim_t *o, const char *path) {
  o->err[0] = '\0';
  return _mt_optim_save(o->o, path, o->err, sizeof(o->err));
}

MT_API int mt_optim_load(mt_optim_t *o, const char *path) {
  o->err[0] = '\0';
  int rc = _mt_optim_load(o->o, path, o->err, sizeof(o->err));
  /* the loaded masters' weights go to the device parameters too */
  if (rc == 0) rc = _mt_devparam_push(&o->dev, true);
  return rc;
}

MT_API const char *mt_optim_error(const mt_optim_t *o) {
  return o->err;
}
