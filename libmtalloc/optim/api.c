/*
 * api.c - the public host-optimizer API of mtalloc.h (mt_optim_*), a thin
 * layer over optim.c: it maps public enums and defaults to the internal
 * ones, reads MT_THREADS, MT_OPTIMIZER_COMPRESSION and MT_OPTIM_KERNEL from
 * the one options table, and keeps the last save/load error text for
 * mt_optim_error.
 *
 * Threading: as optim.c, one owner thread per optimizer.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "mtalloc.h"
#include "devparam.h"
#include "optim.h"

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
  rc = _mt_optim_add_grad(o->o, d->hw, count, (int)dtype, d->hg, (int)grad_dtype);
  if (rc < 0) {
    _mt_devparam_drop_last(&o->dev);
    return rc;
  }
  d->index = rc;
  return rc;
}

MT_API int mt_optim_step(mt_optim_t *o, int param, float clip_coef) {
  /* a step in flight reads the gradient buffers: refuse before refilling them */
  if (_mt_optim_busy(o->o)) return -EBUSY;
  int rc = _mt_devparam_pull(&o->dev, param); /* device gradients into their buffers */
  if (rc < 0) return rc;
  return _mt_optim_step(o->o, param, clip_coef);
}

MT_API int mt_optim_wait(mt_optim_t *o) {
  _mt_optim_wait(o->o);
  return _mt_devparam_push(&o->dev, false);
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
