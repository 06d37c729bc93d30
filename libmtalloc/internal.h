/*
 * internal.h - what the parts of the core tell each other. Grouped by the
 * file that defines them; nothing here is exported from libmtalloc.so.
 * Inside the core, functions return 0 (or a count) on success and -errno on
 * failure; conversion to CUresult happens only at the hook boundary.
 */
#ifndef MT_INTERNAL_H
#define MT_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdarg.h>
#include <time.h>

#include "mtalloc.h"

/* CLOCK_MONOTONIC in ns: the clock of every *_wait_ns counter and of
 * trace timestamps (_mt_trace_now) */
static inline uint64_t _mt_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- debug checks (meson option debug_checks, MT_DEBUG) -------------------
 * 1: cheap asserts; 2: internal asserts; 3: invariant walkers. A failed check
 * logs file:line and the expression, then aborts. */
#ifndef MT_DEBUG
#define MT_DEBUG 0
#endif
void _mt_assert_fail(const char *expr, const char *file, int line);
#if MT_DEBUG >= 1
#define mt_assert(e) ((e) ? (void)0 : _mt_assert_fail(#e, __FILE__, __LINE__))
#else
#define mt_assert(e) ((void)0)
#endif
#if MT_DEBUG >= 2
#define mt_assert_internal(e) mt_assert(e)
#else
#define mt_assert_internal(e) ((void)0)
#endif
#define MT_CHECK_INVARIANTS (MT_DEBUG >= 3)

/* Code that can run before a sanitizer runtime is initialised (dlsym is
 * called by the sanitizer's own start-up) must not be instrumented. */
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 8 || defined(__clang__)
#define MT_NO_SANITIZE __attribute__((no_sanitize("address", "undefined", "thread")))
#else
#define MT_NO_SANITIZE
#endif

#define mt_likely(x) __builtin_expect(!!(x), 1)
#define mt_unlikely(x) __builtin_expect(!!(x), 0)

/* ---- options.c -------------------------------------------------------------
 * ONE table of every option. Columns: id, type, default (as the user would
 * write it), minimum and maximum (INT only), choices (CHOICE only, '|'
 * separated), unit, one-line help. The enum, the names and the table are all
 * generated from this list, so they cannot disagree. */
typedef enum mt_opt_type {
  MT_OPT_BOOL,    /* 1/0/on/off/yes/no/true/false */
  MT_OPT_INT,     /* decimal integer within [min, max] */
  MT_OPT_SIZE,    /* bytes, optional K/M/G/T suffix (binary: K = 1024) */
  MT_OPT_STRING,  /* free text (paths) */
  MT_OPT_CHOICE,  /* one of a fixed list of names, stored as its index */
} mt_opt_type_t;

