/*
 * hostopt.c - the host optimizer pool on replay's virtual clock.
 *
 * Concept. With MT_OPTIMIZER=host the GPU keeps only the weights: each
 * parameter group's gradients leave the GPU when final, a pool of host
 * threads updates the group (Adam on FP32 masters and the moments, which
 * live in host memory or, past state_mem, on NVMe) while backward goes on,
 * and the new weights land in the pager's host copies, where the next
 * forward fetches them. The pool is one resource: groups are updated one
 * after another, in hand-off order, on stream HOSTOPT_STREAM of the virtual
 * device, so the clock, the links and the drive see its work.
 *
 * A hand-off costs, in order on the pool's stream:
 *   1. the gradients' copy to the host, on the d2h link, after everything
 *      stream 0 issued so far (the backward kernels that finished them);
 *   2. the group's state bytes placed on NVMe are read from the drive (in
 *      the queue of the pager's NVMe transfers); the read may start once
 *      the pool has finished the group before the previous one (two groups
 *      of staging: a read-ahead of one), and the update waits for it;
 *   3. the update: params / rate, with
 *        rate = gparams_per_s * 1e9 * 28 / moved,
 *        moved = g + 2 * (4 + s) + (w == 4 ? 0 : w)   bytes per parameter,
 *      g = w the gradient's and weight's bytes, 4 the FP32 master, s the
 *      two moments: 8 (FP32), 2 + 8/128 (8-bit, a 4-byte scale per 128),
 *      1 + 8/128 (4-bit); read once and written once each, plus the
 *      16-bit weights written back. FP32 state with FP32 weights moves 28
 *      bytes per parameter, the reference: a host optimizer benchmarked at
 *      P G params/s moves 28 P GB/s, and compressed state is as fast as
 *      its bytes allow (memory-bound);
 *   4. the NVMe part of the state is written back (the drive's queue; the
 *      pool does not wait for it).
 * The update's end is an event; replay makes the host wait for it before a
 * launch that reads the group's weights, so the fetch of the new weights
 * is issued after they exist.
 *
 * State: the moments (s bytes per parameter), and an FP32 master (4 more)
 * when the weights are 16-bit; FP32 weights are their own master (the
 * pager's host copy of them, which the update rewrites: its bytes are the
 * pager's host memory, not the state's). Of the FP32 reference's 28 bytes,
 * then, the master's 8 are the weights' read and write.
 * State placement: groups take host memory in
 * the order they are first handed off until state_mem is used up; the rest
 * of a group, and every later group, lives on NVMe. Placement never
 * changes, so per step the pool reads and writes exactly the state it
 * keeps (hostopt_totals: state_read == state_written, the conservation
 * replay checks), and every gradient reaches it once per iteration.
 *
 * Threading: none; replay is single-threaded.
 */
#include "hostopt.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device_virtual.h"

typedef struct group {
  uint64_t id;
  uint64_t last_iter;         /* iteration of the last hand-off + 1; 0: none */
  uint64_t ram, nvme;         /* state bytes in host memory, on NVMe */
} group_t;

struct hostopt {
  mt_device_t *dev;
  hostopt_cfg_t cfg;
  void *host_buf;             /* the copy's host address (the virtual device keeps no bytes) */
  group_t *g;
  size_t ng, capg;
  uint64_t *slot;             /* group id -> index + 1 */
  size_t nslot;
  uint64_t state_used;        /* host memory given to state so far */
  uint64_t done_prev[2];      /* end of the last two updates */
  uint64_t last_write;        /* end of the last state write */
  hostopt_totals_t t;
  /* this iteration so far: state read, written, through NVMe; gradient
   * bytes in and weight bytes out */
  uint64_t it_read, it_written, it_nvme_read, it_nvme_written, it_grad, it_weights;
};

