/*
 * pager_internal.h - the pager's data structures, shared by the files that
 * make it up (pager.c: chunk state machine and residency; physpool.c:
 * physical memory for moves; unmapfence.c: unmaps ordered after copies;
 * streams.c: holds; vaspace.c: addresses;
 * smallpool.c: packed small regions; launch.c: footprints (parameter
 * layouts are layout.c's, outside the pager); copy.c: copies and sets;
 * graph.c: captured footprints; tier_nvme.c: the NVMe tier's moves;
 * spillwrite.c: its asynchronous spills; prefetch.c: the prefetch scheduler; writebehind.c: copies ahead of
 * eviction; hostwrite.c: the optimizer's write-back; hostbudget.c: host
 * memory of mtalloc's own inside MT_MAX_HOST).
 *
 * One mutex, mt_pager_t.lock, guards everything here. Hooked calls take it
 * for the whole of their work, including forwarding the call to the driver:
 * a launch's chunks are made resident and the launch enqueued before any
 * other thread can pick them as victims. The region map is the exception:
 * it has its own lock-free readers, but the pager only uses it under its lock.
 */
#ifndef MT_PAGER_INTERNAL_H
#define MT_PAGER_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "device.h"
#include "nvme_store.h"
#include "pager.h"
#include "internal.h"
#include "policy.h"
#include "stats.h"
#include "trial.h"

/* ---- vaspace.c ---------------------------------------------------------- */
typedef struct mt_vaspace {
  uintptr_t base;
  size_t total;        /* chunks in the range */
  size_t top;          /* chunks below top have been handed out at some point */
  struct { size_t first, n; } *ext; /* free extents below top, sorted */
  size_t next, cap;
} mt_vaspace_t;

int _mt_va_init(mt_vaspace_t *v, uintptr_t base, size_t chunks);
void _mt_va_fini(mt_vaspace_t *v);
/* n chunks; *out is their address. Returns 0 or -ENOMEM (range full). */
int _mt_va_alloc(mt_vaspace_t *v, size_t n, size_t chunk, uintptr_t *out);
int _mt_va_free(mt_vaspace_t *v, uintptr_t addr, size_t n, size_t chunk);

/* ---- physpool.c ----------------------------------------------------------
 * Physical memory for chunk moves, made once and reused (see physpool.c). */
typedef struct mt_host_slot {
  mt_handle_t h;             /* slab handle (host mappings), else 0 */
  size_t off;                /* byte offset of the slot in the slab */
  uintptr_t addr;            /* where the pager copies to and from */
} mt_host_slot_t;

typedef struct mt_physpool {
  mt_handle_t *dev_free;     /* device chunk handles no chunk uses */
  size_t ndev_free, cap_dev;
  mt_host_slot_t *host_free; /* host copy slots no chunk uses */
  size_t nhost_free, cap_host;
  size_t slab_chunks;        /* chunks per host slab */
  size_t host_slabbed;       /* chunks in host slabs, <= host_budget / chunk */
  uint64_t dev_created;      /* device handles alive (in use or pooled) */
  mt_handle_t *handed;       /* handoff.c: freed regions' handles, reusable in stream order */
  size_t nhanded, cap_handed;
  uint32_t handed_si;        /* the stream they may be used on at once */
  mt_handle_t handed_ev;     /* recorded on it after their last uses */
  bool handed_h2d;           /* the h2d stream waits for handed_ev */
  uint64_t host_slabs;       /* host slabs made */
} mt_physpool_t;

typedef struct mt_pager mt_pager_t;
int _mt_pool_init(mt_pager_t *p);
/* A device chunk handle: from the pool, else created. 0 or -errno. */
int _mt_pool_dev_get(mt_pager_t *p, mt_handle_t *h);
/* Gives a device handle back (its chunk is unmapped and out of `used`). */
void _mt_pool_dev_put(mt_pager_t *p, mt_handle_t h);
/* Releases pooled handles the budget no longer covers (it shrank). */
void _mt_pool_dev_trim(mt_pager_t *p);
/* A host copy slot: from the pool, else from a new slab. 0 or -ENOMEM. */
int _mt_pool_host_get(mt_pager_t *p, mt_host_slot_t *out);
void _mt_pool_host_put(mt_pager_t *p, const mt_host_slot_t *s);
/* Level 3 (MT_CHECK_INVARIANTS): the pools agree with the pager's
 * accounting -- used + pooled device memory within the budget, host slots
 * in use == host_used, slabs within the host budget. */
void _mt_pool_check(const mt_pager_t *p);

/* ---- unmapfence.c ---------------------------------------------------------
 * cuMemUnmap may wait for the device: the pager unmaps only when no fetch
 * copy it issued is in flight (see unmapfence.c). */
/* Fetch copies were just issued on the h2d stream. */
void _mt_h2d_issued(mt_pager_t *p);
/* Event e was just recorded on the h2d stream: it covers every fetch copy
 * issued so far (saves a record when the host must ask). */
void _mt_h2d_marked(mt_pager_t *p, mt_handle_t e);
/* Makes sure no fetch copy is in flight: 0 when none was (one
 * non-blocking query at most), 1 after the host waited for them (counted
 * in unmap_waits when count), <0 error. Not during a capture. */
int _mt_h2d_drain(mt_pager_t *p, bool count);
/* True when no fetch copy is deferred or in flight, asked without
 * waiting (one query at most). */
bool _mt_h2d_idle(mt_pager_t *p);
/* Call before a batch of unmaps or a set_access (cuda.h marks both
 * synchronous): orders them after the fetch copies in flight, waiting
 * only when they are not done. 0 or -errno. */
int _mt_unmap_fence(mt_pager_t *p);

/* ---- tier_nvme.c -----------------------------------------------------------
 * The NVMe tier's I/O for the pager (the store is nvme_store.c; which chunk
 * moves when is pager.c's). Staging slots are chunk-sized pinned buffers,
 * counted in MT_MAX_HOST: a chunk read from NVMe waits in one until its
 * copy to the device (issued with the operation's other fetch copies) has
 * run. All transfers are synchronous under the pager lock: the host waits,
 * bounded, for the drive. */
typedef struct mt_chunk mt_chunk_t;
typedef struct mt_nvslot {
  uintptr_t addr;            /* the buffer: 4 KiB-aligned, pinned, one chunk */
  mt_handle_t ev;            /* recorded on h2d after the copy out of it */
  uint8_t state;             /* NV_SLOT_* */
} mt_nvslot_t;
enum { NV_SLOT_FREE = 0, NV_SLOT_LOADED = 1, NV_SLOT_INFLIGHT = 2, NV_SLOT_BUSY = 3 };

typedef struct mt_nvtier {
  _mt_nvme_t *store;
  bool simulated;            /* replay: no files, the virtual clock charges the time */
  mt_policy_t *hpol;         /* HOST chunks, in the order they spill (the policy's) */
  mt_nvslot_t *slots;
  unsigned nslots;
  size_t staging_bytes;      /* slots and the store's bounce pages, taken off MT_MAX_HOST */
  size_t cap_bytes;          /* the store's pages, bytes */
  mt_handle_t ev_spill;
  bool warned_full;
} mt_nvtier_t;

