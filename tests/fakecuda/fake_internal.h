/*
 * fake_internal.h - shared state of the fake CUDA driver (tests/fakecuda).
 *
 * The fake is a test double of libcuda.so.1: device memory is host memory,
 * streams are worker threads, kernels are host functions. Its one job is to
 * behave like the real driver wherever a bug in the code under test would
 * show on a GPU: the same error codes for misuse, PROT_NONE where a GPU has
 * no mapping, real concurrency (with jitter) where a GPU runs work
 * asynchronously.
 *
 * Threading: ONE global mutex, g_fc.mu, protects every piece of driver
 * state (handle registries, stream queues, event generations, the memory
 * tables and the accounting). It is never held while a kernel body, a copy
 * or a sleep runs, so user code never executes under it. Stream workers
 * and host threads wait on condition variables tied to it: each stream's
 * work_cv (new work) and the global done_cv (some operation completed),
 * which is broadcast after every completion. A fake is not a place for
 * fine-grained locking; one lock keeps it obviously free of races.
 *
 * Handles (streams, events, functions, graphs, physical allocations) are
 * pointers to our structs, and every live one is in a registry set, so a
 * destroyed or foreign handle is detected by lookup, never dereferenced.
 *
 * Internal names are fc_ (file-static or hidden); exported symbols are the
 * cu* driver API and the fakecuda_* test API (fakecuda.h), marked FC_API.
 */
#ifndef FAKE_INTERNAL_H
#define FAKE_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "fakecuda.h"

#define FC_API __attribute__((visibility("default")))
/* Entry points newer than CUDA 12.2: the old-driver build (FC_DRIVER_OLD,
 * tests/fakecuda/old) keeps them inside, unexported, as a 12.2 driver has
 * none of them, and cuGetProcAddress finds none past its version. */
#ifdef FC_DRIVER_OLD
#define FC_API_NEW __attribute__((visibility("hidden")))
#else
#define FC_API_NEW FC_API
#endif

#define FC_GRANULARITY ((size_t)2 << 20) /* VMM granularity: 2 MiB */
#ifdef FC_DRIVER_OLD
#define FC_DRIVER_VERSION 12020
#else
#define FC_DRIVER_VERSION 13000
#endif

/* ---- call counts (fake_calls.c) ---------------------------------------- */
#define FC_COUNTED_CALLS(X) \
  X(cuMemCreate)            \
  X(cuMemRelease)           \
  X(cuMemMap)               \
  X(cuMemUnmap)             \
  X(cuMemUnmap_busy)        \
  X(cuMemSetAccess)         \
  X(cuMemSetAccess_busy)    \
  X(cuMemHostAlloc)         \
  X(cuMemFreeHost)

typedef enum {
#define FC_CALL_ENUM(n) FC_CALL_##n,
  FC_COUNTED_CALLS(FC_CALL_ENUM)
#undef FC_CALL_ENUM
  FC_CALL__COUNT
} fc_call_t;

void fc_count(fc_call_t c);

/* ---- pointer set: the registry of live handles (fake_core.c) ---------- */
typedef struct fc_set {
  uintptr_t *slots; /* open addressing, linear probing; 0 = empty */
  size_t cap;       /* power of two, or 0 */
  size_t count;
} fc_set_t;

bool fc_set_add(fc_set_t *s, const void *p);    /* false on OOM */
bool fc_set_has(const fc_set_t *s, const void *p);
void fc_set_del(fc_set_t *s, const void *p);

/* ---- streams, events, operations (fake_stream.c) ----------------------- */
typedef struct fc_func fc_func_t;
typedef struct fc_event fc_event_t;
typedef struct fc_graph fc_graph_t;

typedef enum {
  FC_OP_NOP,     /* cuStreamWaitEvent, barriers: only dependencies */
  FC_OP_KERNEL,
  FC_OP_COPY,
  FC_OP_MEMSET,
  FC_OP_EVENT,   /* event record: timestamp + generation */
  FC_OP_FREE,    /* cuMemFreeAsync: the free happens in stream order */
  FC_OP_HOSTFN,  /* cuLaunchHostFunc */
} fc_op_kind_t;

/* "op seq of stream id has completed" -- ids, not pointers, so a dependency
 * on a stream destroyed meanwhile is simply satisfied. */
typedef struct fc_dep {
  uint64_t stream_id;
  uint64_t seq;
} fc_dep_t;

#define FC_MAX_DEPS 4 /* beyond that, deps spill to a heap array */

