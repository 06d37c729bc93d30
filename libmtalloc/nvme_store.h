/*
 * nvme_store.h - the NVMe tier's store: chunks of bytes kept in 4 KiB pages
 * of O_DIRECT files, moved with io_uring, every page checksummed.
 *
 * The store knows nothing of regions, tiers or policies. Its callers are the
 * pager (a later change: host victims go to NVMe, fetches come back through
 * a staging buffer) and the virtual-clock device (replay: the same store, its
 * I/O turned into time on NVMe links). Both use it the same way:
 *
 *   _mt_nvme_open(&cfg, &s)                 once; -errno and one log line
 *                                           naming the directory and cause
 *                                           when the tier cannot be had
 *   _mt_nvme_chunk_alloc(s, bytes, ...)     pages for one chunk (all or none)
 *   _mt_nvme_staging_alloc(s, bytes, &buf)  4 KiB-aligned buffer on the
 *                                           store's NUMA node, counted
 *   _mt_nvme_write(s, c, buf, &op)          asynchronous; buf must stay
 *   _mt_nvme_read(s, c, buf, &op)           untouched until op completes
 *   _mt_nvme_poll(s, min, timeout_ms)       reaps completions, submits more;
 *                                           op->done() runs from here
 *   _mt_nvme_wait(s, &op, timeout_ms)       bounded wait for one op
 *   _mt_nvme_chunk_free(s, c)               pages back to the free list
 *
 * Valid copies: a chunk is valid once a write of it has completed without
 * error, and stays valid until it is written again, invalidated
 * (_mt_nvme_chunk_invalidate: the GPU copy changed) or freed. A chunk whose
 * NVMe copy is still valid can be dropped from the host without a write;
 * that decision is the pager's, the flag is here.
 *
 * Buffers: every buffer handed to a read or write is 4 KiB-aligned (O_DIRECT
 * DMA goes straight to and from it, no copy); its length is the chunk's byte
 * count, not rounded: a chunk's last partial page goes through a private
 * bounce page, so the padding after the data is never read from the
 * caller's memory nor written into it. Staging buffers from
 * _mt_nvme_staging_alloc are bounded by cfg.staging_bytes and reported by
 * _mt_nvme_staging_bytes, so the caller counts them inside MT_MAX_HOST;
 * the caller pins them (cuMemHostRegister) where it DMAs to the GPU.
 *
 * Errors (each also logged once, naming what the caller needs):
 *   -ENOSPC   page allocation past the cap, or a write the disk refused:
 *             names the directory and how many more bytes were needed
 *   -EIO      a transfer still failing or short after cfg.retries retries:
 *             names the file and the byte offset
 *   -EBADMSG  a page whose checksum does not match: names the chunk's
 *             region and offset; that page of the destination is cleared,
 *             so corrupt bytes are never delivered
 *   -ENODATA  read of a chunk that holds no valid copy
 *   -ETIMEDOUT a wait past its bound: a diagnostic names the oldest request,
 *             and the op is given up (_mt_nvme_abandon)
 *   -EBUSY    free or write of a chunk with an operation in flight, or a
 *             read or write of one whose given-up request the drive has
 *             not answered yet
 * After an error the source of a write is untouched (the caller still holds
 * the data: nothing is lost) and the chunk is not valid.
 *
 * Threading: a store has one owner at a time (the pager calls it under its
 * lock or from its I/O thread). The store starts no thread; no thread blocks
 * per request: the ring carries up to queue_depth reads and writes together.
 */
#ifndef MT_NVME_STORE_H
#define MT_NVME_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MT_NVME_PAGE 4096u

typedef struct _mt_nvme _mt_nvme_t;

typedef struct _mt_nvme_cfg {
  const char *dirs;         /* MT_OFFLOAD_DIR: one or more directories, ':' separated, striped */
  uint64_t max_bytes;       /* MT_MAX_NVME: disk cap, bytes; 0 = free space at open less a margin */
  uint32_t queue_depth;     /* MT_NVME_QUEUE_DEPTH: requests in flight; 0 = default (32) */
  uint64_t request_bytes;   /* MT_NVME_REQUEST: largest request and stripe unit, bytes,
                             * multiple of 4 KiB; 0 = default (1 MiB) */
  uint64_t staging_bytes;   /* bound on staging buffers, bytes; 0 = queue_depth * request_bytes */
  int numa_node;            /* node of staging buffers; -1 = local (the caller passes the GPU's) */
  uint32_t retries;         /* retries of an EIO or short transfer; 0 = default (3) */
  uint32_t wait_ms;         /* bound of one wait on the ring before a diagnostic; 0 = 10000 */
  bool simulate;            /* mt-trace replay: the page allocator, caps and stats as usual,
                             * but no files and no I/O: dirs is ignored, max_bytes must be
                             * given, and every read or write completes inside the call that
                             * starts it (the virtual clock charges its time) */
} _mt_nvme_cfg_t;

