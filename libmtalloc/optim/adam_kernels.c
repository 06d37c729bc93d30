/*
 * adam_kernels.c - the scalar, AVX2 and AVX-512 AdamW/Adam kernels.
 *
 * Each kernel walks its range in blocks of BLOCK elements: one fused pass
 * over the block reads g, p, m, v (vmax) and writes p, m, v (vmax); then,
 * if the parameter has a bf16/fp16 device copy, the block's new weights are
 * rounded into it while they are still in L1. So memory sees each array
 * once per step.
 *
 * Exactness (adam.h): the kernels perform the same IEEE operations in the
 * same order as the scalar reference STEP1 below, each lane independently,
 * and this folder is compiled with -ffp-contract=off, so no multiply-add is
 * ever fused, in the vector bodies or in the scalar tails. The AVX2 and
 * AVX-512 bodies are compiled with function target attributes, never with
 * -march: the library runs on any x86-64, and adam.c only hands out a
 * kernel whose ISA __builtin_cpu_supports confirms.
 *
 * Threading: none here; callers split ranges.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "adam.h"

#define BLOCK 2048 /* elements per fused block: 4-5 arrays x 8 KiB fit in L1/L2 */

/* Gradient element i as a float (exact for bf16 and fp16). */
static inline __attribute__((always_inline)) float grad1(const _mt_adam_args_t *a, size_t i) {
  switch (a->g_dtype) {
    case _MT_DT_BF16:
      return _mt_bf16_to_f32(a->g16[i]);
    case _MT_DT_F16:
      return _mt_f16_to_f32(a->g16[i]);
    default:
      return a->g[i];
  }
}

/* One element, the reference order of operations (adam.h), up to the
 * square root: stores v (and the amsgrad maximum), leaves the decayed
 * weight and the new first moment in *pp and *mp, and returns the value
 * whose root scales the update. */
static inline __attribute__((always_inline)) float moments1(const _mt_adam_scalars_t *s,
                                                            const _mt_adam_args_t *a, size_t i,
                                                            float *pp, float *mp) {
  unsigned f = s->flags;
  float g = grad1(a, i);
  if (f & _MT_ADAM_CLIP)
    g = g * s->clip;
  if (f & _MT_ADAM_MAXIMIZE)
    g = -g;
  float p = a->p[i];
  if (f & _MT_ADAM_DECAY)
    p = p * s->decay;
  if (f & _MT_ADAM_L2)
    g = g + s->l2 * p;
  float m = a->m[i];
  if (f & _MT_ADAM_LERP_BIG)
    m = g - (g - m) * s->one_m_w1;
  else
    m = m + s->w1 * (g - m);
  float v = a->v[i] * s->beta2;
  v = v + (s->one_m_beta2 * g) * g;
  a->v[i] = v;
  float sv = v;
  if (f & _MT_ADAM_AMSGRAD) {
    float vm = a->vmax[i];
    vm = vm > v ? vm : v;
    a->vmax[i] = vm;
    sv = vm;
  }
  *pp = p;
  *mp = m;
  return sv;
}

/* One element, whole. */
static inline __attribute__((always_inline)) void step1(const _mt_adam_scalars_t *s,
                                                        const _mt_adam_args_t *a, size_t i) {
  float p, m;
  float sv = moments1(s, a, i, &p, &m);
  float d = sqrtf(sv) / s->bc2_sqrt;
  d = d + s->eps;
  p = p + (s->neg_step_size * m) / d;
  a->m[i] = m;
  a->p[i] = p;
}

static void write_back(const _mt_adam_args_t *a, size_t begin, size_t end) {
  if (a->out == NULL)
    return;
  uint16_t *o = a->out;
  if (a->out_dtype == _MT_DT_BF16)
    for (size_t i = begin; i < end; i++)
      o[i] = _mt_f32_to_bf16(a->p[i]);
  else
    for (size_t i = begin; i < end; i++)
      o[i] = _mt_f32_to_f16(a->p[i]);
}

void _mt_adam_kernel_scalar(const _mt_adam_scalars_t *s, const _mt_adam_args_t *a, size_t begin,
                            size_t end) {
  for (size_t b = begin; b < end; b += BLOCK) {
    size_t e = end - b < BLOCK ? end : b + BLOCK;
    for (size_t i = b; i < e; i++)
      step1(s, a, i);
    write_back(a, b, e);
  }
}

void _mt_adam_kernel_codec_scalar(const _mt_adam_scalars_t *s, const _mt_adam_args_t *a,
                                  size_t begin, size_t end) {
  for (size_t i = begin; i < end; i++) {
    float p, m;
    float sv = moments1(s, a, i, &p, &m);
    float d = sqrtf(sv) * s->rbc2;
    d = d + s->eps;
    a->m[i] = m;
    a->p[i] = p + (s->neg_step_size * m) / d;
  }
  write_back(a, begin, end);
}

