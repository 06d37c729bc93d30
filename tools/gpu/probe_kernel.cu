/*
 * probe_kernel.cu - the one kernel driver_probe loads through the library
 * API (cuLibraryLoadData), as the CUDA 12+ runtime loads every kernel.
 *
 *   nvcc -cubin -arch=sm_90 -o probe_kernel.cubin tools/gpu/probe_kernel.cu
 *
 * Its parameters are the shapes the interposer has to find pointers in: a
 * plain pointer, two scalars, and a 128-byte struct by value whose first
 * word is a pointer (the size and alignment of a CUtensorMap). Layout
 * (nvcc -ptx shows it): offsets 0, 8, 12, 64; sizes 8, 4, 4, 128.
 * out[i] = v + i + src[i] for i < n, where src is the pointer in the struct.
 */
struct alignas(64) probe_desc {
  const float *src;
  unsigned long long pad[15];
};

extern "C" __global__ void probe_fill(float *out, int n, float v, probe_desc d) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = v + (float)i + d.src[i];
}