/* Opens the tier (MT_OFFLOAD_DIR, or a simulated store of sim_bytes when
 * sim_bytes > 0) and takes its staging out of the host budget. 0, or -errno
 * after one line saying the pager runs without it. */
int _mt_nv_open(mt_pager_t *p, const _mt_nvme_cfg_t *cfg);
void _mt_nv_close(mt_pager_t *p);
/* Bytes of NVMe the capacity (cuMemGetInfo's total) may count: pages
 * beyond one copy of every device chunk (a clean device chunk keeps its
 * NVMe copy). 0 without the tier. */
size_t _mt_nv_capacity(const mt_pager_t *p);
/* Writes the host copies of cs[0..n) to NVMe (pages allocated as needed;
 * a chunk whose NVMe copy is valid is not written again). ok[i] says which
 * made it; the host copies are untouched either way. Returns the number
 * written, or -errno when none was (the first error). */
int _mt_nv_write(mt_pager_t *p, mt_chunk_t **cs, int n, bool *ok);
/* Reads c's NVMe copy into a staging slot for a copy to the device:
 * returns the slot's index (>= 0) or -errno (-EBADMSG: corrupt, never
 * delivered). The caller issues the copy from slots[i].addr and calls
 * _mt_nv_slot_used, or _mt_nv_slot_put when it gives up. */
int _mt_nv_read_slot(mt_pager_t *p, mt_chunk_t *c);
/* issued: the copy is on h2d already; else it waits in the deferred list */
void _mt_nv_slot_used(mt_pager_t *p, int slot, bool issued);
void _mt_nv_slot_put(mt_pager_t *p, int slot);
/* The deferred fetch copies were just issued on h2d: records the events
 * of the slots they copy from. */
void _mt_nv_flushed(mt_pager_t *p);
/* Reads c's NVMe copy into its host copy (c->host_addr, already given). */
int _mt_nv_read_host(mt_pager_t *p, mt_chunk_t *c);
/* Frees c's NVMe pages (its copy is stale, or the chunk is gone). */
void _mt_nv_drop(mt_pager_t *p, mt_chunk_t *c);

/* ---- handoff.c ------------------------------------------------------------
 * Freed regions' device memory reused in stream order (see handoff.c). */
/* Hands chunks of freed regions still in use on the stream of the launch
 * being prepared (p->op_si) to the pool until `need` fits; returns the
 * bytes handed. */
size_t _mt_handoff(struct mt_pager *p, size_t need);
/* Whether freed memory may be handed on now (MT_HANDOFF, and for auto,
 * chunks living on NVMe). */
bool _mt_handoff_on(const struct mt_pager *p);
/* A handed handle for a chunk fetched through h2d (via_h2d) or used by the
 * launch being prepared: 1 and *h, or 0 when none may be used. */
int _mt_handoff_take(struct mt_pager *p, bool via_h2d, mt_handle_t *h);
/* Waits for the handed handles' event and gives them to the pool. */
void _mt_handoff_settle(struct mt_pager *p);
/* A launch of identity id begins at p->clock and the period is now period
 * (0: unknown): MT_HANDOFF=auto's measured choice takes its next step
 * (trial.h). */
void _mt_handoff_tick(struct mt_pager *p, uint64_t period, uint64_t id);
/* The period is learned (prefetch.c keeps next-use estimates): auto may
 * choose by measurement. */
void _mt_handoff_trial_open(struct mt_pager *p);

/* ---- prefetch.c ------------------------------------------------------------
 * The prefetch scheduler (see prefetch.c). */
typedef struct mt_prefetch mt_prefetch_t;
/* MT_PREDICTOR / MT_PREFETCH_DEPTH; "none" or depth 0 leave p->pf NULL
 * unless the policy reads next uses (then it only keys regions and keeps
 * their uses). 0, -EINVAL (unknown predictor) or -ENOMEM. */
int _mt_prefetch_open(struct mt_pager *p, const char *predictor, unsigned depth);
void _mt_prefetch_close(struct mt_pager *p);
/* A launch of func with footprint rs[0..n) is being prepared: its identity,
 * its regions' keys and uses, the clock (before the footprint is made
 * resident, so that residency sees this launch's uses). */
void _mt_prefetch_begin(struct mt_pager *p, uint64_t func, struct mt_region **rs, size_t n);
/* That launch was just forwarded on s: prefetch for the next ones. */
void _mt_prefetch_launch(struct mt_pager *p, mt_handle_t s);
/* The clock of r's next expected use, 0 when unknown (predictor/reuse.h). */
uint64_t _mt_prefetch_due(struct mt_pager *p, struct mt_region *r);
/* An eviction for the launch being prepared takes a chunk whose copy out
 * it needs, or found made by write-behind: recorded for write-behind's
 * schedule (predictor/demand.h). An -ENOMEM loses the record (and the
 * schedule until a period is recorded again), nothing else. */
void _mt_prefetch_evicting(struct mt_pager *p);
/* r (with r->pf_event) is about to be used on s: s waits for its copies. */
int _mt_prefetch_wait(struct mt_pager *p, struct mt_region *r, mt_handle_t s);
/* r is freed or destroyed: forget its key and event. */
void _mt_prefetch_forget(struct mt_pager *p, struct mt_region *r);

/* Slots of the key map (tests: it stays bounded). */
size_t _mt_prefetch_keys(const struct mt_pager *p);
/* Key -> live region (NULL: unknown or gone), for readahead.c. */
struct mt_region *_mt_prefetch_region(struct mt_pager *p, uint64_t key);
/* A region is spent when it has been used by as many launches as the
 * last region with its key was before the application freed it: its data
 * is probably dead (a per-iteration buffer past its last use), and a copy
 * of it wasted. MT_SPENT_SOON: that region was freed within SPENT_SOON
 * launches of its last use (prefetch.c), so r's memory comes back soon;
 * MT_SPENT_LATE: later, and it would hold device memory that long. Kept
 * in r->spent at each use (prefetch.c). */
enum { MT_SPENT_NO = 0, MT_SPENT_SOON = 1, MT_SPENT_LATE = 2 };

/* ---- readahead.c -------------------------------------------------------------
 * NVMe -> host reads ahead of the GPU prefetch window (see readahead.c). */
struct mt_predictor_ops;
struct mt_predictor;
/* After a launch's prefetch: completes the reads that are done, then reads
 * ahead for the predicted launches beyond (current launch identity id). */
void _mt_ra_launch(struct mt_pager *p, const struct mt_predictor_ops *ops, struct mt_predictor *pred, uint64_t id);
/* Starts reads of r's NVME chunks (none of r is spilled for them). false
 * when it ran out of room or read slots (stop reading ahead for now). */
