/*
 * adam.c - the per-step scalars of AdamW/Adam, the choice of kernel, and
 * the rounding of FP32 masters to the device dtypes.
 *
 * The scalars are where bit-exactness with PyTorch is won or lost: torch
 * computes them in Python floats (double) and the tensor ops round each to
 * float32 when they take it as a Scalar. So every quantity below is formed
 * in double in the same expression order as torch/optim/adam.py's
 * _single_tensor_adam, then rounded once. pow() is libm's, as Python's
 * float ** float is; 0.5 as an exponent goes through pow() too, as Python
 * does (glibc's pow is correctly rounded, so this equals sqrt()).
 *
 * Kernel choice: AUTO takes AVX-512F, else AVX2, else scalar, from
 * __builtin_cpu_supports; a forced choice the CPU lacks gets NULL, so a test
 * can say which kernels it ran.
 *
 * Threading: all functions are pure; safe from any thread.
 */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <math.h>
#include <string.h>

#include "adam.h"

int _mt_adam_scalars(const _mt_adam_hp_t *hp, float step, float clip, _mt_adam_scalars_t *s) {
  if (!(hp->lr >= 0) || !(hp->eps >= 0) || !(hp->beta1 >= 0 && hp->beta1 < 1) ||
      !(hp->beta2 >= 0 && hp->beta2 < 1) || !(hp->weight_decay >= 0) || !(step >= 1))
    return -EINVAL;
  memset(s, 0, sizeof(*s));
  double t = (double)step; /* float32 step count, read back as a Python float */
  if (clip != 1.0f) {
    s->flags |= _MT_ADAM_CLIP;
    s->clip = clip;
  }
  if (hp->maximize)
    s->flags |= _MT_ADAM_MAXIMIZE;
  if (hp->amsgrad)
    s->flags |= _MT_ADAM_AMSGRAD;
  if (hp->weight_decay != 0) {
    if (hp->decoupled) {
      s->flags |= _MT_ADAM_DECAY;
      s->decay = (float)(1 - hp->lr * hp->weight_decay);
    } else {
      s->flags |= _MT_ADAM_L2;
      s->l2 = (float)hp->weight_decay;
    }
  }
  s->w1 = (float)(1 - hp->beta1);
  /* aten's lerp: |weight| < 0.5 ? self + w*(end-self) : end - (end-self)*(1-w),
   * 1 - w formed in float (opmath of float is float). */
  if (!(fabsf(s->w1) < 0.5f)) {
    s->flags |= _MT_ADAM_LERP_BIG;
    s->one_m_w1 = 1.0f - s->w1;
  }
  s->beta2 = (float)hp->beta2;
  s->one_m_beta2 = (float)(1 - hp->beta2);
  double bc1 = 1 - pow(hp->beta1, t);
  double bc2 = 1 - pow(hp->beta2, t);
  double step_size = hp->lr / bc1;
  s->bc2_sqrt = (float)pow(bc2, 0.5);
  s->rbc2 = (float)(1 / pow(bc2, 0.5));
  s->eps = (float)hp->eps;
  s->neg_step_size = (float)-step_size;
  return 0;
}

static bool isa_ok(_mt_adam_isa_t isa) {
#if defined(__x86_64__)
  __builtin_cpu_init();
  switch (isa) {
    case _MT_ISA_SCALAR:
      return true;
    case _MT_ISA_AVX2: /* f16c: the kernel widens fp16 gradients with vcvtph2ps */
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
    case _MT_ISA_AVX512:
      return __builtin_cpu_supports("avx512f");
    default:
      return false;
  }
#else
  return isa == _MT_ISA_SCALAR;
#endif
}

static void kernel_mkl(const _mt_adam_scalars_t *s, const _mt_adam_args_t *a, size_t begin,
                       size_t end);

