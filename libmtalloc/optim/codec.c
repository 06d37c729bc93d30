/*
 * codec.c - 8-, 4- and 2-bit block-wise quantisation of Adam's moments.
 *
 * The concept (after Dettmers et al. 2022 and Li et al., "Memory efficient
 * optimizers with 4-bit states", NeurIPS 2023): a tensor is cut into blocks
 * of 128 elements; each block stores its absolute maximum as a float scale
 * and each element the index of the nearest value of a fixed map, in units
 * of that scale. Small blocks follow local magnitude (Li et al. found 2048-
 * element blocks too coarse at 4 bits; 128 is their choice), at a cost of
 * 4 bytes per 128 elements (0.25 bit per element).
 *
 * The maps, and why:
 * - First moment (signed), 8 and 2 bits: a dynamic-exponent map. After
 *   the sign bit, the count of leading zero bits e is a decade exponent,
 *   then one indicator bit, and the remaining F = bits-2-e bits a linear
 *   fraction: value = 10^-e * (0.1 + 0.9 * (f+1) / 2^F); the all-zero code
 *   is 0. m changes sign and spans decades inside a block, so it needs
 *   both a zero and a wide range; the top value is exactly 1, so a block's
 *   largest element survives (up to its sign) exactly.
 * - First moment, 4 bits: signed powers of two and zero, entry 8 + k =
 *   2^(k-7) and entry 7 - k its negative for k = 1..7 (2^-6 .. 1), entries
 *   7 and 8 zero, rounded to the nearest entry as the other maps are (so a
 *   magnitude under 2^-7 of the absmax is zero). Its encode is arithmetic
 *   like v's, from the float's bits plus the sign (m4_code), where the
 *   dynamic-exponent map (magnitudes 0.01, 0.055, 0.1, 0.325, 0.55, 0.775,
 *   1) took a four-level search against exact thresholds: the 4-bit
 *   step's kernel went from 1.14 to 0.98 ns a parameter (README, host
 *   AdamW). And it trains better: the convergence test's loss after 200
 *   steps fell from 1.2% to 0.8% of the initial loss (0.048 to 0.040 after
 *   100). The dynamic-exponent map's top decade is finer (steps of 0.225
 *   absmax, against 0.25 and 0.5 at the top here), but it holds everything
 *   under 0.0325 absmax at 0, 0.01 or 0.055, where powers of two keep
 *   1/64, 1/32 and 1/16 apart, and small-curvature elements sharing a
 *   block with large ones live there. Rounding in ratio, as v does, was
 *   tried: 1.4% (it lifts values, and zeroes everything under 2^-6.5).
 * - Second moment (unsigned), 8 and 2 bits: the same dynamic-exponent map
 *   without a sign bit, and with no zero code: the all-zero code is the
 *   next decade down (10^-(bits) ). A v quantised to zero makes the update
 *   m/(sqrt(v)+eps) explode (Li et al.'s zero-point problem); here the
 *   smallest v a non-zero block can hold is absmax * 10^-bits.
 * - Second moment, 4 bits: powers of two without zero, entry c =
 *   2^(c-15) (2^-15 .. 1, 4.5 decades), rounded in ratio (at the
 *   geometric midpoint). Its encode is arithmetic, not a search: the code
 *   is the exponent of x / absmax read from the float's bits (v4_code), a
 *   multiply and three integer steps per 8 values, where the dynamic-
 *   exponent map took a four-level search (about a fifth of the 4-bit
 *   step's vector work, README, host AdamW). The relative error is at most
 *   sqrt 2 - 1 at every magnitude down to absmax * 2^-15.5 (below, v is
 *   held at absmax * 2^-15, never 0); the dynamic-exponent map was finer
 *   in the top decade (steps of 0.1125 absmax) and coarser below 0.01
 *   (entries 0.001, 0.0055, 0.01). Li et al.'s own choice for v, a
 *   linear map without zero, was tried first: as fast, but with 128-
 *   element blocks (they pair it with rank-1 normalisation) it holds every
 *   v under absmax / 16 at absmax / 16, and the convergence test's loss
 *   (tests/optim/test_codec.c) rose from 0.94% to 5.7% of the initial
 *   loss; with powers of two it is 1.2%.
 *   A block that is all zero has scale 0 and decodes to zeros, which is
 *   exact, in every map.
 * What is lossy: every element except a block's absmax (and m's zeros)
 * moves to its nearest map value (v's can be lifted to the smallest float
 * where a denormal block's product underflows); the error is bounded by half
 * the widest gap of the map around it (4-bit v: nearest in ratio, within
 * sqrt 2 - 1 of the value; tests/optim/test_codec.c checks the bound per
 * map). Tensors under 4096 elements keep FP32 state (as
 * bitsandbytes does): their memory is negligible and they are often norms
 * and biases, sensitive to noise.
 *
 * Threading: pure functions over disjoint block ranges.
 */
#include <errno.h>
#include <float.h>
#include <stdbool.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"
#include "hostmem.h"

/* maps[bits_index][signed] with 2^bits ascending entries */
static float map8[2][256], map4[2][16], map2[2][4];
/* Encoding guesses: for the top 16 bits of a normalised value's float
 * encoding (sign, exponent, 7 mantissa bits), the nearest code of the
 * bucket's first value. encode starts there and walks to the true nearest
 * entry (a step or two at most), instead of a branchy binary search per
 * element. 64 KiB per map. */
static uint8_t lut8[2][65536], lut2[2][65536]; /* 4 bits: arithmetic, no guess */
static pthread_once_t maps_once = PTHREAD_ONCE_INIT;

static int cmp_float(const void *a, const void *b) {
  float x = *(const float *)a, y = *(const float *)b;
  return (x > y) - (x < y);
}

/* Builds the dynamic-exponent map of `bits` bits. Code layout before
 * sorting does not matter: entries are stored sorted and a code is the
 * entry's index, so encode is a search and decode a table look-up. */
static void build(float *out, int bits, int is_signed) {
  if (bits == 4 && is_signed) { /* entry 8 + k = 2^(k-7), 7 - k = -2^(k-7); 7, 8 zero */
    for (int k = 0; k < 8; k++) {
      out[8 + k] = k == 0 ? 0.0f : ldexpf(1.0f, k - 7);
      out[7 - k] = -out[8 + k];
    }
    out[7] = 0.0f; /* not -0: m's zeros decode to +0 */
    return;
  }
  if (bits == 4 && !is_signed) { /* powers of two, no zero: 2^(c-15) */
    for (int c = 0; c < 16; c++)
      out[c] = ldexpf(1.0f, c - 15);
    return;
  }
  int k = is_signed ? bits - 1 : bits; /* magnitude bits */
  int cnt = 0;
  float mags[256];
  int nm = 0;
  for (int e = 0; e < k; e++) {
    int F = k - 1 - e;
    for (int f = 0; f < (1 << F); f++)
      mags[nm++] = (float)(pow(10.0, -e) * (0.1 + 0.9 * (f + 1) / (double)(1 << F)));
  }
  /* the all-zero magnitude code */
  float zero_code = is_signed ? 0.0f : (float)pow(10.0, -k);
  if (is_signed) {
    for (int i = 0; i < nm; i++) {
      out[cnt++] = mags[i];
      out[cnt++] = -mags[i];
    }
    out[cnt++] = 0.0f;
    out[cnt++] = 0.0f; /* the sign bit with a zero magnitude: a spare code */
  } else {
    for (int i = 0; i < nm; i++)
      out[cnt++] = mags[i];
    out[cnt++] = zero_code;
  }
  qsort(out, (size_t)cnt, sizeof(float), cmp_float);
}

static unsigned nearest(const float *map, unsigned len, float x);

static void build_lut(uint8_t *lut, const float *map, unsigned len) {
  for (uint32_t u = 0; u < 65536; u++) {
    uint32_t bits = u << 16;
    float x;
    memcpy(&x, &bits, 4);
    lut[u] = x == x ? (uint8_t)nearest(map, len, x) : 0;
  }
}

