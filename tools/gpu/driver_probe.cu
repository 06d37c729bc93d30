/*
 * driver_probe.cu - what the real driver answers where the interposer
 * depends on behaviour cuda.h leaves open, for tools/gpu-check.sh.
 *
 *   nvcc -cubin -arch=sm_90 -o probe_kernel.cubin tools/gpu/probe_kernel.cu
 *   nvcc -O2 -arch=sm_90 -o driver_probe tools/gpu/driver_probe.cu -lcuda
 *   ./driver_probe probe_kernel.cubin
 *
 * 1. CUkernel handles (issue 7, item 1). The CUDA 12+ runtime loads kernels
 *    with cuLibraryLoadData / cuLibraryGetKernel and may pass the CUkernel
 *    to cuLaunchKernel as a CUfunction. The probe loads probe_kernel.cubin
 *    that way and asks, about the same handle: cuKernelGetParamInfo and
 *    cuKernelGetName (the kernel API), cuFuncGetParamInfo and cuFuncGetName
 *    on (CUfunction)kernel (undocumented either way), the same on the
 *    function from cuKernelGetFunction, whether that function equals the
 *    kernel handle, and whether cuLaunchKernel((CUfunction)kernel) runs
 *    and computes the right values. The same questions for the handle
 *    cudaGetKernel gives for a kernel of this program (the runtime route).
 * 2. Host-NUMA mappings (the MT_HOST_MAP path): the device's NUMA
 *    attributes, then cuMemCreate at CU_MEM_LOCATION_TYPE_HOST_NUMA on
 *    the GPU's host node (0 if none) and at CU_MEM_LOCATION_TYPE_HOST,
 *    cuMemMap, cuMemSetAccess for the device, a kernel writing through
 *    the mapping and a copy back, checked.
 * 3. cuMemMap at a non-zero offset into a handle (device and HOST_NUMA):
 *    cuda.h says the offset must be zero; the pager relies on it never
 *    being needed (one handle per host slot, physpool.c).
 *
 * The answers are findings, not failures: the program exits 0 when it
 * could ask every question, 1 when the device or the cubin is unusable.
 * stdout: a Markdown table (check | answer | detail), then
 *   summary func_on_kernel_paraminfo X func_on_kernel_name X kernel_paraminfo X launch_kernel_handle X host_numa X host X
 *           map_offset X map_offset_host X
 * where each X is ok or the error name, then "driver_probe: ok".
 */
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

/* The layout of probe_fill, as nvcc -ptx declares it. */
static const size_t want_off[] = {0, 8, 12, 64}, want_size[] = {8, 4, 4, 128};
#define NPARAM 4
#define N 4096

struct alignas(64) probe_desc {
  const float *src;
  unsigned long long pad[15];
};

/* A kernel of this program, for the runtime's own handle (cudaGetKernel). */
__global__ void rt_probe(float *out, int n, float v, probe_desc d) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = v + (float)i + d.src[i];
}

static std::string err(CUresult r) {
  const char *n = nullptr;
  if (cuGetErrorName(r, &n) != CUDA_SUCCESS || !n) return "CUresult " + std::to_string((int)r);
  return n;
}

/* One word for the summary line. */
static std::string tok(std::string s) {
  for (char &c : s)
    if (c == ' ') c = '_';
  return s;
}

static void row(const char *check, const std::string &answer, const std::string &detail) {
  printf("| %s | %s | %s |\n", check, answer.c_str(), detail.c_str());
}