typedef struct fc_op {
  struct fc_op *next;
  fc_op_kind_t kind;
  uint64_t seq;          /* 1-based position in its stream */
  CUstream handle;       /* stream handle as the user named it (for reports) */
  size_t ndeps;
  fc_dep_t dep_inline[FC_MAX_DEPS];
  fc_dep_t *deps;        /* dep_inline, or heap when ndeps > FC_MAX_DEPS */
  size_t alloc_size;     /* bytes of this op including the trailing buffer */
  union {
    struct {
      fc_func_t *fn;
      fakecuda_launch_t launch;
      void **params;     /* into buf: nparams pointers then packed values */
    } k;
    struct {
      void *dst;
      const void *src;
      size_t n;
      const char *what;  /* "HtoD", "DtoH", "DtoD", "Default" */
    } copy;
    struct {
      void *dst;
      uint32_t value;
      unsigned width;    /* 1, 2 or 4 bytes */
      size_t count;      /* elements */
    } set;
    struct {
      fc_event_t *ev;
      uint64_t gen;
      struct timespec when;
    } ev;
    struct {
      uintptr_t ptr;
    } free;
    struct {
      CUhostFn fn;
      void *user;
    } host;
  } u;
  _Alignas(16) unsigned char buf[]; /* kernel params live here */
} fc_op_t;

typedef struct fc_stream {
  uint64_t id;           /* unique, never reused */
  unsigned flags;        /* CU_STREAM_DEFAULT / CU_STREAM_NON_BLOCKING */
  int priority;
  bool legacy;           /* the NULL / legacy default stream */
  fc_op_t *head, *tail;  /* FIFO, head is running or next to run */
  uint64_t submitted;    /* seq of the last op queued */
  uint64_t completed;    /* seq of the last op finished */
  pthread_t thread;
  bool worker_alive;
  bool stop;             /* destroy requested: drain and exit */
  pthread_cond_t work_cv;
  fc_graph_t *capture;   /* non-NULL while capturing */
  CUstreamCaptureMode capture_mode; /* as passed to cuStreamBeginCapture */
  pthread_t capture_thread;         /* the thread that began the capture */
  bool capture_invalid;  /* an unsafe call invalidated it: EndCapture fails */
  unsigned seed;         /* jitter PRNG state (worker only) */
} fc_stream_t;

struct fc_event {
  unsigned flags;
  uint64_t record_gen;   /* records issued */
  uint64_t done_gen;     /* records executed */
  uint64_t rec_stream;   /* stream id and op seq of the latest record */
  uint64_t rec_seq;
  struct timespec when;  /* execution time of the latest executed record */
  unsigned pending;      /* record ops still queued */
  bool destroyed;        /* freed by the last pending record op */
};

/* Resolves a user stream handle (NULL, CU_STREAM_LEGACY and
 * CU_STREAM_PER_THREAD mean the legacy default stream). Caller holds mu.
 * Returns NULL for a destroyed or foreign handle. */
fc_stream_t *fc_stream_get(CUstream h);
/* Checks a potentially unsafe call (one that synchronises with or queries
 * the device) against the capture rules of cuThreadExchangeStreamCaptureMode:
 * when the calling thread is prohibited from such calls, every capture that
 * prohibits it is invalidated and CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED is
 * returned; else CUDA_SUCCESS. Caller holds mu. */
CUresult fc_capture_unsafe_call(void);
/* Allocates an op with extra trailing bytes; NULL on OOM. */
fc_op_t *fc_op_new(fc_op_kind_t kind, size_t extra);
void fc_op_free(fc_op_t *op);
/* Queues op on s (or appends it to s's capture graph), adding the legacy
 * stream dependencies. Caller holds mu. Takes ownership of op in every case.
 * Returns CUDA_SUCCESS or an error (capture of an uncapturable op). */
CUresult fc_submit(fc_stream_t *s, fc_op_t *op, uint64_t *seq_out);
/* Takes mu, queues op on the stream behind handle h, releases mu. Takes
 * ownership of op; CUDA_ERROR_INVALID_HANDLE for a dead or foreign handle. */
CUresult fc_submit_to(CUstream h, fc_op_t *op);
/* Blocks until stream id has completed seq. Caller holds mu. */
void fc_wait_seq(uint64_t stream_id, uint64_t seq);
/* Submits op on the legacy stream and waits for it: synchronous APIs. */
CUresult fc_run_sync(fc_op_t *op);
/* Waits for all work on all streams. Caller holds mu. */
void fc_sync_all(void);
void fc_streams_shutdown(void);
void fc_streams_atfork_child(void);
CUresult fc_streams_init(void); /* creates the legacy stream; caller holds mu */

