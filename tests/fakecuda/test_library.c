/*
 * Description: the fake's library/module API, CUkernel handles and tensor-map
 * encoders behave as the interposer's tests assume: a library image loads,
 * its kernels are counted, enumerated, named and described
 * (cuKernelGetParamInfo, with the given alignments), a CUkernel launches
 * where a CUfunction goes and runs the right body, cuKernelGetFunction gives
 * a launchable function; after an unload the next load reuses the handles
 * (the case a cache keyed by handle must survive) and the old handles are
 * rejected; modules load, resolve and unload the same way; a library's
 * module cannot be unloaded alone; the tensor-map encoders hide the address
 * (no 8-byte word equals it) but fakecuda_tensormap_address decodes it, also
 * after cuTensorMapReplaceAddress; misaligned descriptors are refused; the
 * new entry points are in the cuGetProcAddress table.
 * Exit 0 when all hold, 1 with a message otherwise.
 */
#include <cudaTypedefs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fakecuda.h"

#define CHECK(call)                                                              \
  do {                                                                           \
    CUresult r_ = (call);                                                        \
    if (r_ != CUDA_SUCCESS) {                                                    \
      fprintf(stderr, "test_library:%d: %s failed: %d\n", __LINE__, #call, (int)r_); \
      exit(1);                                                                   \
    }                                                                            \
  } while (0)
#define EXPECT(cond, ...)                                                        \
  do {                                                                           \
    if (!(cond)) {                                                               \
      fprintf(stderr, "test_library:%d: ", __LINE__);                            \
      fprintf(stderr, __VA_ARGS__);                                              \
      fputc('\n', stderr);                                                       \
      exit(1);                                                                   \
    }                                                                            \
  } while (0)

static void k_set(void **p, const fakecuda_launch_t *l) { /* *x = v */
  (void)l;
  **(int **)p[0] = *(int *)p[1];
}
static void k_neg(void **p, const fakecuda_launch_t *l) { /* *x = -v */
  (void)l;
  **(int **)p[0] = -*(int *)p[1];
}

int main(void) {
  CUdevice d;
  CUcontext c;
  CHECK(cuInit(0));
  CHECK(cuDeviceGet(&d, 0));
  CHECK(cuDevicePrimaryCtxRetain(&c, d));
  CHECK(cuCtxSetCurrent(c));

  const size_t sizes[] = {8, 4}, big[] = {4, 128}, big_align[] = {4, 64};
  const fakecuda_image_kernel_t ks[] = {
      {"set", k_set, 2, sizes, NULL},
      {"neg", k_neg, 2, sizes, NULL},
      {"tma", k_set, 2, big, big_align},
  };
  fakecuda_image_t img = {FAKECUDA_IMAGE_MAGIC, 3, ks};
  CUlibrary lib;
  CHECK(cuLibraryLoadData(&lib, &img, NULL, NULL, 0, NULL, NULL, 0));
  fakecuda_image_t bad = {0, 3, ks};
  CUlibrary lib_bad;
  EXPECT(cuLibraryLoadData(&lib_bad, &bad, NULL, NULL, 0, NULL, NULL, 0) == CUDA_ERROR_INVALID_IMAGE,
         "an image without the magic must be refused");

  unsigned int n = 0;
  CHECK(cuLibraryGetKernelCount(&n, lib));
  EXPECT(n == 3, "kernel count %u", n);
  CUkernel all[3], k_set_h, k_neg_h, k_tma_h;
  CHECK(cuLibraryEnumerateKernels(all, 3, lib));
  CHECK(cuLibraryGetKernel(&k_set_h, lib, "set"));
  CHECK(cuLibraryGetKernel(&k_neg_h, lib, "neg"));
  CHECK(cuLibraryGetKernel(&k_tma_h, lib, "tma"));
  EXPECT(all[0] == k_set_h && all[1] == k_neg_h && all[2] == k_tma_h, "enumeration order");
  CUkernel none;
  EXPECT(cuLibraryGetKernel(&none, lib, "nope") == CUDA_ERROR_NOT_FOUND, "unknown name");
  const char *name = NULL;
  CHECK(cuKernelGetName(&name, k_neg_h));
  EXPECT(strcmp(name, "neg") == 0, "name %s", name);
  size_t off = 0, size = 0;
  CHECK(cuKernelGetParamInfo(k_tma_h, 1, &off, &size));
  EXPECT(off == 64 && size == 128, "tma parameter 1 at %zu size %zu, want 64 and 128", off, size);
  EXPECT(cuKernelGetParamInfo(k_tma_h, 2, &off, &size) == CUDA_ERROR_INVALID_VALUE, "past the last parameter");
  /* Default FAKECUDA_KERNEL_AS_FUNC=accept: cuFunc* take a CUkernel. */
  CHECK(cuFuncGetParamInfo((CUfunction)k_set_h, 1, &off, &size));
  EXPECT(off == 8 && size == 4, "set parameter 1 at %zu size %zu", off, size);

  int *x = malloc(sizeof *x); /* device addresses are host addresses in the fake */
  int v = 5;
  void *args[] = {&x, &v};
  CHECK(cuLaunchKernel((CUfunction)k_neg_h, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
  CHECK(cuCtxSynchronize());
  EXPECT(*x == -5, "CUkernel launch ran %d, want -5", *x);
  CUfunction f_set;
  CHECK(cuKernelGetFunction(&f_set, k_set_h));
  CHECK(cuFuncGetName(&name, f_set));
  EXPECT(strcmp(name, "set") == 0, "function name %s", name);
  CHECK(cuLaunchKernel(f_set, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
  CHECK(cuCtxSynchronize());
  EXPECT(*x == 5, "function launch ran %d, want 5", *x);

  /* A library's module: its functions, not unloadable alone. */
  CUmodule lm;
  CUfunction f_mod;
  CHECK(cuLibraryGetModule(&lm, lib));
  CHECK(cuModuleGetFunction(&f_mod, lm, "set"));
  EXPECT(f_mod == f_set, "the library's module gives another function");
  EXPECT(cuModuleUnload(lm) == CUDA_ERROR_NOT_PERMITTED, "a library's module unloaded alone");

  /* Unload, load again: the same handles come back, the old ones are dead
   * until then. */
  CHECK(cuLibraryUnload(lib));
  EXPECT(cuLibraryGetKernelCount(&n, lib) == CUDA_ERROR_INVALID_HANDLE, "unloaded library still answers");
  EXPECT(cuLaunchKernel((CUfunction)k_neg_h, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL) == CUDA_ERROR_INVALID_HANDLE,
         "an unloaded kernel launched");
  fakecuda_image_t one = {FAKECUDA_IMAGE_MAGIC, 1, &ks[1]};
  CUlibrary lib2;
  CUkernel k2;
  CHECK(cuLibraryLoadData(&lib2, &one, NULL, NULL, 0, NULL, NULL, 0));
  CHECK(cuLibraryGetKernel(&k2, lib2, "neg"));
  EXPECT(k2 == k_set_h || k2 == k_neg_h || k2 == k_tma_h, "the kernel handle was not reused");
  CHECK(cuLibraryUnload(lib2));

  /* Modules by themselves. */
  CUmodule mod;
  CUfunction fm;
  CHECK(cuModuleLoadData(&mod, &one));
  CHECK(cuModuleGetFunction(&fm, mod, "neg"));
  CHECK(cuLaunchKernel(fm, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
  CHECK(cuCtxSynchronize());
  EXPECT(*x == -5, "module function ran %d", *x);
  CHECK(cuModuleUnload(mod));
  EXPECT(cuModuleUnload(mod) == CUDA_ERROR_INVALID_HANDLE, "double module unload");

  /* Tensor maps. */
  _Alignas(64) static uint32_t tensor[1024];
  CUtensorMap tm;
  cuuint64_t dims[1] = {1024};
  cuuint32_t box[1] = {32}, estr[1] = {1};
  CHECK(cuTensorMapEncodeTiled(&tm, CU_TENSOR_MAP_DATA_TYPE_UINT32, 1, tensor, dims, NULL, box, estr,
                               CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                               CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
  for (int i = 0; i < CU_TENSOR_MAP_NUM_QWORDS; i++)
    EXPECT(tm.opaque[i] != (uintptr_t)tensor, "word %d holds the plain address", i);
  EXPECT(fakecuda_tensormap_address(&tm) == tensor, "decoded %p, want %p", fakecuda_tensormap_address(&tm),
         (void *)tensor);
  CHECK(cuTensorMapReplaceAddress(&tm, tensor + 16));
  EXPECT(fakecuda_tensormap_address(&tm) == tensor + 16, "after replace");
  EXPECT(cuTensorMapReplaceAddress(&tm, (char *)tensor + 4) == CUDA_ERROR_INVALID_VALUE, "unaligned address");
  _Alignas(64) static unsigned char raw[192];
  EXPECT(cuTensorMapEncodeTiled((CUtensorMap *)(void *)(raw + 8), CU_TENSOR_MAP_DATA_TYPE_UINT32, 1, tensor, dims,
                                NULL, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                                CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) ==
             CUDA_ERROR_INVALID_VALUE,
         "a descriptor not 64-byte aligned was accepted");
  EXPECT(fakecuda_tensormap_address(raw) == NULL, "zero bytes decoded as a descriptor");

  /* The new entry points resolve through cuGetProcAddress. */
  const char *names[] = {"cuLibraryLoadData", "cuLibraryGetKernel", "cuLibraryEnumerateKernels",
                         "cuKernelGetFunction", "cuKernelGetParamInfo", "cuKernelGetName", "cuLibraryUnload",
                         "cuModuleUnload", "cuModuleGetFunction", "cuTensorMapEncodeTiled",
                         "cuTensorMapEncodeIm2col", "cuTensorMapEncodeIm2colWide", "cuTensorMapReplaceAddress"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    void *fn = NULL;
    CUdriverProcAddressQueryResult st;
    CHECK(cuGetProcAddress_v2(names[i], &fn, 13000, CU_GET_PROC_ADDRESS_DEFAULT, &st));
    EXPECT(fn != NULL && st == CU_GET_PROC_ADDRESS_SUCCESS, "%s not resolved", names[i]);
  }
  free(x);
  printf("test_library: ok\n");
  return 0;
}