/* Floats in value order as unsigned integers (NaNs aside), and back. */
static uint32_t fkey(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u & 0x80000000u ? ~u : u | 0x80000000u;
}
static float funkey(uint32_t k) {
  uint32_t u = k & 0x80000000u ? k & 0x7fffffffu : ~k;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* thr8p[s][c + 1]: the smallest float y that passes the walk's step-up
 * test at entry c of the 8-bit map, fl(y - map[c]) > fl(map[c + 1] - y).
 * The test is monotone in y (and +inf passes it), so a binary search over
 * the floats in value order finds the exact threshold, and for any y that
 * is not a NaN the test is y >= thr8p[s][c + 1] (-0 and +0 test alike). */
/* Sentinels: thr8p[s][0] = -inf (every non-NaN y passes "entry -1") and
 * thr8p[s][256] = NaN (no y passes entry 255, which has no successor). */
static float thr8p[2][257];

static void build_thresholds(float *thr, const float *map, unsigned len) {
  for (unsigned c = 0; c + 1 < len; c++) {
    uint32_t lo = fkey(-INFINITY), hi = fkey(INFINITY); /* P(hi) holds */
    while (lo < hi) {
      uint32_t mid = lo + (hi - lo) / 2;
      float y = funkey(mid);
      if (y - map[c] > map[c + 1] - y)
        hi = mid;
      else
        lo = mid + 1;
    }
    thr[c] = funkey(lo);
  }
}

/* The 8-bit encode from the map's structure instead of table look-ups
 * (code8 in the AVX2 path). Over the magnitudes the map is piecewise
 * linear: decade e (values in (10^-(e+1), 10^-e]) holds 2^F evenly spaced
 * entries whose spacing continues one step down to the top of the next
 * decade (or to the zero / zero code under the last one). So for a
 * magnitude u in decade e, t = u * q8_a[e] + q8_o[e] is u's real position
 * in the sorted map (entry i at i) plus 1/2, and floor(t) the nearest
 * entry, unless u lies near a midpoint (t near an integer), where the float
 * rounding of the entries and of the scalar walk's differences decides.
 * Those move t by under 1e-4 (float products of values under 2^8, map
 * entries and differences within 2^-23 of values at most 71 spacings
 * large), so where t is more than Q8_NEAR from an integer, floor(t) is the
 * scalar encode's code K; nearer, floor(t -/+ Q8_DELTA) is K or K - 1 and
 * one compare with the exact threshold (thr8p) settles it. The decade is
 * the count of boundaries q8_bound (the decade tops 10^-1, 10^-2, ..., as
 * map entries; -inf pads, which no value reaches) at or above u. For the
 * signed map u is |y| over the positive half (indices 128..255, whose
 * lowest entry is 0), and a y <= 0 takes the mirror image (entry 255 - i
 * is -entry i). The unsigned map's lowest decade runs from its zero code
 * (index 0) and takes y itself, negatives included: they clamp to code 0.
 * tests/optim/test_codec_simd.c checks every threshold's neighbourhood;
 * the same check over every float in [-1, 1] passed once (see there). */
#define Q8_NEAR 0x1p-10
#define Q8_DELTA 0.25
static float q8_bound[2][8] __attribute__((aligned(32)));
static float q8_a[2][8] __attribute__((aligned(32))), q8_o[2][8] __attribute__((aligned(32)));
static double q8_ad[2][8]; /* q8_a before rounding, for code8x's tables */

static void build_q8(int s) {
  const float *map = map8[s];
  int ndec = s ? 7 : 8, top = 255;
  for (int e = 0; e < 8; e++) {
    q8_bound[s][e] = -INFINITY;
    q8_a[s][e] = q8_o[s][e] = 0;
    q8_ad[s][e] = 0;
  }
  for (int e = 0; e < ndec; e++) {
    int steps = 1 << (ndec - 1 - e), lo = top - steps; /* map[lo]: the step below the decade */
    double a = steps / ((double)map[top] - (double)map[lo]);
    q8_a[s][e] = (float)a;
    q8_ad[s][e] = a;
    q8_o[s][e] = (float)(lo + 0.5 - (double)map[lo] * a);
    if (e > 0)
      q8_bound[s][e - 1] = map[top];
    top = lo;
  }
}

static void build_all(void) {
  for (int s = 0; s < 2; s++) {
    build(map8[s], 8, s);
    build(map4[s], 4, s);
    build(map2[s], 2, s);
    build_lut(lut8[s], map8[s], 256);
    build_lut(lut2[s], map2[s], 4);
    build_thresholds(thr8p[s] + 1, map8[s], 256);
    thr8p[s][0] = -INFINITY;
    thr8p[s][256] = NAN;
    build_q8(s);
  }
}

static const uint8_t *lut_of(int bits, int is_signed) {
  return bits == 8 ? lut8[is_signed] : bits == 2 ? lut2[is_signed] : NULL;
}

/* The nearest entry to x (ties: lower), starting from the LUT's guess. */
static inline unsigned nearest_fast(const float *map, const uint8_t *lut, unsigned len, float x) {
  uint32_t bits;
  memcpy(&bits, &x, 4);
  unsigned c = lut[bits >> 16];
  while (c + 1 < len && x - map[c] > map[c + 1] - x)
    c++;
  while (c > 0 && x - map[c - 1] <= map[c] - x)
    c--;
  return c;
}

/* v's 4-bit code (the power-of-two map, entry c = 2^(c-15)): the
 * exponent of t = x / absmax, rounded at the geometric midpoint: with u
 * the bits of |t|, k = (u - V4_BIAS) >> 23 (arithmetic) is the binade of
 * t moved up by one where t's significand is at least 1 + 0x3504F3 *
 * 2^-23 (sqrt 2 rounded down), less 112 (binade 2^-15 is code 0), and the
 * code is k clamped to [0, 15]. t is computed as x * r with r = fl(1 /
 * absmax) (v4_r) for an absmax in [2^-100, 2^100], where r is normal;
 * otherwise (0, tiny, huge, inf) as x / absmax. So t = 0 (and anything
 * under 2^-15.5) is code 0, never a zero value; a NaN t is code 15 (its
 * bits are above every binade), which the vector path gives too. The
 * block's absmax element has t within an ulp of 1, code 15, and decodes
 * to absmax exactly. This is the contract: the AVX2 path computes the
 * same float t and the same integer steps (test_codec_simd). */
#define V4_BIAS ((int32_t)((112u << 23) - (0x800000u - 0x3504F3u)))
static inline float v4_r(float amax) {
  return amax >= 0x1p-100f && amax <= 0x1p100f ? 1.0f / amax : 0.0f;
}
static inline unsigned v4_code(float x, float amax, float r) {
  float t = r > 0 ? x * r : x / amax;
  uint32_t u;
  memcpy(&u, &t, 4);
  int32_t k = ((int32_t)(u & 0x7fffffffu) - V4_BIAS) >> 23;
  return k < 0 ? 0 : k > 15 ? 15 : (unsigned)k;
}

/* m's 4-bit code (the signed power-of-two map, entry 8 + k = 2^(k-7),
 * entry 7 - k its negative): the nearest entry to t, with t = x * r for r
 * = v4_r(absmax) > 0, else x / absmax, or 0 for an absmax of 0. From the
 * bits a of |t|: k = (a - M4_BIAS) >> 23 (arithmetic) is t's binade,
 * moved up by one where the significand is at least 1.5 (the midpoint
 * between 2^j and 2^(j+1)), less 120 (2^0 is k = 7); the binade under
 * 2^-6 is all nearer 2^-6 than 0 from 2^-7 on (M4_LOW), so k is at least
 * 1 there; then k is clamped to [0, 7] (0: zero). A t below 0 takes
 * 7 - k: with k' = k, or -1 - k = k ^ -1 for t < 0, the code is 8 + k'.
 * So +-0 are code 8 (0), and any NaN t is +1 (its bits are above every
 * binade, and it is not below 0: a NaN's sign, which the operand order C
 * leaves to the compiler may decide, does not matter), which the vector
 * path gives too; the absmax element (t within an ulp of +-1) decodes
 * exactly. The contract,
 * as for v: the AVX2 path computes the same t and the same integer steps
 * (test_codec_simd). Ties round up in magnitude. */
#define M4_BIAS ((int32_t)((120u << 23) - 0x400000u))
#define M4_LOW ((int32_t)(120u << 23)) /* the bits of 2^-7 */
static inline unsigned m4_code(float x, float amax, float r) {
  float t = r > 0 ? x * r : amax > 0 ? x / amax : 0.0f;
  uint32_t u;
  memcpy(&u, &t, 4);
  int32_t a = (int32_t)(u & 0x7fffffffu), k = (a - M4_BIAS) >> 23, lo = a >= M4_LOW;
  k = k < lo ? lo : k > 7 ? 7 : k;
  return (unsigned)(8 + (t < 0 ? ~k : k));
}

const float *_mt_codec_map(int bits, int is_signed) {
  pthread_once(&maps_once, build_all);
  is_signed = !!is_signed;
  switch (bits) {
    case 8:
      return map8[is_signed];
    case 4:
      return map4[is_signed];
    case 2:
      return map2[is_signed];
    default:
      return NULL;
  }
}

int _mt_qtensor_alloc(_mt_qtensor_t *q, size_t n, int bits, int is_signed) {
  memset(q, 0, sizeof(*q));
  if (_mt_codec_map(bits, is_signed) == NULL || n == 0)
    return -EINVAL;
  q->n = n;
  q->bits = bits;
  q->is_signed = is_signed;
  q->codes = _mt_optim_mem_alloc(_mt_qtensor_code_bytes(q)); /* hostmem.c: zeroed */
  q->scales = _mt_optim_mem_alloc(_mt_qtensor_blocks(q) * sizeof(float));
  if (q->codes == NULL || q->scales == NULL) {
    _mt_qtensor_free(q);
    return -ENOMEM;
  }
  /* all-zero codes with zero scales decode to 0 in both maps */
  return 0;
}

void _mt_qtensor_free(_mt_qtensor_t *q) {
  _mt_optim_mem_free(q->codes);
  _mt_optim_mem_free(q->scales);
  q->codes = NULL;
  q->scales = NULL;
}

size_t _mt_qtensor_code_bytes(const _mt_qtensor_t *q) {
  /* whole blocks: a block is 128 * bits / 8 bytes, so blocks never share a byte */
  return _mt_qtensor_blocks(q) * _MT_CODEC_BLOCK * (size_t)q->bits / 8;
}

size_t _mt_qtensor_blocks(const _mt_qtensor_t *q) {
  return (q->n + _MT_CODEC_BLOCK - 1) / _MT_CODEC_BLOCK;
}

static inline unsigned get_code(const _mt_qtensor_t *q, size_t i) {
  switch (q->bits) {
    case 8:
      return q->codes[i];
    case 4:
      return (q->codes[i >> 1] >> ((i & 1) * 4)) & 0xf;
    default:
      return (q->codes[i >> 2] >> ((i & 3) * 2)) & 0x3;
  }
}

static inline void put_code(_mt_qtensor_t *q, size_t i, unsigned c) {
  switch (q->bits) {
    case 8:
      q->codes[i] = (uint8_t)c;
      break;
    case 4: {
      unsigned sh = (unsigned)(i & 1) * 4;
      q->codes[i >> 1] = (uint8_t)((q->codes[i >> 1] & ~(0xfu << sh)) | (c << sh));
      break;
    }
    default: {
      unsigned sh = (unsigned)(i & 3) * 2;
      q->codes[i >> 2] = (uint8_t)((q->codes[i >> 2] & ~(0x3u << sh)) | (c << sh));
      break;
    }
  }
}

/* Nearest entry of an ascending map of len entries to x (ties: lower). */
static unsigned nearest(const float *map, unsigned len, float x) {
  unsigned lo = 0, hi = len - 1;
  while (hi - lo > 1) {
    unsigned mid = (lo + hi) / 2;
    if (map[mid] <= x)
      lo = mid;
    else
      hi = mid;
  }
  return x - map[lo] <= map[hi] - x ? lo : hi;
}

/* One block [b, e) of q from x[0, e-b): scale = absmax. */
static void encode_block(_mt_qtensor_t *q, const float *map, unsigned len, const float *x,
                         size_t b, size_t e) {
  const uint8_t *lut = lut_of(q->bits, q->is_signed);
  float amax = 0;
  for (size_t i = 0; i < e - b; i++) {
    float a = fabsf(x[i]);
    amax = a > amax ? a : amax;
  }
  q->scales[b / _MT_CODEC_BLOCK] = amax;
  if (q->bits == 4) {
    const float r = v4_r(amax);
    for (size_t i = b; i < e; i++)
      put_code(q, i, q->is_signed ? m4_code(x[i - b], amax, r) : v4_code(x[i - b], amax, r));
    return;
  }
  /* divide, not multiply by a reciprocal: x == amax must land on 1.0 exactly */
  for (size_t i = b; i < e; i++)
    put_code(q, i, nearest_fast(map, lut, len, amax > 0 ? x[i - b] / amax : 0.0f));
}

static void decode_block(const _mt_qtensor_t *q, const float *map, float *x, size_t b, size_t e) {
  float s = q->scales[b / _MT_CODEC_BLOCK];
  for (size_t i = b; i < e; i++)
    x[i - b] = map[get_code(q, i)] * s;
  /* v's map has no zero, but in a block of denormals the product can still
   * underflow to 0: keep the promise, and hold it at the smallest float */
  if (!q->is_signed && s > 0)
    for (size_t i = 0; i < e - b; i++)
      x[i] = x[i] > 0 ? x[i] : 0x1p-149f;
}

void _mt_codec_encode(_mt_qtensor_t *q, const float *x, size_t begin, size_t end) {
  const float *map = _mt_codec_map(q->bits, q->is_signed);
  unsigned len = 1u << q->bits;
  for (size_t b = begin; b < end; b += _MT_CODEC_BLOCK) {
    size_t e = end - b < _MT_CODEC_BLOCK ? end : b + _MT_CODEC_BLOCK;
    encode_block(q, map, len, x + b, b, e);
  }
}

void _mt_codec_decode(const _mt_qtensor_t *q, float *x, size_t begin, size_t end) {
  const float *map = _mt_codec_map(q->bits, q->is_signed);
  for (size_t b = begin; b < end; b += _MT_CODEC_BLOCK) {
    size_t e = end - b < _MT_CODEC_BLOCK ? end : b + _MT_CODEC_BLOCK;
    decode_block(q, map, x + b, b, e);
  }
}

/* bf16/fp16 write-back of p[b, e), when the parameter has a device copy. */
static void write_out(const _mt_adam_args_t *a, size_t b, size_t e) {
  if (a->out != NULL) {
    uint16_t *o = a->out;
    for (size_t i = b; i < e; i++)
      o[i] = a->out_dtype == _MT_DT_BF16 ? _mt_f32_to_bf16(a->p[i]) : _mt_f32_to_f16(a->p[i]);
  }
}

void _mt_adam_kernel_q_scalar(const _mt_adam_scalars_t *s, const _mt_adam_args_t *a,
                              _mt_qtensor_t *m, _mt_qtensor_t *v, size_t begin, size_t end) {
  const float *mmap = _mt_codec_map(m->bits, 1), *vmap = _mt_codec_map(v->bits, 0);
  unsigned mlen = 1u << m->bits, vlen = 1u << v->bits;
  float mb[_MT_CODEC_BLOCK], vb[_MT_CODEC_BLOCK]; /* one block, in L1 */
  for (size_t b = begin; b < end; b += _MT_CODEC_BLOCK) {
    size_t e = end - b < _MT_CODEC_BLOCK ? end : b + _MT_CODEC_BLOCK;
    decode_block(m, mmap, mb, b, e);
    decode_block(v, vmap, vb, b, e);
    /* the block as its own tensor: adam.h's codec step, element by element */
    _mt_adam_args_t blk = _mt_adam_args_at(a, b);
    blk.m = mb;
    blk.v = vb;
    blk.vmax = NULL;
    blk.out = NULL;
    _mt_adam_kernel_codec_scalar(s, &blk, 0, e - b);
    encode_block(m, mmap, mlen, mb, b, e);
    encode_block(v, vmap, vlen, vb, b, e);
    write_out(a, b, e);
  }
}

#if defined(__x86_64__)
#include <immintrin.h>

/* The AVX2 codec path: the same block structure and the same arithmetic,
 * eight elements at a time. Bit-identical to the scalar path
 * (tests/optim/test_codec_simd.c): decode is a table look-up times the
 * scale (a gather at 8 bits, two permutes at 4), the Adam update is the
 * codec step's (adam.h; a block tail's runs scalar), and encode takes
 * the absmax (max is order-free on non-NaN values), divides (IEEE, like
 * the scalar), and finds the code the scalar walk would end at: at 4 bits
 * by m4_code's and v4_code's own arithmetic (m4_c, v4_k; no division for
 * an absmax in [2^-100, 2^100]), at 8 bits from the map's linear pieces
 * with one exact threshold near a midpoint (code8). Block tails (fewer
 * than 8 elements) go through the scalar code. 8- and 4-bit codes only;
 * 2-bit stays scalar. When both moments have the same width (the common
 * case), whole blocks take a faster route to the same bits: q_block_avx2
 * decodes and updates in registers, and at 8 bits the encode works in x's
 * scale instead of dividing, the linear pieces moved there (code8x).
 * The bf16/fp16 write-back is adam_kernels.c's vector one.
 * There is no AVX-512 codec path: under AVX-512 the AVX2 one runs. */
#define AVX2 __attribute__((target("avx2,f16c"))) /* f16c: fp16 gradients */

AVX2 static void decode_block_avx2(const _mt_qtensor_t *q, const float *map, float *x, size_t b,
                                   size_t e) {
  const float s = q->scales[b / _MT_CODEC_BLOCK];
  const __m256 vs = _mm256_set1_ps(s);
  const __m256i shifts = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28);
  size_t n = e - b, i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256i c;
    if (q->bits == 8) {
      c = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(q->codes + b + i)));
    } else {
      uint32_t w;
      memcpy(&w, q->codes + (b + i) / 2, 4);
      c = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32((int)w), shifts),
                           _mm256_set1_epi32(0xf));
    }
    __m256 mv;
    if (q->bits == 8) {
      mv = _mm256_i32gather_ps(map, c, 4);
    } else { /* 16 entries in two registers: permute each, pick by the code's bit 3 */
      __m256 lo = _mm256_permutevar8x32_ps(_mm256_loadu_ps(map), c);
      __m256 hi = _mm256_permutevar8x32_ps(_mm256_loadu_ps(map + 8), c);
      mv = _mm256_blendv_ps(lo, hi, _mm256_castsi256_ps(_mm256_slli_epi32(c, 28)));
    }
    _mm256_storeu_ps(x + i, _mm256_mul_ps(mv, vs));
  }
  for (; i < n; i++)
    x[i] = map[get_code(q, b + i)] * s;
  if (!q->is_signed && s > 0) {
    const __m256 tiny = _mm256_set1_ps(0x1p-149f), zero = _mm256_setzero_ps();
    for (i = 0; i + 8 <= n; i += 8) {
      __m256 y = _mm256_loadu_ps(x + i);
      _mm256_storeu_ps(x + i, _mm256_blendv_ps(tiny, y, _mm256_cmp_ps(y, zero, _CMP_GT_OQ)));
    }
    for (; i < n; i++)
      x[i] = x[i] > 0 ? x[i] : 0x1p-149f;
  }
}

