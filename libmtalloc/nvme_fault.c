/*
 * nvme_fault.c - fault injection for the NVMe store's tests.
 *
 * Concept: a test arms a fault kind (EIO, short transfer, ENOSPC, bit flip)
 * for the next `count` requests after `skip` clean ones; nvme_store.c, when
 * compiled with -DMT_FAULT_INJECT (tests/nvme/ only), asks at each request
 * completion whether to turn it into that fault. The library proper is
 * never compiled with the switch, so these counters cost it nothing: they
 * are never read there.
 *
 * Threading: atomics, so a test may arm from any thread; the store has one
 * owner anyway.
 */
#include <stdatomic.h>

#include "nvme_store.h"

static struct {
  atomic_uint skip, count, injected;
} faults[MT_NVME_FAULT__COUNT];

void _mt_nvme_fault_arm(_mt_nvme_fault_t f, uint32_t skip, uint32_t count) {
  atomic_store(&faults[f].skip, skip);
  atomic_store(&faults[f].count, count);
}

void _mt_nvme_fault_reset(void) {
  for (int f = 0; f < MT_NVME_FAULT__COUNT; f++) {
    atomic_store(&faults[f].skip, 0);
    atomic_store(&faults[f].count, 0);
    atomic_store(&faults[f].injected, 0);
  }
}

bool _mt_nvme_fault_take(_mt_nvme_fault_t f) {
  if (atomic_load(&faults[f].count) == 0) return false;
  unsigned sk = atomic_load(&faults[f].skip);
  if (sk > 0) {
    atomic_store(&faults[f].skip, sk - 1);
    return false;
  }
  atomic_fetch_sub(&faults[f].count, 1);
  atomic_fetch_add(&faults[f].injected, 1);
  return true;
}

uint32_t _mt_nvme_fault_injected(_mt_nvme_fault_t f) {
  return atomic_load(&faults[f].injected);
}
