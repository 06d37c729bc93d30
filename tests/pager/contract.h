/*
 * contract.h - what the interposer's contract programs share (pager_test,
 * capture_test, oversize_test, kernel_test): failing with the line, and
 * reading mtalloc's statistics, which each program gets from the preloaded
 * library with dlsym (contract_preloaded).
 *
 * Define WHO (the program's name, a string) before including it. Programs
 * that link the fake driver define CONTRACT_LINKED to also get CK(), which
 * names the CUresult; kernel_test reaches the driver as libcudart does and
 * has its own.
 */
#ifndef CONTRACT_H
#define CONTRACT_H

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MiB ((size_t)1 << 20)

#define EXPECT(cond, ...)                        \
  do {                                           \
    if (!(cond)) {                               \
      fprintf(stderr, WHO ":%d: ", __LINE__);    \
      fprintf(stderr, __VA_ARGS__);              \
      fputc('\n', stderr);                       \
      exit(1);                                   \
    }                                            \
  } while (0)

static const char *(*stats_json)(void);

/* Finds mt_stats_json in the preloaded library, or exits 77 (skip): the
 * program was not run under LD_PRELOAD=libmtalloc.so. */
static inline void contract_preloaded(void) {
  stats_json = (const char *(*)(void))dlsym(RTLD_DEFAULT, "mt_stats_json");
  if (stats_json == NULL) {
    printf(WHO ": not running under libmtalloc.so; skipping\n");
    exit(77);
  }
}

/* The value of a top-level counter in the stats JSON, or -1 when absent. */
static inline long stat_of(const char *name) {
  char key[64];
  snprintf(key, sizeof(key), "\"%s\":", name);
  const char *at = strstr(stats_json(), key);
  return at ? strtol(at + strlen(key), NULL, 10) : -1;
}

/* The count of route in "calls":{"sym":{"direct":n,...}} of the stats: 0
 * when the symbol was never called, -1 when the route is missing. */
static inline long calls(const char *sym, const char *route_name) {
  const char *j = stats_json();
  char key[96];
  snprintf(key, sizeof(key), "\"%s\":{", sym);
  const char *at = strstr(j, key);
  if (at == NULL) return 0;
  snprintf(key, sizeof(key), "\"%s\":", route_name);
  const char *r = strstr(at, key);
  return r ? strtol(r + strlen(key), NULL, 10) : -1;
}

#ifdef CONTRACT_LINKED
#include <cuda.h>
static inline void die(const char *what, CUresult r, int line) {
  const char *name = "?";
  cuGetErrorName(r, &name);
  fprintf(stderr, WHO ":%d: %s failed: %s\n", line, what, name);
  exit(1);
}
#define CK(call)                                      \
  do {                                                \
    CUresult r_ = (call);                             \
    if (r_ != CUDA_SUCCESS) die(#call, r_, __LINE__); \
  } while (0)
#endif

#endif
