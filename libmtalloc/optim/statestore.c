/*
 * statestore.c - optimizer state that did not fit in MT_MAX_HOST, kept in
 * the NVMe store and streamed through a few staging buffers at each step.
 *
 * The concept: a spilled parameter's state (its FP32 master when the
 * weights are bf16/fp16, and its moments: FP32 m, v, vmax, or the 8/4/2-bit
 * codes and block scales) is cut into blocks of _MT_SS_BLOCK elements. A
 * block is one chunk of the store: its fields one after the other, each
 * 64-byte aligned, every page checksummed by the store. A step streams the
 * blocks through _MT_SS_NBUF (4) staging buffers: while block k is updated
 * on the calling worker, blocks k+1 and k+2 are being read and block k-1
 * written, so the step waits for the disk only when the disk is slower
 * than the update (on this VM it is, several times: 12 bytes an element
 * each way for bf16 weights with FP32 state).
 *
 * Nothing is lost on an I/O error. Each block has two chunks, the current
 * copy and a spare; a step reads the current one and writes the new state
 * into the spare, and only when that write has completed does it commit the
 * block: the spare becomes current and the new weights (the FP32 master of
 * F32 weights, or the rounded bf16/fp16 copy, both computed in staging)
 * are copied into the caller's array. Blocks commit in order. So after an
 * error (a read that fails or whose checksum does not match, a write the
 * disk refuses) the blocks before the first failed one hold the new step
 * and the others the previous one, weights included, and the parameter
 * remembers where to resume; stepping it again with the same gradient
 * finishes the step bit-identically. The price: twice the state's size on
 * disk.
 *
 * Memory: the staging buffers (_MT_SS_NBUF of them, 18 bytes an element of
 * a block: 4.5 MiB each, 18 MiB) are the optimizer's own memory, taken out of
 * MT_MAX_HOST at the first spill. The store is the pager's NVMe tier's
 * (_mt_ss_from_pager), shared with the pager's chunks; tests bring their
 * own (_mt_ss_open).
 *
 * Threading: the store has one owner at a time, so every call on it is made
 * under ss->lock (the pager's lock when the store is the pager's), and
 * never a blocking one: completions are reaped by non-blocking polls, with
 * the lock released in between, so the pager's launches do not wait behind
 * the optimizer's disk. One stream (a step, or a field access) runs at a
 * time (ss->stream): they share the staging buffers. A parameter's blocks
 * are touched only by its stream; its `resume` and `cur` bits only under
 * ss->stream.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "adam.h"
#include "hostmem.h"
#include "internal.h"
#include "pager.h"
#include "pager_internal.h"
#include "statestore.h"
#include "stats.h"

#define SLOT_BYTES (18 * _MT_SS_BLOCK) /* 16 a chunk (master, m, v, vmax) + 2 out */
#define OUT_OFF (16 * _MT_SS_BLOCK)
#define READ_AHEAD (_MT_SS_NBUF - 2) /* blocks read ahead of the one updated */
#define WAIT_NS (30ull * 1000000000ull) /* a block that takes longer is reported */

struct _mt_ss {
  _mt_nvme_t *store;
  pthread_mutex_t *lock;   /* held around every store call */
  pthread_mutex_t own;     /* lock when the caller gave none */
  pthread_mutex_t stream;  /* one stream at a time: the staging */
  void *mem;               /* staging allocation (hostmem.c), NULL until the first spill */
  bool mem_lost;           /* a transfer into it was given up: replaced at the next step,
                            * never freed (the drive may still write into it) */
  uint8_t *slot[_MT_SS_NBUF]; /* 4 KiB-aligned, SLOT_BYTES each */
  int nparams;
};

struct _mt_ss_param {
  _mt_ss_layout_t l;
  void *weights;        /* the caller's */
  size_t nblocks;
  _mt_nvme_chunk_t **chunk; /* 2 per block: [2k + cur] is current */
  uint8_t *cur;         /* per block: 0 or 1 */
  size_t resume;        /* first block a failed step left uncommitted; 0 none */
  uint64_t bytes;       /* pages' worth of data on NVMe (both copies) */
};

/* ---- layout ---------------------------------------------------------------- */

static size_t align64(size_t x) {
  return (x + 63) & ~(size_t)63;
}