/* The block's bf16/fp16 write-back, vectorised (adam_kernels.c). */
static inline void write_out_avx2(const _mt_adam_args_t *a, size_t b, size_t e) {
  if (a->out != NULL)
    _mt_round_out_avx2(a->p + b, (uint16_t *)a->out + b, a->out_dtype, e - b);
}

/* A NaN fails every walk test and keeps its LUT guess: patch those lanes. */
AVX2 static inline __m256i nan_guess(__m256i c, __m256 y, const uint8_t *lut) {
  __m256 nan = _mm256_cmp_ps(y, y, _CMP_UNORD_Q);
  if (_mm256_testz_ps(nan, nan))
    return c;
  uint32_t cs[8], ys[8];
  _mm256_storeu_si256((__m256i *)cs, c);
  _mm256_storeu_si256((__m256i *)ys, _mm256_castps_si256(y));
  for (int k = 0; k < 8; k++) {
    float yk;
    memcpy(&yk, &ys[k], 4);
    if (yk != yk)
      cs[k] = lut[ys[k] >> 16];
  }
  return _mm256_loadu_si256((const __m256i *)cs);
}

/* code8's rare path: lanes whose t lies within Q8_NEAR of an integer.
 * floor(t - Q8_DELTA) is then K or K - 1 (build_q8); for a y <= 0 of the
 * signed map the mirror of floor(t + Q8_DELTA) is. Then K = g + (y >=
 * the threshold of entry g), a gather from thr8p (index -1: -inf). */
