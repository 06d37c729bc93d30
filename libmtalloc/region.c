/*
 * region.c - the region map: which managed range contains an address.
 *
 * Every launch scans its parameters for words that point into a region, so
 * "find the range containing addr" is the hot operation, done from many
 * threads at once; insert and remove happen once per allocation.
 *
 * Layout: the address space is cut into 2 MiB granules (the driver's mapping
 * granularity, so a tensor of the pager covers whole granules). A two-level
 * radix table indexed by granule number holds one slot per granule:
 *   - empty;
 *   - single: the one range overlapping the granule, stored inline
 *     (start, size, value), so a lookup costs one cache miss;
 *   - multi: size 0 and a pointer to a sorted vector of the ranges that
 *     overlap the granule (small regions packed together), searched by
 *     binary search.
 * A range is entered in the slot of every granule it overlaps, so lookup is
 * O(1) for large ranges and O(log k) for k ranges sharing a granule; insert
 * and remove cost one slot update per granule covered.
 *
 * Threading: writers serialise on a mutex and bracket their changes with a
 * sequence counter (a seqlock). Readers take no lock and write nothing
 * shared: they read the counter, look up, and retry if it changed. A reader
 * may therefore read a vector that a writer is replacing; vectors are never
 * returned to the system while the map lives (they go to a per-size free
 * list and are reused), their capacity never changes, and readers clamp
 * every index to it, so such a read is harmless and is then retried. Fields
 * read by readers are accessed with relaxed atomics, which compile to plain
 * loads and stores on x86 and make the races defined.
 *
 * Invariants: ranges are non-empty, disjoint and below 2^48; every slot of a
 * granule that a range overlaps lists it; vectors are sorted by start and
 * hold at least two ranges.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define G_SHIFT 21                      /* 2 MiB granules */
#define ADDR_BITS 48                    /* user address space on x86-64 and arm64 */
#define LEAF_BITS 14                    /* 16384 slots = 32 GiB per leaf */
#define TOP_BITS (ADDR_BITS - G_SHIFT - LEAF_BITS)
#define NCLASS 27                       /* vector capacities 2^1 .. 2^26 */

#if defined(__x86_64__) || defined(__i386__)
#define mt_cpu_relax() __builtin_ia32_pause()
#else
#define mt_cpu_relax() ((void)0)
#endif

/* Readers load with acquire, writers store with release: each load keeps
 * the later re-read of the counter after it, and each store keeps the
 * counter's odd value before it. On x86 both are plain moves; unlike the
 * fence-based seqlock it is also something ThreadSanitizer understands. */
#define RD(x) __atomic_load_n(&(x), __ATOMIC_ACQUIRE)
#define WR(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELEASE)

typedef struct rrange {
  uintptr_t start;
  size_t size;
  void *value;
} rrange_t;

typedef struct rvec {
  uint32_t cap;          /* fixed for the vector's life: 2^class */
  uint32_t n;            /* ranges in use, sorted by start */
  struct rvec *next_free;
  struct rvec *next_all; /* every vector ever made, for _mt_rmap_free */
  rrange_t r[];
} rvec_t;

typedef struct rslot {
  uintptr_t start;       /* single: the range; multi and empty: 0 */
  size_t size;           /* single: > 0; multi and empty: 0 */
  void *ptr;             /* single: value; multi: rvec_t *; empty: NULL */
} rslot_t;

struct _mt_rmap {
  _Atomic unsigned seq;  /* odd while a writer is changing the table */
  pthread_mutex_t lock;  /* writers */
  size_t count;
  rvec_t *free_vec[NCLASS];
  rvec_t *all_vec;
  rslot_t *top[1u << TOP_BITS];
};

_mt_rmap_t *_mt_rmap_new(void) {
  _mt_rmap_t *m = calloc(1, sizeof(*m));
  if (m == NULL) return NULL;
  pthread_mutex_init(&m->lock, NULL);
  return m;
}

void _mt_rmap_free(_mt_rmap_t *m) {
  if (m == NULL) return;
  for (size_t i = 0; i < (1u << TOP_BITS); i++) free(m->top[i]);
  for (rvec_t *v = m->all_vec, *next; v != NULL; v = next) {
    next = v->next_all;
    free(v);
  }
  pthread_mutex_destroy(&m->lock);
  free(m);
}

/* Index of the first range in r[0..n) whose start is > x. Branch-free:
 * lookups are random, and a branchy search mispredicts half its steps. */
