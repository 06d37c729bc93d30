/*
 * handoff.c - device memory of freed regions, reused in stream order.
 *
 * A framework frees a tensor as soon as its last kernel is queued, long
 * before that kernel runs. Its device memory is the obvious room for the
 * next tensor, but the pager could only take it once the kernel had run:
 * wait on the host (the GPU's queue drains, the next fetches start late),
 * or evict live data instead (a copy out now, a fetch back later). The
 * second is what it did for a whole launch footprint, and it moved 4-5x
 * the Belady bound on the G10 workloads (BERT: 159 GB against 34).
 *
 * A caching allocator (PyTorch's) reuses such memory at once for work on
 * the same stream, since stream order puts the new kernel after the old
 * one. The pager does the same with physical memory: the freed region's
 * chunks keep their mapping (the old kernel may still be reading them)
 * while their handles are mapped again at the new region's addresses (one
 * handle may be mapped at two addresses; the driver frees memory only when
 * both are gone). Who may touch the handed memory, and when:
 *   - a kernel on the same stream as every pending use of the freed region
 *     (the launch being prepared is on it): after those uses, by stream
 *     order;
 *   - a fetch copy into it, on the pager's h2d stream: the h2d stream
 *     waits (cuStreamWaitEvent) for an event recorded on that stream at
 *     the handoff. That delays every later copy behind the application's
 *     queue, so fetches take pooled handles first, and fresh chunks (no
 *     copy, used by the launch itself) take the handed ones;
 *   - anyone else: only once that event has completed (the host waits for
 *     it, in the rare case that nothing else is left).
 * Handed handles are counted free (out of `used`), so the pool's
 * invariant used + pooled <= budget holds with them; the freed region's
 * chunks stay DEVICE with no handle (`handed`) until the region is
 * destroyed, which unmaps their old addresses as before.
 *
 * Not handed: chunks a write-behind copy may still read (their host copy
 * is being written from them), regions with holds on more than one stream
 * or on a per-thread stream, anything during a graph capture.
 *
 * Threading: under the pager lock.
 */
#include <errno.h>
#include <stdlib.h>

#include "pager_internal.h"

/* r can be handed to work on stream si: every hold not known complete is
 * on si (and there is one: else it would have been reaped). */
static bool handable(mt_pager_t *p, mt_region_t *r, uint32_t si) {
  if (r->kind == REG_SMALL || r->escaped || r->hostuse || r->ndevice == 0) return false;
  bool pending = false;
  for (unsigned i = 0; i < r->nholds; i++) {
    if (r->holds[i].stream == si) {
      pending = true;
      continue;
    }
    if (_mt_hold_done(p, &r->holds[i], false) != 1) return false;
  }
  return pending;
}

/* MT_HANDOFF=auto: on while chunks live on NVMe, and, while the read-ahead
 * runs (a predictor), from the first time host memory is full, or a chunk
 * goes to NVMe, on.
 * Where the link has room, evicting live data instead of waiting for the
 * old kernel measured faster (BERT 98.0% against 93.3% of ideal, the
 * README's prefetch table); where evictions go to the drives every byte
 * counts (ResNet-152: 75.3% against 74.7%, 67 GB less NVMe traffic).
 * Staying on once host memory was full, rather than only while NVMe holds
 * chunks, took SENet154 from 93.17 to 93.49% (G10: 93.4), the other G10
 * workloads unchanged; demand-paged it cost ResNet152 1.3 points and
 * SENet154 1.1 (every NVMe read is then a demand read), hence only with
 * the read-ahead. Also staying on once a chunk has gone to NVMe (the
 * host tier's spills ahead keep it from ever being full: Inception's
 * handoff was on only while NVMe held chunks) took Inception 96.09 ->
 * 97.19% with the run-ahead bound (runahead.c), the others unchanged. */
bool _mt_handoff_on(const mt_pager_t *p) {
  return p->handoff == 1 ||
         (p->handoff == 0 && (p->ho_trial_on || (p->handoff_fill && p->host_filled) || p->live[CH_NVME] > 0));
}

/* Elsewhere (MT_HANDOFF=auto, no NVMe or a host memory not full yet):
 * whichever ran one period faster, measured (predictor/trial.h), the
 * handoff kept on a tie. Where the link has room it costs time on some
 * workloads and not on others: on G10's six-iteration traces, ViT ran at
 * 79.3% of ideal with it on and 93.8% off, BERT at 100% both ways with
 * 5.4x fewer bytes on, and nothing in a launch stream tells them apart
 * before they run. Off must be faster by more than TRIAL_MARGIN_PCT:
 * the time of one period varies that little on a steady loop, and the
 * bytes saved are worth it. Needs the period: only with next-use
 * estimates (MT_POLICY=nextuse); without them auto is off here, as
 * before. The GPU times it: timing events on the launch's stream (the
 * virtual clock's event times in replay); the host's clock only where the
 * driver cannot time events (trial.h says why not the host's). */
