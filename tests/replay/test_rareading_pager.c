/* Description: a read ahead still on the drive is seen as such
 * (readahead.c, _mt_ra_reading), on the virtual-clock device with a
 * simulated NVMe tier, whose reads end at a virtual time.
 *
 * a_read_in_flight_until_claimed: twelve 2 MiB regions written through a
 * two-chunk GPU budget and an eight-chunk host budget, so that some go to
 * NVMe. A read ahead of one of them is in flight until the host's clock
 * reaches its end: _mt_ra_reading says so, which keeps a prefetch from
 * fetching the region (prefetch.c: the fetch would hold the host until the
 * read ends). The fetch's claim (_mt_ra_claim) waits for it, late: the
 * chunk is then in host memory and nothing is being read. */
#include "nvme_store.h"
#include "vpager.h"

#define NR 12

Test(rareading_pager, a_read_in_flight_until_claimed) {
  _mt_nvme_cfg_t nv = {.simulate = true, .max_bytes = 64 * MiB};
  mt_pager_config_t pc = {.budget = 2 * 2 * MiB, .host_budget = 8 * 2 * MiB, .chunk = 2 * MiB, .small_limit = 4096,
                          .policy = "nextuse", .predictor = "none", .handoff = 2, .nvme = &nv, .readahead_depth = 1,
                          .host_map = false};
  mt_device_t *d;
  mt_pager_t *p = vp_start(&pc, &d);
  cr_assert_not_null(p->nv, "the simulated tier opened");
  uintptr_t a[NR];
  for (int i = 0; i < NR; i++) {
    cr_assert_eq(_mt_alloc(2 * MiB, &a[i]), 0);
    vp_kern_t k = {d, 0, 1 * MS};
    bool w = true;
    vp_launch(p, &k, &a[i], &w, 1, 500 + (uint64_t)i);
  }
  pthread_mutex_lock(&p->lock);
  mt_region_t *r = NULL;
  for (int i = 0; i < NR && r == NULL; i++)
    if (_mt_region_of(p, a[i])->chunks[0].state == CH_NVME) r = _mt_region_of(p, a[i]);
  cr_assert_not_null(r, "a region went to NVMe");
  cr_assert(!_mt_ra_reading(p, r), "nothing read ahead yet");
  p->epoch++;
  cr_assert(_mt_ra_region(p, r), "room and a read slot for one chunk");
  cr_assert(_mt_ra_reading(p, r), "the read is on the drive: the host's clock has not reached its end");
  uint64_t late = mt_stat_get(readahead_late);
  _mt_ra_claim(p, r, 0, 0);
  cr_assert(!_mt_ra_reading(p, r), "claimed: read, nothing in flight");
  cr_assert_eq(r->chunks[0].state, CH_HOST, "the chunk is in host memory");
  cr_assert_eq(mt_stat_get(readahead_late), late + 1, "the claim waited for it");
  pthread_mutex_unlock(&p->lock);
  vp_stop(p);
}