static inline size_t upper_bound(const rrange_t *r, size_t n, uintptr_t x) {
  if (n == 0) return 0;
  size_t lo = 0;
  while (n > 1) {
    size_t half = n / 2;
    lo = RD(r[lo + half].start) <= x ? lo + half : lo;
    n -= half;
  }
  return lo + (RD(r[lo].start) <= x);
}

/* ---- readers -------------------------------------------------------------- */

void *_mt_rmap_find(_mt_rmap_t *m, uintptr_t addr, uintptr_t *start, size_t *size) {
  if (addr >> ADDR_BITS) return NULL;
  uintptr_t g = addr >> G_SHIFT;
  for (;;) {
    unsigned s1 = atomic_load_explicit(&m->seq, memory_order_acquire);
    if (mt_unlikely(s1 & 1)) {
      mt_cpu_relax();
      continue;
    }
    void *found = NULL;
    uintptr_t fs = 0;
    size_t fz = 0;
    rslot_t *leaf = RD(m->top[g >> LEAF_BITS]);
    if (leaf != NULL) {
      rslot_t *sl = &leaf[g & ((1u << LEAF_BITS) - 1)];
      uintptr_t st = RD(sl->start);
      size_t sz = RD(sl->size);
      void *p = RD(sl->ptr);
      if (sz != 0) {
        if (addr - st < sz) { found = p; fs = st; fz = sz; }
      } else if (p != NULL) {
        /* The three fields may be torn (ptr still a single's value): make
         * sure they were consistent before treating ptr as a vector. */
        if (atomic_load_explicit(&m->seq, memory_order_acquire) != s1) continue;
        rvec_t *v = p;
        size_t n = RD(v->n);
        if (n > v->cap) n = v->cap; /* a vector being reused: retried below */
        size_t j = upper_bound(v->r, n, addr);
        if (j > 0) {
          st = RD(v->r[j - 1].start);
          sz = RD(v->r[j - 1].size);
          if (addr - st < sz) { found = RD(v->r[j - 1].value); fs = st; fz = sz; }
        }
      }
    }
    if (atomic_load_explicit(&m->seq, memory_order_acquire) != s1) continue;
    if (found != NULL) {
      if (start) *start = fs;
      if (size) *size = fz;
    }
    return found;
  }
}

/* ---- writers (m->lock held) ------------------------------------------------- */

static void write_begin(_mt_rmap_t *m) {
  atomic_store_explicit(&m->seq, atomic_load_explicit(&m->seq, memory_order_relaxed) + 1,
                        memory_order_relaxed);
}

static void write_end(_mt_rmap_t *m) {
  atomic_store_explicit(&m->seq, atomic_load_explicit(&m->seq, memory_order_relaxed) + 1,
                        memory_order_release);
}

static rslot_t *slot_of(_mt_rmap_t *m, uintptr_t g, bool create) {
  rslot_t **leafp = &m->top[g >> LEAF_BITS];
  rslot_t *leaf = *leafp;
  if (leaf == NULL) {
    if (!create) return NULL;
    leaf = calloc((size_t)1 << LEAF_BITS, sizeof(rslot_t));
    if (leaf == NULL) return NULL;
    __atomic_store_n(leafp, leaf, __ATOMIC_RELEASE);
  }
  return &leaf[g & ((1u << LEAF_BITS) - 1)];
}

static rvec_t *vec_get(_mt_rmap_t *m, size_t n) {
  unsigned c = 1;
  while (((size_t)1 << c) < n) c++;
  if (c >= NCLASS) return NULL;
  rvec_t *v = m->free_vec[c];
  if (v != NULL) {
    m->free_vec[c] = v->next_free;
    return v;
  }
  v = malloc(sizeof(*v) + ((size_t)1 << c) * sizeof(rrange_t));
  if (v == NULL) return NULL;
  v->cap = 1u << c;
  v->n = 0;
  v->next_all = m->all_vec;
  m->all_vec = v;
  return v;
}

static void vec_put(_mt_rmap_t *m, rvec_t *v) {
  unsigned c = (unsigned)__builtin_ctz(v->cap);
  v->next_free = m->free_vec[c];
  m->free_vec[c] = v;
}

static bool overlaps(uintptr_t s1, size_t z1, uintptr_t s2, size_t z2) {
  return s1 < s2 + z2 && s2 < s1 + z1;
}

