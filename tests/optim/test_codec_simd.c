/*
 * Description: the AVX2 codec path (decode, Adam update and encode of 8-
 * and 4-bit state in one pass per block) against the scalar codec path: the
 * codes, the block scales, the FP32 masters and the bf16 write-back must be
 * bit-identical after every step.
 *
 * Cases: tensors of 4,096 (whole blocks), 4,097 and 4,103 (a 1- and 7-
 * element tail block, under the 8-lane width), 4,229 and 70,001 elements;
 * 8, 4 and 2 bits (2 falls back to scalar inside the AVX2 entry); hyper-
 * parameter sets with weight decay, L2, maximize, clipping and lerp's
 * big-weight form; gradients spread over 40 decades with zeros, denormals,
 * an all-zero block and one huge block, NaNs in one size; 5 steps; bf16
 * and fp16 gradients with an fp16 write-back. And a direct encode probe:
 * with beta1 = beta2 = 0 one step from zero state stores m = g exactly, so
 * g set to every map midpoint and its neighbours a few ulps either side
 * exercises every tie and near-tie of the nearest-value search (the exact
 * thresholds, and the 8-bit encode's switch to them near a midpoint). The
 * encodes in x's scale (4 and 8 bits) at every binade of absmax. And end
 * to end: two optimizers, isa SCALAR and AUTO, 8- and 4-bit state, two
 * threads, give identical weights. By hand, `test_codec_simd --sweep8`
 * also runs every float in [-amax, amax] through both 8-bit encodes
 * (minutes; passed for amax 1 and 0x1.5bf0a8p-37 on 2026-11-30). On a CPU
 * without AVX2 the test says so and skips (exit 77): there the scalar
 * path is the only one run.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adam.h"
#include "codec.h"
#include "optim.h"

#define CHECK(c, ...)                                                 \
  do {                                                                \
    if (!(c)) {                                                       \
      fprintf(stderr, "test_codec_simd: FAIL line %d: ", __LINE__);   \
      fprintf(stderr, __VA_ARGS__);                                   \
      fprintf(stderr, "\n");                                          \
      exit(1);                                                        \
    }                                                                 \
  } while (0)

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}
static double urand(void) { return (double)(next() >> 11) * 0x1p-53; }

/* A gradient with magnitudes over 40 decades, signs, zeros and denormals. */
static float awkward(size_t i, size_t n) {
  if (i / _MT_CODEC_BLOCK == 3)
    return 0.0f; /* an all-zero block */
  if (i / _MT_CODEC_BLOCK == 5)
    return (float)((urand() - 0.5) * 1e30); /* a huge block */
  uint64_t r = next();
  switch (r % 16) {
    case 0:
      return 0.0f;
    case 1:
      return (float)((urand() - 0.5) * 0x1p-140); /* denormal */
    case 2:
      return -0.0f;
    default:
      return (float)((urand() - 0.5) * pow(10.0, -20.0 + 40.0 * urand())) + (float)(n - n);
  }
}

typedef struct {
  _mt_qtensor_t m, v;
  float *p;
  uint16_t *out;
} state_t;

static void state_init(state_t *st, size_t n, int bits, const float *p0) {
  CHECK(_mt_qtensor_alloc(&st->m, n, bits, 1) == 0, "alloc m");
  CHECK(_mt_qtensor_alloc(&st->v, n, bits, 0) == 0, "alloc v");
  st->p = malloc(n * sizeof(float));
  st->out = calloc(n, sizeof(uint16_t));
  CHECK(st->p != NULL && st->out != NULL, "malloc");
  memcpy(st->p, p0, n * sizeof(float));
}

static void state_free(state_t *st) {
  _mt_qtensor_free(&st->m);
  _mt_qtensor_free(&st->v);
  free(st->p);
  free(st->out);
}

static void same(const state_t *a, const state_t *b, size_t n, const char *what) {
  CHECK(memcmp(a->m.codes, b->m.codes, _mt_qtensor_code_bytes(&a->m)) == 0, "%s: m codes", what);
  CHECK(memcmp(a->v.codes, b->v.codes, _mt_qtensor_code_bytes(&a->v)) == 0, "%s: v codes", what);
  CHECK(memcmp(a->m.scales, b->m.scales, _mt_qtensor_blocks(&a->m) * 4) == 0, "%s: m scales",
        what);
  CHECK(memcmp(a->v.scales, b->v.scales, _mt_qtensor_blocks(&a->v) * 4) == 0, "%s: v scales",
        what);
  for (size_t i = 0; i < n; i++) {
    /* Two NaNs count as equal: which NaN an operation on two of them
     * returns follows the operand order, and C leaves the order of a + b
     * and a * b to the compiler (an ASan build's scalar path once gave
     * -nan where the vectors gave +nan). Every other weight: same bits. */
    const bool nan = a->p[i] != a->p[i] && b->p[i] != b->p[i];
    CHECK(nan || memcmp(&a->p[i], &b->p[i], 4) == 0, "%s: p[%zu] %a vs %a", what, i, a->p[i],
          b->p[i]);
    CHECK(nan || a->out[i] == b->out[i], "%s: out[%zu]", what, i);
  }
}

