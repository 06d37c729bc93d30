/*
 * common.c - the time-ordered record stream, the residency bookkeeping and
 * the small helpers the mt-trace subcommands share. common.h explains the
 * rules (record order, what counts as resident, prefetch outcomes).
 */
#include "common.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"

/* ------------------------------------------------------------------------ */
/* time-ordered record stream                                               */
/* ------------------------------------------------------------------------ */

typedef struct heap_ent {
  uint64_t t, seq, off;
  mt_trace_rec_t *rec;           /* owned copy */
} heap_ent_t;

struct mtt_stream {
  const char *cmd;
  mt_trace_reader_t *r;
  heap_ent_t *heap;
  size_t n, cap;
  uint64_t seq, max_t;
  bool eof;
  mt_trace_rec_t *cur;           /* the record last handed out (owned) */
};

static bool ent_less(const heap_ent_t *a, const heap_ent_t *b) {
  return a->t < b->t || (a->t == b->t && a->seq < b->seq);
}

static int heap_push(mtt_stream_t *s, heap_ent_t e) {
  if (s->n == s->cap) {
    size_t cap = s->cap ? s->cap * 2 : 1024;
    heap_ent_t *h = realloc(s->heap, cap * sizeof *h);
    if (!h) return -ENOMEM;
    s->heap = h;
    s->cap = cap;
  }
  size_t i = s->n++;
  while (i > 0) {
    size_t p = (i - 1) / 2;
    if (!ent_less(&e, &s->heap[p])) break;
    s->heap[i] = s->heap[p];
    i = p;
  }
  s->heap[i] = e;
  return 0;
}

static heap_ent_t heap_pop(mtt_stream_t *s) {
  heap_ent_t top = s->heap[0], last = s->heap[--s->n];
  size_t i = 0;
  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= s->n) break;
    if (c + 1 < s->n && ent_less(&s->heap[c + 1], &s->heap[c])) c++;
    if (!ent_less(&s->heap[c], &last)) break;
    s->heap[i] = s->heap[c];
    i = c;
  }
  if (s->n) s->heap[i] = last;
  return top;
}

int mtt_open(const char *cmd, const char *path, mtt_stream_t **out) {
  char err[512] = "";
  mt_trace_reader_t *r = NULL;
  int rc = mt_trace_open(path, &r, err, sizeof err);
  if (rc < 0) {
    if (!err[0]) snprintf(err, sizeof err, "%s: %s", path, strerror(-rc));
    fprintf(stderr, "mt-trace %s: %s\n", cmd, err);
    return 2;
  }
  mtt_stream_t *s = calloc(1, sizeof *s);
  if (!s) {
    mt_trace_close(r);
    fprintf(stderr, "mt-trace %s: out of memory\n", cmd);
    return 1;
  }
  s->cmd = cmd;
  s->r = r;
  *out = s;
  return 0;
}

const mt_trace_header_t *mtt_header(const mtt_stream_t *s) { return mt_trace_header(s->r); }
uint64_t mtt_count(const mtt_stream_t *s) { return s->seq; }

int mtt_next(mtt_stream_t *s, const mt_trace_rec_t **rec, uint64_t *off) {
  free(s->cur);
  s->cur = NULL;
  for (;;) {
    if (s->n && (s->eof || s->n >= MTT_SORT_MAX || s->max_t - s->heap[0].t >= MTT_SORT_WINDOW_NS)) {
      heap_ent_t e = heap_pop(s);
      s->cur = e.rec;
      *rec = e.rec;
      *off = e.off;
      return 1;
    }
    if (s->eof) return 0;
    const mt_trace_rec_t *r;
    int rc = mt_trace_next(s->r, &r);
    if (rc == 0) {
      s->eof = true;
      mt_progress_end();
      continue;
    }
    if (rc < 0) {
      mt_progress_end();
      const char *msg = mt_trace_error(s->r);
      if (msg && msg[0])
        fprintf(stderr, "mt-trace %s: %s\n", s->cmd, msg);
      else
        fprintf(stderr, "mt-trace %s: byte %" PRIu64 ": %s\n", s->cmd, mt_trace_offset(s->r),
                strerror(-rc));
      return -1;
    }
    heap_ent_t e = {.t = r->t_ns, .seq = s->seq++, .off = mt_trace_offset(s->r)};
    e.rec = malloc(r->size);
    if (!e.rec || heap_push(s, e) < 0) {
      free(e.rec);
      mt_progress_end();
      fprintf(stderr, "mt-trace %s: out of memory\n", s->cmd);
      return -1;
    }
    memcpy(e.rec, r, r->size);
    if (r->t_ns > s->max_t) s->max_t = r->t_ns;
    if ((s->seq & 0xffff) == 0) mt_progress(s->cmd, e.off, mt_trace_size(s->r));
  }
}

