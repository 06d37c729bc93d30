/*
 * Description: the AdamW/Adam kernels against torch.optim, bit for bit.
 *
 * Reads the reference file adam_ref.py wrote (inputs, hyper-parameters, the
 * clip coefficients and total norms torch computed, torch's final state)
 * and replays the same steps, splitting each parameter at an odd offset so
 * the vector kernels start unaligned; then compares p, m, v, vmax and the
 * bf16/fp16 write-back bit for bit. Clipped sets compute the global norm
 * here (_mt_grad_norm2, in clip_grad_norm_'s order) and its coefficient
 * (_mt_adam_clip_coef), check both against torch's bit for bit, and step
 * with them. Sets with a narrow dtype start from bf16/fp16 weights widened
 * into FP32 masters and feed bf16/fp16 gradients to the kernel as they are.
 *
 * Kernel: MT_OPTIM_KERNEL (the options table) picks one (scalar, avx2,
 * avx512); one the CPU lacks exits 77 (a skip) with the CPU flag named.
 * auto (unset) runs every kernel the CPU has and names the others. Any
 * difference: exit 1 with the set, size, array and first index.
 *
 * The block-wise two-pass kernel (_mt_adam_kernel_vsqrt) runs too, with
 * IEEE sqrt; with --mkl LIB (a reference made with torch's own sqrt,
 * adam_ref.py --sqrt=torch) it runs alone, with MKL's vmsSqrt from LIB,
 * and must match stock torch bit for bit.
 *
 *   test_adam_exact [--mkl LIBMKL_RT] REFFILE
 *   test_adam_exact --probe      (exit 77 if MT_OPTIM_KERNEL is not on this CPU)
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adam.h"
#include "internal.h"

static FILE *ref;
static const char *ref_path;

static void rd(void *dst, size_t bytes) {
  if (fread(dst, 1, bytes, ref) != bytes) {
    fprintf(stderr, "test_adam_exact: FAIL: %s: short file at byte %ld\n", ref_path, ftell(ref));
    exit(1);
  }
}

static void *xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (p == NULL) {
    perror("malloc");
    exit(1);
  }
  return p;
}

static int compare(const char *what, const void *got, const void *want, size_t n, size_t esz,
                   const char *isa, unsigned set, size_t size) {
  if (memcmp(got, want, n * esz) == 0)
    return 0;
  const unsigned char *a = got, *b = want;
  size_t i = 0;
  while (memcmp(a + i * esz, b + i * esz, esz) == 0)
    i++;
  if (esz == 4) {
    float x, y;
    memcpy(&x, a + i * 4, 4);
    memcpy(&y, b + i * 4, 4);
    fprintf(stderr, "test_adam_exact: FAIL: kernel %s, set %u, size %zu: %s[%zu] = %.9g, torch %.9g\n",
            isa, set, size, what, i, x, y);
  } else {
    fprintf(stderr, "test_adam_exact: FAIL: kernel %s, set %u, size %zu: %s[%zu] differs\n", isa,
            set, size, what, i);
  }
  return 1;
}

static void ieee_sqrt(size_t n, const float *in, float *out) {
  for (size_t i = 0; i < n; i++)
    out[i] = sqrtf(in[i]);
}

static _mt_sqrt_fn vsqrt;

/* The two-pass kernel with vsqrt, as a kernel. */
static void kernel_vsqrt(const _mt_adam_scalars_t *s, const _mt_adam_args_t *a, size_t begin,
                         size_t end) {
  _mt_adam_kernel_vsqrt(s, a, begin, end, vsqrt);
}

/* The CPU flag a kernel needs, for the skip message. */
static const char *isa_flag(_mt_adam_isa_t isa) {
  return isa == _MT_ISA_AVX512 ? "avx512f" : isa == _MT_ISA_AVX2 ? "avx2 and f16c" : "none";
}

static void widen(float *dst, const uint16_t *src, size_t n, int dtype) {
  for (size_t i = 0; i < n; i++)
    dst[i] = dtype == _MT_DT_BF16 ? _mt_bf16_to_f32(src[i]) : _mt_f16_to_f32(src[i]);
}

static int same_bits(float a, float b) {
  return memcmp(&a, &b, 4) == 0;
}

