/*
 * pager.h - what the preload layer asks of the pager.
 *
 * Conventions: 0 on success; -errno for the pager's own failures (the hook
 * turns them into CUresult: -ENOMEM and -E2BIG are out of memory, -EINVAL an
 * invalid value, -ENOENT "not ours, pass it through"); a positive value is a
 * CUresult returned by the forwarded driver call, handed back unchanged.
 *
 * Work the pager forwards (a launch, one piece of a copy) is forwarded
 * through a callback while the pager holds its lock, so the chunks it made
 * resident cannot be evicted before the work is queued.
 */
#ifndef MT_PAGER_H
#define MT_PAGER_H

#include <cuda.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "device.h"

/* Starts the pager on first use (needs a current CUDA context); returns
 * non-NULL when it runs, NULL when mtalloc is off (calls pass through). */
struct mt_pager *_mt_pager_start(void);
/* The pager if started, else NULL; never starts it. */
static inline struct mt_pager *_mt_pager_if_started(void) {
  extern struct mt_pager *_mt_pager;
  return __atomic_load_n(&_mt_pager, __ATOMIC_ACQUIRE);
}

/* A pager on any device (the CUDA one, or the virtual clock of mt-trace
 * replay). Zero budgets mean: from the device / from physical RAM. */
typedef struct mt_pager_config {
  size_t budget;        /* MT_MAX_VRAM */
  size_t host_budget;   /* MT_MAX_HOST */
  size_t chunk;         /* MT_CHUNK, rounded up to the device granularity */
  size_t small_limit;   /* MT_SMALL_REGION */
  const char *policy;   /* MT_POLICY */
  const char *spill_policy; /* MT_SPILL_POLICY: the host tier's order to NVMe; NULL = auto */
  bool host_map;        /* use host mappings where the device can */
  const struct _mt_nvme_cfg *nvme; /* the NVMe tier (MT_OFFLOAD_DIR...); NULL: none */
  const char *predictor; /* MT_PREDICTOR; NULL = none */
  unsigned prefetch_depth; /* MT_PREFETCH_DEPTH */
  size_t predictor_mem; /* MT_PREDICTOR_MEM; 0 (unset): MT_PREDICTOR_MEM_DEFAULT */
  int handoff;          /* MT_HANDOFF: 0 auto, 1 on, 2 off */
  unsigned readahead_depth; /* MT_READAHEAD_DEPTH */
  unsigned prefetch_lead; /* MT_PREFETCH_LEAD; 0 (unset): no timeliness feedback */
  unsigned prefetch_free; /* MT_PREFETCH_FREE; 0 (unset): no prefetches beyond the depth
                           * into free memory */
  bool prefetch_pace;   /* MT_PREFETCH_PACE; false (unset): prefetch whenever room allows */
  unsigned runahead;    /* MT_RUNAHEAD; 0 (unset): no bound on launches queued ahead */
  bool prefetch_nowait; /* MT_PREFETCH_WAIT=off; false (unset): a prefetch may wait for
                         * queued launches to make room (runahead.c) */
  unsigned writebehind_horizon; /* MT_WRITEBEHIND_HORIZON; 0 (unset): write-behind copies
                                 * the prefetch window's lack only, no schedule */
} mt_pager_config_t;
struct mt_pager;
int _mt_pager_create(mt_device_t *d, const mt_pager_config_t *cfg, struct mt_pager **out);
/* Makes p the pager the entry points below (and the hooks) use. */
void _mt_pager_install(struct mt_pager *p);

int _mt_alloc(size_t size, uintptr_t *out);
/* async: freed in the order of stream s (cuMemFreeAsync). */
int _mt_free(uintptr_t addr, mt_handle_t s, bool async);
int _mt_region_range(uintptr_t addr, uintptr_t *base, size_t *size);
void _mt_mem_info(size_t *free_bytes, size_t *total);
/* The context (a CUcontext) and device ordinal the pager's regions live in;
 * only once the pager runs. */