void mtt_close(mtt_stream_t *s) {
  if (!s) return;
  mt_progress_end();
  free(s->cur);
  for (size_t i = 0; i < s->n; i++) free(s->heap[i].rec);
  free(s->heap);
  mt_trace_close(s->r);
  free(s);
}

uint64_t mtt_rec_end(const mt_trace_rec_t *rec) {
  uint64_t end = rec->t_ns;
  switch (rec->type) {
  case MT_TR_LAUNCH: {
    const mt_trace_launch_t *l = (const void *)rec;
    end = rec->t_ns + l->dur_ns < rec->t_ns ? UINT64_MAX : rec->t_ns + l->dur_ns;
    break;
  }
  case MT_TR_COPY: end = ((const mt_trace_copy_t *)(const void *)rec)->end_ns; break;
  case MT_TR_STALL: end = ((const mt_trace_stall_t *)(const void *)rec)->end_ns; break;
  case MT_TR_OPT_STEP: end = ((const mt_trace_opt_step_t *)(const void *)rec)->end_ns; break;
  default: break;
  }
  return end < rec->t_ns ? rec->t_ns : end;
}

/* ------------------------------------------------------------------------ */
/* u64 -> pointer map: linear probing, backward-shift deletion              */
/* ------------------------------------------------------------------------ */

static size_t mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return (size_t)x;
}

void *mtt_map_get(const mtt_map_t *m, uint64_t key) {
  if (!m->cap) return NULL;
  for (size_t i = mix(key) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
    if (!m->vals[i]) return NULL;
    if (m->keys[i] == key) return m->vals[i];
  }
}

static void map_insert(uint64_t *keys, void **vals, size_t cap, uint64_t key, void *val) {
  size_t i = mix(key) & (cap - 1);
  while (vals[i] && keys[i] != key) i = (i + 1) & (cap - 1);
  keys[i] = key;
  vals[i] = val;
}

int mtt_map_put(mtt_map_t *m, uint64_t key, void *val) {
  if ((m->n + 1) * 4 > m->cap * 3) {
    size_t cap = m->cap ? m->cap * 2 : 64;
    uint64_t *keys = calloc(cap, sizeof *keys);
    void **vals = calloc(cap, sizeof *vals);
    if (!keys || !vals) {
      free(keys);
      free(vals);
      return -ENOMEM;
    }
    for (size_t i = 0; i < m->cap; i++)
      if (m->vals[i]) map_insert(keys, vals, cap, m->keys[i], m->vals[i]);
    free(m->keys);
    free(m->vals);
    m->keys = keys;
    m->vals = vals;
    m->cap = cap;
  }
  if (!mtt_map_get(m, key)) m->n++;
  map_insert(m->keys, m->vals, m->cap, key, val);
  return 0;
}

void *mtt_map_del(mtt_map_t *m, uint64_t key) {
  if (!m->cap) return NULL;
  size_t mask = m->cap - 1, i = mix(key) & mask;
  while (m->vals[i] && m->keys[i] != key) i = (i + 1) & mask;
  void *val = m->vals[i];
  if (!val) return NULL;
  m->vals[i] = NULL;
  m->n--;
  /* Shift later members of the probe run back so no lookup stops early. */
  for (size_t j = (i + 1) & mask; m->vals[j]; j = (j + 1) & mask) {
    size_t home = mix(m->keys[j]) & mask;
    /* j may move to the hole at i unless its home lies cyclically in (i, j]. */
    bool stays = i <= j ? (home > i && home <= j) : (home > i || home <= j);
    if (stays) continue;
    m->keys[i] = m->keys[j];
    m->vals[i] = m->vals[j];
    m->vals[j] = NULL;
    i = j;
  }
  return val;
}

