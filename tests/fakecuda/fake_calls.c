/*
 * fake_calls.c - counts of driver calls, by function, for tests that hold
 * the code under test to a number of driver calls (fakecuda_call_count).
 *
 * Concept: the mapping and allocation calls of the virtual memory API are
 * what a pager's chunk moves cost on a real driver (cuMemCreate and
 * cuMemRelease allocate and free physical memory, cuMemUnmap may wait for
 * the device), so a test can say "a fetch costs this many of each" and the
 * fake checks it. Every call is counted, successful or not: a failed call
 * costs a round trip too.
 *
 * Threading: relaxed atomics, bumped from any thread without the fake's
 * lock; a count read while calls run is a snapshot.
 */
#include <limits.h>
#include <stdatomic.h>
#include <string.h>

#include "fake_internal.h"

static const char *const names[FC_CALL__COUNT] = {
#define FC_CALL_NAME(n) #n,
  FC_COUNTED_CALLS(FC_CALL_NAME)
#undef FC_CALL_NAME
};

static _Atomic unsigned long long counts[FC_CALL__COUNT];

void fc_count(fc_call_t c) {
  atomic_fetch_add_explicit(&counts[c], 1, memory_order_relaxed);
}

FC_API unsigned long long fakecuda_call_count(const char *name) {
  for (int i = 0; name && i < FC_CALL__COUNT; i++)
    if (strcmp(names[i], name) == 0) return atomic_load_explicit(&counts[i], memory_order_relaxed);
  return ULLONG_MAX;
}
