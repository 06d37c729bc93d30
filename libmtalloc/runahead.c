/*
 * runahead.c - with the handoff on, the host stays at most MT_RUNAHEAD
 * launches ahead of the GPU.
 *
 * Concept. Each launch's residency, evictions, prefetches and reads ahead
 * are decided when the host prepares it, for the state the pager expects
 * when it runs. With the handoff on (handoff.c) the host no longer waits
 * for a freed buffer's kernel, so nothing holds it back: on the virtual
 * clock it ran seconds ahead of the GPU, and the pager's decisions were
 * made for launches far from the ones the GPU was running. Evictions then
 * took chunks the GPU was about to need, and the drive and the link were
 * busy with data for much later. A real driver bounds the run-ahead too
 * (its launch queue), but by thousands of launches.
 *
 * So, while the handoff is on, an event is recorded after each launch on
 * its stream, kept in a ring, and before the next launch is prepared the
 * host waits for the oldest while the ring holds MT_RUNAHEAD of them.
 * Measured on G10's workloads (second iteration, README): ResNet152 95.35
 * -> 98.24% of ideal (G10: 98.4), SENet154 93.49 -> 95.14%, Inception
 * 95.64 -> 96.09%; BERT and ViT, whose handoff stays off, unchanged. With
 * the bound always on, BERT lost 3.8 points and ViT 9.3: where the host
 * waits for the GPU anyway, bounding it further only empties the queue.
 *
 * The ring is kept while the handoff may turn on (on, or auto with an NVMe
 * tier or while auto's timed choice has it on), so that the bound holds
 * from the first launch it is on (Inception 95.64 -> 96.09% with that,
 * unchanged with a ring started empty each time auto turns it on); while
 * it is off the oldest events go back to the pool unwaited. Where auto
 * has neither (no NVMe tier, and the timed choice off): no event is
 * recorded. During a stream capture no event may be recorded or waited
 * for (graph.c): the bound pauses.
 *
 * Waiting for room (_mt_runahead_yield, from prefetch.c). A prefetch takes
 * room only from chunks no queued launch holds. With the host ahead, the
 * launches queued hold most of the GPU, so the prefetches for the ones
 * after them find no room; the GPU then frees it kernel by kernel while the
 * link idles, and the launch that needs the data fetches it on demand once
 * the kernels before it have ended. Inception's last backward layers: the
 * h2d link idle for 3.2 s behind two 0.7 s kernels, then 1.6 s of stall an
 * iteration for 8.5 GB activations. So when a prefetch finds no room, the
 * host waits for the oldest queued launch and looks again, while more than
 * a quarter of MT_RUNAHEAD launches stay queued: the GPU has work while the
 * host waits, and the room comes to the prefetch as the GPU frees it.
 * Measured on G10's traces, six iterations (docs/eviction.md): Inception
 * 96.5-97.0 -> 98.1-99.2% of ideal from the second iteration, the others
 * unchanged; a floor of half the bound (12) lost the gain, 4 to 8 kept it.
 * prefetch.c does not ask for a region with chunks on NVMe while reads
 * ahead are in flight: the drive binds there, and the waits held the
 * host, and the reads it issues, back (ResNet152 98.3 -> 96.5% when it
 * asked for every region). A region all in host memory asks (ResNet152
 * 98.24 -> 98.49%, twentieth session), unless MT_PREFETCH_FREE=0.
 *
 * MT_PREFETCH_WAIT=off (replay --prefetch-wait off) turns these waits off.
 *
 * Counters: runahead_waits (waits that found the oldest launch still
 * running), runahead_wait_ns; prefetch_waits, prefetch_wait_ns (the same
 * for room).
 *
 * Threading: under the pager lock.
 */
#include <time.h>

#include "pager_internal.h"

/* The handoff is on, or may turn on (auto with an NVMe tier, or auto's
 * timed choice has it on): the ring is kept, so that the bound holds from
 * the first launch the handoff is on. */
static bool may_bound(mt_pager_t *p) {
  return p->runahead > 0 && (p->handoff == 1 || (p->handoff == 0 && (p->nv != NULL || p->ho_trial_on))) &&
         !_mt_capture_active(p);
}

/* Gives the oldest event back to the pool, without a wait. */
static void drop_oldest(mt_pager_t *p) {
  _mt_event_put(p, p->run_ring[p->run_head]);
  p->run_head = (p->run_head + 1) % MT_RUNAHEAD_MAX;
  p->run_n--;
}

/* Waits for the oldest launch in the ring unless it has ended, counted as
 * a run-ahead wait or (room) a prefetch's; then gives its event back. 0, or
 * the driver's error (the event is kept). */
static int wait_oldest(mt_pager_t *p, bool room) {
  mt_handle_t e = p->run_ring[p->run_head];
  int rc = p->dev->ops->event_query(p->dev, e);
  if (rc == 0) {
    uint64_t t0 = _mt_now_ns();
    rc = p->dev->ops->event_sync(p->dev, e);
    if (room) {
      mt_stat_add(prefetch_waits, 1);
      mt_stat_add(prefetch_wait_ns, _mt_now_ns() - t0);
    } else {
      mt_stat_add(runahead_waits, 1);
      mt_stat_add(runahead_wait_ns, _mt_now_ns() - t0);
    }
  }
  if (rc < 0) return rc;
  drop_oldest(p);
  return 0;
}

int _mt_runahead_wait(mt_pager_t *p) {
  if (p->run_n == 0 || !may_bound(p)) return 0;
  bool on = _mt_handoff_on(p);
  while (p->run_n >= p->runahead) {
    if (!on) { /* only the newest matter when the handoff turns on */
      drop_oldest(p);
      continue;
    }
    int rc = wait_oldest(p, false);
    if (rc < 0) return rc; /* the driver's error (logged): the launch reports it */
  }
  return 0;
}

void _mt_runahead_record(mt_pager_t *p) {
  if (!may_bound(p) || p->run_n >= MT_RUNAHEAD_MAX) return;
  /* the launch's stream (launch.c looked it up), not another thread's
   * per-thread stream, nor a retired one */
  mt_handle_t h;
  if (!_mt_stream_recordable(p, p->op_si, &h)) return;
  mt_handle_t e = _mt_event_get(p);
  if (e == 0) return;
  if (p->dev->ops->event_record(p->dev, e, h) < 0) {
    _mt_event_put(p, e);
    return; /* unbounded this once: a later launch's event covers it */
  }
  p->run_ring[(p->run_head + p->run_n) % MT_RUNAHEAD_MAX] = e;
  p->run_n++;
}

bool _mt_runahead_yield(mt_pager_t *p) {
  const unsigned floor = p->runahead / 4 > 0 ? p->runahead / 4 : 1;
  if (p->run_n <= floor || !may_bound(p) || !_mt_handoff_on(p)) return false;
  return wait_oldest(p, true) == 0; /* an error (logged): the launch's own fetch reports it */
}