bool _mt_ra_region(struct mt_pager *p, struct mt_region *r);
/* Completes the reads that are done, without waiting. */
void _mt_ra_poll(struct mt_pager *p);
/* Reads ahead in flight. */
unsigned _mt_ra_inflight(const struct mt_pager *p);
/* r is in the last read-ahead pass's window: the host tier spills it only
 * when nothing else can go, until the next pass (see readahead.c). */
bool _mt_ra_windowed(const struct mt_pager *p, const struct mt_region *r);
/* c, HOST, went to NVMe (_mt_live_move): a read ahead it was, unused, was
 * wasted. */
void _mt_ra_spilled(mt_chunk_t *c);
/* Chunks [first, last] of r are about to be fetched: a read-ahead in flight
 * for one of them is waited for (that read only) and completed into a host
 * copy, or dropped when it failed (the chunk stays NVME: the demand read
 * meets the error as before); read-ahead chunks found HOST count as used. */
void _mt_ra_claim(struct mt_pager *p, struct mt_region *r, size_t first, size_t last);
/* A read ahead of one of r's chunks is still in flight: fetching r now
 * would wait for the drive (_mt_ra_claim). */
bool _mt_ra_reading(struct mt_pager *p, const struct mt_region *r);
/* c (NVME) has a read-ahead in flight: waits for it and throws it away
 * (its host slot back to the pool). Before its NVMe copy is read another
 * way or dropped (tier_nvme.c). */
void _mt_ra_cancel(struct mt_pager *p, mt_chunk_t *c);

/* ---- spillwrite.c -----------------------------------------------------------
 * Asynchronous spill writes (HOST -> NVMe) ahead of need. */
/* After a launch: completes the writes that are done, then starts writes
 * of the host tier's next victims until a headroom of the host budget is
 * free or being freed. */
void _mt_sw_launch(struct mt_pager *p);
/* Completes the writes that are done (their chunks become NVME), without
 * waiting. */
void _mt_sw_poll(struct mt_pager *p);
/* Host room for bytes from the writes in flight: completes those done,
 * then waits for the oldest until the room is there or none is left. True
 * when the room is there. */
bool _mt_sw_room(struct mt_pager *p, size_t bytes);
/* c may have a spill write in flight: waits for it (bounded) without
 * changing c's state, before its host copy is written or given back or
 * its NVMe copy dropped. */
void _mt_sw_settle(struct mt_pager *p, mt_chunk_t *c);
/* Copies written ahead while the drive is idle: at most `chunks` queued
 * (default: the host budget / SW_AHEAD_DIV; tests set a small one). */
void _mt_sw_set_ahead(struct mt_pager *p, unsigned chunks);
/* Spill writes in flight (copies written ahead included). */
unsigned _mt_sw_inflight(const struct mt_pager *p);
/* Of them, the spills (those that will free host memory). */
unsigned _mt_sw_spilling(const struct mt_pager *p);
/* Waits for every write in flight and frees the state (before the store
 * closes). */
void _mt_sw_close(struct mt_pager *p);

/* ---- streams.c -----------------------------------------------------------
 * A hold says "stream s will use this region until its operation number
 * seq has completed". Operation numbers are the pager's own count of the
 * work it forwarded on each stream; events recorded on the stream
 * (checkpoints) tell which numbers have completed. Events are recorded only
 * when somebody needs to know, not per launch. */
typedef struct mt_hold {
  uint32_t stream;     /* index into the stream table; 0 = none */
  uint64_t seq;
} mt_hold_t;

#define MT_HOLDS 4     /* per region; a fifth stream waits for the oldest */

/* The stream table index for an application stream handle (created on first
 * sight), or 0 when out of memory (treated as "no hold", after a host wait). */
uint32_t _mt_stream_index(mt_pager_t *p, mt_handle_t s);
/* Counts one more operation forwarded on stream index si; returns its number. */
uint64_t _mt_stream_next(mt_pager_t *p, uint32_t si);
/* The number of the last operation forwarded on si. */
uint64_t _mt_stream_seq(mt_pager_t *p, uint32_t si);
/* 1 when the hold's work has completed, 0 when not (wait=false), <0 error.
 * With wait=true, waits for it on the host. */
int _mt_hold_done(mt_pager_t *p, const mt_hold_t *h, bool wait);
/* A checkpoint after the operation just forwarded on si (finished ones
 * dropped first): later questions about it get an exact answer, not one
 * about everything forwarded by then. Used when prefetching, where the
 * room a prefetch may take depends on which holds have ended. */
void _mt_stream_mark(mt_pager_t *p, uint32_t si);
/* When nothing can be evicted without a wait: waits for the oldest
 * unfinished checkpoint of the first stream that has a later one, so that
 * the holds it covers end, and returns 1; 0 when no stream has one (its
 * newest checkpoint answers for all its work: waiting for it is no step);
 * -errno. A step waits for the GPU to get a little further, not for a
 * chunk's last use, which may be the end of the queue. */
int _mt_stream_step(mt_pager_t *p);
/* A value that changes whenever work on some stream is newly complete:
 * checkpoints popped (streams_gen) or passed and not popped yet (queried
 * here, oldest first: they pass in order). No wait, no state change; not
 * during a capture (it queries events). */
uint64_t _mt_streams_progress(mt_pager_t *p);
/* Whether an event can be recorded on stream si from this thread now (not
 * retired, not another thread's per-thread stream, not capturing); its
 * handle in *h. */
bool _mt_stream_recordable(mt_pager_t *p, uint32_t si, mt_handle_t *h);
/* Forgets a destroyed stream handle (its pending holds stay answerable). */
void _mt_stream_retire(mt_pager_t *p, mt_handle_t s);
void _mt_streams_fini(mt_pager_t *p);

/* ---- pager.c --------------------------------------------------------------- */
enum { CH_NONE = 0, CH_DEVICE = 1, CH_HOST = 2, CH_NVME = 3 };