#define MT_OPTION_LIST(X)                                                          \
  X(MAX_VRAM, SIZE, "0", 0, 0, "", "bytes",                                        \
    "GPU memory mtalloc may use for tensors; 0 = what the device reports free at start") \
  X(MAX_HOST, SIZE, "0", 0, 0, "", "bytes",                                        \
    "host memory for evicted chunks (pinned), the NVMe tier's staging buffers and the host " \
    "optimizer's masters and state (on the GPU's NUMA node); 0 = three " \
    "quarters of physical RAM, or of the cgroup memory limit when that is lower")                            \
  X(OFFLOAD_DIR, STRING, "", 0, 0, "", "path",                                     \
    "NVMe tier: folders for its O_DIRECT files (unlinked at once, nothing left behind), ':' " \
    "separated and striped; host chunks past MT_MAX_HOST go there; empty = no NVMe tier")                                           \
  X(MAX_NVME, SIZE, "0", 0, 0, "", "bytes",                                        \
    "NVMe tier: disk space it may use, reserved at start; "                       \
    "0 = free space of the offload folders less 5% (at least 1 GiB)")              \
  X(NVME_QUEUE_DEPTH, INT, "32", 1, 4096, "", "requests",                          \
    "NVMe tier: reads and writes in flight on the io_uring; with MT_NVME_REQUEST it sizes the " \
    "staging buffers (queue depth x request, at least two chunks, taken from MT_MAX_HOST)") \
  X(NVME_REQUEST, SIZE, "1M", 0, 0, "", "bytes",                                   \
    "NVMe tier: largest request and stripe unit, a multiple of 4K") \
  X(CHUNK, SIZE, "2M", 0, 0, "", "bytes",                                          \
    "paging unit, rounded up to the driver's mapping granularity")                 \
  X(SMALL_REGION, SIZE, "1M", 0, 0, "", "bytes",                                   \
    "allocations smaller than this are packed into shared chunks that stay on the GPU") \
  X(HOST_MAP, CHOICE, "auto", 0, 0, "auto|off", "",                                \
    "auto: where the driver can map host memory, evicted and never-touched chunks are mapped " \
    "to a host copy (a stray access is slow, not fatal) and a launch larger than MT_MAX_VRAM " \
    "runs with the rest of its footprint in host memory; off: such chunks are unmapped and " \
    "such launches fail")                                                          \
  X(HANDOFF, CHOICE, "auto", 0, 0, "auto|on|off", "",                              \
    "on: device memory of a buffer freed with cuMemFreeAsync (or a framework's stream-ordered " \
    "free) while a kernel still uses it goes at once, without a wait or a copy, to the next " \
    "buffer a kernel on the same stream fills (fewer bytes moved; handoff.c); off: the pager " \
    "waits for the old kernel or evicts live data instead (faster on some workloads where the " \
    "link has room); auto: on while chunks live on NVMe, and with the NVMe read-ahead (a " \
    "predictor) from the first time host memory is full on; elsewhere, with next-use " \
    "estimates (MT_POLICY=nextuse), timed on the GPU over an iteration that repeats the one " \
    "before it, on first, then off, and off only if over 2% faster (logged at MT_VERBOSE=2); " \
    "without them off")                                                            \
  X(TRACE, STRING, "", 0, 0, "", "path",                                           \
    "record a binary trace of allocations, launches, moves and stalls here (mt-trace reads it)")      \
  X(STATS, BOOL, "off", 0, 0, "", "",                                              \
    "print statistics at exit")                                                    \
  X(VERBOSE, INT, "1", 0, 3, "", "level",                                          \
    "log level: 0 errors, 1 warnings, 2 info, 3 debug")                            \
  X(LOG, STRING, "", 0, 0, "", "path",                                             \
    "append log lines to this file instead of stderr")                             \
  X(POLICY, CHOICE, "nextuse", 0, 0, "nextuse|lru", "",                            \
    "eviction policy; lru = least recently used; nextuse = clean chunks before dirty "  \
    "ones, dead data last, each farthest expected next use first, learned from the "  \
    "launch stream's period; a region fetched late counts nearer (policy/nextuse.c, " \
    "predictor/keep.c)")                                                             \
  X(SPILL_POLICY, CHOICE, "auto", 0, 0, "auto|lru|nextuse", "",                   \
    "with an NVMe tier: the order in which host chunks spill to NVMe (hosttier.c); " \
    "auto = lru while the NVMe read-ahead runs (a predictor, MT_PREFETCH_DEPTH > 0 and " \
    "MT_READAHEAD_DEPTH > 0), " \
    "else MT_POLICY's (measured on G10's traces, README)")                         \
  X(PREDICTOR, CHOICE, "correlation", 0, 0, "none|correlation|context", "",               \
    "access-order predictor used for prefetching; none = demand fetching only, "  \
    "correlation = second-order launch correlation (prefetch.c), context = the "  \
    "same, telling recomputed layers (activation checkpointing) from the first "  \
    "forward (mt-trace plan says where it wins)")                                 \
  X(PREDICTOR_MEM, SIZE, "32M", 0, 0, "", "bytes",                               \
    "memory for the predictor's tables (each launch's successors and its last footprint's region " \
    "keys; about 64 bytes a launch of 2.4 paged regions, so 32M holds some 500,000 launches an " \
    "iteration and 64M a million); " \
    "a loop of more launches than it holds is predicted only in part (a warning says so); " \
    "at least 64K") \
  X(PREFETCH_DEPTH, INT, "8", 0, 1024, "", "launches",                             \
    "how many predicted launches ahead to prefetch for; 0 = none, and no prediction at all " \
    "(the predictor is not fed; the NVMe read-ahead is off too)")                 \
  X(PREFETCH_LEAD, INT, "0", 0, 255, "", "launches",                              \
    "timeliness feedback: a region whose prefetch came late is prefetched up to this many " \
    "launches beyond MT_PREFETCH_DEPTH later on (predictor/lead.c); 0 = none (measured no " \
    "gain on the G10 traces, README)") \
  X(PREFETCH_FREE, INT, "32", 0, 255, "", "launches",                             \
    "while the handoff is on (MT_HANDOFF): the regions of this many predicted launches beyond " \
    "MT_PREFETCH_DEPTH are prefetched too, into free device memory only (nothing is evicted for " \
    "them), except while NVMe holds chunks and host memory has room (prefetch.c, \"Prefetches " \
    "into free memory\"; G10's traces, docs/prefetching.md); 0 = none") \
  X(RUNAHEAD, INT, "24", 0, 256, "", "launches",                                  \
    "while the handoff is on (MT_HANDOFF): the host waits so that at most this many launches " \
    "are queued ahead of the GPU, and the pager decides for launches near the ones running " \
    "(runahead.c; measured on G10's traces, docs/eviction.md); 0 = no bound, and no " \
    "MT_PREFETCH_WAIT")                                                           \
  X(PREFETCH_WAIT, BOOL, "on", 0, 0, "", "",                                     \
    "with the run-ahead bound (MT_RUNAHEAD, while the handoff is on): a prefetch that finds " \
    "no room free of queued launches waits for the oldest of them, while over a quarter of " \
    "MT_RUNAHEAD stay queued, and unless NVMe reads ahead are in flight and the region has " \
    "chunks on NVMe (or MT_PREFETCH_FREE=0) (runahead.c, prefetch.c; Inception 96.5-97.0 -> " \
    "98.1-99.2% of ideal on G10's traces, docs/eviction.md); off: it stops there") \
  X(WRITEBEHIND_HORIZON, INT, "256", 0, 65536, "", "launches",                   \
    "with a predictor and MT_POLICY=nextuse: write-behind copies out, before each launch, the "  \
    "dirty chunks the evictions of the next this-many launches copied one iteration ago (the " \
    "period the predictor learns), less those copied and not used yet (prefetch.c; measured " \
    "on G10's traces, README); 0 = only what the prefetch window lacks")         \
  X(PREFETCH_PACE, BOOL, "on", 0, 0, "", "",                                     \
    "start a prefetch only while the host-to-device link is idle, so that its mapping changes " \
    "never hold the host behind earlier copies (prefetch.c); off: whenever room allows, " \
    "which measured faster only where the link is the bottleneck (README)")                           \
  X(READAHEAD_DEPTH, INT, "1024", 0, 4096, "", "launches",                        \
    "with a predictor, MT_PREFETCH_DEPTH > 0 and an NVMe tier: how many predicted launches " \
    "ahead to read chunks from " \
    "NVMe into host memory, asynchronously (readahead.c); 0 = none")              \
  X(THREADS, INT, "0", 0, 1024, "", "threads",                                     \
    "host optimizer worker threads (C API and megatrain.AdamW/Adam); " \
    "0 = the CPUs of the NUMA node less one, at least 1")                                 \
  X(NUMA_NODE, INT, "-1", -1, 1023, "", "node",                                    \
    "NUMA node of host copies (when host-mapped); -1 = the GPU's node")                       \
  X(OPTIMIZER, CHOICE, "off", 0, 0, "off|host", "",                                \
    "host optimizer; off = the framework runs its own optimizer on the GPU; host = " \
    "torch.optim.AdamW/Adam become megatrain's (host thread pool) in processes started by " \
    "megatrain-run or mt.init (its sitecustomize; the library itself reads nothing)") \
  X(OPTIMIZER_COMPRESSION, CHOICE, "none", 0, 0, "none|8bit|4bit|2bit", "",       \
    "storage format of host optimizer state (C API, and megatrain.AdamW/Adam's default): " \
    "FP32, or block-wise 8/4-bit m and v (2bit: experimental); tensors under 4096 elements stay FP32")                                      \
  X(VERIFY_CLEAN, BOOL, "off", 0, 0, "", "",                                       \
    "debug: before a clean chunk is evicted without a copy, compare its device and host " \
    "copies; a difference (a kernel wrote memory advised read-mostly) is logged as an error " \
    "naming the allocation and offset, and the chunk is copied back so nothing is lost")  \
  X(OPTIM_KERNEL, CHOICE, "auto", 0, 0, "auto|scalar|avx2|avx512|mkl", "",           \
    "host optimizer kernel (C API and megatrain.AdamW/Adam): auto = the widest this CPU has; a forced kernel the " \
    "CPU lacks makes optimizer creation fail; mkl = torch's own MKL square root")  \
  X(SHOW_CONFIG, BOOL, "off", 0, 0, "", "",                                        \
    "print the effective options table at start")

