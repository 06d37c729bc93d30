/*
 * codec.h - block-wise quantised optimizer state (codec.c).
 */
#ifndef MT_OPTIM_CODEC_H
#define MT_OPTIM_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "adam.h"

#define _MT_CODEC_BLOCK 128        /* elements per block, one scale each */
#define _MT_CODEC_MIN_ELEMS 4096   /* smaller tensors keep FP32 state */

/* A quantised tensor: codes packed `bits` per element (8, 4 or 2), low
 * bits first, and one float scale (the block's absolute maximum) per
 * block. Owned by whoever allocated codes/scales (_mt_qtensor_alloc). */
typedef struct _mt_qtensor {
  uint8_t *codes;
  float *scales;
  size_t n;
  int bits;
  int is_signed; /* 1: first-moment map (has zero); 0: second-moment map (no zero) */
} _mt_qtensor_t;

// codec.c
/* The 2^bits values of a map, ascending, in units of the block's absmax.
 * bits 8, 4 or 2; NULL otherwise. */
const float *_mt_codec_map(int bits, int is_signed);
/* Allocates codes and scales for n elements, zeroed (which decodes to 0).
 * 0 or -ENOMEM / -EINVAL. Free with _mt_qtensor_free. */
int _mt_qtensor_alloc(_mt_qtensor_t *q, size_t n, int bits, int is_signed);
void _mt_qtensor_free(_mt_qtensor_t *q);
size_t _mt_qtensor_code_bytes(const _mt_qtensor_t *q);
size_t _mt_qtensor_blocks(const _mt_qtensor_t *q);
/* Encodes x[begin, end) into q; begin a multiple of _MT_CODEC_BLOCK, end a
 * multiple of it or n. Each block's scale is its absmax; each value gets
 * the nearest map entry (ties to the lower code). */
void _mt_codec_encode(_mt_qtensor_t *q, const float *x, size_t begin, size_t end);
/* The AVX2 encode the codec kernel uses, same contract and same codes
 * (for tests; only on a CPU with AVX2). */
void _mt_codec_encode_avx2(_mt_qtensor_t *q, const float *x, size_t begin, size_t end);
/* Decodes q[begin, end) into x (same alignment rules). */
void _mt_codec_decode(const _mt_qtensor_t *q, float *x, size_t begin, size_t end);
/* The Adam step on quantised m (signed) and v (unsigned), block by block:
 * decode 128 elements of each into L1, update with adam.h's arithmetic,
 * re-encode. amsgrad is not supported (a->vmax must be NULL). */
void _mt_adam_kernel_q(const _mt_adam_scalars_t *s, const _mt_adam_args_t *a, _mt_qtensor_t *m,
                       _mt_qtensor_t *v, size_t begin, size_t end);
typedef void (*_mt_adam_kernel_q_fn)(const _mt_adam_scalars_t *s, const _mt_adam_args_t *a,
                                     _mt_qtensor_t *m, _mt_qtensor_t *v, size_t begin, size_t end);
/* The two implementations, bit-identical (tests/optim/test_codec_simd.c):
 * the scalar one, and the AVX2 one (8- and 4-bit; 2-bit falls back to
 * scalar), compiled with a target attribute and only called when the CPU
 * has AVX2. _mt_adam_kernel_q takes the AVX2 one where it can. */
void _mt_adam_kernel_q_scalar(const _mt_adam_scalars_t *s, const _mt_adam_args_t *a,
                              _mt_qtensor_t *m, _mt_qtensor_t *v, size_t begin, size_t end);
void _mt_adam_kernel_q_avx2(const _mt_adam_scalars_t *s, const _mt_adam_args_t *a,
                            _mt_qtensor_t *m, _mt_qtensor_t *v, size_t begin, size_t end);
/* The codec kernel for an isa: SCALAR the scalar one; AVX2 the AVX2 one or
 * NULL on a CPU without it; AUTO/AVX512/MKL the AVX2 one where the CPU has
 * it, else the scalar one. */
_mt_adam_kernel_q_fn _mt_codec_kernel_q(_mt_adam_isa_t isa);

#endif
