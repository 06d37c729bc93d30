/*
 * pager_start.c - building the pager: budgets rounded to chunks, the
 * policies (the GPU's and the host tier's spill order), the address space,
 * the NVMe tier, the copy streams and events, the prefetcher and pools;
 * from a configuration (_mt_pager_create: the library, replay and tests)
 * or, once per process, from the MT_* options (_mt_pager_start).
 *
 * Threading: _mt_pager_start runs pager_init once (pthread_once); a
 * created pager is published with a release store (_mt_pager_install).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pager_internal.h"
#include "predictor.h"
#include "trace.h"
#include "trace_io.h"

/* The host tier's spill order (MT_SPILL_POLICY). auto: LRU while the
 * read-ahead runs (readahead_on, below), else the GPU's
 * policy. Measured on G10's traces (docs/prefetching.md, "Region keys and the
 * spill order"): with the read-ahead, SENet154 89.6% of ideal with LRU against
 * 85.6% with nextuse (ResNet152 equal); demand-paged, ResNet152 75.8%
 * with nextuse against 73.0% with LRU, Inception 94.5 against 93.9%. */
/* Whether the NVMe read-ahead runs (with an NVMe tier): a predictor,
 * MT_PREFETCH_DEPTH > 0 (the prefetch pass feeds the predictor and runs
 * the read-ahead: with depth 0 neither happens) and MT_READAHEAD_DEPTH >
 * 0. The auto settings of the spill order and the handoff follow it. */
static bool readahead_on(const mt_pager_config_t *cfg) {
  return cfg->predictor != NULL && strcmp(cfg->predictor, "none") != 0 && cfg->prefetch_depth > 0 &&
         cfg->readahead_depth > 0;
}

static const mt_policy_ops_t *spill_policy(const mt_pager_config_t *cfg, const mt_policy_ops_t *gpu) {
  const char *s = cfg->spill_policy;
  if (s != NULL && strcmp(s, "auto") != 0) return _mt_policy_find(s);
  return readahead_on(cfg) ? &_mt_policy_lru : gpu;
}

static pthread_once_t pager_once = PTHREAD_ONCE_INIT;

static void stats_at_exit(void) {
  _mt_stats_print();
}

static size_t round_up(size_t v, size_t a) {
  return (v + a - 1) / a * a;
}

