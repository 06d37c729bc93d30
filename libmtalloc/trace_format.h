/*
 * trace_format.h - the on-disk layout of an mtalloc trace (MT_TRACE=path),
 * version 2. docs/trace-format.md describes every field; this header is the
 * definition both the recorder (trace.c) and every reader use. Readers also
 * read version 1, which differs only in LAUNCH records: no access kinds
 * after the spans (every span counts as MT_ACC_UNKNOWN).
 *
 * A trace is a header followed by records. All integers are little-endian;
 * every record starts with mt_trace_rec_t and its total size is a multiple
 * of 8, so records stay aligned. Readers must check every size against the
 * bytes that remain and the type's fixed size before looking inside
 * (trace_read.c does, and reports the byte offset of anything wrong).
 *
 * Times are nanoseconds on the clock named in the header (CLOCK_MONOTONIC
 * for recorded traces, a virtual clock starting at 0 for synthetic ones).
 * Regions are named by id (allocation order, from 1), never by address, so
 * traces from different runs compare. Streams are small integers (0 = the
 * legacy default stream).
 */
#ifndef MT_TRACE_FORMAT_H
#define MT_TRACE_FORMAT_H

#include <stddef.h>
#include <stdint.h>

#define MT_TRACE_MAGIC "MTTRACE\0"  /* 8 bytes */
#define MT_TRACE_VERSION 2       /* what writers write */
#define MT_TRACE_VERSION_MIN 1   /* the oldest version readers read */

enum mt_trace_clock {
  MT_TRACE_CLOCK_MONOTONIC = 1,   /* recorded: CLOCK_MONOTONIC ns */
  MT_TRACE_CLOCK_VIRTUAL = 2,     /* synthetic or imported: starts at 0 */
};

typedef struct mt_trace_header {
  char magic[8];            /* MT_TRACE_MAGIC */
  uint32_t version;         /* MT_TRACE_VERSION */
  uint32_t header_bytes;    /* sizeof(mt_trace_header_t) + options text, multiple of 8 */
  uint32_t clock;           /* enum mt_trace_clock */
  uint32_t flags;           /* 0 */
  uint64_t start_ns;        /* clock value at the first record (recorded traces) */
  uint64_t chunk_bytes;     /* the pager's chunk size */
  uint64_t gpu_budget;      /* MT_MAX_VRAM in force, bytes (0 = unknown) */
  uint64_t host_budget;     /* MT_MAX_HOST in force, bytes (0 = unknown) */
  uint64_t gpu_total;       /* device memory, bytes (0 = unknown) */
  char device[64];          /* device name, NUL-terminated */
  char source[32];          /* "mtalloc", "mt-trace synth", "mt-trace import-g10" */
  /* followed by (header_bytes - sizeof) bytes of options text:
   * "MT_NAME=value\n" lines, NUL padded */
} mt_trace_header_t;

_Static_assert(sizeof(mt_trace_header_t) == 160, "trace header layout");

typedef enum mt_trace_type {
  MT_TR_ALLOC = 1,
  MT_TR_FREE = 2,
  MT_TR_LAUNCH = 3,
  MT_TR_COPY = 4,
  MT_TR_FETCH = 5,
  MT_TR_EVICT = 6,
  MT_TR_STALL = 7,
  MT_TR_OPT_STEP = 8,
  MT_TR_ITER = 9,
  MT_TR_NAME = 10,
  MT_TR__COUNT
} mt_trace_type_t;

/* Every record starts with this. */
typedef struct mt_trace_rec {
  uint8_t type;             /* mt_trace_type_t */
  uint8_t flags;            /* per type, below */
  uint16_t thread;          /* recording thread, small integer */
  uint32_t size;            /* whole record in bytes, multiple of 8, >= the type's fixed size */
  uint64_t t_ns;            /* when it happened (for spans: the start) */
} mt_trace_rec_t;

/* MT_TR_ALLOC: a region was allocated. flags: MT_TRF_SMALL (packed, stays on the GPU). */
#define MT_TRF_SMALL 0x1
typedef struct mt_trace_alloc {
  mt_trace_rec_t h;
  uint64_t region;          /* id, from 1 */
  uint64_t bytes;           /* size asked for */
  uint32_t stream;          /* 0 unless stream-ordered */
  uint32_t pad;
} mt_trace_alloc_t;

/* MT_TR_FREE. flags: MT_TRF_ASYNC (stream-ordered). */
#define MT_TRF_ASYNC 0x1
typedef struct mt_trace_free {
  mt_trace_rec_t h;
  uint64_t region;
  uint32_t stream;
  uint32_t pad;
} mt_trace_free_t;

/* MT_TR_LAUNCH: a kernel (or graph) launch and its footprint, followed by
 * nfoot mt_trace_span_t, then (version 2) nfoot access kinds of one byte
 * each, zero padded to a multiple of 8. flags: MT_TRF_GRAPH. dur_ns: the
 * kernel's run time when known (synthetic and imported traces; 0 when
 * recorded, where the replay uses the time to the next launch on the same
 * stream).
 *
 * The kinds are a separate array rather than a span field so that a span
 * stays 24 bytes in both versions: every reader walks the spans the same
 * way, and only those that care about kinds look past them
 * (mt_trace_launch_kinds). */
#define MT_TRF_GRAPH 0x1
typedef struct mt_trace_span {
  uint64_t region;
  uint64_t offset;          /* bytes into the region */
  uint64_t bytes;
} mt_trace_span_t;

/* What the kernel does with a span. Bit 0 reads, bit 1 writes; 0 means
 * nobody said, which a consumer must treat as read-write (a recorded launch
 * without an application hint, every span of a version 1 trace). */
