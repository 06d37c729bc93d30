/*
 * hostbudget.c - host memory of mtalloc's own inside MT_MAX_HOST.
 *
 * MT_MAX_HOST is one budget for every byte of host memory mtalloc holds:
 * the pager's host copies (pinned), the NVMe tier's staging buffers (taken
 * out at start, tier_nvme.c) and the host optimizer's masters and state
 * (optim/hostmem.c, through _mt_host_reserve here). A reservation takes
 * whole chunks out of the pager's host budget for the sum of every
 * reservation, after making the room the way an eviction would
 * (_mt_host_room, pager.c: retained host copies give way, host chunks
 * spill to NVMe). Slabs the pool pinned before a reservation stay pinned;
 * their free slots are reused and the pool grows no further
 * (physpool.c's check allows for it).
 *
 * Threading: any thread; under the pager lock.
 */
#include <errno.h>

#include "pager.h"
#include "pager_internal.h"

static int reserve(size_t bytes, bool quiet) {
  mt_pager_t *p = _mt_pager;
  if (p == NULL || bytes == 0) return 0;
  pthread_mutex_lock(&p->lock);
  /* An operation of its own, as an allocation is: the marks of the one
   * before (the last launch's read-ahead window among them, which stays
   * marked with the epoch) must not keep its room from spilling them. */
  p->epoch++;
  size_t total = p->host_reserved_bytes + bytes;
  size_t want = (total + p->chunk - 1) / p->chunk * p->chunk; /* whole chunks for the sum */
  size_t more = want - p->host_reserved;
  int rc = more > p->host_budget ? -ENOMEM : _mt_host_room(p, more, true);
  if (rc == 0) {
    p->host_budget -= more;
    p->host_reserved += more;
    p->host_reserved_bytes = total;
  } else if (!quiet) {
    mt_error("host memory budget MT_MAX_HOST: the host optimizer needs %zu more bytes for its masters and "
             "state, but only %zu of %zu are free (host copies hold %zu%s): raise MT_MAX_HOST, or use "
             "compressed optimizer state (MT_OPTIMIZER_COMPRESSION=8bit)", bytes,
             p->host_budget > p->host_used ? p->host_budget - p->host_used : 0, p->host_budget + p->host_reserved,
             p->host_used, p->nv != NULL && more <= p->host_budget ? ", and not enough of them could move to NVMe" : "");
  }
  pthread_mutex_unlock(&p->lock);
  return rc;
}

int _mt_host_reserve(size_t bytes) {
  return reserve(bytes, false);
}

int _mt_host_try_reserve(size_t bytes) {
  return reserve(bytes, true);
}

void _mt_host_unreserve(size_t bytes) {
  mt_pager_t *p = _mt_pager;
  if (p == NULL || bytes == 0) return;
  pthread_mutex_lock(&p->lock);
  mt_assert(bytes <= p->host_reserved_bytes);
  p->host_reserved_bytes -= bytes;
  size_t want = (p->host_reserved_bytes + p->chunk - 1) / p->chunk * p->chunk;
  p->host_budget += p->host_reserved - want;
  p->host_reserved = want;
  pthread_mutex_unlock(&p->lock);
}

int _mt_host_numa_node(void) {
  int node = (int)_mt_opt_int(MT_OPT_NUMA_NODE);
  if (node >= 0) return node;
  mt_pager_t *p = _mt_pager;
  return p != NULL ? p->dev->info.host_numa_node : -1;
}
