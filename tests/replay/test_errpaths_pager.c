/* Description: error paths and edges of the state machines beside the
 * pager, on the virtual clock (each found by review, each failed before
 * its fix):
 *  1. a host write (_mt_host_write) moves a chunk cleaned by write-behind
 *     off the device: it leaves the write-behind stock (hostwrite.c);
 *  2. a launch that fails after the handoff gave it memory still in use by
 *     earlier work on its stream: its footprint is held as if the kernel
 *     had been queued, so a free does not give that memory to another
 *     stream under the work (launch.c, failed_hold);
 *  3. an eviction batch whose second copy fails waits for the first before
 *     its victims go back (it synced an older batch's event: pager.c);
 *  4. a write-behind batch no event can be recorded for: the host slots
 *     its copies write never go back to the pool (writebehind.c);
 *  5. a launch that fails after fetching a chunk it writes: the fetch is
 *     ordered before the eviction that copies the chunk out (launch.c);
 *  6. during a stream capture (no event may be queried, the unmap fence is
 *     skipped), a chunk a prefetch may still be copying into is not
 *     evicted, so its memory never goes to a kernel under the copy. */
#include <criterion/criterion.h>
#include <errno.h>

#include "stats.h"
#include "vpager.h"

static void sync_stream(mt_device_t *d, mt_handle_t s) {
  mt_handle_t ev;
  cr_assert_eq(d->ops->event_create(d, &ev), 0);
  cr_assert_eq(d->ops->event_record(d, ev, s), 0);
  cr_assert_eq(d->ops->event_sync(d, ev), 0);
}

/* 1. A chunk cleaned by write-behind, then overwritten by the host
 * optimizer (_mt_host_write): it leaves DEVICE still wbclean and in the
 * stock. */
Test(errpaths_pager, hostwrite_keeps_wbclean) {
  memset(&_mt_stats, 0, sizeof(_mt_stats));
  mt_pager_config_t pc = {.budget = 16 * MiB, .host_budget = 64 * MiB, .chunk = 2 * MiB, .small_limit = 4096,
                          .policy = "lru", .predictor = "none", .handoff = 2};
  mt_device_t *d;
  mt_pager_t *p = vp_start(&pc, &d);
  uintptr_t a;
  cr_assert_eq(_mt_alloc(4 * MiB, &a), 0);
  vp_kern_t k = {d, 16, 1 * MS};
  bool w = true;
  vp_launch(p, &k, &a, &w, 1, 0);
  sync_stream(d, 16);
  pthread_mutex_lock(&p->lock);
  p->epoch++; /* a later operation */
  size_t got = _mt_write_behind(p, 4 * MiB, 0);
  cr_log_info("write-behind started %zu bytes, stock %zu", got, p->wb_stock);
  pthread_mutex_unlock(&p->lock);
  cr_assert_eq(got, 4 * MiB);
  /* the host optimizer writes the region's new bytes (replay form: src NULL) */
  int rc = _mt_host_write(a, NULL, 4 * MiB);
  mt_region_t *r = _mt_region_of(p, a);
  cr_log_info("host_write rc=%d; chunk0 state=%d wbclean=%d; wb_stock=%zu", rc, r->chunks[0].state,
              r->chunks[0].wbclean, p->wb_stock);
  cr_assert(!(r->chunks[0].state == CH_HOST && r->chunks[0].wbclean), "a HOST chunk is in the write-behind stock");
  cr_assert_eq(p->wb_stock, 0, "wb_stock %zu with no chunk on the device", p->wb_stock);
  vp_stop(p);
}

static int fail_fwd(void *ctx) {
  (void)ctx;
  return -EINVAL; /* cuLaunchKernel said no (bad config, ...) */
}

/* 2. The handoff gives a freed region's memory (still written by its
 * kernel on s1) to a fresh chunk of a launch on s1; the launch fails, so
 * the chunk gets no hold; the application frees it; the handle goes to
 * the pool with no ordering and a kernel on s2 writes it while the old
 * kernel on s1 still does. */
