/*
 * rt_check.cu - a small CUDA runtime program for tools/gpu-check.sh: it
 * exercises the allocation, copy and launch paths that the CUDA runtime and
 * cuBLAS take to the driver, checks every result, and prints a summary that
 * must be bit-identical with and without LD_PRELOAD=libmtalloc.so.
 *
 *   nvcc -O2 -arch=sm_90 -o rt_check tools/gpu/rt_check.cu -lcublas
 *   ./rt_check [NBUF [BUF_MIB]]        (defaults 24 and 16: 384 MiB of ring)
 *
 * The work is sized by the arguments alone, never by cudaMemGetInfo: under
 * mtalloc that answers with the budget, and the plain and preloaded runs
 * must do identical work. A device too small for it fails at cudaMalloc.
 *
 * What it does, with NBUF buffers of BUF_BYTES from cudaMalloc:
 *   - fills them with a kernel (small integers, exact in float);
 *   - PASSES times around the ring, buf[b+1] = fma(0.5, buf[b], 0.5*buf[b+1])
 *     (one launch per pair, so each launch touches two buffers and a sweep
 *     touches all of them: under a budget of a quarter of the footprint the
 *     pager must evict and fetch), plus a cudaMemcpy device-to-device;
 *   - on a created stream: cudaMallocAsync, cudaMemcpyAsync host-to-device,
 *     a kernel, cudaMemcpyAsync device-to-host, cudaFreeAsync;
 *   - a deterministic block reduction of every buffer (fixed tree order);
 *   - one cublasSgemm of GEMM_N^3 with small-integer inputs, so every partial
 *     sum is an exact integer in float and the result does not depend on the
 *     algorithm cuBLAS picks.
 * Checks: sampled elements of the ring against the same float operations on
 * the host (fmaf is correctly rounded on both sides, so equality is exact),
 * the async buffer in full, sampled GEMM entries against an integer
 * reference. Every failure prints "rt_check: FAIL ..." and exits 1; a CUDA or
 * cuBLAS error prints "rt_check: CUDA error ..." and exits 1; bad arguments
 * exit 2.
 *
 * stdout (deterministic, compared bit for bit by gpu-check.sh):
 *   footprint_bytes N      bytes this program asked cudaMalloc/cudaMallocAsync for
 *   checksum HEX           FNV-1a 64 over every buffer's final bytes
 *   reduction HEX          the float bits of each buffer's reduction, hashed
 *   rt_check: ok
 * stderr: cudaMemGetInfo as the program sees it, and elapsed_ms; not compared.
 */
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

static int NBUF = 24;           /* buffers in the ring (argument 1) */
static size_t BUF_BYTES = (size_t)16 << 20; /* bytes per buffer (argument 2, in MiB) */
static size_t BUF_N;            /* floats per buffer */
#define PASSES 3
#define ASYNC_N ((size_t)4 << 20)  /* floats per cudaMallocAsync buffer */
#define GEMM_N 1024
#define RED_THREADS 256
#define RED_BLOCKS 1024
#define SAMPLES 4096

#define CK(call)                                                                      \
  do {                                                                                \
    cudaError_t e_ = (call);                                                          \
    if (e_ != cudaSuccess) {                                                          \
      fprintf(stderr, "rt_check: CUDA error %s (%s) at %s:%d: %s\n", cudaGetErrorName(e_), \
              cudaGetErrorString(e_), __FILE__, __LINE__, #call);                     \
      exit(1);                                                                        \
    }                                                                                 \
  } while (0)

#define CKB(call)                                                                      \
  do {                                                                                 \
    cublasStatus_t s_ = (call);                                                        \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                                 \
      fprintf(stderr, "rt_check: CUDA error: cuBLAS status %d at %s:%d: %s\n", (int)s_, \
              __FILE__, __LINE__, #call);                                              \
      exit(1);                                                                         \
    }                                                                                  \
  } while (0)

static size_t footprint;

template <typename T>
static T *dev_alloc(size_t bytes) {
  void *p = nullptr;
  CK(cudaMalloc(&p, bytes));
  footprint += bytes;
  return (T *)p;
}

/* The initial value of element i of buffer `seed`: a small integer. */
__host__ __device__ static inline float init_value(size_t i, unsigned seed) {
  return (float)((int)(((unsigned)i * 2654435761u + seed * 40503u) % 1024u) - 512);
}

__global__ void k_init(float *x, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x)
    x[i] = init_value(i, seed);
}

__global__ void k_mix(float *__restrict__ y, const float *__restrict__ x, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x)
    y[i] = fmaf(0.5f, x[i], __fmul_rn(0.5f, y[i]));
}

__global__ void k_scale_add(float *x, float a, float b, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x)
    x[i] = fmaf(a, x[i], b);
}

