/*
 * move_bench.cu - what one chunk move costs on this device, through the
 * same driver calls the pager makes, for tools/gpu-check.sh.
 *
 *   nvcc -O2 -arch=sm_90 -o move_bench tools/gpu/move_bench.cu -lcuda
 *   ./move_bench [REPS]          (default 10; the 2 MiB case runs 2*REPS)
 *
 * A fetch today is cuMemCreate (device), cuMemMap, cuMemSetAccess, then
 * cuMemcpyHtoDAsync from pinned host memory; an eviction is
 * cuMemcpyDtoHAsync, cuMemUnmap, cuMemRelease. For a 2 MiB chunk and a
 * 64 MiB range it times each driver call on its own (wall clock, median
 * and max over the repetitions), the copies with events (GB/s), and the
 * whole move; then the same with one physical allocation kept for all
 * repetitions (the pool the issue asks for: no create/release per move).
 * Every round trip is checked byte for byte.
 *
 * Then whether the mapping calls wait for the device: a one-thread kernel
 * spins for SPIN_MS on its own stream, touching no memory, and while it
 * runs each call is made on an unrelated range. A call that took more than
 * half the spin waited for the kernel; the pager must never make such a
 * call on the launch path while copies are in flight.
 *
 * Only ordinary device memory and pinned host memory, a few hundred MiB at
 * most; it sets no device flags. The kernel stops after SPIN_MS by the
 * global timer, or after 4 clock cycles per nanosecond, whichever is first.
 *
 * stdout: Markdown tables for report.md, then one line
 *   summary fetch_2MiB_us X evict_2MiB_us X fetch_64MiB_us X evict_64MiB_us X h2d_GBps X d2h_GBps X unmap_waits yes|no
 * and "move_bench: ok". Exit 0 ok, 1 a driver error or a wrong byte.
 */
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define SPIN_MS 200

