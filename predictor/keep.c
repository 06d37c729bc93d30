/*
 * keep.c - the set of kept region keys (see keep.h for the concept).
 *
 * Open addressing with linear probing; keys are only added (or all
 * cleared), so there are no tombstones.
 */
#include <stdlib.h>
#include <string.h>

#include "keep.h"
#include "mix.h"

struct mt_keep {
  uint64_t *t; /* keys; 0: empty */
  size_t cap, n;
  uint64_t cap_bytes, bytes;
};

mt_keep_t *_mt_keep_create(size_t capacity, uint64_t cap_bytes) {
  size_t cap = 16;
  while (cap < capacity) cap *= 2;
  mt_keep_t *k = calloc(1, sizeof(*k));
  if (k == NULL) return NULL;
  k->t = calloc(cap, sizeof(*k->t));
  if (k->t == NULL) {
    free(k);
    return NULL;
  }
  k->cap = cap;
  k->cap_bytes = cap_bytes;
  return k;
}

void _mt_keep_destroy(mt_keep_t *k) {
  if (k == NULL) return;
  free(k->t);
  free(k);
}

/* key's slot, or the empty slot where it would go */
static uint64_t *slot(const mt_keep_t *k, uint64_t key) {
  size_t i = (size_t)_mt_mix64(key) & (k->cap - 1);
  while (k->t[i] != 0 && k->t[i] != key) i = (i + 1) & (k->cap - 1);
  return &k->t[i];
}

bool _mt_keep_late(mt_keep_t *k, uint64_t key, uint64_t bytes) {
  if (k == NULL || key == 0) return false;
  uint64_t *e = slot(k, key);
  if (*e == key) return true;
  if (4 * (k->n + 1) > 3 * k->cap || bytes > k->cap_bytes - k->bytes) return false;
  *e = key;
  k->n++;
  k->bytes += bytes;
  return true;
}

bool _mt_keep_has(const mt_keep_t *k, uint64_t key) {
  return k != NULL && key != 0 && k->n > 0 && *slot(k, key) == key;
}

void _mt_keep_clear(mt_keep_t *k) {
  if (k == NULL || k->n == 0) return;
  memset(k->t, 0, k->cap * sizeof(*k->t));
  k->n = 0;
  k->bytes = 0;
}

uint64_t _mt_keep_bytes(const mt_keep_t *k) {
  return k != NULL ? k->bytes : 0;
}

uint64_t _mt_keep_due(uint64_t now, uint64_t due) {
  if (due <= now) return due; /* unknown, or passed: as it is */
  uint64_t d = (due - now) / MT_KEEP_DIV;
  return now + (d > 0 ? d : 1); /* still ahead: a due at now would read as passed */
}