typedef struct mt_chunk {
  mt_policy_node_t node;     /* first: the policy hands nodes back */
  struct mt_region *region;
  uint32_t index;            /* within the region */
  uint8_t state;             /* CH_* */
  bool dirty;                /* DEVICE: the device copy is newer than any host copy */
  bool retained;             /* on the pager's retained list (DEVICE with a host copy) */
  bool pf;                   /* fetched ahead by the prefetcher, not used since */
  bool ahead;                /* its NVMe copy was written ahead (spillwrite.c), neither spilled
                              * on nor made stale since (_mt_ahead_outcome) */
  uint32_t clean_batch;      /* DEVICE and dirty: a write-behind copy of it to its host copy is
                              * in flight in this batch (clean once it is done); 0 = none */
  uint32_t wb_batch;         /* the last write-behind batch that copies from it: its device
                              * memory and host slot are not reused before it is done */
  uint8_t wb_slot;           /* clean_batch != 0: its place in that batch (writebehind.c) */
  bool wbclean;              /* cleaned by write-behind, its copy not used by an eviction yet
                              * (these and the chunks with clean_batch != 0 are the
                              * write-behind stock, p->wb_stock) */
  mt_handle_t dev;           /* DEVICE: physical device memory (0 when handed) */
  bool handed;               /* DEVICE of a freed region, its memory handed on (handoff.c):
                              * still mapped here until the region is destroyed */
  mt_handle_t host;          /* host copy: its slab's handle (host-mapped) or 0 */
  size_t host_off;           /* host copy: its offset in that slab */
  uintptr_t host_addr;       /* host copy: address to copy to/from; 0 = none */
  uint64_t epoch;            /* == pager epoch: used by the piece of a copy being prepared */
  struct mt_chunk *rprev, *rnext; /* retained list */
  _mt_nvme_chunk_t *nv;      /* NVMe pages: NVME (the only copy), or DEVICE and clean
                              * (a valid copy, dropped without a write); else NULL */
  uint32_t ra;               /* readahead.c: NVME: 1 + its read-ahead's slot, read in flight;
                              * MT_RA_READY: HOST, read ahead and not used since; 0 = none
                              * (a stale MT_RA_READY on a chunk no longer HOST means none) */
  uint32_t sw;               /* spillwrite.c: 1 + its spill write's entry while one is in
                              * flight (HOST, or DEVICE once fetched meanwhile); 0 = none */
} mt_chunk_t;
#define MT_RA_READY UINT32_MAX

enum { REG_PAGED = 0, REG_SMALL = 1 };

typedef struct mt_region {
  uintptr_t addr;
  size_t size;               /* bytes asked for */
  size_t span;               /* bytes of address space (whole chunks, or the small slot) */
  uint64_t id;
  uint8_t kind;              /* REG_* */
  bool escaped;              /* address was copied to the device: stays resident */
  int lost;                  /* -errno: a fetch copy into it failed (_mt_fetch_flush), so device
                              * chunks may lack their data; every later use fails with it */
  bool hostuse;              /* a launch reached its HOST chunks through host mappings:
                              * fetching one waits for the region's holds first */
  bool readmostly;           /* mt_advise(MT_ADVISE_READ_MOSTLY): launches only read it,
                              * so they leave its chunks clean (launch.c); default false */
  uint8_t nholds;
  uint8_t small_class;       /* REG_SMALL: size class */
  uint64_t epoch;            /* == pager epoch: part of the operation being prepared */
  uint64_t touched;          /* pager epoch of the last policy touch */
  uint32_t ndevice;          /* chunks DEVICE */
  uint32_t nhanded;          /* of them, handed on (freed; handoff.c) */
  uint32_t npf;              /* chunks prefetched and not used since (keeps it off the fast path) */
  uint32_t nclean;           /* chunks DEVICE and not dirty */
  uint32_t nwb;              /* chunks whose write-behind copy may still be in flight
                              * (wb_batch != 0): a write must cancel its cleaning and wait
                              * for the copy on the device (keeps it off the fast path) */
  mt_hold_t holds[MT_HOLDS];
  struct mt_region *next_pending; /* deferred-free list */
  struct mt_region *fprev, *fnext; /* fresh list: allocated since the last launch */
  bool fresh;                /* on the fresh list */
  uint64_t key;              /* prefetch.c: stable key, fixed at first use by a launch; 0 = none */
  uint64_t key_func;         /* prefetch.c: the function of that launch, */
  uint32_t key_slot;         /* and the footprint slot it came through */
  mt_handle_t pf_event;      /* prefetch.c: recorded after its prefetch copies; 0 = none */
  uint64_t due;              /* prefetch.c: the clock of its next expected use (0 = unknown), */
  uint64_t due_clock;        /* computed at this clock */
  uint32_t uses;             /* prefetch.c: launches that have used it, */
  uint64_t last_use;         /* the last of them (prefetch.c's count of launches), */
  uint8_t spent;             /* and whether its data is dead: MT_SPENT_* */
  int8_t ahead_score;        /* its copies written ahead: +1 each one a spill used, -1 each one
                              * made stale first, within +-4 (_mt_ahead_outcome) */
  bool freed;                /* the application freed it; destroyed once its stream work is
                              * done. Its chunks never move again (no copy of dead data) and
                              * have left the live tier counts */
  uint64_t ra_epoch;         /* readahead.c: == pager epoch: in that launch's read-ahead window
                              * (== ra_window: in the last one, _mt_ra_windowed) */
  uint32_t ra_pos;           /* readahead.c: in that window, the predicted launch that uses it
                              * first (1 = the next) */
  uint64_t held_walk;        /* == a walk of the policy that found it held (_mt_region_held_in) */
  uint32_t nnvme;            /* chunks NVME (kept by _mt_live_move): read-ahead skips regions
                              * with none */
  uint32_t nra;              /* readahead.c: chunks with ra != 0 (upper bound: a stale
                              * MT_RA_READY still counts): keeps the check off the fast path */
  uint32_t nchunks;
  mt_chunk_t chunks[];       /* REG_PAGED */
} mt_region_t;

typedef struct mt_stream_ent mt_stream_ent_t;

#define MT_SMALL_CLASSES 24 /* buddy orders: 512 B << 23 = 4 GiB chunks at most */

#define MT_RUNAHEAD_MAX 256 /* MT_RUNAHEAD at most (runahead.c's ring) */

struct mt_pager {
  pthread_mutex_t lock;
  mt_device_t *dev;
  const mt_policy_ops_t *pol_ops;
  const mt_policy_ops_t *hpol_ops; /* MT_SPILL_POLICY: the host tier's spill order (nv->hpol) */
  mt_policy_t *pol;
  _mt_rmap_t *rmap;

  size_t chunk;              /* bytes per chunk */
  size_t small_limit;        /* allocations below this go to the small pool */
  uintptr_t va_base;
  size_t va_size;
  mt_vaspace_t va;
  uintptr_t win_base;        /* host-mapped: window where host copies are mapped */
  size_t win_size;
  mt_vaspace_t win;
  bool host_mapped;
  bool host_reach;           /* a kernel can reach a HOST chunk at its address: host
                              * mappings, or the virtual clock's model of them */

  size_t budget;             /* MT_MAX_VRAM in bytes */
  size_t used;               /* device bytes held: paged chunks + small slabs */
  size_t pinned;             /* of used: small slabs and escaped regions */
  size_t escaped;            /* of pinned: escaped regions (the rest is small slabs) */
  size_t host_budget, host_used;
  size_t host_reserved;      /* taken out of host_budget for mtalloc's own memory (the host
                              * optimizer's, _mt_host_reserve), whole chunks */
  size_t host_reserved_bytes; /* what was asked, bytes */
  size_t committed;          /* bytes of address space handed to paged regions */