/* One tensor, both paths, `steps` steps: the states stay bit-identical. */
static void run_dt(size_t n, int bits, const _mt_adam_hp_t *hp, int steps, float clip,
                   const float *gfix, int gdt) {
  float *p0 = calloc(n, sizeof(float)), *g = calloc(n, sizeof(float));
  uint16_t *g16 = calloc(n, sizeof(uint16_t));
  CHECK(p0 != NULL && g != NULL && g16 != NULL, "malloc");
  for (size_t i = 0; i < n; i++)
    p0[i] = (float)(urand() - 0.5);
  state_t sc, av;
  state_init(&sc, n, bits, p0);
  state_init(&av, n, bits, p0);
  char what[96];
  for (int t = 1; t <= steps; t++) {
    for (size_t i = 0; i < n; i++)
      g[i] = gfix != NULL ? gfix[i] : awkward(i, n);
    /* NaN gradients: NaN moments (8 bits: their LUT guess; 4: from the bits) */
    if (gfix == NULL && n == 4229) {
      g[17] = NAN;
      g[300 + (size_t)t] = -NAN;
    }
    _mt_adam_scalars_t s;
    CHECK(_mt_adam_scalars(hp, (float)t, clip, &s) == 0, "scalars");
    _mt_adam_args_t a1 = {.p = sc.p, .g = g, .out = sc.out, .out_dtype = _MT_DT_BF16};
    if (gdt != _MT_DT_F32) { /* the gradient as the device would hand it over */
      for (size_t i = 0; i < n; i++)
        g16[i] = gdt == _MT_DT_BF16 ? _mt_f32_to_bf16(g[i]) : _mt_f32_to_f16(g[i]);
      a1 = (_mt_adam_args_t){.p = sc.p, .g16 = g16, .g_dtype = gdt, .out = sc.out,
                             .out_dtype = _MT_DT_F16};
    }
    _mt_adam_args_t a2 = a1;
    a2.p = av.p;
    a2.out = av.out;
    /* two task ranges, split on a block boundary, as the pool splits them */
    size_t mid = n / 2 / _MT_CODEC_BLOCK * _MT_CODEC_BLOCK;
    _mt_adam_kernel_q_scalar(&s, &a1, &sc.m, &sc.v, 0, mid);
    _mt_adam_kernel_q_scalar(&s, &a1, &sc.m, &sc.v, mid, n);
    _mt_adam_kernel_q_avx2(&s, &a2, &av.m, &av.v, 0, mid);
    _mt_adam_kernel_q_avx2(&s, &a2, &av.m, &av.v, mid, n);
    snprintf(what, sizeof(what), "n %zu bits %d beta1 %g grad dtype %d step %d", n, bits,
             hp->beta1, gdt, t);
    same(&sc, &av, n, what);
  }
  state_free(&sc);
  state_free(&av);
  free(p0);
  free(g);
  free(g16);
}

static void run(size_t n, int bits, const _mt_adam_hp_t *hp, int steps, float clip,
                const float *gfix) {
  run_dt(n, bits, hp, steps, clip, gfix, _MT_DT_F32);
}

/* m = g exactly after one step from zero state with beta1 = 0: g at every
 * midpoint of the signed map (and ulps around it), each block's absmax 1. */