static size_t field_len(const _mt_ss_layout_t *l, _mt_ss_field_t f, size_t len) {
  switch (f) {
    case _MT_SS_MASTER: return l->dtype == _MT_DT_F32 ? 0 : 4 * len;
    case _MT_SS_M: case _MT_SS_V: return l->bits ? 0 : 4 * len;
    case _MT_SS_VMAX: return l->bits || !l->amsgrad ? 0 : 4 * len;
    case _MT_SS_QM_CODES: case _MT_SS_QV_CODES: /* whole codec blocks, as codec.c's */
      return l->bits ? (len + _MT_CODEC_BLOCK - 1) / _MT_CODEC_BLOCK * _MT_CODEC_BLOCK * (size_t)l->bits / 8 : 0;
    case _MT_SS_QM_SCALES: case _MT_SS_QV_SCALES:
      return l->bits ? (len + _MT_CODEC_BLOCK - 1) / _MT_CODEC_BLOCK * 4 : 0;
    default: return 0;
  }
}

/* Offsets of the fields in a block of len elements; returns its bytes. */
static size_t block_layout(const _mt_ss_layout_t *l, size_t len, size_t off[_MT_SS__NFIELDS]) {
  size_t at = 0;
  for (int f = 0; f < _MT_SS__NFIELDS; f++) {
    off[f] = at;
    at = align64(at + field_len(l, (_mt_ss_field_t)f, len));
  }
  return at;
}

static size_t block_elems(const _mt_ss_param_t *sp, size_t k) {
  size_t begin = k * _MT_SS_BLOCK;
  return sp->l.n - begin < _MT_SS_BLOCK ? sp->l.n - begin : _MT_SS_BLOCK;
}

/* The block view of slot buffer buf holding block k. */
static void block_view(const _mt_ss_param_t *sp, size_t k, uint8_t *buf, _mt_ss_block_t *b) {
  size_t off[_MT_SS__NFIELDS], len = block_elems(sp, k);
  block_layout(&sp->l, len, off);
  const _mt_ss_layout_t *l = &sp->l;
  *b = (_mt_ss_block_t){.begin = k * _MT_SS_BLOCK, .len = len};
  /* F32 weights: the master is a staging copy after the chunk's fields */
  b->master = (float *)(void *)(buf + (l->dtype == _MT_DT_F32 ? 12 * _MT_SS_BLOCK : off[_MT_SS_MASTER]));
  b->out = l->dtype == _MT_DT_F32 ? NULL : (uint16_t *)(void *)(buf + OUT_OFF);
  if (l->bits) {
    b->qm = (_mt_qtensor_t){.codes = buf + off[_MT_SS_QM_CODES],
                            .scales = (float *)(void *)(buf + off[_MT_SS_QM_SCALES]),
                            .n = len, .bits = l->bits, .is_signed = 1};
    b->qv = (_mt_qtensor_t){.codes = buf + off[_MT_SS_QV_CODES],
                            .scales = (float *)(void *)(buf + off[_MT_SS_QV_SCALES]),
                            .n = len, .bits = l->bits, .is_signed = 0};
  } else {
    b->m = (float *)(void *)(buf + off[_MT_SS_M]);
    b->v = (float *)(void *)(buf + off[_MT_SS_V]);
    b->vmax = l->amsgrad ? (float *)(void *)(buf + off[_MT_SS_VMAX]) : NULL;
  }
}

/* ---- the store, under its owner's lock ------------------------------------- */

static int submit(_mt_ss_t *ss, _mt_ss_param_t *sp, size_t k, int which, uint8_t *buf, bool write,
                  _mt_nvme_op_t *op) {
  *op = (_mt_nvme_op_t){0};
  _mt_nvme_chunk_t *c = sp->chunk[2 * k + (size_t)which];
  pthread_mutex_lock(ss->lock);
  int rc = write ? _mt_nvme_write(ss->store, c, buf, op) : _mt_nvme_read(ss->store, c, buf, op);
  pthread_mutex_unlock(ss->lock);
  return rc;
}

/* Waits for op by non-blocking polls (the lock is not held while the disk
 * works); the time counts as the optimizer's I/O wait. op->result, or
 * -ETIMEDOUT (logged; the op is given up, _mt_nvme_abandon). */