int _mt_pager_create(mt_device_t *d, const mt_pager_config_t *cfg, mt_pager_t **out) {
  mt_pager_t *p = calloc(1, sizeof(*p));
  if (p == NULL) return -ENOMEM;
  pthread_mutex_init(&p->lock, NULL);
  p->dev = d;
  p->chunk = round_up(cfg->chunk, d->info.granularity);
  if (p->chunk == 0) p->chunk = d->info.granularity;
  size_t budget = cfg->budget;
  if (budget == 0) budget = d->info.free_bytes / 20 * 19; /* leave 5% for the driver and libraries */
  if (budget > d->info.free_bytes && d->info.free_bytes > 0)
    mt_warn("MT_MAX_VRAM=%zu is more than the device has free (%zu)", budget, d->info.free_bytes);
  p->budget = budget / p->chunk * p->chunk;
  if (p->budget < 2 * p->chunk) {
    mt_error("MT_MAX_VRAM=%zu is below two %zu-byte chunks; using %zu", budget, p->chunk, 2 * p->chunk);
    p->budget = 2 * p->chunk;
  }
  size_t host = cfg->host_budget;
  if (host == 0) host = _mt_sysmem_limit() / 4 * 3; /* RAM, or the cgroup's limit when lower */
  p->host_budget = host / p->chunk * p->chunk;
  p->small_limit = cfg->small_limit;
  p->handoff = (uint8_t)cfg->handoff;
  p->pol_ops = _mt_policy_find(cfg->policy ? cfg->policy : "nextuse");
  p->pol = p->pol_ops ? p->pol_ops->create(true) : NULL;
  p->hpol_ops = spill_policy(cfg, p->pol_ops);
  p->rmap = _mt_rmap_new();
  p->retained.rnext = p->retained.rprev = &p->retained;
  int rc = p->pol && p->hpol_ops && p->rmap ? 0 : -ENOMEM;
  /* The NVMe tier first: its staging comes out of the host budget, and its
   * size is part of the address space (logged on failure: runs without). */
  if (rc == 0 && cfg->nvme != NULL) (void)_mt_nv_open(p, cfg->nvme);
  /* Address space: all that budgets can hold, twice over for fragmentation
   * (the NVMe tier once: it is large). A reservation the driver refuses is
   * retried without the NVMe part, then without the doubling. */
  size_t fixed = p->budget + p->host_budget, nv = _mt_nv_capacity(p);
  size_t tries[3] = {round_up(2 * fixed + nv, (size_t)1 << 30), round_up(2 * fixed, (size_t)1 << 30),
                     round_up(fixed + nv / 2, (size_t)1 << 30)};
  for (int t = 0; t < 3 && rc == 0; t++) {
    p->va_size = tries[t];
    if (d->ops->reserve(d, p->va_size, p->chunk, &p->va_base) == 0) break;
    if (t == 2) rc = -ENOMEM;
  }
  if (rc == 0 && p->va_size < tries[0])
    mt_warn("the driver reserved only %zu bytes of address space (%zu asked): allocations may run out of "
            "addresses before memory", p->va_size, tries[0]);
  if (rc == 0) rc = _mt_va_init(&p->va, p->va_base, p->va_size / p->chunk);
  p->host_mapped = d->info.host_mappable && cfg->host_map;
  p->host_reach = cfg->host_map && (d->info.host_mappable || d->info.models_host_reach);
  if (rc == 0 && p->host_mapped) {
    p->win_size = p->host_budget;
    if (d->ops->reserve(d, p->win_size, p->chunk, &p->win_base) == 0) {
      _mt_va_init(&p->win, p->win_base, p->win_size / p->chunk);
    } else {
      p->host_mapped = false;
      p->host_reach = d->info.models_host_reach;
    }
  }
  if (rc == 0) rc = d->ops->stream_create(d, &p->h2d);
  if (rc == 0) rc = d->ops->stream_create(d, &p->d2h);
  if (rc == 0) rc = d->ops->event_create(d, &p->ev_fetch);
  if (rc == 0) rc = d->ops->event_create(d, &p->ev_evict);
  if (rc == 0) rc = d->ops->event_create(d, &p->ev_h2d);
  p->ra_depth = cfg->readahead_depth;
  p->handoff_fill = readahead_on(cfg);
  p->pf_lead = cfg->prefetch_lead;
  p->pf_free = cfg->prefetch_free;
  p->pf_mem = cfg->predictor_mem ? cfg->predictor_mem : MT_PREDICTOR_MEM_DEFAULT;
  p->pf_pace = cfg->prefetch_pace;
  p->wb_horizon = cfg->writebehind_horizon; /* before _mt_prefetch_open, which reads it */
  p->runahead = cfg->runahead < MT_RUNAHEAD_MAX ? cfg->runahead : MT_RUNAHEAD_MAX;
  p->pf_nowait = cfg->prefetch_nowait;
  if (rc == 0 && (rc = _mt_prefetch_open(p, cfg->predictor, cfg->prefetch_depth)) == -EINVAL) {
    mt_error("MT_PREDICTOR=\"%s\" is not a predictor; prefetching is off", cfg->predictor);
    rc = 0;
  }
  if (rc == 0) rc = _mt_small_init(p, cfg->small_limit);
  if (rc == 0) rc = _mt_pool_init(p);
  if (rc < 0) return rc; /* what was made stays: the process goes on without us */
  *out = p;
  return 0;
}

void _mt_pager_install(mt_pager_t *p) {
  atomic_store(&_mt_stats.host_mapped, p->host_mapped);
  __atomic_store_n(&_mt_pager, p, __ATOMIC_RELEASE);
}

