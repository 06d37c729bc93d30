/*
 * vaspace.c - hands out addresses inside the range the pager reserved.
 *
 * Units are chunks. Free extents are kept sorted by address in one array
 * and merged on free; allocation is first fit, so the same sizes freed and
 * allocated each iteration (activations) land where they were, and the
 * array stays short. A bump pointer serves the untouched tail.
 *
 * Threading: none; the pager calls it under its lock.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pager_internal.h"

int _mt_va_init(mt_vaspace_t *v, uintptr_t base, size_t chunks) {
  memset(v, 0, sizeof(*v));
  v->base = base;
  v->total = chunks;
  return 0;
}

void _mt_va_fini(mt_vaspace_t *v) {
  free(v->ext);
  memset(v, 0, sizeof(*v));
}

int _mt_va_alloc(mt_vaspace_t *v, size_t n, size_t chunk, uintptr_t *out) {
  for (size_t i = 0; i < v->next; i++) {
    if (v->ext[i].n < n) continue;
    *out = v->base + v->ext[i].first * chunk;
    v->ext[i].first += n;
    v->ext[i].n -= n;
    if (v->ext[i].n == 0) {
      memmove(&v->ext[i], &v->ext[i + 1], (v->next - i - 1) * sizeof(v->ext[0]));
      v->next--;
    }
    return 0;
  }
  if (v->top + n > v->total) return -ENOMEM;
  *out = v->base + v->top * chunk;
  v->top += n;
  return 0;
}

int _mt_va_free(mt_vaspace_t *v, uintptr_t addr, size_t n, size_t chunk) {
  size_t first = (addr - v->base) / chunk;
  if (first + n == v->top) { /* back to the tail, then swallow a free extent that now ends it */
    v->top = first;
    if (v->next > 0 && v->ext[v->next - 1].first + v->ext[v->next - 1].n == v->top) {
      v->top = v->ext[v->next - 1].first;
      v->next--;
    }
    return 0;
  }
  /* position: first extent starting after first */
  size_t lo = 0, hi = v->next;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (v->ext[mid].first < first) lo = mid + 1;
    else hi = mid;
  }
  bool join_prev = lo > 0 && v->ext[lo - 1].first + v->ext[lo - 1].n == first;
  bool join_next = lo < v->next && first + n == v->ext[lo].first;
  if (join_prev && join_next) {
    v->ext[lo - 1].n += n + v->ext[lo].n;
    memmove(&v->ext[lo], &v->ext[lo + 1], (v->next - lo - 1) * sizeof(v->ext[0]));
    v->next--;
  } else if (join_prev) {
    v->ext[lo - 1].n += n;
  } else if (join_next) {
    v->ext[lo].first = first;
    v->ext[lo].n += n;
  } else {
    if (v->next == v->cap) {
      size_t cap = v->cap ? v->cap * 2 : 64;
      void *p = realloc(v->ext, cap * sizeof(v->ext[0]));
      if (p == NULL) return -ENOMEM; /* the range leaks: never reused, still correct */
      v->ext = p;
      v->cap = cap;
    }
    memmove(&v->ext[lo + 1], &v->ext[lo], (v->next - lo) * sizeof(v->ext[0]));
    v->ext[lo].first = first;
    v->ext[lo].n = n;
    v->next++;
  }
  return 0;
}
