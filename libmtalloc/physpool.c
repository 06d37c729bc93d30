/*
 * physpool.c - pools of physical memory for chunk moves.
 *
 * Concept: a chunk move used to create physical memory, map it, and release
 * it when the chunk left (cuMemCreate / cuMemRelease per move). Physical
 * allocation is a slow driver call -- it takes locks, may clear pages, may
 * synchronise -- so moves could not run at link speed. Here physical
 * memory is made once and reused:
 *   device  one handle per chunk (each chunk maps on its own); a handle an
 *           evicted or freed chunk gave back waits on a free list for the
 *           next fetch. Created on demand, so the pool never holds more
 *           than the budget's high-water mark.
 *   host    host copies are slots of slabs of up to HOST_SLAB_MAX chunks:
 *           with host mappings one host-located handle per slot, each mapped
 *           into the pager's window (a slot is its handle and its address in
 *           the window, and a HOST chunk maps the handle at the chunk's own
 *           address: cuMemMap's offset "currently must be zero", cuda.h, so
 *           a slot cannot be a slice of a larger handle); without, one
 *           cuMemHostAlloc buffer per slab. Slots are private to one chunk:
 *           never shared, as writes through two chunks would alias.
 *
 * Invariants: device: used + (handles on the free list and handed, see
 * handoff.c) * chunk <= budget,
 * so the driver never holds more device memory for mtalloc than
 * MT_MAX_VRAM (a handle that would break it, after the budget shrank, is
 * released instead of kept); host: the slabs total at most MT_MAX_HOST
 * (host_slabbed <= host_budget / chunk), host_used counts slots in use.
 * Slabs are never given back (the host budget is what mtalloc may pin).
 *
 * Threading: under the pager lock, like the rest of the pager.
 */
#include <errno.h>
#include <stdlib.h>

#include "pager_internal.h"

#define HOST_SLAB_MAX 32 /* chunks per host slab: 64 MiB of 2 MiB chunks */

int _mt_pool_init(mt_pager_t *p) {
  size_t host_chunks = p->host_budget / p->chunk;
  /* Slabs of 1/16 of the host budget at most: a small budget is not
   * pinned all at once by the first eviction. */
  size_t n = host_chunks / 16;
  p->pool.slab_chunks = n < 1 ? 1 : n > HOST_SLAB_MAX ? HOST_SLAB_MAX : n;
  return 0;
}

int _mt_pool_dev_get(mt_pager_t *p, mt_handle_t *h) {
  mt_physpool_t *pl = &p->pool;
  /* handed handles are counted free: used for someone not ordered after
   * their last uses only once those are done (handoff.c) */
  if (pl->ndev_free == 0 && pl->nhanded > 0) _mt_handoff_settle(p);
  if (pl->ndev_free > 0) {
    *h = pl->dev_free[--pl->ndev_free];
    return 0;
  }
  int rc = p->dev->ops->phys_create(p->dev, p->chunk, false, h);
  if (rc == 0) pl->dev_created++;
  return rc;
}

void _mt_pool_dev_put(mt_pager_t *p, mt_handle_t h) {
  mt_physpool_t *pl = &p->pool;
  if (p->used + (pl->ndev_free + 1) * p->chunk > p->budget) {
    p->dev->ops->phys_release(p->dev, h);
    pl->dev_created--;
    return;
  }
  if (pl->ndev_free == pl->cap_dev) {
    size_t cap = pl->cap_dev ? pl->cap_dev * 2 : 64;
    mt_handle_t *n = realloc(pl->dev_free, cap * sizeof(*n));
    if (n == NULL) {
      p->dev->ops->phys_release(p->dev, h);
      pl->dev_created--;
      return;
    }
    pl->dev_free = n;
    pl->cap_dev = cap;
  }
  pl->dev_free[pl->ndev_free++] = h;
}

void _mt_pool_dev_trim(mt_pager_t *p) {
  mt_physpool_t *pl = &p->pool;
  _mt_handoff_settle(p);
  while (pl->ndev_free > 0 && p->used + pl->ndev_free * p->chunk > p->budget) {
    p->dev->ops->phys_release(p->dev, pl->dev_free[--pl->ndev_free]);
    pl->dev_created--;
  }
}