/* ---- kernels (fake_kernel.c) -------------------------------------------- */
struct fc_func {
  char *name;
  fakecuda_kernel_fn fn;
  size_t nparams;
  size_t *sizes;
  size_t *offsets;
  size_t total;          /* bytes of the packed parameter buffer */
};
/* Fixes the params pointers of a kernel op after it was copied bytewise. */
void fc_kernel_op_fixup(fc_op_t *op);
/* A new function, registered in g_fc.funcs (takes mu). aligns may be NULL
 * (natural alignment). Reuses the memory of a retired function first, as a
 * driver reuses the handle of an unloaded one. NULL on bad input or OOM. */
fc_func_t *fc_func_new(const char *name, fakecuda_kernel_fn fn, size_t nparams, const size_t *sizes,
                       const size_t *aligns);
/* Unregisters f and keeps its memory for the next fc_func_new. Caller
 * holds mu and has drained every stream (no op refers to f). */
void fc_func_retire(fc_func_t *f);
/* cuFuncGetParamInfo's answer for f (FAKECUDA_PARAMINFO applies). */
CUresult fc_param_info(const fc_func_t *f, size_t paramIndex, size_t *paramOffset, size_t *paramSize);

/* ---- libraries, modules, CUkernel handles (fake_library.c) ------------- */
/* The function behind a live CUkernel handle h, or NULL when h is not one.
 * Caller holds mu. */
fc_func_t *fc_kernel_func(const void *h);

/* ---- graphs (fake_graph.c) ---------------------------------------------- */
struct fc_graph {
  fc_op_t **ops;
  size_t n, cap;
};
bool fc_graph_append(fc_graph_t *g, fc_op_t *op);
void fc_graph_free(fc_graph_t *g);
fc_op_t *fc_op_clone(const fc_op_t *op);

/* ---- memory (fake_mem.c, fake_vmm.c) ------------------------------------ */
/* Counts bytes of device memory; false (nothing counted) when over capacity. */
bool fc_device_charge(size_t bytes);
void fc_device_uncharge(size_t bytes);
/* Frees a linear device allocation at ptr now (stream-ordered free ran).
 * Caller holds mu. */
void fc_mem_free_now(uintptr_t ptr);
/* What memory p is: device (linear or VMM-mapped), pinned host (cuMemHostAlloc,
 * registered), or anything else (pageable). Caller holds mu. */
typedef enum { FC_MEM_DEVICE, FC_MEM_PINNED, FC_MEM_PAGEABLE } fc_mem_kind_t;
fc_mem_kind_t fc_mem_kind(uintptr_t p);
/* A VMM-mapped address whose physical memory is on the host. Caller holds mu. */
bool fc_vmm_host_located(uintptr_t p);
/* Pointer attributes for a VMM-mapped address: false if not mapped. */
bool fc_vmm_lookup(uintptr_t p, uintptr_t *base, size_t *size, bool *device,
                   uint64_t *id);

/* ---- faults (fake_fault.c) ---------------------------------------------- */
void fc_fault_install(void);          /* idempotent; caller holds mu */
void fc_fault_thread_init(void **altstack);
void fc_fault_thread_fini(void *altstack);
void fc_fault_enter(const fc_op_t *op); /* worker marks the op it runs */
void fc_fault_leave(void);

/* ---- global state (fake_core.c) ----------------------------------------- */
typedef struct fc_global {
  pthread_mutex_t mu;
  pthread_cond_t done_cv;
  bool initialized;
  bool deinitialized;    /* torn down (exit, or fakecuda_deinit): calls fail */
  bool forked;           /* this is a child forked after cuInit: CUDA unusable */
  size_t capacity;       /* FAKECUDA_MEM, bytes (default 1 GiB) */
  unsigned jitter_us;    /* FAKECUDA_JITTER_US (default 0) */
  double bw;             /* FAKECUDA_BW, bytes/s (0: instant) */
  bool report;           /* FAKECUDA_REPORT */
  size_t used, peak;     /* device bytes */
  unsigned long long launches; /* kernels + copies executed */
  unsigned long long copies_inflight; /* copies queued or running on some stream */
  fc_set_t streams_set;  /* live (not destroyed) stream handles */
  fc_stream_t **streams; /* every stream with a worker, incl. draining ones */
  size_t nstreams, cap_streams;
  fc_stream_t *legacy;
  uint64_t next_stream_id;
  fc_set_t events;
  fc_set_t funcs;
  fc_set_t graphs;
  fc_set_t execs;
  int primary_refs;      /* cuDevicePrimaryCtxRetain count */
  fc_set_t kernels;      /* live CUkernel handles (fake_library.c) */
  fc_set_t libraries;    /* live CUlibrary handles */
  fc_set_t modules;      /* live CUmodule handles */
  bool kernel_as_func_reject; /* FAKECUDA_KERNEL_AS_FUNC=reject: cuFunc* refuse CUkernels */
  bool paraminfo_unsupported; /* FAKECUDA_PARAMINFO=unsupported: no layout queries answer */
} fc_global_t;

