/*
 * statestore.h - optimizer state kept in the NVMe store (statestore.c).
 */
#ifndef MT_OPTIM_STATESTORE_H
#define MT_OPTIM_STATESTORE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "codec.h"
#include "nvme_store.h"

/* Elements per streamed block: a multiple of the codecs' 128-element
 * blocks; 12 bytes an element (bf16 master, FP32 m and v): 3 MiB reads. */
#define _MT_SS_BLOCK ((size_t)1 << 18)
/* Staging buffers of one stream: blocks k+1 and k+2 read while k is
 * updated and k-1 written. */
#define _MT_SS_NBUF 4

typedef struct _mt_ss _mt_ss_t;
typedef struct _mt_ss_param _mt_ss_param_t;

/* What a spilled parameter keeps on NVMe, per block of its elements. */
typedef struct _mt_ss_layout {
  size_t n;        /* elements */
  int dtype;       /* _MT_DT_*: F32 weights are their own master (not spilled) */
  int bits;        /* 8/4/2: quantised m and v; 0: FP32 m and v */
  bool amsgrad;    /* FP32 only: a third array, vmax */
} _mt_ss_layout_t;

/* Fields of a spilled parameter's state, for field access (api, checkpoint). */
typedef enum _mt_ss_field {
  _MT_SS_MASTER, _MT_SS_M, _MT_SS_V, _MT_SS_VMAX,           /* f32[n] */
  _MT_SS_QM_CODES, _MT_SS_QM_SCALES, _MT_SS_QV_CODES, _MT_SS_QV_SCALES, /* quantised */
  _MT_SS__NFIELDS
} _mt_ss_field_t;

/* One block handed to the update: arrays of len elements, starting at
 * element begin of the parameter, in staging memory. master holds the
 * current master (for F32 weights a copy of the caller's weights); out is
 * a bf16/fp16 buffer (NULL for F32 weights) that becomes the caller's
 * weights once the block's new state is on NVMe. */
typedef struct _mt_ss_block {
  size_t begin, len;
  float *master;
  float *m, *v, *vmax;     /* FP32 state, or NULL */
  _mt_qtensor_t qm, qv;    /* quantised state: views of len elements */
  uint16_t *out;
} _mt_ss_block_t;
typedef void (*_mt_ss_update_fn)(void *arg, _mt_ss_block_t *b);

// statestore.c
/* A state store over `store`, whose calls are made under *lock (the
 * owner's lock, e.g. the pager's; NULL: a lock of its own). Staging
 * (_MT_SS_NBUF blocks) is taken from MT_MAX_HOST at the first spill.
 * 0 or -ENOMEM; the caller owns *out (_mt_ss_close) and the store. */
int _mt_ss_open(_mt_nvme_t *store, pthread_mutex_t *lock, _mt_ss_t **out);
/* The store of the pager's NVMe tier, or -ENODEV when there is none. */
int _mt_ss_from_pager(_mt_ss_t **out);
/* Frees the staging (every parameter must have been dropped). */
void _mt_ss_close(_mt_ss_t *ss);
/* Spills a new parameter: pages for twice its state (each block has a
 * spare, see statestore.c), and its initial state written: zero moments,
 * the master widened from weights (bf16/fp16). weights stays the
 * caller's. 0, -ENOSPC (the store is full), -ENOMEM, -EIO ...; on error
 * nothing is kept and one line is logged. */
int _mt_ss_add(_mt_ss_t *ss, const _mt_ss_layout_t *l, void *weights, uint64_t tag,
               _mt_ss_param_t **out);
void _mt_ss_drop(_mt_ss_t *ss, _mt_ss_param_t *sp);
/* One step: streams every block from sp's resume point, fn(arg, block)
 * on each, writes it back and then commits it (its new copy becomes the
 * current one; master / out reach the caller's weights). On an I/O error
 * the blocks before the first failed one are committed and the rest keep
 * their previous state and weights; the next call resumes there (same
 * gradient and scalars: it completes the step bit-identically). 0 or the
 * first -errno. Serialised with every other stream of ss. */
int _mt_ss_step(_mt_ss_t *ss, _mt_ss_param_t *sp, _mt_ss_update_fn fn, void *arg);
/* The first block a failed step did not commit, 0 when none. */
size_t _mt_ss_resume(const _mt_ss_param_t *sp);
/* Forgets it: every field was just written whole (a checkpoint load). */
void _mt_ss_clear_resume(_mt_ss_param_t *sp);
/* Bytes [off, off + bytes) of field f (as the array the in-memory
 * parameter would hold) into buf, or, with write, from buf into the
 * state (each touched block written to its spare, then committed: an
 * error leaves that block's previous copy). 0 or -errno (-EINVAL: no
 * such field or range). */
int _mt_ss_field(_mt_ss_t *ss, _mt_ss_param_t *sp, _mt_ss_field_t f, size_t off, size_t bytes,
                 void *buf, bool write);
size_t _mt_ss_field_bytes(const _mt_ss_param_t *sp, _mt_ss_field_t f);
/* Field MASTER, M, V or VMAX as n floats (quantised moments decoded, or
 * encoded on write). 0 or -errno. */
int _mt_ss_floats(_mt_ss_t *ss, _mt_ss_param_t *sp, _mt_ss_field_t f, float *buf, bool write);
/* Rewrites bf16/fp16 weights from the spilled master. 0 or -errno. */
int _mt_ss_refresh_weights(_mt_ss_t *ss, _mt_ss_param_t *sp);

#endif