AVX2 static __m256i code8_near(__m256 y, __m256 t, __m256 neg, int s) {
  const __m256 d = _mm256_set1_ps((float)Q8_DELTA);
  __m256i g = _mm256_cvtps_epi32(
      _mm256_floor_ps(_mm256_sub_ps(t, _mm256_blendv_ps(d, _mm256_sub_ps(_mm256_setzero_ps(), d), neg))));
  if (s)
    g = _mm256_blendv_epi8(g, _mm256_sub_epi32(_mm256_set1_epi32(255), g), _mm256_castps_si256(neg));
  g = _mm256_min_epi32(_mm256_max_epi32(g, _mm256_set1_epi32(-1)), _mm256_set1_epi32(255));
  const __m256 thr = _mm256_i32gather_ps(thr8p[s] + 1, g, 4);
  return _mm256_sub_epi32(g, _mm256_castps_si256(_mm256_cmp_ps(y, thr, _CMP_GE_OQ)));
}

/* The 8-bit code of 8 values y (= x / absmax) of map s, as the scalar
 * walk finds it, from the map's linear pieces (build_q8). A NaN's lane
 * is garbage (inside [0, 255]); the caller patches it. */
AVX2 static inline __m256i code8(__m256 y, int s) {
  const int nb = s ? 6 : 7; /* decade boundaries */
  const __m256 u = s ? _mm256_andnot_ps(_mm256_set1_ps(-0.0f), y) : y;
  __m256i d0 = _mm256_setzero_si256(), d1 = _mm256_setzero_si256();
  for (int k = 0; k < nb; k += 2) { /* two chains */
    d0 = _mm256_sub_epi32(d0, _mm256_castps_si256(
                                  _mm256_cmp_ps(u, _mm256_set1_ps(q8_bound[s][k]), _CMP_LE_OQ)));
    if (k + 1 < nb)
      d1 = _mm256_sub_epi32(d1, _mm256_castps_si256(_mm256_cmp_ps(
                                    u, _mm256_set1_ps(q8_bound[s][k + 1]), _CMP_LE_OQ)));
  }
  const __m256i dec = _mm256_add_epi32(d0, d1);
  const __m256 t = _mm256_add_ps(
      _mm256_mul_ps(u, _mm256_permutevar8x32_ps(_mm256_load_ps(q8_a[s]), dec)),
      _mm256_permutevar8x32_ps(_mm256_load_ps(q8_o[s]), dec));
  const __m256 ft = _mm256_floor_ps(t);
  /* near an integer: |t - floor(t) - 1/2| > 1/2 - Q8_NEAR */
  const __m256 off = _mm256_andnot_ps(_mm256_set1_ps(-0.0f),
                                      _mm256_sub_ps(_mm256_sub_ps(t, ft), _mm256_set1_ps(0.5f)));
  const __m256 near = _mm256_cmp_ps(off, _mm256_set1_ps((float)(0.5 - Q8_NEAR)), _CMP_GT_OQ);
  __m256 neg = _mm256_setzero_ps();
  __m256i c = _mm256_cvtps_epi32(ft);
  if (s) {
    neg = _mm256_cmp_ps(y, _mm256_setzero_ps(), _CMP_NGT_UQ); /* y <= 0, or NaN */
    c = _mm256_blendv_epi8(c, _mm256_sub_epi32(_mm256_set1_epi32(255), c), _mm256_castps_si256(neg));
  }
  if (!_mm256_testz_ps(near, near))
    return code8_near(y, t, neg, s);
  return _mm256_min_epi32(_mm256_max_epi32(c, _mm256_setzero_si256()), _mm256_set1_epi32(255));
}

/* v4_code's k, before the clamp, for 8 lanes of x: t = x * r where
 * r = v4_r(absmax) > 0, else x / absmax; then four integer steps. */
AVX2 static inline __m256i v4_k(__m256 x, float r, __m256 va) {
  const __m256 t = r > 0 ? _mm256_mul_ps(x, _mm256_set1_ps(r)) : _mm256_div_ps(x, va);
  const __m256i u = _mm256_and_si256(_mm256_castps_si256(t), _mm256_set1_epi32(0x7fffffff));
  return _mm256_srai_epi32(_mm256_sub_epi32(u, _mm256_set1_epi32(V4_BIAS)), 23);
}

/* m4_code's code for 8 lanes of t (m4_t), minus 8 (in [-8, 7]; pack4
 * adds it back): its integer steps, the clamp's floor from the compare
 * with 2^-7 (0 - (a > 2^-7's bits - 1) is 1 or 0), and t < 0 (ordered: a
 * NaN is not) as the mask whose xor is ~k. */