Test(errpaths_pager, handed_memory_escapes_after_failed_launch) {
  mt_pager_config_t pc = {.budget = 8 * MiB, .host_budget = 64 * MiB, .chunk = 2 * MiB, .small_limit = 4096,
                          .policy = "lru", .predictor = "none", .handoff = 1};
  mt_device_t *d;
  mt_pager_t *p = vp_start(&pc, &d);
  const mt_handle_t s1 = 16, s2 = 17;
  uintptr_t b, c, e;
  cr_assert_eq(_mt_alloc(8 * MiB, &b), 0);
  vp_kern_t kb = {d, s1, 100 * MS};
  bool w = true;
  vp_launch(p, &kb, &b, &w, 1, 0);
  uint64_t kb_end = _mt_vdev_stream_time(d, s1);
  cr_assert_eq(_mt_free(b, s1, true), 0); /* stream-ordered: pending behind the 100 ms kernel */
  cr_assert_not_null(p->pending);
  cr_assert_eq(_mt_alloc(2 * MiB, &c), 0);
  pthread_mutex_lock(&p->lock);
  int rc = _mt_launch_regions(p, &c, &w, 1, s1, 0, fail_fwd, NULL, "failing launch");
  mt_region_t *rc_ = _mt_region_of(p, c);
  mt_handle_t h = rc_->chunks[0].dev;
  cr_log_info("launch rc=%d, handoffs=%llu, C's chunk handle %#llx, C nholds=%u", rc,
              (unsigned long long)mt_stat_get(handoffs), (unsigned long long)h, rc_->nholds);
  pthread_mutex_unlock(&p->lock);
  cr_assert_lt(rc, 0);
  cr_assert_gt(mt_stat_get(handoffs), 0, "B's memory was handed to C");
  cr_assert_eq(_mt_free(c, 0, false), 0); /* cuMemFree: waits for C's holds (none) */
  cr_assert_eq(_mt_alloc(2 * MiB, &e), 0);
  vp_kern_t ke = {d, s2, 1 * MS};
  vp_launch(p, &ke, &e, &w, 1, 0);
  mt_region_t *re = _mt_region_of(p, e);
  uint64_t ke_start = _mt_vdev_stream_time(d, s2) - 1 * MS;
  cr_log_info("E's chunk handle %#llx; E's kernel on s2 runs from %.1f ms, B's kernel on s1 until %.1f ms",
              (unsigned long long)re->chunks[0].dev, ke_start / 1e6, kb_end / 1e6);
  cr_assert(!(re->chunks[0].dev == h && ke_start < kb_end),
            "E's kernel writes B's memory on another stream while B's kernel still runs");
  vp_stop(p);
}

/* A device that fails the n-th device-to-host copy from now (fail_d2h_in). */
static mt_device_ops_t wrap_ops;
static const mt_device_ops_t *real_ops;
static int fail_d2h_in; /* 0: never */
static uintptr_t last_ok_dst;
static uintptr_t wb_dst[8]; /* the host slots d2h copies wrote, in order */
static int nwb_dst;
static int wrap_copy(mt_device_t *d, uintptr_t dst, uintptr_t src, size_t n, mt_handle_t s) {
  if (dst >= ((uintptr_t)1 << 46) && fail_d2h_in > 0 && --fail_d2h_in == 0) return -EIO;
  int rc = real_ops->copy(d, dst, src, n, s);
  if (rc == 0 && dst >= ((uintptr_t)1 << 46)) {
    last_ok_dst = dst;
    if (nwb_dst < 8) wb_dst[nwb_dst++] = dst;
  }
  return rc;
}

static mt_pager_t *start_wrapped(const mt_pager_config_t *pc, mt_device_t **d) {
  mt_vdev_config_t vc = {.gpu_mem = 64 * MiB, .h2d_bw = 1e9, .d2h_bw = 1e9, .unmap_syncs = true};
  *d = _mt_vdev_new(&vc);
  real_ops = (*d)->ops;
  wrap_ops = *real_ops;
  wrap_ops.copy = wrap_copy;
  (*d)->ops = &wrap_ops;
  mt_pager_t *p;
  cr_assert_eq(_mt_pager_create(*d, pc, &p), 0);
  _mt_pager_install(p);
  return p;
}

