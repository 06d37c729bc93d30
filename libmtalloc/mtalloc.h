/*
 * mtalloc.h - the public API of mtalloc.
 *
 * mtalloc is normally used without any code change (LD_PRELOAD=libmtalloc.so);
 * this header is for programs and framework glue that want to talk to it:
 * read its configuration, mark iterations, read statistics.
 *
 * Conventions: functions return 0 (or a count) on success and -errno on
 * failure, and never set errno. Handles are opaque.
 */
#ifndef MTALLOC_H
#define MTALLOC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MT_VERSION_MAJOR 0
#define MT_VERSION_MINOR 1
#define MT_VERSION ((MT_VERSION_MAJOR << 16) | MT_VERSION_MINOR)

#if defined(__GNUC__)
#define MT_API __attribute__((visibility("default")))
#else
#define MT_API
#endif

/* An allocation that mtalloc manages (one framework tensor, usually). */
typedef struct mt_region mt_region_t;

/* The library's version, MT_VERSION of the build that is running. Compare it
 * with MT_VERSION of the header a program was built with. */
MT_API int mt_version(void);

/* Copies the effective value of option name (without the MT_ prefix, any
 * case: "max_vram" or "MAX_VRAM") into buf as text, NUL-terminated.
 * Returns the length written, -ENOENT for an unknown name, -ENOSPC when buf
 * is too small. */
MT_API int mt_option_text(const char *name, char *buf, size_t len);

/* Prints the effective options table to mtalloc's log (what MT_SHOW_CONFIG=1
 * prints at start). */
MT_API void mt_show_config(void);

/* Statistics since start as one JSON object, NUL-terminated, in a buffer
 * owned by the library and valid until the next call from any thread (copy
 * it). Keys (all integers; bytes are bytes, times are nanoseconds):
 *   bytes_h2d, bytes_d2h      bytes copied host->device / device->host by the pager
 *   fetches                   chunks brought to the device from the host tier
 *   evictions_dirty           chunks evicted with a copy to host
 *   evictions_clean           chunks evicted without a copy (host copy current)
 *   stalls, stall_ns          launches/copies that waited for a fetch, and the host
 *                             time they waited
 *   resident_bytes            device memory the pager holds now (chunks + small pool)
 *   peak_resident_bytes       its maximum
 *   launches                  kernel launches seen (all routes)
 *   allocs, frees             allocations and frees served
 *   regions_live, regions_peak
 *   escaped_regions           regions pinned because their address was copied to the device
 *   launches_host_mapped      launches (and graph launches) whose footprint exceeded the
 *                             budget and ran with part of it in host memory, reached
 *                             through host mappings
 *   host_mapped_bytes         bytes those launches reached in host memory (whole chunks)
 *   host_mapped               1 when evicted chunks stay mapped to host memory
 *   calls                     object: per hooked driver symbol, calls by route
 *                             {"direct": n, "dlsym": n, "procaddr": n}; only symbols called
 * Returns "{}" before the first call the library intercepted. */
MT_API const char *mt_stats_json(void);

/* Marks the start of a training iteration in the trace (MT_TRACE): records
 * an ITER record numbered from 0. The first call switches off the
 * recorder's own guess of iteration boundaries (a repeating launch
 * sequence) for the rest of the process. Does nothing when not tracing.
 * Safe from any thread. */
MT_API void mt_mark_iteration(void);

/* PyTorch pluggable allocator entry points
 * (torch.cuda.memory.CUDAPluggableAllocator(path, "mt_torch_malloc", "mt_torch_free")).
 * stream is a cudaStream_t (the driver's CUstream). mt_torch_malloc returns NULL
 * when out of memory. */
MT_API void *mt_torch_malloc(size_t size, int device, void *stream);
MT_API void mt_torch_free(void *ptr, size_t size, int device, void *stream);

#ifdef __cplusplus
}
#endif
#endif
