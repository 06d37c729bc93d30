/*
 * Description: the AVX2 kernels' division by the step's constant bc2_sqrt
 * (DIV_BC2 in adam_kernels.c: a multiply by the rounded reciprocal and one
 * FMA correction) against the IEEE division, bit for bit.
 *
 * Divisors: bc2_sqrt as adam.c computes it for beta2 in {0.9 .. 0.99999}
 * and steps 1..64 plus powers of ten to 10^7, the ends of the range the
 * kernels use it for (1, 2^-60 and their neighbours) and 2,000 random
 * floats in between. Dividends: what the kernel divides, square roots of
 * floats, so 0, inf, NaN and [2^-75, 2^64]: a stride through every binade
 * with random mantissas, each binade's ends, and the specials. Also: out
 * of the range (bc2_sqrt = 0, above 1) the kernels divide.
 *
 * By hand: `test_adam_div --exhaustive B...` runs every float dividend in
 * [0, 2^64] and inf for each divisor B (seconds each). On a CPU without
 * AVX2 and FMA it says so and skips (exit 77).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "optim/adam.h"

#define CHUNK 4096

static uint64_t bad, checked;

static uint32_t bits(float x) {
  uint32_t u;
  memcpy(&u, &x, 4);
  return u;
}

static float of_bits(uint32_t u) {
  float x;
  memcpy(&x, &u, 4);
  return x;
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (uint32_t)(rng >> 11);
}

/* The scalars a step would use for divisor b (adam.c's range rule). */
static _mt_adam_scalars_t scalars_for(float b) {
  _mt_adam_hp_t hp = {.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8};
  _mt_adam_scalars_t s;
  _mt_adam_scalars(&hp, 1.0f, 1.0f, &s);
  s.bc2_sqrt = b;
  s.inv_bc2 = b >= 0x1p-60f && b <= 1.0f ? 1.0f / b : 0.0f;
  return s;
}

static void run(const _mt_adam_scalars_t *s, const float *a, size_t n) {
  static float q[CHUNK];
  _mt_adam_div_bc2_avx2(s, a, q, n);
  for (size_t i = 0; i < n; i++) {
    float ref = a[i] / s->bc2_sqrt;
    checked++;
    if (bits(q[i]) != bits(ref) && !(isnan(q[i]) && isnan(ref))) {
      if (bad++ < 10)
        printf("MISMATCH b=%a a=%a: %a, division %a\n", s->bc2_sqrt, a[i], q[i], ref);
    }
  }
}

/* Sampled dividends for divisor b. */
static void sample(float b) {
  _mt_adam_scalars_t s = scalars_for(b);
  float a[CHUNK];
  size_t n = 0;
  const float special[] = {0.0f, INFINITY, NAN, 0x1p-75f, 0x1p64f, 1.0f, b, 2 * b, 0x1.fffffep-1f};
  for (size_t i = 0; i < sizeof special / sizeof *special; i++) a[n++] = special[i];
  for (int e = -75; e < 64; e++) { /* each binade: its ends and random mantissas */
    for (int k = 0; k < 24; k++) {
      uint32_t m = k == 0 ? 0 : k == 1 ? 0x7fffff : rnd() & 0x7fffff;
      a[n++] = of_bits((uint32_t)(e + 127) << 23 | m);
      if (n == CHUNK - 8) {
        run(&s, a, n);
        n = 0;
      }
    }
  }
  n &= ~(size_t)7;
  run(&s, a, n);
}

static int exhaustive(int argc, char **argv) {
  for (int i = 2; i < argc; i++) {
    float b = strtof(argv[i], NULL);
    _mt_adam_scalars_t s = scalars_for(b);
    uint64_t before = bad;
    float a[CHUNK];
    const uint32_t hi = bits(0x1p64f);
    for (uint64_t u = 0; u <= hi; u += CHUNK) {
      size_t n = 0;
      for (; n < CHUNK && u + n <= hi; n++) a[n] = of_bits((uint32_t)(u + n));
      while (n % 8) a[n++] = INFINITY;
      run(&s, a, n);
    }
    printf("b=%.9g (%a): %llu mismatches over every dividend in [0, 2^64] and inf\n", b, b,
           (unsigned long long)(bad - before));
  }
  return bad ? 1 : 0;
}

int main(int argc, char **argv) {
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) {
    printf("SKIP: this CPU lacks AVX2 or FMA; the scalar kernel divides\n");
    return 77;
  }
  if (argc > 1 && strcmp(argv[1], "--exhaustive") == 0) return exhaustive(argc, argv);
  size_t ndiv = 0;
  const double beta2s[] = {0.9, 0.95, 0.98, 0.99, 0.995, 0.999, 0.9995, 0.9999, 0.99999};
  for (size_t k = 0; k < sizeof beta2s / sizeof *beta2s; k++) {
    for (int t = 1; t <= 71; t++) {
      double step = t <= 64 ? t : pow(10, t - 64);
      _mt_adam_hp_t hp = {.lr = 1e-3, .beta1 = 0.9, .beta2 = beta2s[k], .eps = 1e-8};
      _mt_adam_scalars_t s;
      if (_mt_adam_scalars(&hp, (float)step, 1.0f, &s) != 0) continue;
      if (s.inv_bc2 == 0) {
        printf("FAIL: beta2 %g step %g: bc2_sqrt %a is outside the reciprocal's range\n",
               beta2s[k], step, s.bc2_sqrt);
        return 1;
      }
      sample(s.bc2_sqrt);
      ndiv++;
    }
  }
  const float edges[] = {1.0f, 0x1.fffffep-1f, 0x1p-60f, 0x1.000002p-60f, 0.5f, 0x1.000002p-1f,
                         0x1.fffffep-2f, 0x1.6a09e6p-1f, 0x1.6a09e8p-1f};
  for (size_t i = 0; i < sizeof edges / sizeof *edges; i++, ndiv++) sample(edges[i]);
  for (int i = 0; i < 2000; i++, ndiv++) { /* random floats in (2^-60, 1) */
    float b = of_bits((uint32_t)(67 + rnd() % 60) << 23 | (rnd() & 0x7fffff));
    sample(b);
  }
  /* out of range: the plain division */
  const float outside[] = {0.0f, 0x1p-61f, 0x1p-126f, 0x1.000002p+0f, 2.0f, INFINITY};
  for (size_t i = 0; i < sizeof outside / sizeof *outside; i++, ndiv++) {
    if (scalars_for(outside[i]).inv_bc2 != 0) {
      printf("FAIL: divisor %a should be divided by, not multiplied\n", outside[i]);
      return 1;
    }
    sample(outside[i]);
  }
  printf("%llu quotients over %zu divisors, %llu mismatches\n", (unsigned long long)checked, ndiv,
         (unsigned long long)bad);
  return bad ? 1 : 0;
}
