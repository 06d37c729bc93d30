/*
 * mtalloc.h - the public API of mtalloc.
 *
 * mtalloc is normally used without any code change (LD_PRELOAD=libmtalloc.so);
 * this header is for programs and framework glue that want to talk to it:
 * read its configuration, mark iterations, read statistics, give hints.
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

/* ---- hints ----------------------------------------------------------------
 * What the application knows and mtalloc cannot see. Nothing in a kernel
 * launch says which of its buffers the kernel writes, so by default every
 * launch counts as writing every buffer it can reach: a chunk it touched is
 * copied back to host memory when it is evicted, even when its host copy
 * was still current. */
typedef enum mt_advice {
  MT_ADVISE_NONE = 0,        /* no promise (the default): launches may write the buffer */
  MT_ADVISE_READ_MOSTLY = 1, /* no kernel writes the buffer until the advice is changed */
} mt_advice_t;

/* Gives advice for every allocation that lies entirely inside [ptr,
 * ptr + bytes); an allocation the range covers only in part is left as it
 * is (the advice is kept per allocation). Returns the number of allocations
 * advised (0 when none lies inside, or mtalloc has allocated nothing yet),
 * or -EINVAL for an unknown advice, bytes 0 or a range that wraps. Safe
 * from any thread.
 *
 * MT_ADVISE_READ_MOSTLY is a promise: no kernel launched from now on
 * writes the allocation, until mt_advise gives it MT_ADVISE_NONE. Copies
 * and sets the program makes (cuMemcpy*, cuMemset*) are seen by mtalloc and
 * stay allowed. In return, launches make its chunks resident for reading:
 * a chunk whose host copy is current (fetched since it was last written)
 * stays clean and is evicted by dropping its device memory, with no copy.
 *
 * A kernel write that breaks the promise is not seen (nothing tells
 * mtalloc what a kernel stores). The written chunk keeps counting as clean:
 *   - while it stays on the GPU, kernels and copies read the new data;
 *   - when it is evicted clean, the device copy is dropped and the write
 *     is LOST: the chunk reads back, from then on, what its host copy held
 *     before the write. Each chunk (MT_CHUNK bytes) is lost or kept on its
 *     own, so a buffer can end up part new, part old;
 *   - a chunk that was dirty when the advice was given, or never left the
 *     GPU since it was first written, has no current host copy: it is
 *     copied at its next eviction, write included;
 *   - MT_ADVISE_NONE afterwards makes later launches write again; it does
 *     not bring back a write already lost.
 * CUDA's cudaMemAdviseSetReadMostly (managed memory only) is different: a
 * write there invalidates the other copies and is kept. To find a broken
 * promise in testing, run with MT_VERIFY_CLEAN=1: before a clean chunk is
 * dropped its device copy is compared with its host copy, a difference is
 * logged as an error naming the allocation and the offset, and the chunk
 * is copied back as if dirty, so the data is kept (slower: one extra copy
 * per clean eviction). */
MT_API int mt_advise(const void *ptr, size_t bytes, int advice);

/* PyTorch pluggable allocator entry points
 * (torch.cuda.memory.CUDAPluggableAllocator(path, "mt_torch_malloc", "mt_torch_free")).
 * stream is a cudaStream_t (the driver's CUstream). mt_torch_malloc returns NULL
 * when out of memory. */
MT_API void *mt_torch_malloc(size_t size, int device, void *stream);
MT_API void mt_torch_free(void *ptr, size_t size, int device, void *stream);

