/*
 * gradnorm.c - the global gradient norm, reduced in the order
 * torch.nn.utils.clip_grad_norm_ reduces it on a CPU, and the clip
 * coefficient torch derives from it.
 *
 * The concept: clip_grad_norm_(params, max_norm) (norm_type 2, foreach
 * False or None: on CPU tensors _foreach_norm falls back to the same
 * per-tensor call) takes torch.linalg.vector_norm(g, 2) of every gradient,
 * then vector_norm of the stacked per-tensor norms, and scales every
 * gradient by clamp(max_norm / (total + 1e-6), max=1). On a contiguous
 * float32 tensor aten's vector_norm(2) is one pass of the "norm_two"
 * last-dimension reduction: eight float accumulators (Vectorized<float> of
 * 32 bytes, ATEN_CPU_CAPABILITY=default and avx2 alike), lane j summing
 * x*x over the elements d == j mod 8 of the whole multiple of 8 in order,
 * multiply and add rounded separately; then the lanes folded left to right
 * (lane 0 + lane 1, + lane 2, ...); then the tail elements added one by
 * one; then a float sqrt. It is single-threaded whatever the tensor's size.
 * _mt_grad_norm2 repeats exactly that, so the total norm and hence the
 * coefficient are torch's bit for bit (tests/optim/adam_ref.py checks the
 * norm of every step of every clipped set, sizes 1 to 1,000,003, and the
 * coefficient). Checked against torch 2.15.0 with ATEN_CPU_CAPABILITY
 * default and avx2; under avx512 aten's vectors are 16 lanes wide and the
 * order differs (not reproduced). A bf16/fp16 gradient is widened to float
 * first: the norm of grad.float(), as the FP32-master reference computes.
 * That is not what clip_grad_norm_ gives on the bf16/fp16 tensors
 * themselves: there each per-tensor norm (and so the total) is rounded to
 * the gradient's dtype, a coarser number; a caller who wants that passes
 * torch's own total to _mt_adam_clip_coef.
 *
 * The coefficient: Python's max_norm / tensor is Tensor.__rdiv__, which is
 * tensor.reciprocal() * max_norm, not a division; so (1 / (total +
 * f(1e-6))) * f(max_norm) in float, clamped to 1 (a true division differs
 * from torch in the last bit for about 5% of norms).
 *
 * Threading: pure functions; optim.c runs one parameter's norm per task
 * (the lanes of one tensor run through it in order, so a tensor cannot be
 * split across threads without changing the bits).
 */
#include <math.h>
#include <string.h>

#include "adam.h"

#define LANES 8 /* aten's Vectorized<float> at the default capability */

static inline float widen(const void *g, int dtype, size_t i) {
  switch (dtype) {
    case _MT_DT_BF16:
      return _mt_bf16_to_f32(((const uint16_t *)g)[i]);
    case _MT_DT_F16:
      return _mt_f16_to_f32(((const uint16_t *)g)[i]);
    default:
      return ((const float *)g)[i];
  }
}

/* The tail: lanes folded in order, then the last n % 8 squares. */
static float finish(const float *acc, const void *g, int dtype, size_t d, size_t n) {
  float b = acc[0];
  for (int j = 1; j < LANES; j++)
    b = b + acc[j];
  for (; d < n; d++) {
    float x = widen(g, dtype, d);
    float sq = x * x;
    b = b + sq;
  }
  return sqrtf(b);
}

static float norm2_scalar(const void *g, int dtype, size_t n) {
  float acc[LANES] = {0};
  size_t d = 0;
  for (; d + LANES <= n; d += LANES)
    for (int j = 0; j < LANES; j++) {
      float x = widen(g, dtype, d + j);
      float sq = x * x;
      acc[j] = acc[j] + sq;
    }
  return finish(acc, g, dtype, d, n);
}

#if defined(__x86_64__)
#include <immintrin.h>

/* The eight lanes are one __m256: the same sums, eight at a time. */
__attribute__((target("avx2,f16c"))) static float norm2_avx2(const void *g, int dtype, size_t n) {
  __m256 acc = _mm256_setzero_ps();
  size_t d = 0;
  for (; d + LANES <= n; d += LANES) {
    __m256 x;
    if (dtype == _MT_DT_BF16)
      x = _mm256_castsi256_ps(_mm256_slli_epi32(
          _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)((const uint16_t *)g + d))), 16));
    else if (dtype == _MT_DT_F16)
      x = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)g + d)));
    else
      x = _mm256_loadu_ps((const float *)g + d);
    acc = _mm256_add_ps(acc, _mm256_mul_ps(x, x));
  }
  float lanes[LANES];
  _mm256_storeu_ps(lanes, acc);
  return finish(lanes, g, dtype, d, n);
}
#endif

float _mt_grad_norm2(const void *g, int dtype, size_t n, _mt_adam_isa_t isa) {
#if defined(__x86_64__)
  if (isa != _MT_ISA_SCALAR && _mt_adam_kernel(_MT_ISA_AVX2) != NULL)
    return norm2_avx2(g, dtype, n);
#endif
  (void)isa;
  return norm2_scalar(g, dtype, n);
}

float _mt_adam_clip_coef(float total_norm, double max_norm) {
  float r = 1.0f / (total_norm + (float)1e-6);
  float c = r * (float)max_norm;
  return c > 1.0f ? 1.0f : c; /* torch.clamp(max=1): a NaN stays NaN */
}
