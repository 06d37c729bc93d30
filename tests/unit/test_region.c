/* Description: the region map against a simple reference (a flat array
 * searched linearly), under random inserts, removes and lookups; edge cases;
 * and concurrent readers with a writer. */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "internal.h"

typedef struct ref { uintptr_t start; size_t size; bool live; } ref_t;

static uint64_t rng(uint64_t *s) {
  *s ^= *s << 13; *s ^= *s >> 7; *s ^= *s << 17;
  return *s;
}

static ref_t *ref_find(ref_t *r, size_t n, uintptr_t a) {
  for (size_t i = 0; i < n; i++)
    if (r[i].live && a >= r[i].start && a - r[i].start < r[i].size) return &r[i];
  return NULL;
}

static bool ref_overlaps(ref_t *r, size_t n, uintptr_t s, size_t sz) {
  for (size_t i = 0; i < n; i++)
    if (r[i].live && s < r[i].start + r[i].size && r[i].start < s + sz) return true;
  return false;
}

Test(region, edge_cases) {
  _mt_rmap_t *m = _mt_rmap_new();
  cr_assert_not_null(m);
  int v1, v2;
  cr_assert_null(_mt_rmap_find(m, 100, NULL, NULL));
  cr_assert_eq(_mt_rmap_insert(m, 100, 0, &v1), -EINVAL);
  cr_assert_eq(_mt_rmap_insert(m, UINTPTR_MAX - 5, 10, &v1), -EINVAL);
  cr_assert_eq(_mt_rmap_insert(m, 100, 50, &v1), 0);
  cr_assert_eq(_mt_rmap_insert(m, 100, 50, &v2), -EEXIST);
  cr_assert_eq(_mt_rmap_insert(m, 149, 10, &v2), -EEXIST);
  cr_assert_eq(_mt_rmap_insert(m, 90, 11, &v2), -EEXIST);
  cr_assert_eq(_mt_rmap_insert(m, 90, 10, &v2), 0); /* touching is fine */
  cr_assert_eq(_mt_rmap_insert(m, 150, 1, &v2), 0);
  uintptr_t s; size_t sz;
  cr_assert_eq(_mt_rmap_find(m, 100, &s, &sz), &v1);
  cr_assert_eq(s, 100); cr_assert_eq(sz, 50);
  cr_assert_eq(_mt_rmap_find(m, 149, NULL, NULL), &v1);
  cr_assert_eq(_mt_rmap_find(m, 99, NULL, NULL), &v2);
  cr_assert_eq(_mt_rmap_find(m, 150, NULL, NULL), &v2);
  cr_assert_null(_mt_rmap_find(m, 151, NULL, NULL));
  cr_assert_null(_mt_rmap_find(m, 89, NULL, NULL));
  cr_assert_eq(_mt_rmap_remove(m, 101, NULL), -ENOENT); /* must be the start */
  void *out = NULL;
  cr_assert_eq(_mt_rmap_remove(m, 100, &out), 0);
  cr_assert_eq(out, &v1);
  cr_assert_eq(_mt_rmap_remove(m, 100, &out), -ENOENT);
  cr_assert_null(_mt_rmap_find(m, 120, NULL, NULL));
  cr_assert_eq(_mt_rmap_count(m), 2);
  cr_assert_eq(_mt_rmap_check(m), 0);
  _mt_rmap_free(m);
}

/* Random operations in a small address space (so overlaps are common), many
 * more live ranges than a leaf holds (so leaves split and empty). */
