/*
 * stats.h - the pager's counters, one list (MT_STAT_FIELDS) feeding the
 * struct, the JSON of mt_stats_json() and the MT_STATS=1 line at exit.
 * Counters are relaxed atomics: cheap to bump from any thread, and a
 * snapshot is a consistent-enough picture for a report.
 */
#ifndef MT_STATS_H
#define MT_STATS_H

#include <stdatomic.h>
#include <stdint.h>

#define MT_STAT_FIELDS(X)  \
  X(bytes_h2d)             \
  X(bytes_d2h)             \
  X(fetches)               \
  X(evictions_dirty)       \
  X(evictions_clean)       \
  X(evictions_dirty_readmostly) \
  X(stalls)                \
  X(stall_ns)              \
  X(resident_bytes)        \
  X(peak_resident_bytes)   \
  X(launches)              \
  X(launches_unknown_layout) \
  X(allocs)                \
  X(frees)                 \
  X(regions_live)          \
  X(regions_peak)          \
  X(escaped_regions)       \
  X(launches_host_mapped)  \
  X(host_mapped_bytes)     \
  X(host_mapped)           \
  X(bypassed_bytes)        \
  X(unmap_waits)           \
  X(unmap_wait_ns)         \
  X(runahead_waits)        \
  X(runahead_wait_ns)      \
  X(handoff_decisions)     \
  X(handoff_decided_off)   \
  X(bytes_nvme_read)       \
  X(bytes_nvme_write)      \
  X(nvme_spills)           \
  X(nvme_loads)            \
  X(nvme_drops)            \
  X(nvme_errors)           \
  X(spill_async)           \
  X(spill_async_waits)     \
  X(spill_ahead_copies)    \
  X(live_gpu_bytes)        \
  X(live_host_bytes)       \
  X(live_nvme_bytes)       \
  X(peak_live_gpu_bytes)   \
  X(peak_live_host_bytes)  \
  X(peak_live_nvme_bytes)  \
  X(prefetches)            \
  X(prefetch_used)         \
  X(prefetch_late)         \
  X(prefetch_waits)        \
  X(prefetch_wait_ns)      \
  X(prefetches_free)       \
  X(predictor_hits)        \
  X(predictor_evictions)   \
  X(predictor_fp_dropped)  \
  X(readahead)             \
  X(readahead_used)        \
  X(readahead_late)        \
  X(readahead_spilled)     \
  X(host_write_bytes)      \
  X(write_behind)          \
  X(write_behind_used)     \
  X(handoffs)              \
  X(optim_nvme_bytes)      \
  X(optim_nvme_read)       \
  X(optim_nvme_write)      \
  X(optim_nvme_wait_ns)    \
  X(optim_nvme_errors)

typedef struct mt_stats {
#define MT_STAT_DECL(name) _Atomic uint64_t name;
  MT_STAT_FIELDS(MT_STAT_DECL)
#undef MT_STAT_DECL
} mt_stats_t;

extern mt_stats_t _mt_stats;

#define mt_stat_add(field, n) atomic_fetch_add_explicit(&_mt_stats.field, (uint64_t)(n), memory_order_relaxed)
#define mt_stat_sub(field, n) atomic_fetch_sub_explicit(&_mt_stats.field, (uint64_t)(n), memory_order_relaxed)
#define mt_stat_get(field) atomic_load_explicit(&_mt_stats.field, memory_order_relaxed)
/* Raises peak to at least v. */
void _mt_stat_peak(_Atomic uint64_t *peak, uint64_t v);

/* Calls per hooked driver symbol and route; the preload layer registers its
 * symbol names once so the JSON can name them. */
enum { MT_ROUTE_DIRECT, MT_ROUTE_DLSYM, MT_ROUTE_PROCADDR, MT_ROUTE__COUNT };
void _mt_stats_set_hooks(const char *const *names, _Atomic uint64_t (*calls)[MT_ROUTE__COUNT], int n);
/* Prints the stats line ("mtalloc: stats {...}") to the log. */
void _mt_stats_print(void);

#endif