/* 3. An eviction batch whose second copy fails: make_room_ex "waits" for
 * the copies issued with a stale ev_evict, puts the victims back DEVICE
 * with their new host slots, and returns. The first copy is still
 * writing its slot; a free gives the slot back to the pool meanwhile. */
Test(errpaths_pager, failed_eviction_copy_not_waited) {
  mt_pager_config_t pc = {.budget = 8 * MiB, .host_budget = 64 * MiB, .chunk = 2 * MiB, .small_limit = 4096,
                          .policy = "lru", .predictor = "none", .handoff = 2};
  mt_device_t *d;
  mt_pager_t *p = start_wrapped(&pc, &d);
  const mt_handle_t s1 = 16;
  uintptr_t a, e;
  cr_assert_eq(_mt_alloc(8 * MiB, &a), 0);
  vp_kern_t k = {d, s1, 1 * MS};
  bool w = true;
  vp_launch(p, &k, &a, &w, 1, 0);
  sync_stream(d, s1);
  cr_assert_eq(_mt_alloc(4 * MiB, &e), 0);
  fail_d2h_in = 2;
  pthread_mutex_lock(&p->lock);
  p->epoch++;
  int rc = _mt_make_room(p, 4 * MiB);
  pthread_mutex_unlock(&p->lock);
  mt_region_t *ra = _mt_region_of(p, a);
  int inflight = -1;
  for (uint32_t i = 0; i < ra->nchunks; i++)
    if (ra->chunks[i].host_addr == last_ok_dst) inflight = (int)i;
  mt_handle_t ev;
  cr_assert_eq(d->ops->event_create(d, &ev), 0);
  cr_assert_eq(d->ops->event_record(d, ev, p->d2h), 0);
  int q = d->ops->event_query(d, ev);
  cr_log_info("make_room rc=%d; chunk %d (state %d, dirty %d) holds the slot its copy writes; d2h done: %d", rc,
              inflight, inflight >= 0 ? ra->chunks[inflight].state : -1, inflight >= 0 ? ra->chunks[inflight].dirty : -1, q);
  cr_assert_lt(rc, 0);
  cr_assert_eq(q, 1, "the eviction returned with its first copy still in flight into a slot it kept");
  /* the application frees A: the slot goes back to the pool at once */
  size_t free0 = p->pool.nhost_free;
  cr_assert_eq(_mt_free(a, 0, false), 0);
  q = d->ops->event_query(d, ev);
  cr_log_info("after cuMemFree(A): %zu -> %zu free host slots, the copy into one still in flight: %d", free0,
              p->pool.nhost_free, q == 0);
  vp_stop(p);
}

static int fail_rec_on; /* event records on this stream fail (0: none) */
static int wrap_record(mt_device_t *d, mt_handle_t e, mt_handle_t s) {
  if (fail_rec_on != 0 && s == (mt_handle_t)fail_rec_on) return -EIO;
  return real_ops->event_record(d, e, s);
}

/* 4. Write-behind whose batch event cannot be recorded: the fallback's
 * record fails too, the chunks are cancelled with wb_batch naming a batch
 * that never enters the ring; a later release of the host slot "settles"
 * without waiting, and the slot goes back to the pool under the copy. */