enum mt_trace_access {
  MT_ACC_UNKNOWN = 0,
  MT_ACC_READ = 1,          /* only read: the span's data is unchanged */
  MT_ACC_WRITE = 2,         /* only written (its old contents are not read) */
  MT_ACC_RW = 3,            /* read and written */
  MT_ACC__COUNT
};

typedef struct mt_trace_launch {
  mt_trace_rec_t h;
  uint64_t launch_id;       /* xxh3 of function, grid and footprint keys */
  uint64_t func;            /* function id (see MT_TR_NAME) */
  uint64_t dur_ns;
  uint32_t stream;
  uint32_t nfoot;           /* spans that follow */
  /* mt_trace_span_t foot[nfoot];
   * uint8_t kind[nfoot], zero padded to 8 (version 2) */
} mt_trace_launch_t;

/* Bytes of a LAUNCH record with nfoot spans, in version 2 / version 1. */
#define MT_TRACE_KINDS_BYTES(nfoot) (((uint64_t)(nfoot) + 7) & ~(uint64_t)7)
#define MT_TRACE_LAUNCH_BYTES(nfoot) \
  (sizeof(mt_trace_launch_t) + (uint64_t)(nfoot) * sizeof(mt_trace_span_t) + MT_TRACE_KINDS_BYTES(nfoot))
#define MT_TRACE_LAUNCH_BYTES_V1(nfoot) (sizeof(mt_trace_launch_t) + (uint64_t)(nfoot) * sizeof(mt_trace_span_t))

/* The spans of a checked LAUNCH record. */
static inline const mt_trace_span_t *mt_trace_launch_spans(const mt_trace_launch_t *l) {
  return (const mt_trace_span_t *)(const void *)(l + 1);
}
/* Its access kinds (MT_ACC_*), one per span, or NULL when the record has
 * none (version 1): every span is then MT_ACC_UNKNOWN. The reader has
 * checked that the size is one of the two layouts and every kind valid. */
static inline const uint8_t *mt_trace_launch_kinds(const mt_trace_launch_t *l) {
  if (l->nfoot == 0 || l->h.size < MT_TRACE_LAUNCH_BYTES(l->nfoot)) return NULL;
  return (const uint8_t *)(mt_trace_launch_spans(l) + l->nfoot);
}

/* MT_TR_COPY: a copy span. dir: enum below. flags: MT_TRF_PAGER (the pager's
 * own, for a fetch or eviction) else the application's. t_ns is the start,
 * end_ns the end (equal when only the issue time is known). */
enum { MT_TR_H2D = 1, MT_TR_D2H = 2, MT_TR_D2D = 3, MT_TR_SET = 4, MT_TR_NVME_READ = 5, MT_TR_NVME_WRITE = 6 };
#define MT_TRF_PAGER 0x1
typedef struct mt_trace_copy {
  mt_trace_rec_t h;
  uint64_t end_ns;
  uint64_t bytes;
  uint32_t dir;
  uint32_t stream;
} mt_trace_copy_t;

/* MT_TR_FETCH / MT_TR_EVICT: one chunk moved. Tiers: enum below. For
 * EVICT, flags MT_TRF_DIRTY when a copy was made. flags MT_TRF_PREFETCH on a
 * FETCH that was issued ahead of demand. */
enum { MT_TIER_NONE = 0, MT_TIER_GPU = 1, MT_TIER_HOST = 2, MT_TIER_NVME = 3 };
#define MT_TRF_DIRTY 0x1
#define MT_TRF_PREFETCH 0x2
typedef struct mt_trace_move {
  mt_trace_rec_t h;
  uint64_t region;
  uint32_t chunk;           /* index within the region */
  uint8_t from, to;         /* tiers */
  uint16_t pad;
  uint64_t bytes;
} mt_trace_move_t;

/* MT_TR_STALL: the host waited. cause: enum below. */
enum { MT_STALL_FETCH = 1, MT_STALL_EVICT = 2, MT_STALL_HOLD = 3, MT_STALL_OPTIMIZER = 4 };
typedef struct mt_trace_stall {
  mt_trace_rec_t h;
  uint64_t end_ns;
  uint32_t cause;
  uint32_t pad;
} mt_trace_stall_t;

/* MT_TR_OPT_STEP: a host optimizer step over bytes of parameters. */
typedef struct mt_trace_opt_step {
  mt_trace_rec_t h;
  uint64_t end_ns;
  uint64_t bytes;
} mt_trace_opt_step_t;

/* MT_TR_ITER: iteration n begins. flags: MT_TRF_HEURISTIC when the recorder
 * inferred it (the launch sequence repeated) rather than mt_mark_iteration(). */
#define MT_TRF_HEURISTIC 0x1
typedef struct mt_trace_iter {
  mt_trace_rec_t h;
  uint64_t iteration;       /* from 0 */
} mt_trace_iter_t;

/* MT_TR_NAME: the name of function id, emitted once before its first launch;
 * len bytes of name follow (not NUL-terminated), padded to 8. */
typedef struct mt_trace_name {
  mt_trace_rec_t h;
  uint64_t id;
  uint32_t len;
  uint32_t pad;
  /* char name[len]; */
} mt_trace_name_t;

#define MT_TRACE_NAME_MAX 4096
#define MT_TRACE_FOOT_MAX 65536       /* spans per launch a reader accepts */
#define MT_TRACE_REC_MAX MT_TRACE_LAUNCH_BYTES(MT_TRACE_FOOT_MAX)

#endif