#define MUST(call)                                                                        \
  do {                                                                                    \
    CUresult r_ = (call);                                                                 \
    if (r_ != CUDA_SUCCESS) {                                                             \
      fprintf(stderr, "driver_probe: CUDA error %s at %s:%d: %s\n", err(r_).c_str(), __FILE__, \
              __LINE__, #call);                                                           \
      exit(1);                                                                            \
    }                                                                                     \
  } while (0)

/* Asks GET(i) for i = 0.. until it fails; "ok" when the answers are the
 * expected layout and the first failure is past the last parameter. */
template <typename F>
static std::string layout(F get, std::string *detail) {
  std::string d;
  for (size_t i = 0; i < NPARAM + 1; i++) {
    size_t off = 0, size = 0;
    CUresult r = get(i, &off, &size);
    if (r != CUDA_SUCCESS) {
      d += (d.empty() ? "" : ", then ") + err(r) + " at " + std::to_string(i);
      *detail = d;
      if (i == 0) return err(r);
      return i == NPARAM ? "ok" : "wrong count";
    }
    d += (d.empty() ? "" : " ") + std::to_string(off) + ":" + std::to_string(size);
    if (i >= NPARAM || off != want_off[i] || size != want_size[i]) {
      *detail = d + " (want 0:8 8:4 12:4 64:128)";
      return "wrong layout";
    }
  }
  *detail = d;
  return "no end";
}

static std::string name_of(CUresult r, const char *name, std::string *detail) {
  *detail = r == CUDA_SUCCESS ? std::string(name ? name : "(null)") : err(r);
  return r == CUDA_SUCCESS ? "ok" : err(r);
}

/* Launches F (a CUfunction, or a CUkernel cast to one) over out, checks. */
static std::string launch(CUfunction f, CUdeviceptr out, CUdeviceptr src, std::string *detail) {
  int n = N;
  float v = 3.0f;
  probe_desc d;
  memset(&d, 0, sizeof d);
  d.src = (const float *)src;
  void *args[] = {&out, &n, &v, &d};
  MUST(cuMemsetD32(out, 0, N));
  CUresult r = cuLaunchKernel(f, N / 256, 1, 1, 256, 1, 1, 0, 0, args, nullptr);
  if (r == CUDA_SUCCESS) r = cuCtxSynchronize();
  if (r != CUDA_SUCCESS) {
    *detail = err(r);
    return err(r);
  }
  std::vector<float> h(N), s(N);
  MUST(cuMemcpyDtoH(h.data(), out, N * sizeof(float)));
  MUST(cuMemcpyDtoH(s.data(), src, N * sizeof(float)));
  for (int i = 0; i < N; i++)
    if (h[i] != v + (float)i + s[i]) {
      *detail = "out[" + std::to_string(i) + "] = " + std::to_string(h[i]);
      return "wrong values";
    }
  *detail = "4096 values right";
  return "ok";
}

static std::string read_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return "";
  std::string s;
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) s.append(buf, n);
  fclose(f);
  return s;
}

/* cuMemCreate at LOC (id NODE), map, give the device access, write with a
 * kernel through the mapping, copy back and check. */
