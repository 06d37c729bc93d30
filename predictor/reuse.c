/*
 * reuse.c - next-use estimates from the period of the launch stream
 * (reuse.h states the rule).
 *
 * Two open-addressing tables, linear probing, no deletions (a slot is only
 * ever overwritten by its own key), grown by doubling at 3/4 full:
 *  - identities: id -> clock of its last launch, for the period;
 *  - keys: key -> ring of its last RING uses (clock values).
 * A table that cannot grow keeps working at what it holds: for identities,
 * an unseen id simply yields no distance; for keys, the use is dropped.
 *
 * Period: Misra-Gries with NCAND candidate distances. A distance equal to
 * a candidate adds one to it; otherwise it takes a free candidate, or
 * every count falls by one. The period is the candidate with the highest
 * count. In a training loop nearly every identity recurs once per
 * iteration, so the period's count grows by about one per launch and any
 * other distance is forgotten within a few iterations; a loop that changes
 * (a longer sequence) takes over once its distance has out-counted the old
 * one (counts saturate at CNT_MAX, so within CNT_MAX launches of the new
 * loop).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "mix.h"
#include "reuse.h"

#define RING 8
#define NCAND 8
#define CNT_MAX 4096
#define CNT_MIN 32 /* a period is believed once it recurred this often */

typedef struct id_slot {
  uint64_t id;
  uint64_t last;
} id_slot_t;

typedef struct key_slot {
  uint64_t key;
  uint32_t n;           /* uses held, at most RING */
  uint32_t head;        /* index of the newest */
  uint64_t use[RING];
} key_slot_t;

struct mt_reuse {
  uint64_t now;
  id_slot_t *ids;
  size_t ids_cap, ids_n;
  key_slot_t *keys;
  size_t keys_cap, keys_n;
  uint64_t cand[NCAND];
  uint32_t cnt[NCAND];
};

mt_reuse_t *_mt_reuse_create(void) {
  mt_reuse_t *r = calloc(1, sizeof(*r));
  if (r == NULL) return NULL;
  r->ids_cap = 1024;
  r->keys_cap = 1024;
  r->ids = calloc(r->ids_cap, sizeof(*r->ids));
  r->keys = calloc(r->keys_cap, sizeof(*r->keys));
  if (r->ids == NULL || r->keys == NULL) {
    _mt_reuse_destroy(r);
    return NULL;
  }
  return r;
}

void _mt_reuse_destroy(mt_reuse_t *r) {
  if (r == NULL) return;
  free(r->ids);
  free(r->keys);
  free(r);
}

uint64_t _mt_reuse_now(const mt_reuse_t *r) {
  return r->now;
}

size_t _mt_reuse_bytes(const mt_reuse_t *r) {
  return sizeof(*r) + r->ids_cap * sizeof(*r->ids) + r->keys_cap * sizeof(*r->keys);
}

uint64_t _mt_reuse_period(const mt_reuse_t *r) {
  uint64_t best = 0;
  uint32_t bc = CNT_MIN - 1;
  for (int i = 0; i < NCAND; i++)
    if (r->cnt[i] > bc) {
      bc = r->cnt[i];
      best = r->cand[i];
    }
  return best;
}

static void period_sample(mt_reuse_t *r, uint64_t d) {
  int free_i = -1;
  for (int i = 0; i < NCAND; i++) {
    if (r->cnt[i] != 0 && r->cand[i] == d) {
      if (r->cnt[i] < CNT_MAX) r->cnt[i]++;
      return;
    }
    if (r->cnt[i] == 0 && free_i < 0) free_i = i;
  }
  if (free_i >= 0) {
    r->cand[free_i] = d;
    r->cnt[free_i] = 1;
    return;
  }
  for (int i = 0; i < NCAND; i++) r->cnt[i]--;
}

/* ---- identities ---------------------------------------------------------- */

static id_slot_t *id_slot(id_slot_t *t, size_t cap, uint64_t id) {
  for (size_t i = (size_t)_mt_mix64(id) & (cap - 1);; i = (i + 1) & (cap - 1))
    if (t[i].id == id || t[i].id == 0) return &t[i];
}

