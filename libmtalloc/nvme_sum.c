/*
 * nvme_sum.c - the NVMe store's page checksum: xxh3-64 of a 4 KiB page.
 *
 * One thread hashes every page the store moves, both ways, so the hash is
 * on the store's critical path: at fio speed on one drive that is a third
 * of a core with SSE2, and it grows with every striped drive. xxh3 picks
 * its vector width at compile time, so this file is compiled twice: once
 * for the x86-64 baseline (SSE2), once with -mavx2 (MT_NVME_SUM_AVX2,
 * x86-64 only), and the first call picks the AVX2 copy where the CPU has
 * it. Both compute xxHash's own XXH3_64bits (seed 0): the value does not
 * depend on the copy, so checksums written by one are verified by the other.
 *
 * Threading: the choice is an idempotent relaxed store of a function
 * pointer; any thread may call.
 */
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "hash.h"
#include "nvme_store.h"

#ifdef MT_NVME_SUM_AVX2
uint64_t _mt_nvme_sum_avx2(const void *p, size_t n);
uint64_t _mt_nvme_sum_avx2(const void *p, size_t n) { return XXH3_64bits(p, n); }
#else

uint64_t _mt_nvme_sum_portable(const void *p, size_t n) { return XXH3_64bits(p, n); }

#ifdef MT_NVME_HAVE_SUM_AVX2
uint64_t _mt_nvme_sum_avx2(const void *p, size_t n);
#endif

typedef uint64_t (*sum_fn)(const void *, size_t);

static sum_fn pick(void) {
#ifdef MT_NVME_HAVE_SUM_AVX2
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2")) return _mt_nvme_sum_avx2;
#endif
  return _mt_nvme_sum_portable;
}

uint64_t _mt_nvme_sum(const void *p, size_t n) {
  static _Atomic(sum_fn) fn;
  sum_fn f = atomic_load_explicit(&fn, memory_order_relaxed);
  if (__builtin_expect(!f, 0)) {
    f = pick();
    atomic_store_explicit(&fn, f, memory_order_relaxed);
  }
  return f(p, n);
}
#endif