  uint64_t next_region_id;
  uint64_t epoch;
  uint64_t ra_window;        /* readahead.c: the epoch of the last read-ahead pass; 0 = none */
  unsigned runahead;         /* MT_RUNAHEAD: launches queued ahead at most, with the handoff on */
  unsigned run_head, run_n;  /* runahead.c: the ring of launch events, oldest at run_head */
  mt_handle_t run_ring[MT_RUNAHEAD_MAX];
  bool spill_window;         /* hosttier.c: this spill may take chunks of that window */
  uint64_t walks;            /* walks of the policy begun (_mt_region_held_in) */
  mt_handle_t h2d, d2h;      /* copy streams */
  mt_handle_t ev_fetch, ev_evict, ev_h2d;
  bool fetch_pending;        /* fetch copies issued (or deferred) since the last fence */
  bool h2d_unsynced;         /* fetch copies issued since the host last knew h2d idle */
  mt_handle_t h2d_mark;      /* an event recorded on h2d after the last fetch copy; 0 = none */
  struct mt_deferred_copy { uintptr_t dst, src; } *defer; /* fetch copies not issued yet */
  size_t ndefer, cap_defer;

  mt_chunk_t retained;       /* sentinel of the retained list */
  mt_region_t *pending;      /* deferred frees (cuMemFreeAsync) */
  mt_region_t *fresh;        /* paged regions allocated since the last launch (host mappings) */
  bool fresh_warned;         /* the host budget left a fresh chunk unbacked once */

  /* smallpool.c */
  uintptr_t *small_free[MT_SMALL_CLASSES];
  size_t small_nfree[MT_SMALL_CLASSES], small_cap[MT_SMALL_CLASSES];
  int small_classes;
  size_t small_min;
  void *small_state;

  /* streams.c */
  mt_stream_ent_t **streams; /* index -> entry; [0] unused */
  uint32_t nstreams, cap_streams;
  uint64_t streams_gen;      /* bumped whenever checkpoints are popped (streams.c) */
  uint64_t reaped_sig;       /* _mt_streams_progress when the pending list was last walked (alloc.c) */
  mt_handle_t *event_pool;
  size_t nevents, cap_events;

  mt_physpool_t pool;        /* physpool.c */
  uint64_t live[4];          /* data bytes of live allocations per tier (CH_DEVICE, CH_HOST,
                              * CH_NVME; small ones on the device): what a trace's residency
                              * replays (stats live_*_bytes) */
  struct mt_nvtier *nv;      /* tier_nvme.c; NULL: no NVMe tier */
  struct mt_prefetch *pf;    /* prefetch.c; NULL: demand fetching only */
  uint64_t clock;            /* prefetch.c: launches seen, the unit of next-use dues */
  struct mt_readahead *ra;   /* readahead.c; NULL: none yet (made at the first launch) */
  unsigned ra_depth;         /* MT_READAHEAD_DEPTH; 0: no read-ahead */
  unsigned pf_lead;          /* MT_PREFETCH_LEAD: largest lead in launches (prefetch.c); 0: none */
  unsigned pf_free;          /* MT_PREFETCH_FREE: launches beyond the depth prefetched into free
                                memory (prefetch.c); 0: none */
  size_t pf_mem;             /* MT_PREDICTOR_MEM: the predictor's memory bound (prefetch.c) */
  bool pf_pace;              /* MT_PREFETCH_PACE: a prefetch starts only on an idle h2d link */
  bool pf_nowait;            /* MT_PREFETCH_WAIT=off: a prefetch never waits for queued launches */
  struct mt_spillwrite *sw;  /* spillwrite.c; NULL: none yet (made at the first launch) */
  /* write-behind (writebehind.c): batches of copies that clean dirty chunks
   * ahead of their eviction, oldest first; ids grow, done_id: all up to it
   * done. A batch names its chunks still waiting for it (NULL: cancelled). */
  struct mt_clean_batch {
    uint32_t id;
    mt_handle_t ev;
    struct mt_chunk *cs[32]; /* EVICT_BATCH */
  } clean_ring[8]; /* MT_CLEAN_RING */
  unsigned clean_head, clean_n;
  uint32_t clean_next_id, clean_done_id;
  size_t wb_stock;           /* chunks whose write-behind copy is in flight or done and not
                              * used by an eviction yet (clean_batch != 0 or wbclean) */
  unsigned wb_horizon;       /* MT_WRITEBEHIND_HORIZON (prefetch.c); 0: the window's lack */
  bool prefetching;          /* the fetches being made are a prefetch's */
  uint8_t handoff;           /* MT_HANDOFF (0 auto, 1 on, 2 off): freed regions' memory reused
                              * in stream order */
  bool handoff_fill;         /* the read-ahead runs: MT_HANDOFF=auto turns on for good once
                              * host memory is full (handoff.c) */
  bool host_filled;          /* with an NVMe tier, host memory has been full (hosttier.c) or a
                              * chunk has gone to NVMe (_mt_live_move) */
  bool ho_trial_runs;        /* MT_HANDOFF=auto with next-use estimates: it measures (handoff.c) */
  bool ho_trial_on;          /* and the measured choice (ho_trial) has it on now */
  mt_trial_t ho_trial;       /* on against off, each timed over one period (handoff.c);
                              * run where the period is learned (next-use estimates) */
  mt_handle_t ho_marks[MT_TRIAL_SLOTS]; /* its timing events, made on first use */
  uint64_t ho_mark_ns[MT_TRIAL_SLOTS];  /* and the host's time at each */
  bool ho_mark_bad[MT_TRIAL_SLOTS];     /* the slot's event could not be recorded */
  bool ho_host_timed;        /* the device cannot time events: the host's clock times */
  uint32_t op_si;            /* the stream of the launch being prepared (launch.c), 0 = none */
  size_t op_fresh;           /* bytes of its never-touched chunks not yet given memory handed
                              * from freed regions (handoff.c: only those take it) */

  /* graph.c */
  struct mt_graph_fp *graphs;
  size_t ncaptures;          /* entries of graphs still capturing */
};

extern mt_pager_t *_mt_pager;

/* ---- pager.c: the chunk state machine's pieces the files beside it use
 * (writebehind.c, hostwrite.c, prefetch.c) ---------------------------------- */
#define EVICT_BATCH 32       /* chunks per eviction batch (and per fetch run) */
#define _mt_chunk_of(n) ((mt_chunk_t *)(n)) /* the policy hands back the node, first in the chunk */

static inline uintptr_t _mt_chunk_va(const mt_pager_t *p, const mt_chunk_t *c) {
  return c->region->addr + (uintptr_t)c->index * p->chunk;
}
/* Data bytes of c: a region's last chunk may be partly beyond its size. */
static inline uint64_t _mt_chunk_data(const mt_pager_t *p, const mt_chunk_t *c) {
  uint64_t off = (uint64_t)c->index * p->chunk;
  return c->region->size - off < p->chunk ? c->region->size - off : p->chunk;
}
/* Work in flight still uses r (with wait: the host waits until it does not). */
bool _mt_region_held(mt_pager_t *p, mt_region_t *r, bool wait);
/* _mt_region_held(p, r, false), remembered for one walk of the policy
 * (walk = ++p->walks when it begins): a held region's chunks, met one by
 * one, cost one query, not one each (a replay of Inception-v3 spent 70%
 * of its time in the queries of eviction walks). A hold that ends during
 * the walk is seen by the next one. */