AVX2 static inline __m256i m4_c(__m256 t) {
  const __m256i u = _mm256_castps_si256(t);
  const __m256i a = _mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff));
  __m256i k = _mm256_srai_epi32(_mm256_sub_epi32(a, _mm256_set1_epi32(M4_BIAS)), 23);
  const __m256i lo = _mm256_cmpgt_epi32(a, _mm256_set1_epi32(M4_LOW - 1));
  k = _mm256_min_epi32(_mm256_max_epi32(k, _mm256_sub_epi32(_mm256_setzero_si256(), lo)),
                       _mm256_set1_epi32(7));
  return _mm256_xor_si256(
      k, _mm256_castps_si256(_mm256_cmp_ps(t, _mm256_setzero_ps(), _CMP_LT_OQ)));
}

/* m4_code's t for 8 lanes of x: x * r, x / absmax, or 0 (absmax 0). */
AVX2 static inline __m256 m4_t(__m256 x, float r, __m256 va, float amax) {
  if (r > 0)
    return _mm256_mul_ps(x, _mm256_set1_ps(r));
  return amax > 0 ? _mm256_div_ps(x, va) : _mm256_setzero_ps();
}

/* Packs 16 vectors of codes into block b of q: v4_k's unclamped k
 * (within [-112, 144]; sgn 0) or m4_c's codes less 8 (sgn 1). Two packs
 * narrow 8 vectors to bytes, a permute restores their order (packs
 * interleave 128-bit halves, so after both, dword j holds elements of
 * vector order[j]), and a multiply-add joins each pair of bytes into one
 * (lo | hi << 4). v's packs saturate k to bytes in [0, 144] and a byte min
 * takes them to [0, 15], as v4_code clamps; m's are signed and keep
 * [-8, 7], and a byte add of 8 makes them codes. */
AVX2 static inline void pack4(_mt_qtensor_t *q, size_t b, const __m256i *k, const int sgn) {
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  const __m256i pairs = _mm256_set1_epi16(0x1001); /* byte 0 x 1 + byte 1 x 16 */
  const __m256i top = _mm256_set1_epi8(15), eight = _mm256_set1_epi8(8);
  for (int i = 0; i < 16; i += 8) {
    __m256i b0, b1;
    if (sgn) {
      __m256i w01 = _mm256_packs_epi32(k[i], k[i + 1]), w23 = _mm256_packs_epi32(k[i + 2], k[i + 3]);
      __m256i w45 = _mm256_packs_epi32(k[i + 4], k[i + 5]), w67 = _mm256_packs_epi32(k[i + 6], k[i + 7]);
      b0 = _mm256_add_epi8(_mm256_permutevar8x32_epi32(_mm256_packs_epi16(w01, w23), order), eight);
      b1 = _mm256_add_epi8(_mm256_permutevar8x32_epi32(_mm256_packs_epi16(w45, w67), order), eight);
    } else {
      __m256i w01 = _mm256_packus_epi32(k[i], k[i + 1]), w23 = _mm256_packus_epi32(k[i + 2], k[i + 3]);
      __m256i w45 = _mm256_packus_epi32(k[i + 4], k[i + 5]), w67 = _mm256_packus_epi32(k[i + 6], k[i + 7]);
      b0 = _mm256_min_epu8(_mm256_permutevar8x32_epi32(_mm256_packus_epi16(w01, w23), order), top);
      b1 = _mm256_min_epu8(_mm256_permutevar8x32_epi32(_mm256_packus_epi16(w45, w67), order), top);
    }
    __m256i n0 = _mm256_maddubs_epi16(b0, pairs), n1 = _mm256_maddubs_epi16(b1, pairs);
    __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi16(n0, n1), 0xd8);
    _mm256_storeu_si256((__m256i *)(q->codes + (b + 8 * (size_t)i) / 2), packed);
  }
}

/* A whole block of q's 4-bit map (m's or v's), absmax amax (any: 0, tiny
 * and huge take the division form): m4_code's or v4_code's arithmetic, a
 * multiply and a few integer steps per vector, no search and no NaN patch
 * (a NaN's code falls out of the clamp). */
AVX2 static void encode4_scaled(_mt_qtensor_t *q, const float *x, size_t b, float amax) {
  q->scales[b / _MT_CODEC_BLOCK] = amax;
  const float r = v4_r(amax);
  const __m256 va = _mm256_set1_ps(amax);
  __m256i k[16];
  for (int i = 0; i < 16; i++) {
    const __m256 xv = _mm256_loadu_ps(x + 8 * i);
    k[i] = q->is_signed ? m4_c(m4_t(xv, r, va, amax)) : v4_k(xv, r, va);
  }
  pack4(q, b, k, q->is_signed);
}

AVX2 static void encode_block_avx2(_mt_qtensor_t *q, const float *map, unsigned len,
                                   const uint8_t *lut, const float *x, size_t b, size_t e) {
  size_t n = e - b, i = 0;
  __m256 vmax = _mm256_setzero_ps();
  const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  for (; i + 8 <= n; i += 8) /* max_ps(a, m) is a > m ? a : m, the scalar's step */
    vmax = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(x + i), absmask), vmax);
  float lanes[8], amax = 0;
  _mm256_storeu_ps(lanes, vmax);
  for (int k = 0; k < 8; k++)
    amax = lanes[k] > amax ? lanes[k] : amax;
  for (; i < n; i++) {
    float a = fabsf(x[i]);
    amax = a > amax ? a : amax;
  }
  q->scales[b / _MT_CODEC_BLOCK] = amax;
  const __m256 va = _mm256_set1_ps(amax);
  uint32_t cb[_MT_CODEC_BLOCK];
  const bool q4 = len == 16; /* arithmetic codes: v4_code, m4_code */
  const float r = v4_r(amax);
  for (i = 0; q4 && i + 8 <= n; i += 8) {
    __m256i k;
    if (q->is_signed) {
      k = _mm256_add_epi32(m4_c(m4_t(_mm256_loadu_ps(x + i), r, va, amax)), _mm256_set1_epi32(8));
    } else {
      k = v4_k(_mm256_loadu_ps(x + i), r, va);
      k = _mm256_min_epi32(_mm256_max_epi32(k, _mm256_setzero_si256()), _mm256_set1_epi32(15));
    }
    _mm256_storeu_si256((__m256i *)(cb + i), k);
  }
  for (; !q4 && i + 8 <= n; i += 8) {
    __m256 y = amax > 0 ? _mm256_div_ps(_mm256_loadu_ps(x + i), va) : _mm256_setzero_ps();
    __m256i c = code8(y, q->is_signed); /* 8 bits */
    c = nan_guess(c, y, lut);
    _mm256_storeu_si256((__m256i *)(cb + i), c);
  }
  size_t nv = i; /* cb[0, nv) from vectors, packed below with vectors */
  for (; i < n; i++)
    cb[i] = !q4 ? nearest_fast(map, lut, len, amax > 0 ? x[i] / amax : 0.0f)
            : q->is_signed ? m4_code(x[i], amax, r) : v4_code(x[i], amax, r);
  if (q->bits == 8) {
    /* bytes 0, 4, 8, 12 of each 128-bit half: the low byte of each code */
    const __m256i pick = _mm256_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
                                          -1, -1, 0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1,
                                          -1, -1, -1, -1);
    for (i = 0; i < nv; i += 8) {
      __m256i c = _mm256_shuffle_epi8(_mm256_loadu_si256((const __m256i *)(cb + i)), pick);
      uint32_t lo = (uint32_t)_mm256_extract_epi32(c, 0), hi = (uint32_t)_mm256_extract_epi32(c, 4);
      memcpy(q->codes + b + i, &lo, 4);
      memcpy(q->codes + b + i + 4, &hi, 4);
    }
    for (; i < n; i++)
      q->codes[b + i] = (uint8_t)cb[i];
  } else {
    /* each 64-bit lane holds codes 2j, 2j+1: lane | lane >> 28 puts the
     * pair's byte in the lane's low byte; bytes 0 and 8 of each half */
    const __m256i pick = _mm256_setr_epi8(0, 8, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
                                          -1, -1, 0, 8, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
                                          -1, -1, -1, -1);
    for (i = 0; i < nv; i += 8) {
      __m256i c = _mm256_loadu_si256((const __m256i *)(cb + i));
      c = _mm256_shuffle_epi8(_mm256_or_si256(c, _mm256_srli_epi64(c, 28)), pick);
      uint32_t w = (uint32_t)_mm256_extract_epi16(c, 0) | (uint32_t)_mm256_extract_epi16(c, 8) << 16;
      memcpy(q->codes + (b + i) / 2, &w, 4);
    }
    for (; i + 2 <= n; i += 2)
      q->codes[(b + i) / 2] = (uint8_t)(cb[i] | cb[i + 1] << 4);
    if (i < n)
      put_code(q, b + i, cb[i]);
  }
}

