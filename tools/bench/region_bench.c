/*
 * region_bench - nanoseconds per region-map lookup with N live regions
 * (default 100,000), median over batches, plus insert+remove pairs.
 *
 *   build/tools/bench/region_bench [N]
 *
 * Two layouts: "spread", as the pager lays out tensors (2 MiB-aligned, 4 KiB
 * to 64 MiB), and "packed", small regions (256 B to 64 KiB) back to back as
 * the pager packs them into shared chunks, many to a 2 MiB granule. Lookups
 * hit random addresses inside random regions (hits) or past the last region
 * (misses).
 */
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"
#include "internal.h"

#define BATCH 1000
#define BATCHES 301

int main(int argc, char **argv) {
  size_t n = argc > 1 ? strtoul(argv[1], NULL, 10) : 100000;
  if (n == 0) {
    fprintf(stderr, "usage: region_bench [REGIONS]\n");
    return 2;
  }
  _mt_rmap_t *m = _mt_rmap_new();
  uintptr_t *starts = malloc(n * sizeof(*starts));
  size_t *sizes = malloc(n * sizeof(*sizes));
  if (m == NULL || starts == NULL || sizes == NULL) return 1;
  uint64_t seed = 0x9E3779B97F4A7C15ULL;
  uintptr_t base = (uintptr_t)1 << 44, at = base;
  for (size_t i = 0; i < n; i++) {
    size_t sz = (size_t)4096 << (bench_rand(&seed) % 15); /* 4 KiB .. 64 MiB */
    starts[i] = at;
    sizes[i] = sz;
    if (_mt_rmap_insert(m, at, sz, &starts[i]) != 0) return 1;
    at += (sz + (2u << 20) - 1) & ~(uintptr_t)((2u << 20) - 1);
  }
  /* Insert in address order is the pager's order; the lookups are random. */
  uintptr_t *probe = malloc(BATCH * sizeof(*probe));
  double hit[BATCHES], miss[BATCHES], pair[BATCHES];
  volatile uintptr_t sink = 0;
  for (int b = 0; b < BATCHES; b++) {
    for (int i = 0; i < BATCH; i++) {
      size_t r = bench_rand(&seed) % n;
      probe[i] = starts[r] + bench_rand(&seed) % sizes[r];
    }
    uint64_t t0 = bench_now_ns();
    for (int i = 0; i < BATCH; i++) sink += (uintptr_t)_mt_rmap_find(m, probe[i], NULL, NULL);
    uint64_t t1 = bench_now_ns();
    hit[b] = (double)(t1 - t0) / BATCH;
    for (int i = 0; i < BATCH; i++) probe[i] = at + (bench_rand(&seed) % (1u << 30));
    t0 = bench_now_ns();
    for (int i = 0; i < BATCH; i++) sink += (uintptr_t)_mt_rmap_find(m, probe[i], NULL, NULL);
    t1 = bench_now_ns();
    miss[b] = (double)(t1 - t0) / BATCH;
    /* insert+remove pairs at random spots: in the slack after a small region */
    for (int i = 0; i < BATCH; i++) {
      size_t r;
      do r = bench_rand(&seed) % n; while (sizes[r] > (1u << 20));
      probe[i] = starts[r] + sizes[r];
    }
    t0 = bench_now_ns();
    for (int i = 0; i < BATCH; i++) {
      if (_mt_rmap_insert(m, probe[i], 4096, NULL) == 0) _mt_rmap_remove(m, probe[i], NULL);
    }
    t1 = bench_now_ns();
    pair[b] = (double)(t1 - t0) / BATCH;
  }
  if (_mt_rmap_check(m) != 0 || _mt_rmap_count(m) != n) {
    fprintf(stderr, "region_bench: map inconsistent after the run\n");
    return 1;
  }
  printf("regions %zu\n", n);
  printf("lookup_hit_ns_median %.1f\n", bench_median(hit, BATCHES));
  printf("lookup_miss_ns_median %.1f\n", bench_median(miss, BATCHES));
  printf("insert_remove_pair_ns_median %.1f\n", bench_median(pair, BATCHES));

  /* packed layout */
  _mt_rmap_t *pm = _mt_rmap_new();
  at = base;
  for (size_t i = 0; i < n; i++) {
    sizes[i] = (size_t)256 << (bench_rand(&seed) % 9);
    starts[i] = at;
    if (_mt_rmap_insert(pm, at, sizes[i], &starts[i]) != 0) return 1;
    at += sizes[i];
  }
  for (int b = 0; b < BATCHES; b++) {
    for (int i = 0; i < BATCH; i++) {
      size_t r = bench_rand(&seed) % n;
      probe[i] = starts[r] + bench_rand(&seed) % sizes[r];
    }
    uint64_t t0 = bench_now_ns();
    for (int i = 0; i < BATCH; i++) sink += (uintptr_t)_mt_rmap_find(pm, probe[i], NULL, NULL);
    hit[b] = (double)(bench_now_ns() - t0) / BATCH;
  }
  printf("lookup_packed_hit_ns_median %.1f\n", bench_median(hit, BATCHES));
  _mt_rmap_free(pm);
  (void)sink;
  _mt_rmap_free(m);
  free(starts);
  free(sizes);
  free(probe);
  return 0;
}