Test(errpaths_pager, writebehind_record_failure) {
  mt_pager_config_t pc = {.budget = 8 * MiB, .host_budget = 64 * MiB, .chunk = 2 * MiB, .small_limit = 4096,
                          .policy = "lru", .predictor = "none", .handoff = 2};
  mt_device_t *d;
  mt_pager_t *p = start_wrapped(&pc, &d);
  wrap_ops.event_record = wrap_record;
  const mt_handle_t s1 = 16;
  uintptr_t a;
  cr_assert_eq(_mt_alloc(4 * MiB, &a), 0);
  vp_kern_t k = {d, s1, 1 * MS};
  bool w = true;
  vp_launch(p, &k, &a, &w, 1, 0);
  sync_stream(d, s1);
  pthread_mutex_lock(&p->lock);
  p->epoch++;
  fail_rec_on = (int)p->d2h;
  nwb_dst = 0;
  size_t got = _mt_write_behind(p, 4 * MiB, 0);
  fail_rec_on = 0;
  mt_region_t *r = _mt_region_of(p, a);
  cr_log_info("write-behind returned %zu; chunk0 wb_batch=%u clean_batch=%u dirty=%d host=%#lx; r->nwb=%u stock=%zu",
              got, r->chunks[0].wb_batch, r->chunks[0].clean_batch, r->chunks[0].dirty,
              (unsigned long)r->chunks[0].host_addr, r->nwb, p->wb_stock);
  pthread_mutex_unlock(&p->lock);
  mt_handle_t ev;
  cr_assert_eq(real_ops->event_create(d, &ev), 0);
  size_t free0 = p->pool.nhost_free;
  cr_assert_eq(_mt_free(a, 0, false), 0); /* region_destroy: _mt_wb_settle, then the slots go back */
  cr_assert_eq(real_ops->event_record(d, ev, p->d2h), 0);
  int q = real_ops->event_query(d, ev);
  cr_log_info("after cuMemFree: free host slots %zu -> %zu; the write-behind copies into them done: %d", free0,
              p->pool.nhost_free, q);
  for (size_t i = 0; i < p->pool.nhost_free; i++)
    for (int k = 0; k < nwb_dst; k++)
      cr_assert(q == 1 || p->pool.host_free[i].addr != wb_dst[k],
                "a host slot back in the pool while a write-behind copy into it is in flight");
  vp_stop(p);
}

/* 5. A launch that writes A fails after A was fetched: A is DEVICE, dirty,
 * with no hold, its fetch copy still on h2d. The next launch evicts A: the
 * d2h copy back into A's host slot (its only good copy) runs while the h2d
 * copy still reads that slot and writes the device memory it copies. */
Test(errpaths_pager, failed_launch_fetch_then_evict) {
  mt_pager_config_t pc = {.budget = 8 * MiB, .host_budget = 64 * MiB, .chunk = 2 * MiB, .small_limit = 4096,
                          .policy = "lru", .predictor = "none", .handoff = 2};
  mt_device_t *d;
  mt_pager_t *p = vp_start(&pc, &d);
  const mt_handle_t s1 = 16, s2 = 17;
  uintptr_t a, b, c;
  cr_assert_eq(_mt_alloc(2 * MiB, &a), 0);
  cr_assert_eq(_mt_alloc(6 * MiB, &b), 0);
  bool w[2] = {true, true};
  uintptr_t ab[2] = {a, b};
  vp_kern_t k1 = {d, 18, 1 * MS}; /* their first writer: a third stream, done */
  vp_launch(p, &k1, ab, w, 2, 0);
  sync_stream(d, 18);
  cr_assert_eq(_mt_host_write(a, NULL, 2 * MiB), 0); /* the optimizer's new bytes: A is HOST, its copy the only one */
  vp_kern_t kb = {d, s2, 100 * MS};
  vp_launch(p, &kb, &b, w, 1, 0); /* B held for 100 ms */
  pthread_mutex_lock(&p->lock);
  int rc = _mt_launch_regions(p, &a, w, 1, s1, 0, fail_fwd, NULL, "failing launch");
  mt_region_t *ra = _mt_region_of(p, a);
  cr_log_info("failing launch rc=%d: A state %d dirty %d nholds %u", rc, ra->chunks[0].state, ra->chunks[0].dirty,
              ra->nholds);
  pthread_mutex_unlock(&p->lock);
  mt_handle_t eh;
  cr_assert_eq(d->ops->event_create(d, &eh), 0);
  cr_assert_eq(d->ops->event_record(d, eh, p->h2d), 0); /* after A's fetch copy */
  uint64_t fetch_end = _mt_vdev_stream_time(d, p->h2d);
  cr_assert_eq(_mt_alloc(2 * MiB, &c), 0);
  uint64_t dirty0 = mt_stat_get(evictions_dirty);
  vp_kern_t kc = {d, s1, 1 * MS};
  vp_launch(p, &kc, &c, w, 1, 0);
  uint64_t evict_end = _mt_vdev_stream_time(d, p->d2h), evict_start = evict_end - 2 * MiB; /* 1 GB/s */
  cr_log_info("A now state %d; dirty evictions %llu; A's fetch (h2d) ends %.3f ms, its eviction copy (d2h) runs "
              "[%.3f, %.3f] ms", ra->chunks[0].state, (unsigned long long)(mt_stat_get(evictions_dirty) - dirty0),
              fetch_end / 1e6, evict_start / 1e6, evict_end / 1e6);
  cr_assert(!(ra->chunks[0].state == CH_HOST && evict_start < fetch_end),
            "A's host copy is overwritten from device memory its fetch has not filled yet");
  vp_stop(p);
}

