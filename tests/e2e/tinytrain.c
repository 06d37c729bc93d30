/*
 * Description: tinytrain, the end-to-end proof. Trains a 17-layer ReLU MLP
 * with Adam on the fake CUDA driver, allocating and launching the way a
 * framework does, so that the same binary run plain, under LD_PRELOAD of
 * libmtalloc.so, and under LD_PRELOAD with MT_MAX_VRAM = footprint/8 must
 * print bit-identical losses.
 *
 * How it looks to the driver (and so to the interposer):
 *   - It reaches the driver exactly as libcudart does: dlopen("libcuda.so.1"),
 *     dlsym of cuGetProcAddress_v2 only, then every entry point by base name
 *     with cudaVersion 13000. Nothing links against libcuda.
 *   - Long-lived tensors (parameters, gradients, Adam state, the data set)
 *     come from cuMemAlloc; per-step tensors (activations, activation
 *     gradients, Adam's temporary) from cuMemAllocAsync/cuMemFreeAsync on a
 *     created stream, allocated when first needed and freed after last use,
 *     as PyTorch's caching allocator with cudaMallocAsync does.
 *   - Every kernel gets its tensors as 8-byte CUdeviceptr parameters (some
 *     of them interior pointers: a batch is a slice of the data set) plus
 *     int/float scalars; the interposer finds footprints by scanning them.
 *   - The loss is reduced into a device scalar and read back with
 *     cuMemcpyDtoH (legacy stream: ordered after the created stream).
 *
 * The model and why it is this size. Widths alternate 1024 -> 512 -> 1024
 * ... for NBIG = 16 layers, then a 1024 -> 16 head; every big layer's weight
 * is 512x1024 fp32 = exactly 2 MiB (one pager chunk; MT_SMALL_REGION is
 * 1 MiB), and so are its gradient and its two Adam moments. Everything else
 * (biases, the head, activations at batch 16, the 64-sample data set) is
 * small and packed into always-resident chunks by the interposer.
 *
 *   footprint  = 16 layers x 4 tensors x 2 MiB          = 128 MiB
 *              + Adam's temporary (one at a time)         =   2 MiB
 *              + small tensors live at the peak           ~ 0.7 MiB
 *              = 137036296 bytes (130.7 MiB; printed as footprint_bytes)
 *   budget     = footprint / 8 = 17129537 bytes (16.3 MiB)
 *   largest launch: the Adam update is split into two-tensor kernels
 *   (m <- lerp(m, g); v <- b2 v + (1-b2) g^2; t <- sqrt(v)/c2 + eps;
 *   t <- m / t; p <- p - s t), so no launch touches more than two 2 MiB
 *   tensors: 4 MiB + all live small tensors rounded up to a 2 MiB chunk
 *   = 6 MiB, 37% of the budget (printed as largest_launch_bytes, computed
 *   from each launch's pointer parameters as the interposer will).
 *
 * Compute per step: 16 x 512 x 1024 x 16 x 3 ~ 400 M multiply-adds plus
 * 8.4 M parameters of Adam: about 0.15 s on one core, 8 steps in ~1.5 s.
 *
 * Kernels are host functions run by the fake on the stream's worker thread;
 * each is single-threaded with a fixed loop order, so results are
 * deterministic (the vectorisable loops only ever use independent
 * accumulators, which IEEE arithmetic leaves bit-exact).
 *
 * --host-optim: the update runs on mtalloc's host optimizer instead (needs
 * LD_PRELOAD=libmtalloc.so; its mt_ API is found with dlsym). Adam state
 * then lives on the host (no m, v on the device), every weight and bias is
 * registered with mt_optim_register_device and advised read-mostly
 * (mt_advise), and backward offloads each layer's gradients as they become
 * final: after a layer's backward kernels it synchronises the stream (the
 * gradients are done) and queues that layer's updates (mt_optim_step per
 * parameter), which run on the host threads while the next layers'
 * backward runs on the device; the step itself is mt_optim_wait, which
 * writes the new weights into mtalloc's host copies. Adds the lines
 * `host_optim_work_us N` (worker time of the updates), `host_optim_before_step_us N`
 * (of which done before the wait), `host_optim_overlap_percent N`,
 * `weight_dirty_evictions N` (mtalloc's evictions_dirty_readmostly),
 * `evictions_clean N` and `evictions_dirty N` (all regions: the gradients
 * and activations are written on the device).
 *
 * Output (stdout): `step N loss X` per step (X as %a), `accuracy C/N`,
 * `launches N`, `footprint_bytes N`, `largest_launch_bytes N`,
 * `peak_device_bytes N`. Usage: tinytrain [--steps N] [--host-optim]
 * [--times] (default 8 steps).
 *
 * --times: also `step_time N SECONDS` on stderr per step, the wall time
 * from the step's first call to the return of the loss read-back (which
 * waits for all of the step's work), so a benchmark can drop warm-up steps
 * (tools/bench/live_table.py). On stderr so that stdout stays comparable
 * bit for bit between runs.
 * Exit 0 on success; 1 with a message naming the CUresult on any driver
 * error; 2 on bad usage; 77 (skip) when libcuda.so.1 is not the fake.
 */
#include <cudaTypedefs.h>
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cudart_route.h"
#include "mtalloc.h"


/* ---- model and data shape ------------------------------------------------ */

enum {
  NBIG = 16,       /* big (2 MiB weight) layers */
  NLAYER = NBIG + 1, /* plus the classifier head */
  WIDE = 1024,
  NARROW = 512,
  NCLASS = 16,
  BATCH = 16,
  NSAMPLE = 64, /* the data set: 4 batches, cycled */
  TEACHER_HIDDEN = 64,
  DEFAULT_STEPS = 8,
};