static void probe_encode(int bits) {
  const float *map = _mt_codec_map(bits, 1);
  unsigned len = 1u << bits;
  size_t n = 0, cap = (size_t)len * 16 * 2 + 8 * _MT_CODEC_BLOCK;
  cap = (cap + _MT_CODEC_BLOCK - 1) / _MT_CODEC_BLOCK * _MT_CODEC_BLOCK * 2;
  if (cap < _MT_CODEC_MIN_ELEMS)
    cap = _MT_CODEC_MIN_ELEMS;
  float *g = calloc(cap, sizeof(float));
  CHECK(g != NULL, "calloc");
  for (unsigned i = 0; i + 1 < len; i++) {
    float mid = (map[i] + map[i + 1]) / 2;
    for (int d = -7; d <= 7; d++) {
      if (n % _MT_CODEC_BLOCK == 0)
        g[n++] = 1.0f; /* the block's absmax */
      float x = mid;
      for (int k = 0; k < (d < 0 ? -d : d); k++)
        x = nextafterf(x, d < 0 ? -INFINITY : INFINITY);
      g[n++] = x;
    }
  }
  for (; n < cap; n++)
    g[n] = n % _MT_CODEC_BLOCK == 0 ? 1.0f : (float)(urand() * 2 - 1);
  _mt_adam_hp_t hp = {.lr = 0, .beta1 = 0, .beta2 = 0, .eps = 1e-8, .decoupled = true};
  run(cap, bits, &hp, 1, 1.0f, g);
  free(g);
}

/* The 4- and 8-bit encodes work in x's scale instead of dividing (4 bits:
 * thresholds moved to each block's scale; 8 bits: the map's linear pieces
 * moved there, with the exact threshold only near a midpoint): blocks with
 * absmax of every binade (denormal to 1e38, random significands), elements
 * at fl(t * absmax) and up to 4 ulps either side for every map midpoint t
 * (where the moved threshold and the division can disagree if either is
 * off by one), zeros of both signs, a NaN, an all-zero block and an
 * infinite one, the one exact tie; both maps; the codes and scales must
 * equal the scalar encode's. */
static void probe_encode_scaled(int bits, int is_signed) {
  enum { BLOCKS = 4096 };
  const unsigned len = 1u << bits;
  const float *map = _mt_codec_map(bits, is_signed);
  size_t n = (size_t)BLOCKS * _MT_CODEC_BLOCK;
  float *x = calloc(n, sizeof(float));
  CHECK(x != NULL, "calloc");
  for (size_t blk = 0; blk < BLOCKS; blk++) {
    float *bx = x + blk * _MT_CODEC_BLOCK;
    if (blk == 7)
      continue; /* all zero */
    int ex = (int)(next() % 276) - 149; /* 2^-149 .. 2^126 */
    float amax = ldexpf(1.0f + (float)urand(), ex);
    if (blk == 9)
      amax = INFINITY;
    bx[0] = is_signed && (next() & 1) ? -amax : amax;
    for (size_t i = 1; i < _MT_CODEC_BLOCK; i++) {
      unsigned c = (unsigned)(next() % (len - 1));
      float t = (map[c] + map[c + 1]) / 2; /* near the threshold between c and c + 1 */
      if (bits == 4 && !is_signed) /* v's powers of two round at sqrt 2 (v4_code) */
        t = map[c] * (1.0f + 0x3504F3p-23f);
      float y = t * amax;
      if (bits == 4 && !is_signed && i % 16 == 15)
        y = -y; /* negatives: no v is one, but the encode takes any float */
      int d = (int)(next() % 9) - 4;
      for (int k = 0; k < (d < 0 ? -d : d); k++)
        y = nextafterf(y, d < 0 ? -INFINITY : INFINITY);
      bx[i] = fabsf(y) <= amax ? y : 0.0f;
    }
    bx[1] = -0.0f;
    bx[2] = 0.0f;
    /* the signed map's two zero codes meet at y = 2^-149, whose real
     * midpoint 2^-150 times absmax is a float for large absmax: the only
     * exact tie the moved thresholds meet (round to even: stays below) */
    float tie = ldexpf(amax, -150);
    bx[3] = tie;
    bx[4] = nextafterf(tie, INFINITY);
    bx[6] = nextafterf(tie, 0.0f);
    bx[8] = -tie;
    if (blk == 11)
      bx[5] = NAN;
  }
  _mt_qtensor_t a, b;
  CHECK(_mt_qtensor_alloc(&a, n, bits, is_signed) == 0 &&
            _mt_qtensor_alloc(&b, n, bits, is_signed) == 0,
        "alloc");
  _mt_codec_encode(&a, x, 0, n);
  _mt_codec_encode_avx2(&b, x, 0, n);
  for (size_t i = 0; i < _mt_qtensor_code_bytes(&a); i++)
    CHECK(a.codes[i] == b.codes[i], "%d-bit %s encode, block %zu: codes 0x%02x vs 0x%02x at byte %zu",
          bits, is_signed ? "signed" : "unsigned", 8 * i / (size_t)bits / _MT_CODEC_BLOCK,
          a.codes[i], b.codes[i], i);
  CHECK(memcmp(a.scales, b.scales, BLOCKS * 4) == 0, "%d-bit scales", bits);
  _mt_qtensor_free(&a);
  _mt_qtensor_free(&b);
  free(x);
}

