/*
 * trace_io.c - the one reader and the one writer of trace files
 * (trace_format.h, docs/trace-format.md).
 *
 * The reader trusts nothing in the file. It reads through its own buffer
 * (pread, never the whole file: recorded traces run to gigabytes) and checks
 * every record before handing it out: size against 16, 8-byte alignment, the
 * type's fixed part, MT_TRACE_REC_MAX and the bytes left; the variable parts
 * (LAUNCH spans and access kinds, NAME text) against their counts and
 * limits. It reads versions MT_TRACE_VERSION_MIN to MT_TRACE_VERSION, each
 * by its own layout (a version 1 LAUNCH has no kinds); the writer writes
 * MT_TRACE_VERSION only. The buffer
 * holds MT_TRACE_REC_MAX bytes (the file's size if that is less, grown if
 * the file grows), so any valid record fits in it whole and the reader
 * never allocates more than that, whatever the file says. The
 * first error is sticky: every later call returns it again, with the same
 * "FILE: byte N: what" message.
 *
 * The buffer is refilled at record boundaries, and records start at
 * multiples of 8 in the file, so every record handed out is 8-byte aligned
 * in memory and may be read through the structs of trace_format.h.
 *
 * The writer appends records into a 1 MiB buffer and writes it out when it
 * fills, on mt_trace_writer_flush and on close. The first write error
 * (ENOSPC, EIO) is sticky and returned by every later call, close included.
 *
 * Neither object is thread-safe; each has one owner (the recorder's flusher
 * thread owns its writer).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "trace_io.h"

#define RD_BUF_BYTES ((size_t)2 << 20)      /* >= MT_TRACE_REC_MAX */
#define WR_BUF_BYTES ((size_t)1 << 20)
#define HEADER_MAX_BYTES ((uint32_t)1 << 20) /* header_bytes a reader accepts */
#define ERR_MAX 512

_Static_assert(RD_BUF_BYTES >= MT_TRACE_REC_MAX, "reader buffer holds the largest record");
_Static_assert(sizeof(mt_trace_rec_t) == 16, "record header layout");
_Static_assert(sizeof(mt_trace_alloc_t) == 40, "alloc layout");
_Static_assert(sizeof(mt_trace_free_t) == 32, "free layout");
_Static_assert(sizeof(mt_trace_launch_t) == 48, "launch layout");
_Static_assert(sizeof(mt_trace_span_t) == 24, "span layout");
_Static_assert(sizeof(mt_trace_copy_t) == 40, "copy layout");
_Static_assert(sizeof(mt_trace_move_t) == 40, "move layout");
_Static_assert(sizeof(mt_trace_stall_t) == 32, "stall layout");
_Static_assert(sizeof(mt_trace_opt_step_t) == 32, "opt step layout");
_Static_assert(sizeof(mt_trace_iter_t) == 24, "iter layout");
_Static_assert(sizeof(mt_trace_name_t) == 32, "name layout");

/* ---- record checks --------------------------------------------------------- */

static const struct {
  const char *name;
  uint32_t fixed; /* bytes of the fixed part */
} rec_types[MT_TR__COUNT] = {
  [MT_TR_ALLOC] = {"ALLOC", sizeof(mt_trace_alloc_t)},
  [MT_TR_FREE] = {"FREE", sizeof(mt_trace_free_t)},
  [MT_TR_LAUNCH] = {"LAUNCH", sizeof(mt_trace_launch_t)},
  [MT_TR_COPY] = {"COPY", sizeof(mt_trace_copy_t)},
  [MT_TR_FETCH] = {"FETCH", sizeof(mt_trace_move_t)},
  [MT_TR_EVICT] = {"EVICT", sizeof(mt_trace_move_t)},
  [MT_TR_STALL] = {"STALL", sizeof(mt_trace_stall_t)},
  [MT_TR_OPT_STEP] = {"OPT_STEP", sizeof(mt_trace_opt_step_t)},
  [MT_TR_ITER] = {"ITER", sizeof(mt_trace_iter_t)},
  [MT_TR_NAME] = {"NAME", sizeof(mt_trace_name_t)},
};

static int fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t errlen, const char *fmt, ...) {
  if (err && errlen) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
  }
  return -EINVAL;
}