/* The absmax of a whole block, as the scalar encode takes it (max is
 * order-free on non-NaN values, and max_ps drops a NaN operand first). */
AVX2 static inline float hmax8(__m256 v) {
  __m128 h = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  h = _mm_max_ps(h, _mm_movehl_ps(h, h));
  h = _mm_max_ss(h, _mm_shuffle_ps(h, h, 1));
  return _mm_cvtss_f32(h);
}

/* Both moments of a block at once, both absmaxes in [2^-100, 2^100]
 * (v4_r > 0): m's and v's codes in one loop, so the loop's own cost is
 * paid once. */
AVX2 static void encode4_pair(_mt_qtensor_t *m, _mt_qtensor_t *v, const float *mx,
                              const float *vx, size_t b, float am, float av) {
  m->scales[b / _MT_CODEC_BLOCK] = am;
  v->scales[b / _MT_CODEC_BLOCK] = av;
  const __m256 mr = _mm256_set1_ps(v4_r(am)), vr = _mm256_set1_ps(v4_r(av));
  __m256i cm[16], kv[16];
  for (int k = 0; k < 16; k++) {
    cm[k] = m4_c(_mm256_mul_ps(_mm256_loadu_ps(mx + 8 * k), mr));
    /* v4_k with its r > 0 */
    const __m256 t = _mm256_mul_ps(_mm256_loadu_ps(vx + 8 * k), vr);
    const __m256i u = _mm256_and_si256(_mm256_castps_si256(t), _mm256_set1_epi32(0x7fffffff));
    kv[k] = _mm256_srai_epi32(_mm256_sub_epi32(u, _mm256_set1_epi32(V4_BIAS)), 23);
  }
  pack4(m, b, cm, 1);
  pack4(v, b, kv, 0);
}

/* A whole 4-bit block (128 elements) of x into q, as encode_block_avx2
 * codes it, without its code buffer. */
AVX2 static void encode4_block_avx2(_mt_qtensor_t *q, const float *x, size_t b) {
  __m256 vmax = _mm256_setzero_ps();
  const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  for (int i = 0; i < _MT_CODEC_BLOCK; i += 8)
    vmax = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(x + i), absmask), vmax);
  encode4_scaled(q, x, b, hmax8(vmax));
}

/* code8 moved to x's scale: for a block
 * with absmax a, y = fl(x / a) is within 2^-23 of x / a, which moves t by
 * under 1e-4, so t can come from x itself with the decade boundaries
 * times a and the slopes over a (q8x_tables), no division. Lanes near a
 * midpoint (as in code8), NaN lanes, and, for the signed map, lanes where
 * y's sign matters but x may not tell it (0 < x < a * 2^-100, where
 * x / a may round to +0, whose code is that of y <= 0) are flagged in
 * *redo for the caller to encode from y. For a in [2^-100, 2^100], where
 * the moved tables are finite and normal. */
typedef struct {
  __m256 bound[7], a, o, tiny;
} q8x_t;

AVX2 static inline void q8x_tables(int s, float amax, q8x_t *t) {
  float ax[8] __attribute__((aligned(32)));
  const double r = 1.0 / amax;
  for (int e = 0; e < 8; e++)
    ax[e] = (float)(q8_ad[s][e] * r);
  for (int k = 0; k < 7; k++)
    t->bound[k] = _mm256_set1_ps(q8_bound[s][k] * amax); /* -inf pads stay -inf */
  t->a = _mm256_load_ps(ax);
  t->o = _mm256_load_ps(q8_o[s]);
  t->tiny = _mm256_set1_ps(amax * 0x1p-100f);
}

AVX2 static inline __m256i code8x(__m256 x, int s, const q8x_t *tb, __m256 *redo) {
  const int nb = s ? 6 : 7;
  const __m256 u = s ? _mm256_andnot_ps(_mm256_set1_ps(-0.0f), x) : x;
  __m256i d0 = _mm256_setzero_si256(), d1 = _mm256_setzero_si256();
  for (int k = 0; k < nb; k += 2) {
    d0 = _mm256_sub_epi32(d0, _mm256_castps_si256(_mm256_cmp_ps(u, tb->bound[k], _CMP_LE_OQ)));
    if (k + 1 < nb)
      d1 = _mm256_sub_epi32(d1,
                            _mm256_castps_si256(_mm256_cmp_ps(u, tb->bound[k + 1], _CMP_LE_OQ)));
  }
  const __m256i dec = _mm256_add_epi32(d0, d1);
  const __m256 t = _mm256_add_ps(_mm256_mul_ps(u, _mm256_permutevar8x32_ps(tb->a, dec)),
                                 _mm256_permutevar8x32_ps(tb->o, dec));
  const __m256 ft = _mm256_floor_ps(t);
  const __m256 off = _mm256_andnot_ps(_mm256_set1_ps(-0.0f),
                                      _mm256_sub_ps(_mm256_sub_ps(t, ft), _mm256_set1_ps(0.5f)));
  /* unordered: a NaN x (or t) is redone too */
  __m256 r = _mm256_cmp_ps(off, _mm256_set1_ps((float)(0.5 - Q8_NEAR)), _CMP_NLE_UQ);
  __m256i c = _mm256_cvtps_epi32(ft);
  if (s) {
    const __m256 neg = _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LE_OQ);
    c = _mm256_blendv_epi8(c, _mm256_sub_epi32(_mm256_set1_epi32(255), c), _mm256_castps_si256(neg));
    r = _mm256_or_ps(r, _mm256_andnot_ps(neg, _mm256_cmp_ps(u, tb->tiny, _CMP_LT_OQ)));
  }
  *redo = r;
  return _mm256_min_epi32(_mm256_max_epi32(c, _mm256_setzero_si256()), _mm256_set1_epi32(255));
}

/* 8 codes of x into map s: code8x where the block's tables apply (tb not
 * NULL) and no lane needs redoing, else y = x / amax and code8. */
AVX2 static inline __m256i code8_of(__m256 x, int s, const q8x_t *tb, __m256 va, float amax) {
  if (tb != NULL) {
    __m256 redo;
    __m256i c = code8x(x, s, tb, &redo);
    if (_mm256_testz_ps(redo, redo))
      return c;
  }
  const __m256 y = amax > 0 ? _mm256_div_ps(x, va) : _mm256_setzero_ps();
  return nan_guess(code8(y, s), y, lut8[s]);
}

/* Both moments 8-bit, a whole block, once the update has left them in mx
 * and vx with absmaxes am and av: y = x / absmax (IEEE, as the scalar
 * encode divides), code8, NaN lanes patched, and 32 codes at a time
 * narrowed to bytes by two packs and a permute (see pack4). */
AVX2 static void encode8_pair(_mt_qtensor_t *m, _mt_qtensor_t *v, const float *mx,
                              const float *vx, size_t b, float am, float av) {
  m->scales[b / _MT_CODEC_BLOCK] = am;
  v->scales[b / _MT_CODEC_BLOCK] = av;
  const __m256 vam = _mm256_set1_ps(am), vav = _mm256_set1_ps(av);
  q8x_t tm, tv;
  const q8x_t *ptm = NULL, *ptv = NULL;
  if (am >= 0x1p-100f && am <= 0x1p100f) {
    q8x_tables(1, am, &tm);
    ptm = &tm;
  }
  if (av >= 0x1p-100f && av <= 0x1p100f) {
    q8x_tables(0, av, &tv);
    ptv = &tv;
  }
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  for (int i = 0; i < _MT_CODEC_BLOCK; i += 32) {
    __m256i cm[4], cv[4];
    for (int k = 0; k < 4; k++) {
      cm[k] = code8_of(_mm256_load_ps(mx + i + 8 * k), 1, ptm, vam, am);
      cv[k] = code8_of(_mm256_load_ps(vx + i + 8 * k), 0, ptv, vav, av);
    }
    __m256i pm = _mm256_packus_epi16(_mm256_packus_epi32(cm[0], cm[1]), _mm256_packus_epi32(cm[2], cm[3]));
    __m256i pv = _mm256_packus_epi16(_mm256_packus_epi32(cv[0], cv[1]), _mm256_packus_epi32(cv[2], cv[3]));
    _mm256_storeu_si256((__m256i *)(m->codes + b + i), _mm256_permutevar8x32_epi32(pm, order));
    _mm256_storeu_si256((__m256i *)(v->codes + b + i), _mm256_permutevar8x32_epi32(pv, order));
  }
}

