/*
 * fake_kernel.c - kernels: registration by tests, parameter layout, and the
 * launch entry points.
 *
 * Concept: a test registers a host function as a kernel with the sizes of
 * its parameters (fakecuda_register_kernel); the fake lays the parameters
 * out as nvcc does -- in order, each aligned to its natural alignment
 * (min(size, 8) for power-of-two sizes; for other sizes the largest power
 * of two dividing the size, capped at 8, e.g. 4 for a 12-byte struct of
 * floats) -- and answers cuFuncGetParamInfo from that layout, which is what
 * the interposer scans.
 *
 * A launch copies the parameter VALUES into its op at launch time (from the
 * kernelParams array, or from the packed CU_LAUNCH_PARAM_BUFFER_POINTER
 * buffer of `extra`, split with the registered offsets), because the caller
 * may reuse its buffer as soon as the launch returns. The body later runs on
 * the stream's worker with params[i] pointing at the copy of parameter i.
 *
 * Invariants: an fc_func_t is immutable after registration. One registered
 * by a test lives as long as the process; one of a library or module
 * (fake_library.c) is retired at its unload, after every stream drained,
 * and its memory is reused by the next function made, so a later kernel
 * may get the same handle (as with the real driver).
 *
 * A CUkernel (fake_library.c) can be launched where a CUfunction is taken;
 * the cuFunc* queries accept it unless FAKECUDA_KERNEL_AS_FUNC=reject.
 *
 * Threading: the function registry is under g_fc.mu; bodies run unlocked.
 */
#include <stdlib.h>
#include <string.h>

#include "fake_internal.h"

#define FC_PARAM_MAX 32764

static size_t param_align(size_t size) {
  size_t a = 8;
  while (a > 1 && size % a) a /= 2;
  return a;
}

static size_t values_offset(size_t nparams) { return (nparams * sizeof(void *) + 15) & ~(size_t)15; }

/* Memory of retired functions (unloaded libraries), reused LIFO so that a
 * library loaded after an unload gets the same handles back, as the real
 * driver may. Under g_fc.mu. */
static fc_func_t *func_recycle[64];
static size_t nfunc_recycle;

fc_func_t *fc_func_new(const char *name, fakecuda_kernel_fn fn, size_t nparams, const size_t *param_sizes,
                       const size_t *param_aligns) {
  if (!name || !fn || (nparams && !param_sizes)) return NULL;
  /* cu130 allows 32,764 bytes of kernel parameters (CUDA 12.1 raised the
   * limit from 4 KiB): PyTorch's multi-tensor kernels take ~25 KB structs. */
  size_t sum = 0;
  for (size_t i = 0; i < nparams; i++) {
    if (param_sizes[i] == 0 || param_sizes[i] > FC_PARAM_MAX) return NULL;
    if (param_aligns && (param_aligns[i] == 0 || (param_aligns[i] & (param_aligns[i] - 1)) || param_aligns[i] > 256))
      return NULL;
    sum += param_sizes[i];
  }
  if (sum > FC_PARAM_MAX) return NULL;
  fc_lock();
  fc_func_t *f = nfunc_recycle ? func_recycle[--nfunc_recycle] : NULL;
  fc_unlock();
  if (f) memset(f, 0, sizeof *f);
  else f = calloc(1, sizeof *f);
  if (!f) return NULL;
  f->name = strdup(name);
  f->sizes = calloc(nparams ? nparams : 1, sizeof *f->sizes);
  f->offsets = calloc(nparams ? nparams : 1, sizeof *f->offsets);
  if (!f->name || !f->sizes || !f->offsets) goto fail;
  f->fn = fn;
  f->nparams = nparams;
  size_t off = 0;
  for (size_t i = 0; i < nparams; i++) {
    size_t a = param_aligns ? param_aligns[i] : param_align(param_sizes[i]);
    off = (off + a - 1) / a * a;
    f->sizes[i] = param_sizes[i];
    f->offsets[i] = off;
    off += param_sizes[i];
  }
  f->total = off;
  fc_lock();
  bool ok = fc_set_add(&g_fc.funcs, f);
  fc_unlock();
  if (ok) return f;
fail:
  free(f->name);
  free(f->sizes);
  free(f->offsets);
  free(f);
  return NULL;
}