#define TRIAL_MARGIN_PCT 2

void _mt_handoff_trial_open(mt_pager_t *p) {
  if (p->handoff != 0) return;
  _mt_trial_init(&p->ho_trial, TRIAL_MARGIN_PCT);
  p->ho_trial_runs = true;
  p->ho_trial_on = true; /* from the first launch: nothing to drain before its timing */
}

/* Records the time in trial slot m before the launch being prepared: an
 * event on its stream (the GPU's time once the work before it is done),
 * or the host's time where the device cannot time events. */
static void trial_mark(mt_pager_t *p, int m) {
  const mt_device_ops_t *o = p->dev->ops;
  p->ho_mark_ns[m] = _mt_now_ns();
  p->ho_mark_bad[m] = false;
  if (p->ho_host_timed) return;
  if (p->ho_marks[m] == 0 && (o->timer_create == NULL || o->timer_create(p->dev, &p->ho_marks[m]) < 0)) {
    p->ho_marks[m] = 0;
    p->ho_host_timed = true; /* from now on; the slots have host times too */
    return;
  }
  mt_handle_t h;
  if (!_mt_stream_recordable(p, p->op_si, &h) || o->event_record(p->dev, p->ho_marks[m], h) < 0)
    p->ho_mark_bad[m] = true; /* decided for the handoff, below */
}

/* AWAIT: both windows' times, once the last slot's event has completed. */
static void trial_resolve(mt_pager_t *p) {
  const mt_device_ops_t *o = p->dev->ops;
  const mt_trial_t *t = &p->ho_trial;
  uint64_t a = p->ho_mark_ns[t->a_to] - p->ho_mark_ns[t->a_from];
  uint64_t b = p->ho_mark_ns[t->b_to] - p->ho_mark_ns[t->b_from];
  if (p->ho_mark_bad[t->a_from] || p->ho_mark_bad[t->a_to] || p->ho_mark_bad[t->b_from] || p->ho_mark_bad[t->b_to]) {
    mt_info("MT_HANDOFF=auto: a period could not be timed (no event on the launch's stream): the handoff "
            "stays on");
    b = a; /* a tie keeps it on */
  } else if (!p->ho_host_timed) {
    int rc = o->timer_elapsed(p->dev, p->ho_marks[t->b_from], p->ho_marks[t->b_to], &b);
    if (rc == -EAGAIN) return; /* the GPU is not there yet */
    if (rc == 0) rc = o->timer_elapsed(p->dev, p->ho_marks[t->a_from], p->ho_marks[t->a_to], &a);
    if (rc < 0) b = a; /* the driver's error, logged: keep it on */
  }
  _mt_trial_decide(&p->ho_trial, a, b);
}

void _mt_handoff_tick(mt_pager_t *p, uint64_t period, uint64_t id) {
  if (!p->ho_trial_runs || _mt_capture_active(p)) return;
  int slot;
  unsigned before = p->ho_trial.decisions;
  mt_trial_arm_t arm = _mt_trial_tick(&p->ho_trial, p->clock, period, id, &slot);
  if (slot >= 0) trial_mark(p, slot);
  if (p->ho_trial.stage == MT_TRIAL_AWAIT) {
    trial_resolve(p);
    if (p->ho_trial.stage == MT_TRIAL_DECIDED) arm = p->ho_trial.pick;
  }
  p->ho_trial_on = arm == MT_TRIAL_A;
  if (p->ho_trial.decisions == before) return;
  mt_stat_add(handoff_decisions, 1);
  if (!p->ho_trial_on) mt_stat_add(handoff_decided_off, 1);
  if (p->ho_trial.irregular) {
    mt_info("MT_HANDOFF=auto: in %u windows of %llu launches none ran the same launches as the one before "
            "it: the handoff stays on, untimed", MT_TRIAL_MAX_WINDOWS, (unsigned long long)p->ho_trial.period);
    return;
  }
  mt_info("MT_HANDOFF=auto: a period of %llu launches took %.6g s with the handoff on and %.6g s off (%s): "
          "%s", (unsigned long long)p->ho_trial.period, (double)p->ho_trial.a_ns / 1e9,
          (double)p->ho_trial.b_ns / 1e9, p->ho_host_timed ? "host clock" : "GPU time",
          p->ho_trial_on ? "on (fewer bytes)" : "off (faster)");
}