int hostopt_parse_name(const char *name, size_t len, unsigned *wbytes, unsigned *comp) {
  static const char prefix[] = "mt_host_optimizer";
  if (len < sizeof prefix - 1 || memcmp(name, prefix, sizeof prefix - 1) != 0) return 0;
  char buf[96];
  if (len >= sizeof buf) return -EINVAL;
  memcpy(buf, name, len);
  buf[len] = '\0';
  unsigned w;
  char st[16];
  if (sscanf(buf, "mt_host_optimizer w=%u state=%15s", &w, st) != 2 || (w != 2 && w != 4)) return -EINVAL;
  if (strcmp(st, "none") == 0) *comp = 0;
  else if (strcmp(st, "8bit") == 0) *comp = 1;
  else if (strcmp(st, "4bit") == 0) *comp = 2;
  else return -EINVAL;
  *wbytes = w;
  return 1;
}

static double moments_per_param(unsigned comp) {
  return comp == 0 ? 8.0 : comp == 1 ? 2.0 + 8.0 / 128 : 1.0 + 8.0 / 128;
}

/* FP32 weights are their own master: the pager's host copy, which the
 * pool updates in place; 16-bit weights have a separate FP32 master. */
double hostopt_state_per_param(unsigned wbytes, unsigned comp) {
  return (wbytes == 4 ? 0.0 : 4.0) + moments_per_param(comp);
}

double hostopt_moved_per_param(unsigned wbytes, unsigned comp) {
  return (double)wbytes + 2.0 * (4.0 + moments_per_param(comp)) + (wbytes == 4 ? 0.0 : (double)wbytes);
}

hostopt_t *hostopt_new(mt_device_t *dev, const hostopt_cfg_t *cfg) {
  hostopt_t *h = calloc(1, sizeof *h);
  if (h == NULL) return NULL;
  h->dev = dev;
  h->cfg = *cfg;
  if (!(h->cfg.gparams_per_s > 0)) h->cfg.gparams_per_s = 10;
  if (dev->ops->host_alloc(dev, 4096, &h->host_buf) < 0) {
    free(h);
    return NULL;
  }
  return h;
}

void hostopt_free(hostopt_t *h) {
  if (h == NULL) return;
  free(h->g);
  free(h->slot);
  free(h);
}

static group_t *group_get(hostopt_t *h, uint64_t id, uint64_t state_bytes) {
  if (id >= h->nslot) {
    size_t n = h->nslot ? h->nslot : 1024;
    while (n <= id) n *= 2;
    uint64_t *s = realloc(h->slot, n * sizeof *s);
    if (s == NULL) return NULL;
    memset(s + h->nslot, 0, (n - h->nslot) * sizeof *s);
    h->slot = s;
    h->nslot = n;
  }
  if (h->slot[id]) return &h->g[h->slot[id] - 1];
  if (h->ng == h->capg) {
    size_t n = h->capg ? h->capg * 2 : 256;
    group_t *g = realloc(h->g, n * sizeof *g);
    if (g == NULL) return NULL;
    h->g = g;
    h->capg = n;
  }
  group_t *g = &h->g[h->ng++];
  uint64_t room = h->cfg.state_mem > h->state_used ? h->cfg.state_mem - h->state_used : 0;
  *g = (group_t){.id = id, .ram = state_bytes < room ? state_bytes : room};
  g->nvme = state_bytes - g->ram;
  h->state_used += g->ram;
  h->slot[id] = h->ng;
  h->t.groups++;
  h->t.state_bytes += state_bytes;
  h->t.state_nvme_bytes += g->nvme;
  return g;
}