/* Partial sums, one per block, in a fixed order: deterministic. */
__global__ void k_reduce(const float *x, size_t n, float *partial) {
  __shared__ float s[RED_THREADS];
  float acc = 0.0f;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x)
    acc += x[i];
  s[threadIdx.x] = acc;
  __syncthreads();
  for (unsigned w = RED_THREADS / 2; w > 0; w /= 2) {
    if (threadIdx.x < w) s[threadIdx.x] += s[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) partial[blockIdx.x] = s[0];
}

static uint64_t fnv1a(uint64_t h, const void *p, size_t n) {
  const unsigned char *c = (const unsigned char *)p;
  for (size_t i = 0; i < n; i++) h = (h ^ c[i]) * 0x100000001b3ULL;
  return h;
}

static void fail(const char *what, size_t where, double got, double want) {
  printf("rt_check: FAIL %s at %zu: got %.9g want %.9g\n", what, where, got, want);
  exit(1);
}

int main(int argc, char **argv) {
  auto t0 = std::chrono::steady_clock::now();
  if (argc > 1) NBUF = atoi(argv[1]);
  if (argc > 2) BUF_BYTES = (size_t)atoi(argv[2]) << 20;
  if (argc > 3 || NBUF < 3 || NBUF > 4096 || BUF_BYTES < ((size_t)1 << 20) || BUF_BYTES > ((size_t)4 << 30)) {
    fprintf(stderr, "usage: rt_check [NBUF (3..4096) [BUF_MIB (1..4096)]]\n");
    return 2;
  }
  BUF_N = BUF_BYTES / sizeof(float);
  size_t free_b = 0, total_b = 0;
  CK(cudaMemGetInfo(&free_b, &total_b)); /* reported only: mtalloc answers with its budget */
  fprintf(stderr, "rt_check: cudaMemGetInfo free %zu total %zu; ring %d x %zu bytes\n", free_b, total_b,
          NBUF, BUF_BYTES);
  const unsigned grid = 264, block = 256;

  /* 1. the ring of buffers, mixed around PASSES times */
  std::vector<float *> buf(NBUF);
  for (int b = 0; b < NBUF; b++) {
    buf[b] = dev_alloc<float>(BUF_BYTES);
    k_init<<<grid, block>>>(buf[b], BUF_N, (unsigned)b);
    CK(cudaGetLastError());
  }
  for (int p = 0; p < PASSES; p++)
    for (int b = 0; b < NBUF; b++) {
      k_mix<<<grid, block>>>(buf[(b + 1) % NBUF], buf[b], BUF_N);
      CK(cudaGetLastError());
    }
  /* device-to-device: buffer 0 into the last one, then the last one mixed */
  CK(cudaMemcpy(buf[NBUF - 1], buf[0], BUF_BYTES, cudaMemcpyDeviceToDevice));
  k_mix<<<grid, block>>>(buf[NBUF - 1], buf[NBUF - 2], BUF_N);
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());

  /* host model of the same float operations, on sampled indices */
  std::vector<float> host(BUF_N);
  std::vector<size_t> idx(SAMPLES);
  for (int i = 0; i < SAMPLES; i++) idx[i] = ((size_t)i * 2654435761u + 17) % BUF_N;
  idx[0] = 0;
  idx[1] = BUF_N - 1;
  std::vector<float> model((size_t)NBUF * SAMPLES);
  for (int b = 0; b < NBUF; b++)
    for (int i = 0; i < SAMPLES; i++) model[(size_t)b * SAMPLES + i] = init_value(idx[i], b);
  auto mix = [&](int y, int x) {
    for (int i = 0; i < SAMPLES; i++) {
      float &t = model[(size_t)y * SAMPLES + i];
      t = fmaf(0.5f, model[(size_t)x * SAMPLES + i], 0.5f * t);
    }
  };
  for (int p = 0; p < PASSES; p++)
    for (int b = 0; b < NBUF; b++) mix((b + 1) % NBUF, b);
  memcpy(&model[(size_t)(NBUF - 1) * SAMPLES], &model[0], SAMPLES * sizeof(float));
  mix(NBUF - 1, NBUF - 2);

  uint64_t checksum = 0xcbf29ce484222325ULL, redsum = 0xcbf29ce484222325ULL;
  float *partial = dev_alloc<float>(RED_BLOCKS * sizeof(float));
  std::vector<float> hpart(RED_BLOCKS);
  for (int b = 0; b < NBUF; b++) {
    CK(cudaMemcpy(host.data(), buf[b], BUF_BYTES, cudaMemcpyDeviceToHost));
    for (int i = 0; i < SAMPLES; i++)
      if (memcmp(&host[idx[i]], &model[(size_t)b * SAMPLES + i], sizeof(float)) != 0)
        fail("ring buffer element", (size_t)b * BUF_N + idx[i], host[idx[i]],
             model[(size_t)b * SAMPLES + i]);
    checksum = fnv1a(checksum, host.data(), BUF_BYTES);
    k_reduce<<<RED_BLOCKS, RED_THREADS>>>(buf[b], BUF_N, partial);
    CK(cudaGetLastError());
    CK(cudaMemcpy(hpart.data(), partial, RED_BLOCKS * sizeof(float), cudaMemcpyDeviceToHost));
    float total = 0.0f;
    for (int i = 0; i < RED_BLOCKS; i++) total += hpart[i];
    redsum = fnv1a(redsum, &total, sizeof total);
  }

  /* 2. stream-ordered allocation and async copies on a created stream */
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  float *pinned = nullptr;
  CK(cudaMallocHost(&pinned, ASYNC_N * sizeof(float)));
  for (size_t i = 0; i < ASYNC_N; i++) pinned[i] = init_value(i, 99);
  float *a1 = nullptr, *a2 = nullptr;
  CK(cudaMallocAsync(&a1, ASYNC_N * sizeof(float), s));
  CK(cudaMallocAsync(&a2, ASYNC_N * sizeof(float), s));
  footprint += 2 * ASYNC_N * sizeof(float);
  CK(cudaMemcpyAsync(a1, pinned, ASYNC_N * sizeof(float), cudaMemcpyHostToDevice, s));
  k_scale_add<<<grid, block, 0, s>>>(a1, 2.0f, 1.0f, ASYNC_N);
  CK(cudaGetLastError());
  CK(cudaMemcpyAsync(a2, a1, ASYNC_N * sizeof(float), cudaMemcpyDeviceToDevice, s));
  k_scale_add<<<grid, block, 0, s>>>(a2, -1.0f, 3.0f, ASYNC_N);
  CK(cudaGetLastError());
  CK(cudaMemcpyAsync(pinned, a2, ASYNC_N * sizeof(float), cudaMemcpyDeviceToHost, s));
  CK(cudaFreeAsync(a1, s));
  CK(cudaFreeAsync(a2, s));
  CK(cudaStreamSynchronize(s));
  for (size_t i = 0; i < ASYNC_N; i++) {
    float want = fmaf(-1.0f, fmaf(2.0f, init_value(i, 99), 1.0f), 3.0f);
    if (pinned[i] != want) fail("async buffer element", i, pinned[i], want);
  }
  checksum = fnv1a(checksum, pinned, ASYNC_N * sizeof(float));

  /* 3. cuBLAS sgemm with small integers: exact whatever the algorithm */
  const size_t gn = GEMM_N, gbytes = gn * gn * sizeof(float);
  std::vector<float> ha(gn * gn), hb(gn * gn), hc(gn * gn);
  for (size_t i = 0; i < gn * gn; i++) {
    ha[i] = (float)((int)((i * 7 + 3) % 9) - 4);
    hb[i] = (float)((int)((i * 5 + 1) % 9) - 4);
  }
  float *da = dev_alloc<float>(gbytes), *db = dev_alloc<float>(gbytes),
        *dc = dev_alloc<float>(gbytes);
  CK(cudaMemcpy(da, ha.data(), gbytes, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(db, hb.data(), gbytes, cudaMemcpyHostToDevice));
  cublasHandle_t h;
  CKB(cublasCreate(&h));
  const float one = 1.0f, zero = 0.0f;
  CKB(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, GEMM_N, GEMM_N, GEMM_N, &one, da, GEMM_N, db,
                  GEMM_N, &zero, dc, GEMM_N));
  CK(cudaMemcpy(hc.data(), dc, gbytes, cudaMemcpyDeviceToHost));
  for (int k = 0; k < SAMPLES; k++) { /* column-major: C[r + c*n] = sum_k A[r + k*n] B[k + c*n] */
    size_t r = ((size_t)k * 40503u) % gn, c = ((size_t)k * 2654435761u) % gn;
    long long want = 0;
    for (size_t q = 0; q < gn; q++) want += (long long)ha[r + q * gn] * (long long)hb[q + c * gn];
    if (hc[r + c * gn] != (float)want) fail("sgemm element", r + c * gn, hc[r + c * gn], (double)want);
  }
  checksum = fnv1a(checksum, hc.data(), gbytes);
  CKB(cublasDestroy(h));

  for (int b = 0; b < NBUF; b++) CK(cudaFree(buf[b]));
  CK(cudaFree(partial));
  CK(cudaFree(da));
  CK(cudaFree(db));
  CK(cudaFree(dc));
  CK(cudaFreeHost(pinned));
  CK(cudaStreamDestroy(s));
  CK(cudaDeviceSynchronize());

  printf("footprint_bytes %zu\n", footprint);
  printf("checksum %016llx\n", (unsigned long long)checksum);
  printf("reduction %016llx\n", (unsigned long long)redsum);
  printf("rt_check: ok\n");
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  fprintf(stderr, "rt_check: elapsed_ms %.1f\n", ms);
  return 0;
}