/* Every float x in [-amax, amax], in blocks whose absmax is amax, through
 * the AVX2 and scalar encodes (bits 8 or 4) of both maps (the unsigned
 * one's negatives included): the codes must agree. Not run by default
 * (2^32 values, minutes): `test_codec_simd --sweep8` or `--sweep4` by
 * hand. */
static void sweep(int bits, float amax) {
  enum { CHUNK = 1 << 20 };
  float *x = malloc(CHUNK * sizeof(float));
  CHECK(x != NULL, "malloc");
  _mt_qtensor_t a[2], b[2];
  for (int s = 0; s < 2; s++)
    CHECK(_mt_qtensor_alloc(&a[s], CHUNK, bits, s) == 0 &&
              _mt_qtensor_alloc(&b[s], CHUNK, bits, s) == 0,
          "alloc");
  uint32_t top;
  memcpy(&top, &amax, 4);
  uint64_t done = 0;
  for (uint32_t sign = 0; sign < 2; sign++) {
    uint64_t u = 0;
    while (u <= top) {
      size_t n = 0;
      for (; n < CHUNK && u <= top; n++) {
        if (n % _MT_CODEC_BLOCK == 0) {
          x[n] = amax;
          continue;
        }
        uint32_t w = (uint32_t)u++ | sign << 31;
        memcpy(&x[n], &w, 4);
      }
      for (; n % _MT_CODEC_BLOCK != 0; n++)
        x[n] = 0;
      for (int s = 0; s < 2; s++) {
        _mt_codec_encode(&a[s], x, 0, n);
        _mt_codec_encode_avx2(&b[s], x, 0, n);
        for (size_t i = 0; i < n * (size_t)bits / 8; i++)
          CHECK(a[s].codes[i] == b[s].codes[i], "sweep%d amax %a map %d: x %a: codes 0x%02x vs 0x%02x",
                bits, amax, s, x[i * 8 / (size_t)bits], a[s].codes[i], b[s].codes[i]);
      }
      done += n;
    }
  }
  printf("test_codec_simd: sweep%d amax %a: %llu values agree\n", bits, amax,
         (unsigned long long)done);
  for (int s = 0; s < 2; s++) {
    _mt_qtensor_free(&a[s]);
    _mt_qtensor_free(&b[s]);
  }
  free(x);
}

/* The vector bf16/fp16 write-back against the scalar rounding, on every
 * 257th float bit pattern (all exponents, both signs, NaNs with payloads,
 * infinities, subnormals, fp16's overflow edge) plus the fp16 and bf16
 * rounding edges themselves, at an odd length so the tail runs too. */
static void probe_round_out(void) {
  enum { N = (1 << 24) + 7 };
  float *x = malloc(N * sizeof(float));
  uint16_t *v = malloc(N * 2), *w = malloc(N * 2);
  CHECK(x != NULL && v != NULL && w != NULL, "malloc");
  for (uint32_t i = 0; i < N; i++) {
    uint32_t u = i * 257u;
    if (i % 97 == 0) /* around 65520 (fp16's last finite midpoint) and 2^-25 */
      u = (i & 1 ? 0x477ff000u : 0x33000000u) + (i % 5) - 2;
    memcpy(&x[i], &u, 4);
  }
  for (int dt = _MT_DT_BF16; dt <= _MT_DT_F16; dt++) {
    _mt_round_out_avx2(x, v, dt, N);
    for (uint32_t i = 0; i < N; i++) {
      w[i] = dt == _MT_DT_BF16 ? _mt_f32_to_bf16(x[i]) : _mt_f32_to_f16(x[i]);
      CHECK(v[i] == w[i], "%s write-back of %a (0x%08x): 0x%04x, scalar 0x%04x",
            dt == _MT_DT_BF16 ? "bf16" : "fp16", x[i], i * 257u, v[i], w[i]);
    }
  }
  free(x);
  free(v);
  free(w);
}

/* Through the optimizer: isa SCALAR takes the scalar codec path, AUTO the
 * AVX2 one; two threads, two tensors (one with a tail block), 4 steps. */