/* Does [start, start+size) overlap a range listed in slot sl? */
static bool slot_overlaps(const rslot_t *sl, uintptr_t start, size_t size) {
  if (sl->size != 0) return overlaps(sl->start, sl->size, start, size);
  const rvec_t *v = sl->ptr;
  if (v == NULL) return false;
  size_t j = upper_bound(v->r, v->n, start);
  if (j > 0 && overlaps(v->r[j - 1].start, v->r[j - 1].size, start, size)) return true;
  return j < v->n && overlaps(v->r[j].start, v->r[j].size, start, size);
}

/* Adds r to slot sl. Returns 0 or -ENOMEM (slot unchanged). */
static int slot_add(_mt_rmap_t *m, rslot_t *sl, const rrange_t *r) {
  if (sl->size == 0 && sl->ptr == NULL) {
    WR(sl->start, r->start);
    WR(sl->ptr, r->value);
    WR(sl->size, r->size);
    return 0;
  }
  rvec_t *old = sl->size == 0 ? sl->ptr : NULL;
  size_t n = old ? old->n : 1;
  rvec_t *v = vec_get(m, n + 1);
  if (v == NULL) return -ENOMEM;
  rrange_t single = {sl->start, sl->size, sl->ptr};
  const rrange_t *src = old ? old->r : &single;
  size_t j = upper_bound(src, n, r->start);
  for (size_t i = 0; i <= n; i++) {
    /* a recycled vector may still be read by a stale reader: store as it loads */
    const rrange_t *e = i < j ? &src[i] : i == j ? r : &src[i - 1];
    WR(v->r[i].start, e->start);
    WR(v->r[i].size, e->size);
    WR(v->r[i].value, e->value);
  }
  WR(v->n, (uint32_t)(n + 1));
  WR(sl->start, 0);
  WR(sl->size, 0);
  WR(sl->ptr, (void *)v);
  if (old) vec_put(m, old);
  return 0;
}

/* Removes the range starting at start from slot sl (it must be there).
 * Needs no memory: a vector shrinking to one range becomes a single. */
static void slot_del(_mt_rmap_t *m, rslot_t *sl, uintptr_t start) {
  if (sl->size != 0) {
    WR(sl->size, 0);
    WR(sl->start, 0);
    WR(sl->ptr, NULL);
    return;
  }
  rvec_t *v = sl->ptr;
  size_t j = upper_bound(v->r, v->n, start) - 1;
  mt_assert(v->r[j].start == start);
  if (v->n == 2) {
    const rrange_t *keep = &v->r[1 - j];
    WR(sl->start, keep->start);
    WR(sl->ptr, keep->value);
    WR(sl->size, keep->size);
    vec_put(m, v);
    return;
  }
  for (size_t i = j; i + 1 < v->n; i++) {
    WR(v->r[i].start, v->r[i + 1].start);
    WR(v->r[i].size, v->r[i + 1].size);
    WR(v->r[i].value, v->r[i + 1].value);
  }
  WR(v->n, v->n - 1);
}

/* The range in slot sl that starts exactly at start, or NULL. */
static bool slot_find_start(const rslot_t *sl, uintptr_t start, rrange_t *out) {
  if (sl->size != 0) {
    if (sl->start != start) return false;
    *out = (rrange_t){sl->start, sl->size, sl->ptr};
    return true;
  }
  const rvec_t *v = sl->ptr;
  if (v == NULL) return false;
  size_t j = upper_bound(v->r, v->n, start);
  if (j == 0 || v->r[j - 1].start != start) return false;
  *out = v->r[j - 1];
  return true;
}

int _mt_rmap_insert(_mt_rmap_t *m, uintptr_t start, size_t size, void *value) {
  if (size == 0 || start + size < start || ((start + size - 1) >> ADDR_BITS)) return -EINVAL;
  uintptr_t g0 = start >> G_SHIFT, g1 = (start + size - 1) >> G_SHIFT;
  rrange_t r = {start, size, value};
  int rc = 0;
  pthread_mutex_lock(&m->lock);
  for (uintptr_t g = g0; g <= g1; g++) {
    const rslot_t *sl = slot_of(m, g, false);
    if (sl != NULL && slot_overlaps(sl, start, size)) {
      rc = -EEXIST;
      goto out;
    }
  }
  write_begin(m);
  uintptr_t g;
  for (g = g0; g <= g1; g++) {
    rslot_t *sl = slot_of(m, g, true);
    if (sl == NULL || slot_add(m, sl, &r) < 0) {
      rc = -ENOMEM;
      break;
    }
  }
  if (rc < 0) { /* undo the granules already done */
    while (g-- > g0) slot_del(m, slot_of(m, g, false), start);
  } else {
    m->count++;
  }
  write_end(m);
out:
  pthread_mutex_unlock(&m->lock);
  return rc;
}

