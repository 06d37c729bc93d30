/*
 * smallpool.c - small regions packed into shared chunks that stay on the GPU.
 *
 * Allocations below MT_SMALL_REGION (biases, scalars, index tensors) are a
 * negligible share of a large model's memory, the likeliest to be reached
 * through pointers a scan cannot see, and too small to page one by one. They
 * are packed into chunk-sized slabs that are mapped once and never evicted,
 * with a buddy allocator: blocks of 512 B (cudaMalloc's alignment) times a
 * power of two, split on demand and merged with their buddy when both are
 * free, so slabs are shared by all sizes and the pinned total stays within
 * twice what the program asked for.
 *
 * The blocks are device memory, which the host may not touch, so all
 * bookkeeping is on the host: per slab one bitmap per order (bit set = that
 * block is free), and per order a stack of free block addresses. Merging
 * leaves stale entries in a stack; a pop checks the bitmap and skips them.
 * Slabs are never returned (a model's small allocations are nearly constant).
 *
 * Threading: under the pager lock.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pager_internal.h"

#define SMALL_MIN 512

typedef struct slab {
  uintptr_t base;
  uint64_t *bits[MT_SMALL_CLASSES]; /* per order */
} slab_t;

typedef struct small_state {
  slab_t *slabs;                   /* sorted by base */
  size_t nslabs, cap;
  int orders;                      /* block sizes 512 << 0 .. 512 << (orders-1) == chunk */
} small_state_t;

static small_state_t *S(mt_pager_t *p) {
  return (small_state_t *)p->small_state;
}

int _mt_small_init(mt_pager_t *p, size_t small_limit) {
  (void)small_limit;
  small_state_t *s = calloc(1, sizeof(*s));
  if (s == NULL) return -ENOMEM;
  int k = 0;
  while (((size_t)SMALL_MIN << k) < p->chunk && k + 1 < MT_SMALL_CLASSES) k++;
  if (((size_t)SMALL_MIN << k) != p->chunk) {
    free(s);
    mt_error("chunk size %zu is not 512 bytes times a power of two (at most 2^%d)", p->chunk,
             MT_SMALL_CLASSES - 1);
    return -EINVAL;
  }
  s->orders = k + 1;
  p->small_min = SMALL_MIN;
  p->small_classes = k; /* allocatable orders: up to chunk/2 */
  p->small_state = s;
  return 0;
}

size_t _mt_small_class_size(const mt_pager_t *p, int cls) {
  return p->small_min << cls;
}

static slab_t *slab_of(small_state_t *s, uintptr_t a, size_t chunk) {
  size_t lo = 0, hi = s->nslabs;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (s->slabs[mid].base + chunk <= a) lo = mid + 1;
    else hi = mid;
  }
  return lo < s->nslabs && a >= s->slabs[lo].base ? &s->slabs[lo] : NULL;
}

static size_t bit_of(mt_pager_t *p, const slab_t *sl, uintptr_t a, int k) {
  return (size_t)(a - sl->base) / (p->small_min << k);
}

static bool test_bit(const uint64_t *b, size_t i) { return (b[i / 64] >> (i % 64)) & 1; }
static void set_bit(uint64_t *b, size_t i) { b[i / 64] |= 1ull << (i % 64); }
static void clear_bit(uint64_t *b, size_t i) { b[i / 64] &= ~(1ull << (i % 64)); }

static int push(mt_pager_t *p, int k, uintptr_t a) {
  if (p->small_nfree[k] == p->small_cap[k]) {
    size_t cap = p->small_cap[k] ? p->small_cap[k] * 2 : 64;
    uintptr_t *n = realloc(p->small_free[k], cap * sizeof(*n));
    if (n == NULL) return -ENOMEM;
    p->small_free[k] = n;
    p->small_cap[k] = cap;
  }
  p->small_free[k][p->small_nfree[k]++] = a;
  return 0;
}

/* Marks block a of order k free and lists it. */
static int put_free(mt_pager_t *p, slab_t *sl, int k, uintptr_t a) {
  set_bit(sl->bits[k], bit_of(p, sl, a, k));
  int rc = push(p, k, a);
  if (rc < 0) clear_bit(sl->bits[k], bit_of(p, sl, a, k)); /* the block leaks, nothing else */
  return rc;
}

