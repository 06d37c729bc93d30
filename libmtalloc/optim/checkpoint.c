/*
 * checkpoint.c - the one reader and the one writer of optimizer checkpoints.
 *
 * Format, version 3 (little-endian, as the host is):
 *   0  char[8] "MTOPTCK\0"      magic
 *   8  u32 version (3)           a reader refuses any other, but versions 1
 *                                and 2 without 4-bit state (see below)
 *  12  u32 nparams
 *  16  u32 codec                 _mt_codec_t
 *  20  u32 flags                 1 amsgrad, 2 decoupled (AdamW), 4 maximize
 *  24  f64 lr, beta1, beta2, eps, weight_decay   (for the record; not restored)
 *  64  per parameter, a 32-byte record header:
 *        u64 n, u32 dtype, u32 quantised, f32 step, u32 bits, u64 payload bytes
 *      then the payload: f32 master[n]; FP32 state: f32 m[n], v[n] (and
 *      vmax[n] with amsgrad); quantised state: m's codes, f32 m scales[blocks],
 *      v's codes, f32 v scales[blocks]
 *  end u64 XXH3-64 of every byte before it
 *
 * Versions 1 and 2 differ only in what 4-bit codes mean: version 1's
 * second moments and both older versions' first moments used a
 * dynamic-exponent map, now powers of two (codec.c). Those bytes would
 * load and decode to wrong moments, so an older file with the 4-bit codec
 * is refused with a message saying so, and one with FP32, 8-bit or 2-bit
 * state, whose meaning did not change, still loads.
 *
 * The reader trusts nothing: every field is checked against the optimizer
 * it loads into (parameter count, sizes, dtypes, codec, bits, flags) and the
 * payload sizes against what those imply, and the checksum over the whole
 * file is verified, all in a first pass that writes nothing; only then does
 * a second pass copy the payloads into the optimizer. So a corrupt,
 * truncated or mismatched file is an error that names the byte offset and
 * loads nothing. (A file changed between the two passes is not defended
 * against: checkpoints are written once, to a temporary name, then renamed.)
 *
 * Spilled parameters (state on NVMe, statestore.c) are saved and loaded
 * through the store, a megabyte at a time, in the same format: a
 * checkpoint does not say where the state lived. Their reads and writes
 * can fail (-EIO, -EBADMSG: the message names the parameter); a load that
 * fails then has copied the parameters before it, and the blocks of that
 * parameter before the failed one (each block's write is all or nothing):
 * load again. A parameter whose step failed part-way cannot be saved
 * until a step finishes it.
 *
 * Threading: the owner thread, with no step in flight (-EBUSY otherwise).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "codec.h"
#include "hash.h"
#include "optim.h"
#include "statestore.h"

#define CK_MAGIC "MTOPTCK"
#define CK_VERSION 3u
#define CK_VERSION_OLD 1u /* 1: before 4-bit v's power-of-two map; 2: before m's */
#define CK_HEADER_BYTES 64
#define CK_RECORD_BYTES 32
#define CHUNK ((size_t)1 << 20)

enum { F_AMSGRAD = 1, F_DECOUPLED = 2, F_MAXIMIZE = 4 };

typedef struct __attribute__((packed)) ck_header {
  char magic[8];
  uint32_t version, nparams, codec, flags;
  double lr, beta1, beta2, eps, weight_decay;
} ck_header_t;
_Static_assert(sizeof(ck_header_t) == CK_HEADER_BYTES, "checkpoint header layout");

typedef struct __attribute__((packed)) ck_record {
  uint64_t n;
  uint32_t dtype, quant;
  float step;
  uint32_t bits;
  uint64_t payload;
} ck_record_t;
_Static_assert(sizeof(ck_record_t) == CK_RECORD_BYTES, "checkpoint record layout");

static int fail(char *err, size_t len, int rc, const char *fmt, ...) {
  if (err != NULL && len > 0) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, len, fmt, ap);
    va_end(ap);
  }
  return rc;
}

/* The payload arrays of one parameter, in file order. */
typedef struct span {
  void *p;      /* NULL: field f of the spilled parameter's state */
  size_t bytes;
  _mt_ss_field_t f;
} span_t;

