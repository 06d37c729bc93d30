/*
 * belady.c - Belady's MIN over a recorded access sequence (belady.h).
 *
 * Two passes over the sequence kept in memory (16 bytes per access): the
 * first, backwards, gives every access the position of its chunk's next use
 * (a hash map from chunk to the last position seen); the second, forwards,
 * keeps the resident set in a hash map and a max-heap on next use with lazy
 * deletion: a heap entry is stale when its chunk has since been used again
 * or evicted. Chunks of the launch being placed are pinned (they must all
 * be resident together) and set aside when they surface. O(A log A).
 *
 * Write-backs follow what the accesses write, as the pager's do: a chunk
 * is dirty from its first touch (no host copy yet) and from any access that
 * may write it, clean once it is fetched (its host copy is current); an
 * eviction writes back only a dirty chunk that is used again. MIN still
 * picks the victim by next use alone, so with clean chunks about it is
 * the bytes of MIN's schedule, not a proven minimum of bytes.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "belady.h"

#define NEVER UINT64_MAX
#define FREE_MARK (1ull << 63)   /* an entry that is a free, not an access */
#define READ_MARK (1ull << 62)   /* an access that only reads its chunk */

typedef struct access {
  uint64_t key;       /* chunk key, or FREE_MARK | region for a free */
  uint64_t aux;       /* access: launch index; free: number of chunks */
} access_t;

struct belady {
  uint64_t capacity, chunk;
  access_t *a;
  size_t n, cap;
  uint64_t launches;
};

/* ---- a u64 -> u64 hash map, open addressing; key 0 is never used ---- */
typedef struct map {
  uint64_t *k, *v;
  size_t cap, n;
} map_t;

static uint64_t hash64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  return x;
}

static int map_init(map_t *m, size_t cap) {
  m->cap = 16;
  while (m->cap < cap * 2) m->cap *= 2;
  m->n = 0;
  m->k = calloc(m->cap, sizeof(uint64_t));
  m->v = calloc(m->cap, sizeof(uint64_t));
  return m->k && m->v ? 0 : -ENOMEM;
}

static void map_fini(map_t *m) {
  free(m->k);
  free(m->v);
}

/* slot of key (+1 so that key 0 never appears) */
static size_t map_slot(const map_t *m, uint64_t key) {
  size_t i = hash64(key + 1) & (m->cap - 1);
  while (m->k[i] != 0 && m->k[i] != key + 1) i = (i + 1) & (m->cap - 1);
  return i;
}

static int map_grow(map_t *m) {
  map_t nm;
  if (map_init(&nm, m->cap) < 0) return -ENOMEM;
  for (size_t i = 0; i < m->cap; i++) {
    if (m->k[i] == 0 || m->k[i] == UINT64_MAX) continue;
    size_t j = map_slot(&nm, m->k[i] - 1);
    nm.k[j] = m->k[i];
    nm.v[j] = m->v[i];
    nm.n++;
  }
  map_fini(m);
  *m = nm;
  return 0;
}

static int map_put(map_t *m, uint64_t key, uint64_t v) {
  if ((m->n + 1) * 2 > m->cap && map_grow(m) < 0) return -ENOMEM;
  size_t i = map_slot(m, key);
  if (m->k[i] == 0) m->n++;
  m->k[i] = key + 1;
  m->v[i] = v;
  return 0;
}

static bool map_get(const map_t *m, uint64_t key, uint64_t *v) {
  size_t i = map_slot(m, key);
  if (m->k[i] == 0) return false;
  if (v) *v = m->v[i];
  return true;
}

/* Deletion by backward shift keeps probing correct without tombstones. */
static void map_del(map_t *m, uint64_t key) {
  size_t i = map_slot(m, key);
  if (m->k[i] == 0) return;
  m->k[i] = 0;
  m->n--;
  size_t j = i;
  for (;;) {
    j = (j + 1) & (m->cap - 1);
    if (m->k[j] == 0) return;
    size_t home = hash64(m->k[j]) & (m->cap - 1);
    /* move j back to i if its home is not in (i, j] cyclically */
    bool between = i <= j ? (home > i && home <= j) : (home > i || home <= j);
    if (!between) {
      m->k[i] = m->k[j];
      m->v[i] = m->v[j];
      m->k[j] = 0;
      i = j;
    }
  }
}

