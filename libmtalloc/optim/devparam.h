/*
 * devparam.h - parameters that live in GPU memory mtalloc manages (see
 * devparam.c): their host buffers, and the two moves a step needs.
 */
#ifndef MT_OPTIM_DEVPARAM_H
#define MT_OPTIM_DEVPARAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct _mt_devparam {
  int index;            /* the optimizer's parameter index */
  uintptr_t weights;    /* device address of the weights (dtype) */
  uintptr_t grad;       /* device address of the gradient (grad dtype) */
  void *hw, *hg;        /* host buffers the optimizer works on */
  size_t bw, bg;        /* their bytes */
  bool stepped;         /* updated by the step in flight: write back at wait */
} _mt_devparam_t;

typedef struct _mt_devparams {
  _mt_devparam_t *v;
  size_t n, cap;
  bool grads_fresh;     /* grad_norm just read every gradient: the step need not */
} _mt_devparams_t;

/* A slot for a new device parameter with host buffers of bw and bg bytes,
 * the weights read from the device into hw. 0 or -errno (nothing kept). */
int _mt_devparam_new(_mt_devparams_t *d, uintptr_t weights, size_t bw, uintptr_t grad, size_t bg,
                     _mt_devparam_t **out);
/* Drops the slot _mt_devparam_new just made (its registration failed). */
void _mt_devparam_drop_last(_mt_devparams_t *d);
/* Reads the gradients of param (-1: all) from the device and marks them
 * stepped. 0 or -errno. */
int _mt_devparam_pull(_mt_devparams_t *d, int param);
/* Writes the new weights of the stepped parameters (all, with all) into
 * the pager's host copies, their device copies dropped. 0 or the first error. */
int _mt_devparam_push(_mt_devparams_t *d, bool all);
/* Writes p's host weights into the pager's host copy, its device copy
 * dropped. 0 or -errno. */
int _mt_devparam_write(_mt_devparam_t *p);
/* Writes param's weights now (after its master was set), if param is a
 * device parameter. 0 or -errno. */
int _mt_devparam_push_one(_mt_devparams_t *d, int param);
void _mt_devparam_free(_mt_devparams_t *d);

#endif
