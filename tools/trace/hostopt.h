/*
 * hostopt.h - the host optimizer pool as a resource of mt-trace replay's
 * virtual clock (hostopt.c says how it is costed).
 *
 * A synth trace with optimizer_placement = host hands each parameter
 * group's final gradients to the host in a zero-time launch named
 * "mt_host_optimizer w=BYTES state=none|8bit|4bit" (gradient spans read,
 * weight spans written). Replay gives such a launch to hostopt_step instead
 * of the pager's launch path.
 */
#ifndef MT_HOSTOPT_H
#define MT_HOSTOPT_H

#include <stdbool.h>
#include <stdint.h>

#include "device.h"

#define HOSTOPT_STREAM 63     /* the pool's work on the virtual device: one of the app streams */

typedef struct hostopt_cfg {
  double gparams_per_s;       /* throughput with FP32 state, 1e9 parameters/s; default 10 */
  uint64_t state_mem;         /* host bytes for masters and moments; UINT64_MAX: all fit */
} hostopt_cfg_t;

typedef struct hostopt_totals {
  uint64_t steps;             /* hand-offs */
  uint64_t params;            /* parameters updated */
  uint64_t grad_bytes;        /* gradient bytes that left the GPU */
  uint64_t state_read, state_written; /* state bytes the pool read and wrote (RAM and NVMe) */
  uint64_t state_nvme_read, state_nvme_written; /* of those, through the NVMe drive */
  uint64_t state_bytes;       /* the whole state (every group seen) */
  uint64_t state_nvme_bytes;  /* of it, placed on NVMe */
  uint64_t busy_ns;           /* pool time updating */
  uint64_t nvme_wait_ns;      /* pool time waiting for state reads */
  uint64_t groups;            /* parameter groups seen */
  uint64_t groups_complete;   /* iterations in which every group was handed off exactly once, summed */
  uint64_t iters_conserved;   /* iterations in which, besides, the state read and the state written
                               * each equal the whole state (every group's once), those through NVMe
                               * the state placed there, and the gradients in equal the weights
                               * handed off: the per-step conservation the tests check */
} hostopt_totals_t;

typedef struct hostopt hostopt_t;

/* Parses a function name: 1 and *wbytes, *comp (0 none, 1 8bit, 2 4bit)
 * for a hand-off, 0 for any other name, -EINVAL for a malformed hand-off. */
int hostopt_parse_name(const char *name, size_t len, unsigned *wbytes, unsigned *comp);

/* Bytes the pool moves per parameter and the state it keeps per parameter
 * (see hostopt.c). */
double hostopt_moved_per_param(unsigned wbytes, unsigned comp);
double hostopt_state_per_param(unsigned wbytes, unsigned comp);

/* NULL on ENOMEM. The device is replay's virtual one. */
hostopt_t *hostopt_new(mt_device_t *dev, const hostopt_cfg_t *cfg);
void hostopt_free(hostopt_t *h);

/* One hand-off in iteration iter (from 0): group identifies the parameter
 * group (its first weight region), params its parameters, grad_addr and
 * grad_bytes its gradients on the device. Issues the gradient copy after
 * stream 0's work so far, the state reads, the update and the state
 * writes; *done is an event (the caller destroys it) recorded when the
 * new weights are in host memory. 0, -ENOMEM, or -EINVAL when the group
 * was already handed off in this iteration (the message in err). */
int hostopt_step(hostopt_t *h, uint64_t group, uint64_t iter, uint64_t params, unsigned wbytes, unsigned comp,
                 uintptr_t grad_addr, uint64_t grad_bytes, mt_handle_t *done, char *err, size_t errlen);
/* The weight bytes of the hand-off just made (for the per-step balance
 * of gradients in against weights updated). */
void hostopt_weights(hostopt_t *h, uint64_t bytes);
/* Ends iteration iter: counts it complete when every group seen so far
 * was handed off in it exactly once, and conserved when its state and
 * gradient traffic balance too (hostopt_totals_t). */
void hostopt_end_iteration(hostopt_t *h, uint64_t iter);
/* When the pool's last state write ends (0: none). */
uint64_t hostopt_end_ns(const hostopt_t *h);
void hostopt_totals(const hostopt_t *h, hostopt_totals_t *out);

#endif