void mtt_map_free(mtt_map_t *m, void (*fn)(void *)) {
  if (fn)
    for (size_t i = 0; i < m->cap; i++)
      if (m->vals[i]) fn(m->vals[i]);
  free(m->keys);
  free(m->vals);
  memset(m, 0, sizeof *m);
}

/* ------------------------------------------------------------------------ */
/* residency bookkeeping                                                    */
/* ------------------------------------------------------------------------ */

#define CH_PENDING 0x1           /* prefetched to the GPU, not used yet; t = fetch time */
#define CH_AWAITED 0x2           /* a launch touched it off the GPU; t = launch time */
#define CHUNKS_MAX (1u << 24)    /* chunks tracked per region (32 TiB at 2 MiB) */
#define CHUNKS_MAX_UNKNOWN (1u << 18) /* ... per region without an ALLOC record (512 GiB) */

typedef struct chunk {
  uint64_t t;                    /* see CH_* */
  uint64_t size;                 /* bytes counted in its tier */
  uint32_t tag;                  /* mtt_book tag at the prefetch */
  uint8_t tier;                  /* MT_TIER_* */
  uint8_t flags;                 /* CH_* */
} chunk_t;

typedef struct region {
  uint64_t bytes;                /* ALLOC size; 0 when no ALLOC was seen */
  bool known, small;
  uint32_t n;                    /* chunks[0..n) allocated (zeroed: tier NONE) */
  chunk_t *chunks;
} region_t;

struct mtt_book {
  uint64_t chunk_bytes;
  mtt_map_t regions;             /* region id -> region_t */
  uint64_t lv[MTT_NTIERS];       /* bytes per tier */
  uint64_t allocated;
  uint32_t tag;
  mtt_prefetch_fn fn;
  void *ctx;
  uint64_t bad, bad_off;         /* records that disagreed; the first one's offset */
  const char *bad_what;
};

mtt_book_t *mtt_book_new(uint64_t chunk_bytes, mtt_prefetch_fn fn, void *ctx) {
  mtt_book_t *b = calloc(1, sizeof *b);
  if (!b) return NULL;
  b->chunk_bytes = chunk_bytes ? chunk_bytes : 2ull << 20;
  b->fn = fn;
  b->ctx = ctx;
  return b;
}

const uint64_t *mtt_book_levels(const mtt_book_t *b) { return b->lv; }
uint64_t mtt_book_allocated(const mtt_book_t *b) { return b->allocated; }
void mtt_book_set_tag(mtt_book_t *b, uint32_t tag) { b->tag = tag; }

static void bad(mtt_book_t *b, uint64_t off, const char *what) {
  if (!b->bad++) {
    b->bad_off = off;
    b->bad_what = what;
  }
}

void mtt_book_warn(const mtt_book_t *b, const char *cmd) {
  if (!b->bad) return;
  fprintf(stderr,
          "mt-trace %s: warning: %" PRIu64 " records disagree with the allocation bookkeeping "
          "(first at byte %" PRIu64 ": %s); residency figures may be off\n",
          cmd, b->bad, b->bad_off, b->bad_what);
}

static void set_tier(mtt_book_t *b, chunk_t *c, uint8_t tier, uint64_t size) {
  if (c->tier != MT_TIER_NONE) b->lv[c->tier] -= c->size;
  c->tier = tier;
  c->size = tier != MT_TIER_NONE ? size : 0;
  if (tier != MT_TIER_NONE) b->lv[tier] += size;
}

static uint64_t region_chunks(const mtt_book_t *b, const region_t *r) {
  return r->bytes / b->chunk_bytes + (r->bytes % b->chunk_bytes != 0);
}

/* The size chunk idx has when first placed without a record saying so. */
static uint64_t chunk_default_size(const mtt_book_t *b, const region_t *r, uint64_t idx) {
  if (!r->known) return b->chunk_bytes;
  uint64_t start = idx * b->chunk_bytes;
  return r->bytes - start < b->chunk_bytes ? r->bytes - start : b->chunk_bytes;
}