void fc_func_retire(fc_func_t *f) {
  fc_set_del(&g_fc.funcs, f);
  free(f->name);
  free(f->sizes);
  free(f->offsets);
  if (nfunc_recycle < sizeof func_recycle / sizeof func_recycle[0]) func_recycle[nfunc_recycle++] = f;
  else free(f);
}

FC_API CUfunction fakecuda_register_kernel(const char *name, fakecuda_kernel_fn fn, size_t nparams,
                                           const size_t *param_sizes) {
  return (CUfunction)fc_func_new(name, fn, nparams, param_sizes, NULL);
}

/* A launchable handle: a CUfunction, or a CUkernel (cuda.h lets
 * cuLaunchKernel take one cast to CUfunction). */
static fc_func_t *func_get(CUfunction h) {
  fc_lock();
  fc_func_t *f = fc_set_has(&g_fc.funcs, h) ? (fc_func_t *)h : fc_kernel_func(h);
  fc_unlock();
  return f;
}

/* What the cuFunc* queries accept: a CUfunction always; a CUkernel unless
 * FAKECUDA_KERNEL_AS_FUNC=reject, and then they answer
 * CUDA_ERROR_INVALID_VALUE, the answer an out-of-range parameter index also
 * gets (whether the real driver accepts kernels here is undocumented; this
 * is the worst case for a caller). *r is the error when NULL is returned. */
static fc_func_t *query_get(CUfunction h, CUresult *r) {
  fc_lock();
  bool is_func = fc_set_has(&g_fc.funcs, h);
  fc_func_t *k = is_func ? NULL : fc_kernel_func(h);
  fc_unlock();
  if (is_func) return (fc_func_t *)h;
  *r = k && g_fc.kernel_as_func_reject ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_INVALID_HANDLE;
  return k && !g_fc.kernel_as_func_reject ? k : NULL;
}

CUresult fc_param_info(const fc_func_t *f, size_t paramIndex, size_t *paramOffset, size_t *paramSize) {
  if (g_fc.paraminfo_unsupported) return CUDA_ERROR_NOT_SUPPORTED;
  if (paramIndex >= f->nparams) return CUDA_ERROR_INVALID_VALUE;
  if (paramOffset) *paramOffset = f->offsets[paramIndex];
  if (paramSize) *paramSize = f->sizes[paramIndex];
  return CUDA_SUCCESS;
}

FC_API_NEW CUresult cuFuncGetParamInfo(CUfunction func, size_t paramIndex, size_t *paramOffset,
                                   size_t *paramSize) {
  CUresult r = fc_check_init();
  if (r) return r;
  fc_func_t *f = query_get(func, &r);
  if (!f) return r;
  return fc_param_info(f, paramIndex, paramOffset, paramSize);
}

FC_API_NEW CUresult cuFuncGetName(const char **name, CUfunction hfunc) {
  CUresult r = fc_check_init();
  if (r) return r;
  if (!name) return CUDA_ERROR_INVALID_VALUE;
  fc_func_t *f = query_get(hfunc, &r);
  if (!f) return r;
  *name = f->name;
  return CUDA_SUCCESS;
}

void fc_kernel_op_fixup(fc_op_t *op) {
  fc_func_t *f = op->u.k.fn;
  void **params = (void **)(void *)op->buf;
  unsigned char *vals = op->buf + values_offset(f->nparams);
  for (size_t i = 0; i < f->nparams; i++) params[i] = vals + f->offsets[i];
  op->u.k.params = params;
}

typedef struct launch_args {
  unsigned grid[3], block[3], shmem;
  CUstream stream;
} launch_args_t;