static int wait_op(_mt_ss_t *ss, _mt_nvme_op_t *op) {
  uint64_t t0 = _mt_now_ns(), t = t0;
  for (;;) {
    pthread_mutex_lock(ss->lock);
    if (op->busy) (void)_mt_nvme_poll(ss->store, 0, 0);
    bool busy = op->busy;
    int rc = op->result;
    pthread_mutex_unlock(ss->lock);
    if (!busy) {
      if (t != t0) mt_stat_add(optim_nvme_wait_ns, _mt_now_ns() - t0);
      if (rc != 0) mt_stat_add(optim_nvme_errors, 1);
      else if (op->write) mt_stat_add(optim_nvme_write, _mt_nvme_chunk_bytes(op->chunk));
      else mt_stat_add(optim_nvme_read, _mt_nvme_chunk_bytes(op->chunk));
      return rc;
    }
    t = _mt_now_ns();
    if (t - t0 > WAIT_NS) {
      mt_error("optimizer state on NVMe: a %s has not finished after %llu s; the disk does not answer",
               op->write ? "write" : "read", (unsigned long long)(WAIT_NS / 1000000000u));
      /* op lives on the caller's stack: the store takes its requests over;
       * the staging the drive may still write into is never used again */
      pthread_mutex_lock(ss->lock);
      _mt_nvme_abandon(ss->store, op);
      pthread_mutex_unlock(ss->lock);
      ss->mem_lost = true;
      return -ETIMEDOUT;
    }
    struct timespec ts = {0, 20000}; /* a 3 MiB block takes a millisecond or more */
    nanosleep(&ts, NULL);
  }
}

static int sync_io(_mt_ss_t *ss, _mt_ss_param_t *sp, size_t k, int which, uint8_t *buf, bool write) {
  _mt_nvme_op_t op;
  int rc = submit(ss, sp, k, which, buf, write, &op);
  return rc == 0 ? wait_op(ss, &op) : rc;
}

/* ---- lifetime -------------------------------------------------------------- */

int _mt_ss_open(_mt_nvme_t *store, pthread_mutex_t *lock, _mt_ss_t **out) {
  _mt_ss_t *ss = calloc(1, sizeof(*ss));
  if (ss == NULL) return -ENOMEM;
  ss->store = store;
  pthread_mutex_init(&ss->own, NULL);
  pthread_mutex_init(&ss->stream, NULL);
  ss->lock = lock != NULL ? lock : &ss->own;
  *out = ss;
  return 0;
}

int _mt_ss_from_pager(_mt_ss_t **out) {
  mt_pager_t *p = _mt_pager;
  if (p == NULL || p->nv == NULL || p->nv->simulated) return -ENODEV;
  return _mt_ss_open(p->nv->store, &p->lock, out);
}

void _mt_ss_close(_mt_ss_t *ss) {
  if (ss == NULL) return;
  mt_assert(ss->nparams == 0);
  _mt_optim_mem_free(ss->mem);
  pthread_mutex_destroy(&ss->own);
  pthread_mutex_destroy(&ss->stream);
  free(ss);
}

static int staging(_mt_ss_t *ss) {
  if (ss->mem_lost) {
    ss->mem = NULL;
    ss->mem_lost = false;
  }
  if (ss->mem != NULL) return 0;
  ss->mem = _mt_optim_mem_alloc(_MT_SS_NBUF * SLOT_BYTES + MT_NVME_PAGE);
  if (ss->mem == NULL) return -ENOMEM;
  uintptr_t a = ((uintptr_t)ss->mem + MT_NVME_PAGE - 1) & ~(uintptr_t)(MT_NVME_PAGE - 1);
  for (int i = 0; i < _MT_SS_NBUF; i++) ss->slot[i] = (uint8_t *)a + (size_t)i * SLOT_BYTES;
  return 0;
}

/* Takes the stream (one user of the staging at a time) and makes sure
 * the staging is there (a replacement after a given-up transfer). */
static int stream_begin(_mt_ss_t *ss) {
  pthread_mutex_lock(&ss->stream);
  int rc = staging(ss);
  if (rc < 0) pthread_mutex_unlock(&ss->stream);
  return rc;
}

static void free_chunks(_mt_ss_t *ss, _mt_ss_param_t *sp) {
  pthread_mutex_lock(ss->lock);
  for (size_t i = 0; i < 2 * sp->nblocks; i++)
    if (sp->chunk[i] != NULL) (void)_mt_nvme_chunk_free(ss->store, sp->chunk[i]);
  pthread_mutex_unlock(ss->lock);
  free(sp->chunk);
  free(sp->cur);
  free(sp);
}

