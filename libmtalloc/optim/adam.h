/*
 * adam.h - the AdamW / Adam update kernels of the host optimizer
 * (libmtalloc/optim/adam.c, adam_kernels.c).
 *
 * The concept: one fused pass over a run of elements of one parameter that
 * reads the gradient and the FP32 master, the first and second moments (and
 * the AMSGrad maximum), writes them back, and, when the parameter has a
 * narrower device copy, writes the rounded weight (bf16 or fp16, round to
 * nearest even) from the block while it is still in L1.
 *
 * Gradients may be bf16 or fp16 (widened exactly as they are loaded).
 *
 * Exactness: the per-element arithmetic is the one torch.optim.AdamW /
 * Adam's single-tensor path (foreach=False, fused=False) performs on a CPU
 * with ATEN_CPU_CAPABILITY=default, operation for operation, in the same
 * order, with no FMA contraction (the optim folder is built with
 * -ffp-contract=off, and the vector kernels use separate multiply and add):
 *
 *   g = G * clip                       (clip_grad_norm_'s clamped coefficient)
 *   g = -g                             (maximize)
 *   p = p * f(1 - lr*wd)               (AdamW, wd != 0)
 *   g = g + f(wd) * p                  (Adam, wd != 0)
 *   m = m + f(1-b1) * (g - m)          (lerp_, weight < 0.5; else the other form)
 *   v = v * f(b2);  v = v + (f(1-b2) * g) * g          (mul_, addcmul_)
 *   vmax = max(vmax, v); s = vmax or v (amsgrad)
 *   d = sqrt(s) / f(sqrt(1-b2^t));  d = d + f(eps)
 *   p = p + (f(-lr/(1-b1^t)) * m) / d                  (addcdiv_)
 *
 * where f() rounds a double to float, every scalar is computed in double as
 * Python computes it, and t is the float32 step count.
 *
 * The recipe, as checked (tests/optim/adam_ref.py + test_adam_exact): torch
 * 2.15.0 (PyPI default wheel, GCC 13 build) with ATEN_CPU_CAPABILITY=default,
 * whose CPU kernels never fuse a multiply-add. Under ATEN_CPU_CAPABILITY=avx2
 * the same wheel contracts lerp_ and addcmul_ into FMAs (m and v then differ
 * in the last bit, even on one-element tensors), so the reference is pinned
 * to default. One op is not reproducible from source: torch's CPU float32
 * sqrt goes through MKL's VML (vsSqrt), which is not correctly rounded (one
 * ulp off for about 15% of inputs). The SIMD kernels use IEEE sqrt and
 * match torch with Tensor.sqrt replaced by the correctly rounded one; the
 * two-pass kernel (_mt_adam_kernel_vsqrt) with MKL's own vmsSqrt
 * (_mt_adam_mkl_sqrt: mkl==2024.2.0, the MKL torch 2.15.0 links, in
 * aten's mode) matches stock torch bit for bit. Against stock torch the
 * IEEE-sqrt kernels differ in p by the sqrt's ulp where it rounds
 * differently (AdamW's m, v and vmax never depend on p and still match;
 * Adam's L2 term carries p's difference into them). Gradient clipping: the clamped
 * coefficient is applied as clip_grad_norm_'s mul_ does (g * clip); the
 * global norm can be computed here in torch's own reduction order
 * (gradnorm.c, bit-exact) or passed in. The three kernels
 * (scalar, AVX2, AVX-512) give the same bits for every element, tails
 * included. NaN: max() keeps the first operand unless the second is larger
 * (x86 maxps), where torch.maximum propagates NaN: exact only for finite
 * state.
 *
 * Threading: kernels are pure functions of their arguments; callers give
 * each thread a disjoint range.
 */
#ifndef MT_OPTIM_ADAM_H
#define MT_OPTIM_ADAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Device (write-back) dtypes of a parameter. */
enum {
  _MT_DT_F32 = 0,  /* no narrower copy: the master is the weight */
  _MT_DT_BF16 = 1,
  _MT_DT_F16 = 2,
};

/* Hyper-parameters, as the Python floats torch holds them (doubles). */
typedef struct _mt_adam_hp {
  double lr;            /* learning rate; default 1e-3 */
  double beta1, beta2;  /* moment decay; default 0.9, 0.999 */
  double eps;           /* added to the denominator; default 1e-8 */
  double weight_decay;  /* AdamW: decoupled (1e-2 torch default); Adam: L2 */
  bool decoupled;       /* true = AdamW, false = Adam */
  bool amsgrad;
  bool maximize;
} _mt_adam_hp_t;