static inline bool _mt_region_held_in(mt_pager_t *p, mt_region_t *r, uint64_t walk) {
  if (r->held_walk == walk) return true;
  if (!_mt_region_held(p, r, false)) return false;
  r->held_walk = walk;
  return true;
}
/* Makes `bytes` of the host budget free: host copies that device chunks
 * keep give way first (they become dirty; fetches that may still read them
 * are finished first), then, with spill and an NVMe tier, HOST chunks move
 * to NVMe. 0 when the room is there, -ENOMEM when not (a failed spill said
 * why), or a copy stream's error. */
int _mt_host_room(mt_pager_t *p, size_t bytes, bool spill);
/* Moves at least `need` HOST chunks (a batch at least) to NVMe, chosen by
 * the host tier's policy among those the operation being prepared does not
 * use (a chunk whose NVMe copy is valid costs no write). 0, or -errno when
 * none moved. */
int _mt_host_spill(mt_pager_t *p, size_t need);
/* A host copy for c (contents undefined); spill: host chunks may go to
 * NVMe to make room. 0 or -ENOMEM. */
int _mt_host_get_ex(mt_pager_t *p, mt_chunk_t *c, bool spill);
/* Gives c's host copy back to the pool (c is not HOST). */
void _mt_host_release(mt_pager_t *p, mt_chunk_t *c);
/* Takes c's host slot away for good: a transfer that may still write it
 * (a read or copy given up, nothing to wait on) must not reach whoever the
 * pool would hand it to next. It stays counted in host_used, never back
 * in the pool; c has no host copy after. */
void _mt_host_abandon(mt_chunk_t *c);
void _mt_retained_link(mt_pager_t *p, mt_chunk_t *c);
void _mt_retained_unlink(mt_chunk_t *c);
/* c moves between tiers (CH_*): the live counts follow; trace_it records a
 * placement no other record shows. */
void _mt_live_move(mt_pager_t *p, mt_chunk_t *c, int from, int to, bool trace_it);
/* The live tier counts into the stats (and their peaks). */
void _mt_live_publish(mt_pager_t *p);
/* r leaves the list of regions not yet backed (host mappings: backed by the
 * next launch, _mt_back_fresh). */
void _mt_fresh_unlink(mt_pager_t *p, mt_region_t *r);

// alloc.c
/* Destroys deferred frees whose stream work has finished (with wait, all
 * that give device memory back: waiting for one whose memory was handed on
 * would gain nothing). */
void _mt_reap_pending(mt_pager_t *p, bool wait);
/* Waits, oldest first, for the stream work of freed regions that hold
 * device memory until their chunks cover need, then destroys every pending
 * region whose work is done. */
void _mt_reap_for(mt_pager_t *p, size_t need);
/* c became HOST: the host tier's policy (spill order) takes it; and c
 * leaves the HOST state. */
void _mt_host_tier_in(mt_pager_t *p, mt_chunk_t *c);
void _mt_host_tier_out(mt_pager_t *p, mt_chunk_t *c);
/* c (DEVICE or HOST) is written: its host or NVMe copy is stale, and any
 * write-behind copy in flight no longer makes it clean. */
void _mt_set_dirty(mt_pager_t *p, mt_chunk_t *c);
/* A NONE or NVME chunk gets a host copy (read back from NVMe), mapped at
 * its address with host mappings: HOST. 0 or -errno. */
int _mt_chunk_host_back(mt_pager_t *p, mt_chunk_t *c);
void _mt_resident_changed(mt_pager_t *p);
/* Level 3 (MT_CHECK_INVARIANTS): r's counters agree with its chunks. */
void _mt_check_region(const mt_pager_t *p, const mt_region_t *r);
/* Copies n bytes on stream s and waits for them (the pager's own event). */
int _mt_copy_wait(mt_pager_t *p, uintptr_t dst, uintptr_t src, size_t n, mt_handle_t s);

/* ---- writebehind.c ----------------------------------------------------------- */
#define MT_CLEAN_RING 8      /* write-behind batches in flight at most */
_Static_assert(sizeof(((mt_pager_t *)0)->clean_ring) / sizeof(((mt_pager_t *)0)->clean_ring[0]) == MT_CLEAN_RING &&
                   sizeof(((mt_pager_t *)0)->clean_ring[0].cs) / sizeof(mt_chunk_t *) == EVICT_BATCH,
               "the write-behind ring holds MT_CLEAN_RING batches of EVICT_BATCH chunks");
/* Retires the write-behind batches known done (no wait): their chunks are
 * clean now (wbclean), cheap to evict. */
void _mt_wb_poll(mt_pager_t *p);
/* c's write-behind copy is done (with wait: waited for): c is clean now,
 * its host copy holds its bytes. */
bool _mt_wb_cleaned(mt_pager_t *p, mt_chunk_t *c, bool wait);
/* A write-behind copy from c may still be in flight: waits for it before
 * c's device memory or host slot is reused. */
void _mt_wb_settle(mt_pager_t *p, mt_chunk_t *c);
/* Before work on app stream s writes c: cancels c's cleaning, and where
 * its write-behind copy may still be in flight, s waits for it on the
 * device (a kernel must not overwrite bytes a copy is still reading).
 * Returns 0 or -errno. */
int _mt_wb_fence(mt_pager_t *p, mt_chunk_t *c, mt_handle_t s);

/* What mtalloc can hold at once, what cuMemGetInfo reports as total: the
 * GPU budget, the host budget and the NVMe tier (its pages beyond a copy
 * of every device chunk, see tier_nvme.c), less one chunk kept free for swapping
 * (bringing a chunk back while the host is full needs a place for the
 * victim before the fetched chunk's host copy can be given up). */
static inline size_t _mt_capacity(const mt_pager_t *p) {
  return p->budget + p->host_budget + _mt_nv_capacity(p) - p->chunk;
}

/* Bytes of the capacity taken: paged regions (whole chunks) and the small
 * pool's slabs (small slabs never leave the device; every small allocation
 * lies in one). Escaped regions are paged regions, counted once. */
static inline size_t _mt_held_bytes(const mt_pager_t *p) {
  return p->committed + (p->pinned - p->escaped);
}

/* Bytes a footprint needs resident beyond what is pinned anyway. */
static inline size_t _mt_region_bytes(const mt_pager_t *p, const mt_region_t *r) {
  if (r->kind == REG_SMALL || r->escaped) return 0;
  return (size_t)r->nchunks * p->chunk;
}

/* The region is all on the device, has nothing clean left to dirty, and was
 * put at the hot end of the policy a moment ago (within TOUCH_SLACK
 * operations), so making it resident again would change nothing: the fast
 * path nearly every launch of a training loop takes. */