_mt_adam_kernel_fn _mt_adam_kernel(_mt_adam_isa_t isa) {
  if (isa == _MT_ISA_MKL)
    return _mt_adam_mkl_sqrt(NULL) != NULL ? kernel_mkl : NULL;
  if (isa == _MT_ISA_AUTO)
    isa = isa_ok(_MT_ISA_AVX512) ? _MT_ISA_AVX512 : isa_ok(_MT_ISA_AVX2) ? _MT_ISA_AVX2 : _MT_ISA_SCALAR;
  if (!isa_ok(isa))
    return NULL;
  switch (isa) {
    case _MT_ISA_AVX2:
      return _mt_adam_kernel_avx2;
    case _MT_ISA_AVX512:
      return _mt_adam_kernel_avx512;
    default:
      return _mt_adam_kernel_scalar;
  }
}

const char *_mt_adam_isa_name(_mt_adam_isa_t isa) {
  static const char *const names[] = {"auto", "scalar", "avx2", "avx512", "mkl"};
  return (unsigned)isa < 5 ? names[isa] : "?";
}

uint16_t _mt_f32_to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return 0x7fc0; /* c10::BFloat16's NaN */
  u += 0x7fffu + ((u >> 16) & 1);
  return (uint16_t)(u >> 16);
}

uint16_t _mt_f32_to_f16(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
  uint32_t ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u)
    return sign | 0x7e00; /* quiet NaN */
  if (ax >= 0x477ff000u)  /* 65520 and up round to infinity */
    return sign | 0x7c00;
  if (ax < 0x38800000u) { /* below 2^-14: a half subnormal (or zero) */
    float a = fabsf(f) * 0x1p24f; /* exact: a power-of-two scale */
    return sign | (uint16_t)lrintf(a); /* nearest even; 1024 is the smallest normal */
  }
  ax += 0xfffu + ((ax >> 13) & 1);
  ax -= 112u << 23; /* exponent bias 127 -> 15 */
  return sign | (uint16_t)(ax >> 13);
}

float _mt_bf16_to_f32(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

float _mt_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff, u;
  if (e == 0x1f) {
    u = sign | 0x7f800000u | (m << 13);
  } else if (e != 0) {
    u = sign | ((e + 112) << 23) | (m << 13);
  } else { /* subnormal or zero: m * 2^-24, exact in float */
    float f = (float)m * 0x1p-24f;
    memcpy(&u, &f, 4);
    u |= sign;
  }
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* vmsSqrt(MKL_INT n, const float *a, float *r, MKL_INT64 mode), LP64 */
typedef void (*vms_fn)(int n, const float *a, float *r, long long mode);
static vms_fn mkl_vms;

static void mkl_sqrt(size_t n, const float *in, float *out) {
  enum { VML_HA = 0x2, VML_FTZDAZ_OFF = 0x140000, VML_ERRMODE_IGNORE = 0x100 };
  while (n > 0) {
    int k = n > INT_MAX ? INT_MAX : (int)n;
    mkl_vms(k, in, out, VML_HA | VML_FTZDAZ_OFF | VML_ERRMODE_IGNORE);
    n -= (size_t)k;
    in += k;
    out += k;
  }
}

_mt_sqrt_fn _mt_adam_mkl_sqrt(const char *path) {
  static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
  pthread_mutex_lock(&lock);
  if (mkl_vms == NULL) {
    void *h = dlopen(path ? path : "libmkl_rt.so.2", RTLD_NOW | RTLD_LOCAL);
    if (h != NULL)
      *(void **)&mkl_vms = dlsym(h, "vmsSqrt"); /* h stays open: mkl_vms points into it */
  }
  vms_fn f = mkl_vms;
  pthread_mutex_unlock(&lock);
  return f ? mkl_sqrt : NULL;
}

/* Handed out only after _mt_adam_mkl_sqrt succeeded, so mkl_vms is set. */
static void kernel_mkl(const _mt_adam_scalars_t *s, const _mt_adam_args_t *a, size_t begin,
                       size_t end) {
  _mt_adam_kernel_vsqrt(s, a, begin, end, mkl_sqrt);
}