Test(region, randomised_against_reference) {
  enum { SLOTS = 2000, OPS = 60000 };
  ref_t *r = calloc(SLOTS, sizeof(*r));
  _mt_rmap_t *m = _mt_rmap_new();
  uint64_t seed = 12345;
  size_t live = 0;
  for (int op = 0; op < OPS; op++) {
    unsigned k = rng(&seed) % 10;
    size_t i = rng(&seed) % SLOTS;
    if (k < 5) {  /* insert into slot i if free */
      if (r[i].live) continue;
      /* mostly small ranges sharing 2 MiB granules, some spanning several */
      uintptr_t s = 4096 + rng(&seed) % (1u << 28);
      size_t sz = rng(&seed) % 8 == 0 ? 1 + rng(&seed) % (6u << 20) : 1 + rng(&seed) % 65536;
      int want = ref_overlaps(r, SLOTS, s, sz) ? -EEXIST : 0;
      cr_assert_eq(_mt_rmap_insert(m, s, sz, &r[i]), want, "op %d", op);
      if (want == 0) { r[i] = (ref_t){s, sz, true}; live++; }
    } else if (k < 8) { /* remove */
      if (!r[i].live) {
        cr_assert_eq(_mt_rmap_remove(m, r[i].start + 7777777, NULL), -ENOENT);
        continue;
      }
      void *out;
      cr_assert_eq(_mt_rmap_remove(m, r[i].start, &out), 0);
      cr_assert_eq(out, &r[i]);
      r[i].live = false;
      live--;
    } else { /* lookups: inside a live range, and anywhere */
      uintptr_t a = rng(&seed) % ((1u << 28) + (8u << 20));
      cr_assert_eq(_mt_rmap_find(m, a, NULL, NULL), (void *)ref_find(r, SLOTS, a), "op %d addr %lu", op, (unsigned long)a);
      if (r[i].live) {
        uintptr_t b = r[i].start + rng(&seed) % r[i].size;
        cr_assert_eq(_mt_rmap_find(m, b, NULL, NULL), (void *)&r[i]);
        cr_assert_neq(_mt_rmap_find(m, r[i].start + r[i].size, NULL, NULL), (void *)&r[i]);
      }
    }
    if (op % 5000 == 0) cr_assert_eq(_mt_rmap_check(m), 0);
  }
  cr_assert_eq(_mt_rmap_count(m), live);
  cr_assert_eq(_mt_rmap_check(m), 0);
  cr_assert_gt(live, 500, "the test must exercise many leaves (live=%zu)", live);
  _mt_rmap_free(m);
  free(r);
}

typedef struct race { _mt_rmap_t *m; volatile int stop; int errors; } race_t;

static void *reader(void *arg) {
  race_t *r = arg;
  uint64_t seed = 99;
  while (!r->stop) {
    /* The stable ranges [i*2M, i*2M+1M) for i in 1..1000 are never removed. */
    uintptr_t i = 1 + rng(&seed) % 1000;
    void *v = _mt_rmap_find(r->m, i * (2u << 20) + rng(&seed) % (1u << 20), NULL, NULL);
    if (v != (void *)i) r->errors++;
  }
  return NULL;
}

Test(region, concurrent_readers_and_writer) {
  race_t r = {_mt_rmap_new(), 0, 0};
  for (uintptr_t i = 1; i <= 1000; i++)
    cr_assert_eq(_mt_rmap_insert(r.m, i * (2u << 20), 1u << 20, (void *)i), 0);
  pthread_t t[3];
  for (int i = 0; i < 3; i++) pthread_create(&t[i], NULL, reader, &r);
  /* The writer churns the gaps between stable ranges. */
  uint64_t seed = 7;
  for (int k = 0; k < 100000; k++) {
    uintptr_t i = 1 + rng(&seed) % 1000;
    uintptr_t a = i * (2u << 20) + (1u << 20) + 4096 * (rng(&seed) % 200);
    if (_mt_rmap_insert(r.m, a, 4096, NULL) == 0) cr_assert_eq(_mt_rmap_remove(r.m, a, NULL), 0);
  }
  r.stop = 1;
  for (int i = 0; i < 3; i++) pthread_join(t[i], NULL);
  cr_assert_eq(r.errors, 0);
  cr_assert_eq(_mt_rmap_count(r.m), 1000);
  _mt_rmap_free(r.m);
}