/* A whole 8-bit block (128 elements) of x into q, as encode_block_avx2
 * codes it: encode8_pair's path for one tensor (_mt_codec_encode_avx2). */
AVX2 static void encode8_block(_mt_qtensor_t *q, const float *x, size_t b) {
  const int s = q->is_signed;
  __m256 vmax = _mm256_setzero_ps();
  const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  for (int i = 0; i < _MT_CODEC_BLOCK; i += 8)
    vmax = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(x + i), absmask), vmax);
  const float amax = hmax8(vmax);
  q->scales[b / _MT_CODEC_BLOCK] = amax;
  const __m256 va = _mm256_set1_ps(amax);
  q8x_t t;
  const q8x_t *pt = NULL;
  if (amax >= 0x1p-100f && amax <= 0x1p100f) {
    q8x_tables(s, amax, &t);
    pt = &t;
  }
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  for (int i = 0; i < _MT_CODEC_BLOCK; i += 32) {
    __m256i c[4];
    for (int k = 0; k < 4; k++)
      c[k] = code8_of(_mm256_loadu_ps(x + i + 8 * k), s, pt, va, amax);
    __m256i p = _mm256_packus_epi16(_mm256_packus_epi32(c[0], c[1]), _mm256_packus_epi32(c[2], c[3]));
    _mm256_storeu_si256((__m256i *)(q->codes + b + i), _mm256_permutevar8x32_epi32(p, order));
  }
}

/* Both moments 4-bit, or both 8-bit, a whole block: decode, update and
 * absmax in one pass in registers (the moments go to L1 once, for the
 * encode, which needs the block's absmax before its first code), then
 * encode4_pair (or encode4_scaled for each) or encode8_pair. The update is
 * _mt_adam_kernel_codec_scalar's (adam_kernels.c) operation for operation,
 * without amsgrad (refused with a codec); decode is decode_block_avx2's. Same bits as the
 * scalar codec path (tests/optim/test_codec_simd.c). bits is a constant
 * in each caller (q4_block_avx2, q8_block_avx2); so are f (the step's
 * flags), gdt (the gradient's dtype) and vpow (v's scale is in [2^-100,
 * FLT_MAX], where v decodes by its exponent and needs no floor) in the
 * common case q4_block_avx2 singles out, so that loop has no tests of
 * them per vector (they took a tenth of its instructions). */
__attribute__((always_inline)) AVX2 static inline void
q_block_avx2(const _mt_adam_scalars_t *s, const _mt_adam_args_t *a, _mt_qtensor_t *m,
             _mt_qtensor_t *v, size_t b, const int bits,
             const unsigned f, const int gdt, const bool vpow) {
  float mb[_MT_CODEC_BLOCK] __attribute__((aligned(32)));
  float vb[_MT_CODEC_BLOCK] __attribute__((aligned(32)));
  const __m256 clip = _mm256_set1_ps(s->clip), decay = _mm256_set1_ps(s->decay),
               l2 = _mm256_set1_ps(s->l2), w1 = _mm256_set1_ps(s->w1),
               omw1 = _mm256_set1_ps(s->one_m_w1), b2 = _mm256_set1_ps(s->beta2),
               omb2 = _mm256_set1_ps(s->one_m_beta2), rbc2 = _mm256_set1_ps(s->rbc2),
               eps = _mm256_set1_ps(s->eps), nss = _mm256_set1_ps(s->neg_step_size);
  const float msc = m->scales[b / _MT_CODEC_BLOCK], vsc = v->scales[b / _MT_CODEC_BLOCK];
  const __m256 ms = _mm256_set1_ps(msc), vs = _mm256_set1_ps(vsc);
  /* the 4-bit maps times the scales, once per block: map[c] * s is the
   * same product whichever side of the look-up it is taken */
  const __m256 mlo = _mm256_mul_ps(_mm256_loadu_ps(map4[1]), ms),
               mhi = _mm256_mul_ps(_mm256_loadu_ps(map4[1] + 8), ms);
  const __m256 vlo = _mm256_mul_ps(_mm256_loadu_ps(map4[0]), vs),
               vhi = _mm256_mul_ps(_mm256_loadu_ps(map4[0] + 8), vs);
  /* v's floor (decode_block) applies in a block with a positive scale, but
   * can change something only where map * scale underflows to 0: the
   * smallest entry (1e-4; 1e-8 at 8 bits) times a scale of 2^-100 or
   * more cannot */
  const bool vfloor_on = !vpow && vsc > 0 && vsc < 0x1p-100f;
  /* v's 4-bit entries are powers of two: for a scale in [2^-100, FLT_MAX]
   * map[c] * scale is exact, the scale with c - 15 added to its exponent
   * (normal, >= 2^-115), so an add replaces the permutes */
  const bool vexp = bits == 4 && (vpow || (vsc >= 0x1p-100f && vsc <= FLT_MAX));
  uint32_t vsu;
  memcpy(&vsu, &vsc, 4);
  const __m256i vsb = _mm256_set1_epi32((int)(vsu - (15u << 23)));
  const __m256 vfloor = vsc > 0 ? _mm256_castsi256_ps(_mm256_set1_epi32(-1)) : _mm256_setzero_ps();
  const __m256 tiny = _mm256_set1_ps(0x1p-149f), zero = _mm256_setzero_ps();
  const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const __m256i shifts = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28);
  const uint8_t *mc = m->codes + b * (size_t)bits / 8, *vc = v->codes + b * (size_t)bits / 8;
  float *pp = a->p + b;
  __m256 mmax = zero, vmax = zero;
  for (int i = 0; i < _MT_CODEC_BLOCK; i += 8) {
    __m256 mo, vo;
    if (bits == 8) {
      __m256i cm = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(mc + i)));
      __m256i cv = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(vc + i)));
      mo = _mm256_mul_ps(_mm256_i32gather_ps(map8[1], cm, 4), ms);
      vo = _mm256_mul_ps(_mm256_i32gather_ps(map8[0], cv, 4), vs);
    } else {
      uint32_t wm, wv;
      memcpy(&wm, mc + i / 2, 4);
      memcpy(&wv, vc + i / 2, 4);
      /* the codes in each lane's low nibble, higher bits left: the
       * permutes read bits 0-2 only, and the shift by 28 keeps bit 3 */
      __m256i cm = _mm256_srlv_epi32(_mm256_set1_epi32((int)wm), shifts);
      __m256i cv = _mm256_srlv_epi32(_mm256_set1_epi32((int)wv), shifts);
      mo = _mm256_blendv_ps(_mm256_permutevar8x32_ps(mlo, cm), _mm256_permutevar8x32_ps(mhi, cm),
                            _mm256_castsi256_ps(_mm256_slli_epi32(cm, 28)));
      if (vexp) /* 2^(c-15) * scale: c - 15 added to the scale's exponent */
        vo = _mm256_castsi256_ps(_mm256_add_epi32(
            vsb, _mm256_slli_epi32(_mm256_and_si256(cv, _mm256_set1_epi32(0xf)), 23)));
      else
        vo = _mm256_blendv_ps(_mm256_permutevar8x32_ps(vlo, cv), _mm256_permutevar8x32_ps(vhi, cv),
                              _mm256_castsi256_ps(_mm256_slli_epi32(cv, 28)));
    }
    if (vfloor_on)
      vo = _mm256_blendv_ps(vo, tiny, _mm256_and_ps(vfloor, _mm256_cmp_ps(vo, zero, _CMP_NGT_UQ)));
    __m256 g;
    if (gdt == _MT_DT_BF16)
      g = _mm256_castsi256_ps(_mm256_slli_epi32(
          _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(a->g16 + b + i))), 16));
    else if (gdt == _MT_DT_F16)
      g = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(a->g16 + b + i)));
    else
      g = _mm256_loadu_ps(a->g + b + i);
    if (f & _MT_ADAM_CLIP)
      g = _mm256_mul_ps(g, clip);
    if (f & _MT_ADAM_MAXIMIZE)
      g = _mm256_xor_ps(g, sign);
    __m256 p = _mm256_loadu_ps(pp + i);
    if (f & _MT_ADAM_DECAY)
      p = _mm256_mul_ps(p, decay);
    if (f & _MT_ADAM_L2)
      g = _mm256_add_ps(g, _mm256_mul_ps(l2, p));
    __m256 mn;
    if (f & _MT_ADAM_LERP_BIG)
      mn = _mm256_sub_ps(g, _mm256_mul_ps(_mm256_sub_ps(g, mo), omw1));
    else
      mn = _mm256_add_ps(mo, _mm256_mul_ps(w1, _mm256_sub_ps(g, mo)));
    __m256 vn = _mm256_mul_ps(vo, b2);
    vn = _mm256_add_ps(vn, _mm256_mul_ps(_mm256_mul_ps(omb2, g), g));
    __m256 d = _mm256_add_ps(_mm256_mul_ps(_mm256_sqrt_ps(vn), rbc2), eps);
    p = _mm256_add_ps(p, _mm256_div_ps(_mm256_mul_ps(nss, mn), d));
    _mm256_storeu_ps(pp + i, p);
    _mm256_store_ps(mb + i, mn);
    _mm256_store_ps(vb + i, vn);
    mmax = _mm256_max_ps(_mm256_and_ps(mn, absmask), mmax); /* a NaN's |.| is skipped */
    vmax = _mm256_max_ps(_mm256_and_ps(vn, absmask), vmax);
  }
  const float am = hmax8(mmax), av = hmax8(vmax);
  if (bits == 8) {
    encode8_pair(m, v, mb, vb, b, am, av);
    return;
  }
  if (!(v4_r(am) > 0) || !(v4_r(av) > 0)) { /* rare: one at a time */
    encode4_scaled(m, mb, b, am);
    encode4_scaled(v, vb, b, av);
    return;
  }
  encode4_pair(m, v, mb, vb, b, am, av);
}