static int spans(_mt_optim_t *o, int i, span_t out[5]) {
  _mt_optim_view_t v;
  _mt_optim_view(o, i, &v);
  int k = 0;
  if (v.sp != NULL) {
    static const _mt_ss_field_t rest[] = {_MT_SS_M, _MT_SS_V, _MT_SS_VMAX, _MT_SS_QM_CODES,
                                          _MT_SS_QM_SCALES, _MT_SS_QV_CODES, _MT_SS_QV_SCALES};
    out[k++] = (span_t){v.dtype == _MT_DT_F32 ? v.master : NULL, v.n * 4, _MT_SS_MASTER};
    for (int j = 0; j < 7; j++) {
      size_t b = _mt_ss_field_bytes(v.sp, rest[j]); /* 0: not in this layout */
      if (b > 0)
        out[k++] = (span_t){NULL, b, rest[j]};
    }
    return k;
  }
  out[k++] = (span_t){v.master, v.n * 4, _MT_SS_MASTER};
  if (v.quant) {
    out[k++] = (span_t){v.qm->codes, _mt_qtensor_code_bytes(v.qm), _MT_SS_MASTER};
    out[k++] = (span_t){v.qm->scales, _mt_qtensor_blocks(v.qm) * 4, _MT_SS_MASTER};
    out[k++] = (span_t){v.qv->codes, _mt_qtensor_code_bytes(v.qv), _MT_SS_MASTER};
    out[k++] = (span_t){v.qv->scales, _mt_qtensor_blocks(v.qv) * 4, _MT_SS_MASTER};
  } else {
    out[k++] = (span_t){v.m, v.n * 4, _MT_SS_MASTER};
    out[k++] = (span_t){v.v, v.n * 4, _MT_SS_MASTER};
    if (v.vmax != NULL)
      out[k++] = (span_t){v.vmax, v.n * 4, _MT_SS_MASTER};
  }
  return k;
}

static void fill_record(_mt_optim_t *o, int i, ck_record_t *r) {
  _mt_optim_view_t v;
  span_t s[5];
  _mt_optim_view(o, i, &v);
  int k = spans(o, i, s);
  memset(r, 0, sizeof(*r));
  r->n = v.n;
  r->dtype = (uint32_t)v.dtype;
  r->quant = (uint32_t)v.quant;
  r->step = *v.step;
  r->bits = v.quant ? (uint32_t)v.qm->bits : 32;
  for (int j = 0; j < k; j++)
    r->payload += s[j].bytes;
}

static void fill_header(_mt_optim_t *o, ck_header_t *h) {
  const _mt_optim_cfg_t *c = _mt_optim_cfg(o);
  memset(h, 0, sizeof(*h));
  memcpy(h->magic, CK_MAGIC, 8);
  h->version = CK_VERSION;
  h->nparams = (uint32_t)_mt_optim_count(o);
  h->codec = (uint32_t)c->codec;
  h->flags = (c->hp.amsgrad ? F_AMSGRAD : 0) | (c->hp.decoupled ? F_DECOUPLED : 0) |
             (c->hp.maximize ? F_MAXIMIZE : 0);
  h->lr = c->hp.lr;
  h->beta1 = c->hp.beta1;
  h->beta2 = c->hp.beta2;
  h->eps = c->hp.eps;
  h->weight_decay = c->hp.weight_decay;
}

static int write_all(FILE *f, XXH3_state_t *st, const void *p, size_t n) {
  XXH3_64bits_update(st, p, n);
  return fwrite(p, 1, n, f) == n ? 0 : -EIO;
}

/* Span s of a spilled parameter, to the file a CHUNK at a time. */
static int write_spilled(FILE *f, XXH3_state_t *st, _mt_optim_view_t *v, const span_t *s,
                         uint8_t *buf) {
  for (size_t off = 0; off < s->bytes; off += CHUNK) {
    size_t n = s->bytes - off < CHUNK ? s->bytes - off : CHUNK;
    int rc = _mt_ss_field(v->ss, v->sp, s->f, off, n, buf, false);
    if (rc == 0)
      rc = write_all(f, st, buf, n);
    if (rc != 0)
      return rc;
  }
  return 0;
}