/* ---- max-heap of (next use, key) ---- */
typedef struct heap {
  uint64_t *nu, *key;
  size_t n, cap;
} heap_t;

static int heap_push(heap_t *h, uint64_t nu, uint64_t key) {
  if (h->n == h->cap) {
    size_t cap = h->cap ? h->cap * 2 : 1024;
    uint64_t *a = realloc(h->nu, cap * sizeof(uint64_t));
    if (a == NULL) return -ENOMEM;
    h->nu = a;
    uint64_t *b = realloc(h->key, cap * sizeof(uint64_t));
    if (b == NULL) return -ENOMEM;
    h->key = b;
    h->cap = cap;
  }
  size_t i = h->n++;
  while (i > 0 && h->nu[(i - 1) / 2] < nu) {
    h->nu[i] = h->nu[(i - 1) / 2];
    h->key[i] = h->key[(i - 1) / 2];
    i = (i - 1) / 2;
  }
  h->nu[i] = nu;
  h->key[i] = key;
  return 0;
}

static void heap_pop(heap_t *h, uint64_t *nu, uint64_t *key) {
  *nu = h->nu[0];
  *key = h->key[0];
  uint64_t lnu = h->nu[--h->n], lkey = h->key[h->n];
  size_t i = 0;
  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= h->n) break;
    if (c + 1 < h->n && h->nu[c + 1] > h->nu[c]) c++;
    if (h->nu[c] <= lnu) break;
    h->nu[i] = h->nu[c];
    h->key[i] = h->key[c];
    i = c;
  }
  if (h->n > 0) {
    h->nu[i] = lnu;
    h->key[i] = lkey;
  }
}

/* ---- sequence ---- */

belady_t *belady_new(uint64_t capacity, uint64_t chunk) {
  belady_t *b = calloc(1, sizeof(*b));
  if (b == NULL) return NULL;
  b->capacity = capacity;
  b->chunk = chunk;
  return b;
}

void belady_free(belady_t *b) {
  if (b == NULL) return;
  free(b->a);
  free(b);
}

static int append(belady_t *b, uint64_t key, uint64_t aux) {
  if (b->n == b->cap) {
    size_t cap = b->cap ? b->cap * 2 : 4096;
    access_t *a = realloc(b->a, cap * sizeof(*a));
    if (a == NULL) return -ENOMEM;
    b->a = a;
    b->cap = cap;
  }
  b->a[b->n++] = (access_t){key, aux};
  return 0;
}

int belady_launch(belady_t *b, const uint64_t *keys, const bool *write, uint32_t n) {
  uint64_t l = b->launches++;
  for (uint32_t i = 0; i < n; i++)
    if (append(b, keys[i] | (write && !write[i] ? READ_MARK : 0), l) < 0) return -ENOMEM;
  return 0;
}

int belady_free_region(belady_t *b, uint64_t region, uint32_t nchunks) {
  return append(b, FREE_MARK | region, nchunks);
}