/* 6. A prefetch copy (h2d) into R is still running when a capture begins
 * on another stream. A launch on s2 then needs room: R, clean and held by
 * nothing, is evicted with its unmap unfenced (capture), its handle goes
 * to the pool, and the launch's fresh chunk takes it (its own fence
 * skipped too): the s2 kernel writes memory the h2d copy is still writing. */
Test(errpaths_pager, capture_evicts_prefetch_in_flight) {
  memset(&_mt_stats, 0, sizeof(_mt_stats));
  mt_pager_config_t pc = {.budget = 4 * MiB, .host_budget = 64 * MiB, .chunk = 2 * MiB, .small_limit = 4096,
                          .policy = "lru", .predictor = "correlation", .prefetch_depth = 1, .handoff = 2};
  mt_device_t *d;
  mt_pager_t *p = vp_start(&pc, &d);
  const mt_handle_t s1 = 16, s2 = 17, s3 = 18;
  uintptr_t a, r, b, f;
  cr_assert_eq(_mt_alloc(2 * MiB, &a), 0);
  cr_assert_eq(_mt_alloc(2 * MiB, &r), 0);
  cr_assert_eq(_mt_alloc(2 * MiB, &b), 0);
  bool rd = false, wr = true;
  int it;
  uint64_t pf0 = 0;
  for (it = 0; it < 12; it++) {
    vp_kern_t k1 = {d, s1, 50 * MS};
    pf0 = mt_stat_get(prefetches);
    vp_launch(p, &k1, &a, it == 0 ? &wr : &rd, 1, 1);
    if (mt_stat_get(prefetches) > pf0 && it > 3) break; /* R's prefetch is on h2d now, A's kernel runs */
    sync_stream(d, s1);
    vp_kern_t k2 = {d, s1, 1 * MS};
    vp_launch(p, &k2, &r, it == 0 ? &wr : &rd, 1, 2);
    sync_stream(d, s1);
    vp_kern_t k3 = {d, s1, 1 * MS};
    vp_launch(p, &k3, &b, it == 0 ? &wr : &rd, 1, 3);
    sync_stream(d, s1);
  }
  mt_region_t *rr = _mt_region_of(p, r);
  uint64_t pf_end = _mt_vdev_stream_time(d, p->h2d);
  mt_handle_t h = rr->chunks[0].dev;
  cr_log_info("iteration %d: R prefetched (state %d, handle %#llx), its copy ends at %.3f ms", it,
              rr->chunks[0].state, (unsigned long long)h, pf_end / 1e6);
  cr_assert_eq(rr->chunks[0].state, CH_DEVICE);
  _mt_capture_begin(s3); /* a graph capture on another stream */
  cr_assert_eq(_mt_alloc(2 * MiB, &f), 0);
  vp_kern_t kf = {d, s2, 1 * MS};
  pthread_mutex_lock(&p->lock);
  int rc = _mt_launch_regions(p, &f, &wr, 1, s2, 9, vp_run, &kf, "test launch");
  pthread_mutex_unlock(&p->lock);
  /* no room (R may not go while its copy may run, A is held): an error,
   * never memory under a copy */
  if (rc != 0) {
    cr_assert_eq(rc, -E2BIG, "%d", rc);
    vp_stop(p);
    return;
  }
  mt_region_t *rf = _mt_region_of(p, f);
  uint64_t kf_start = _mt_vdev_stream_time(d, s2) - 1 * MS;
  cr_log_info("R now state %d; F's chunk handle %#llx, F's kernel on s2 starts at %.3f ms", rr->chunks[0].state,
              (unsigned long long)rf->chunks[0].dev, kf_start / 1e6);
  cr_assert(!(rf->chunks[0].dev == h && kf_start < pf_end),
            "F's kernel writes the handle R's prefetch copy is still writing");
  vp_stop(p);
}
