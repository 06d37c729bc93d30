/*
 * demand.c - eviction demand by launch, one period back (demand.h).
 */
#include "demand.h"

#include <errno.h>
#include <stdlib.h>

typedef struct entry {
  uint64_t clock;
  uint64_t cum; /* chunks recorded up to and including this launch, since creation */
} entry_t;

struct mt_demand {
  entry_t *e;     /* a ring of cap entries (a power of two), oldest at head */
  size_t cap, head, n;
  uint64_t base;  /* cum of the last entry dropped (0: none) */
  uint64_t from;  /* every launch from this clock on is recorded */
  bool started;   /* from is set (the first call) */
};

static entry_t *at(const mt_demand_t *d, size_t i) {
  return &d->e[(d->head + i) & (d->cap - 1)];
}

mt_demand_t *_mt_demand_create(void) {
  mt_demand_t *d = calloc(1, sizeof(*d));
  if (d == NULL) return NULL;
  d->cap = 64;
  d->e = malloc(d->cap * sizeof(*d->e));
  if (d->e == NULL) {
    free(d);
    return NULL;
  }
  return d;
}

void _mt_demand_destroy(mt_demand_t *d) {
  if (d == NULL) return;
  free(d->e);
  free(d);
}

static void start(mt_demand_t *d, uint64_t t) {
  if (!d->started) {
    d->started = true;
    d->from = t;
  }
}

/* Forgets everything before t: the history starts again there. */
static void restart(mt_demand_t *d, uint64_t t) {
  if (d->n > 0) d->base = at(d, d->n - 1)->cum;
  d->head = d->n = 0;
  d->from = t;
}

int _mt_demand_record(mt_demand_t *d, uint64_t t, uint32_t n) {
  start(d, t);
  if (n == 0) return 0;
  if (d->n > 0) {
    entry_t *last = at(d, d->n - 1);
    if (t <= last->clock) { /* the same launch (a clock never goes back) */
      last->cum += n;
      return 0;
    }
  }
  if (d->n == d->cap) {
    entry_t *e = malloc(2 * d->cap * sizeof(*e));
    if (e == NULL) {
      restart(d, t + 1);
      return -ENOMEM;
    }
    for (size_t i = 0; i < d->n; i++) e[i] = *at(d, i);
    free(d->e);
    d->e = e;
    d->cap *= 2;
    d->head = 0;
  }
  uint64_t cum = (d->n > 0 ? at(d, d->n - 1)->cum : d->base) + n;
  *at(d, d->n++) = (entry_t){t, cum};
  return 0;
}

/* Chunks recorded up to and including clock x (from the kept entries on). */
static uint64_t cum_upto(const mt_demand_t *d, uint64_t x) {
  size_t lo = 0, hi = d->n; /* entries [0, lo) have clock <= x */
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (at(d, mid)->clock <= x) lo = mid + 1;
    else hi = mid;
  }
  return lo == 0 ? d->base : at(d, lo - 1)->cum;
}

bool _mt_demand_window(mt_demand_t *d, uint64_t t, uint64_t period, unsigned h, size_t *chunks, uint64_t *first) {
  start(d, t);
  *chunks = 0;
  *first = 0;
  if (period == 0 || h == 0 || h >= period || t + 1 < period) return false;
  uint64_t lo = t + 1 - period, hi = t + h - period;
  if (lo < d->from) return false;
  /* entries before lo: no later window needs them while period stays */
  while (d->n > 0 && at(d, 0)->clock < lo) {
    d->base = at(d, 0)->cum;
    d->head = (d->head + 1) & (d->cap - 1);
    d->n--;
  }
  d->from = lo;
  *chunks = (size_t)(cum_upto(d, hi) - d->base); /* every kept entry lies at lo or later */
  if (*chunks > 0) *first = at(d, 0)->clock + period;
  return true;
}

size_t _mt_demand_entries(const mt_demand_t *d) {
  return d != NULL ? d->n : 0;
}