/* One chunk's pages. Opaque outside the store; the caller names it. */
typedef struct _mt_nvme_chunk _mt_nvme_chunk_t;

/* One asynchronous read or write, caller-owned (embed it in the move it
 * belongs to). The caller sets done and arg; the rest is the store's until
 * completion. */
typedef struct _mt_nvme_op _mt_nvme_op_t;
struct _mt_nvme_op {
  void (*done)(_mt_nvme_op_t *op);  /* called from poll/wait at completion; may be NULL */
  void *arg;                        /* caller's */
  int result;                       /* 0 or -errno, set before done() runs */
  bool busy;                        /* true from submit until completion */
  /* private to nvme_store.c */
  _mt_nvme_chunk_t *chunk;
  uint8_t *buf;
  bool write;
  uint32_t ext, ext_page;           /* next piece to issue: extent, page within it */
  uint32_t page;                    /* chunk page index of that piece */
  uint32_t inflight;                /* requests on the ring */
  _mt_nvme_op_t *next;              /* queue of ops with pieces left to issue */
  bool orphan;                      /* a given-up op's stand-in, owned by the store */
};

typedef struct _mt_nvme_stats {
  uint64_t bytes_read, bytes_written;  /* data bytes delivered / stored */
  uint64_t retries;                    /* resubmissions after EIO or short transfers */
  uint64_t checksum_errors, io_errors, nospace_errors;
  uint64_t pages_total, pages_free;    /* 4 KiB pages under the cap */
} _mt_nvme_stats_t;

/* The configuration the options table asks for: MT_OFFLOAD_DIR,
 * MT_MAX_NVME, MT_NVME_QUEUE_DEPTH, MT_NVME_REQUEST, and MT_NUMA_NODE, or
 * gpu_node (the node of the GPU's PCI bus id, -1 if unknown) when that is
 * -1. cfg->dirs points into the options table. Returns false when
 * MT_OFFLOAD_DIR is empty (no NVMe tier). */
bool _mt_nvme_cfg_from_options(_mt_nvme_cfg_t *cfg, int gpu_node);

/* Opens the store: checks each directory (missing, not a directory, not
 * writable, no O_DIRECT), creates its file 0600 inside a private mkdtemp
 * directory, unlinks both at once (nothing is left after exit or a crash),
 * reserves the cap with fallocate, sets up the ring and the bounce pages.
 * Returns 0 and *out, or -errno after one log line naming the path and the
 * cause; then the caller runs without the tier. The caller owns *out. */
int _mt_nvme_open(const _mt_nvme_cfg_t *cfg, _mt_nvme_t **out);
/* Waits (bounded) for requests on the ring, then frees everything. Chunks
 * still allocated are freed with it. Returns 0 or -ETIMEDOUT. */
int _mt_nvme_close(_mt_nvme_t *s);

/* Pages for bytes (> 0) of data: 0 and *out, -ENOSPC (past the cap; logged
 * with how much is missing) or -ENOMEM. region and offset name the chunk in
 * error messages. The pages need not be contiguous; a run lasts at most one
 * request and consecutive runs go to the next directory (striping). */
int _mt_nvme_chunk_alloc(_mt_nvme_t *s, uint64_t bytes, uint64_t region, uint64_t offset,
                         _mt_nvme_chunk_t **out);
/* Returns the pages to the free list: 0, or -EBUSY with an op in flight;
 * with only a given-up op's requests in flight, 0, and the pages go back
 * when the drive answers (_mt_nvme_abandon). */
int _mt_nvme_chunk_free(_mt_nvme_t *s, _mt_nvme_chunk_t *c);
bool _mt_nvme_chunk_valid(const _mt_nvme_chunk_t *c);
void _mt_nvme_chunk_invalidate(_mt_nvme_chunk_t *c);
uint64_t _mt_nvme_chunk_bytes(const _mt_nvme_chunk_t *c);

/* Queue a write of the chunk's bytes from src (4 KiB-aligned) or a read into
 * dst (4 KiB-aligned, chunk bytes long). Returns 0 (op busy; completion is
 * reported through poll/wait), -EINVAL (misaligned), -EBUSY (chunk or op
 * busy) or -ENODATA (read of a chunk without a valid copy). */
int _mt_nvme_write(_mt_nvme_t *s, _mt_nvme_chunk_t *c, const void *src, _mt_nvme_op_t *op);
int _mt_nvme_read(_mt_nvme_t *s, _mt_nvme_chunk_t *c, void *dst, _mt_nvme_op_t *op);
/* Submits what fits on the ring, reaps completions, runs done() of finished
 * ops. Waits at most timeout_ms for min_ops ops to finish (0: do not wait).
 * Returns the number of ops finished, or -ETIMEDOUT after a diagnostic. */