static int handed_push(mt_physpool_t *pl, mt_handle_t h) {
  if (pl->nhanded == pl->cap_handed) {
    size_t cap = pl->cap_handed ? pl->cap_handed * 2 : 64;
    mt_handle_t *n = realloc(pl->handed, cap * sizeof(*n));
    if (n == NULL) return -ENOMEM;
    pl->handed = n;
    pl->cap_handed = cap;
  }
  pl->handed[pl->nhanded++] = h;
  return 0;
}

size_t _mt_handoff(mt_pager_t *p, size_t need) {
  mt_physpool_t *pl = &p->pool;
  mt_handle_t s;
  if (!_mt_handoff_on(p) || p->used + need <= p->budget || p->pending == NULL || p->op_si == 0 || p->op_fresh == 0 ||
      _mt_capture_active(p) ||
      !_mt_stream_recordable(p, p->op_si, &s))
    return 0;
  /* one stream's handles at a time: another's are settled first */
  if (pl->nhanded > 0 && pl->handed_si != p->op_si) _mt_handoff_settle(p);
  if (pl->nhanded > 0 && pl->handed_si != p->op_si) return 0;
  mt_region_t *first = p->pending;
  while (first != NULL && !handable(p, first, p->op_si)) first = first->next_pending;
  if (first == NULL) return 0;
  /* An event after every use so far on the stream, before any memory
   * changes hands: on failure nothing has. */
  mt_handle_t ev = _mt_event_get(p);
  if (ev == 0) return 0;
  if (p->dev->ops->event_record(p->dev, ev, s) < 0) {
    _mt_event_put(p, ev);
    return 0;
  }
  /* only as much as the launch's never-touched chunks take: a fetch into
   * handed memory would wait for the application's queue (see above) */
  size_t over = p->used + need - p->budget, got = 0;
  if (over > p->op_fresh) over = p->op_fresh;
  for (mt_region_t *r = first; r != NULL && got < over; r = r->next_pending) {
    if (!handable(p, r, p->op_si)) continue;
    for (uint32_t i = 0; i < r->nchunks && got < over; i++) {
      mt_chunk_t *c = &r->chunks[i];
      if (c->state != CH_DEVICE || c->handed || c->wb_batch != 0 || c->clean_batch != 0) continue;
      if (handed_push(pl, c->dev) < 0) break;
      p->pol_ops->remove(p->pol, &c->node);
      c->dev = 0;
      c->handed = true;
      r->nhanded++;
      p->used -= p->chunk;
      got += p->chunk;
    }
  }
  if (pl->handed_ev != 0) _mt_event_put(p, pl->handed_ev);
  pl->handed_ev = ev; /* the newest covers the older ones: same stream */
  pl->handed_si = p->op_si;
  pl->handed_h2d = false;
  p->op_fresh -= got;
  mt_stat_add(handoffs, got / p->chunk);
  _mt_resident_changed(p);
  return got;
}

int _mt_handoff_take(mt_pager_t *p, bool via_h2d, mt_handle_t *h) {
  mt_physpool_t *pl = &p->pool;
  if (pl->nhanded == 0) return 0;
  if (!via_h2d) {
    if (p->op_si != pl->handed_si) return 0; /* not ordered: the pool decides */
  } else {
    /* A fetch copy: the h2d stream must wait for the event, and then every
     * later copy on it does too, behind the application's queue. So a
     * pooled handle first; a handed one only when none is left. */
    if (pl->ndev_free > 0) return 0;
    if (!pl->handed_h2d) {
      if (_mt_capture_active(p) || p->dev->ops->stream_wait(p->dev, p->h2d, pl->handed_ev) < 0) return 0;
      pl->handed_h2d = true;
    }
  }
  *h = pl->handed[--pl->nhanded];
  return 1;
}

void _mt_handoff_settle(mt_pager_t *p) {
  mt_physpool_t *pl = &p->pool;
  if (pl->nhanded == 0) return;
  if (_mt_capture_active(p)) return; /* no waits now: the pool creates instead, budget permitting */
  if (pl->handed_ev != 0 && p->dev->ops->event_sync(p->dev, pl->handed_ev) < 0) return;
  while (pl->nhanded > 0) {
    mt_handle_t h = pl->handed[--pl->nhanded];
    _mt_pool_dev_put(p, h);
  }
  if (pl->handed_ev != 0) _mt_event_put(p, pl->handed_ev);
  pl->handed_ev = 0;
  pl->handed_si = 0;
}