int _mt_ss_add(_mt_ss_t *ss, const _mt_ss_layout_t *l, void *weights, uint64_t tag,
               _mt_ss_param_t **out) {
  pthread_mutex_lock(&ss->stream);
  int rc = staging(ss);
  _mt_ss_param_t *sp = rc == 0 ? calloc(1, sizeof(*sp)) : NULL;
  if (rc == 0 && sp == NULL) rc = -ENOMEM;
  if (rc == 0) {
    sp->l = *l;
    sp->weights = weights;
    sp->nblocks = (l->n + _MT_SS_BLOCK - 1) / _MT_SS_BLOCK;
    sp->chunk = calloc(2 * sp->nblocks, sizeof(*sp->chunk));
    sp->cur = calloc(sp->nblocks, 1);
    if (sp->chunk == NULL || sp->cur == NULL) rc = -ENOMEM;
  }
  /* pages for both copies of every block: all or none */
  pthread_mutex_lock(ss->lock);
  for (size_t i = 0; rc == 0 && i < 2 * (sp ? sp->nblocks : 0); i++) {
    size_t off[_MT_SS__NFIELDS], bytes = block_layout(l, block_elems(sp, i / 2), off);
    rc = _mt_nvme_chunk_alloc(ss->store, bytes, tag, (i / 2) * _MT_SS_BLOCK, &sp->chunk[i]);
    if (rc == 0) sp->bytes += bytes;
  }
  pthread_mutex_unlock(ss->lock);
  /* the initial state: zero moments (zero codes and scales decode to 0)
   * and the master widened from the weights */
  for (size_t k = 0; rc == 0 && k < sp->nblocks; k++) {
    uint8_t *buf = ss->slot[0];
    _mt_ss_block_t b;
    block_view(sp, k, buf, &b);
    memset(buf, 0, SLOT_BYTES);
    if (l->dtype != _MT_DT_F32) {
      const uint16_t *w = (const uint16_t *)weights + b.begin;
      for (size_t i = 0; i < b.len; i++)
        b.master[i] = l->dtype == _MT_DT_BF16 ? _mt_bf16_to_f32(w[i]) : _mt_f16_to_f32(w[i]);
    }
    rc = sync_io(ss, sp, k, 0, buf, true);
  }
  if (rc == 0) {
    ss->nparams++;
    mt_stat_add(optim_nvme_bytes, sp->bytes);
    *out = sp;
  } else {
    mt_error("optimizer state on NVMe: cannot spill a parameter of %zu elements (%s)", l->n,
             strerror(-rc));
    if (sp != NULL) free_chunks(ss, sp);
    if (ss->nparams == 0) { /* nothing spilled: the staging goes back to MT_MAX_HOST */
      _mt_optim_mem_free(ss->mem);
      ss->mem = NULL;
    }
  }
  pthread_mutex_unlock(&ss->stream);
  return rc;
}

void _mt_ss_drop(_mt_ss_t *ss, _mt_ss_param_t *sp) {
  if (sp == NULL) return;
  pthread_mutex_lock(&ss->stream);
  mt_stat_sub(optim_nvme_bytes, sp->bytes);
  free_chunks(ss, sp);
  ss->nparams--;
  pthread_mutex_unlock(&ss->stream);
}

size_t _mt_ss_resume(const _mt_ss_param_t *sp) {
  return sp->resume;
}

void _mt_ss_clear_resume(_mt_ss_param_t *sp) {
  sp->resume = 0;
}

/* ---- the step -------------------------------------------------------------- */

/* The block's new copy is down: it becomes current, its weights the caller's. */
static void commit(_mt_ss_param_t *sp, size_t k, uint8_t *buf) {
  _mt_ss_block_t b;
  block_view(sp, k, buf, &b);
  sp->cur[k] ^= 1;
  if (sp->l.dtype == _MT_DT_F32)
    memcpy((float *)sp->weights + b.begin, b.master, b.len * sizeof(float));
  else
    memcpy((uint16_t *)sp->weights + b.begin, b.out, b.len * sizeof(uint16_t));
}