int belady_finish(belady_t *b, belady_result_t *out) {
  memset(out, 0, sizeof(*out));
  size_t n = b->n;
  uint64_t *next = malloc((n ? n : 1) * sizeof(uint64_t));
  map_t last = {0}, res = {0};
  heap_t h = {0};
  int rc = -ENOMEM;
  if (next == NULL || map_init(&last, 1024) < 0 || map_init(&res, b->capacity + 16) < 0) goto out;
  /* pass 1: next use of every access (a free ends a chunk's life) */
  for (size_t i = n; i-- > 0;) {
    access_t *a = &b->a[i];
    if (a->key & FREE_MARK) {
      uint64_t region = a->key & ~FREE_MARK;
      for (uint64_t c = 0; c < a->aux; c++) map_del(&last, region << 24 | c);
      next[i] = NEVER;
      continue;
    }
    uint64_t nu, key = a->key & ~READ_MARK;
    next[i] = map_get(&last, key, &nu) ? nu : NEVER;
    if (map_put(&last, key, i) < 0) goto out;
  }
  /* pass 2: MIN. res: resident chunk -> its current next use (a heap entry
   * is current when it carries that value); pin: chunk -> launch + 1 while
   * it belongs to the launch being placed; seen: chunks ever resident (a
   * miss on one of them is a fetch; on a fresh one, first touch); dirty:
   * resident chunks whose host copy is not current. */
  map_t seen = {0}, pin = {0}, dirty = {0};
  if (map_init(&seen, 1024) < 0) goto out;
  if (map_init(&pin, 1024) < 0 || map_init(&dirty, b->capacity + 16) < 0) {
    map_fini(&seen);
    map_fini(&pin);
    goto out;
  }
  uint64_t *aside = NULL;
  size_t naside = 0, caside = 0;
  for (size_t i = 0; i < n; i++) {
    access_t *a = &b->a[i];
    if (a->key & FREE_MARK) {
      uint64_t region = a->key & ~FREE_MARK;
      for (uint64_t c = 0; c < a->aux; c++) {
        map_del(&res, region << 24 | c);
        map_del(&seen, region << 24 | c);
        map_del(&pin, region << 24 | c);
        map_del(&dirty, region << 24 | c);
      }
      continue;
    }
    uint64_t launch = a->aux, akey = a->key & ~READ_MARK;
    bool writes = !(a->key & READ_MARK);
    if (map_get(&res, akey, NULL)) { /* hit */
      if (map_put(&res, akey, next[i]) < 0 || map_put(&pin, akey, launch + 1) < 0 ||
          heap_push(&h, next[i], akey) < 0 || (writes && map_put(&dirty, akey, 1) < 0))
        goto out2;
      continue;
    }
    bool fetched = map_get(&seen, akey, NULL);
    if (fetched) {
      out->fetches++;
      out->fetch_bytes += b->chunk;
    } else if (map_put(&seen, akey, 1) < 0) {
      goto out2;
    }
    while (res.n >= b->capacity) {
      if (h.n == 0) { /* everything resident belongs to this launch */
        out->infeasible = true;
        break;
      }
      uint64_t nu, key, cur, pl;
      heap_pop(&h, &nu, &key);
      if (!map_get(&res, key, &cur) || cur != nu) continue; /* stale entry */
      if (map_get(&pin, key, &pl) && pl == launch + 1) {    /* needed now: later */
        if (naside == caside) {
          caside = caside ? caside * 2 : 256;
          uint64_t *na = realloc(aside, caside * 2 * sizeof(uint64_t));
          if (na == NULL) goto out2;
          aside = na;
        }
        aside[2 * naside] = nu;
        aside[2 * naside + 1] = key;
        naside++;
        continue;
      }
      map_del(&res, key);
      if (nu != NEVER && map_get(&dirty, key, NULL)) {
        out->writebacks++;
        out->writeback_bytes += b->chunk;
      }
      map_del(&dirty, key);
    }
    for (size_t k = 0; k < naside; k++)
      if (heap_push(&h, aside[2 * k], aside[2 * k + 1]) < 0) goto out2;
    naside = 0;
    /* a first touch has no host copy; a fetched chunk has one until written */
    if (map_put(&res, akey, next[i]) < 0 || map_put(&pin, akey, launch + 1) < 0 ||
        heap_push(&h, next[i], akey) < 0 || ((writes || !fetched) && map_put(&dirty, akey, 1) < 0))
      goto out2;
  }
  rc = 0;
out2:
  free(aside);
  map_fini(&seen);
  map_fini(&pin);
  map_fini(&dirty);
out:
  free(next);
  map_fini(&last);
  map_fini(&res);
  free(h.nu);
  free(h.key);
  return rc;
}