#define CK(call)                                                                       \
  do {                                                                                 \
    CUresult r_ = (call);                                                              \
    if (r_ != CUDA_SUCCESS) {                                                          \
      const char *n_ = "?";                                                            \
      cuGetErrorName(r_, &n_);                                                         \
      fprintf(stderr, "move_bench: CUDA error %s at %s:%d: %s\n", n_, __FILE__, __LINE__, #call); \
      exit(1);                                                                         \
    }                                                                                  \
  } while (0)

__global__ void k_spin(unsigned long long ns) {
  unsigned long long t0, t, c0 = clock64();
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  for (;;) {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    if (t - t0 >= ns || (unsigned long long)(clock64() - c0) > 4 * ns) break;
  }
}

static CUdevice dev;
static CUstream st;

static double now_us() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/* Per-call times in microseconds; the report shows median and maximum. */
struct series {
  std::vector<double> v;
  void add(double x) { v.push_back(x); }
  double med() {
    if (v.empty()) return 0;
    std::vector<double> s = v;
    std::sort(s.begin(), s.end());
    return s[s.size() / 2];
  }
  double max() { return v.empty() ? 0 : *std::max_element(v.begin(), v.end()); }
};

static CUmemAllocationProp device_prop() {
  CUmemAllocationProp p;
  memset(&p, 0, sizeof p);
  p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  p.location.id = dev;
  return p;
}

static void set_access(CUdeviceptr va, size_t size) {
  CUmemAccessDesc a;
  memset(&a, 0, sizeof a);
  a.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  a.location.id = dev;
  a.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  CK(cuMemSetAccess(va, size, &a, 1));
}

/* times EXPR in microseconds into SERIES */
#define TIMED(series_, expr)           \
  do {                                 \
    double t_ = now_us();              \
    CK(expr);                          \
    (series_).add(now_us() - t_);      \
  } while (0)

static double gbps(size_t bytes, double us) { return us > 0 ? bytes / us / 1e3 : 0; }

struct result {
  double fetch_us, evict_us, h2d_gbps, d2h_gbps;
};

/* REPS fetch + evict round trips of SIZE bytes; POOLED keeps one physical
 * allocation for all of them. Prints one table row per call. */
static result bench(size_t size, int reps, bool pooled) {
  CUmemAllocationProp prop = device_prop();
  size_t gran = 0;
  CK(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  size = (size + gran - 1) / gran * gran;
  unsigned char *src = nullptr, *back = nullptr;
  CK(cuMemHostAlloc((void **)&src, size, 0));
  CK(cuMemHostAlloc((void **)&back, size, 0));
  for (size_t i = 0; i < size; i++) src[i] = (unsigned char)(i * 131 + (i >> 12) + size);
  CUdeviceptr va = 0;
  CK(cuMemAddressReserve(&va, size, gran, 0, 0));
  CUevent e0, e1, e2;
  CK(cuEventCreate(&e0, CU_EVENT_DEFAULT));
  CK(cuEventCreate(&e1, CU_EVENT_DEFAULT));
  CK(cuEventCreate(&e2, CU_EVENT_DEFAULT));
  series create, map, access, h2d, fetch, d2h, unmap, release, evict;
  CUmemGenericAllocationHandle h = 0;
  if (pooled) CK(cuMemCreate(&h, size, &prop, 0));
  for (int r = 0; r < reps; r++) {
    memset(back, 0, size);
    double t0 = now_us();
    if (!pooled) TIMED(create, cuMemCreate(&h, size, &prop, 0));
    TIMED(map, cuMemMap(va, size, 0, h, 0));
    double ta = now_us();
    set_access(va, size);
    access.add(now_us() - ta);
    CK(cuEventRecord(e0, st));
    CK(cuMemcpyHtoDAsync(va, src, size, st));
    CK(cuEventRecord(e1, st));
    CK(cuStreamSynchronize(st));
    double t1 = now_us();
    fetch.add(t1 - t0);
    CK(cuMemcpyDtoHAsync(back, va, size, st));
    CK(cuEventRecord(e2, st));
    CK(cuStreamSynchronize(st));
    TIMED(unmap, cuMemUnmap(va, size));
    if (!pooled) TIMED(release, cuMemRelease(h));
    evict.add(now_us() - t1);
    float ms1 = 0, ms2 = 0;
    CK(cuEventElapsedTime(&ms1, e0, e1));
    CK(cuEventElapsedTime(&ms2, e1, e2));
    h2d.add(ms1 * 1e3);
    d2h.add(ms2 * 1e3);
    if (memcmp(src, back, size) != 0) {
      printf("move_bench: FAIL round trip of %zu bytes differs (repetition %d)\n", size, r);
      exit(1);
    }
  }
  if (pooled) CK(cuMemRelease(h));
  const char *how = pooled ? "pooled" : "create/release";
  auto row = [&](const char *call, series &s) {
    if (!s.v.empty()) printf("| %zu MiB %s | %s | %.1f | %.1f |\n", size >> 20, how, call, s.med(), s.max());
  };
  row("cuMemCreate", create);
  row("cuMemMap", map);
  row("cuMemSetAccess", access);
  row("cuMemcpyHtoDAsync (events)", h2d);
  row("**fetch** (wall, to synchronised)", fetch);
  row("cuMemcpyDtoHAsync (events)", d2h);
  row("cuMemUnmap", unmap);
  row("cuMemRelease", release);
  row("**eviction** (wall)", evict);
  printf("| %zu MiB %s | copy rate H2D / D2H (GB/s, median) | %.1f | %.1f |\n", size >> 20, how,
         gbps(size, h2d.med()), gbps(size, d2h.med()));
  CK(cuMemAddressFree(va, size));
  CK(cuMemFreeHost(src));
  CK(cuMemFreeHost(back));
  CK(cuEventDestroy(e0));
  CK(cuEventDestroy(e1));
  CK(cuEventDestroy(e2));
  return {fetch.med(), evict.med(), gbps(size, h2d.med()), gbps(size, d2h.med())};
}

/* Launches the spin kernel on its own stream and returns it running. */
static cudaStream_t spin_stream;
static void spin_start() {
  k_spin<<<1, 1, 0, spin_stream>>>((unsigned long long)SPIN_MS * 1000000ull);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) {
    fprintf(stderr, "move_bench: CUDA error %s launching the spin kernel\n", cudaGetErrorName(e));
    exit(1);
  }
}
static double spin_wait_us(double since) {
  if (cudaStreamSynchronize(spin_stream) != cudaSuccess) {
    fprintf(stderr, "move_bench: CUDA error waiting for the spin kernel\n");
    exit(1);
  }
  return now_us() - since;
}

/* Each mapping call on a 2 MiB range, idle and while a kernel spins. */
static bool waits_for_device() {
  CUmemAllocationProp prop = device_prop();
  size_t gran = 0;
  CK(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  CUdeviceptr va = 0;
  CK(cuMemAddressReserve(&va, gran, gran, 0, 0));
  CUmemGenericAllocationHandle h = 0;
  bool unmap_waits = false;
  printf("\n| call (2 MiB, unrelated range) | idle (us) | while a %d ms kernel runs (us) | kernel total (ms) | waited for the kernel |\n",
         SPIN_MS);
  printf("|---|---:|---:|---:|---|\n");
  for (int which = 0; which < 4; which++) {
    double idle = 0, busy = 0, total = 0;
    for (int busy_run = 0; busy_run < 2; busy_run++) {
      /* bring the range to the state the call expects */
      if (which >= 1) CK(cuMemCreate(&h, gran, &prop, 0));
      if (which >= 2) CK(cuMemMap(va, gran, 0, h, 0));
      if (which == 3) set_access(va, gran);
      if (busy_run) spin_start();
      double t0 = now_us();
      double tc = now_us();
      switch (which) {
        case 0: CK(cuMemCreate(&h, gran, &prop, 0)); break;
        case 1: CK(cuMemMap(va, gran, 0, h, 0)); break;
        case 2: set_access(va, gran); break;
        case 3: CK(cuMemUnmap(va, gran)); break;
      }
      double dt = now_us() - tc;
      if (busy_run) {
        busy = dt;
        total = spin_wait_us(t0) / 1e3;
      } else {
        idle = dt;
      }
      /* undo */
      if (which == 1 || which == 2) CK(cuMemUnmap(va, gran));
      CK(cuMemRelease(h));
    }
    static const char *names[] = {"cuMemCreate", "cuMemMap", "cuMemSetAccess", "cuMemUnmap"};
    bool waited = busy > 0.5 * SPIN_MS * 1e3;
    if (which == 3) unmap_waits = waited;
    printf("| %s | %.1f | %.1f | %.1f | %s |\n", names[which], idle, busy, total, waited ? "**yes**" : "no");
  }
  /* cuMemRelease of an unmapped handle while the kernel runs */
  CK(cuMemCreate(&h, gran, &prop, 0));
  spin_start();
  double t0 = now_us();
  CK(cuMemRelease(h));
  double dt = now_us() - t0;
  double total = spin_wait_us(t0) / 1e3;
  printf("| cuMemRelease | - | %.1f | %.1f | %s |\n", dt, total, dt > 0.5 * SPIN_MS * 1e3 ? "**yes**" : "no");
  CK(cuMemAddressFree(va, gran));
  return unmap_waits;
}

int main(int argc, char **argv) {
  int reps = argc > 1 ? atoi(argv[1]) : 10;
  if (reps < 1 || reps > 1000) {
    fprintf(stderr, "usage: move_bench [REPS (1..1000)]\n");
    return 2;
  }
  /* the runtime makes the primary context current; the driver calls use it */
  if (cudaSetDevice(0) != cudaSuccess || cudaFree(0) != cudaSuccess) {
    fprintf(stderr, "move_bench: CUDA error: no device\n");
    return 1;
  }
  CK(cuDeviceGet(&dev, 0));
  CK(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
  if (cudaStreamCreateWithFlags(&spin_stream, cudaStreamNonBlocking) != cudaSuccess) return 1;
  CUmemAllocationProp prop = device_prop();
  size_t gmin = 0, grec = 0;
  CK(cuMemGetAllocationGranularity(&gmin, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  CK(cuMemGetAllocationGranularity(&grec, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
  printf("Granularity: minimum %zu KiB, recommended %zu KiB. Times in microseconds, %d repetitions "
         "(%d for 2 MiB), after one warm-up round trip.\n\n",
         gmin >> 10, grec >> 10, reps, 2 * reps);
  printf("| move | call | median (us) | max (us) |\n|---|---|---:|---:|\n");
  bench((size_t)2 << 20, 1, false); /* warm-up: first-call costs are not a move's */
  printf("| (rows above: warm-up, one round trip) | | | |\n");
  result s2 = bench((size_t)2 << 20, 2 * reps, false);
  result s64 = bench((size_t)64 << 20, reps, false);
  bench((size_t)2 << 20, 2 * reps, true);
  bench((size_t)64 << 20, reps, true);
  bool unmap_waits = waits_for_device();
  printf("\nsummary fetch_2MiB_us %.1f evict_2MiB_us %.1f fetch_64MiB_us %.1f evict_64MiB_us %.1f "
         "h2d_GBps %.1f d2h_GBps %.1f unmap_waits %s\n",
         s2.fetch_us, s2.evict_us, s64.fetch_us, s64.evict_us, s64.h2d_gbps, s64.d2h_gbps,
         unmap_waits ? "yes" : "no");
  printf("move_bench: ok\n");
  return 0;
}