static void pager_init(void) {
  _mt_options_init();
  mt_device_t *d = _mt_device_cuda_open();
  if (d == NULL) {
    mt_error("mtalloc is off: the CUDA driver could not be used (see above); calls pass through");
    return;
  }
  _mt_nvme_cfg_t nvcfg;
  bool nvme = _mt_nvme_cfg_from_options(&nvcfg, d->info.host_numa_node);
  mt_pager_config_t cfg = {
    .nvme = nvme ? &nvcfg : NULL,
    .budget = (size_t)_mt_opt_int(MT_OPT_MAX_VRAM),
    .host_budget = (size_t)_mt_opt_int(MT_OPT_MAX_HOST),
    .chunk = (size_t)_mt_opt_int(MT_OPT_CHUNK),
    .small_limit = (size_t)_mt_opt_int(MT_OPT_SMALL_REGION),
    .policy = _mt_opt_str(MT_OPT_POLICY),
    .spill_policy = _mt_opt_str(MT_OPT_SPILL_POLICY),
    .predictor = _mt_opt_str(MT_OPT_PREDICTOR),
    .prefetch_depth = (unsigned)_mt_opt_int(MT_OPT_PREFETCH_DEPTH),
    .predictor_mem = (size_t)_mt_opt_int(MT_OPT_PREDICTOR_MEM),
    .readahead_depth = (unsigned)_mt_opt_int(MT_OPT_READAHEAD_DEPTH),
    .prefetch_lead = (unsigned)_mt_opt_int(MT_OPT_PREFETCH_LEAD),
    .prefetch_free = (unsigned)_mt_opt_int(MT_OPT_PREFETCH_FREE),
    .runahead = (unsigned)_mt_opt_int(MT_OPT_RUNAHEAD),
    .writebehind_horizon = (unsigned)_mt_opt_int(MT_OPT_WRITEBEHIND_HORIZON),
    .prefetch_pace = _mt_opt_int(MT_OPT_PREFETCH_PACE) != 0,
    .prefetch_nowait = _mt_opt_int(MT_OPT_PREFETCH_WAIT) == 0,
    .host_map = _mt_opt_int(MT_OPT_HOST_MAP) == 0,
    .handoff = (int)_mt_opt_int(MT_OPT_HANDOFF),
  };
  if (cfg.predictor_mem < MT_PREDICTOR_MEM_MIN) {
    mt_warn("MT_PREDICTOR_MEM=%zu is below %zu bytes, the least the predictor works in: using %zu",
            cfg.predictor_mem, MT_PREDICTOR_MEM_MIN, MT_PREDICTOR_MEM_MIN);
    cfg.predictor_mem = MT_PREDICTOR_MEM_MIN;
  }
  mt_pager_t *p;
  int rc = _mt_pager_create(d, &cfg, &p);
  if (rc < 0) {
    mt_error("mtalloc is off: could not set up the pager (%s); calls pass through", strerror(-rc));
    return;
  }
  mt_info("pager on %s: budget %zu bytes of %zu, host %zu, chunk %zu, host mappings %s", d->info.name,
          p->budget, d->info.total_bytes, p->host_budget, p->chunk, p->host_mapped ? "on" : "off");
  if (p->nv != NULL)
    mt_info("NVMe tier: %zu bytes in %s, %u staging buffers (%zu bytes of MT_MAX_HOST)", p->nv->cap_bytes,
            nvcfg.dirs, p->nv->nslots, p->nv->staging_bytes);
  else if (nvme)
    mt_warn("running without the NVMe tier (see above): mtalloc holds at most MT_MAX_VRAM + MT_MAX_HOST");
  if (_mt_opt_int(MT_OPT_STATS)) atexit(stats_at_exit);
  _mt_pager_install(p);
  const char *trace = _mt_opt_str(MT_OPT_TRACE);
  if (trace[0] != '\0') {
    mt_trace_header_t h;
    mt_trace_header_init(&h, MT_TRACE_CLOCK_MONOTONIC, "mtalloc");
    h.chunk_bytes = p->chunk;
    h.gpu_budget = p->budget;
    h.host_budget = p->host_budget;
    h.gpu_total = d->info.total_bytes;
    snprintf(h.device, sizeof(h.device), "%.63s", d->info.name);
    char opts[8192];
    if (_mt_options_text(opts, sizeof(opts)) < 0) opts[0] = '\0';
    rc = _mt_trace_start(trace, &h, opts);
    if (rc < 0) mt_error("MT_TRACE=\"%s\": cannot record a trace (%s); running without one", trace, strerror(-rc));
  }
}

mt_pager_t *_mt_pager_start(void) {
  pthread_once(&pager_once, pager_init);
  return _mt_pager;
}