static const float LR = 1e-4f, BETA1 = 0.9f, BETA2 = 0.999f, EPS = 1e-8f;

#define MIB ((size_t)1 << 20)
#define CHUNK (2 * MIB)       /* the pager's chunk */
#define SMALL_REGION (1 * MIB) /* below this, allocations are packed */

static int layer_in(int l) { return l == NBIG ? WIDE : (l % 2 == 0 ? WIDE : NARROW); }
static int layer_out(int l) { return l == NBIG ? NCLASS : (l % 2 == 0 ? NARROW : WIDE); }

/* ---- driver entry points --------------------------------------------------- */


#define DRIVER_FNS(X)                                  \
  X(cuGetErrorName, PFN_cuGetErrorName_v6000)          \
  X(cuInit, PFN_cuInit_v2000)                          \
  X(cuDeviceGet, PFN_cuDeviceGet_v2000)                \
  X(cuDevicePrimaryCtxRetain, PFN_cuDevicePrimaryCtxRetain_v7000) \
  X(cuDevicePrimaryCtxRelease, PFN_cuDevicePrimaryCtxRelease_v11000) \
  X(cuCtxSetCurrent, PFN_cuCtxSetCurrent_v4000)        \
  X(cuCtxSynchronize, PFN_cuCtxSynchronize_v13000)     \
  X(cuMemAlloc, PFN_cuMemAlloc_v3020)                  \
  X(cuMemFree, PFN_cuMemFree_v3020)                    \
  X(cuMemAllocAsync, PFN_cuMemAllocAsync_v11020)       \
  X(cuMemFreeAsync, PFN_cuMemFreeAsync_v11020)         \
  X(cuMemcpyHtoD, PFN_cuMemcpyHtoD_v3020)              \
  X(cuMemcpyDtoH, PFN_cuMemcpyDtoH_v3020)              \
  X(cuMemcpyHtoDAsync, PFN_cuMemcpyHtoDAsync_v3020)    \
  X(cuMemsetD8, PFN_cuMemsetD8_v3020)                  \
  X(cuLaunchKernel, PFN_cuLaunchKernel_v4000)          \
  X(cuStreamCreate, PFN_cuStreamCreate_v2000)          \
  X(cuStreamSynchronize, PFN_cuStreamSynchronize_v2000) \
  X(cuStreamDestroy, PFN_cuStreamDestroy_v4000)

#define DECLARE(name, type) static type p_##name;
DRIVER_FNS(DECLARE)
#undef DECLARE

static void die(const char *what, CUresult r) {
  const char *name = NULL;
  if (p_cuGetErrorName) p_cuGetErrorName(r, &name);
  fprintf(stderr, "tinytrain: %s failed: %s (%d)\n", what, name ? name : "unknown CUresult",
          (int)r);
  exit(1);
}