/* The float scalars of one step, computed once per step (adam.c). */
enum {
  _MT_ADAM_DECAY = 1u << 0,     /* p *= decay first */
  _MT_ADAM_L2 = 1u << 1,        /* g += l2 * p */
  _MT_ADAM_AMSGRAD = 1u << 2,
  _MT_ADAM_MAXIMIZE = 1u << 3,
  _MT_ADAM_CLIP = 1u << 4,      /* g *= clip */
  _MT_ADAM_LERP_BIG = 1u << 5,  /* 1 - beta1 >= 0.5: lerp's other form */
};
typedef struct _mt_adam_scalars {
  unsigned flags;
  float clip;          /* gradient multiplier */
  float decay;         /* f(1 - lr*wd) */
  float l2;            /* f(wd) */
  float w1;            /* f(1 - beta1), lerp weight */
  float one_m_w1;      /* 1 - w1 in float (lerp's big-weight form) */
  float beta2;         /* f(beta2) */
  float one_m_beta2;   /* f(1 - beta2) */
  float bc2_sqrt;      /* f(sqrt(1 - beta2^t)) */
  float rbc2;          /* f(1 / sqrt(1 - beta2^t)): the codec step's (codec.c) */
  float eps;           /* f(eps) */
  float neg_step_size; /* f(-lr / (1 - beta1^t)) */
} _mt_adam_scalars_t;

/* One parameter's arrays for a kernel call. vmax is NULL unless amsgrad;
 * out is NULL or a bf16/fp16 array (out_dtype) receiving round(p). The
 * gradient is g (g_dtype _MT_DT_F32, the zero default) or g16 (g_dtype
 * _MT_DT_BF16 / _MT_DT_F16), widened exactly to float as it is loaded, so
 * the step is torch's on the float32 copy of a narrow gradient. */
typedef struct _mt_adam_args {
  float *p;
  const float *g;
  const uint16_t *g16;
  int g_dtype;
  float *m, *v, *vmax;
  void *out;
  int out_dtype;
} _mt_adam_args_t;

/* The same arrays from element off on (a block of them as its own tensor). */
static inline _mt_adam_args_t _mt_adam_args_at(const _mt_adam_args_t *a, size_t off) {
  _mt_adam_args_t r = *a;
  r.p = a->p + off;
  r.g = a->g ? a->g + off : NULL;
  r.g16 = a->g16 ? a->g16 + off : NULL;
  r.m = a->m ? a->m + off : NULL;
  r.v = a->v ? a->v + off : NULL;
  r.vmax = a->vmax ? a->vmax + off : NULL;
  r.out = a->out ? (uint16_t *)a->out + off : NULL;
  return r;
}

/* Software prefetch distance, in elements. The vector kernels ask for the
 * weights' and gradients' cache lines this far ahead (and the moments'
 * lines, or their codes): on the Xeon of 2026-12-01 the hardware
 * prefetchers alone left one thread's step waiting on memory between
 * bursts of arithmetic, and asking 512 elements (2 KiB of each FP32
 * array) ahead took the 1-thread 100M step from 0.89 to 0.92 G params/s
 * with FP32 state and from 0.70 to 1.10 with 4-bit state (README, "Host
 * AdamW, current"). Prefetches never fault, but the kernels only form
 * addresses inside the range they were given. */
#define _MT_ADAM_PREFETCH 512
/* Always inlined (codec.c, prefetch_block, says why). */
__attribute__((always_inline)) static inline void _mt_adam_prefetch_pg(const _mt_adam_args_t *a,
                                                                      size_t i) {
  __builtin_prefetch(a->p + i);
  __builtin_prefetch(a->g16 != NULL ? (const void *)(a->g16 + i) : (const void *)(a->g + i));
}

typedef void (*_mt_adam_kernel_fn)(const _mt_adam_scalars_t *s, const _mt_adam_args_t *a,
                                   size_t begin, size_t end);

/* Kernel choices; AUTO takes the widest the CPU supports. */
typedef enum _mt_adam_isa {
  _MT_ISA_AUTO = 0,
  _MT_ISA_SCALAR = 1,
  _MT_ISA_AVX2 = 2,
  _MT_ISA_AVX512 = 3,
  _MT_ISA_MKL = 4, /* the two-pass kernel with MKL's vmsSqrt: stock torch's bits */
} _mt_adam_isa_t;