/* Asks for block b's cache lines (adam.h, _MT_ADAM_PREFETCH): its weights
 * and gradients, a line each 16 elements, and both moments' codes (64 B
 * or 128 B each); the scales' line serves sixteen blocks and is left to
 * the hardware. Always inlined: GCC 12 finds a function that only
 * prefetches free of side effects and deletes the calls to it. */
__attribute__((always_inline)) static inline void
prefetch_block(const _mt_adam_args_t *a, const _mt_qtensor_t *m, const _mt_qtensor_t *v, size_t b) {
  for (int k = 0; k < _MT_CODEC_BLOCK; k += 16)
    _mt_adam_prefetch_pg(a, b + k);
  for (size_t k = 0; k < _MT_CODEC_BLOCK * (size_t)m->bits / 8; k += 64) {
    __builtin_prefetch(m->codes + b * (size_t)m->bits / 8 + k);
    __builtin_prefetch(v->codes + b * (size_t)v->bits / 8 + k);
  }
}

AVX2 static void q4_block_avx2(const _mt_adam_scalars_t *s, const _mt_adam_args_t *a,
                               _mt_qtensor_t *m, _mt_qtensor_t *v, size_t b) {
  const float vsc = v->scales[b / _MT_CODEC_BLOCK];
  if (s->flags == _MT_ADAM_DECAY && a->g_dtype == _MT_DT_F32 && vsc >= 0x1p-100f && vsc <= FLT_MAX)
    q_block_avx2(s, a, m, v, b, 4, _MT_ADAM_DECAY, _MT_DT_F32, true);
  else
    q_block_avx2(s, a, m, v, b, 4, s->flags, a->g_dtype, false);
}

AVX2 static void q8_block_avx2(const _mt_adam_scalars_t *s, const _mt_adam_args_t *a,
                               _mt_qtensor_t *m, _mt_qtensor_t *v, size_t b) {
  q_block_avx2(s, a, m, v, b, 8, s->flags, a->g_dtype, false);
}

AVX2 void _mt_codec_encode_avx2(_mt_qtensor_t *q, const float *x, size_t begin, size_t end) {
  const float *map = _mt_codec_map(q->bits, q->is_signed);
  if (q->bits == 2) {
    _mt_codec_encode(q, x, begin, end);
    return;
  }
  const int sg = q->is_signed;
  const uint8_t *lut = lut_of(q->bits, sg);
  for (size_t b = begin; b < end; b += _MT_CODEC_BLOCK) {
    size_t e = end - b < _MT_CODEC_BLOCK ? end : b + _MT_CODEC_BLOCK;
    if (q->bits == 4 && e - b == _MT_CODEC_BLOCK)
      encode4_block_avx2(q, x + b, b);
    else if (q->bits == 8 && e - b == _MT_CODEC_BLOCK)
      encode8_block(q, x + b, b);
    else
      encode_block_avx2(q, map, 1u << q->bits, lut, x + b, b, e);
  }
}

AVX2 void _mt_adam_kernel_q_avx2(const _mt_adam_scalars_t *s, const _mt_adam_args_t *a,
                                 _mt_qtensor_t *m, _mt_qtensor_t *v, size_t begin, size_t end) {
  if (m->bits == 2 || v->bits == 2) {
    _mt_adam_kernel_q_scalar(s, a, m, v, begin, end);
    return;
  }
  const float *mmap = _mt_codec_map(m->bits, 1), *vmap = _mt_codec_map(v->bits, 0);
  const uint8_t *mlut = lut_of(m->bits, 1), *vlut = lut_of(v->bits, 0);
  unsigned mlen = 1u << m->bits, vlen = 1u << v->bits;
  float mb[_MT_CODEC_BLOCK], vb[_MT_CODEC_BLOCK];
  const bool fused4 = m->bits == 4 && v->bits == 4;
  const bool fused8 = m->bits == 8 && v->bits == 8;
  for (size_t b = begin; b < end; b += _MT_CODEC_BLOCK) {
    size_t e = end - b < _MT_CODEC_BLOCK ? end : b + _MT_CODEC_BLOCK;
    if ((fused4 || fused8) && b + _MT_ADAM_PREFETCH + _MT_CODEC_BLOCK <= end)
      prefetch_block(a, m, v, b + _MT_ADAM_PREFETCH);
    if (fused4 && e - b == _MT_CODEC_BLOCK) {
      q4_block_avx2(s, a, m, v, b);
      write_out_avx2(a, b, e);
      continue;
    }
    if (fused8 && e - b == _MT_CODEC_BLOCK) {
      q8_block_avx2(s, a, m, v, b);
      write_out_avx2(a, b, e);
      continue;
    }
    decode_block_avx2(m, mmap, mb, b, e);
    decode_block_avx2(v, vmap, vb, b, e);
    _mt_adam_args_t blk = _mt_adam_args_at(a, b);
    blk.m = mb;
    blk.v = vb;
    blk.vmax = NULL;
    blk.out = NULL;
    _mt_adam_kernel_codec_scalar(s, &blk, 0, e - b); /* a tail: scalar */
    if (m->bits == 4 && e - b == _MT_CODEC_BLOCK)
      encode4_block_avx2(m, mb, b);
    else
      encode_block_avx2(m, mmap, mlen, mlut, mb, b, e);
    if (v->bits == 4 && e - b == _MT_CODEC_BLOCK)
      encode4_block_avx2(v, vb, b);
    else
      encode_block_avx2(v, vmap, vlen, vlut, vb, b, e);
    write_out_avx2(a, b, e);
  }
}
#else
void _mt_codec_encode_avx2(_mt_qtensor_t *q, const float *x, size_t begin, size_t end) {
  _mt_codec_encode(q, x, begin, end);
}
void _mt_adam_kernel_q_avx2(const _mt_adam_scalars_t *s, const _mt_adam_args_t *a,
                            _mt_qtensor_t *m, _mt_qtensor_t *v, size_t begin, size_t end) {
  _mt_adam_kernel_q_scalar(s, a, m, v, begin, end);
}
#endif

_mt_adam_kernel_q_fn _mt_codec_kernel_q(_mt_adam_isa_t isa) {
  if (isa == _MT_ISA_SCALAR)
    return _mt_adam_kernel_q_scalar;
#if defined(__x86_64__)
  if (_mt_adam_kernel(_MT_ISA_AVX2) != NULL)
    return _mt_adam_kernel_q_avx2;
#endif
  return isa == _MT_ISA_AVX2 ? NULL : _mt_adam_kernel_q_scalar;
}

void _mt_adam_kernel_q(const _mt_adam_scalars_t *s, const _mt_adam_args_t *a, _mt_qtensor_t *m,
                       _mt_qtensor_t *v, size_t begin, size_t end) {
  static _mt_adam_kernel_q_fn cached; /* resolved once; every thread stores the same */
  _mt_adam_kernel_q_fn k = __atomic_load_n(&cached, __ATOMIC_RELAXED);
  if (k == NULL) {
    k = _mt_codec_kernel_q(_MT_ISA_AUTO);
    __atomic_store_n(&cached, k, __ATOMIC_RELAXED);
  }
  k(s, a, m, v, begin, end);
}