#define TOUCH_SLACK 64
static inline bool _mt_region_hot(const mt_pager_t *p, const mt_region_t *r, bool write) {
  return r->kind == REG_SMALL ||
         (r->ndevice == r->nchunks && (!write || (r->nclean == 0 && r->nwb == 0)) && r->npf == 0 &&
          p->epoch - r->touched < TOUCH_SLACK &&
          /* next-use eviction: the use its chunks were filed for is still ahead */
          (!p->pol_ops->uses_due || r->due == 0 || r->due > p->clock));
}

/* Before a policy insert or touch of c: its next use, for a policy that
 * reads it (policy.h). */
static inline void _mt_set_due(mt_pager_t *p, mt_chunk_t *c) {
  if (p->pol_ops->uses_due || p->hpol_ops->uses_due) c->node.due = _mt_prefetch_due(p, c->region);
}

/* What evicting DEVICE chunk c costs (policy.h, MT_COST_*): a clean chunk
 * has a copy elsewhere; a dirty one of a spent region holds dead data,
 * dead soon (its memory comes back at the free) or long (it holds the
 * memory as long as a clean chunk would and costs no more: no copy is
 * needed of data no one reads). */
static inline uint8_t _mt_chunk_cost(const mt_chunk_t *c) {
  if (!c->dirty) return MT_COST_CHEAP;
  switch (c->region->spent) {
  case MT_SPENT_SOON: return MT_COST_DEAD;
  case MT_SPENT_LATE: return MT_COST_CHEAP;
  default: return MT_COST_DIRTY;
  }
}

/* Copies written ahead of a region stop once more of them were made stale
 * (a kernel, host or optimizer write dropped them) than spills used:
 * ahead_score at or below this. */
#define MT_AHEAD_STOP (-2)

/* A HOST chunk's cost in the spill order (which does not weigh it, but
 * walks the dirty ones apart: the candidates for spillwrite.c's copies
 * written ahead): DIRTY while its spill would have to write it (no valid
 * NVMe copy, no write in flight) and its region's copies ahead pay. */
static inline uint8_t _mt_host_cost(const mt_chunk_t *c) {
  bool written = c->sw != 0 || (c->nv != NULL && _mt_nvme_chunk_valid(c->nv));
  return written || c->region->ahead_score <= MT_AHEAD_STOP ? MT_COST_CHEAP : MT_COST_DIRTY;
}

/* c's cost may have changed while it sat in a policy: on the device
 * (written, cleaned, its region spent) or in the spill order (a write
 * began or finished, its NVMe copy was dropped, its region's copies ahead
 * stopped paying). Refiled where it sits; nothing when it sits nowhere. */
static inline void _mt_recost(mt_pager_t *p, mt_chunk_t *c) {
  if (!c->node.linked) return;
  const bool dev = c->state == CH_DEVICE;
  if (!dev && (c->state != CH_HOST || p->nv == NULL)) return;
  uint8_t k = dev ? _mt_chunk_cost(c) : _mt_host_cost(c);
  if (k == c->node.cost) return;
  c->node.cost = k;
  if (dev) p->pol_ops->recost(p->pol, &c->node);
  else p->hpol_ops->recost(p->nv->hpol, &c->node);
}

/* One walk of a policy that collects up to max eligible nodes, in its
 * order, without taking them out (the walk's own veto is `ok`): a caller
 * that needs several victims walks past the ineligible ones once, not
 * once per victim (the host tier's spills: the regions the launch and
 * the read-ahead window use sit at the cold end, 1,600 chunks a walk on
 * the 100B plan's replays). */
typedef struct mt_collect {
  mt_policy_eligible_fn ok;
  void *arg;
  mt_chunk_t **out;
  int n, max;
} mt_collect_t;

static inline bool _mt_collect(mt_policy_node_t *n, void *arg) {
  mt_collect_t *k = arg;
  if (!k->ok(n, k->arg)) return false;
  k->out[k->n++] = _mt_chunk_of(n);
  return k->n >= k->max; /* true ends the walk */
}

/* c's copy written ahead was used (a spill or a clean eviction found it
 * valid: no write) or made stale (dropped first); its region's score
 * follows, and its chunks are refiled when it crosses MT_AHEAD_STOP.
 * Learned, not decided by kind: on the 100B plan's 1.5 TiB-host winner
 * this cut the NVMe writes of two steps from 1,505 to 1,002 GB at the
 * same step time, where stopping every copy of the regions the host
 * rewrites (the optimizer's weights: they are mostly spilled on) cut
 * them to 727 GB but cost 0.75% of the step. */
static inline void _mt_ahead_outcome(mt_pager_t *p, mt_chunk_t *c, bool used) {
  c->ahead = false;
  mt_region_t *r = c->region;
  if (r->freed) return;
  bool was = r->ahead_score <= MT_AHEAD_STOP;
  if (used && r->ahead_score < 4) r->ahead_score++;
  if (!used && r->ahead_score > -4) r->ahead_score--;
  if (was == (r->ahead_score <= MT_AHEAD_STOP)) return;
  for (uint32_t i = 0; i < r->nchunks; i++) _mt_recost(p, &r->chunks[i]);
}

/* Whether r is spent (above). */
static inline bool _mt_prefetch_spent(const mt_pager_t *p, const mt_region_t *r) {
  (void)p;
  return r->spent != MT_SPENT_NO;
}

/* Before a device policy insert or touch of c: its due and its cost. */
static inline void _mt_set_dev_order(mt_pager_t *p, mt_chunk_t *c) {
  _mt_set_due(p, c);
  c->node.cost = _mt_chunk_cost(c);
}


/* c leaves the write-behind stock (written since, evicted, or its host
 * copy or region gone): its copy no longer makes it clean; the copy itself
 * may still be in flight (wb_batch). Inline for the common case, nothing
 * to cancel: set_dirty calls it for every chunk a launch writes. */
void _mt_wb_unstock(mt_pager_t *p, mt_chunk_t *c);
static inline void _mt_wb_cancel(mt_pager_t *p, mt_chunk_t *c) {
  if (c->clean_batch != 0 || c->wbclean) _mt_wb_unstock(p, c);
}

/* c's write-behind copy is known done (or waited for). */
static inline void _mt_wb_clear(mt_chunk_t *c) {
  if (c->wb_batch == 0) return;
  c->wb_batch = 0;
  c->region->nwb--;
}

/* ---- runahead.c ----------------------------------------------------------
 * With the handoff on, at most MT_RUNAHEAD launches queued ahead of the GPU
 * (see runahead.c). Before a launch is prepared: waits while the ring is
 * full; 0 or the driver's error. After it is queued on its stream
 * (p->op_si): records its event. */
int _mt_runahead_wait(mt_pager_t *p);
void _mt_runahead_record(mt_pager_t *p);
/* A prefetch found no room free of queued launches: waits for the oldest
 * queued launch while more than a quarter of MT_RUNAHEAD would stay queued.
 * Whether one ended (room may be free now); false when it may not wait. */
