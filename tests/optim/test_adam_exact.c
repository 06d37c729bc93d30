/*
 * Description: the AdamW/Adam kernels against torch.optim, bit for bit.
 *
 * Reads the reference file adam_ref.py wrote (inputs, hyper-parameters, the
 * clip coefficients torch applied, torch's final state) and replays the
 * same steps under every kernel this CPU has (scalar, AVX2, AVX-512),
 * splitting each parameter at an odd offset so the vector kernels start
 * unaligned; then compares p, m, v, vmax and the bf16/fp16 write-back bit
 * for bit. A kernel the CPU lacks is named as not run. Any difference:
 * exit 1 with the set, size, array and first index.
 *
 * The block-wise two-pass kernel (_mt_adam_kernel_vsqrt) runs too, with
 * IEEE sqrt; with --mkl LIB (a reference made with torch's own sqrt,
 * adam_ref.py --sqrt=torch) it runs alone, with MKL's vmsSqrt from LIB,
 * and must match stock torch bit for bit.
 *
 *   test_adam_exact [--mkl LIBMKL_RT] REFFILE
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adam.h"

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

int main(int argc, char **argv) {
  const char *mkl = NULL;
  if (argc == 4 && strcmp(argv[1], "--mkl") == 0) {
    mkl = argv[2];
    argv += 2;
    argc -= 2;
  }
  if (argc != 2) {
    fprintf(stderr, "usage: test_adam_exact [--mkl LIBMKL_RT] REFFILE\n");
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
  if (memcmp(magic, "MTADAMR1", 8) != 0) {
    fprintf(stderr, "test_adam_exact: FAIL: %s: not a reference file\n", ref_path);
    return 1;
  }
  uint32_t nsz = hdr[0], steps = hdr[1], nsets = hdr[2];
  uint64_t *sizes = xmalloc(nsz * sizeof(uint64_t));
  rd(sizes, nsz * sizeof(uint64_t));
  float **p0 = xmalloc(nsz * sizeof(float *)), **grads = xmalloc(nsz * sizeof(float *));
  size_t maxn = 0;
  for (uint32_t i = 0; i < nsz; i++) {
    size_t n = sizes[i];
    maxn = n > maxn ? n : maxn;
    p0[i] = xmalloc(n * 4);
    grads[i] = xmalloc(n * 4 * steps);
    rd(p0[i], n * 4);
    rd(grads[i], n * 4 * steps);
  }
  float *p = xmalloc(maxn * 4), *m = xmalloc(maxn * 4), *v = xmalloc(maxn * 4),
        *vm = xmalloc(maxn * 4), *want = xmalloc(maxn * 4 * 4);
  uint16_t *out = xmalloc(maxn * 2), *want16 = xmalloc(maxn * 2 * 2);
  float *clips = xmalloc(steps * sizeof(float));

  /* index 3: the two-pass kernel with vsqrt; with --mkl, only that */
  static const _mt_adam_isa_t isas[] = {_MT_ISA_SCALAR, _MT_ISA_AVX2, _MT_ISA_AVX512,
                                        _MT_ISA_SCALAR};
  int fails = 0, compared = 0;
  for (uint32_t set = 0; set < nsets; set++) {
    double d[6];
    uint32_t fl[4];
    rd(d, sizeof(d));
    rd(fl, sizeof(fl));
    rd(clips, steps * sizeof(float));
    _mt_adam_hp_t hp = {.lr = d[0], .beta1 = d[1], .beta2 = d[2], .eps = d[3],
                        .weight_decay = d[4], .decoupled = fl[0], .amsgrad = fl[1],
                        .maximize = fl[2]};
    for (uint32_t i = 0; i < nsz; i++) {
      size_t n = sizes[i];
      rd(want, n * 4 * 4);
      rd(want16, n * 2 * 2);
      for (unsigned k = 0; k < sizeof(isas) / sizeof(isas[0]); k++) {
        if (mkl != NULL && k != 3)
          continue;
        _mt_adam_kernel_fn fn = k == 3 ? kernel_vsqrt : _mt_adam_kernel(isas[k]);
        const char *name = k < 3 ? _mt_adam_isa_name(isas[k]) : mkl ? "two-pass+mkl-sqrt"
                                                                     : "two-pass+ieee-sqrt";
        if (fn == NULL) {
          if (set == 0 && i == 0)
            printf("kernel %s: not run (this CPU lacks it)\n", name);
          continue;
        }
        memcpy(p, p0[i], n * 4);
        memset(m, 0, n * 4);
        memset(v, 0, n * 4);
        memset(vm, 0, n * 4);
        for (uint32_t s = 0; s < steps; s++) {
          _mt_adam_scalars_t sc;
          if (_mt_adam_scalars(&hp, (float)(s + 1), clips[s], &sc) != 0) {
            fprintf(stderr, "test_adam_exact: FAIL: set %u rejected\n", set);
            return 1;
          }
          _mt_adam_args_t a = {.p = p, .g = grads[i] + (size_t)s * n, .m = m, .v = v,
                               .vmax = hp.amsgrad ? vm : NULL, .out = NULL};
          if (s + 1 == steps) { /* the kernel's own write-back, bf16 or fp16 by set */
            a.out = out;
            a.out_dtype = set & 1 ? _MT_DT_F16 : _MT_DT_BF16;
          }
          size_t cut = n / 3 | 1; /* odd: the second range starts unaligned */
          cut = cut > n ? n : cut;
          fn(&sc, &a, 0, cut);
          fn(&sc, &a, cut, n);
        }
        int f = 0;
        f |= compare("p", p, want, n, 4, name, set, n);
        f |= compare("m", m, want + n, n, 4, name, set, n);
        f |= compare("v", v, want + 2 * n, n, 4, name, set, n);
        f |= compare("vmax", vm, want + 3 * n, n, 4, name, set, n);
        f |= compare(set & 1 ? "f16 write-back" : "bf16 write-back", out,
                     want16 + (set & 1 ? n : 0), n, 2, name, set, n);
        for (size_t j = 0; j < n; j++)
          out[j] = set & 1 ? _mt_f32_to_bf16(p[j]) : _mt_f32_to_f16(p[j]);
        f |= compare(set & 1 ? "bf16(p)" : "f16(p)", out, want16 + (set & 1 ? 0 : n), n, 2,
                     name, set, n);
        fails += f;
        compared++;
        if (set == 0 && i == 0)
          printf("kernel %s: run\n", name);
      }
    }
  }
  printf("test_adam_exact: %d comparisons, %d failed\n", compared, fails);
  fclose(ref);
  for (uint32_t i = 0; i < nsz; i++) {
    free(p0[i]);
    free(grads[i]);
  }
  free(p0);
  free(grads);
  free(sizes);
  free(p);
  free(m);
  free(v);
  free(vm);
  free(want);
  free(out);
  free(want16);
  free(clips);
  return fails ? 1 : 0;
}