/* ---- host optimizer (AdamW / Adam) ------------------------------------------
 * The optimizer step on host threads, next to its state (DESIGN.md step 6).
 * A parameter is registered by a host pointer to its weights, an element
 * count, a dtype and a gradient array (mt_optim_register*), or by device
 * addresses of memory mtalloc manages (mt_optim_register_device); the step
 * updates FP32 masters (f32 host weights are their own master, updated in
 * place; bf16/fp16 weights get an FP32 master and receive the rounded
 * result, nearest even; gradients may be bf16/fp16 too). Steps of single
 * parameters queue while others run (gradient offload from backward
 * hooks); hyper-parameters and gradient pointers may change between steps;
 * state can be read and written for checkpoints. PyTorch reaches it through
 * python/megatrain/optim.py. Masters, state and the host buffers of device
 * parameters are the optimizer's own memory, on the GPU's NUMA node
 * (MT_NUMA_NODE) and counted in MT_MAX_HOST when mtalloc pages (host copies
 * give way or spill to NVMe; a registration that does not fit fails
 * -ENOMEM, saying so). NOT YET: state on the NVMe tier.
 * MT_THREADS and MT_OPTIMIZER_COMPRESSION are read here only.
 *
 * Exactness: with FP32 state the update is bit-identical to
 * torch.optim.AdamW / Adam (foreach=False, fused=False, torch 2.15.0,
 * ATEN_CPU_CAPABILITY=default) except that torch's CPU float32 sqrt is
 * MKL's and not correctly rounded: MT_OPTIM_KERNEL_TORCH_MKL takes it from
 * MKL too and matches exactly; see libmtalloc/optim/adam.h.
 * Not thread-safe: one thread at a time per optimizer (a framework's
 * gradient hook may call mt_optim_step from its own thread while the owner
 * waits in backward). */
typedef struct mt_optim mt_optim_t;

typedef enum mt_dtype {
  MT_DTYPE_F32 = 0,
  MT_DTYPE_BF16 = 1,
  MT_DTYPE_F16 = 2,
} mt_dtype_t;

enum { /* mt_optim_params_t.kernel */
  MT_OPTIM_KERNEL_AUTO = 0, /* MT_OPTIM_KERNEL (default auto: the widest this CPU has) */
  MT_OPTIM_KERNEL_SCALAR = 1,
  MT_OPTIM_KERNEL_AVX2 = 2,
  MT_OPTIM_KERNEL_AVX512 = 3,
  /* bit-identical to stock torch 2.15.0: square roots from MKL's vmsSqrt
   * (libmkl_rt.so.2 on the loader's path, mkl==2024.2.0); -ENOTSUP without */
  MT_OPTIM_KERNEL_TORCH_MKL = 4,
};
enum { /* mt_optim_params_t.state */
  MT_OPTIM_STATE_DEFAULT = -1, /* MT_OPTIMIZER_COMPRESSION */
  MT_OPTIM_STATE_FP32 = 0,
  MT_OPTIM_STATE_8BIT = 1,
  MT_OPTIM_STATE_4BIT = 2,
  MT_OPTIM_STATE_2BIT = 3, /* experimental */
};

typedef struct mt_optim_params {
  double lr;           /* default 1e-3 */
  double beta1, beta2; /* default 0.9, 0.999 */
  double eps;          /* default 1e-8 */
  double weight_decay; /* default 1e-2 */
  int adamw;           /* 1 (default): decoupled decay (AdamW); 0: Adam's L2 */
  int amsgrad;         /* default 0; not with 8/4/2-bit state */
  int maximize;        /* default 0 */
  int kernel;          /* MT_OPTIM_KERNEL_*, default AUTO */
  int state;           /* MT_OPTIM_STATE_*, default DEFAULT */
  int threads;         /* workers; 0 (default) = MT_THREADS */
} mt_optim_params_t;

/* Fills p with torch.optim.AdamW's defaults and the fields' defaults above. */
MT_API void mt_optim_defaults(mt_optim_params_t *p);
/* Creates an optimizer and starts its threads. 0, -EINVAL (a hyper-parameter
 * torch rejects, amsgrad with quantised state), -ENOTSUP (a forced kernel
 * this CPU lacks), -ENOMEM. Free with mt_optim_destroy. */
MT_API int mt_optim_create(const mt_optim_params_t *p, mt_optim_t **out);
MT_API void mt_optim_destroy(mt_optim_t *o);
/* Registers count elements at weights (dtype) whose gradient is the FP32
 * array grad (read at each step; both stay the caller's and must outlive
 * the optimizer). Returns the parameter's index, or -errno. */
MT_API int mt_optim_register(mt_optim_t *o, void *weights, size_t count, mt_dtype_t dtype,
                             const float *grad);
/* The same with a gradient in grad_dtype (bf16 or fp16 as the device
 * produced it, or f32): each element is widened exactly to float as the
 * step reads it, so the result is torch's step on the float32 copy of the
 * gradient (grad.float()) applied to the FP32 master. */
MT_API int mt_optim_register_grad(mt_optim_t *o, void *weights, size_t count, mt_dtype_t dtype,
                                  const void *grad, mt_dtype_t grad_dtype);
