/*
 * devparam.c - optimizer parameters that live in GPU memory mtalloc
 * manages (mt_optim_register_device).
 *
 * Concept. The optimizer works on host arrays; a device parameter gets two
 * host buffers, one for its weights in the device dtype and one for its
 * gradient. At registration the weights are read from the device (through
 * the pager: from wherever their chunks are), so the FP32 master starts
 * from them. A step first reads each gradient the same way; when the step
 * is done (mt_optim_wait) the new weights are written into the pager's
 * host copies of the weights' chunks and the device copies are dropped
 * without a copy (_mt_host_write): the next kernel that reads the weights
 * fetches them, and evicting them later costs nothing while they stay
 * clean. The FP32 masters and the moments are the optimizer's own memory;
 * the two buffers are the only extra host memory per parameter.
 *
 * Threading: as optim.c, one owner thread per optimizer; the pager calls
 * take the pager's lock.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "devparam.h"
#include "hostmem.h"
#include "pager.h"

int _mt_devparam_new(_mt_devparams_t *d, uintptr_t weights, size_t bw, uintptr_t grad, size_t bg,
                     _mt_devparam_t **out) {
  if (d->n == d->cap) {
    size_t cap = d->cap ? d->cap * 2 : 16;
    _mt_devparam_t *v = realloc(d->v, cap * sizeof(*v));
    if (v == NULL) return -ENOMEM;
    d->v = v;
    d->cap = cap;
  }
  _mt_devparam_t *p = &d->v[d->n];
  *p = (_mt_devparam_t){.index = -1, .weights = weights, .grad = grad, .bw = bw, .bg = bg};
  p->hw = _mt_optim_mem_alloc(bw); /* hostmem.c: on the GPU's node, in MT_MAX_HOST */
  p->hg = _mt_optim_mem_alloc(bg);
  int rc = p->hw && p->hg ? _mt_host_read(p->hw, weights, bw) : -ENOMEM;
  if (rc < 0) {
    _mt_optim_mem_free(p->hw);
    _mt_optim_mem_free(p->hg);
    return rc == -ENOENT ? -EINVAL : rc; /* not memory mtalloc manages */
  }
  d->n++;
  *out = p;
  return 0;
}

void _mt_devparam_drop_last(_mt_devparams_t *d) {
  _mt_devparam_t *p = &d->v[--d->n];
  _mt_optim_mem_free(p->hw);
  _mt_optim_mem_free(p->hg);
}

int _mt_devparam_pull(_mt_devparams_t *d, int param) {
  for (size_t i = 0; i < d->n; i++) {
    _mt_devparam_t *p = &d->v[i];
    if (param >= 0 && p->index != param) continue;
    if (!d->grads_fresh) {
      int rc = _mt_host_read(p->hg, p->grad, p->bg);
      if (rc < 0) return rc;
    }
    p->stepped = true;
  }
  d->grads_fresh = false;
  return 0;
}

int _mt_devparam_push(_mt_devparams_t *d, bool all) {
  int first = 0;
  for (size_t i = 0; i < d->n; i++) {
    _mt_devparam_t *p = &d->v[i];
    if (!all && !p->stepped) continue;
    p->stepped = false;
    int rc = _mt_host_write(p->weights, p->hw, p->bw);
    if (rc < 0 && first == 0) first = rc;
  }
  return first;
}

int _mt_devparam_write(_mt_devparam_t *p) {
  return _mt_host_write(p->weights, p->hw, p->bw);
}

int _mt_devparam_push_one(_mt_devparams_t *d, int param) {
  for (size_t i = 0; i < d->n; i++)
    if (d->v[i].index == param) return _mt_devparam_write(&d->v[i]);
  return 0;
}

void _mt_devparam_free(_mt_devparams_t *d) {
  for (size_t i = 0; i < d->n; i++) {
    _mt_optim_mem_free(d->v[i].hw);
    _mt_optim_mem_free(d->v[i].hg);
  }
  free(d->v);
  *d = (_mt_devparams_t){0};
}