int _mt_optim_save(_mt_optim_t *o, const char *path, char *err, size_t errlen) {
  if (err != NULL && errlen > 0)
    err[0] = '\0';
  if (_mt_optim_busy(o))
    return fail(err, errlen, -EBUSY, "%s: a step is in flight; wait first", path);
  for (int i = 0; i < _mt_optim_count(o); i++) {
    _mt_optim_view_t v;
    _mt_optim_view(o, i, &v);
    if (v.sp != NULL && _mt_ss_resume(v.sp) != 0)
      return fail(err, errlen, -EAGAIN,
                  "%s: parameter %d: its last step failed part-way on NVMe; step it again first",
                  path, i);
  }
  uint8_t *xbuf = malloc(CHUNK); /* spilled state passes through it */
  if (xbuf == NULL)
    return -ENOMEM;
  size_t plen = strlen(path);
  char *tmp = malloc(plen + 5);
  if (tmp == NULL) {
    free(xbuf);
    return -ENOMEM;
  }
  memcpy(tmp, path, plen);
  memcpy(tmp + plen, ".tmp", 5);
  FILE *f = fopen(tmp, "wb");
  if (f == NULL) {
    int rc = -errno;
    fail(err, errlen, rc, "%s: cannot create: %s", tmp, strerror(errno));
    free(tmp);
    free(xbuf);
    return rc;
  }
  XXH3_state_t st;
  XXH3_64bits_reset(&st);
  ck_header_t h;
  fill_header(o, &h);
  int rc = write_all(f, &st, &h, sizeof(h));
  for (int i = 0; rc == 0 && i < _mt_optim_count(o); i++) {
    ck_record_t r;
    span_t s[5];
    fill_record(o, i, &r);
    rc = write_all(f, &st, &r, sizeof(r));
    int k = spans(o, i, s);
    _mt_optim_view_t v;
    _mt_optim_view(o, i, &v);
    for (int j = 0; rc == 0 && j < k; j++)
      rc = s[j].p != NULL ? write_all(f, &st, s[j].p, s[j].bytes) : write_spilled(f, &st, &v, &s[j], xbuf);
    if (rc != 0 && rc != -EIO)
      fail(err, errlen, rc, "%s: parameter %d: its state on NVMe could not be read: %s", path, i,
           strerror(-rc));
  }
  uint64_t sum = XXH3_64bits_digest(&st);
  if (rc == 0 && fwrite(&sum, 8, 1, f) != 1)
    rc = -EIO;
  if (rc == 0 && (fflush(f) != 0 || fsync(fileno(f)) != 0))
    rc = -errno ? -errno : -EIO;
  if (fclose(f) != 0 && rc == 0)
    rc = -EIO;
  if (rc == 0 && rename(tmp, path) != 0)
    rc = -errno;
  if (rc != 0) {
    if (err == NULL || err[0] == '\0')
      fail(err, errlen, rc, "%s: write failed: %s", path, strerror(-rc));
    unlink(tmp);
  }
  free(tmp);
  free(xbuf);
  return rc;
}

/* Pass 1 (copy == 0): checks everything and the checksum, writes nothing.
 * Pass 2 (copy == 1): reads the payloads into the optimizer. */