extern fc_global_t g_fc;
extern struct CUctx_st *const fc_primary_ctx;

void fc_lock(void);
void fc_unlock(void);
/* CUDA_SUCCESS once cuInit ran, else CUDA_ERROR_NOT_INITIALIZED. */
CUresult fc_check_init(void);
/* As fc_check_init, and also requires a current context on this thread
 * (the real driver answers CUDA_ERROR_INVALID_CONTEXT otherwise). */
CUresult fc_check_ctx(void);
void fc_sleep_ns(uint64_t ns);
/* Parses "123", "4K", "2M", "1G", "1T" (binary); false on junk. */
bool fc_parse_size(const char *s, double *out);

/* ---- exported symbols that cuda.h declares only for driver builds -------- */
#define FC_PTSZ_PROTOS                                                                    \
  CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr, const void *, size_t);                        \
  CUresult cuMemcpyDtoH_v2_ptds(void *, CUdeviceptr, size_t);                              \
  CUresult cuMemcpyDtoD_v2_ptds(CUdeviceptr, CUdeviceptr, size_t);                         \
  CUresult cuMemcpy_ptds(CUdeviceptr, CUdeviceptr, size_t);                                \
  CUresult cuMemsetD8_v2_ptds(CUdeviceptr, unsigned char, size_t);                         \
  CUresult cuMemsetD16_v2_ptds(CUdeviceptr, unsigned short, size_t);                       \
  CUresult cuMemsetD32_v2_ptds(CUdeviceptr, unsigned int, size_t);                         \
  CUresult cuMemcpyAsync_ptsz(CUdeviceptr, CUdeviceptr, size_t, CUstream);                 \
  CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr, const void *, size_t, CUstream);         \
  CUresult cuMemcpyDtoHAsync_v2_ptsz(void *, CUdeviceptr, size_t, CUstream);               \
  CUresult cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr, CUdeviceptr, size_t, CUstream);          \
  CUresult cuMemsetD8Async_ptsz(CUdeviceptr, unsigned char, size_t, CUstream);             \
  CUresult cuMemsetD16Async_ptsz(CUdeviceptr, unsigned short, size_t, CUstream);           \
  CUresult cuMemsetD32Async_ptsz(CUdeviceptr, unsigned int, size_t, CUstream);             \
  CUresult cuMemAllocAsync_ptsz(CUdeviceptr *, size_t, CUstream);                          \
  CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *, size_t, CUmemoryPool, CUstream);    \
  CUresult cuMemFreeAsync_ptsz(CUdeviceptr, CUstream);                                     \
  CUresult cuStreamSynchronize_ptsz(CUstream);                                             \
  CUresult cuStreamQuery_ptsz(CUstream);                                                   \
  CUresult cuStreamGetFlags_ptsz(CUstream, unsigned int *);                                \
  CUresult cuStreamWaitEvent_ptsz(CUstream, CUevent, unsigned int);                        \
  CUresult cuEventRecord_ptsz(CUevent, CUstream);                                          \
  CUresult cuEventRecordWithFlags_ptsz(CUevent, CUstream, unsigned int);                   \
  CUresult cuLaunchKernel_ptsz(CUfunction, unsigned int, unsigned int, unsigned int,       \
                               unsigned int, unsigned int, unsigned int, unsigned int,     \
                               CUstream, void **, void **);                                \
  CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *, CUfunction, void **, void **);    \
  CUresult cuLaunchCooperativeKernel_ptsz(CUfunction, unsigned int, unsigned int,          \
                                          unsigned int, unsigned int, unsigned int,        \
                                          unsigned int, unsigned int, CUstream, void **);  \
  CUresult cuLaunchHostFunc_ptsz(CUstream, CUhostFn, void *);                              \
  CUresult cuStreamBeginCapture_v2_ptsz(CUstream, CUstreamCaptureMode);                    \
  CUresult cuStreamEndCapture_ptsz(CUstream, CUgraph *);                                   \
  CUresult cuStreamIsCapturing_ptsz(CUstream, CUstreamCaptureStatus *);                    \
  CUresult cuGraphLaunch_ptsz(CUgraphExec, CUstream);                                      \
  CUresult cuGraphInstantiate_v2(CUgraphExec *, CUgraph, CUgraphNode *, char *, size_t);
FC_PTSZ_PROTOS

#endif
