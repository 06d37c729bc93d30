/*
 * fake_tensormap.c - CUtensorMap encoders.
 *
 * Concept: Hopper's TMA unit reads tensors through 128-byte descriptors
 * (CUtensorMap) that the driver encodes on the host and kernels take by
 * value. The real encoding is undocumented; what matters to a pager is
 * that the tensor's address in it is NOT a plain 8-byte word, so a scan
 * for pointers cannot see it. The fake makes that true on purpose: the
 * address is stored rotated and xored with a key, split across two
 * non-adjacent 32-bit fields. Kernel bodies decode it with
 * fakecuda_tensormap_address (fakecuda.h).
 *
 * Checks follow the driver's documented requirements that catch misuse
 * cheaply: a 64-byte aligned descriptor, a 16-byte aligned global address,
 * rank 1..5 (3..5 for im2col), non-NULL dims and strides.
 *
 * Threading: pure functions of their arguments; no state.
 */
#include <stdint.h>
#include <string.h>

#include "fake_internal.h"

#define TMAP_MAGIC 0x54414d50u /* "PMAT" */
#define TMAP_KEY 0xa5c3f00d9e3779b9ull

static uint64_t rotl(uint64_t v, unsigned r) { return (v << r) | (v >> (64 - r)); }
static uint64_t rotr(uint64_t v, unsigned r) { return (v >> r) | (v << (64 - r)); }

/* Layout of opaque[16] (u32 view): [0] magic, [1] rank|dtype<<8|kind<<16,
 * [3] low half of the encoded address, [2..] dims from word [8] on, [13]
 * high half. */
static CUresult encode(CUtensorMap *tm, CUtensorMapDataType dtype, cuuint32_t rank, void *addr,
                       const cuuint64_t *dims, const cuuint64_t *strides, unsigned kind, cuuint32_t min_rank) {
  if (!tm || !addr || !dims || (rank > 1 && !strides)) return CUDA_ERROR_INVALID_VALUE;
  if ((uintptr_t)tm % 64 || (uintptr_t)addr % 16) return CUDA_ERROR_INVALID_VALUE;
  if (rank < min_rank || rank > 5 || (unsigned)dtype > 0xff) return CUDA_ERROR_INVALID_VALUE;
  uint32_t w[32];
  memset(w, 0, sizeof w);
  uint64_t enc = rotl((uint64_t)(uintptr_t)addr ^ TMAP_KEY, 23);
  w[0] = TMAP_MAGIC;
  w[1] = rank | (uint32_t)dtype << 8 | kind << 16;
  w[3] = (uint32_t)enc;
  w[13] = (uint32_t)(enc >> 32);
  for (cuuint32_t i = 0; i < rank; i++) w[16 + i] = (uint32_t)dims[i];
  memcpy(tm, w, sizeof w);
  return CUDA_SUCCESS;
}

FC_API void *fakecuda_tensormap_address(const void *desc) {
  uint32_t w[32];
  if (!desc) return NULL;
  memcpy(w, desc, sizeof w);
  if (w[0] != TMAP_MAGIC) return NULL;
  uint64_t enc = (uint64_t)w[13] << 32 | w[3];
  return (void *)(uintptr_t)(rotr(enc, 23) ^ TMAP_KEY);
}

FC_API CUresult cuTensorMapEncodeTiled(CUtensorMap *tensorMap, CUtensorMapDataType tensorDataType,
                                       cuuint32_t tensorRank, void *globalAddress, const cuuint64_t *globalDim,
                                       const cuuint64_t *globalStrides, const cuuint32_t *boxDim,
                                       const cuuint32_t *elementStrides, CUtensorMapInterleave interleave,
                                       CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2Promotion,
                                       CUtensorMapFloatOOBfill oobFill) {
  (void)interleave, (void)swizzle, (void)l2Promotion, (void)oobFill;
  if (!boxDim || !elementStrides) return CUDA_ERROR_INVALID_VALUE;
  return encode(tensorMap, tensorDataType, tensorRank, globalAddress, globalDim, globalStrides, 1, 1);
}

FC_API CUresult cuTensorMapEncodeIm2col(CUtensorMap *tensorMap, CUtensorMapDataType tensorDataType,
                                        cuuint32_t tensorRank, void *globalAddress, const cuuint64_t *globalDim,
                                        const cuuint64_t *globalStrides, const int *pixelBoxLowerCorner,
                                        const int *pixelBoxUpperCorner, cuuint32_t channelsPerPixel,
                                        cuuint32_t pixelsPerColumn, const cuuint32_t *elementStrides,
                                        CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle,
                                        CUtensorMapL2promotion l2Promotion, CUtensorMapFloatOOBfill oobFill) {
  (void)channelsPerPixel, (void)pixelsPerColumn, (void)interleave, (void)swizzle, (void)l2Promotion,
      (void)oobFill;
  if (!pixelBoxLowerCorner || !pixelBoxUpperCorner || !elementStrides) return CUDA_ERROR_INVALID_VALUE;
  return encode(tensorMap, tensorDataType, tensorRank, globalAddress, globalDim, globalStrides, 2, 3);
}

FC_API_NEW CUresult cuTensorMapEncodeIm2colWide(CUtensorMap *tensorMap, CUtensorMapDataType tensorDataType,
                                            cuuint32_t tensorRank, void *globalAddress,
                                            const cuuint64_t *globalDim, const cuuint64_t *globalStrides,
                                            int pixelBoxLowerCornerWidth, int pixelBoxUpperCornerWidth,
                                            cuuint32_t channelsPerPixel, cuuint32_t pixelsPerColumn,
                                            const cuuint32_t *elementStrides, CUtensorMapInterleave interleave,
                                            CUtensorMapIm2ColWideMode mode, CUtensorMapSwizzle swizzle,
                                            CUtensorMapL2promotion l2Promotion, CUtensorMapFloatOOBfill oobFill) {
  (void)pixelBoxLowerCornerWidth, (void)pixelBoxUpperCornerWidth, (void)channelsPerPixel, (void)pixelsPerColumn,
      (void)interleave, (void)mode, (void)swizzle, (void)l2Promotion, (void)oobFill;
  if (!elementStrides) return CUDA_ERROR_INVALID_VALUE;
  return encode(tensorMap, tensorDataType, tensorRank, globalAddress, globalDim, globalStrides, 3, 3);
}

FC_API CUresult cuTensorMapReplaceAddress(CUtensorMap *tensorMap, void *globalAddress) {
  if (!tensorMap || !globalAddress || (uintptr_t)globalAddress % 16) return CUDA_ERROR_INVALID_VALUE;
  if (!fakecuda_tensormap_address(tensorMap)) return CUDA_ERROR_INVALID_VALUE;
  uint32_t w[32];
  memcpy(w, tensorMap, sizeof w);
  uint64_t enc = rotl((uint64_t)(uintptr_t)globalAddress ^ TMAP_KEY, 23);
  w[3] = (uint32_t)enc;
  w[13] = (uint32_t)(enc >> 32);
  memcpy(tensorMap, w, sizeof w);
  return CUDA_SUCCESS;
}