/* Registers a parameter that lives in GPU memory mtalloc manages: count
 * elements of dtype at the device address weights, and its gradient (of
 * grad_dtype) at grad. The FP32 master starts from the device weights,
 * which are then written back to mtalloc's host copy and their device copy
 * dropped: from here on they are clean until a kernel writes them.
 * mt_optim_step (and mt_optim_grad_norm) read the gradient from the device;
 * mt_optim_wait writes the new weights into mtalloc's host copy of the
 * weights and drops their device copy without a copy, so the next kernel
 * that reads them fetches them and a clean eviction of them costs nothing.
 * The gradient must be final (the device work that writes it done) when
 * step or grad_norm is called. Returns the parameter's index, or -EINVAL
 * (not memory mtalloc manages, or a bad dtype), -ENOMEM, -errno. */
MT_API int mt_optim_register_device(mt_optim_t *o, void *weights, size_t count, mt_dtype_t dtype,
                                    const void *grad, mt_dtype_t grad_dtype);
/* Queues a step of parameter `param` (-1 = all) and returns at once; every
 * gradient is multiplied by clip_coef first (1 = no clipping; see
 * mt_optim_clip_coef). Steps of single parameters queue behind the steps
 * in flight (at most 256 jobs queued; past that the call sleeps until one
 * completes), so a post-accumulate-grad hook can start each parameter's
 * update as soon as its gradient is final. A parameter whose own previous
 * step is still in flight is waited for first (its gradient and state
 * stay untouched while a step reads them). Each parameter counts its own
 * steps, as torch's state['step']. For a device parameter its gradient is
 * read from the device here, on the calling thread. 0, -EINVAL (bad index
 * or hyper-parameter: nothing queued), or -errno of the device read. */
MT_API int mt_optim_step(mt_optim_t *o, int param, float clip_coef);
/* Waits for every step in flight (if any), then writes the device
 * parameters' new weights (mt_optim_register_device). Returns 0, or the
 * first error of those writes. */
MT_API int mt_optim_wait(mt_optim_t *o);
/* Points parameter param at a new gradient (same dtype and size as
 * registered; a device address for a device parameter): PyTorch may
 * allocate a new .grad tensor at each backward. Waits for param's own
 * step in flight first. 0 or -EINVAL. */
MT_API int mt_optim_set_grad(mt_optim_t *o, int param, const void *grad);
/* Sets lr, beta1, beta2, eps, weight_decay and maximize of parameter param
 * (-1: every parameter, and the default for those registered later), used
 * from its next step on: LR schedulers and torch's param groups. The
 * scalars are still formed per parameter exactly as torch forms them from
 * its group's Python floats. adamw and amsgrad must equal the creation's;
 * kernel, state and threads are ignored. 0 or -EINVAL (a value torch
 * rejects, or adamw/amsgrad differ). */
MT_API int mt_optim_set_hparams(mt_optim_t *o, int param, const mt_optim_params_t *p);

/* One parameter's shape and state format (mt_optim_param_info). */
typedef struct mt_optim_param_info {
  size_t count;       /* elements */
  mt_dtype_t dtype;   /* of the weights */
  float step;         /* torch's state['step'], a float32 count */
  int amsgrad;        /* 1: has MT_OPTIM_FIELD_MAX_EXP_AVG_SQ */
  int state_bits;     /* 0: FP32 moments; 8/4/2: block-quantised */
  size_t code_bytes;  /* quantised: bytes of codes per moment (mt_optim_state_raw_read) */
  size_t blocks;      /* quantised: scales per moment, one per 128 elements */
} mt_optim_param_info_t;

/* The state arrays of a parameter. */
typedef enum mt_optim_field {
  MT_OPTIM_FIELD_MASTER = 0,         /* FP32 master weights (== the weights for f32) */
  MT_OPTIM_FIELD_EXP_AVG = 1,        /* torch's exp_avg (m) */
  MT_OPTIM_FIELD_EXP_AVG_SQ = 2,     /* exp_avg_sq (v) */
  MT_OPTIM_FIELD_MAX_EXP_AVG_SQ = 3, /* max_exp_avg_sq (amsgrad only) */
} mt_optim_field_t;

/* Fills *info for param, after its step in flight. 0 or -EINVAL. */
MT_API int mt_optim_param_info(mt_optim_t *o, int param, mt_optim_param_info_t *info);
/* Sets param's step count (torch's state['step'], >= 0), after its step
 * in flight. 0 or -EINVAL. */