int _mt_nvme_poll(_mt_nvme_t *s, unsigned min_ops, uint32_t timeout_ms);
/* Polls until op is finished or timeout_ms (0: cfg.wait_ms) passes. Returns
 * op->result, or -ETIMEDOUT after a diagnostic; then op is given up
 * (_mt_nvme_abandon), so waiting on it again returns -ETIMEDOUT at once. */
int _mt_nvme_wait(_mt_nvme_t *s, _mt_nvme_op_t *op, uint32_t timeout_ms);
/* Gives up a busy op the caller will not wait for any longer: the op is
 * the caller's again at once (busy false, result -ETIMEDOUT; its memory may
 * be reused or go out of scope), no further piece of it is issued, and a
 * stand-in the store owns takes its requests still on the ring. Its buffer
 * stays the drive's until those finish -- the caller never reuses a read's
 * destination (a late transfer may still land in it) -- and so do the
 * chunk's pages: the chunk stays busy (-EBUSY) until then, is never valid
 * after a given-up write, and a _mt_nvme_chunk_free meanwhile takes effect
 * when the drive answers. No-op on an op that is not busy. */
void _mt_nvme_abandon(_mt_nvme_t *s, _mt_nvme_op_t *op);
/* Requests on the ring plus pieces queued behind them (0: idle). */
unsigned _mt_nvme_pending(const _mt_nvme_t *s);

/* A staging buffer of bytes (rounded up to 4 KiB) on the store's node, or
 * -ENOMEM when the bound would be passed. The store owns it until
 * _mt_nvme_staging_free or close. */
int _mt_nvme_staging_alloc(_mt_nvme_t *s, size_t bytes, void **out);
void _mt_nvme_staging_free(_mt_nvme_t *s, void *buf);
/* Host bytes the store holds: staging buffers, bounce pages (count these
 * inside MT_MAX_HOST). Checksums and page maps are in stats, not here. */
uint64_t _mt_nvme_staging_bytes(const _mt_nvme_t *s);

void _mt_nvme_get_stats(const _mt_nvme_t *s, _mt_nvme_stats_t *st);
/* Number of files (one per directory) and the fd of file i: for tests and
 * the benchmark's page-cache check (mincore on a mapping of it). */
unsigned _mt_nvme_nfiles(const _mt_nvme_t *s);
int _mt_nvme_fd(const _mt_nvme_t *s, unsigned i);
/* Directory holding file i (as given in cfg.dirs). */
const char *_mt_nvme_dir(const _mt_nvme_t *s, unsigned i);
/* The pages of c, in data order: runs of (file, first page, count) through
 * *file, *page and *npages for run i; false past the last run. For tests. */
bool _mt_nvme_chunk_run(const _mt_nvme_chunk_t *c, unsigned i, unsigned *file, uint64_t *page,
                        uint32_t *npages);

/* ---- nvme_sum.c: the page checksum ----------------------------------------
 * XXH3_64bits(p, n), through an AVX2 build of xxh3 where the CPU has it
 * (same value either way). _mt_nvme_sum_portable is the baseline build, for
 * tests that compare the two. */
uint64_t _mt_nvme_sum(const void *p, size_t n);
uint64_t _mt_nvme_sum_portable(const void *p, size_t n);

/* ---- nvme_fault.c: fault injection (test builds only) ---------------------
 * Compiled in when nvme_store.c is built with -DMT_FAULT_INJECT (the test
 * programs in tests/nvme/ compile it that way; the library never is). Each
 * arm makes the next `count` requests of the kind fail as asked, after
 * `skip` matching requests went through untouched. */
typedef enum _mt_nvme_fault {
  MT_NVME_FAULT_EIO,     /* read or write completes with -EIO */
  MT_NVME_FAULT_SHORT,   /* read or write completes short (half, 4 KiB-aligned) */
  MT_NVME_FAULT_NOSPC,   /* write completes with -ENOSPC */
  MT_NVME_FAULT_FLIP,    /* read completes with one bit flipped in its data */
  MT_NVME_FAULT_STALL,   /* completion ignored, request reissued: a device that does not answer */
  MT_NVME_FAULT__COUNT
} _mt_nvme_fault_t;
void _mt_nvme_fault_arm(_mt_nvme_fault_t f, uint32_t skip, uint32_t count);
void _mt_nvme_fault_reset(void);
/* True when this request should get fault f (consumes one). */
bool _mt_nvme_fault_take(_mt_nvme_fault_t f);
/* Faults injected so far of kind f. */
uint32_t _mt_nvme_fault_injected(_mt_nvme_fault_t f);

#endif