void _mt_adam_kernel_vsqrt(const _mt_adam_scalars_t *s, const _mt_adam_args_t *a, size_t begin,
                           size_t end, _mt_sqrt_fn sq) {
  float r[BLOCK];
  for (size_t b = begin; b < end; b += BLOCK) {
    size_t e = end - b < BLOCK ? end : b + BLOCK;
    for (size_t i = b; i < e; i++) { /* step1 up to the square root */
      float p, m;
      r[i - b] = moments1(s, a, i, &p, &m);
      a->m[i] = m;
      a->p[i] = p; /* decayed; pass 2 adds the update */
    }
    sq(e - b, r, r);
    for (size_t i = b; i < e; i++) {
      float d = r[i - b] / s->bc2_sqrt;
      d = d + s->eps;
      a->p[i] = a->p[i] + (s->neg_step_size * a->m[i]) / d;
    }
    write_back(a, b, e);
  }
}

#if defined(__x86_64__)
#include <immintrin.h>

/* Rounds n floats to bf16 or fp16 exactly as _mt_f32_to_bf16 /
 * _mt_f32_to_f16 do (so as c10::BFloat16 / c10::Half do): bf16 by the same
 * integer round-to-nearest-even on the bit pattern, 16 at a time; fp16 by
 * F16C's vcvtps2ph with the rounding given in the instruction (nearest
 * even, IEEE subnormals and overflow to infinity, whatever MXCSR says).
 * NaNs become the scalar's quiet NaN (bf16 0x7fc0; fp16 sign | 0x7e00,
 * where vcvtps2ph would keep payload bits), and tails go through the
 * scalar. The scalar write-back was 1.5 ns per element, three times the
 * whole FP32 step. */
__attribute__((target("avx2,f16c"))) void _mt_round_out_avx2(const float *p, uint16_t *o,
                                                              int dtype, size_t n) {
  size_t i = 0;
  if (dtype == _MT_DT_BF16) {
    const __m256i bias = _mm256_set1_epi32(0x7fff), one = _mm256_set1_epi32(1),
                  qnan = _mm256_set1_epi32(0x7fc0);
    for (; i + 16 <= n; i += 16) {
      __m256i r[2];
      for (int k = 0; k < 2; k++) {
        __m256 x = _mm256_loadu_ps(p + i + 8 * k);
        __m256i u = _mm256_castps_si256(x);
        __m256i t = _mm256_add_epi32(u, _mm256_add_epi32(bias, _mm256_and_si256(_mm256_srli_epi32(u, 16), one)));
        t = _mm256_srli_epi32(t, 16);
        r[k] = _mm256_blendv_epi8(t, qnan, _mm256_castps_si256(_mm256_cmp_ps(x, x, _CMP_UNORD_Q)));
      }
      /* 0..0xffff per lane: packus keeps them; it interleaves 128-bit halves */
      __m256i h = _mm256_permute4x64_epi64(_mm256_packus_epi32(r[0], r[1]), 0xd8);
      _mm256_storeu_si256((__m256i *)(o + i), h);
    }
    for (; i < n; i++)
      o[i] = _mt_f32_to_bf16(p[i]);
  } else {
    for (; i + 8 <= n; i += 8) {
      __m256 x = _mm256_loadu_ps(p + i);
      __m256 nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
      if (!_mm256_testz_ps(nan, nan)) { /* rare */
        for (size_t k = i; k < i + 8; k++)
          o[k] = _mt_f32_to_f16(p[k]);
        continue;
      }
      _mm_storeu_si128((__m128i *)(o + i),
                       _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
    for (; i < n; i++)
      o[i] = _mt_f32_to_f16(p[i]);
  }
}

/* The block's write-back in the vector kernels (AVX-512 CPUs have AVX2 and
 * F16C). */
static inline void write_back_vec(const _mt_adam_args_t *a, size_t begin, size_t end) {
  if (a->out != NULL)
    _mt_round_out_avx2(a->p + begin, (uint16_t *)a->out + begin, a->out_dtype, end - begin);
}

/* The vector body, written once for both widths. V is the vector type, W
 * its lanes, P the intrinsic prefix's operations passed in as macros. */
#define VEC_KERNEL(NAME, TARGET, V, W, LD, LDBF16, LDF16, ST, SET1, ADD, SUB, MUL, DIV, SQRT, MAX, \
                   NEG)                                                                            \
  __attribute__((target(TARGET))) void NAME(const _mt_adam_scalars_t *s, const _mt_adam_args_t *a, \
                                            size_t begin, size_t end) {                            \
    const unsigned f = s->flags;                                                                   \
    const int gdt = a->g_dtype;                                                                    \
    const V clip = SET1(s->clip), decay = SET1(s->decay), l2 = SET1(s->l2);                        \
    const V w1 = SET1(s->w1), omw1 = SET1(s->one_m_w1), b2 = SET1(s->beta2);                       \
    const V omb2 = SET1(s->one_m_beta2), bc2 = SET1(s->bc2_sqrt), eps = SET1(s->eps);              \
    const V nss = SET1(s->neg_step_size);                                                          \
    for (size_t b = begin; b < end; b += BLOCK) {                                                  \
      size_t e = end - b < BLOCK ? end : b + BLOCK;                                                \
      size_t i = b;                                                                                \
      for (; i + W <= e; i += W) {                                                                 \
        if (i + _MT_ADAM_PREFETCH < end) { /* one line of each array per 16 lanes */               \
          _mt_adam_prefetch_pg(a, i + _MT_ADAM_PREFETCH);                                          \
          __builtin_prefetch(a->m + i + _MT_ADAM_PREFETCH);                                        \
          __builtin_prefetch(a->v + i + _MT_ADAM_PREFETCH);                                        \
          if (f & _MT_ADAM_AMSGRAD)                                                                \
            __builtin_prefetch(a->vmax + i + _MT_ADAM_PREFETCH);                                   \
        }                                                                                          \
        V g = gdt == _MT_DT_BF16  ? LDBF16(a->g16 + i)                                             \
              : gdt == _MT_DT_F16 ? LDF16(a->g16 + i)                                              \
                                  : LD(a->g + i);                                                  \
        if (f & _MT_ADAM_CLIP)                                                                     \
          g = MUL(g, clip);                                                                        \
        if (f & _MT_ADAM_MAXIMIZE)                                                                 \
          g = NEG(g);                                                                              \
        V p = LD(a->p + i);                                                                        \
        if (f & _MT_ADAM_DECAY)                                                                    \
          p = MUL(p, decay);                                                                       \
        if (f & _MT_ADAM_L2)                                                                       \
          g = ADD(g, MUL(l2, p));                                                                  \
        V m = LD(a->m + i);                                                                        \
        if (f & _MT_ADAM_LERP_BIG)                                                                 \
          m = SUB(g, MUL(SUB(g, m), omw1));                                                        \
        else                                                                                       \
          m = ADD(m, MUL(w1, SUB(g, m)));                                                          \
        V v = MUL(LD(a->v + i), b2);                                                               \
        v = ADD(v, MUL(MUL(omb2, g), g));                                                          \
        V sv = v;                                                                                  \
        if (f & _MT_ADAM_AMSGRAD) {                                                                \
          V vm = MAX(LD(a->vmax + i), v);                                                          \
          ST(a->vmax + i, vm);                                                                     \
          sv = vm;                                                                                 \
        }                                                                                          \
        V d = ADD(DIV(SQRT(sv), bc2), eps);                                                        \
        p = ADD(p, DIV(MUL(nss, m), d));                                                           \
        ST(a->m + i, m);                                                                           \
        ST(a->v + i, v);                                                                           \
        ST(a->p + i, p);                                                                           \
      }                                                                                            \
      for (; i < e; i++)                                                                           \
        step1(s, a, i);                                                                            \
      write_back_vec(a, b, e);                                                                     \
    }                                                                                              \
  }

/* Exact widenings: bf16 is float's top half; F16C's vcvtph2ps is exact. */
#define LDBF16_256(p) \
  _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(p))), 16))