#define CALL(fn, ...)                          \
  do {                                         \
    CUresult r_ = p_##fn(__VA_ARGS__);         \
    if (r_ != CUDA_SUCCESS) die(#fn, r_);      \
  } while (0)

/* ---- device memory, with the program's own accounting ---------------------- */

/* Every live allocation, so a launch's footprint can be computed from its
 * pointer parameters exactly as the interposer will. */
typedef struct {
  CUdeviceptr ptr;
  size_t size;
} alloc_t;

enum { MAX_ALLOCS = 512 };
static alloc_t g_allocs[MAX_ALLOCS];
static int g_nallocs;
static size_t g_held, g_peak;              /* bytes held now / at peak */
static size_t g_small_held;                /* of which in small allocations */
static size_t g_largest_launch;            /* bytes, see launch_footprint */
static unsigned long long g_launches;
static CUstream g_stream;

static void track(CUdeviceptr p, size_t size) {
  if (g_nallocs == MAX_ALLOCS) {
    fprintf(stderr, "tinytrain: more than %d live allocations\n", MAX_ALLOCS);
    exit(1);
  }
  g_allocs[g_nallocs++] = (alloc_t){p, size};
  g_held += size;
  if (size < SMALL_REGION) g_small_held += size;
  if (g_held > g_peak) g_peak = g_held;
}

static void untrack(CUdeviceptr p) {
  for (int i = 0; i < g_nallocs; i++) {
    if (g_allocs[i].ptr != p) continue;
    g_held -= g_allocs[i].size;
    if (g_allocs[i].size < SMALL_REGION) g_small_held -= g_allocs[i].size;
    g_allocs[i] = g_allocs[--g_nallocs];
    return;
  }
  fprintf(stderr, "tinytrain: freeing untracked pointer 0x%llx\n", (unsigned long long)p);
  exit(1);
}

static const alloc_t *find_alloc(CUdeviceptr p) {
  for (int i = 0; i < g_nallocs; i++)
    if (p >= g_allocs[i].ptr && p < g_allocs[i].ptr + g_allocs[i].size) return &g_allocs[i];
  return NULL;
}

/* Long-lived: cuMemAlloc. */
static CUdeviceptr dalloc(size_t bytes) {
  CUdeviceptr p;
  CALL(cuMemAlloc, &p, bytes);
  track(p, bytes);
  return p;
}

static void dfree(CUdeviceptr p) {
  untrack(p);
  CALL(cuMemFree, p);
}

/* Per step: stream-ordered on g_stream. */
static CUdeviceptr salloc(size_t bytes) {
  CUdeviceptr p;
  CALL(cuMemAllocAsync, &p, bytes, g_stream);
  track(p, bytes);
  return p;
}

static void sfree(CUdeviceptr p) {
  untrack(p);
  CALL(cuMemFreeAsync, p, g_stream);
}

static size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

/* ---- kernels ---------------------------------------------------------------- */

/* Kernel bodies touch nothing but device memory, which the fake mmaps
 * itself: ASan keeps no shadow for it (a stray access is caught by the
 * fake's PROT_NONE pages instead), so instrumenting them buys nothing and
 * would make the sanitizer build ten times slower by defeating
 * vectorisation. */
#define KERNEL __attribute__((no_sanitize("address", "undefined")))

#define PTR(i) ((float *)(uintptr_t)(*(CUdeviceptr *)p[i]))
#define INT(i) (*(int *)p[i])
#define FLT(i) (*(float *)p[i])

/* Eight fp32 lanes (GCC/Clang vector extension): lane-wise arithmetic is
 * exact IEEE, so a dot product kept as eight partial sums combined in a
 * fixed order is deterministic, and fast without -ffast-math. */
typedef float v8f __attribute__((vector_size(32)));

/* y[r][o] = x[r][.] . w[o][.]  (y = x W^T); params y, x, w, rows, in, out. */
KERNEL static void k_matmul_fwd(void **p, const fakecuda_launch_t *l) {
  (void)l;
  float *y = PTR(0);
  const float *x = PTR(1), *w = PTR(2);
  int rows = INT(3), in = INT(4), out = INT(5);
  for (int o = 0; o < out; o++) { /* a row of w stays in cache for all rows of x */
    const float *wo = w + (size_t)o * in;
    for (int r = 0; r < rows; r++) {
      const float *xr = x + (size_t)r * in;
      v8f acc = {0}, a, b;
      int i = 0;
      for (; i + 8 <= in; i += 8) {
        memcpy(&a, xr + i, sizeof a);
        memcpy(&b, wo + i, sizeof b);
        acc += a * b;
      }
      for (; i < in; i++) acc[0] += xr[i] * wo[i];
      y[(size_t)r * out + o] =
          ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    }
  }
}

/* z += b (per row); h = relu ? max(z, 0) : z.  params z, b, h, rows, cols, relu.
 * h may be z. */
KERNEL static void k_bias_act(void **p, const fakecuda_launch_t *l) {
  (void)l;
  float *z = PTR(0), *h = PTR(2);
  const float *b = PTR(1);
  int rows = INT(3), cols = INT(4), relu = INT(5);
  for (int r = 0; r < rows; r++)
    for (int c = 0; c < cols; c++) {
      size_t k = (size_t)r * cols + c;
      z[k] += b[c];
      h[k] = relu && z[k] < 0.0f ? 0.0f : z[k];
    }
}

/* Softmax cross-entropy. params logits, labels (int), dlogits, out, rows, cols.
 * dlogits = (softmax - onehot) / rows; out[0] += mean loss; out[1] += number
 * of rows whose argmax is the label. out is accumulated so an evaluation pass
 * can sum over batches; training zeroes it first. */
KERNEL static void k_xent(void **p, const fakecuda_launch_t *l) {
  (void)l;
  const float *z = PTR(0);
  const int *label = (const int *)PTR(1);
  float *dz = PTR(2), *out = PTR(3);
  int rows = INT(4), cols = INT(5);
  float loss = 0.0f, correct = 0.0f;
  for (int r = 0; r < rows; r++) {
    const float *zr = z + (size_t)r * cols;
    int arg = 0;
    for (int c = 1; c < cols; c++)
      if (zr[c] > zr[arg]) arg = c;
    float max = zr[arg], sum = 0.0f;
    for (int c = 0; c < cols; c++) sum += expf(zr[c] - max);
    float lse = max + logf(sum);
    loss += lse - zr[label[r]];
    if (arg == label[r]) correct += 1.0f;
    if (dz)
      for (int c = 0; c < cols; c++)
        dz[(size_t)r * cols + c] =
            (expf(zr[c] - lse) - (c == label[r] ? 1.0f : 0.0f)) / (float)rows;
  }
  out[0] += loss / (float)rows;
  out[1] += correct;
}

/* dx[r][i] = sum_o dy[r][o] w[o][i].  params dx, dy, w, rows, in, out. */
KERNEL static void k_matmul_dx(void **p, const fakecuda_launch_t *l) {
  (void)l;
  float *dx = PTR(0);
  const float *dy = PTR(1), *w = PTR(2);
  int rows = INT(3), in = INT(4), out = INT(5);
  for (size_t k = 0; k < (size_t)rows * in; k++) dx[k] = 0.0f;
  for (int o = 0; o < out; o++) { /* each row of w is read once */
    const float *wo = w + (size_t)o * in;
    for (int r = 0; r < rows; r++) {
      float a = dy[(size_t)r * out + o], *dxr = dx + (size_t)r * in;
      for (int i = 0; i < in; i++) dxr[i] += a * wo[i];
    }
  }
}

/* dw[o][i] = sum_r dy[r][o] x[r][i] (overwrites).  params dw, dy, x, rows, in, out. */
KERNEL static void k_matmul_dw(void **p, const fakecuda_launch_t *l) {
  (void)l;
  float *dw = PTR(0);
  const float *dy = PTR(1), *x = PTR(2);
  int rows = INT(3), in = INT(4), out = INT(5);
  for (int o = 0; o < out; o++) {
    float *dwo = dw + (size_t)o * in;
    for (int i = 0; i < in; i++) dwo[i] = 0.0f;
    for (int r = 0; r < rows; r++) {
      float a = dy[(size_t)r * out + o];
      const float *xr = x + (size_t)r * in;
      for (int i = 0; i < in; i++) dwo[i] += a * xr[i];
    }
  }
}

/* db[c] = sum_r dy[r][c].  params db, dy, rows, cols. */
KERNEL static void k_bias_grad(void **p, const fakecuda_launch_t *l) {
  (void)l;
  float *db = PTR(0);
  const float *dy = PTR(1);
  int rows = INT(2), cols = INT(3);
  for (int c = 0; c < cols; c++) db[c] = 0.0f;
  for (int r = 0; r < rows; r++)
    for (int c = 0; c < cols; c++) db[c] += dy[(size_t)r * cols + c];
}

/* dh = z > 0 ? dh : 0, in place.  params dh, z, n. */
KERNEL static void k_relu_bwd(void **p, const fakecuda_launch_t *l) {
  (void)l;
  float *dh = PTR(0);
  const float *z = PTR(1);
  int n = INT(2);
  for (int i = 0; i < n; i++)
    if (!(z[i] > 0.0f)) dh[i] = 0.0f;
}

/* m += (1 - beta1) (g - m).  params m, g, beta1, n. */
KERNEL static void k_adam_m(void **p, const fakecuda_launch_t *l) {
  (void)l;
  float *m = PTR(0);
  const float *g = PTR(1);
  float b1 = FLT(2);
  int n = INT(3);
  for (int i = 0; i < n; i++) m[i] += (1.0f - b1) * (g[i] - m[i]);
}

/* v = beta2 v + (1 - beta2) g^2.  params v, g, beta2, n. */
KERNEL static void k_adam_v(void **p, const fakecuda_launch_t *l) {
  (void)l;
  float *v = PTR(0);
  const float *g = PTR(1);
  float b2 = FLT(2);
  int n = INT(3);
  for (int i = 0; i < n; i++) v[i] = b2 * v[i] + (1.0f - b2) * g[i] * g[i];
}

/* t = sqrt(v) / c2 + eps, c2 = sqrt(1 - beta2^step).  params t, v, c2, eps, n. */
KERNEL static void k_adam_denom(void **p, const fakecuda_launch_t *l) {
  (void)l;
  float *t = PTR(0);
  const float *v = PTR(1);
  float c2 = FLT(2), eps = FLT(3);
  int n = INT(4);
  for (int i = 0; i < n; i++) t[i] = sqrtf(v[i]) / c2 + eps;
}

/* t = m / t.  params t, m, n. */
KERNEL static void k_adam_dir(void **p, const fakecuda_launch_t *l) {
  (void)l;
  float *t = PTR(0);
  const float *m = PTR(1);
  int n = INT(2);
  for (int i = 0; i < n; i++) t[i] = m[i] / t[i];
}

/* w -= s t, s = lr / (1 - beta1^step).  params w, t, s, n. */
KERNEL static void k_adam_apply(void **p, const fakecuda_launch_t *l) {
  (void)l;
  float *w = PTR(0);
  const float *t = PTR(1);
  float s = FLT(2);
  int n = INT(3);
  for (int i = 0; i < n; i++) w[i] -= s * t[i];
}

/* X(id, name, signature): the body is k_<name>; signature letters are the
 * parameters: p = 8-byte device pointer, i = int, f = float */
#define KERNELS(X)                         \
  X(MATMUL_FWD, matmul_fwd, "pppiii")    \
  X(BIAS_ACT, bias_act, "pppiii")        \
  X(XENT, xent, "ppppii")                \
  X(MATMUL_DX, matmul_dx, "pppiii")      \
  X(MATMUL_DW, matmul_dw, "pppiii")      \
  X(BIAS_GRAD, bias_grad, "ppii")        \
  X(RELU_BWD, relu_bwd, "ppi")           \
  X(ADAM_M, adam_m, "ppfi")              \
  X(ADAM_V, adam_v, "ppfi")              \
  X(ADAM_DENOM, adam_denom, "ppffi")     \
  X(ADAM_DIR, adam_dir, "ppi")           \
  X(ADAM_APPLY, adam_apply, "ppfi")

enum {
#define ID(id, name, sig) K_##id,
  KERNELS(ID)
#undef ID
  K_COUNT
};

static const struct {
  const char *name;
  fakecuda_kernel_fn fn;
  const char *sig;
} kernel_defs[K_COUNT] = {
#define DEF(id, name, sig) [K_##id] = {#name, k_##name, sig},
    KERNELS(DEF)
#undef DEF
};

static CUfunction g_kernel[K_COUNT];

typedef cudart_register_fn register_fn_t;

static void register_kernels(register_fn_t reg) {
  for (int k = 0; k < K_COUNT; k++) {
    size_t sizes[16], n = strlen(kernel_defs[k].sig);
    for (size_t i = 0; i < n; i++) sizes[i] = kernel_defs[k].sig[i] == 'p' ? 8 : 4;
    g_kernel[k] = reg(kernel_defs[k].name, kernel_defs[k].fn, n, sizes);
    if (!g_kernel[k]) {
      fprintf(stderr, "tinytrain: registering kernel %s failed\n", kernel_defs[k].name);
      exit(1);
    }
  }
}

/* What this launch needs on the GPU under the pager, in bytes: its distinct
 * big regions rounded up to chunks, plus every live small allocation
 * (packed, always resident) rounded up to chunks. */
static size_t launch_footprint(int k, void **params) {
  const alloc_t *seen[16];
  int nseen = 0;
  size_t big = 0;
  for (size_t i = 0; kernel_defs[k].sig[i]; i++) {
    if (kernel_defs[k].sig[i] != 'p') continue;
    const alloc_t *a = find_alloc(*(CUdeviceptr *)params[i]);
    if (!a || a->size < SMALL_REGION) continue;
    int dup = 0;
    for (int j = 0; j < nseen; j++) dup |= seen[j] == a;
    if (dup) continue;
    seen[nseen++] = a;
    big += round_up(a->size, CHUNK);
  }
  return big + round_up(g_small_held, CHUNK);
}

/* Launches kernel k over `work` elements on g_stream (grid/block as a
 * framework would pick them; the fake runs the body once). */
static void launch(int k, size_t work, void **params) {
  size_t fp = launch_footprint(k, params);
  if (fp > g_largest_launch) g_largest_launch = fp;
  unsigned grid = (unsigned)((work + 255) / 256);
  CALL(cuLaunchKernel, g_kernel[k], grid ? grid : 1, 1, 1, 256, 1, 1, 0, g_stream, params, NULL);
  g_launches++;
}

static void matmul_fwd(CUdeviceptr y, CUdeviceptr x, CUdeviceptr w, int rows, int in, int out) {
  void *p[] = {&y, &x, &w, &rows, &in, &out};
  launch(K_MATMUL_FWD, (size_t)rows * out, p);
}
static void bias_act(CUdeviceptr z, CUdeviceptr b, CUdeviceptr h, int rows, int cols, int relu) {
  void *p[] = {&z, &b, &h, &rows, &cols, &relu};
  launch(K_BIAS_ACT, (size_t)rows * cols, p);
}
static void xent(CUdeviceptr z, CUdeviceptr label, CUdeviceptr dz, CUdeviceptr out, int rows,
                 int cols) {
  void *p[] = {&z, &label, &dz, &out, &rows, &cols};
  launch(K_XENT, (size_t)rows, p);
}
static void matmul_dx(CUdeviceptr dx, CUdeviceptr dy, CUdeviceptr w, int rows, int in, int out) {
  void *p[] = {&dx, &dy, &w, &rows, &in, &out};
  launch(K_MATMUL_DX, (size_t)rows * in, p);
}
static void matmul_dw(CUdeviceptr dw, CUdeviceptr dy, CUdeviceptr x, int rows, int in, int out) {
  void *p[] = {&dw, &dy, &x, &rows, &in, &out};
  launch(K_MATMUL_DW, (size_t)out * in, p);
}
static void bias_grad(CUdeviceptr db, CUdeviceptr dy, int rows, int cols) {
  void *p[] = {&db, &dy, &rows, &cols};
  launch(K_BIAS_GRAD, (size_t)cols, p);
}
static void relu_bwd(CUdeviceptr dh, CUdeviceptr z, int n) {
  void *p[] = {&dh, &z, &n};
  launch(K_RELU_BWD, (size_t)n, p);
}
static void adam_2(int k, CUdeviceptr a, CUdeviceptr b, float s, int n) {
  void *p[] = {&a, &b, &s, &n};
  launch(k, (size_t)n, p);
}
static void adam_denom(CUdeviceptr t, CUdeviceptr v, float c2, float eps, int n) {
  void *p[] = {&t, &v, &c2, &eps, &n};
  launch(K_ADAM_DENOM, (size_t)n, p);
}
static void adam_dir(CUdeviceptr t, CUdeviceptr m, int n) {
  void *p[] = {&t, &m, &n};
  launch(K_ADAM_DIR, (size_t)n, p);
}

/* ---- host-side data ---------------------------------------------------------- */

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;

static uint64_t xorshift64s(void) {
  g_rng ^= g_rng >> 12;
  g_rng ^= g_rng << 25;
  g_rng ^= g_rng >> 27;
  return g_rng * 0x2545f4914f6cdd1dull;
}

/* Uniform in [-a, a), from the top 24 bits: exact in fp32. */
static float uniform(float a) {
  float u = (float)(xorshift64s() >> 40) / 16777216.0f;
  return (2.0f * u - 1.0f) * a;
}

static void *xmalloc(size_t n) {
  void *p = malloc(n);
  if (!p) {
    fprintf(stderr, "tinytrain: out of host memory (%zu bytes)\n", n);
    exit(1);
  }
  return p;
}

/* Inputs uniform with unit variance; labels from a fixed random teacher,
 * argmax(W2 tanh(W1 x)), so they are a learnable function of the input. */
static void make_data(float *x, int *label) {
  for (size_t i = 0; i < (size_t)NSAMPLE * WIDE; i++) x[i] = uniform(1.7320508f);
  float *w1 = xmalloc(sizeof(float) * TEACHER_HIDDEN * WIDE);
  float w2[NCLASS][TEACHER_HIDDEN];
  for (size_t i = 0; i < (size_t)TEACHER_HIDDEN * WIDE; i++) w1[i] = uniform(sqrtf(3.0f / WIDE));
  for (int c = 0; c < NCLASS; c++)
    for (int j = 0; j < TEACHER_HIDDEN; j++) w2[c][j] = uniform(1.0f);
  for (int s = 0; s < NSAMPLE; s++) {
    float h[TEACHER_HIDDEN];
    for (int j = 0; j < TEACHER_HIDDEN; j++) {
      float acc = 0.0f;
      for (int i = 0; i < WIDE; i++) acc += w1[(size_t)j * WIDE + i] * x[(size_t)s * WIDE + i];
      h[j] = tanhf(acc);
    }
    int best = 0;
    float best_v = -INFINITY;
    for (int c = 0; c < NCLASS; c++) {
      float acc = 0.0f;
      for (int j = 0; j < TEACHER_HIDDEN; j++) acc += w2[c][j] * h[j];
      if (acc > best_v) best_v = acc, best = c;
    }
    label[s] = best;
  }
  free(w1);
}

/* ---- the host optimizer (--host-optim) --------------------------------------- */

/* mtalloc's API, from the preloaded library (tinytrain links nothing of it) */
#define MT_FNS(X)                                                                   \
  X(mt_optim_defaults) X(mt_optim_create) X(mt_optim_destroy)                       \
  X(mt_optim_register_device) X(mt_optim_step) X(mt_optim_wait) X(mt_optim_work_ns) \
  X(mt_advise) X(mt_stats_json)
#define DECLARE_MT(name) static __typeof__(name) *p_##name;
MT_FNS(DECLARE_MT)
#undef DECLARE_MT

static int g_host_optim;      /* --host-optim */
static int g_times;           /* --times */
static mt_optim_t *g_optim;
static uint64_t g_work0, g_work_before, g_work_total; /* ns, see host_optim_wait */

static void host_optim_resolve(void) {
#define RESOLVE_MT(name)                                                                    \
  if ((p_##name = (__typeof__(name) *)dlsym(RTLD_DEFAULT, #name)) == NULL) {                \
    fprintf(stderr, "tinytrain: --host-optim needs LD_PRELOAD=libmtalloc.so (no %s)\n", #name); \
    exit(2);                                                                                \
  }
  MT_FNS(RESOLVE_MT)
#undef RESOLVE_MT
}

static void mt_check(int rc, const char *what) {
  if (rc >= 0) return;
  fprintf(stderr, "tinytrain: %s failed: %s\n", what, strerror(-rc));
  exit(1);
}

/* ---- the model --------------------------------------------------------------- */

typedef struct {
  int in, out;
  CUdeviceptr w, b, gw, gb, mw, mb, vw, vb; /* long-lived */
  CUdeviceptr z, h;                         /* per step: pre/post activation */
} layer_t;

static layer_t g_layer[NLAYER];

static void init_model(void) {
  for (int l = 0; l < NLAYER; l++) {
    layer_t *L = &g_layer[l];
    L->in = layer_in(l);
    L->out = layer_out(l);
    size_t nw = (size_t)L->in * L->out, wb = nw * sizeof(float), bb = L->out * sizeof(float);
    float *host = xmalloc(wb);
    float a = l == NBIG ? sqrtf(1.0f / L->in) : sqrtf(6.0f / L->in); /* He uniform */
    for (size_t i = 0; i < nw; i++) host[i] = uniform(a);
    L->w = dalloc(wb);
    CALL(cuMemcpyHtoD, L->w, host, wb);
    for (int i = 0; i < L->out; i++) host[i] = 0.0f;
    L->b = dalloc(bb);
    CALL(cuMemcpyHtoD, L->b, host, bb);
    free(host);
    L->gw = dalloc(wb);
    L->gb = dalloc(bb);
    if (g_host_optim) continue; /* Adam's state is on the host */
    L->mw = dalloc(wb);
    L->mb = dalloc(bb);
    L->vw = dalloc(wb);
    L->vb = dalloc(bb);
    CALL(cuMemsetD8, L->mw, 0, wb); /* torch.zeros_like */
    CALL(cuMemsetD8, L->mb, 0, bb);
    CALL(cuMemsetD8, L->vw, 0, wb);
    CALL(cuMemsetD8, L->vb, 0, bb);
  }
}

static void free_model(void) {
  for (int l = 0; l < NLAYER; l++) {
    layer_t *L = &g_layer[l];
    CUdeviceptr *all[] = {&L->w, &L->b, &L->gw, &L->gb, &L->mw, &L->mb, &L->vw, &L->vb};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
      if (*all[i]) dfree(*all[i]);
  }
}

/* Registers every weight and bias with the host optimizer (index 2l and
 * 2l + 1) and advises them read-mostly: only the optimizer writes them, on
 * the host, so the device copies stay clean. */
static void host_optim_init(void) {
  mt_optim_params_t p;
  p_mt_optim_defaults(&p);
  p.lr = LR, p.beta1 = BETA1, p.beta2 = BETA2, p.eps = EPS;
  p.weight_decay = 0; /* tinytrain's Adam has none */
  p.state = MT_OPTIM_STATE_FP32;
  p.threads = 2;
  mt_check(p_mt_optim_create(&p, &g_optim), "mt_optim_create");
  for (int l = 0; l < NLAYER; l++) {
    layer_t *L = &g_layer[l];
    size_t nw = (size_t)L->in * L->out;
    int iw = p_mt_optim_register_device(g_optim, (void *)(uintptr_t)L->w, nw, MT_DTYPE_F32,
                                        (void *)(uintptr_t)L->gw, MT_DTYPE_F32);
    int ib = p_mt_optim_register_device(g_optim, (void *)(uintptr_t)L->b, (size_t)L->out,
                                        MT_DTYPE_F32, (void *)(uintptr_t)L->gb, MT_DTYPE_F32);
    mt_check(iw, "mt_optim_register_device (weight)");
    mt_check(ib, "mt_optim_register_device (bias)");
    if (iw != 2 * l || ib != 2 * l + 1) {
      fprintf(stderr, "tinytrain: registration order: %d, %d for layer %d\n", iw, ib, l);
      exit(1);
    }
    /* a bias shares a packed chunk with other small tensors: advice per
     * allocation covers only whole regions, so it may advise nothing */
    mt_check(p_mt_advise((void *)(uintptr_t)L->w, nw * sizeof(float), MT_ADVISE_READ_MOSTLY),
             "mt_advise");
    p_mt_advise((void *)(uintptr_t)L->b, (size_t)L->out * sizeof(float), MT_ADVISE_READ_MOSTLY);
  }
  g_work0 = p_mt_optim_work_ns(g_optim);
}

/* Layer l's gradients are queued: the launches that write them must be
 * done before the optimizer reads them from the device. */
static void host_optim_offload(int l) {
  CALL(cuStreamSynchronize, g_stream);
  mt_check(p_mt_optim_step(g_optim, 2 * l, 1.0f), "mt_optim_step");
  mt_check(p_mt_optim_step(g_optim, 2 * l + 1, 1.0f), "mt_optim_step");
}

/* The optimizer step of a framework: everything was queued during
 * backward; wait, and count how much of the work was already done. */
static void host_optim_wait(void) {
  uint64_t at_call = p_mt_optim_work_ns(g_optim);
  mt_check(p_mt_optim_wait(g_optim), "mt_optim_wait");
  uint64_t end = p_mt_optim_work_ns(g_optim);
  g_work_before += at_call - g_work0;
  g_work_total += end - g_work0;
  g_work0 = end;
}

/* The number after "KEY": in mtalloc's stats JSON (top-level counters
 * come first), or -1. */
static long long stat_of(const char *json, const char *key) {
  char pat[96];
  snprintf(pat, sizeof pat, "\"%s\":", key);
  const char *at = strstr(json, pat);
  return at ? strtoll(at + strlen(pat), NULL, 10) : -1;
}

/* Forward over one batch; leaves each layer's z and h allocated (the head's
 * h is its z). Returns the logits. */
static CUdeviceptr forward(CUdeviceptr x) {
  for (int l = 0; l < NLAYER; l++) {
    layer_t *L = &g_layer[l];
    size_t bytes = (size_t)BATCH * L->out * sizeof(float);
    L->z = salloc(bytes);
    matmul_fwd(L->z, x, L->w, BATCH, L->in, L->out);
    int relu = l < NBIG;
    L->h = relu ? salloc(bytes) : L->z;
    bias_act(L->z, L->b, L->h, BATCH, L->out, relu);
    x = L->h;
  }
  return g_layer[NBIG].z;
}

/* Backward from dlogits (consumed and freed); frees the saved activations
 * as soon as their last use is queued, as autograd does. */
static void backward(CUdeviceptr x, CUdeviceptr dy) {
  for (int l = NLAYER - 1; l >= 0; l--) {
    layer_t *L = &g_layer[l];
    CUdeviceptr in = l > 0 ? g_layer[l - 1].h : x;
    matmul_dw(L->gw, dy, in, BATCH, L->in, L->out);
    bias_grad(L->gb, dy, BATCH, L->out);
    if (l > 0) {
      CUdeviceptr dx = salloc((size_t)BATCH * L->in * sizeof(float));
      matmul_dx(dx, dy, L->w, BATCH, L->in, L->out);
      relu_bwd(dx, g_layer[l - 1].z, BATCH * L->in);
      sfree(dy);
      dy = dx;
    }
    if (L->h != L->z) sfree(L->h);
    sfree(L->z);
    if (g_host_optim) host_optim_offload(l);
  }
  sfree(dy);
}

/* One Adam step on one tensor, PyTorch's single-tensor decomposition, with
 * a stream-ordered temporary of the tensor's size. */
static void adam_tensor(CUdeviceptr w, CUdeviceptr g, CUdeviceptr m, CUdeviceptr v, size_t n,
                        int step) {
  float c1 = 1.0f - powf(BETA1, (float)step), c2 = sqrtf(1.0f - powf(BETA2, (float)step));
  int ni = (int)n;
  adam_2(K_ADAM_M, m, g, BETA1, ni);
  adam_2(K_ADAM_V, v, g, BETA2, ni);
  CUdeviceptr t = salloc(n * sizeof(float));
  adam_denom(t, v, c2, EPS, ni);
  adam_dir(t, m, ni);
  adam_2(K_ADAM_APPLY, w, t, LR / c1, ni);
  sfree(t);
}

static void adam_step(int step) {
  for (int l = 0; l < NLAYER; l++) {
    layer_t *L = &g_layer[l];
    adam_tensor(L->w, L->gw, L->mw, L->vw, (size_t)L->in * L->out, step);
    adam_tensor(L->b, L->gb, L->mb, L->vb, (size_t)L->out, step);
  }
}

/* ---- main -------------------------------------------------------------------- */

static double now_seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int parse_steps(int argc, char **argv) {
  int steps = DEFAULT_STEPS;
  for (int i = 1; i < argc; i++) {
    char *end = NULL;
    if (strcmp(argv[i], "--host-optim") == 0) {
      g_host_optim = 1;
      continue;
    }
    if (strcmp(argv[i], "--times") == 0) {
      g_times = 1;
      continue;
    }
    if (strcmp(argv[i], "--steps") == 0 && i + 1 < argc) {
      long v = strtol(argv[++i], &end, 10);
      if (*end == '\0' && v > 0 && v <= 100000) {
        steps = (int)v;
        continue;
      }
    }
    fprintf(stderr, "usage: tinytrain [--steps N] [--host-optim] [--times]   (N in 1..100000, default %d)\n",
            DEFAULT_STEPS);
    exit(2);
  }
  return steps;
}

int main(int argc, char **argv) {
  int steps = parse_steps(argc, argv);

  cudart_route_t route;
  cudart_route_open(&route, "tinytrain");
  cudart_register_fn reg = route.register_kernel;
  size_t (*device_peak)(void) = route.device_peak;
  if (!reg || !device_peak) {
    fprintf(stderr, "tinytrain: libcuda.so.1 is not the fake driver; skipping\n");
    return 77;
  }
#define RESOLVE(name, type) cudart_route_get(&route, "tinytrain", #name, (void **)&p_##name);
  DRIVER_FNS(RESOLVE)
#undef RESOLVE
  register_kernels(reg);

  CUdevice dev;
  CUcontext ctx;
  CALL(cuInit, 0);
  CALL(cuDeviceGet, &dev, 0);
  CALL(cuDevicePrimaryCtxRetain, &ctx, dev);
  CALL(cuCtxSetCurrent, ctx);
  CALL(cuStreamCreate, &g_stream, CU_STREAM_DEFAULT);

  float *hx = xmalloc(sizeof(float) * NSAMPLE * WIDE);
  int *hy = xmalloc(sizeof(int) * NSAMPLE);
  make_data(hx, hy);
  CUdeviceptr dx = dalloc(sizeof(float) * NSAMPLE * WIDE);
  CUdeviceptr dy = dalloc(sizeof(int) * NSAMPLE);
  CALL(cuMemcpyHtoDAsync, dx, hx, sizeof(float) * NSAMPLE * WIDE, g_stream);
  CALL(cuMemcpyHtoDAsync, dy, hy, sizeof(int) * NSAMPLE, g_stream);
  if (g_host_optim) host_optim_resolve();
  init_model();
  CALL(cuStreamSynchronize, g_stream); /* hx, hy may go now */
  if (g_host_optim) host_optim_init();
  free(hx);
  free(hy);

  for (int step = 1; step <= steps; step++) {
    double t0 = now_seconds();
    int batch = (step - 1) % (NSAMPLE / BATCH);
    /* a batch is a slice of the data set: interior pointers */
    CUdeviceptr x = dx + (size_t)batch * BATCH * WIDE * sizeof(float);
    CUdeviceptr y = dy + (size_t)batch * BATCH * sizeof(int);
    CUdeviceptr logits = forward(x);
    CUdeviceptr out = salloc(2 * sizeof(float));
    CUdeviceptr dlogits = salloc((size_t)BATCH * NCLASS * sizeof(float));
    static const float zero[2] = {0.0f, 0.0f};
    CALL(cuMemcpyHtoDAsync, out, zero, sizeof zero, g_stream);
    xent(logits, y, dlogits, out, BATCH, NCLASS);
    backward(x, dlogits);
    if (g_host_optim)
      host_optim_wait();
    else
      adam_step(step);
    float res[2];
    CALL(cuMemcpyDtoH, res, out, sizeof res); /* legacy stream: after g_stream's work */
    sfree(out);
    if (g_times) fprintf(stderr, "step_time %d %.6f\n", step, now_seconds() - t0);
    printf("step %d loss %a\n", step, (double)res[0]);
    fflush(stdout);
  }

  /* training accuracy over the whole data set, forward only */
  CUdeviceptr out = salloc(2 * sizeof(float));
  float res[2] = {0.0f, 0.0f};
  CALL(cuMemcpyHtoDAsync, out, res, sizeof res, g_stream);
  for (int batch = 0; batch < NSAMPLE / BATCH; batch++) {
    CUdeviceptr x = dx + (size_t)batch * BATCH * WIDE * sizeof(float);
    CUdeviceptr logits = forward(x);
    xent(logits, dy + (size_t)batch * BATCH * sizeof(int), 0, out, BATCH, NCLASS);
    for (int l = NLAYER - 1; l >= 0; l--) {
      if (g_layer[l].h != g_layer[l].z) sfree(g_layer[l].h);
      sfree(g_layer[l].z);
    }
  }
  CALL(cuMemcpyDtoH, res, out, sizeof res);
  sfree(out);
  CALL(cuCtxSynchronize, ctx);

  printf("accuracy %d/%d\n", (int)res[1], NSAMPLE);
  printf("launches %llu\n", g_launches);
  printf("footprint_bytes %zu\n", g_peak);
  printf("largest_launch_bytes %zu\n", g_largest_launch);
  if (g_host_optim) {
    printf("host_optim_work_us %llu\n", (unsigned long long)(g_work_total / 1000));
    printf("host_optim_before_step_us %llu\n", (unsigned long long)(g_work_before / 1000));
    printf("host_optim_overlap_percent %llu\n",
           (unsigned long long)(g_work_total ? 100 * g_work_before / g_work_total : 0));
    const char *json = p_mt_stats_json();
    printf("weight_dirty_evictions %lld\n", stat_of(json, "evictions_dirty_readmostly"));
    printf("evictions_clean %lld\n", stat_of(json, "evictions_clean"));
    printf("evictions_dirty %lld\n", stat_of(json, "evictions_dirty"));
    p_mt_optim_destroy(g_optim);
  }

  free_model();
  dfree(dx);
  dfree(dy);
  CALL(cuStreamDestroy, g_stream);
  CALL(cuDevicePrimaryCtxRelease, dev);
  printf("peak_device_bytes %zu\n", device_peak());
  return 0;
}