int _mt_rmap_remove(_mt_rmap_t *m, uintptr_t start, void **value) {
  if (start >> ADDR_BITS) return -ENOENT;
  int rc = -ENOENT;
  pthread_mutex_lock(&m->lock);
  rslot_t *sl = slot_of(m, start >> G_SHIFT, false);
  rrange_t r;
  if (sl != NULL && slot_find_start(sl, start, &r)) {
    write_begin(m);
    for (uintptr_t g = start >> G_SHIFT; g <= (start + r.size - 1) >> G_SHIFT; g++)
      slot_del(m, slot_of(m, g, false), start);
    m->count--;
    write_end(m);
    if (value) *value = r.value;
    rc = 0;
  }
  pthread_mutex_unlock(&m->lock);
  return rc;
}

void *_mt_rmap_next(_mt_rmap_t *m, uintptr_t addr, uintptr_t end, uintptr_t *start, size_t *size) {
  if (end > (uintptr_t)1 << ADDR_BITS) end = (uintptr_t)1 << ADDR_BITS;
  void *found = NULL;
  pthread_mutex_lock(&m->lock); /* a rare walk: the writers' lock, no seqlock retries */
  for (uintptr_t g = addr >> G_SHIFT; addr < end && found == NULL && g <= (end - 1) >> G_SHIFT; g++) {
    const rslot_t *sl = slot_of(m, g, false);
    if (sl == NULL) { /* no leaf: skip to the next one */
      g = (g | (((uintptr_t)1 << LEAF_BITS) - 1));
      continue;
    }
    if (sl->size != 0) {
      if (sl->start + sl->size > addr && sl->start < end) {
        found = sl->ptr;
        *start = sl->start;
        *size = sl->size;
      }
    } else if (sl->ptr != NULL) {
      const rvec_t *v = sl->ptr;
      for (uint32_t j = 0; j < v->n && found == NULL; j++) {
        if (v->r[j].start + v->r[j].size <= addr) continue;
        if (v->r[j].start >= end) break;
        found = v->r[j].value;
        *start = v->r[j].start;
        *size = v->r[j].size;
      }
    }
  }
  pthread_mutex_unlock(&m->lock);
  return found;
}

size_t _mt_rmap_count(_mt_rmap_t *m) {
  pthread_mutex_lock(&m->lock);
  size_t n = m->count;
  pthread_mutex_unlock(&m->lock);
  return n;
}

/* Every range is listed in each granule it overlaps, vectors are sorted,
 * disjoint and hold >= 2 ranges, and the ranges counted at their first
 * granule add up to count. */
int _mt_rmap_check(_mt_rmap_t *m) {
  int rc = 0;
  size_t total = 0;
  pthread_mutex_lock(&m->lock);
  for (uintptr_t t = 0; t < (1u << TOP_BITS) && rc == 0; t++) {
    if (m->top[t] == NULL) continue;
    for (uintptr_t i = 0; i < (1u << LEAF_BITS) && rc == 0; i++) {
      const rslot_t *sl = &m->top[t][i];
      uintptr_t g = (t << LEAF_BITS) | i;
      rrange_t one = {sl->start, sl->size, sl->ptr};
      const rrange_t *r = &one;
      size_t n = sl->size != 0;
      if (sl->size == 0 && sl->ptr != NULL) {
        const rvec_t *v = sl->ptr;
        if (v->n < 2 || v->n > v->cap) rc = -EFAULT;
        r = v->r;
        n = v->n;
      }
      for (size_t j = 0; j < n && rc == 0; j++) {
        if (j > 0 && r[j - 1].start + r[j - 1].size > r[j].start) rc = -EFAULT;
        uintptr_t a = r[j].start >> G_SHIFT, b = (r[j].start + r[j].size - 1) >> G_SHIFT;
        if (g < a || g > b) rc = -EFAULT;
        if (g == a) total++;
        /* listed in every granule it covers */
        for (uintptr_t h = a; h <= b && rc == 0; h++) {
          const rslot_t *o = slot_of(m, h, false);
          rrange_t found;
          if (o == NULL || !slot_find_start(o, r[j].start, &found) || found.size != r[j].size)
            rc = -EFAULT;
        }
      }
    }
  }
  if (total != m->count) rc = -EFAULT;
  pthread_mutex_unlock(&m->lock);
  return rc;
}