bool _mt_runahead_yield(mt_pager_t *p);

/* Takes an event from the pool (or creates one); 0 on failure. */
mt_handle_t _mt_event_get(mt_pager_t *p);
void _mt_event_put(mt_pager_t *p, mt_handle_t e);

/* Makes every chunk of r resident for use by an operation on app stream s
 * (the stream waits for the fetch copies). Returns 0 or -errno. */
int _mt_region_resident(mt_pager_t *p, mt_region_t *r, mt_handle_t s, bool write);
/* Makes the chunks covering [addr, addr+len) of r resident; overwrite: the
 * range will be entirely rewritten, so a chunk it covers whole need not be
 * fetched. */
int _mt_range_resident(mt_pager_t *p, mt_region_t *r, uintptr_t addr, size_t len, mt_handle_t s,
                       bool write, bool overwrite);
/* Keeps the chunks covering [addr, addr+len) of r from being evicted while
 * the current operation (pager epoch) is prepared: one piece of a copy or
 * set, so that a region larger than the budget is moved chunk by chunk
 * (marking the whole region, as a launch does, would leave nothing of it
 * to evict). */
void _mt_range_protect(mt_pager_t *p, mt_region_t *r, uintptr_t addr, size_t len);
/* Issues the fetch copies deferred since the last call (run_to_device defers
 * them so that an operation's mapping changes all come before its copies).
 * _mt_fetch_fence calls it; a caller that gives up on an operation after
 * making something resident must call it too. 0 or -errno. */
int _mt_fetch_flush(mt_pager_t *p);
/* Waits until the fetches issued since the last call are ordered before
 * work on stream s (cuStreamWaitEvent); 0 or -errno. */
int _mt_fetch_fence(mt_pager_t *p, mt_handle_t s);
/* Records that r is used by the operation just forwarded on stream index si
 * with number seq. */
void _mt_region_hold(mt_pager_t *p, mt_region_t *r, uint32_t si, uint64_t seq);
/* The region containing addr, under the lock; NULL when none. */
mt_region_t *_mt_region_of(mt_pager_t *p, uintptr_t addr);
/* Evicts until need more bytes fit in the budget (chunks of the operation
 * being prepared are never chosen). A launch asks once for its whole
 * footprint, so that its evictions are one batch: one wait for their
 * copies and one unmap fence (unmapfence.c) rather than one per region.
 * 0, or -E2BIG when nothing more can be evicted. */
int _mt_make_room(mt_pager_t *p, size_t need);
/* Takes bytes of the budget for memory that never leaves the device (small
 * slabs), evicting to make room. 0 or -ENOMEM. */
int _mt_pager_reserve_pinned(mt_pager_t *p, size_t bytes);
/* Lets the launch being prepared use r where it lies (host-mapped launch,
 * launch.c): its DEVICE chunks stay (protected by the epoch, marked dirty),
 * its HOST chunks are reached through their host mapping, and its chunks
 * that were never touched get a host copy mapped at their address. Adds
 * the bytes the kernel will reach in host memory to *host_bytes. Requires
 * p->host_reach. 0 or -errno (-ENOMEM: the host budget is full). */
int _mt_region_use_in_place(mt_pager_t *p, mt_region_t *r, mt_handle_t s, size_t *host_bytes);
/* Gives every chunk that no one has touched, of the regions allocated since
 * the last launch, a host copy mapped at its address (host mappings only),
 * so that a kernel reaching it through a pointer no scan sees is slow, not
 * wrong. Called before each launch is forwarded. */
void _mt_back_fresh(mt_pager_t *p);
/* Write-behind: copies up to `bytes` of the coldest dirty device chunks
 * that no work in flight holds (and that the operation being prepared does
 * not use) to host copies, without waiting, so that their eviction later
 * costs no copy. Only free host slots are used. Returns the bytes started.
 * Each chunk copied joins the stock (p->wb_stock) until an eviction uses
 * its copy or it leaves (_mt_wb_cancel). With after != 0 (the launch clock
 * of the first eviction the copies are for), chunks whose region is
 * expected in use before then are passed over. */
size_t _mt_write_behind(mt_pager_t *p, size_t bytes, uint64_t after);
/* Marks r escaped: made resident now, never evicted. */
int _mt_region_escape(mt_pager_t *p, mt_region_t *r, mt_handle_t s);

static inline bool _mt_in_range(const mt_pager_t *p, uintptr_t a) {
  return a - p->va_base < p->va_size;
}
/* verify.c, asked by make_room_ex before it drops clean chunk c without a
 * copy: with MT_VERIFY_CLEAN on, compares c's device copy with its host
 * copy. 0 when they agree or nothing was checked (option off, virtual
 * clock, capture active); 1 when they differ (logged as an error naming
 * the region and offset); <0 -errno when they could not be read. On
 * anything but 0 the caller copies c as if dirty. */
int _mt_verify_clean(mt_pager_t *p, mt_chunk_t *c);

/* ---- smallpool.c ------------------------------------------------------------ */
int _mt_small_alloc(mt_pager_t *p, size_t size, uintptr_t *addr, int *cls);
void _mt_small_free(mt_pager_t *p, uintptr_t addr, int cls);
size_t _mt_small_class_size(const mt_pager_t *p, int cls);
int _mt_small_init(mt_pager_t *p, size_t small_limit);

/* ---- graph.c -------------------------------------------------------------------
 * Footprints of work captured into CUDA graphs: kept by region address and
 * looked up again at cuGraphLaunch, when the regions must be resident. */
bool _mt_capturing(mt_pager_t *p, mt_handle_t s);
/* True while any stream capture is active, on any thread: no event may be
 * queried or waited for, and captured work changes no mapping. */
bool _mt_capture_active(mt_pager_t *p);
void _mt_capture_add(mt_pager_t *p, mt_handle_t s, uintptr_t region_addr);
/* Adds every region that [a, a+n) touches to the footprint captured on s. */
void _mt_capture_range(mt_pager_t *p, mt_handle_t s, uintptr_t a, size_t n);
/* The program frees addr: 1 when a graph keeps it (allocated during its
 * capture; freed when the graph and its execs are gone), -EINVAL when it
 * was already freed so, 0 to free it now. */
int _mt_graph_keep(mt_pager_t *p, uintptr_t addr);
/* launch.c: makes the regions at addrs resident, forwards, holds them;
 * write[i] false: the work only reads through addrs[i] (write NULL: it may
 * write through every one); func names the work for the prefetcher (a
 * function id, stable across iterations; 0: not shown to it); what names
 * it in messages ("graph launch"). */
int _mt_launch_regions(mt_pager_t *p, uintptr_t *addrs, const bool *write, size_t n, mt_handle_t s,
                       uint64_t func, mt_forward_fn fwd, void *ctx, const char *what);

#endif