static int load_pass(_mt_optim_t *o, FILE *f, const char *path, uint64_t size, int copy,
                     char *err, size_t errlen) {
  XXH3_state_t st;
  XXH3_64bits_reset(&st);
  uint64_t off = 0;
  ck_header_t h, want;
  if (fseek(f, 0, SEEK_SET) != 0)
    return fail(err, errlen, -EIO, "%s: cannot seek", path);
  if (size < sizeof(h) + 8 || fread(&h, sizeof(h), 1, f) != 1)
    return fail(err, errlen, -EINVAL, "%s: byte 0: file too short for a checkpoint (%llu bytes)",
                path, (unsigned long long)size);
  XXH3_64bits_update(&st, &h, sizeof(h));
  fill_header(o, &want);
  if (memcmp(h.magic, CK_MAGIC, 8) != 0)
    return fail(err, errlen, -EINVAL, "%s: byte 0: not an mtalloc optimizer checkpoint", path);
  const bool old = h.version >= CK_VERSION_OLD && h.version < CK_VERSION;
  if (old && h.codec == _MT_CODEC_4BIT)
    return fail(err, errlen, -EINVAL,
                "%s: byte 8: version %u with 4-bit state, whose %s use the dynamic-exponent "
                "map this reader no longer decodes (version %u's are powers of two); resume it "
                "with the build that wrote it",
                path, h.version, h.version == 1 ? "moments" : "first moments", CK_VERSION);
  if (h.version != CK_VERSION && !old)
    return fail(err, errlen, -EINVAL, "%s: byte 8: version %u, this reader knows %u", path,
                h.version, CK_VERSION);
  if (h.nparams != want.nparams)
    return fail(err, errlen, -EINVAL, "%s: byte 12: %u parameters, the optimizer has %u", path,
                h.nparams, want.nparams);
  if (h.codec != want.codec)
    return fail(err, errlen, -EINVAL, "%s: byte 16: state codec %u, the optimizer uses %u", path,
                h.codec, want.codec);
  if (h.flags != want.flags)
    return fail(err, errlen, -EINVAL,
                "%s: byte 20: flags 0x%x (amsgrad/AdamW/maximize), the optimizer has 0x%x", path,
                h.flags, want.flags);
  off = sizeof(h);
  char *buf = copy ? NULL : malloc(CHUNK);
  uint8_t *xbuf = copy ? malloc(CHUNK) : NULL; /* to spilled state */
  if ((!copy && buf == NULL) || (copy && xbuf == NULL))
    return -ENOMEM;
  int rc = 0;
  for (uint32_t i = 0; rc == 0 && i < h.nparams; i++) {
    ck_record_t r, w;
    fill_record(o, (int)i, &w);
    if (size - 8 - off < sizeof(r) || fread(&r, sizeof(r), 1, f) != 1) {
      rc = fail(err, errlen, -EINVAL, "%s: byte %llu: truncated at parameter %u's record", path,
                (unsigned long long)off, i);
      break;
    }
    XXH3_64bits_update(&st, &r, sizeof(r));
    if (r.n != w.n || r.dtype != w.dtype || r.quant != w.quant || r.bits != w.bits ||
        r.payload != w.payload) {
      rc = fail(err, errlen, -EINVAL,
                "%s: byte %llu: parameter %u is %llu elements, dtype %u, %u-bit state; "
                "the optimizer's is %llu, dtype %u, %u-bit",
                path, (unsigned long long)off, i, (unsigned long long)r.n, r.dtype, r.bits,
                (unsigned long long)w.n, w.dtype, w.bits);
      break;
    }
    if (!(r.step >= 0) || r.step != (float)(uint32_t)r.step) {
      rc = fail(err, errlen, -EINVAL, "%s: byte %llu: step count %g is not a count", path,
                (unsigned long long)(off + 16), (double)r.step);
      break;
    }
    off += sizeof(r);
    if (size - 8 - off < r.payload) {
      rc = fail(err, errlen, -EINVAL, "%s: byte %llu: truncated in parameter %u's state", path,
                (unsigned long long)off, i);
      break;
    }
    if (copy) {
      span_t s[5];
      int k = spans(o, (int)i, s);
      _mt_optim_view_t v;
      _mt_optim_view(o, (int)i, &v);
      for (int j = 0; rc == 0 && j < k; j++) {
        if (s[j].p != NULL) {
          if (fread(s[j].p, 1, s[j].bytes, f) != s[j].bytes)
            rc = fail(err, errlen, -EIO, "%s: byte %llu: read failed", path, (unsigned long long)off);
          continue;
        }
        for (size_t at = 0; rc == 0 && at < s[j].bytes; at += CHUNK) {
          size_t n = s[j].bytes - at < CHUNK ? s[j].bytes - at : CHUNK;
          if (fread(xbuf, 1, n, f) != n)
            rc = fail(err, errlen, -EIO, "%s: byte %llu: read failed", path, (unsigned long long)off);
          else if ((rc = _mt_ss_field(v.ss, v.sp, s[j].f, at, n, xbuf, true)) != 0)
            fail(err, errlen, rc,
                 "%s: parameter %u: its state on NVMe could not be written (%s): parameters "
                 "before it are loaded, it partly: load again", path, i, strerror(-rc));
        }
      }
      if (rc != 0)
        break;
      *v.step = r.step;
      if (v.sp != NULL)
        _mt_ss_clear_resume(v.sp); /* every block now holds the file's state */
      rc = _mt_optim_refresh_weights(o, (int)i);
      if (rc != 0)
        fail(err, errlen, rc, "%s: parameter %u: its master on NVMe could not be read back (%s)",
             path, i, strerror(-rc));
    } else {
      for (uint64_t left = r.payload; rc == 0 && left > 0;) {
        size_t n = left < CHUNK ? (size_t)left : CHUNK;
        if (fread(buf, 1, n, f) != n)
          rc = fail(err, errlen, -EIO, "%s: byte %llu: read failed", path,
                    (unsigned long long)(off + r.payload - left));
        XXH3_64bits_update(&st, buf, n);
        left -= n;
      }
    }
    off += r.payload;
  }
  free(buf);
  free(xbuf);
  if (rc != 0 || copy)
    return rc;
  if (size - off != 8)
    return fail(err, errlen, -EINVAL, "%s: byte %llu: %llu bytes after the last parameter, expected 8",
                path, (unsigned long long)off, (unsigned long long)(size - off));
  uint64_t sum;
  if (fread(&sum, 8, 1, f) != 1)
    return fail(err, errlen, -EIO, "%s: byte %llu: read failed", path, (unsigned long long)off);
  if (sum != XXH3_64bits_digest(&st))
    return fail(err, errlen, -EINVAL,
                "%s: byte %llu: checksum mismatch: the file is corrupt (nothing loaded)", path,
                (unsigned long long)off);
  return 0;
}

int _mt_optim_load(_mt_optim_t *o, const char *path, char *err, size_t errlen) {
  if (_mt_optim_busy(o))
    return fail(err, errlen, -EBUSY, "%s: a step is in flight; wait first", path);
  FILE *f = fopen(path, "rb");
  if (f == NULL) {
    int rc = -errno;
    return fail(err, errlen, rc, "%s: cannot open: %s", path, strerror(errno));
  }
  struct stat sb;
  int rc = fstat(fileno(f), &sb) == 0 ? 0 : -errno;
  if (rc == 0)
    rc = load_pass(o, f, path, (uint64_t)sb.st_size, 0, err, errlen);
  if (rc == 0)
    rc = load_pass(o, f, path, (uint64_t)sb.st_size, 1, err, errlen);
  fclose(f);
  return rc;
}