#define LDF16_256(p) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p)))
#define NEG256(x) _mm256_xor_ps((x), _mm256_set1_ps(-0.0f))
VEC_KERNEL(_mt_adam_kernel_avx2, "avx2,f16c", __m256, 8, _mm256_loadu_ps, LDBF16_256, LDF16_256,
           _mm256_storeu_ps,
           _mm256_set1_ps, _mm256_add_ps, _mm256_sub_ps, _mm256_mul_ps, _mm256_div_ps,
           _mm256_sqrt_ps, _mm256_max_ps, NEG256)

#define NEG512(x) _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(x), \
                                                        _mm512_set1_epi32((int)0x80000000u)))
#define LDBF16_512(p)                                                                       \
  _mm512_castsi512_ps(                                                                      \
      _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(p))), 16))
#define LDF16_512(p) _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(p)))
VEC_KERNEL(_mt_adam_kernel_avx512, "avx512f", __m512, 16, _mm512_loadu_ps, LDBF16_512, LDF16_512,
           _mm512_storeu_ps,
           _mm512_set1_ps, _mm512_add_ps, _mm512_sub_ps, _mm512_mul_ps, _mm512_div_ps,
           _mm512_sqrt_ps, _mm512_max_ps, NEG512)
#else
void _mt_adam_kernel_avx2(const _mt_adam_scalars_t *s, const _mt_adam_args_t *a, size_t begin,
                          size_t end) {
  _mt_adam_kernel_scalar(s, a, begin, end);
}
void _mt_adam_kernel_avx512(const _mt_adam_scalars_t *s, const _mt_adam_args_t *a, size_t begin,
                            size_t end) {
  _mt_adam_kernel_scalar(s, a, begin, end);
}
#endif