static CUresult launch(CUfunction hf, const launch_args_t *a, void **kernelParams, void **extra) {
  CUresult r = fc_check_ctx();
  if (r) return r;
  fc_func_t *f = func_get(hf);
  if (!f) return CUDA_ERROR_INVALID_HANDLE;
  for (int i = 0; i < 3; i++)
    if (a->grid[i] == 0 || a->block[i] == 0) return CUDA_ERROR_INVALID_VALUE;
  if ((unsigned long long)a->block[0] * a->block[1] * a->block[2] > 1024)
    return CUDA_ERROR_INVALID_VALUE;
  if (a->block[2] > 64 || a->grid[1] > 65535 || a->grid[2] > 65535)
    return CUDA_ERROR_INVALID_VALUE;
  if (a->shmem > 232448) return CUDA_ERROR_INVALID_VALUE;

  const unsigned char *packed = NULL; /* the extra form's buffer */
  if (kernelParams && extra) return CUDA_ERROR_INVALID_VALUE;
  if (extra) {
    size_t *psize = NULL;
    for (size_t i = 0; extra[i] != CU_LAUNCH_PARAM_END; i++) {
      if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER)
        packed = extra[++i];
      else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE)
        psize = extra[++i];
      else
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (f->nparams && (!packed || !psize || *psize < f->total)) return CUDA_ERROR_INVALID_VALUE;
  } else if (f->nparams && !kernelParams) {
    return CUDA_ERROR_INVALID_VALUE;
  }

  fc_op_t *op = fc_op_new(FC_OP_KERNEL, values_offset(f->nparams) + f->total);
  if (!op) return CUDA_ERROR_OUT_OF_MEMORY;
  op->u.k.fn = f;
  fc_kernel_op_fixup(op);
  for (size_t i = 0; i < f->nparams; i++) {
    const void *src = packed ? packed + f->offsets[i] : kernelParams[i];
    if (!src) {
      fc_op_free(op);
      return CUDA_ERROR_INVALID_VALUE;
    }
    memcpy(op->u.k.params[i], src, f->sizes[i]);
  }
  fakecuda_launch_t *l = &op->u.k.launch;
  l->name = f->name;
  memcpy(l->grid, a->grid, sizeof l->grid);
  memcpy(l->block, a->block, sizeof l->block);
  l->shared_bytes = a->shmem;
  l->stream = a->stream;
  op->handle = a->stream;

  return fc_submit_to(a->stream, op);
}

FC_API CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                               unsigned int bx, unsigned int by, unsigned int bz,
                               unsigned int sharedMemBytes, CUstream hStream, void **kernelParams,
                               void **extra) {
  launch_args_t a = {{gx, gy, gz}, {bx, by, bz}, sharedMemBytes, hStream};
  return launch(f, &a, kernelParams, extra);
}

FC_API CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy,
                                    unsigned int gz, unsigned int bx, unsigned int by,
                                    unsigned int bz, unsigned int sharedMemBytes, CUstream hStream,
                                    void **kernelParams, void **extra) {
  return cuLaunchKernel(f, gx, gy, gz, bx, by, bz, sharedMemBytes, hStream, kernelParams, extra);
}

FC_API CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **kernelParams,
                                 void **extra) {
  if (!config) return CUDA_ERROR_INVALID_VALUE;
  if (config->numAttrs && !config->attrs) return CUDA_ERROR_INVALID_VALUE;
  launch_args_t a = {{config->gridDimX, config->gridDimY, config->gridDimZ},
                     {config->blockDimX, config->blockDimY, config->blockDimZ},
                     config->sharedMemBytes,
                     config->hStream};
  return launch(f, &a, kernelParams, extra);
}

FC_API CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f,
                                      void **kernelParams, void **extra) {
  return cuLaunchKernelEx(config, f, kernelParams, extra);
}

FC_API CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gx, unsigned int gy,
                                          unsigned int gz, unsigned int bx, unsigned int by,
                                          unsigned int bz, unsigned int sharedMemBytes,
                                          CUstream hStream, void **kernelParams) {
  launch_args_t a = {{gx, gy, gz}, {bx, by, bz}, sharedMemBytes, hStream};
  return launch(f, &a, kernelParams, NULL);
}

FC_API CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy,
                                               unsigned int gz, unsigned int bx, unsigned int by,
                                               unsigned int bz, unsigned int sharedMemBytes,
                                               CUstream hStream, void **kernelParams) {
  return cuLaunchCooperativeKernel(f, gx, gy, gz, bx, by, bz, sharedMemBytes, hStream,
                                   kernelParams);
}