/* One more slab of host copies, its slots on the free list. */
static int host_grow(mt_pager_t *p) {
  mt_physpool_t *pl = &p->pool;
  size_t limit = p->host_budget / p->chunk;
  size_t n = pl->slab_chunks;
  if (pl->host_slabbed + n > limit) n = limit - pl->host_slabbed;
  if (n == 0) return -ENOMEM;
  /* room for every slot there will be, so that giving one back never
   * needs memory */
  if (pl->host_slabbed + n > pl->cap_host) {
    size_t cap = pl->cap_host ? pl->cap_host : 64;
    while (cap < pl->host_slabbed + n) cap *= 2;
    mt_host_slot_t *ns = realloc(pl->host_free, cap * sizeof(*ns));
    if (ns == NULL) return -ENOMEM;
    pl->host_free = ns;
    pl->cap_host = cap;
  }
  size_t bytes = n * p->chunk;
  uintptr_t base;
  int rc;
  if (p->host_mapped) {
    if ((rc = _mt_va_alloc(&p->win, n, p->chunk, &base)) < 0) return rc;
    size_t made = 0;
    for (; made < n; made++) {
      mt_handle_t h;
      uintptr_t at = base + made * p->chunk;
      if ((rc = p->dev->ops->phys_create(p->dev, p->chunk, true, &h)) < 0) break;
      if ((rc = p->dev->ops->map(p->dev, at, p->chunk, h, 0)) < 0) {
        p->dev->ops->phys_release(p->dev, h);
        break;
      }
      /* the handle stays referenced by its window mapping; the slot names it */
      pl->host_free[pl->nhost_free + made] = (mt_host_slot_t){h, 0, at};
    }
    if (rc == 0) rc = p->dev->ops->set_access(p->dev, base, bytes);
    if (rc < 0) {
      for (size_t i = 0; i < made; i++) {
        const mt_host_slot_t *sl = &pl->host_free[pl->nhost_free + i];
        p->dev->ops->unmap(p->dev, sl->addr, p->chunk);
        p->dev->ops->phys_release(p->dev, sl->h);
      }
      _mt_va_free(&p->win, base, n, p->chunk);
      return rc;
    }
    /* handed out in address order, as below */
    for (size_t i = 0, j = n - 1; i < j; i++, j--) {
      mt_host_slot_t t = pl->host_free[pl->nhost_free + i];
      pl->host_free[pl->nhost_free + i] = pl->host_free[pl->nhost_free + j];
      pl->host_free[pl->nhost_free + j] = t;
    }
    pl->nhost_free += n;
  } else {
    void *hp;
    if ((rc = p->dev->ops->host_alloc(p->dev, bytes, &hp)) < 0) return rc;
    base = (uintptr_t)hp;
    /* pushed in reverse so that slots are handed out in address order: the
     * host copies of a region's consecutive chunks tend to be adjacent */
    for (size_t i = n; i-- > 0;)
      pl->host_free[pl->nhost_free++] = (mt_host_slot_t){0, i * p->chunk, base + i * p->chunk};
  }
  pl->host_slabbed += n;
  pl->host_slabs++;
  return 0;
}

int _mt_pool_host_get(mt_pager_t *p, mt_host_slot_t *out) {
  mt_physpool_t *pl = &p->pool;
  if (pl->nhost_free == 0) {
    int rc = host_grow(p);
    if (rc < 0) return rc;
  }
  *out = pl->host_free[--pl->nhost_free];
  return 0;
}

void _mt_pool_host_put(mt_pager_t *p, const mt_host_slot_t *s) {
  mt_physpool_t *pl = &p->pool;
  /* room for every slot of every slab was made when the slab was added */
  mt_assert(pl->nhost_free < pl->host_slabbed && pl->host_slabbed <= pl->cap_host);
  pl->host_free[pl->nhost_free++] = *s;
}

void _mt_pool_check(const mt_pager_t *p) {
#if MT_CHECK_INVARIANTS
  const mt_physpool_t *pl = &p->pool;
  mt_assert(p->used + (pl->ndev_free + pl->nhanded) * p->chunk <= p->budget || pl->ndev_free + pl->nhanded == 0);
  /* slabs pinned before a reservation (_mt_host_reserve) stay: their free
   * slots may exceed the budget left, never the budget first given */
  mt_assert(pl->host_slabbed * p->chunk <= p->host_budget + p->host_reserved);
  mt_assert(pl->nhost_free <= pl->host_slabbed);
  mt_assert(p->host_used == (pl->host_slabbed - pl->nhost_free) * p->chunk);
  mt_assert(p->used <= p->budget);
#else
  (void)p;
#endif
}