static void via_optim(_mt_codec_t codec) {
  enum { N1 = 70001, N2 = 4103 };
  static float w[2][N1 + N2], g[N1 + N2];
  for (size_t i = 0; i < N1 + N2; i++)
    w[0][i] = w[1][i] = (float)(urand() - 0.5);
  _mt_optim_t *o[2];
  for (int k = 0; k < 2; k++) {
    _mt_optim_cfg_t cfg = {.hp = {.lr = 1e-2, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8,
                                  .weight_decay = 1e-2, .decoupled = true},
                           .isa = k == 0 ? _MT_ISA_SCALAR : _MT_ISA_AUTO, .codec = codec,
                           .threads = 2, .node = -1};
    CHECK(_mt_optim_create(&cfg, &o[k]) == 0, "create");
    int rc = _mt_optim_add(o[k], w[k], N1, _MT_DT_F32, g);
    CHECK(rc >= 0, "add: %d", rc);
    rc = _mt_optim_add(o[k], w[k] + N1, N2, _MT_DT_F32, g + N1);
    CHECK(rc >= 0, "add 2: %d", rc);
  }
  for (int t = 0; t < 4; t++) {
    for (size_t i = 0; i < N1 + N2; i++)
      g[i] = awkward(i, N1 + N2);
    for (int k = 0; k < 2; k++) {
      CHECK(_mt_optim_step(o[k], -1, 1.0f) == 0, "step");
      _mt_optim_wait(o[k]);
    }
    CHECK(memcmp(w[0], w[1], sizeof(w[0])) == 0, "optimizer codec %d step %d: weights differ",
          (int)codec, t);
  }
  _mt_optim_destroy(o[0]);
  _mt_optim_destroy(o[1]);
}

int main(int argc, char **argv) {
  if (_mt_codec_kernel_q(_MT_ISA_AVX2) == NULL) {
    printf("test_codec_simd: this CPU has no AVX2; only the scalar codec path runs here\n");
    return 77;
  }
  CHECK(_mt_codec_kernel_q(_MT_ISA_SCALAR) == _mt_adam_kernel_q_scalar, "scalar choice");
  CHECK(_mt_codec_kernel_q(_MT_ISA_AUTO) == _mt_adam_kernel_q_avx2, "auto choice");
  probe_encode(8);
  probe_encode(4);
  probe_round_out();
  for (int bits = 4; bits <= 8; bits += 4) {
    probe_encode_scaled(bits, 1);
    probe_encode_scaled(bits, 0);
  }
  if (argc > 1 && strcmp(argv[1], "--sweep8") == 0) { /* by hand: minutes */
    sweep(8, 1.0f);
    sweep(8, 0x1.5bf0a8p-37f);
  }
  if (argc > 1 && strcmp(argv[1], "--sweep4") == 0) { /* by hand: minutes */
    sweep(4, 1.0f);
    sweep(4, 0x1.5bf0a8p-37f);
    sweep(4, 0x1.8p-120f); /* v4_code's division form */
  }
  const _mt_adam_hp_t hps[] = {
      {.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 1e-2,
       .decoupled = true},
      {.lr = 3e-2, .beta1 = 0.3, .beta2 = 0.99, .eps = 1e-6, .weight_decay = 0.1,
       .decoupled = false, .maximize = true}, /* L2, maximize, lerp's big weight */
  };
  const size_t sizes[] = {4096, 4097, 4103, 4229, 70001};
  const int bitss[] = {8, 4, 2};
  for (size_t h = 0; h < sizeof(hps) / sizeof(hps[0]); h++)
    for (size_t z = 0; z < sizeof(sizes) / sizeof(sizes[0]); z++)
      for (size_t b = 0; b < 3; b++)
        run(sizes[z], bitss[b], &hps[h], 5, h == 1 ? 0.37f : 1.0f, NULL);
  /* bf16 / fp16 gradients (widened in the kernels' loads), fp16 write-back */
  for (size_t b = 0; b < 2; b++) {
    run_dt(4229, bitss[b], &hps[0], 3, 1.0f, NULL, _MT_DT_BF16);
    run_dt(70001, bitss[b], &hps[1], 3, 0.37f, NULL, _MT_DT_F16);
    run_dt(4229, bitss[b], &hps[1], 3, 1.0f, NULL, _MT_DT_F16); /* NaNs, fp16 write-back */
  }
  via_optim(_MT_CODEC_8BIT);
  via_optim(_MT_CODEC_4BIT);
  printf("test_codec_simd: AVX2 and scalar codec paths bit-identical\n");
  return 0;
}
