/*
 * lead.c - per-key prefetch leads (see lead.h for the concept).
 *
 * Entries: key, lead (launches), on-time uses since the last change. Open
 * addressing with linear probing; an entry whose lead decays to 0 becomes
 * a tombstone-free hole by backward-shift deletion, so lookups stay short
 * and the table holds only keys that currently need a lead.
 */
#include <stdbool.h>
#include <stdlib.h>

#include "lead.h"
#include "mix.h"

#define PROBE_MAX 16 /* replacement looks this far for the weakest entry */
#define DECAY_USES 8 /* on-time uses that take one launch off a lead */

typedef struct lent {
  uint64_t key;   /* 0: empty */
  uint8_t lead;   /* launches beyond the depth, 1..max */
  uint8_t ontime; /* on-time uses since the lead last changed */
} lent_t;

struct mt_lead {
  lent_t *t;
  size_t cap, n;
  unsigned max;
};

mt_lead_t *_mt_lead_create(size_t capacity, unsigned max_lead) {
  if (max_lead == 0) return NULL;
  if (max_lead > 255) max_lead = 255;
  size_t cap = 16;
  while (cap < capacity) cap *= 2;
  mt_lead_t *l = calloc(1, sizeof(*l));
  if (l == NULL) return NULL;
  l->t = calloc(cap, sizeof(*l->t));
  if (l->t == NULL) {
    free(l);
    return NULL;
  }
  l->cap = cap;
  l->max = max_lead;
  return l;
}

void _mt_lead_destroy(mt_lead_t *l) {
  if (l == NULL) return;
  free(l->t);
  free(l);
}

static size_t home(const mt_lead_t *l, uint64_t key) {
  return (size_t)_mt_mix64(key) & (l->cap - 1);
}

static lent_t *find(const mt_lead_t *l, uint64_t key) {
  for (size_t i = home(l, key), k = 0; k < l->cap; i = (i + 1) & (l->cap - 1), k++) {
    if (l->t[i].key == key) return &l->t[i];
    if (l->t[i].key == 0) return NULL;
  }
  return NULL;
}

/* Backward-shift deletion: the entries after the hole that probed past it
 * move up, so no lookup stops early at it. */
static void erase(mt_lead_t *l, lent_t *e) {
  size_t i = (size_t)(e - l->t);
  for (size_t j = (i + 1) & (l->cap - 1); l->t[j].key != 0; j = (j + 1) & (l->cap - 1)) {
    size_t h = home(l, l->t[j].key);
    /* j's entry may fill i when its home is not cyclically in (i, j] */
    bool stays = i <= j ? (i < h && h <= j) : (i < h || h <= j);
    if (!stays) {
      l->t[i] = l->t[j];
      i = j;
    }
  }
  l->t[i] = (lent_t){0, 0, 0};
  l->n--;
}

void _mt_lead_late(mt_lead_t *l, uint64_t key) {
  if (l == NULL || key == 0) return;
  lent_t *e = find(l, key);
  if (e != NULL) {
    unsigned d = e->lead * 2u;
    e->lead = (uint8_t)(d > l->max ? l->max : d);
    e->ontime = 0;
    return;
  }
  size_t i = home(l, key);
  if ((l->n + 1) * 4 > l->cap * 3) {
    /* full enough: the weakest entry near its home gives way */
    lent_t *w = NULL;
    for (size_t k = 0, j = i; k < PROBE_MAX; k++, j = (j + 1) & (l->cap - 1))
      if (l->t[j].key != 0 && (w == NULL || l->t[j].lead < w->lead)) w = &l->t[j];
    if (w != NULL) erase(l, w); /* none: the run is empty, and the table not full */
  }
  while (l->t[i].key != 0) i = (i + 1) & (l->cap - 1);
  l->t[i] = (lent_t){key, 1, 0};
  l->n++;
}

void _mt_lead_on_time(mt_lead_t *l, uint64_t key) {
  if (l == NULL || key == 0) return;
  lent_t *e = find(l, key);
  if (e == NULL) return;
  if (++e->ontime < DECAY_USES) return;
  e->ontime = 0;
  if (--e->lead == 0) erase(l, e);
}

unsigned _mt_lead_get(const mt_lead_t *l, uint64_t key) {
  if (l == NULL || key == 0) return 0;
  const lent_t *e = find(l, key);
  return e ? e->lead : 0;
}

unsigned _mt_lead_max(const mt_lead_t *l) {
  return l ? l->max : 0;
}

size_t _mt_lead_count(const mt_lead_t *l) {
  return l ? l->n : 0;
}