static region_t *region_get(mtt_book_t *b, uint64_t id, int *err) {
  region_t *r = mtt_map_get(&b->regions, id);
  if (r) return r;
  r = calloc(1, sizeof *r);
  if (!r || mtt_map_put(&b->regions, id, r) < 0) {
    free(r);
    *err = -ENOMEM;
    return NULL;
  }
  return r;
}

/* Chunk idx of r, grown on demand; NULL (and a warning) beyond the region or
 * the tracking limit, or with *err = -ENOMEM. */
static chunk_t *chunk_get(mtt_book_t *b, region_t *r, uint64_t idx, uint64_t off, int *err) {
  uint64_t limit = r->known ? region_chunks(b, r) : CHUNKS_MAX_UNKNOWN;
  if (limit > CHUNKS_MAX) limit = CHUNKS_MAX;
  if (idx >= limit) {
    bad(b, off, r->known ? "chunk beyond the end of its region" : "chunk index too large");
    return NULL;
  }
  if (idx >= r->n) {
    uint64_t n = r->n ? r->n : 1;
    while (n <= idx) n *= 2;
    if (n > limit) n = limit;
    chunk_t *c = realloc(r->chunks, n * sizeof *c);
    if (!c) {
      *err = -ENOMEM;
      return NULL;
    }
    memset(c + r->n, 0, (n - r->n) * sizeof *c);
    r->chunks = c;
    r->n = (uint32_t)n;
  }
  return &r->chunks[idx];
}

static void region_drop(mtt_book_t *b, region_t *r) {
  for (uint32_t i = 0; i < r->n; i++) set_tier(b, &r->chunks[i], MT_TIER_NONE, 0);
  free(r->chunks);
  r->chunks = NULL;
  r->n = 0;
  if (r->small) b->lv[MT_TIER_GPU] -= r->bytes;
  if (r->known) b->allocated -= r->bytes;
  r->known = r->small = false;
  r->bytes = 0;
}

static void touch(mtt_book_t *b, region_t *r, chunk_t *c, uint64_t idx, uint64_t t) {
  if (c->tier == MT_TIER_NONE) {
    set_tier(b, c, MT_TIER_GPU, chunk_default_size(b, r, idx));
  } else if (c->tier == MT_TIER_GPU) {
    if (c->flags & CH_PENDING) {
      c->flags &= (uint8_t)~CH_PENDING;
      if (b->fn) b->fn(b->ctx, c->tag, c->t <= t);
    }
  } else if (!(c->flags & CH_AWAITED)) {
    c->flags |= CH_AWAITED;
    c->t = t;
  }
}

static int apply_launch(mtt_book_t *b, const mt_trace_launch_t *l, uint64_t off) {
  const mt_trace_span_t *foot = (const void *)(l + 1);
  int err = 0;
  for (uint32_t s = 0; s < l->nfoot; s++) {
    region_t *r = region_get(b, foot[s].region, &err);
    if (!r) return err;
    if (r->small) continue;
    uint64_t first, last;
    if (foot[s].bytes == 0) {
      if (!r->known || r->bytes == 0) continue;
      first = 0;
      last = region_chunks(b, r) - 1;
    } else {
      if (foot[s].offset + foot[s].bytes < foot[s].offset) {
        bad(b, off, "footprint span wraps around");
        continue;
      }
      first = foot[s].offset / b->chunk_bytes;
      last = (foot[s].offset + foot[s].bytes - 1) / b->chunk_bytes;
    }
    for (uint64_t i = first; i <= last; i++) {
      chunk_t *c = chunk_get(b, r, i, off, &err);
      if (!c) {
        if (err) return err;
        break;
      }
      touch(b, r, c, i, l->h.t_ns);
    }
  }
  return 0;
}

