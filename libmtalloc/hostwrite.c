/*
 * hostwrite.c - new bytes for a region written into its host copies, the
 * device copies dropped stale (_mt_host_write, pager.h): the host
 * optimizer's write-back of new weights (optim/devparam.c).
 *
 * Concept. The optimizer holds the new weights in host memory; copying
 * them to the device and later evicting them again would cross the link
 * twice. Instead each chunk the bytes cover ends HOST with the new bytes
 * in its host copy: a DEVICE chunk is dropped without a copy (after its
 * other bytes are saved when the write covers it only in part and no host
 * copy holds them), an NVME chunk is read back only when written in part.
 * The next use fetches the new bytes, and the chunk, clean, is evicted
 * again for free.
 *
 * Threading: takes the pager lock.
 */
#include <errno.h>
#include <string.h>

#include "pager.h"
#include "pager_internal.h"
#include "trace.h"

/* Moves DEVICE chunk c to HOST without a copy: its host copy (which the
 * caller has or is about to fill) becomes its only copy. The caller has
 * waited for the work using it. */
static int chunk_device_drop(mt_pager_t *p, mt_chunk_t *c) {
  int rc = _mt_unmap_fence(p);
  if (rc < 0) return rc;
  uintptr_t va = _mt_chunk_va(p, c);
  p->pol_ops->remove(p->pol, &c->node);
  p->dev->ops->unmap(p->dev, va, p->chunk);
  p->used -= p->chunk;
  _mt_pool_dev_put(p, c->dev);
  c->dev = 0;
  _mt_wb_cancel(p, c); /* off the device: out of the write-behind stock (as an eviction) */
  _mt_retained_unlink(c);
  if (!c->dirty) c->region->nclean--;
  if (c->pf) c->region->npf--;
  c->pf = false;
  c->region->ndevice--;
  if (p->host_mapped && (rc = p->dev->ops->map(p->dev, va, p->chunk, c->host, c->host_off)) == 0)
    rc = p->dev->ops->set_access(p->dev, va, p->chunk);
  _mt_live_move(p, c, CH_DEVICE, CH_HOST, false);
  if (_mt_trace_on())
    _mt_trace_move(MT_TR_EVICT, c->region->id, c->index, MT_TIER_GPU, MT_TIER_HOST, false, false, _mt_chunk_data(p, c));
  c->state = CH_HOST;
  c->dirty = false;
  _mt_host_tier_in(p, c);
  _mt_resident_changed(p);
  return rc < 0 ? rc : 0;
}

/* Copies n bytes from src (any host memory) into c's host copy at off: a
 * memcpy where the CPU can reach the copy, else the copy engine. */
static int host_copy_in(mt_pager_t *p, mt_chunk_t *c, size_t off, const void *src, size_t n) {
  if (!p->host_mapped) {
    memcpy((void *)(c->host_addr + off), src, n);
    return 0;
  }
  return _mt_copy_wait(p, c->host_addr + off, (uintptr_t)src, n, p->d2h);
}

int _mt_host_write(uintptr_t addr, const void *src, size_t n) {
  mt_pager_t *p = _mt_pager_if_started();
  if (p == NULL || !_mt_in_range(p, addr)) return -ENOENT;
  if (n == 0) return 0;
  pthread_mutex_lock(&p->lock);
  uintptr_t base;
  size_t size;
  mt_region_t *r = _mt_rmap_find(p->rmap, addr, &base, &size);
  int rc = 0;
  if (r == NULL || addr + n > base + size) {
    rc = -EINVAL;
  } else if (_mt_capture_active(p)) {
    rc = -EBUSY; /* no waits or mapping changes during a capture */
  } else if (src != NULL && _mt_region_held(p, r, true)) {
    rc = -EIO;
  } else if (src == NULL && (r->kind == REG_SMALL || r->escaped)) {
    rc = 0; /* replay: a region that never leaves the device has no copy to drop */
  } else if (r->kind == REG_SMALL || r->escaped) {
    /* never leaves the device: write it there */
    rc = _mt_copy_wait(p, addr, (uintptr_t)src, n, p->h2d);
  } else {
    r->epoch = ++p->epoch; /* nothing of it is chosen to make room for it */
    size_t first = (addr - r->addr) / p->chunk, last = (addr + n - 1 - r->addr) / p->chunk;
    for (size_t i = first; i <= last && rc == 0; i++) {
      mt_chunk_t *c = &r->chunks[i];
      uintptr_t cs = r->addr + i * p->chunk;
      uintptr_t lo = addr > cs ? addr : cs;
      uintptr_t hi = addr + n < cs + _mt_chunk_data(p, c) ? addr + n : cs + _mt_chunk_data(p, c);
      bool whole = lo == cs && hi == cs + _mt_chunk_data(p, c);
      /* the chunk's current bytes into a host copy, unless all are replaced */
      if (c->state == CH_DEVICE) {
        _mt_wb_cleaned(p, c, true);
        _mt_wb_settle(p, c); /* no write-behind copy into the host slot under ours */
        bool current = c->host_addr != 0 && !c->dirty; /* its host copy holds its bytes */
        if (c->host_addr == 0 && (rc = _mt_host_get_ex(p, c, true)) < 0) break;
        if (!whole && !current) {
          if ((rc = _mt_copy_wait(p, c->host_addr, cs, p->chunk, p->d2h)) < 0) break;
          mt_stat_add(bytes_d2h, p->chunk);
        }
        if ((rc = chunk_device_drop(p, c)) < 0) break;
      } else if (c->state == CH_NONE || (c->state == CH_NVME && whole)) {
        if ((rc = _mt_host_get_ex(p, c, true)) < 0) break;
        if (p->host_mapped &&
            ((rc = p->dev->ops->map(p->dev, cs, p->chunk, c->host, c->host_off)) < 0 ||
             (rc = _mt_unmap_fence(p)) < 0 || (rc = p->dev->ops->set_access(p->dev, cs, p->chunk)) < 0)) {
          _mt_host_release(p, c);
          break;
        }
        if (c->nv != NULL) _mt_nv_drop(p, c);
        _mt_live_move(p, c, c->state, CH_HOST, true);
        c->state = CH_HOST;
        c->dirty = false;
        _mt_host_tier_in(p, c);
      } else if (c->state == CH_NVME) {
        if ((rc = _mt_chunk_host_back(p, c)) < 0) break; /* reads the rest back */
      }
      if (c->nv != NULL) _mt_nv_drop(p, c); /* the NVMe copy is stale now */
      if (src != NULL) rc = host_copy_in(p, c, lo - cs, (const uint8_t *)src + (lo - addr), hi - lo);
      if (rc == 0 && p->nv != NULL) {
        _mt_set_due(p, c);
        p->hpol_ops->touch(p->nv->hpol, &c->node);
      }
    }
    mt_stat_add(host_write_bytes, n);
    _mt_check_region(p, r);
  }
  _mt_pool_check(p);
  pthread_mutex_unlock(&p->lock);
  return rc;
}