/* Waits for the write in slot s (block wr_blk[s]); commits the block if
 * every block before it did and none before it failed. */
static void finish_write(_mt_ss_t *ss, _mt_ss_param_t *sp, _mt_nvme_op_t *wr, bool *wr_on,
                         const size_t *wr_blk, size_t s, size_t *committed, size_t *fail_blk,
                         int *err) {
  size_t j = wr_blk[s];
  int r = wait_op(ss, &wr[s]);
  wr_on[s] = false;
  if (r != 0 && j < *fail_blk) {
    *fail_blk = j;
    if (*err == 0) *err = r;
  }
  if (r == 0 && *committed == j && j < *fail_blk) {
    commit(sp, j, ss->slot[s]);
    (*committed)++;
  }
}

int _mt_ss_step(_mt_ss_t *ss, _mt_ss_param_t *sp, _mt_ss_update_fn fn, void *arg) {
  int src = stream_begin(ss);
  if (src < 0) return src;
  /* slot s holds block k with s = (k - k0) % NBUF: the block being
   * updated, READ_AHEAD blocks being read, the rest being written */
  _mt_nvme_op_t rd[_MT_SS_NBUF], wr[_MT_SS_NBUF];
  bool rd_on[_MT_SS_NBUF] = {0}, wr_on[_MT_SS_NBUF] = {0};
  size_t wr_blk[_MT_SS_NBUF] = {0};
  size_t nb = sp->nblocks, k0 = sp->resume, next = k0; /* next block to read */
  size_t committed = k0, fail_blk = nb; /* only blocks before fail_blk may commit */
  int err = 0;
#define SLOT(k) (((k) - k0) % _MT_SS_NBUF)
  for (size_t k = k0; err == 0 && k < nb; k++) {
    /* reads ahead: a slot is free once its last block's write is down */
    while (err == 0 && next < nb && next <= k + READ_AHEAD) {
      size_t s = SLOT(next);
      if (wr_on[s]) finish_write(ss, sp, wr, wr_on, wr_blk, s, &committed, &fail_blk, &err);
      if (err != 0) break;
      int r = submit(ss, sp, next, sp->cur[next], ss->slot[s], false, &rd[s]);
      if (r != 0) {
        fail_blk = next;
        err = r;
      }
      rd_on[s] = r == 0;
      next++;
    }
    size_t s = SLOT(k);
    if (!rd_on[s])
      break; /* its read was never issued: err says why */
    int r = wait_op(ss, &rd[s]);
    rd_on[s] = false;
    if (r != 0) {
      if (k < fail_blk) fail_blk = k;
      err = r;
      break;
    }
    if (k >= fail_blk)
      break;
    _mt_ss_block_t b;
    block_view(sp, k, ss->slot[s], &b);
    if (sp->l.dtype == _MT_DT_F32)
      memcpy(b.master, (const float *)sp->weights + b.begin, b.len * sizeof(float));
    fn(arg, &b);
    r = submit(ss, sp, k, !sp->cur[k], ss->slot[s], true, &wr[s]);
    if (r != 0) {
      fail_blk = k;
      err = r;
      break;
    }
    wr_on[s] = true;
    wr_blk[s] = k;
  }
  /* drain: every buffer the disk still owns; writes commit in block order */
  for (;;) {
    int first = -1;
    for (int s = 0; s < _MT_SS_NBUF; s++)
      if (wr_on[s] && (first < 0 || wr_blk[s] < wr_blk[first])) first = s;
    if (first < 0) break;
    finish_write(ss, sp, wr, wr_on, wr_blk, (size_t)first, &committed, &fail_blk, &err);
  }
  for (int s = 0; s < _MT_SS_NBUF; s++)
    if (rd_on[s]) (void)wait_op(ss, &rd[s]);
#undef SLOT
  sp->resume = committed == nb ? 0 : committed;
  if (err != 0)
    mt_error("optimizer state on NVMe: step failed at block %zu of %zu (%s); blocks before it hold "
             "the new step, the rest the previous one: step the parameter again to finish it",
             fail_blk, nb, strerror(-err));
  pthread_mutex_unlock(&ss->stream);
  return err;
}

/* ---- field access ---------------------------------------------------------- */

size_t _mt_ss_field_bytes(const _mt_ss_param_t *sp, _mt_ss_field_t f) {
  size_t t = 0;
  for (size_t k = 0; k < sp->nblocks; k++) t += field_len(&sp->l, f, block_elems(sp, k));
  return t;
}