static int apply_move(mtt_book_t *b, const mt_trace_move_t *m, uint64_t off) {
  bool fetch = m->h.type == MT_TR_FETCH;
  if (m->from > MT_TIER_NVME || m->to > MT_TIER_NVME || (fetch && m->to == MT_TIER_NONE) ||
      (!fetch && m->to == MT_TIER_GPU)) {
    bad(b, off, fetch ? "fetch to no tier" : "eviction to the GPU");
    return 0;
  }
  int err = 0;
  region_t *r = region_get(b, m->region, &err);
  if (!r) return err;
  chunk_t *c = chunk_get(b, r, m->chunk, off, &err);
  if (!c) return err;
  uint64_t size = m->bytes ? m->bytes : c->size ? c->size : chunk_default_size(b, r, m->chunk);
  c->flags &= (uint8_t)~CH_PENDING; /* a pending prefetch that moves again went unused */
  if (fetch && m->to == MT_TIER_GPU) {
    bool prefetch = m->h.flags & MT_TRF_PREFETCH;
    if (c->flags & CH_AWAITED) {
      c->flags &= (uint8_t)~CH_AWAITED;
      if (prefetch && b->fn) b->fn(b->ctx, b->tag, m->h.t_ns <= c->t);
    } else if (prefetch) {
      c->flags |= CH_PENDING;
      c->t = m->h.t_ns;
      c->tag = b->tag;
    }
  }
  set_tier(b, c, m->to, size);
  return 0;
}

int mtt_book_apply(mtt_book_t *b, const mt_trace_rec_t *rec, uint64_t off) {
  switch (rec->type) {
  case MT_TR_ALLOC: {
    const mt_trace_alloc_t *a = (const void *)rec;
    int err = 0;
    region_t *r = region_get(b, a->region, &err);
    if (!r) return err;
    if (r->known) {
      bad(b, off, "region allocated twice");
      region_drop(b, r);
    }
    r->known = true;
    r->bytes = a->bytes;
    r->small = rec->flags & MT_TRF_SMALL;
    b->allocated += a->bytes;
    if (r->small) b->lv[MT_TIER_GPU] += a->bytes;
    if (r->n > region_chunks(b, r)) bad(b, off, "region used before its allocation");
    return 0;
  }
  case MT_TR_FREE: {
    const mt_trace_free_t *f = (const void *)rec;
    region_t *r = mtt_map_del(&b->regions, f->region);
    if (!r || !r->known) bad(b, off, "free of a region never allocated");
    if (r) {
      region_drop(b, r);
      free(r);
    }
    return 0;
  }
  case MT_TR_LAUNCH: return apply_launch(b, (const void *)rec, off);
  case MT_TR_FETCH:
  case MT_TR_EVICT: return apply_move(b, (const void *)rec, off);
  default: return 0;
  }
}

static void region_free(void *p) {
  region_t *r = p;
  free(r->chunks);
  free(r);
}

void mtt_book_free(mtt_book_t *b) {
  if (!b) return;
  mtt_map_free(&b->regions, region_free);
  free(b);
}

/* ------------------------------------------------------------------------ */
/* output helpers                                                           */
/* ------------------------------------------------------------------------ */

/* Length of the valid UTF-8 sequence at s (1-4; excluding surrogates,
 * overlongs and noncharacters U+FFFE/U+FFFF), or 0 when invalid. */
static size_t utf8_len(const unsigned char *s, size_t left) {
  unsigned c = s[0];
  if (c < 0x80) return 1;
  size_t n = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 ? 2 : 0;
  if (!n || n > left || c > 0xf4) return 0;
  uint32_t cp = c & (0x7f >> n);
  for (size_t i = 1; i < n; i++) {
    if ((s[i] & 0xc0) != 0x80) return 0;
    cp = cp << 6 | (s[i] & 0x3f);
  }
  if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || cp > 0x10ffff) return 0;
  if ((cp >= 0xd800 && cp <= 0xdfff) || cp == 0xfffe || cp == 0xffff) return 0;
  return n;
}

void mtt_json_str(FILE *f, const char *str, size_t len) {
  const unsigned char *s = (const unsigned char *)str;
  putc('"', f);
  for (size_t i = 0; i < len;) {
    size_t n = utf8_len(s + i, len - i);
    if (!n) {
      fputs("\\ufffd", f);
      i++;
    } else if (s[i] == '"' || s[i] == '\\') {
      putc('\\', f);
      putc(s[i++], f);
    } else if (s[i] < 0x20) {
      fprintf(f, "\\u%04x", s[i++]);
    } else {
      fwrite(s + i, 1, n, f);
      i += n;
    }
  }
  putc('"', f);
}

