/*
 * optim.h - the host optimizer object: parameters, state, step (optim.c).
 */
#ifndef MT_OPTIM_OPTIM_H
#define MT_OPTIM_OPTIM_H

#include <stddef.h>
#include <stdint.h>

#include "adam.h"

typedef struct _mt_optim _mt_optim_t;

/* State storage formats (codec.c); the int values are the checkpoint's. */
typedef enum _mt_codec {
  _MT_CODEC_NONE = 0, /* FP32 m and v */
  _MT_CODEC_8BIT = 1,
  _MT_CODEC_4BIT = 2,
  _MT_CODEC_2BIT = 3, /* experimental */
} _mt_codec_t;

typedef struct _mt_optim_cfg {
  _mt_adam_hp_t hp;
  _mt_adam_isa_t isa;  /* kernel; AUTO = widest the CPU has */
  _mt_codec_t codec;   /* state format of parameters >= _MT_CODEC_MIN_ELEMS */
  int threads;         /* pool workers; 0 = default (pool.h) */
  int node;            /* NUMA node for the pool; -1 = the caller's */
} _mt_optim_cfg_t;

// optim.c
/* 0, -EINVAL (bad hyper-parameter), -ENOTSUP (forced kernel this CPU
 * lacks), -ENOMEM. The caller owns *out; free with _mt_optim_destroy. */
int _mt_optim_create(const _mt_optim_cfg_t *cfg, _mt_optim_t **out);
void _mt_optim_destroy(_mt_optim_t *o);
/* Registers count elements of weights (dtype _MT_DT_*) with FP32 gradient
 * grad (read at each step). F32 weights are updated in place (they are
 * the master); bf16/fp16 weights get an FP32 master, widened from them now,
 * and receive round-to-nearest-even copies after each step. Returns the
 * parameter's index (>= 0) or -errno. Not while a step is in flight. */
int _mt_optim_add(_mt_optim_t *o, void *weights, size_t count, int dtype, const float *grad);
/* The same with a gradient of grad_dtype (_MT_DT_*): a bf16/fp16 gradient
 * is widened exactly to float as the kernel reads it (no FP32 copy). */
int _mt_optim_add_grad(_mt_optim_t *o, void *weights, size_t count, int dtype, const void *grad,
                       int grad_dtype);
int _mt_optim_count(const _mt_optim_t *o);
/* Queues one step of parameter `param` (-1 = all) on the pool and returns;
 * clip multiplies every gradient (1 = none). A parameter whose previous
 * step is still in flight is waited for first (steps of other parameters
 * keep running). 0 or -EINVAL (bad index or hyper-parameter: nothing
 * queued, no step count advanced). */
int _mt_optim_step(_mt_optim_t *o, int param, float clip);
/* Waits for parameter param's step in flight, if any (and every job
 * queued before it). A step of spilled state that failed (statestore.c)
 * is undone in the step count here and its error kept for
 * _mt_optim_wait. */
void _mt_optim_wait_param(_mt_optim_t *o, int param);
/* Points parameter param at a new gradient array of the registered
 * gradient dtype, after its step in flight. 0 or -EINVAL. */
int _mt_optim_set_grad(_mt_optim_t *o, int param, const void *grad);
/* Sets the hyper-parameters of param (-1: every parameter, and those added
 * later), read when its next step is queued. decoupled and amsgrad must be
 * the creation's. 0 or -EINVAL (a value torch rejects, or those two differ). */
int _mt_optim_set_hp(_mt_optim_t *o, int param, const _mt_adam_hp_t *hp);
/* The hyper-parameters of param (-1: the default for new parameters). */
const _mt_adam_hp_t *_mt_optim_hp(const _mt_optim_t *o, int param);
/* Nanoseconds the pool's workers have spent in finished tasks (all jobs:
 * steps and norms), summed over workers. */
uint64_t _mt_optim_work_ns(const _mt_optim_t *o);
/* The global 2-norm of every registered gradient, as
 * torch.nn.utils.clip_grad_norm_ computes it over the parameters in
 * registration order (gradnorm.c: bit for bit), on the pool; returns when
 * done. 0 or -EBUSY (a step in flight). */
int _mt_optim_grad_norm(_mt_optim_t *o, float *total);
/* Waits for every step in flight. 0, or the first error of a step of
 * spilled state since the last call (-EIO, -EBADMSG, -ENOSPC ...: that
 * parameter's step count did not advance; step it again with the same
 * gradient to finish the step, statestore.c). */
int _mt_optim_wait(_mt_optim_t *o);
int _mt_optim_threads(const _mt_optim_t *o);
const _mt_optim_cfg_t *_mt_optim_cfg(const _mt_optim_t *o);
/* Whether a step was queued since the last _mt_optim_wait. */
int _mt_optim_busy(const _mt_optim_t *o);

/* Optimizer state on NVMe (statestore.c). A parameter's state goes to
 * ss when MT_MAX_HOST has no room for it; with always, every later
 * registration does (tests and the benchmark). ss stays the caller's.
 * Without a call, the pager's NVMe tier's store is used where it exists.
 * Applies to later registrations. 0, or -EBUSY (a step in flight, the
 * pager's store already in use, or another store while parameters are
 * spilled to this one). */
struct _mt_ss;
struct _mt_ss_param;
int _mt_optim_set_store(_mt_optim_t *o, struct _mt_ss *ss, int always);
/* The optimizer behind a public handle (api.c), for tests. */
struct mt_optim;
_mt_optim_t *_mt_optim_of(struct mt_optim *h);
/* Whether param's state is on NVMe. */
int _mt_optim_spilled(const _mt_optim_t *o, int param);

/* One parameter's state, for the checkpoint codec (checkpoint.c): pointers
 * into the optimizer's own memory, valid until _mt_optim_destroy. A
 * spilled parameter (sp != NULL) has no arrays but the F32 weights'
 * master: its fields are read and written through statestore.h; qm and qv
 * then hold only n and bits. */
struct _mt_qtensor;
typedef struct _mt_optim_view {
  size_t n;
  int dtype;
  int quant;          /* 1: qm/qv hold m and v */
  float *step;        /* the float32 step count */
  float *master;
  float *m, *v, *vmax; /* FP32 state; vmax NULL without amsgrad */
  struct _mt_qtensor *qm, *qv;
  struct _mt_ss *ss;
  struct _mt_ss_param *sp; /* NULL: state in host memory */
} _mt_optim_view_t;
void _mt_optim_view(_mt_optim_t *o, int param, _mt_optim_view_t *out);
/* Rewrites a bf16/fp16 parameter's weights from its master (after a load).
 * 0 or -errno (a spilled master that could not be read). */
int _mt_optim_refresh_weights(_mt_optim_t *o, int param);

// checkpoint.c
/* Saves every parameter's master, state and step count to path (written
 * to path.tmp, fsync'ed, renamed: a crash leaves the old file). Format:
 * checkpoint.c. 0 or -errno; on error err holds "PATH: what". */
int _mt_optim_save(_mt_optim_t *o, const char *path, char *err, size_t errlen);
/* Loads a checkpoint saved from an optimizer with the same parameters
 * (count, sizes, dtypes), codec and amsgrad setting. The whole file is
 * checked (structure, then checksum) before anything is copied, so on any
 * error nothing is loaded; err holds "PATH: byte N: what". 0 or -errno
 * (-EINVAL bad or mismatched file, -EBUSY step in flight, -EIO ...). */
int _mt_optim_load(_mt_optim_t *o, const char *path, char *err, size_t errlen);

#endif