/* A free block of order k, or 0; its bit is cleared. */
static uintptr_t pop_free(mt_pager_t *p, int k) {
  small_state_t *s = S(p);
  while (p->small_nfree[k] > 0) {
    uintptr_t a = p->small_free[k][--p->small_nfree[k]];
    slab_t *sl = slab_of(s, a, p->chunk);
    size_t i = bit_of(p, sl, a, k);
    if (!test_bit(sl->bits[k], i)) continue; /* stale: merged away */
    clear_bit(sl->bits[k], i);
    return a;
  }
  return 0;
}

/* A new slab: a chunk of address space backed by device memory for good. */
static int grow(mt_pager_t *p) {
  small_state_t *s = S(p);
  if (s->nslabs == s->cap) {
    size_t cap = s->cap ? s->cap * 2 : 16;
    slab_t *ns = realloc(s->slabs, cap * sizeof(*ns));
    if (ns == NULL) return -ENOMEM;
    s->slabs = ns;
    s->cap = cap;
  }
  slab_t sl;
  memset(&sl, 0, sizeof(sl));
  for (int k = 0; k < s->orders; k++) {
    size_t nbits = p->chunk / (p->small_min << k);
    sl.bits[k] = calloc((nbits + 63) / 64, sizeof(uint64_t));
    if (sl.bits[k] == NULL) {
      for (int j = 0; j < k; j++) free(sl.bits[j]);
      return -ENOMEM;
    }
  }
  int rc = _mt_va_alloc(&p->va, 1, p->chunk, &sl.base);
  if (rc < 0) goto fail_bits;
  if ((rc = _mt_pager_reserve_pinned(p, p->chunk)) < 0) goto fail_va;
  mt_handle_t h;
  /* from the pool of device chunks: the budget just reserved may be one a
   * pooled handle holds */
  if ((rc = _mt_pool_dev_get(p, &h)) < 0) goto fail_budget;
  if ((rc = p->dev->ops->map(p->dev, sl.base, p->chunk, h, 0)) < 0) goto fail_phys;
  if ((rc = p->dev->ops->set_access(p->dev, sl.base, p->chunk)) < 0) {
    p->dev->ops->unmap(p->dev, sl.base, p->chunk);
    goto fail_phys;
  }
  size_t at = 0;
  while (at < s->nslabs && s->slabs[at].base < sl.base) at++;
  memmove(&s->slabs[at + 1], &s->slabs[at], (s->nslabs - at) * sizeof(slab_t));
  s->slabs[at] = sl;
  s->nslabs++;
  return put_free(p, &s->slabs[at], s->orders - 1, sl.base);
fail_phys:
  p->used -= p->chunk;
  p->pinned -= p->chunk;
  _mt_pool_dev_put(p, h);
  goto fail_va;
fail_budget:
  p->used -= p->chunk;
  p->pinned -= p->chunk;
fail_va:
  _mt_va_free(&p->va, sl.base, 1, p->chunk);
fail_bits:
  for (int k = 0; k < s->orders; k++) free(sl.bits[k]);
  return rc;
}

int _mt_small_alloc(mt_pager_t *p, size_t size, uintptr_t *addr, int *cls) {
  small_state_t *s = S(p);
  int k = 0;
  while (k < p->small_classes && _mt_small_class_size(p, k) < size) k++;
  if (k == p->small_classes) return -EINVAL;
  for (int attempt = 0; attempt < 2; attempt++) {
    for (int j = k; j < s->orders; j++) {
      uintptr_t a = pop_free(p, j);
      if (a == 0) continue;
      slab_t *sl = slab_of(s, a, p->chunk);
      while (j > k) { /* split: keep the lower half, free the upper */
        j--;
        put_free(p, sl, j, a + _mt_small_class_size(p, j));
      }
      *addr = a;
      *cls = k;
      return 0;
    }
    if (attempt == 0) {
      int rc = grow(p);
      if (rc < 0) return rc;
    }
  }
  return -ENOMEM;
}

void _mt_small_free(mt_pager_t *p, uintptr_t a, int k) {
  small_state_t *s = S(p);
  slab_t *sl = slab_of(s, a, p->chunk);
  if (sl == NULL) return;
  while (k + 1 < s->orders) {
    uintptr_t size = _mt_small_class_size(p, k);
    uintptr_t buddy = sl->base + ((a - sl->base) ^ size);
    size_t bi = bit_of(p, sl, buddy, k);
    if (!test_bit(sl->bits[k], bi)) break;
    clear_bit(sl->bits[k], bi); /* its stack entry goes stale */
    if (buddy < a) a = buddy;
    k++;
  }
  put_free(p, sl, k, a);
}