static uint32_t load32(const uint8_t *p) {
  uint32_t v;
  memcpy(&v, p, sizeof(v));
  return v;
}

/* Checks the record at p with avail bytes readable there (the rest of the
 * file), as a record of a trace of the given version. Reads only bytes it
 * has shown to be inside avail, through memcpy, so p need not be aligned. */
int mt_trace_check_record_version(const void *rec, size_t avail, uint32_t version, char *err, size_t errlen) {
  const uint8_t *p = rec;
  if (avail < 8)
    return fail(err, errlen, "truncated record (%zu bytes of at least %zu)", avail, sizeof(mt_trace_rec_t));
  uint8_t type = p[0];
  uint32_t size = load32(p + 4);
  if (size < sizeof(mt_trace_rec_t))
    return fail(err, errlen, "record size %u is below %zu", size, sizeof(mt_trace_rec_t));
  if (size % 8)
    return fail(err, errlen, "record size %u is not a multiple of 8", size);
  if (size > MT_TRACE_REC_MAX)
    return fail(err, errlen, "record size %u exceeds the limit of %zu bytes", size, (size_t)MT_TRACE_REC_MAX);
  if (type == 0 || type >= MT_TR__COUNT)
    return fail(err, errlen, "unknown record type %u (size %u)", type, size);
  if (size < rec_types[type].fixed)
    return fail(err, errlen, "record size %u is smaller than the fixed part of %s (%u bytes)", size,
                rec_types[type].name, rec_types[type].fixed);
  if (size > avail) return fail(err, errlen, "truncated record (%zu bytes of %u)", avail, size);
  if (type == MT_TR_LAUNCH) {
    uint32_t nfoot = load32(p + offsetof(mt_trace_launch_t, nfoot));
    if (nfoot > MT_TRACE_FOOT_MAX)
      return fail(err, errlen, "LAUNCH with %u spans, more than the limit of %u", nfoot, MT_TRACE_FOOT_MAX);
    bool kinds = version >= 2;
    uint64_t want = kinds ? MT_TRACE_LAUNCH_BYTES(nfoot) : MT_TRACE_LAUNCH_BYTES_V1(nfoot);
    if (size != want)
      return fail(err, errlen, "LAUNCH record size %u does not match its %u spans%s (%llu bytes)", size, nfoot,
                  kinds ? " and their access kinds" : "", (unsigned long long)want);
    /* A kind outside the enum is corruption, not a future kind: new kinds
     * would come with a new version. */
    const uint8_t *kind = p + MT_TRACE_LAUNCH_BYTES_V1(nfoot);
    for (uint32_t i = 0; kinds && i < nfoot; i++)
      if (kind[i] >= MT_ACC__COUNT)
        return fail(err, errlen, "LAUNCH span %u has access kind %u (byte %llu of the record; known: 0-%d)", i,
                    kind[i], (unsigned long long)(MT_TRACE_LAUNCH_BYTES_V1(nfoot) + i), MT_ACC__COUNT - 1);
  } else if (type == MT_TR_NAME) {
    uint32_t len = load32(p + offsetof(mt_trace_name_t, len));
    if (len > MT_TRACE_NAME_MAX)
      return fail(err, errlen, "NAME of %u bytes, longer than the limit of %u", len, MT_TRACE_NAME_MAX);
    if (sizeof(mt_trace_name_t) + (size_t)len > size)
      return fail(err, errlen, "NAME of %u bytes does not fit its record of %u bytes", len, size);
  }
  return 0;
}

int mt_trace_check_record(const void *rec, size_t avail, char *err, size_t errlen) {
  return mt_trace_check_record_version(rec, avail, MT_TRACE_VERSION, err, errlen);
}

/* ---- reader ------------------------------------------------------------------ */

struct mt_trace_reader {
  int fd;
  char *path;
  uint64_t size;        /* file size at open */
  mt_trace_header_t hdr;
  char *options;        /* NUL-terminated */
  uint8_t *buf;         /* buf_cap bytes */
  size_t buf_cap;       /* RD_BUF_BYTES, or less for a smaller file */
  uint64_t buf_off;     /* file offset of buf[0], a multiple of 8 */
  size_t buf_len;       /* valid bytes in buf */
  bool eof;             /* a read returned 0 at buf_off + buf_len */
  uint64_t next_off;    /* offset of the next record */
  uint64_t rec_off;     /* offset of the record last returned, or of the error */
  int err_rc;           /* sticky error, 0 while fine */
  char err[ERR_MAX];
};