int hostopt_step(hostopt_t *h, uint64_t group, uint64_t iter, uint64_t params, unsigned wbytes, unsigned comp,
                 uintptr_t grad_addr, uint64_t grad_bytes, mt_handle_t *done, char *err, size_t errlen) {
  mt_device_t *d = h->dev;
  const mt_device_ops_t *o = d->ops;
  uint64_t state = (uint64_t)((double)params * hostopt_state_per_param(wbytes, comp) + 0.5);
  group_t *g = group_get(h, group, state);
  if (g == NULL) return -ENOMEM;
  if (g->last_iter == iter + 1) {
    snprintf(err, errlen, "parameter group %llu handed to the host optimizer twice in iteration %llu",
             (unsigned long long)group, (unsigned long long)iter);
    return -EINVAL;
  }
  g->last_iter = iter + 1;
  /* 1. the gradients leave after the kernels that finished them */
  mt_handle_t ev;
  int rc = o->event_create(d, &ev);
  if (rc < 0) return rc;
  if ((rc = o->event_record(d, ev, 0)) < 0 || (rc = o->stream_wait(d, HOSTOPT_STREAM, ev)) < 0 ||
      (rc = o->copy(d, (uintptr_t)h->host_buf, grad_addr, grad_bytes, HOSTOPT_STREAM)) < 0) {
    o->event_destroy(d, ev);
    return rc;
  }
  o->event_destroy(d, ev);
  /* 2. the state on NVMe, read ahead by one group */
  uint64_t ready = _mt_vdev_nvme_async(d, false, g->nvme, h->done_prev[0]);
  uint64_t at = _mt_vdev_stream_time(d, HOSTOPT_STREAM);
  if (ready > at) {
    h->t.nvme_wait_ns += ready - at;
    if ((rc = _mt_vdev_stream_wait_until(d, HOSTOPT_STREAM, ready)) < 0) return rc;
  }
  /* 3. the update */
  double rate = h->cfg.gparams_per_s * 1e9 * 28.0 / hostopt_moved_per_param(wbytes, comp);
  uint64_t dur = (uint64_t)((double)params / rate * 1e9 + 0.5);
  if ((rc = _mt_vdev_kernel(d, HOSTOPT_STREAM, dur)) < 0) return rc;
  if ((rc = o->event_create(d, done)) < 0) return rc;
  if ((rc = o->event_record(d, *done, HOSTOPT_STREAM)) < 0) {
    o->event_destroy(d, *done);
    return rc;
  }
  uint64_t end = _mt_vdev_stream_time(d, HOSTOPT_STREAM);
  h->done_prev[0] = h->done_prev[1];
  h->done_prev[1] = end;
  /* 4. the state on NVMe goes back */
  h->last_write = _mt_vdev_nvme_async(d, true, g->nvme, end);
  h->t.steps++;
  h->t.params += params;
  h->t.grad_bytes += grad_bytes;
  h->t.state_read += state;
  h->t.state_written += state;
  h->t.state_nvme_read += g->nvme;
  h->t.state_nvme_written += g->nvme;
  h->t.busy_ns += dur;
  h->it_read += state;
  h->it_written += state;
  h->it_nvme_read += g->nvme;
  h->it_nvme_written += g->nvme;
  h->it_grad += grad_bytes;
  return 0;
}

void hostopt_weights(hostopt_t *h, uint64_t bytes) { h->it_weights += bytes; }

void hostopt_end_iteration(hostopt_t *h, uint64_t iter) {
  bool complete = h->ng > 0;
  for (size_t i = 0; i < h->ng && complete; i++)
    if (h->g[i].last_iter != iter + 1) complete = false;
  if (complete) {
    h->t.groups_complete++;
    if (h->it_read == h->t.state_bytes && h->it_written == h->t.state_bytes &&
        h->it_nvme_read == h->t.state_nvme_bytes && h->it_nvme_written == h->t.state_nvme_bytes &&
        h->it_grad == h->it_weights)
      h->t.iters_conserved++;
  }
  h->it_read = h->it_written = h->it_nvme_read = h->it_nvme_written = h->it_grad = h->it_weights = 0;
}

uint64_t hostopt_end_ns(const hostopt_t *h) { return h->last_write; }

void hostopt_totals(const hostopt_t *h, hostopt_totals_t *out) { *out = h->t; }