static std::string host_mapping(CUdevice dev, CUmemLocationType loc, int node, CUfunction f,
                                CUdeviceptr src, std::string *detail) {
  CUmemAllocationProp p;
  memset(&p, 0, sizeof p);
  p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  p.location.type = loc;
  p.location.id = node;
  auto failed = [&](const char *call, CUresult r) {
    *detail = std::string(call) + " " + err(r);
    return err(r);
  };
  size_t gran = 0;
  CUresult r = cuMemGetAllocationGranularity(&gran, &p, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
  if (r != CUDA_SUCCESS) return failed("cuMemGetAllocationGranularity", r);
  CUmemGenericAllocationHandle h;
  r = cuMemCreate(&h, gran, &p, 0);
  if (r != CUDA_SUCCESS) return failed("cuMemCreate", r);
  CUdeviceptr va = 0;
  MUST(cuMemAddressReserve(&va, gran, gran, 0, 0));
  std::string answer;
  r = cuMemMap(va, gran, 0, h, 0);
  if (r != CUDA_SUCCESS) {
    answer = failed("cuMemMap", r);
  } else {
    CUmemAccessDesc a;
    memset(&a, 0, sizeof a);
    a.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    a.location.id = dev;
    a.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    r = cuMemSetAccess(va, gran, &a, 1);
    if (r != CUDA_SUCCESS) {
      answer = failed("cuMemSetAccess", r);
    } else {
      answer = launch(f, va, src, detail);
      *detail = "granularity " + std::to_string(gran >> 10) + " KiB; kernel write + copy back: " + *detail;
    }
    cuMemUnmap(va, gran);
  }
  cuMemAddressFree(va, gran);
  cuMemRelease(h);
  return answer;
}

/* cuMemMap at a non-zero offset into a handle twice the granularity (at
 * LOC): cuda.h says the offset "currently must be zero", and the pager
 * maps every host slot at offset 0 because of it (physpool.c); the fake
 * driver refuses any other. The answer says whether this driver agrees. */
static std::string map_offset(CUmemLocationType loc, int id, std::string *detail) {
  CUmemAllocationProp p;
  memset(&p, 0, sizeof p);
  p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  p.location.type = loc;
  p.location.id = id;
  size_t gran = 0;
  CUresult r = cuMemGetAllocationGranularity(&gran, &p, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
  if (r != CUDA_SUCCESS) return *detail = "cuMemGetAllocationGranularity", err(r);
  CUmemGenericAllocationHandle h;
  if ((r = cuMemCreate(&h, 2 * gran, &p, 0)) != CUDA_SUCCESS) return *detail = "cuMemCreate", err(r);
  CUdeviceptr va = 0;
  MUST(cuMemAddressReserve(&va, gran, gran, 0, 0));
  r = cuMemMap(va, gran, gran, h, 0);
  *detail = "cuMemMap(va, " + std::to_string(gran >> 10) + " KiB, offset " + std::to_string(gran >> 10) +
            " KiB) of a " + std::to_string(2 * gran >> 10) + " KiB handle: " + err(r) +
            (r == CUDA_SUCCESS ? " (accepted: cuda.h says it must be zero)" : " (refused, as cuda.h says)");
  if (r == CUDA_SUCCESS) cuMemUnmap(va, gran);
  cuMemAddressFree(va, gran);
  cuMemRelease(h);
  return err(r);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: driver_probe probe_kernel.cubin\n");
    return 2;
  }
  std::string cubin = read_file(argv[1]);
  if (cubin.empty()) {
    fprintf(stderr, "driver_probe: cannot read %s\n", argv[1]);
    return 1;
  }
  if (cudaSetDevice(0) != cudaSuccess || cudaFree(0) != cudaSuccess) {
    fprintf(stderr, "driver_probe: CUDA error: no device\n");
    return 1;
  }
  CUdevice dev;
  MUST(cuDeviceGet(&dev, 0));
  int drv = 0;
  MUST(cuDriverGetVersion(&drv));
  CUdeviceptr out = 0, src = 0;
  MUST(cuMemAlloc(&out, N * sizeof(float)));
  MUST(cuMemAlloc(&src, N * sizeof(float)));
  {
    std::vector<float> s(N);
    for (int i = 0; i < N; i++) s[i] = (float)(i % 7);
    MUST(cuMemcpyHtoD(src, s.data(), N * sizeof(float)));
  }
  printf("Driver API version %d.%d.\n\n| check | answer | detail |\n|---|---|---|\n", drv / 1000,
         drv % 1000 / 10);

  /* 1. a CUkernel from the library API */
  CUlibrary lib;
  MUST(cuLibraryLoadData(&lib, cubin.data(), nullptr, nullptr, 0, nullptr, nullptr, 0));
  CUkernel k;
  MUST(cuLibraryGetKernel(&k, lib, "probe_fill"));
  unsigned count = 0;
  CUresult r = cuLibraryGetKernelCount(&count, lib);
  row("cuLibraryGetKernelCount", r == CUDA_SUCCESS ? "ok" : err(r), std::to_string(count) + " kernel(s)");
  std::string d, kparam, fparam, fname, klaunch;
  kparam = layout([&](size_t i, size_t *o, size_t *s) { return cuKernelGetParamInfo(k, i, o, s); }, &d);
  row("cuKernelGetParamInfo(kernel)", kparam, d);
  const char *nm = nullptr;
  row("cuKernelGetName(kernel)", name_of(cuKernelGetName(&nm, k), nm, &d), d);
  fparam = layout([&](size_t i, size_t *o, size_t *s) { return cuFuncGetParamInfo((CUfunction)k, i, o, s); }, &d);
  row("cuFuncGetParamInfo((CUfunction)kernel)", fparam, d);
  nm = nullptr;
  fname = name_of(cuFuncGetName(&nm, (CUfunction)k), nm, &d);
  row("cuFuncGetName((CUfunction)kernel)", fname, d);
  CUfunction f = nullptr;
  r = cuKernelGetFunction(&f, k);
  row("cuKernelGetFunction", r == CUDA_SUCCESS ? "ok" : err(r),
      r != CUDA_SUCCESS ? "" : ((void *)f == (void *)k ? "same handle as the kernel" : "a different handle from the kernel"));
  if (r == CUDA_SUCCESS) {
    std::string a = layout([&](size_t i, size_t *o, size_t *s) { return cuFuncGetParamInfo(f, i, o, s); }, &d);
    row("cuFuncGetParamInfo(function of kernel)", a, d);
    nm = nullptr;
    a = name_of(cuFuncGetName(&nm, f), nm, &d);
    row("cuFuncGetName(function of kernel)", a, d);
  }
  klaunch = launch((CUfunction)k, out, src, &d);
  row("cuLaunchKernel((CUfunction)kernel)", klaunch, d);
  if (f) {
    std::string a = launch(f, out, src, &d);
    row("cuLaunchKernel(function of kernel)", a, d);
  }

  /* the runtime's own handle for a kernel of this program */
  cudaKernel_t rk = nullptr;
  cudaError_t re = cudaGetKernel(&rk, (const void *)rt_probe);
  row("cudaGetKernel(rt_probe)", re == cudaSuccess ? "ok" : cudaGetErrorName(re), "");
  if (re == cudaSuccess) {
    CUkernel ck = (CUkernel)rk;
    std::string a = layout([&](size_t i, size_t *o, size_t *s) { return cuKernelGetParamInfo(ck, i, o, s); }, &d);
    row("cuKernelGetParamInfo(runtime kernel)", a, d);
    a = layout([&](size_t i, size_t *o, size_t *s) { return cuFuncGetParamInfo((CUfunction)ck, i, o, s); }, &d);
    row("cuFuncGetParamInfo((CUfunction)runtime kernel)", a, d);
    nm = nullptr;
    a = name_of(cuFuncGetName(&nm, (CUfunction)ck), nm, &d);
    row("cuFuncGetName((CUfunction)runtime kernel)", a, d);
  }
  cudaFunction_t rf = nullptr;
  re = cudaGetFuncBySymbol(&rf, (const void *)rt_probe);
  if (re == cudaSuccess) {
    std::string a = layout([&](size_t i, size_t *o, size_t *s) { return cuFuncGetParamInfo((CUfunction)rf, i, o, s); }, &d);
    row("cuFuncGetParamInfo(cudaGetFuncBySymbol)", a, d);
  } else {
    row("cudaGetFuncBySymbol(rt_probe)", cudaGetErrorName(re), "");
  }

  /* 2. host-NUMA mappings */
  static const struct {
    CUdevice_attribute a;
    const char *name;
  } attrs[] = {
      {CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, "VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED"},
      {CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, "HOST_NUMA_ID"},
      {CU_DEVICE_ATTRIBUTE_NUMA_CONFIG, "NUMA_CONFIG"},
      {CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, "HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED"},
      {CU_DEVICE_ATTRIBUTE_HOST_NUMA_MEMORY_POOLS_SUPPORTED, "HOST_NUMA_MEMORY_POOLS_SUPPORTED"},
  };
  int host_node = -1;
  for (const auto &at : attrs) {
    int v = 0;
    r = cuDeviceGetAttribute(&v, at.a, dev);
    if (at.a == CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID && r == CUDA_SUCCESS) host_node = v;
    row((std::string("attribute ") + at.name).c_str(), r == CUDA_SUCCESS ? std::to_string(v) : err(r), "");
  }
  int node = host_node < 0 ? 0 : host_node;
  std::string numa = host_mapping(dev, CU_MEM_LOCATION_TYPE_HOST_NUMA, node, (CUfunction)k, src, &d);
  row(("cuMemCreate HOST_NUMA node " + std::to_string(node) + ", mapped for the device").c_str(), numa, d);
  std::string host = host_mapping(dev, CU_MEM_LOCATION_TYPE_HOST, 0, (CUfunction)k, src, &d);
  row("cuMemCreate HOST, mapped for the device", host, d);
  std::string moff = map_offset(CU_MEM_LOCATION_TYPE_DEVICE, dev, &d);
  row("cuMemMap at a non-zero offset (device handle)", moff, d);
  std::string moff_host = map_offset(CU_MEM_LOCATION_TYPE_HOST_NUMA, node, &d);
  row("cuMemMap at a non-zero offset (HOST_NUMA handle)", moff_host, d);

  MUST(cuLibraryUnload(lib));
  MUST(cuMemFree(out));
  MUST(cuMemFree(src));
  printf("\nsummary func_on_kernel_paraminfo %s func_on_kernel_name %s kernel_paraminfo %s "
         "launch_kernel_handle %s host_numa %s host %s map_offset %s map_offset_host %s\n",
         tok(fparam).c_str(), tok(fname).c_str(), tok(kparam).c_str(), tok(klaunch).c_str(),
         tok(numa).c_str(), tok(host).c_str(), tok(moff).c_str(), tok(moff_host).c_str());
  printf("driver_probe: ok\n");
  return 0;
}