static int rd_fail(mt_trace_reader_t *r, int rc, uint64_t off, const char *what) {
  r->rec_off = off;
  r->err_rc = rc;
  snprintf(r->err, sizeof(r->err), "%s: byte %llu: %s", r->path, (unsigned long long)off, what);
  return rc;
}

/* Reads at most len bytes at off into dst; returns the bytes read (short
 * only at the end of the file) or -errno. */
static ssize_t read_at(int fd, void *dst, size_t len, uint64_t off) {
  size_t got = 0;
  while (got < len) {
    ssize_t n = pread(fd, (uint8_t *)dst + got, len - got, (off_t)(off + got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return -errno;
    if (n == 0) break;
    got += (size_t)n;
  }
  return (ssize_t)got;
}

/* Makes the bytes from off on available in the buffer, as many as it holds
 * or the file has. Returns the number available at off (>= want unless the
 * file ends first) or -errno. */
static ssize_t rd_fill(mt_trace_reader_t *r, uint64_t off, size_t want) {
  if (want > r->buf_cap && r->buf_cap < RD_BUF_BYTES) { /* the file grew since open */
    uint8_t *nb = realloc(r->buf, RD_BUF_BYTES);
    if (!nb) return -ENOMEM;
    r->buf = nb;
    r->buf_cap = RD_BUF_BYTES;
  }
  uint64_t end = r->buf_off + r->buf_len;
  if (off >= r->buf_off && off <= end && end - off >= want) return (ssize_t)(end - off);
  if (off >= r->buf_off && off <= end) {
    if (r->eof) return (ssize_t)(end - off);
    size_t keep = (size_t)(end - off);
    memmove(r->buf, r->buf + (off - r->buf_off), keep);
    r->buf_len = keep;
  } else {
    r->buf_len = 0;
    r->eof = false;
  }
  r->buf_off = off;
  ssize_t n = read_at(r->fd, r->buf + r->buf_len, r->buf_cap - r->buf_len, off + r->buf_len);
  if (n < 0) return n;
  if (r->buf_len + (size_t)n < r->buf_cap) r->eof = true;
  r->buf_len += (size_t)n;
  return (ssize_t)r->buf_len;
}

int mt_trace_open(const char *path, mt_trace_reader_t **out, char *err, size_t errlen) {
  *out = NULL;
  char what[256];
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int e = errno;
    if (err && errlen) snprintf(err, errlen, "%s: %s", path, strerror(e));
    return -e;
  }
  struct stat st;
  int e = fstat(fd, &st) != 0 ? errno : S_ISREG(st.st_mode) ? 0 : EINVAL;
  if (e) {
    if (err && errlen) snprintf(err, errlen, "%s: %s", path, e == EINVAL ? "not a regular file" : strerror(e));
    close(fd);
    return -e;
  }
  /* No record is longer than the file: a small file gets a small buffer. */
  size_t cap = (uint64_t)st.st_size < RD_BUF_BYTES ? ((size_t)st.st_size + 64) & ~(size_t)7 : RD_BUF_BYTES;
  mt_trace_reader_t *r = calloc(1, sizeof(*r));
  char *pathcopy = strdup(path);
  uint8_t *buf = malloc(cap);
  if (!r || !pathcopy || !buf) {
    free(r);
    free(pathcopy);
    free(buf);
    close(fd);
    if (err && errlen) snprintf(err, errlen, "%s: out of memory", path);
    return -ENOMEM;
  }
  r->fd = fd;
  r->path = pathcopy;
  r->buf = buf;
  r->buf_cap = cap;
  r->size = (uint64_t)st.st_size;

  int rc = 0;
  mt_trace_header_t *h = &r->hdr;
  ssize_t n = read_at(fd, h, sizeof(*h), 0);
  if (n < 0) {
    snprintf(what, sizeof(what), "read failed: %s", strerror((int)-n));
    rc = rd_fail(r, -EIO, 0, what);
  } else if (n == 0) {
    rc = rd_fail(r, -EINVAL, 0, "empty file, not an mtalloc trace");
  } else if ((size_t)n < sizeof(h->magic) || memcmp(h->magic, MT_TRACE_MAGIC, sizeof(h->magic)) != 0) {
    rc = rd_fail(r, -EINVAL, 0, "not an mtalloc trace (bad magic)");
  } else if ((size_t)n < offsetof(mt_trace_header_t, header_bytes)) {
    snprintf(what, sizeof(what), "truncated header (%zd bytes of %zu)", n, sizeof(*h));
    rc = rd_fail(r, -EINVAL, (uint64_t)n, what);
  } else if (h->version < MT_TRACE_VERSION_MIN || h->version > MT_TRACE_VERSION) {
    snprintf(what, sizeof(what), "version %u, this reader reads %d to %d", h->version, MT_TRACE_VERSION_MIN,
             MT_TRACE_VERSION);
    rc = rd_fail(r, -EINVAL, offsetof(mt_trace_header_t, version), what);
  } else if ((size_t)n < sizeof(*h)) {
    snprintf(what, sizeof(what), "truncated header (%zd bytes of %zu)", n, sizeof(*h));
    rc = rd_fail(r, -EINVAL, (uint64_t)n, what);
  } else {
    const uint64_t hb_off = offsetof(mt_trace_header_t, header_bytes);
    uint32_t hb = h->header_bytes;
    if (hb < sizeof(*h)) {
      snprintf(what, sizeof(what), "header_bytes %u is smaller than the header (%zu)", hb, sizeof(*h));
      rc = rd_fail(r, -EINVAL, hb_off, what);
    } else if (hb % 8) {
      snprintf(what, sizeof(what), "header_bytes %u is not a multiple of 8", hb);
      rc = rd_fail(r, -EINVAL, hb_off, what);
    } else if (hb > HEADER_MAX_BYTES) {
      snprintf(what, sizeof(what), "header_bytes %u exceeds the limit of %u", hb, HEADER_MAX_BYTES);
      rc = rd_fail(r, -EINVAL, hb_off, what);
    } else if (hb > r->size) {
      snprintf(what, sizeof(what), "header_bytes %u exceeds the file size %llu", hb, (unsigned long long)r->size);
      rc = rd_fail(r, -EINVAL, hb_off, what);
    } else {
      size_t olen = hb - sizeof(*h);
      r->options = malloc(olen + 1);
      if (!r->options) {
        rc = rd_fail(r, -ENOMEM, sizeof(*h), "out of memory for the options text");
      } else {
        n = olen ? read_at(fd, r->options, olen, sizeof(*h)) : 0;
        if (n < 0 || (size_t)n != olen) {
          snprintf(what, sizeof(what), "cannot read the options text (%s)",
                   n < 0 ? strerror((int)-n) : "file shrank");
          rc = rd_fail(r, -EIO, sizeof(*h), what);
        } else {
          r->options[olen] = '\0';
          /* The strings are the file's: make them strings whatever it holds. */
          h->device[sizeof(h->device) - 1] = '\0';
          h->source[sizeof(h->source) - 1] = '\0';
          r->next_off = hb;
          r->rec_off = hb;
        }
      }
    }
  }
  if (rc) {
    if (err && errlen) snprintf(err, errlen, "%s", r->err);
    mt_trace_close(r);
    return rc;
  }
  *out = r;
  return 0;
}

const mt_trace_header_t *mt_trace_header(const mt_trace_reader_t *r) {
  return &r->hdr;
}

const char *mt_trace_options(const mt_trace_reader_t *r) {
  return r->options ? r->options : "";
}

int mt_trace_next(mt_trace_reader_t *r, const mt_trace_rec_t **rec) {
  *rec = NULL;
  if (r->err_rc) return r->err_rc;
  uint64_t off = r->next_off;
  r->rec_off = off;
  ssize_t avail = rd_fill(r, off, sizeof(mt_trace_rec_t));
  if (avail < 0) {
    char what[128];
    snprintf(what, sizeof(what), "read failed: %s", strerror((int)-avail));
    return rd_fail(r, -EIO, off, what);
  }
  if (avail == 0) return 0;
  uint32_t size = avail >= 8 ? load32(r->buf + (off - r->buf_off) + 4) : 0;
  if (avail >= 8 && (size_t)avail < size && size <= MT_TRACE_REC_MAX) {
    avail = rd_fill(r, off, size);
    if (avail < 0) {
      char what[128];
      snprintf(what, sizeof(what), "read failed: %s", strerror((int)-avail));
      return rd_fail(r, -EIO, off, what);
    }
  }
  const uint8_t *p = r->buf + (off - r->buf_off);
  char what[256];
  int rc = mt_trace_check_record_version(p, (size_t)avail, r->hdr.version, what, sizeof(what));
  if (rc) return rd_fail(r, rc, off, what);
  r->next_off = off + size;
  *rec = (const mt_trace_rec_t *)(const void *)p;
  return 1;
}

uint64_t mt_trace_offset(const mt_trace_reader_t *r) {
  return r->rec_off;
}

uint64_t mt_trace_size(const mt_trace_reader_t *r) {
  return r->size;
}

const char *mt_trace_error(const mt_trace_reader_t *r) {
  return r->err;
}

int mt_trace_rewind(mt_trace_reader_t *r) {
  r->err_rc = 0;
  r->err[0] = '\0';
  r->next_off = r->hdr.header_bytes;
  r->rec_off = r->next_off;
  r->buf_len = 0;
  r->eof = false;
  return 0;
}

void mt_trace_close(mt_trace_reader_t *r) {
  if (!r) return;
  if (r->fd >= 0) close(r->fd);
  free(r->path);
  free(r->options);
  free(r->buf);
  free(r);
}

/* ---- writer ------------------------------------------------------------------ */

struct mt_trace_writer {
  int fd;
  int err;       /* sticky -errno of the first failed write, 0 while fine */
  size_t len;    /* bytes in buf */
  uint8_t *buf;  /* WR_BUF_BYTES */
};

static int write_all(int fd, const void *p, size_t len) {
  const uint8_t *b = p;
  while (len > 0) {
    ssize_t n = write(fd, b, len);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return -errno;
    if (n == 0) return -ENOSPC;
    b += n;
    len -= (size_t)n;
  }
  return 0;
}

int mt_trace_writer_flush(mt_trace_writer_t *w) {
  if (w->err) return w->err;
  if (w->len == 0) return 0;
  int rc = write_all(w->fd, w->buf, w->len);
  w->len = 0;
  if (rc) w->err = rc;
  return rc;
}

/* Room for n more bytes in the buffer (n <= WR_BUF_BYTES), or -errno. */
static int wr_room(mt_trace_writer_t *w, size_t n) {
  if (w->err) return w->err;
  if (WR_BUF_BYTES - w->len < n) return mt_trace_writer_flush(w);
  return 0;
}

/* Appends len bytes, through the buffer or (large) straight to the file. */
static int wr_append(mt_trace_writer_t *w, const void *p, size_t len) {
  if (len > WR_BUF_BYTES / 2) {
    int rc = mt_trace_writer_flush(w);
    if (rc) return rc;
    rc = write_all(w->fd, p, len);
    if (rc) w->err = rc;
    return rc;
  }
  int rc = wr_room(w, len);
  if (rc) return rc;
  memcpy(w->buf + w->len, p, len);
  w->len += len;
  return 0;
}

void mt_trace_header_init(mt_trace_header_t *h, uint32_t clock, const char *source) {
  memset(h, 0, sizeof(*h));
  memcpy(h->magic, MT_TRACE_MAGIC, sizeof(h->magic));
  h->version = MT_TRACE_VERSION;
  h->header_bytes = sizeof(*h);
  h->clock = clock;
  if (source) snprintf(h->source, sizeof(h->source), "%s", source);
}

int mt_trace_writer_open(const char *path, const mt_trace_header_t *h, const char *options,
                         mt_trace_writer_t **out) {
  *out = NULL;
  size_t olen = options ? strlen(options) : 0;
  size_t hb = (sizeof(*h) + olen + 7) & ~(size_t)7;
  if (hb > HEADER_MAX_BYTES) return -EINVAL;
  mt_trace_writer_t *w = calloc(1, sizeof(*w));
  uint8_t *buf = malloc(WR_BUF_BYTES);
  if (!w || !buf) {
    free(w);
    free(buf);
    return -ENOMEM;
  }
  w->buf = buf;
  w->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (w->fd < 0) {
    int e = errno;
    free(buf);
    free(w);
    return -e;
  }
  mt_trace_header_t hdr = *h;
  memcpy(hdr.magic, MT_TRACE_MAGIC, sizeof(hdr.magic));
  hdr.version = MT_TRACE_VERSION;
  hdr.header_bytes = (uint32_t)hb;
  memcpy(w->buf, &hdr, sizeof(hdr));
  if (olen) memcpy(w->buf + sizeof(hdr), options, olen);
  memset(w->buf + sizeof(hdr) + olen, 0, hb - sizeof(hdr) - olen);
  w->len = hb;
  *out = w;
  return 0;
}

int mt_trace_write(mt_trace_writer_t *w, const mt_trace_rec_t *rec) {
  if (rec->size < sizeof(*rec) || rec->size % 8 || rec->size > MT_TRACE_REC_MAX) return -EINVAL;
  return wr_append(w, rec, rec->size);
}

int mt_trace_write_launch(mt_trace_writer_t *w, const mt_trace_launch_t *l, const mt_trace_span_t *foot,
                          const uint8_t *kinds) {
  if (l->nfoot > MT_TRACE_FOOT_MAX || (l->nfoot && !foot)) return -EINVAL;
  for (uint32_t i = 0; kinds && i < l->nfoot; i++)
    if (kinds[i] >= MT_ACC__COUNT) return -EINVAL;
  size_t fb = (size_t)l->nfoot * sizeof(*foot), kb = (size_t)MT_TRACE_KINDS_BYTES(l->nfoot);
  mt_trace_launch_t hdr = *l;
  hdr.h.type = MT_TR_LAUNCH;
  hdr.h.size = (uint32_t)(sizeof(hdr) + fb + kb);
  uint8_t kstack[64];
  uint8_t *kbuf = kb <= sizeof(kstack) ? kstack : calloc(1, kb);
  if (!kbuf) return -ENOMEM;
  memset(kbuf, 0, kb); /* MT_ACC_UNKNOWN, and the zero padding */
  if (kinds && l->nfoot) memcpy(kbuf, kinds, l->nfoot);
  int rc;
  if (sizeof(hdr) + fb + kb > WR_BUF_BYTES / 2) {
    rc = wr_append(w, &hdr, sizeof(hdr));
    if (!rc) rc = wr_append(w, foot, fb);
    if (!rc) rc = wr_append(w, kbuf, kb);
  } else if (!(rc = wr_room(w, sizeof(hdr) + fb + kb))) {
    uint8_t *p = w->buf + w->len;
    memcpy(p, &hdr, sizeof(hdr));
    if (fb) memcpy(p + sizeof(hdr), foot, fb);
    if (kb) memcpy(p + sizeof(hdr) + fb, kbuf, kb);
    w->len += sizeof(hdr) + fb + kb;
  }
  if (kbuf != kstack) free(kbuf);
  return rc;
}

int mt_trace_write_name(mt_trace_writer_t *w, uint64_t t_ns, uint64_t id, const char *name) {
  size_t len = name ? strnlen(name, MT_TRACE_NAME_MAX) : 0; /* longer names are cut */
  size_t size = (sizeof(mt_trace_name_t) + len + 7) & ~(size_t)7;
  int rc = wr_room(w, size);
  if (rc) return rc;
  mt_trace_name_t n = {.h = {.type = MT_TR_NAME, .size = (uint32_t)size, .t_ns = t_ns}, .id = id,
                       .len = (uint32_t)len};
  uint8_t *p = w->buf + w->len;
  memcpy(p, &n, sizeof(n));
  if (len) memcpy(p + sizeof(n), name, len);
  memset(p + sizeof(n) + len, 0, size - sizeof(n) - len);
  w->len += size;
  return 0;
}

int mt_trace_writer_close(mt_trace_writer_t *w) {
  if (!w) return 0;
  int rc = mt_trace_writer_flush(w);
  if (close(w->fd) != 0 && rc == 0) rc = -errno;
  free(w->buf);
  free(w);
  return rc;
}