int main(int argc, char **argv) {
  _mt_options_init();
  _mt_adam_isa_t forced = (_mt_adam_isa_t)_mt_opt_int(MT_OPT_OPTIM_KERNEL);
  if (forced == _MT_ISA_MKL) {
    fprintf(stderr, "test_adam_exact: MT_OPTIM_KERNEL=mkl: use --mkl LIB (adam_exact.sh mkl)\n");
    return 2;
  }
  if (forced != _MT_ISA_AUTO && _mt_adam_kernel(forced) == NULL) {
    fprintf(stderr,
            "test_adam_exact: SKIP: MT_OPTIM_KERNEL=%s: this CPU lacks the flag %s, so the %s "
            "kernel cannot run here and its bits are NOT checked\n",
            _mt_adam_isa_name(forced), isa_flag(forced), _mt_adam_isa_name(forced));
    return 77;
  }
  if (argc == 2 && strcmp(argv[1], "--probe") == 0)
    return 0;
  const char *mkl = NULL;
  if (argc == 4 && strcmp(argv[1], "--mkl") == 0) {
    mkl = argv[2];
    argv += 2;
    argc -= 2;
  }
  if (argc != 2) {
    fprintf(stderr, "usage: test_adam_exact [--mkl LIBMKL_RT] REFFILE | --probe\n");
    return 2;
  }
  vsqrt = ieee_sqrt;
  if (mkl != NULL && (vsqrt = _mt_adam_mkl_sqrt(mkl)) == NULL) {
    fprintf(stderr, "test_adam_exact: FAIL: cannot load vmsSqrt from %s\n", mkl);
    return 1;
  }
  ref_path = argv[1];
  ref = fopen(ref_path, "rb");
  if (ref == NULL) {
    perror(ref_path);
    return 1;
  }
  char magic[8];
  uint32_t hdr[4];
  rd(magic, 8);
  rd(hdr, sizeof(hdr));
  if (memcmp(magic, "MTADAMR2", 8) != 0) {
    fprintf(stderr, "test_adam_exact: FAIL: %s: not a version-2 reference file\n", ref_path);
    return 1;
  }
  uint32_t nsz = hdr[0], steps = hdr[1], nsets = hdr[2];
  uint64_t *sizes = xmalloc(nsz * sizeof(uint64_t));
  rd(sizes, nsz * sizeof(uint64_t));
  /* per size: f32 inputs (shared by the f32 sets), narrow ones (per set) */
  float **p0 = xmalloc(nsz * sizeof(float *)), **grads = xmalloc(nsz * sizeof(float *));
  uint16_t **p0n = xmalloc(nsz * sizeof(uint16_t *)), **gradsn = xmalloc(nsz * sizeof(uint16_t *));
  size_t maxn = 0;
  for (uint32_t i = 0; i < nsz; i++) {
    size_t n = sizes[i];
    maxn = n > maxn ? n : maxn;
    p0[i] = xmalloc(n * 4);
    grads[i] = xmalloc(n * 4 * steps);
    p0n[i] = xmalloc(n * 2);
    gradsn[i] = xmalloc(n * 2 * steps);
    rd(p0[i], n * 4);
    rd(grads[i], n * 4 * steps);
  }
  float *p = xmalloc(maxn * 4), *m = xmalloc(maxn * 4), *v = xmalloc(maxn * 4),
        *vm = xmalloc(maxn * 4), *want = xmalloc(maxn * 4 * 4);
  uint16_t *out = xmalloc(maxn * 2), *want16 = xmalloc(maxn * 2 * 2);
  float *clips = xmalloc(steps * sizeof(float)), *norms = xmalloc(steps * sizeof(float));
  float *tnorm = xmalloc(nsz * sizeof(float));

  /* index 3: the two-pass kernel with vsqrt; with --mkl, only that */
  static const _mt_adam_isa_t isas[] = {_MT_ISA_SCALAR, _MT_ISA_AVX2, _MT_ISA_AVX512,
                                        _MT_ISA_SCALAR};
  int fails = 0, compared = 0, norms_checked = 0;
  for (uint32_t set = 0; set < nsets; set++) {
    double d[6];
    uint32_t fl[4];
    rd(d, sizeof(d));
    rd(fl, sizeof(fl));
    rd(clips, steps * sizeof(float));
    rd(norms, steps * sizeof(float));
    const int dt = (int)fl[3]; /* weights' and gradients' dtype */
    if (dt != _MT_DT_F32 && dt != _MT_DT_BF16 && dt != _MT_DT_F16) {
      fprintf(stderr, "test_adam_exact: FAIL: %s: set %u: dtype %d\n", ref_path, set, dt);
      return 1;
    }
    if (dt != _MT_DT_F32)
      for (uint32_t i = 0; i < nsz; i++) {
        rd(p0n[i], sizes[i] * 2);
        rd(gradsn[i], sizes[i] * 2 * steps);
      }
    _mt_adam_hp_t hp = {.lr = d[0], .beta1 = d[1], .beta2 = d[2], .eps = d[3],
                        .weight_decay = d[4], .decoupled = fl[0], .amsgrad = fl[1],
                        .maximize = fl[2]};
    const double max_norm = d[5];
    for (uint32_t i = 0; i < nsz; i++) {
      size_t n = sizes[i];
      rd(want, n * 4 * 4);
      rd(want16, n * 2 * 2);
      for (unsigned k = 0; k < sizeof(isas) / sizeof(isas[0]); k++) {
        if (mkl != NULL && k != 3)
          continue;
        if (mkl == NULL && forced != _MT_ISA_AUTO && k < 3 && isas[k] != forced)
          continue;
        if (mkl == NULL && k == 3 && forced != _MT_ISA_AUTO && forced != _MT_ISA_SCALAR)
          continue; /* the two-pass kernel is scalar code: once, with the scalar test */
        _mt_adam_kernel_fn fn = k == 3 ? kernel_vsqrt : _mt_adam_kernel(isas[k]);
        const char *name = k < 3 ? _mt_adam_isa_name(isas[k]) : mkl ? "two-pass+mkl-sqrt"
                                                                     : "two-pass+ieee-sqrt";
        if (fn == NULL) {
          if (set == 0 && i == 0)
            printf("kernel %s: NOT RUN: this CPU lacks the flag %s\n", name, isa_flag(isas[k]));
          continue;
        }
        const _mt_adam_isa_t isa = k < 3 ? isas[k] : _MT_ISA_SCALAR;
        if (dt == _MT_DT_F32)
          memcpy(p, p0[i], n * 4);
        else /* the master, widened from the device weights */
          widen(p, p0n[i], n, dt);
        memset(m, 0, n * 4);
        memset(v, 0, n * 4);
        memset(vm, 0, n * 4);
        for (uint32_t s = 0; s < steps; s++) {
          float clip = 1.0f;
          if (max_norm > 0) {
            /* the global norm over every size's gradient of this step, in
             * clip_grad_norm_'s order, then torch's coefficient */
            for (uint32_t j = 0; j < nsz; j++)
              tnorm[j] = dt == _MT_DT_F32
                             ? _mt_grad_norm2(grads[j] + (size_t)s * sizes[j], _MT_DT_F32,
                                              sizes[j], isa)
                             : _mt_grad_norm2(gradsn[j] + (size_t)s * sizes[j], dt, sizes[j], isa);
            float total = _mt_grad_norm2(tnorm, _MT_DT_F32, nsz, isa);
            clip = _mt_adam_clip_coef(total, max_norm);
            if (!same_bits(total, norms[s]) || !same_bits(clip, clips[s])) {
              fprintf(stderr,
                      "test_adam_exact: FAIL: kernel %s, set %u, step %u: total norm %.9g "
                      "(torch %.9g), clip %.9g (torch %.9g)\n",
                      name, set, s, total, norms[s], clip, clips[s]);
              fails++;
            }
            norms_checked++;
          }
          _mt_adam_scalars_t sc;
          if (_mt_adam_scalars(&hp, (float)(s + 1), clip, &sc) != 0) {
            fprintf(stderr, "test_adam_exact: FAIL: set %u rejected\n", set);
            return 1;
          }
          _mt_adam_args_t a = {.p = p, .m = m, .v = v, .vmax = hp.amsgrad ? vm : NULL,
                               .out = NULL, .g_dtype = dt};
          if (dt == _MT_DT_F32)
            a.g = grads[i] + (size_t)s * n;
          else /* the narrow gradient itself: the kernel widens it */
            a.g16 = gradsn[i] + (size_t)s * n;
          if (s + 1 == steps) { /* the kernel's own write-back: the set's dtype, else by set */
            a.out = out;
            a.out_dtype = dt != _MT_DT_F32 ? dt : set & 1 ? _MT_DT_F16 : _MT_DT_BF16;
          }
          size_t cut = n / 3 | 1; /* odd: the second range starts unaligned */
          cut = cut > n ? n : cut;
          fn(&sc, &a, 0, cut);
          fn(&sc, &a, cut, n);
        }
        const int wb = dt != _MT_DT_F32 ? dt : set & 1 ? _MT_DT_F16 : _MT_DT_BF16;
        int f = 0;
        f |= compare("p", p, want, n, 4, name, set, n);
        f |= compare("m", m, want + n, n, 4, name, set, n);
        f |= compare("v", v, want + 2 * n, n, 4, name, set, n);
        f |= compare("vmax", vm, want + 3 * n, n, 4, name, set, n);
        f |= compare(wb == _MT_DT_F16 ? "f16 write-back" : "bf16 write-back", out,
                     want16 + (wb == _MT_DT_F16 ? n : 0), n, 2, name, set, n);
        for (size_t j = 0; j < n; j++) /* and the other rounding, standalone */
          out[j] = wb == _MT_DT_F16 ? _mt_f32_to_bf16(p[j]) : _mt_f32_to_f16(p[j]);
        f |= compare(wb == _MT_DT_F16 ? "bf16(p)" : "f16(p)", out,
                     want16 + (wb == _MT_DT_F16 ? 0 : n), n, 2, name, set, n);
        fails += f;
        compared++;
        if (set == 0 && i == 0)
          printf("kernel %s: run\n", name);
      }
    }
  }
  printf("test_adam_exact: %d comparisons, %d total norms and clip coefficients, %d failed\n",
         compared, norms_checked, fails);
  fclose(ref);
  for (uint32_t i = 0; i < nsz; i++) {
    free(p0[i]);
    free(grads[i]);
    free(p0n[i]);
    free(gradsn[i]);
  }
  free(p0);
  free(grads);
  free(p0n);
  free(gradsn);
  free(sizes);
  free(p);
  free(m);
  free(v);
  free(vm);
  free(want);
  free(out);
  free(want16);
  free(clips);
  free(norms);
  free(tnorm);
  return fails ? 1 : 0;
}