MT_API int mt_optim_set_step(mt_optim_t *o, int param, float step);
/* Copies count (== the parameter's count) FP32 values of field out of /
 * into param's state, after its step in flight: torch's state_dict()
 * tensors. Quantised moments are decoded on read and encoded on write (a
 * write is then as lossy as a step's re-encode: for a bit-identical resume
 * use the raw calls). Writing the master also rewrites the weights (bf16/
 * fp16 rounded; a device parameter's through mtalloc's host copy). 0,
 * -EINVAL (bad param, field or count), -ENOENT (max_exp_avg_sq without
 * amsgrad), or -errno of the device write. */
MT_API int mt_optim_state_read(mt_optim_t *o, int param, mt_optim_field_t field, float *out,
                               size_t count);
MT_API int mt_optim_state_write(mt_optim_t *o, int param, mt_optim_field_t field, const float *in,
                                size_t count);
/* Raw access to a quantised moment (field EXP_AVG or EXP_AVG_SQ of a
 * parameter with state_bits != 0), for checkpoints that resume bit for
 * bit. Format (libmtalloc/optim/codec.c): the moment is cut into blocks of
 * 128 elements (the last padded); codes holds state_bits bits per element,
 * packed low bits first (element i in byte i * bits / 8), code_bytes =
 * blocks * 128 * bits / 8; scales holds one float per block, its absolute
 * maximum. Element i decodes to map[code] * scales[i / 128], where map is
 * the codec's table of 2^bits ascending values in [-1, 1] (signed,
 * exp_avg) or [0, 1] (unsigned, exp_avg_sq). At 4 bits exp_avg_sq's
 * map[c] = 2^(c-15) (since checkpoint format 2) and exp_avg's map[8 + k]
 * = 2^(k-7), map[7 - k] = -2^(k-7) for k = 1..7, map[7] = map[8] = 0
 * (since format 3): codes read from an older build decode wrong. code_bytes and blocks must be the info's. 0, -EINVAL, -ENOTSUP
 * (FP32 state: use mt_optim_state_read). */
MT_API int mt_optim_state_raw_read(mt_optim_t *o, int param, mt_optim_field_t field, void *codes,
                                   size_t code_bytes, float *scales, size_t blocks);
MT_API int mt_optim_state_raw_write(mt_optim_t *o, int param, mt_optim_field_t field,
                                    const void *codes, size_t code_bytes, const float *scales,
                                    size_t blocks);
/* Nanoseconds o's worker threads have spent in finished step and norm
 * tasks since creation, summed over workers: read it when the framework
 * calls the optimizer's step and again after mt_optim_wait to see how
 * much of the update ran before (hidden behind backward). */
MT_API uint64_t mt_optim_work_ns(const mt_optim_t *o);
/* The global 2-norm of every registered gradient, computed as
 * torch.nn.utils.clip_grad_norm_ computes it on a CPU (per-tensor norms in
 * aten's reduction order, then the norm of those, in registration order):
 * bit for bit torch's value under ATEN_CPU_CAPABILITY default or avx2 (see
 * libmtalloc/optim/gradnorm.c). Runs on the optimizer's threads and returns
 * when done. 0 or -EBUSY (a step in flight). */
MT_API int mt_optim_grad_norm(mt_optim_t *o, float *total_norm);
/* torch.nn.utils.clip_grad_norm_'s coefficient, min(max_norm / (total_norm
 * + 1e-6), 1), in float exactly as torch computes it (a reciprocal and a
 * product). Clipping as torch does: mt_optim_grad_norm, then
 * mt_optim_step(o, -1, mt_optim_clip_coef(total, max_norm)). */
MT_API float mt_optim_clip_coef(float total_norm, double max_norm);
/* Worker threads of o. */
MT_API int mt_optim_threads(const mt_optim_t *o);
/* Saves / loads masters, state and step counts (a versioned, checksummed
 * file; format in libmtalloc/optim/checkpoint.c). A corrupt or mismatched
 * file loads nothing. 0 or -errno; mt_optim_error says why. */
MT_API int mt_optim_save(mt_optim_t *o, const char *path);
MT_API int mt_optim_load(mt_optim_t *o, const char *path);
/* The last save/load error as text ("" if none), owned by o. */
MT_API const char *mt_optim_error(const mt_optim_t *o);

#ifdef __cplusplus
}
#endif
#endif