static void ids_grow(mt_reuse_t *r) {
  size_t cap = r->ids_cap * 2;
  id_slot_t *t = calloc(cap, sizeof(*t));
  if (t == NULL) return; /* keeps working full-ish: new ids give no distance */
  for (size_t i = 0; i < r->ids_cap; i++)
    if (r->ids[i].id != 0) *id_slot(t, cap, r->ids[i].id) = r->ids[i];
  free(r->ids);
  r->ids = t;
  r->ids_cap = cap;
}

uint64_t _mt_reuse_launch(mt_reuse_t *r, uint64_t id) {
  uint64_t now = ++r->now;
  if (id == 0) return now;
  if ((r->ids_n + 1) * 4 > r->ids_cap * 3) ids_grow(r);
  if ((r->ids_n + 1) * 8 > r->ids_cap * 7) return now; /* could not grow: never fill the table */
  id_slot_t *s = id_slot(r->ids, r->ids_cap, id);
  if (s->id == id) period_sample(r, now - s->last);
  else {
    s->id = id;
    r->ids_n++;
  }
  s->last = now;
  return now;
}

/* ---- keys ---------------------------------------------------------------- */

static key_slot_t *key_slot(key_slot_t *t, size_t cap, uint64_t key) {
  for (size_t i = (size_t)_mt_mix64(key) & (cap - 1);; i = (i + 1) & (cap - 1))
    if (t[i].key == key || t[i].key == 0) return &t[i];
}

static int keys_grow(mt_reuse_t *r) {
  size_t cap = r->keys_cap * 2;
  key_slot_t *t = calloc(cap, sizeof(*t));
  if (t == NULL) return -ENOMEM;
  for (size_t i = 0; i < r->keys_cap; i++)
    if (r->keys[i].key != 0) *key_slot(t, cap, r->keys[i].key) = r->keys[i];
  free(r->keys);
  r->keys = t;
  r->keys_cap = cap;
  return 0;
}

int _mt_reuse_use(mt_reuse_t *r, uint64_t key) {
  if (key == 0) return 0;
  key_slot_t *s = key_slot(r->keys, r->keys_cap, key);
  if (s->key == 0) {
    if ((r->keys_n + 1) * 4 > r->keys_cap * 3) {
      if (keys_grow(r) < 0) return -ENOMEM;
      s = key_slot(r->keys, r->keys_cap, key);
    }
    s->key = key;
    r->keys_n++;
  }
  if (s->n > 0 && s->use[s->head] == r->now) return 0; /* twice in one footprint: one use */
  s->head = (s->head + 1) % RING;
  s->use[s->head] = r->now;
  if (s->n < RING) s->n++;
  return 0;
}

uint64_t _mt_reuse_next(const mt_reuse_t *r, uint64_t key) {
  uint64_t period = _mt_reuse_period(r);
  if (key == 0 || period == 0) return 0;
  const key_slot_t *s = key_slot(r->keys, r->keys_cap, key);
  if (s->key != key || s->n == 0) return 0;
  uint64_t now = r->now;
  uint64_t newest = s->use[s->head];
  uint64_t oldest = s->use[(s->head + RING + 1 - s->n) % RING];
  /* The ring is full and all of it lies within the last period: used more
   * than RING times per period; expect it one mean gap after the last. */
  if (s->n == RING && oldest + period > now) {
    uint64_t gap = (newest - oldest) / (RING - 1);
    return (newest > now ? newest : now) + (gap ? gap : 1);
  }
  /* The earliest use within the last period, one period on. Uses come in
   * clock order (newest at head), so walk from the oldest. */
  for (uint32_t i = 0; i < s->n; i++) {
    uint64_t u = s->use[(s->head + RING + 1 - s->n + i) % RING];
    if (u + period > now) return u + period;
  }
  return 0; /* not used in the last period: no expectation (overdue) */
}