typedef enum mt_opt {
#define MT_OPT_ENUM(id, ...) MT_OPT_##id,
  MT_OPTION_LIST(MT_OPT_ENUM)
#undef MT_OPT_ENUM
  MT_OPT__COUNT
} mt_opt_t;

/* Options whose component is not built yet: setting one draws a warning.
 * None today (MT_OPT__COUNT ends the list). */
#define MT_OPTIONS_NOT_USED_YET {MT_OPT__COUNT}

/* Reads every option once from the process environment (environ, read
 * directly: safe inside a preloaded library's constructor). Idempotent and
 * thread-safe. */
void _mt_options_init(void);
/* Resets every option to its default, then reads them from envp (a NULL
 * terminated "NAME=value" array). Each bad value is reported with one log
 * line naming the variable, the value and the accepted form; its default is
 * kept. Returns the number of bad values. For tests and _mt_options_init. */
int _mt_options_load(char *const *envp);
/* Effective value: INT, SIZE, BOOL (0/1) and CHOICE (index) as an integer. */
int64_t _mt_opt_int(mt_opt_t o);
/* Effective value of a STRING option ("" when unset). */
const char *_mt_opt_str(mt_opt_t o);
/* True when the value came from the environment rather than the default. */
bool _mt_opt_from_env(mt_opt_t o);
const char *_mt_opt_name(mt_opt_t o);  /* "MT_MAX_VRAM" */
/* Parsers, exposed for tests. Return 0 or -EINVAL (-ERANGE on overflow). */
int _mt_parse_size(const char *s, uint64_t *out);
int _mt_parse_bool(const char *s, bool *out);
int _mt_parse_int(const char *s, int64_t min, int64_t max, int64_t *out);
/* Looks name up in a NULL-terminated environment array without allocating;
 * returns the value or NULL. */