void _mt_pager_device(uint64_t *ctx, int *ordinal);
/* The host optimizer's write-back: [addr, addr+n) of a paged region gets
 * the bytes at src, written into the host copies of its chunks; the device
 * copies of those chunks are dropped without a copy (stale), so the next
 * use fetches the new bytes and a clean eviction costs nothing. Waits for
 * work in flight that uses the region. Small and escaped regions are
 * written on the device. 0, -ENOENT (not ours), -EINVAL (not inside one
 * allocation), -EBUSY (a capture is active), -ENOMEM (host budget).
 * src NULL is for mt-trace replay's virtual device, which has no bytes: the
 * chunks move as above without a copy and without waiting for the work in
 * flight (replay orders the next use after the optimizer itself), and a
 * small region is left as it is. */
int _mt_host_write(uintptr_t addr, const void *src, size_t n);
/* Reads n bytes of a region at addr into host memory dst (any host memory),
 * fetching what is not on the GPU; returns when the bytes are there. The
 * application's work that writes them must be done (as for cudaMemcpy).
 * 0, -ENOENT (not ours) or -errno. */
int _mt_host_read(void *dst, uintptr_t addr, size_t n);
/* Takes bytes out of the host budget (MT_MAX_HOST) for host memory of
 * mtalloc's own, the host optimizer's masters and state, so that pinned
 * host copies, NVMe staging and optimizer memory share one budget. Host
 * copies that device chunks keep give way first, then host chunks spill to
 * NVMe (where the tier exists). Budget is taken in whole chunks, for the
 * sum of every reservation. 0 (also when no pager runs: the optimizer's C
 * API used alone counts nothing), or -ENOMEM with the reason logged. */
int _mt_host_reserve(size_t bytes);
/* The same without the log line: the optimizer's probe before it puts a
 * parameter's state on NVMe instead (optim/statestore.c). */
int _mt_host_try_reserve(size_t bytes);
/* Gives back what _mt_host_reserve(bytes) took. */
void _mt_host_unreserve(size_t bytes);
/* The NUMA node for host memory that the GPU reads and writes: MT_NUMA_NODE,
 * else the GPU's node, else -1 (unknown). */
int _mt_host_numa_node(void);
/* True when addr lies in the pager's address range. */
bool _mt_owns(uintptr_t addr);

typedef int (*mt_forward_fn)(void *ctx);
/* A launch of f with kernelParams params or the packed extra buffer, on s. */
int _mt_launch(CUfunction f, void **params, void **extra, mt_handle_t s, mt_forward_fn fwd, void *ctx);

/* One piece of a copy or set: forward it for [dst, dst+n) (and src). */
typedef int (*mt_piece_fn)(void *ctx, uintptr_t dst, uintptr_t src, size_t n);
/* src_is_host: the source is (or may be) host memory: scanned for escaping
 * pointers when small. async: holds for stream s are recorded. */
int _mt_copy(uintptr_t dst, uintptr_t src, size_t n, mt_handle_t s, bool async, int src_is_host,
             mt_piece_fn fwd, void *ctx);
/* elsize: 1, 2 or 4; n is bytes. */
int _mt_memset(uintptr_t dst, size_t n, size_t elsize, mt_handle_t s, bool async, mt_piece_fn fwd, void *ctx);

/* Streams and graphs. */
void _mt_stream_destroyed(mt_handle_t s);
void _mt_capture_begin(mt_handle_t s);
/* addr was just allocated in stream order on s: if s is capturing, the
 * allocation belongs to the capture's graph (graph.c). */
void _mt_capture_alloc(mt_handle_t s, uintptr_t addr);
void _mt_capture_end(mt_handle_t s, mt_handle_t graph);
void _mt_graph_instantiated(mt_handle_t graph, mt_handle_t exec);
void _mt_graph_destroyed(mt_handle_t graph_or_exec);
int _mt_graph_launch(mt_handle_t exec, mt_handle_t s, mt_forward_fn fwd, void *ctx);

#endif