/* Reads block k (current copy) into slot 0; after the caller changed it,
 * write_back puts it in the spare and commits the block's state (not its
 * weights: field access does not step). */
static int read_block(_mt_ss_t *ss, _mt_ss_param_t *sp, size_t k) {
  return sync_io(ss, sp, k, sp->cur[k], ss->slot[0], false);
}

static int write_back(_mt_ss_t *ss, _mt_ss_param_t *sp, size_t k) {
  int rc = sync_io(ss, sp, k, !sp->cur[k], ss->slot[0], true);
  if (rc == 0) sp->cur[k] ^= 1;
  return rc;
}

int _mt_ss_field(_mt_ss_t *ss, _mt_ss_param_t *sp, _mt_ss_field_t f, size_t off, size_t bytes,
                 void *buf, bool write) {
  if ((unsigned)f >= _MT_SS__NFIELDS || off > _mt_ss_field_bytes(sp, f) ||
      bytes > _mt_ss_field_bytes(sp, f) - off)
    return -EINVAL;
  size_t per = field_len(&sp->l, f, _MT_SS_BLOCK); /* bytes in every block but the last */
  if (per == 0) return bytes == 0 ? 0 : -EINVAL;
  int src = stream_begin(ss);
  if (src < 0) return src;
  int rc = 0;
  uint8_t *p = buf;
  while (rc == 0 && bytes > 0) {
    size_t k = off / per, in = off % per, fo[_MT_SS__NFIELDS];
    block_layout(&sp->l, block_elems(sp, k), fo);
    size_t n = field_len(&sp->l, f, block_elems(sp, k)) - in;
    if (n > bytes) n = bytes;
    rc = read_block(ss, sp, k);
    if (rc != 0) break;
    uint8_t *at = ss->slot[0] + fo[f] + in;
    if (write) {
      memcpy(at, p, n);
      rc = write_back(ss, sp, k);
    } else {
      memcpy(p, at, n);
    }
    p += n;
    off += n;
    bytes -= n;
  }
  pthread_mutex_unlock(&ss->stream);
  return rc;
}

int _mt_ss_floats(_mt_ss_t *ss, _mt_ss_param_t *sp, _mt_ss_field_t f, float *buf, bool write) {
  bool q = sp->l.bits != 0 && (f == _MT_SS_M || f == _MT_SS_V);
  if (f > _MT_SS_VMAX || (!q && field_len(&sp->l, f, 1) == 0)) return -EINVAL;
  if (!q) return _mt_ss_field(ss, sp, f, 0, sp->l.n * sizeof(float), buf, write);
  int src = stream_begin(ss);
  if (src < 0) return src;
  int rc = 0;
  for (size_t k = 0; rc == 0 && k < sp->nblocks; k++) {
    rc = read_block(ss, sp, k);
    if (rc != 0) break;
    _mt_ss_block_t b;
    block_view(sp, k, ss->slot[0], &b);
    _mt_qtensor_t *t = f == _MT_SS_M ? &b.qm : &b.qv;
    if (write) {
      _mt_codec_encode(t, buf + b.begin, 0, b.len);
      rc = write_back(ss, sp, k);
    } else {
      _mt_codec_decode(t, buf + b.begin, 0, b.len);
    }
  }
  pthread_mutex_unlock(&ss->stream);
  return rc;
}

int _mt_ss_refresh_weights(_mt_ss_t *ss, _mt_ss_param_t *sp) {
  if (sp->l.dtype == _MT_DT_F32) return 0;
  int src = stream_begin(ss);
  if (src < 0) return src;
  int rc = 0;
  for (size_t k = 0; rc == 0 && k < sp->nblocks; k++) {
    rc = read_block(ss, sp, k);
    if (rc != 0) break;
    _mt_ss_block_t b;
    block_view(sp, k, ss->slot[0], &b);
    uint16_t *w = (uint16_t *)sp->weights + b.begin;
    for (size_t i = 0; i < b.len; i++)
      w[i] = sp->l.dtype == _MT_DT_BF16 ? _mt_f32_to_bf16(b.master[i]) : _mt_f32_to_f16(b.master[i]);
  }
  pthread_mutex_unlock(&ss->stream);
  return rc;
}