const char *_mt_env_lookup(char *const *envp, const char *name);
/* The effective options as "MT_NAME=value\n" lines (for trace headers);
 * returns the length or -ENOSPC. */
int _mt_options_text(char *buf, size_t len);
/* Writes the options table as Markdown to fd (the README's table). */
void _mt_options_markdown(int fd);

/* ---- log.c -----------------------------------------------------------------
 * One line per message, prefixed "mtalloc: ", written with one write(2) from
 * a stack buffer: no heap allocation, and a message logged while logging (a
 * signal, a hook re-entered by the log's own I/O) is dropped, not recursed. */
typedef enum mt_log_level {
  MT_LOG_ERROR = 0,
  MT_LOG_WARN = 1,
  MT_LOG_INFO = 2,
  MT_LOG_DEBUG = 3,
} mt_log_level_t;

void _mt_log(mt_log_level_t level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void _mt_vlog(mt_log_level_t level, const char *fmt, va_list ap);
/* Sets the level (messages above it are dropped) and the destination fd
 * (-1: stderr, -2: keep the current one). The log does not own fd. */
void _mt_log_configure(int level, int fd);
/* Opens path for appending and makes it the destination; returns 0 or
 * -errno (and the log stays on stderr). */
int _mt_log_open(const char *path);
int _mt_log_level(void);
/* Writes prefix and text as one line of any length, regardless of level
 * (for reports the user asked for, like the MT_STATS line). */
void _mt_log_raw(const char *prefix, const char *text);

#define mt_error(...) _mt_log(MT_LOG_ERROR, __VA_ARGS__)
#define mt_warn(...) _mt_log(MT_LOG_WARN, __VA_ARGS__)
#define mt_info(...) _mt_log(MT_LOG_INFO, __VA_ARGS__)
#define mt_debug(...) _mt_log(MT_LOG_DEBUG, __VA_ARGS__)

/* ---- region.c --------------------------------------------------------------
 * The region map: non-overlapping address ranges [start, start+size), each
 * with a caller-owned value pointer. Thread-safe; lookups O(log n). */
typedef struct _mt_rmap _mt_rmap_t;

/* Returns a new empty map, or NULL when out of memory. */
_mt_rmap_t *_mt_rmap_new(void);
/* Frees the map; the values are the caller's. */
void _mt_rmap_free(_mt_rmap_t *m);
/* Returns 0, -EINVAL (size 0 or range wraps), -EEXIST (overlaps a range in
 * the map) or -ENOMEM. */
int _mt_rmap_insert(_mt_rmap_t *m, uintptr_t start, size_t size, void *value);
/* Removes the range that starts exactly at start; stores its value in
 * *value when value is not NULL. Returns 0 or -ENOENT. */
int _mt_rmap_remove(_mt_rmap_t *m, uintptr_t start, void **value);
/* The value of the range containing addr, or NULL; *start and *size (when
 * not NULL) receive the range. */
void *_mt_rmap_find(_mt_rmap_t *m, uintptr_t addr, uintptr_t *start, size_t *size);
/* The first range that overlaps [addr, end) (lowest start), or NULL; its
 * range goes to *start and *size. Walks the table under the writers' lock:
 * for rare walks over a span of addresses (mt_advise), not for lookups. */
void *_mt_rmap_next(_mt_rmap_t *m, uintptr_t addr, uintptr_t end, uintptr_t *start, size_t *size);
size_t _mt_rmap_count(_mt_rmap_t *m);
/* Level-3 check: ranges sorted, disjoint, counts agree. Returns 0 or -EFAULT. */
int _mt_rmap_check(_mt_rmap_t *m);

/* ---- sysmem.c --------------------------------------------------------------
 * The memory this process may use: physical RAM, or its cgroup's limit when
 * lower (the default MT_MAX_HOST is three quarters of it). */
size_t _mt_sysmem_limit(void);
/* The same under another root folder ("" = the real one), with phys bytes of RAM. */
size_t _mt_sysmem_limit_at(const char *root, size_t phys);
/* One cgroup limit file's text: "max" (UINT64_MAX) or a byte count. 0 or -EINVAL. */
int _mt_cgroup_value(const char *text, uint64_t *out);
/* Prefers NUMA node `node` for the pages of [p, p + len) (page-aligned),
 * not yet touched; node < 0 does nothing. 0 or -errno (mbind's). */
int _mt_mem_place_on_node(void *p, size_t len, int node);
/* The cgroup path of the memory controller in /proc/self/cgroup's text, for
 * cgroup version 2 ("0::/path") or 1 ("N:a,memory,b:/path"). 0, -ENOENT or
 * -ENAMETOOLONG. */
int _mt_cgroup_path(const char *proc_cgroup, int version, char *out, size_t n);

#endif