// adam.c
/* Fills *s for step number step (1-based, counted as torch counts it, in
 * float32) with gradient multiplier clip (1 = none). 0 or -EINVAL on a
 * hyper-parameter torch rejects (lr < 0, eps < 0, beta outside [0, 1)). */
int _mt_adam_scalars(const _mt_adam_hp_t *hp, float step, float clip, _mt_adam_scalars_t *s);
/* The kernel for isa; NULL when this CPU (or this build) lacks it, or, for
 * _MT_ISA_MKL, when libmkl_rt.so.2 is not on the loader's path. */
_mt_adam_kernel_fn _mt_adam_kernel(_mt_adam_isa_t isa);
/* The name of an isa ("scalar", "avx2", "avx512", "auto"). */
const char *_mt_adam_isa_name(_mt_adam_isa_t isa);
/* Round to nearest even, as c10::BFloat16 / c10::Half do (NaN -> quiet NaN). */
uint16_t _mt_f32_to_bf16(float f);
uint16_t _mt_f32_to_f16(float f);
/* Exact widening. */
float _mt_bf16_to_f32(uint16_t h);
float _mt_f16_to_f32(uint16_t h);

/* A vector square root over n floats (in and out may alias). */
typedef void (*_mt_sqrt_fn)(size_t n, const float *in, float *out);
/* MKL's VML vsSqrt in the mode aten calls it (VML_HA | VML_FTZDAZ_OFF |
 * VML_ERRMODE_IGNORE), from libmkl_rt at path (NULL: "libmkl_rt.so.2" on
 * the loader's path), dlopen'ed on first use; NULL if it cannot be loaded.
 * With it, _mt_adam_kernel_vsqrt reproduces stock torch's bits. */
_mt_sqrt_fn _mt_adam_mkl_sqrt(const char *path);

// gradnorm.c
/* torch.linalg.vector_norm(g, 2) of n elements of dtype _MT_DT_*, in
 * aten's reduction order (gradnorm.c), bit for bit; the AVX2 path unless
 * isa is SCALAR or the CPU lacks AVX2 (same bits either way). The global
 * norm of several tensors is this applied to their norms. */
float _mt_grad_norm2(const void *g, int dtype, size_t n, _mt_adam_isa_t isa);
/* torch.nn.utils.clip_grad_norm_'s clamped coefficient from the total
 * norm: min((1 / (total_norm + f(1e-6))) * f(max_norm), 1) in float, as
 * torch computes max_norm / (total + 1e-6) on a float32 tensor (rdiv is a
 * reciprocal and a product). */
float _mt_adam_clip_coef(float total_norm, double max_norm);

// adam_kernels.c
/* The scalar kernel with the square root taken from sq, block by block:
 * pass 1 updates g, p (decay), m, v, vmax and collects the sqrt operands
 * of a block; sq; pass 2 finishes d and p. Same operations, same order. */
void _mt_adam_kernel_vsqrt(const _mt_adam_scalars_t *s, const _mt_adam_args_t *a, size_t begin,
                           size_t end, _mt_sqrt_fn sq);
void _mt_adam_kernel_scalar(const _mt_adam_scalars_t *s, const _mt_adam_args_t *a, size_t begin,
                            size_t end);
/* The update of compressed state (codec.c), without amsgrad: the scalar
 * kernel's operations, but d = sqrt(v) * rbc2 + eps, a multiply by the
 * reciprocal where torch divides by sqrt(1 - beta2^t). Not torch's bits
 * (d within an ulp or two of them): the moments it works on are
 * quantised anyway, and the multiply takes 6% of the 4-bit step's CPU
 * off (a divider's throughput, README). */
void _mt_adam_kernel_codec_scalar(const _mt_adam_scalars_t *s, const _mt_adam_args_t *a,
                                  size_t begin, size_t end);
void _mt_adam_kernel_avx2(const _mt_adam_scalars_t *s, const _mt_adam_args_t *a, size_t begin,
                          size_t end);
void _mt_adam_kernel_avx512(const _mt_adam_scalars_t *s, const _mt_adam_args_t *a, size_t begin,
                            size_t end);
/* o[i] = bf16 or fp16 (dtype) of p[i], i < n, bit-identical to
 * _mt_f32_to_bf16 / _mt_f32_to_f16; AVX2 and F16C (only where the AVX2
 * kernel is handed out). */
void _mt_round_out_avx2(const float *p, uint16_t *o, int dtype, size_t n);

#endif
