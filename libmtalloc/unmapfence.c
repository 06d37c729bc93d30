/*
 * unmapfence.c - no cuMemUnmap while a copy the pager issued is in flight.
 *
 * The driver documents cuMemUnmap as a call that may synchronise: it may
 * wait for the device's outstanding work (cuda.h marks it, and
 * cuMemSetAccess, with \note_sync; cuMemCreate, cuMemRelease and cuMemMap
 * carry no such note). The same fence comes before cuMemSetAccess. The pager unmaps on the launch
 * path (an eviction frees device memory for a fetch; a fetch replaces a
 * chunk's host mapping with device memory), and fetch copies of earlier
 * operations are often still running on the h2d stream then: the
 * application's streams wait for them with events, the host does not. An
 * unmap at that moment may stall the host until they finish, unseen.
 *
 * The unmap cannot be put off instead. An evicted chunk's device memory is
 * unmapped because the fetch being prepared needs it now (the budget
 * counts it until it is unmapped); a fetched chunk's address must drop its
 * host mapping before device memory can be mapped there, since an address
 * is mapped once. So the unmap is ordered after the copies, at the least
 * cost: a flag says whether any fetch copy was issued since the host last
 * knew the h2d stream idle (none: no driver call at all); an event already
 * recorded after the last copy (the fetch fence's) is reused; one
 * non-blocking query tells whether the copies are done; only when they are
 * not does the host wait, for exactly them, counted in `unmap_waits` and
 * `unmap_wait_ns`. Such a wait takes the place of the one a synchronising
 * cuMemUnmap would have made, and no longer (the driver's may also wait for
 * kernels). Whether the real driver's unmap waits at all is what the GPU
 * check's move benchmark reports (tools/gpu/move_bench.cu, `unmap_waits`).
 *
 * Eviction copies (d2h) need nothing here: make_room waits for each batch
 * before it unmaps. Deferred fetch copies (pager.c, not yet issued) are not
 * in flight either: an operation's own copies follow all its mapping
 * changes. During a stream capture no event may be queried or waited for
 * (graph.c): the unmap goes ahead unordered, as before.
 *
 * Threading: under p->lock, like the rest of the pager.
 */
#include <time.h>

#include "pager_internal.h"

void _mt_h2d_issued(mt_pager_t *p) {
  p->h2d_unsynced = true;
  p->h2d_mark = 0; /* no event covers the new copies yet */
}

void _mt_h2d_marked(mt_pager_t *p, mt_handle_t e) {
  if (p->h2d_unsynced) p->h2d_mark = e;
}

int _mt_h2d_drain(mt_pager_t *p, bool count) {
  if (!p->h2d_unsynced) return 0;
  int rc;
  if (p->h2d_mark == 0) {
    if ((rc = p->dev->ops->event_record(p->dev, p->ev_h2d, p->h2d)) < 0) return rc;
    p->h2d_mark = p->ev_h2d;
  }
  rc = p->dev->ops->event_query(p->dev, p->h2d_mark);
  if (rc < 0) return rc;
  if (rc == 0) {
    uint64_t t0 = _mt_now_ns();
    if ((rc = p->dev->ops->event_sync(p->dev, p->h2d_mark)) < 0) return rc;
    if (count) {
      mt_stat_add(unmap_waits, 1);
      mt_stat_add(unmap_wait_ns, _mt_now_ns() - t0);
    }
    rc = 1;
  }
  p->h2d_unsynced = false;
  p->h2d_mark = 0;
  return rc;
}

bool _mt_h2d_idle(mt_pager_t *p) {
  if (p->ndefer > 0) return false;
  if (!p->h2d_unsynced) return true;
  if (p->h2d_mark == 0) {
    if (p->dev->ops->event_record(p->dev, p->ev_h2d, p->h2d) < 0) return false;
    p->h2d_mark = p->ev_h2d;
  }
  if (p->dev->ops->event_query(p->dev, p->h2d_mark) != 1) return false;
  p->h2d_unsynced = false;
  p->h2d_mark = 0;
  return true;
}

int _mt_unmap_fence(mt_pager_t *p) {
  /* A device whose unmaps never wait (replay's --unmap-sync off) needs no
   * order: the unmap cannot stall behind the copies. */
  if (!p->dev->info.unmap_syncs || !p->h2d_unsynced || _mt_capture_active(p)) return 0;
  int rc = _mt_h2d_drain(p, true);
  return rc < 0 ? rc : 0;
}