void mtt_xml_text(FILE *f, const char *str, size_t len) {
  const unsigned char *s = (const unsigned char *)str;
  for (size_t i = 0; i < len;) {
    size_t n = utf8_len(s + i, len - i);
    if (!n || (s[i] < 0x20 && s[i] != '\t') || s[i] == 0x7f) {
      putc('?', f);
      i++;
      continue;
    }
    switch (s[i]) {
    case '&': fputs("&amp;", f); break;
    case '<': fputs("&lt;", f); break;
    case '>': fputs("&gt;", f); break;
    case '"': fputs("&quot;", f); break;
    case '\'': fputs("&apos;", f); break;
    default: fwrite(s + i, 1, n, f); break;
    }
    i += n;
  }
}

char *mtt_fmt_bytes(char *buf, size_t len, uint64_t bytes) {
  static const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) {
    snprintf(buf, len, "%" PRIu64 " B", bytes);
    return buf;
  }
  double v = (double)bytes;
  int u = 0;
  while (v >= 1024 && u < 6) {
    v /= 1024;
    u++;
  }
  snprintf(buf, len, "%.*f %s", v < 10 ? 2 : v < 100 ? 1 : 0, v, unit[u]);
  return buf;
}

char *mtt_fmt_ns(char *buf, size_t len, uint64_t ns) {
  if (ns >= 1000000000u)
    snprintf(buf, len, "%.3f s", (double)ns / 1e9);
  else if (ns >= 1000000u)
    snprintf(buf, len, "%.3f ms", (double)ns / 1e6);
  else if (ns >= 1000u)
    snprintf(buf, len, "%.3f us", (double)ns / 1e3);
  else
    snprintf(buf, len, "%" PRIu64 " ns", ns);
  return buf;
}

size_t mtt_strnlen(const char *s, size_t max) {
  size_t n = 0;
  while (n < max && s[n]) n++;
  return n;
}

int mtt_usage_error(const char *cmd, const char *fmt, ...) {
  va_list ap;
  fprintf(stderr, "mt-trace %s: ", cmd);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, " (see mt-trace %s --help)\n", cmd);
  return 2;
}

int mtt_getopt(const char *cmd, int argc, char **argv, const char *shortopts,
               const struct option *longopts) {
  char spec[64];
  snprintf(spec, sizeof spec, ":%s", shortopts);
  opterr = 0;
  int c = getopt_long(argc, argv, spec, longopts, NULL);
  if (c == '?') {
    if (optopt)
      mtt_usage_error(cmd, "unknown option '-%c'", optopt);
    else
      mtt_usage_error(cmd, "unknown option '%s'", argv[optind - 1]);
  } else if (c == ':') {
    mtt_usage_error(cmd, "option '%s' needs a value", argv[optind - 1]);
    c = '?';
  }
  return c;
}

int mtt_trace_to_file_args(const char *cmd, int argc, char **argv, void (*help)(FILE *), const char *example,
                           const char **trace, const char **out) {
  static const struct option opts[] = {
      {"output", required_argument, NULL, 'o'}, {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
  int c;
  *out = NULL;
  optind = 0;
  while ((c = mtt_getopt(cmd, argc, argv, "o:h", opts)) != -1) {
    if (c == 'h') {
      help(stdout);
      return 0;
    }
    if (c != 'o') return 2;
    *out = optarg;
  }
  if (optind != argc - 1) return mtt_usage_error(cmd, optind >= argc ? "no trace given" : "one trace at a time");
  if (!*out) return mtt_usage_error(cmd, "no output file given (-o %s)", example);
  *trace = argv[optind];
  return -1;
}

int mtt_input_error(const char *who, const char *path, unsigned line, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  if (line)
    fprintf(stderr, "%s: %s:%u: ", who, path, line);
  else
    fprintf(stderr, "%s: %s: ", who, path);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  return 2;
}
