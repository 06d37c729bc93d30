/*
 * readcheck.h - replay's proof that kernels read only data that is there:
 * at the moment each replayed kernel is issued (the pager has prepared its
 * footprint and ordered it after the fetch copies), every byte of every
 * span it reads must lie in a chunk on the device (fetched, or resident
 * since it was last used) or, for a launch larger than GPU memory, in a
 * host copy it reaches through host mappings. Counted, not asserted, so
 * that a test can check the identity exactly:
 *   read = on_device + host_mapped, missing = 0.
 */
#ifndef MT_READCHECK_H
#define MT_READCHECK_H

#include <stdint.h>

#include "pager_internal.h"

typedef struct readcheck {
  uint64_t read;              /* bytes of spans kernels read (kinds read, read-write, unknown) */
  uint64_t on_device;         /* of those, in chunks on the device (or small regions, always there) */
  uint64_t host_mapped;       /* in host copies reached through host mappings */
  uint64_t missing;           /* anywhere else: a pager bug */
  uint64_t written_only;      /* bytes of spans only written (not checked: nothing is read) */
} readcheck_t;

/* Counts one kernel's spans (n of them: address, bytes, MT_ACC_* kind or
 * NULL kinds for unknown) into t, under the pager's lock. */
void readcheck_launch(mt_pager_t *p, const uintptr_t *addrs, const uint64_t *bytes, const uint8_t *kinds, uint32_t n,
                      readcheck_t *t);

#endif
